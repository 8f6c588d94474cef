"""``mrcnic sim serve``, run as a user runs it: two simulated NICs whose registers the CLI and the
Python API (mrcnic.target, the driver's programs) read and write over the management protocol
while the simulation runs, a spine link of its network taken down and back, every bad input
refused with nothing changed, and Ctrl-C stopping it cleanly."""

import json
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from mrcnic import driver, mgmt, regmap, simctl
from mrcnic.regclient import RegisterClient
from mrcnic.target import Device, version_text
from mrcnic.verif.cli_helpers import NICS, Server, mrcnic

#: the register-map version this host knows, as the tools print it
KNOWN = version_text(regmap.MRCNIC_VERSION)


def snapshot(urls) -> list:
    """Every register of every NIC but the commands, and every spine link's state."""
    out = []
    for url in urls:
        with Device(url) as dev:
            out.append((dev.regs.dump(), simctl.SimClient(dev.client).links()))
    return out


def test_served_nics_print_their_urls_and_identify_themselves(served):
    assert served.urls == [f"sim://127.0.0.1:{p}" for p in served.ports]
    for nic, url in enumerate(served.urls):
        r = mrcnic("--target", url, "dev", "show")
        assert r.returncode == 0, r.stderr
        table = {line.split()[0]: line.split()[1] for line in r.stdout.splitlines()}
        assert table["target"] == url and table["id"] == f"{regmap.MRCNIC_ID:#010x}"
        assert table["version"] == KNOWN and table["sim.nic"] == str(nic)
        r = mrcnic("-j", "dev", "show", "--target", url)
        shown = json.loads(r.stdout)
        # the same through the Python API, and through the driver's own program
        with Device(url) as dev:
            info = dev.regs.run(driver.identify())
            assert dev.info == {"id": regmap.MRCNIC_ID, **info}
        assert shown == {"target": url, "id": regmap.MRCNIC_ID, "version": KNOWN,
                         **{k: v for k, v in info.items() if k != "version"},
                         "sim": {"nic": nic, "nics": NICS, "planes": 2, "spines": 4}}
        assert (shown["data_width"], shown["planes"], shown["qps"], shown["evs"]) == (64, 2, 4, 16)
        pretty = mrcnic("-p", "dev", "show", "--target", url).stdout
        assert json.loads(pretty) == shown and len(pretty.splitlines()) > len(shown)


def test_a_register_written_reads_back(served):
    a, b = served.urls
    for name, typed, value in (("global.scratch", "0xC0FFEE11", 0xC0FFEE11),
                               ("qp.mr_va", "0x123456789a", 0x12_3456_789A),
                               ("qp.dst_ip", "fd00::1:2", 0xFD00 << 112 | 0x1_0002),
                               ("qp.dst_mac", "02:00:00:aa:bb:cc", 0x02_0000_AABB_CC)):
        r = mrcnic("--target", a, "regs", "set", name, typed)
        assert (r.returncode, r.stdout, r.stderr) == (0, "", ""), r
        r = mrcnic("-j", "--target", a, "regs", "show", name)
        assert json.loads(r.stdout) == [{"offset": regmap.by_name(name).offset, "name": name,
                                         "width": regmap.by_name(name).width,
                                         "access": "RW", "value": value}]
    with Device(a) as dev, Device(b) as other:
        assert dev.read("global.scratch") == 0xC0FFEE11
        assert other.read("global.scratch") == 0                # another NIC
        dev.write("global.scratch", 0x600D)
        assert RegisterClient(dev.client).read("global.scratch") == 0x600D   # word by word
    r = mrcnic("--target", a, "regs", "show", "global.scratch", "global.id")
    rows = [line.split() for line in r.stdout.splitlines()]
    assert rows[0] == ["offset", "register", "width", "access", "decimal", "value"]
    assert rows[1:] == [["0x010", "global.scratch", "32", "RW", str(0x600D), "0x600d"],
                        ["0x000", "global.id", "32", "CONST", str(regmap.MRCNIC_ID),
                         f"{regmap.MRCNIC_ID:#x}"]]


