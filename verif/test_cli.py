"""The `mrcnic` command line, run as a user runs it."""

import json
import os
import random
import subprocess
import sys

import pytest
from scapy.compat import raw
from scapy.utils import wrpcap

from mrcnic import regmap
from mrcnic.verif import cli_helpers
from mrcnic.verif.packets import random_mrc


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
            "'stats', 'write', 'mem')") in r.stderr
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
])
def test_write_and_mem_refuse_a_bad_argument_in_one_line_before_any_target(args, fragment,
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
