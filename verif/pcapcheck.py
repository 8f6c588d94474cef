"""Do the pcaps a run leaves open clean in tshark and in ``mrcnic decode``?

``python -m mrcnic.verif.pcapcheck DIR_OR_FILE...`` checks every ``*.pcap`` under the paths it is
given (a demo's ``pcap/``, a system test's ``tmp_path/pcap``, a sweep's run directories) and
prints what is wrong; it exits 1 if anything is. The tests (verif/test_pcaps.py,
verif/test_demo.py) call :func:`check_tshark` and :func:`check_decode` on the short demo's pcaps.

tshark (4.0) reads MRC frames as Ethernet / IPv6 [/ SRH] [/ IPv6] / UDP / InfiniBand. What it says
about them, and what this check accepts, exactly:

* **"Illegal checksum value (0)"** (Error, Checksum group) on the inner UDP header: the NIC sends
  a zero UDP checksum over IPv6, as RoCEv2 recommends (docs/wire-format.md, "UDP checksum").
  Accepted only on a frame whose UDP checksum field is 0.
* **"Possible traceroute: hop #h, attempt #a"** (Chat, Sequence group): tshark says this of any
  UDP source port in 33435..33464. The source port is the EV's high half, free entropy. Accepted
  only on those source ports.
* **BTH opcode "Unknown"**: MRC's opcodes sit in InfiniBand's manufacturer-specific range
  (0xC0-0xFF), so tshark shows the BTH and stops (MRC's rtx/tsh bits show as a non-zero
  "Reserved (7 bits)", which is not an expert item). Accepted only for MRC's own opcodes; the
  headers after the BTH are checked by ``mrcnic decode``.
* **A source port below 4791**: tshark tries the lower of the two UDP ports' dissectors first, so
  a frame whose EV puts, say, 319 (PTP), 1629 (CNIP) or 2313 (IAPP) in the source port is
  dissected as that protocol, and IAPP even calls it malformed. Such a frame is accepted only if
  tshark, told that its source port is RoCEv2 too (``-d udp.port==PORT,infiniband``), then
  finds nothing wrong with it; every frame must then be InfiniBand on destination port 4791.

Anything else fails the check: any other expert item, a malformed or short frame, an Ethernet
trailer (bytes past the IPv6 payload length), a file tshark cannot read to its end.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from mrcnic import wire
from mrcnic.verif.pcap import SNAPLEN

__all__ = ["TSHARK", "Report", "pcap_files", "check_tshark", "check_decode", "DemoRun",
           "short_demo", "main"]

TSHARK = shutil.which("tshark")

# tshark's expert severities and groups (epan/proto.h)
PI_CHAT, PI_ERROR = 0x00200000, 0x00800000
PI_CHECKSUM, PI_SEQUENCE = 0x01000000, 0x02000000
ZERO_CHECKSUM = ("Illegal checksum value (0)", PI_ERROR, PI_CHECKSUM)
TRACEROUTE = re.compile(r"Possible traceroute: hop #\d+, attempt #\d+")
TRACEROUTE_PORTS = range(33435, 33465)          # (32768 + 666, 32768 + 666 + 30]
STACK = re.compile(r"eth:ethertype:ipv6(:ipv6\.routing)?(:ipv6)?:udp:infiniband")
MRC_OPCODES = frozenset(int(op) for op in wire.Opcode)

_FIELDS = ("frame.protocols", "udp.srcport", "udp.dstport", "udp.checksum",
           "infiniband.bth.opcode", "_ws.expert.message", "_ws.expert.severity",
           "_ws.expert.group", "_ws.malformed", "_ws.short", "eth.trailer", "eth.padding")
_AGG = "\x1f"


@dataclass
class Report:
    """What a check found: frames per file, the expert items it accepted (message: count),
    frames tshark first gave to another dissector by their low source port, and problems."""
    frames: dict[str, int] = field(default_factory=dict)
    accepted: Counter = field(default_factory=Counter)
    low_port: int = 0
    problems: list[str] = field(default_factory=list)

    def __str__(self):
        head = (f"{sum(self.frames.values())} frames in {len(self.frames)} files; accepted: "
                + (", ".join(f"{m} x{n}" for m, n in sorted(self.accepted.items())) or "nothing")
                + (f"; {self.low_port} frames first dissected by their source port"
                   if self.low_port else ""))
        if not self.problems:
            return head
        more = len(self.problems) - 30
        return "\n".join([head, f"{len(self.problems)} problems:", *self.problems[:30]]
                         + ([f"... and {more} more"] if more > 0 else []))


def pcap_files(*paths) -> list[Path]:
    """Every ``*.pcap`` under the paths given (files as they are), sorted."""
    out = []
    for p in map(Path, paths):
        out += sorted(p.rglob("*.pcap")) if p.is_dir() else [p]
    return out


def _frames(path: Path) -> list[bytes]:
    from scapy.utils import RawPcapReader
    with RawPcapReader(str(path)) as r:
        return [bytes(data) for data, _meta in r]


def _sport(frame: bytes) -> int | None:
    from mrcnic import icrc
    try:
        at = icrc.roce_offset(frame) + wire.IPV6.length
        return wire.UDP.unpack(frame[at:])["sport"]
    except ValueError:
        return None


def _run(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    noise = "Running as user"               # tshark's warning when run as root
    err = "\n".join(x for x in r.stderr.splitlines() if x.strip() and noise not in x)
    return r.returncode, r.stdout, err


def _tshark_fields(pcap: Path, env, decode_as=()) -> list[dict]:
    cmd = [TSHARK, "-n", "-r", str(pcap), "-o", "udp.check_checksum:TRUE", "-T", "fields",
           "-E", "separator=/t", "-E", "occurrence=a", "-E", f"aggregator={_AGG}",
           "-E", "quote=n"]
    for port in sorted(decode_as):
        cmd += ["-d", f"udp.port=={port},infiniband"]
    for f in _FIELDS:
        cmd += ["-e", f]
    rc, out, err = _run(cmd, env)
    if rc or err:
        raise RuntimeError(f"tshark -r {pcap} exited {rc}: {err}")
    # (not splitlines(): it would split at some control characters a field might hold)
    return [dict(zip(_FIELDS, line.split("\t"), strict=True)) for line in out.split("\n") if line]


def _judge(rec: dict) -> tuple[list[str], list[str]]:
    """(problems, accepted expert messages) of one frame as tshark dissected it."""
    problems, accepted = [], []
    rec = {**rec, **{f: rec[f].split(_AGG)[0] for f in ("udp.srcport", "udp.dstport",
                                                      "udp.checksum")}}  # the first UDP header
    sport = int(rec["udp.srcport"]) if rec["udp.srcport"] else None
    if not STACK.fullmatch(rec["frame.protocols"]):
        problems.append(f"dissected as {rec['frame.protocols']}")
    if rec["udp.dstport"] != str(wire.ROCE_UDP_PORT):
        problems.append(f"UDP destination port {rec['udp.dstport'] or 'none'}")
    ops = rec["infiniband.bth.opcode"]
    if ops and int(ops.split(_AGG)[0]) not in MRC_OPCODES:
        problems.append(f"BTH opcode {ops}: not one of MRC's")
    for f in ("_ws.malformed", "_ws.short", "eth.trailer", "eth.padding"):
        if rec[f]:
            problems.append(f"{f}: {rec[f]}")
    items = zip(*(rec[f].split(_AGG) for f in ("_ws.expert.message", "_ws.expert.severity",
                                               "_ws.expert.group")), strict=True)
    for msg, sev, grp in items if rec["_ws.expert.message"] else ():
        sev, grp = int(sev), int(grp)
        if (msg, sev, grp) == ZERO_CHECKSUM and int(rec["udp.checksum"] or "1", 0) == 0:
            accepted.append(msg)
        elif (TRACEROUTE.fullmatch(msg) and (sev, grp) == (PI_CHAT, PI_SEQUENCE)
              and sport in TRACEROUTE_PORTS):
            accepted.append("Possible traceroute (source port 33435..33464)")
        else:
            problems.append(f"expert item: {msg} (severity {sev:#x}, group {grp:#x})")
    return problems, accepted


def check_tshark(files, workdir: Path) -> Report:
    """Opens ``files`` with the Wireshark tools: capinfos reads each one to its end (type,
    link type, snap length, frame count); mergecap joins them, in order, and tshark dissects
    them all in one run (its start-up is most of its time); every frame is judged as the module
    says. tshark runs with a fresh profile, so no one's preferences change what it says."""
    if TSHARK is None:
        raise RuntimeError("tshark is not installed")
    files = [Path(f) for f in files]
    rep = Report()
    workdir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, WIRESHARK_CONFIG_DIR=str(workdir / "wireshark-profile"))
    (workdir / "wireshark-profile").mkdir(exist_ok=True)
    capinfos, mergecap = (shutil.which(t) or str(Path(TSHARK).with_name(t))
                          for t in ("capinfos", "mergecap"))
    rc, out, err = _run([capinfos, "-T", "-r", "-M", "-t", "-E", "-l", "-c", *map(str, files)])
    if rc or err:
        rep.problems.append(f"capinfos exited {rc}: {err}")
        return rep
    for line in out.splitlines():
        cols = line.split("\t")     # name, type, link type, snap length (min, max), count
        name, ftype, encap, snaplen, count = *cols[:4], cols[-1]
        if (ftype, encap, snaplen) != ("nsecpcap", "ether", str(SNAPLEN)):
            rep.problems.append(f"{name}: {ftype}, {encap}, snap length {snaplen} (want nsecpcap "
                                f"pcap, Ethernet, snap length {SNAPLEN})")
        rep.frames[name] = int(count)
    own = {str(f): _frames(f) for f in files}
    for name, frames in own.items():
        if rep.frames.get(name) != len(frames):
            rep.problems.append(f"{name}: tshark's tools read {rep.frames.get(name)} frames, "
                                f"scapy {len(frames)}")
    if rep.problems:
        return rep
    merged = workdir / "merged.pcap"
    rc, _, err = _run([mergecap, "-a", "-F", "nsecpcap", "-w", str(merged), *map(str, files)])
    if rc or err:
        rep.problems.append(f"mergecap exited {rc}: {err}")
        return rep
    where = [(name, i) for name, frames in own.items() for i in range(len(frames))]
    sports = [_sport(fr) for frames in own.values() for fr in frames]
    recs = _tshark_fields(merged, env)
    if len(recs) != len(where):
        rep.problems.append(f"tshark read {len(recs)} frames of {len(where)}")
        return rep
    # Frames tshark gave to their source port's dissector (it tries the lower port first): read
    # again, told that port is RoCEv2 too. Any other frame it did not see as InfiniBand fails.
    low = {i for i, rec in enumerate(recs) if "infiniband" not in rec["frame.protocols"]
           and sports[i] is not None and 0 < sports[i] < wire.ROCE_UDP_PORT}
    if low:
        rep.low_port = len(low)
        again = _tshark_fields(merged, env, {sports[i] for i in low})
        recs = [again[i] if i in low else rec for i, rec in enumerate(recs)]
    for (name, n), rec in zip(where, recs, strict=True):
        problems, accepted = _judge(rec)
        rep.accepted.update(accepted)
        rep.problems += [f"{Path(name).name} #{n}: {p}" for p in problems]
    return rep