def test_counters_show_the_start_up_write_and_time_runs_on(served):
    """Before the ports open, NIC 0 writes one full packet to NIC 1 (the system testbench's
    base-RTT measurement): its counters show it, and simulated time runs while nobody asks."""
    a, b = served.urls
    r = mrcnic("-j", "--target", a, "regs", "show", "tx", "rel.completions")
    sent = {row["name"]: row["value"] for row in json.loads(r.stdout)}
    assert sent["tx.requests"] == 1 and sent["rel.completions"] == 1
    assert sent["tx.frames_p0"] + sent["tx.frames_p1"] >= 1
    assert all(sent[f"tx.err_{why}"] == 0 for why in regmap.TX_ERROR_REASONS)
    with Device(b) as dev:
        rx = dev.regs.run(driver.rx_counters())
        assert (rx["outcome_placed"], rx["completions"], rx["drop_icrc"]) == (1, 1, 0)
        sim = simctl.SimClient(dev.client)
        before = sim.time_ns()
        time.sleep(0.3)
        assert sim.time_ns() > before + 1000


def test_a_spine_link_goes_down_and_comes_back(served):
    a, b = served.urls
    r = mrcnic("-j", "--target", a, "sim", "link", "down", "0", "1", "1")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [{"plane": 0, "spine": 1, "leaf": 1, "up": False}]
    with Device(b) as dev:       # the NICs share the network: the other port sees it too
        links = simctl.SimClient(dev.client).links()
    assert len(links) == 2 * 4 * NICS
    assert [x for x in links if not x["up"]] == [{"plane": 0, "spine": 1, "leaf": 1, "up": False}]
    r = mrcnic("--target", b, "sim", "link", "up", "0", "1", "1")
    assert r.returncode == 0 and r.stdout.splitlines() == ["plane spine leaf state",
                                                           "    0     1    1 up"], r
    r = mrcnic("--target", a, "sim", "link", "show")
    assert r.returncode == 0 and r.stdout.count(" up\n") == len(links) and " down" not in r.stdout


def test_bad_input_is_refused_in_one_line_and_changes_nothing(served):
    a, _ = served.urls
    port = a.rpartition(":")[2]
    cases = [
        # (the command, what its one line must say, exit status)
        (["--target", "http://127.0.0.1:1", "dev", "show"], "unknown scheme 'http'", 2),
        (["--target", "sim://127.0.0.1", "regs", "show"], "sim:// needs a port", 2),
        (["--target", "sim://127.0.0.1:70000", "sim", "link", "show"], "bad port '70000'", 2),
        (["--target", "udp://no_such_host:1", "regs", "set", "global.scratch", "1"],
         "bad host 'no_such_host'", 2),
        (["--target", a, "regs", "set", "global.nope", "1"], "no register named 'global.nope'", 2),
        (["--target", a, "regs", "show", "global.scratch", "rx.nope"], "no register named 'rx.nope'",
         2),
        (["--target", a, "regs", "set", "qp.state", "5"], "qp.state accepts 0 .. 4, not 5", 2),
        (["--target", a, "regs", "set", "global.scratch", "0x100000000"],
         "global.scratch is 32 bits wide", 2),
        (["--target", a, "regs", "set", "global.scratch", "-1"], "is not a number", 2),
        (["--target", a, "regs", "set", "rx.frames", "0"], "rx.frames is RO: it cannot be written", 2),
        (["--target", a, "regs", "set", "global.id", "0"], "global.id is CONST", 2),
        (["--target", a, "sim", "link", "down", "2", "0", "0"], "plane 2 does not exist", 2),
        (["--target", a, "sim", "link", "down", "0", "4", "0"], "spine 4 does not exist", 2),
        (["--target", a, "sim", "link", "up", "0", "0", "2"], "leaf 2 does not exist", 2),
        (["--target", a, "sim", "link", "down", "0", "1"], "takes PLANE SPINE LEAF", 2),
        (["--target", f"udp://127.0.0.1:{port}", "sim", "link", "down", "0", "1", "1"],
         "sim link needs a sim:// target", 2),
        # a limit the NIC's build sets (QPs), which the register map does not know: the NIC
        # itself refuses the command, and counts it in global.bus_errors
        (["--target", a, "regs", "set", "qp.write", "4"], "the NIC refused qp.write = 0x4: BAD_VALUE",
         1),
    ]
    before = snapshot(served.urls)
    for args, fragment, status in cases:
        r = mrcnic(*args)
        assert r.returncode == status and r.stdout == "", (args, r)
        assert len(r.stderr.splitlines()) == 1 and fragment in r.stderr, (args, r.stderr)
    after = snapshot(served.urls)
    errors = regmap.BUS_ERRORS
    assert after[0][0][errors] == before[0][0][errors] + 1       # the one the NIC refused
    after[0][0][errors] = before[0][0][errors]
    assert after == before


