"""The `mrcnic` command line, run as a user runs it."""

import json
import os
import random
import re
import subprocess
import sys

import pytest
from scapy.compat import raw
from scapy.utils import wrpcap

from mrcnic import cli, driver, regmap
from mrcnic.enums import EvState
from mrcnic.mgmt import Status, StatusError
from mrcnic.regclient import RegisterClient
from mrcnic.verif import cli_helpers
from mrcnic.verif.packets import random_mrc
from mrcnic.verif.test_ctl import FakeNic


def mrcnic(*args):
    return cli_helpers.mrcnic(*args, timeout=120)


def test_regs_table_and_json():
    r = mrcnic("regs")
    assert r.returncode == 0
    for reg in regmap.REGISTERS:
        assert reg.path in r.stdout
    j = mrcnic("regs", "-j")
    rows = json.loads(j.stdout)
    assert [(x["name"], x["offset"]) for x in rows] == [(r.path, r.offset) for r in regmap.REGISTERS]
    # -j and -p are global too (iproute2's way): -j one line, -p indented
    before = mrcnic("-j", "regs")
    assert before.stdout == j.stdout and len(before.stdout.splitlines()) == 1
    pretty = mrcnic("-p", "regs")
    assert json.loads(pretty.stdout) == rows and len(pretty.stdout.splitlines()) > len(rows)


def test_decode_dissects_every_packet(tmp_path):
    rng = random.Random(2)
    pkts = [random_mrc(rng, max_payload=64) for _ in range(20)]
    bad = bytearray(raw(pkts[0]))
    bad[-1] ^= 1
    path = tmp_path / "t.pcap"
    wrpcap(str(path), [raw(p) for p in pkts] + [bytes(bad)])
    r = mrcnic("decode", str(path))
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stdout.splitlines() if x.startswith("#")]
    assert len(lines) == 21
    assert all("icrc=ok" in x for x in lines[:20]) and "icrc=BAD" in lines[20]
    assert "MRC BTH: opcode=" in r.stdout
    assert "21 packets" in r.stderr


def test_decode_errors_are_one_line(tmp_path):
    r = mrcnic("decode", str(tmp_path / "missing.pcap"))
    assert r.returncode == 2 and r.stderr.strip().endswith("no such file")
    notpcap = tmp_path / "x.pcap"
    notpcap.write_text("hello")
    r = mrcnic("decode", str(notpcap))
    assert r.returncode == 2 and "not a pcap file" in r.stderr
    r = mrcnic("decode", "-c", "0", str(notpcap))
    assert r.returncode == 2 and "not positive" in r.stderr
    r = mrcnic("frobnicate")
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1
    assert ("invalid choice: 'frobnicate' (choose from 'regs', 'decode', 'ev', 'dev', 'sim', 'qp', 'port', "
            "'probe', 'stats', 'write', 'mem', 'store', 'ev-fmt', 'ev-profile', 'cc-profile', "
            "'mr', 'path')") in r.stderr
    r = mrcnic("-j", "decode", str(notpcap))
    assert r.returncode == 2 and r.stderr.strip().startswith("mrcnic: decode has no JSON output")


WRITE = ("write", "1", "--laddr", "0x1000", "--va", "0x2000", "--rkey", "7", "--length", "64")