def check_decode(files) -> Report:
    """Runs ``mrcnic decode`` on each file (in this process: scapy takes a second to import) and
    wants every frame decoded as a whole MRC packet with its ICRC right, or trimmed."""
    from mrcnic import cli
    rep = Report()
    for f in map(Path, files):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = cli.main(["decode", "--brief", str(f)])
        lines = [x for x in out.getvalue().splitlines() if x.startswith("#")]
        try:
            n = len(_frames(f))
        except Exception as e:  # scapy's reader: whatever the file's first bytes make it raise
            n = f"? (scapy cannot read it: {e})"
        rep.frames[str(f)] = len(lines)
        if rc != 0 or len(lines) != n or not err.getvalue().startswith(f"{n} packets"):
            rep.problems.append(f"{f.name}: mrcnic decode exited {rc} with {len(lines)} of {n} "
                                f"frames: {err.getvalue().strip()}")
        for line in lines:
            icrc = re.search(r" icrc=(\S+)", line)
            verdict = icrc.group(1) if icrc else "?"
            if verdict not in ("ok", "trimmed") or "PROBLEM" in line or "(not MRC" in line:
                rep.problems.append(f"{f.name} {line}")
            else:
                rep.accepted[f"icrc={verdict}"] += 1
    return rep


#: the short demo the tests share (verif/test_demo.py, verif/test_pcaps.py)
SHORT_DEMO = ("--size", "32768", "--seed", "7")


