"""The `mrcnic` command line, run as a user runs it."""

import json
import random

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
            "'stats')") in r.stderr
    r = mrcnic("-j", "decode", str(notpcap))
    assert r.returncode == 2 and r.stderr.strip().startswith("mrcnic: decode has no JSON output")