def test_the_served_window_refuses_as_the_protocol_says(served):
    """Other clients than this CLI get the protocol's statuses, and nothing changes."""
    before = snapshot(served.urls)
    with Device(served.urls[0]) as dev:
        c = dev.client
        planes = c.read(regmap.by_name("global.planes").offset)
        assert planes < regmap.MAX_PLANES, "no plane is missing: nothing to refuse below"
        for call, status in (
                (lambda: c.read(0xFF0), mgmt.Status.BAD_ADDRESS),           # nothing there
                (lambda: c.read(0xFFFF_0100), mgmt.Status.BAD_ADDRESS),     # nor in the sim's
                (lambda: c.read(regmap.by_name("tx.src_mac").offset, 64), mgmt.Status.BAD_LENGTH),
                (lambda: c.write(regmap.by_name("rx.frames").offset, 1), mgmt.Status.DENIED),
                (lambda: c.write(simctl.by_name("nics").offset, 3), mgmt.Status.DENIED),
                # a plane the NIC does not have
                (lambda: c.write(regmap.by_name(f"net.sid_p{planes}").offset, 1),
                 mgmt.Status.DENIED),
                (lambda: c.write(regmap.by_name("qp.state").offset, 5, 3), mgmt.Status.BAD_VALUE),
                (lambda: c.write(regmap.by_name("qp.state").offset, 8), mgmt.Status.BAD_VALUE),
                (lambda: c.write(simctl.by_name("link_down").offset, simctl.link_word(0, 9, 0)),
                 mgmt.Status.BAD_VALUE)):
            with pytest.raises(mgmt.StatusError) as info:
                call()
            assert info.value.status is status, (status, info.value)
        # a burst reads consecutive words: global.id, .version, .data_width, .planes
        ident = c.read_burst(0, 4)
        assert ident[:2] == [regmap.MRCNIC_ID, regmap.MRCNIC_VERSION] and ident[2] == 64
    assert snapshot(served.urls) == before


def test_an_unreachable_target_is_refused_within_about_two_seconds():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        url = f"sim://127.0.0.1:{s.getsockname()[1]}"     # closed below: nobody listens
    start = time.monotonic()
    runs = [subprocess.Popen([sys.executable, "-m", "mrcnic.cli", "--target", url, *verb],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for verb in (["dev", "show"], ["regs", "show", "rx"],
                         ["regs", "set", "global.scratch", "1"], ["sim", "link", "show"])]
    for run in runs:
        out, err = run.communicate(timeout=30)
        assert run.returncode == 2 and out == "" and len(err.splitlines()) == 1, err
        assert f"target {url} unreachable: no reply from 127.0.0.1" in err
        # the client's own count of the time it gave the target (the interpreter's start-up
        # aside, which a busy machine stretches)
        waited = float(re.search(r"after 8 attempts in ([0-9.]+) s", err).group(1))
        assert 1.9 <= waited <= 2.5, err
    assert time.monotonic() - start < 15


def test_ctrl_c_stops_the_server_cleanly():
    base = _free_pair()
    server = Server("--port", str(base))
    assert server.ports == [base, base + 1]
    r = mrcnic("--target", server.urls[1], "regs", "show", "global.id")
    assert r.returncode == 0, r.stderr
    # a port in use: refused at once, before anything is built
    r = mrcnic("sim", "serve", "--port", str(base))
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1
    assert f"UDP port {base} on 127.0.0.1 is not free" in r.stderr
    start = time.monotonic()
    code, err = server.stop(signal.SIGINT)
    assert code == 0 and err.strip().endswith("mrcnic sim serve: stopped"), (code, err)
    assert time.monotonic() - start < 10
    for port in server.ports:           # released: free to bind, and nobody answers there
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind(("127.0.0.1", port))
    with mgmt.MgmtClient("127.0.0.1", base, timeout=0.1, retries=1) as client:
        with pytest.raises(mgmt.Unreachable, match="nothing listens there"):
            client.read(0)


def _free_pair() -> int:
    """A base port that is free on the loopback address, and the one after it."""
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
            if base >= 65535:
                continue
            try:
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as t:
                    t.bind(("127.0.0.1", base + 1))
            except OSError:
                continue
        return base
    raise AssertionError("no two consecutive free UDP ports")