@dataclass
class DemoRun:
    out: Path
    returncode: int
    stdout: str
    stderr: str


def short_demo(tmp_path_factory) -> DemoRun:
    """The short demo, run once per pytest session however many tests ask and whichever
    pytest-xdist workers they run on: the first to ask runs it under a lock in the session's
    base directory, which all workers share; the others wait for it and read what it left."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    out, record = base / "short-demo", base / "short-demo.json"
    with open(base / "short-demo.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not record.exists():
            r = subprocess.run([sys.executable, "-m", "mrcnic.verif.demo", "--out", str(out),
                                *SHORT_DEMO], capture_output=True, text=True, timeout=1500)
            record.write_text(json.dumps({"returncode": r.returncode, "stdout": r.stdout,
                                          "stderr": r.stderr}))
        return DemoRun(out, **json.loads(record.read_text()))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mrcnic.verif.pcapcheck", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+", help="pcap files, or directories to search for *.pcap")
    a = ap.parse_args(argv)
    files = pcap_files(*a.paths)
    if not files:
        ap.error("no *.pcap there")
    rep = check_decode(files)
    print(f"mrcnic decode: {rep}")
    bad = bool(rep.problems)
    if TSHARK is None:
        print("tshark: not installed (apt-get install tshark); not checked")
    else:
        with tempfile.TemporaryDirectory() as tmp:
            rep = check_tshark(files, Path(tmp))
        print(f"tshark: {rep}")
        bad |= bool(rep.problems)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