@pytest.mark.parametrize("args,fragment", [
    (("write",), "the following arguments are required: QP, --laddr, --va, --rkey, --length"),
    (("write", "x1", *WRITE[2:]), "argument QP: QP 'x1' is not a number"),
    ((*WRITE[:-1], "0"), "argument --length: length 0 is not 1 .. 0x80000000"),
    ((*WRITE[:-1], "0x80000001"), "argument --length: length 0x80000001 is not 1 .. 0x80000000"),
    ((*WRITE, "--imm", "0x100000000"), "argument --imm: imm 0x100000000 is not 0 .. 0xffffffff"),
    ((*WRITE, "--wr-id", "65536"), "argument --wr-id: wr-id 65536 is not 0 .. 0xffff"),
    ((*WRITE, "--timeout", "0"), "argument --timeout: '0' is not a number of seconds above 0"),
    (("write", "1", "--laddr", "0x10000000000000000", *WRITE[4:]),
     "argument --laddr: laddr 0x10000000000000000 is not 0 .. 0xffffffffffffffff"),
    (("mem",), "the following arguments are required: VERB"),
    (("mem", "read", "0x10"), "the following arguments are required: LENGTH"),
    (("mem", "read", "0x10", "65537"), "argument LENGTH: length 65537 is not 0 .. 0x10000"),
    (("mem", "read", "0xffffffffffffffff", "2"),
     "2 bytes at 0xffffffffffffffff run past the end of the 64-bit address space"),
    (("mem", "write", "0x10", "abc"), "argument HEXBYTES: 'abc' is not hex bytes"),
    (("mem", "write", "0x10", "0xzz"), "argument HEXBYTES: '0xzz' is not hex bytes"),
    (("mem", "write", "0x10"), "no bytes: give HEXBYTES or --file F"),
    (("mem", "write", "0x10", "00", "--file", "b.bin"), "give one of them, not both"),
    (("mem", "write", "0x10", "--file", "missing.bin"), "missing.bin: no such file or directory"),
    (("mem", "write", "0xffffffffffffffff", "0011"), "run past the end"),
    (("probe", "1"), "the following arguments are required: ENTRY"),
    (("probe", "one", "0"), "argument QP: QP 'one' is not a number"),
    (("probe", "0", "0x10000"), "argument ENTRY: entry 0x10000 is not 0 .. 0xffff"),
    (("probe", "0x10000", "0"), "argument QP: QP 0x10000 is not 0 .. 0xffff"),
    (("probe", "0", "1", "--timeout", "0"), "argument --timeout: '0' is not a number of seconds"),
    (("probe", "0", "1", "--clock-mhz", "-250"), "argument --clock-mhz: '-250' is not a clock"),
    (("probe", "0", "1", "--clock-mhz", "fast"), "argument --clock-mhz: 'fast' is not a clock"),
])
def test_write_mem_and_probe_refuse_a_bad_argument_in_one_line_before_any_target(args, fragment,
                                                                          tmp_path):
    # the target is one that nothing answers: a bad argument is refused before it is reached
    env = {**os.environ, "MRCNIC_TARGET": "sim://127.0.0.1:9"}
    r = subprocess.run([sys.executable, "-m", "mrcnic.cli", *args], capture_output=True,
                       text=True, timeout=60, env=env, cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == "", r
    assert len(r.stderr.splitlines()) == 1 and fragment in r.stderr, r.stderr
    assert r.stderr.startswith(f"mrcnic {args[0]}")


def test_write_and_mem_need_a_target():
    env = {k: v for k, v in os.environ.items() if k != "MRCNIC_TARGET"}
    for args in (WRITE, ("mem", "read", "0", "4"), ("mem", "write", "0", "00")):
        r = cli_helpers.mrcnic(*args, env=env)
        assert r.returncode == 2 and r.stderr.startswith(f"mrcnic {' '.join(args[:2])}"
                                                         if args[0] == "mem" else "mrcnic write")
        assert "no target: give --target URL" in r.stderr and len(r.stderr.splitlines()) == 1


@pytest.mark.parametrize("args,fragment", [
    (("ev", "events", "now"), "unrecognized arguments: now"),
    (("ev", "events", "-f", "0.5"), "unrecognized arguments: 0.5"),
    (("ev", "events", "--every", "1"), "unrecognized arguments: --every 1"),
])
def test_ev_events_refuses_a_bad_argument_in_one_line_before_any_target(args, fragment):
    env = {**os.environ, "MRCNIC_TARGET": "sim://127.0.0.1:9"}
    r = subprocess.run([sys.executable, "-m", "mrcnic.cli", *args], capture_output=True,
                       text=True, timeout=60, env=env)
    assert r.returncode == 2 and r.stdout == "", r
    # argparse's top parser reports what no verb takes, as for every verb
    assert r.stderr == f"mrcnic: {fragment} (see mrcnic -h)\n", r.stderr
    env = {k: v for k, v in os.environ.items() if k != "MRCNIC_TARGET"}
    r = cli_helpers.mrcnic("ev", "events", "-f", env=env)
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1
    assert r.stderr.startswith("mrcnic ev events: no target: give --target URL")


class FakeDevice:
    """What ``ev events`` uses of a :class:`mrcnic.target.Device`, over a FakeNic."""

    def __init__(self, nic):
        self.regs = RegisterClient(nic)
        self.info = self.regs.run(driver.identify())

    def read(self, path):
        return self.regs.read(path)

    def write(self, path, value):
        self.regs.write(path, value)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


GOOD, BAD, DENIED = EvState.GOOD, EvState.ASSUMED_BAD, EvState.DENIED
#: a row: the time it was read, then qp, entry, state, by, replaced, others
ROW = re.compile(r"\d\d:\d\d:\d\d\.\d{3}  +(\d+)  +(\d+)  (\S+) +(\S+) +(\S+) +(\S+)$")


def events_of(monkeypatch, nic, *args):
    monkeypatch.setattr(cli, "_device", lambda args, where=None: FakeDevice(nic))
    return cli.main(["ev", "events", *args])


def test_ev_events_prints_what_is_queued_and_puts_the_mask_back(monkeypatch, capsys):
    nic = FakeNic(evq_depth=4)
    mask = regmap.by_name("evq.mask").offset
    nic.words[mask] = 0b1101
    nic.change(2, 5, BAD, others={1, 3})
    nic.change(0, 14, GOOD, management=True)
    nic.change(3, 0, DENIED, management=True)
    nic.change(1, 7, BAD, replaced=True)
    nic.words[mask] = 0b0001                              # as a controller left it
    assert events_of(monkeypatch, nic) == 0
    out, err = capsys.readouterr()
    header, *rows = out.splitlines()
    assert header.split() == ["time", "qp", "entry", "state", "by", "replaced", "others"]
    assert [ROW.match(r).groups() for r in rows] == [
        ("2", "5", "ASSUMED_BAD", "NIC", "no", "1,3"), ("0", "14", "GOOD", "management", "no", "-"),
        ("3", "0", "DENIED", "management", "no", "-"), ("1", "7", "ASSUMED_BAD", "NIC", "yes", "-")]
    # the columns line up: every row as long as the widest, the numbers right-aligned
    assert len({r.index("ASSUMED_BAD") for r in rows if "ASSUMED_BAD" in r}) == 1
    assert err == "" and nic.events == []
    written = [v for o, v in nic.writes if o == mask]
    assert written == [0b1101, 0b0001] and nic.words[mask] == 0b0001
    nic.change(2, 5, GOOD)                                # the controller's GOOD still queues
    assert events_of(monkeypatch, nic, "-j") == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert {k: v for k, v in row.items() if k != "time"} == {
        "qp": 2, "entry": 5, "state": "GOOD", "by": "NIC", "replaced": False, "others": []}


def test_ev_events_follows_until_ctrl_c_and_says_what_was_lost(monkeypatch, capsys):
    nic = FakeNic(evq_depth=2)
    reads = []

    def sleep(seconds):                                   # the NIC changes between two reads
        reads.append(seconds)
        if len(reads) == 1:
            for index in range(3):                        # the third finds the queue full
                nic.change(1, index, BAD)
        elif len(reads) == 2:
            nic.change(1, 0, GOOD, management=True)
        else:
            raise KeyboardInterrupt

    monkeypatch.setattr(cli.time, "sleep", sleep)
    assert events_of(monkeypatch, nic, "-f", "-j") == 0
    out, err = capsys.readouterr()
    rows = [json.loads(x) for x in out.splitlines()]
    assert [(r["entry"], r["state"], r["by"]) for r in rows] == [
        (0, "ASSUMED_BAD", "NIC"), (1, "ASSUMED_BAD", "NIC"), (0, "GOOD", "management")]
    assert err == "mrcnic ev events: 1 event(s) lost: the NIC's queue (evq.depth 2) was full " \
                  "(evq.overflows)\n"
    assert reads == [0.2, 0.2, 0.2] and nic.word("evq.mask") == 0


def test_ev_events_on_a_nic_without_the_queue_is_one_line(monkeypatch, capsys):
    class Older(FakeNic):
        def read(self, offset):
            if regmap.by_offset(offset).path == "evq.depth":
                raise StatusError(Status.BAD_ADDRESS, "nothing at the address")
            return super().read(offset)

    assert events_of(monkeypatch, Older()) == 1
    out, err = capsys.readouterr()
    assert out == "" and err == ("mrcnic ev events: the NIC has no EV event queue (nothing at "
                                 "evq.depth): it was built without one\n")


def run_cli(monkeypatch, capsys, nic, *args):
    """(exit status, stdout, stderr) of ``mrcnic ARGS`` on a FakeNic."""
    monkeypatch.setattr(cli, "_device", lambda args, where=None: FakeDevice(nic))
    status = cli.main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def probe_nic():
    """A FakeNic whose ports are both up and whose probes are answered after 2 reads."""
    nic = FakeNic()
    nic.words[regmap.by_name("net.port_up").offset] = 0b11
    nic.answer_rtt = 1001
    return nic


def test_probe_prints_the_round_trip_in_cycles_and_ns(monkeypatch, capsys):
    nic = probe_nic()
    status, out, err = run_cli(monkeypatch, capsys, nic, "probe", "2", "5")
    assert (status, err) == (0, "")
    assert out.splitlines() == ["qp  entry  rtt_cycles  rtt_ns",
                                " 2      5        1001    4004"]     # 250 MHz: 4 ns a cycle
    assert nic.probes == [(2, 5)]
    nic.answer_rtt = 1000
    status, out, _ = run_cli(monkeypatch, capsys, nic, "-j", "probe", "0", "0x3",
                             "--clock-mhz", "300")
    assert status == 0 and json.loads(out) == {"qp": 0, "entry": 3, "rtt_cycles": 1000,
                                               "rtt_ns": 3333}


def test_probe_checks_the_qp_and_the_entry_against_the_nic_before_writing(monkeypatch, capsys):
    nic = probe_nic()
    for args, fragment in ((("probe", "4", "0"), "QP 4 does not exist: this NIC has 4 QPs"),
                           (("probe", "0", "16"), "entry 16 does not exist: a profile of this "
                                                  "NIC has entries 0 .. 15 (global.evs)")):
        status, out, err = run_cli(monkeypatch, capsys, nic, *args)
        assert (status, out) == (2, "") and len(err.splitlines()) == 1
        assert err.startswith("mrcnic probe: ") and fragment in err, err
    assert nic.writes == [] and nic.probes == []


def test_probe_refused_or_unanswered_is_one_line_and_exit_1(monkeypatch, capsys):
    nic = probe_nic()
    nic.words[regmap.by_name("net.port_up").offset] = 0b01           # port 2 down
    status, out, err = run_cli(monkeypatch, capsys, nic, "probe", "1", "3")
    assert (status, out) == (1, "") and err == (
        "mrcnic probe: QP 1 entry 3: the NIC sent no probe: the port of its plane is down "
        "(ep.refused)\n")
    assert nic.word("ep.refused") == 1 and nic.probes == []
    nic.answer_after = None                                          # a dead path
    status, out, err = run_cli(monkeypatch, capsys, nic, "probe", "1", "2", "--timeout", "0.05")
    assert (status, out) == (1, "") and err == (
        "mrcnic probe: QP 1 entry 2: no answer within 0.05 s (the path is dead, or the QP's "
        "peer does not answer)\n")
    assert nic.probes == [(1, 2)]


def test_probe_on_a_nic_without_endpoint_requests_is_one_line(monkeypatch, capsys):
    class Older(FakeNic):
        def read(self, offset):
            if regmap.by_offset(offset).path.startswith("ep."):
                raise StatusError(Status.BAD_ADDRESS, "nothing at the address")
            return super().read(offset)

    nic = Older()
    status, out, err = run_cli(monkeypatch, capsys, nic, "probe", "0", "0")
    assert (status, out) == (1, "") and err == (
        "mrcnic probe: the NIC has no endpoint requests (nothing at ep.refused): it was built "
        "without them\n")
    assert nic.writes == []


def test_port_announce_tells_every_peer_once(monkeypatch, capsys):
    nic = probe_nic()
    status, out, err = run_cli(monkeypatch, capsys, nic, "port", "announce")
    assert (status, out) == (1, "") and err == (
        "mrcnic port announce: the NIC is disabled (global.control bit 0 is clear) and sends "
        "no port status: nothing sent\n")
    assert nic.status_rounds == 0 and nic.writes == []
    nic.words[regmap.by_name("global.control").offset] = 1
    nic.words[regmap.by_name("net.port_up").offset] = 0b10
    assert run_cli(monkeypatch, capsys, nic, "port", "announce") == (0, "", "")
    status, out, _ = run_cli(monkeypatch, capsys, nic, "-j", "port", "announce")
    assert status == 0 and json.loads(out) == {"ports_up": [2]}
    assert nic.status_rounds == 2
