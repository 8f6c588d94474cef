"""``make coverage``: line and toggle coverage of the gateware, per HDL block, from the end-to-end
suite.

It runs ``verif/test_system_hdl.py`` with ``COVERAGE=1`` (Verilator line and toggle coverage, see
verif/harness.py), one simulation at a time, then reads the ``coverage.dat`` each simulation left
in its run directory, merges them and reports, for every Amaranth component of the NIC (one
Verilog module each), how many of its line and toggle coverage points the suite hit. The same
component in every NIC of the system counts as one block: a point is hit when any NIC hit it.
``--no-run`` only reports from the data a previous run left. The table is printed and written to
docs/coverage.md.

A block's figures are its own module's: its sub-blocks have rows of their own. The simulation
wrappers above the NICs (AxisTop, NicSystem) are left out.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree import ElementTree

from mrcnic.verif.harness import BUILD, ROOT

SUITE = "verif/test_system_hdl.py"
OUT = ROOT / "docs" / "coverage.md"
THRESHOLD = 90.0
#: The block name of a NIC's own top-level module.
NIC_ROOT = "(nic)"
_NIC_INSTANCE = re.compile(r"nic\d+")
#: Yosys's own names (``$auto$<source>:<line>:<pass>$<n>``, as Verilator escapes them) count up
#: across the whole design, so the same block's are numbered differently in every instance.
_AUTO_NAME = re.compile(r"(__024auto__024\w*?__024)\d+")
#: Yosys's Verilog opens every combinational always block with ``if (<a reg held at 0>) begin
#: end``, so that simulators run the block once at time 0: a branch never taken and a reg never
#: toggled by construction, not the design's. Their points are left out (type ``trigger``).
_TRIGGER_LINE = re.compile(r"\s*if \(\\\$auto\$verilog_backend\.cc:\d+:dump_module\$\d+ \) begin end\s*")
_TRIGGER_REG = re.compile(r"__024auto__024verilog_backend\w*dump_module__024\d+:")
TRIGGER = "trigger"


class CoverageError(Exception):
    pass


#: The point types of Verilator's --coverage-line (statement blocks; if/else and ?: branches)
#: and of --coverage-toggle.
LINE_KINDS = ("line", "branch")
TOGGLE_KINDS = ("toggle",)


class Coverage:
    """The coverage points of one build, runs merged: ``counts`` maps ``(module, type, line,
    column, comment, threshold)`` to the hits added over the runs; ``files`` gives each module's
    Verilog file. Only these keys are kept: a two-NIC run has close to a million points."""

    def __init__(self):
        self.counts: dict[tuple, int] = defaultdict(int)
        self.files: dict[str, str] = {}

    def add(self, lines, source: str = "coverage.dat") -> Coverage:
        """Adds a coverage.dat's lines: ``C '<keys>' count``, the keys ``\\x01key\\x02value``
        repeated (``page`` is ``v_<type>/<module>``, ``l`` the line, ``n`` the column, ``o`` the
        comment, ``s`` the threshold, ``f`` the file)."""
        for n, raw in enumerate(lines, 1):
            if not raw.startswith("C '"):
                if raw.strip() and not raw.startswith("#"):
                    raise CoverageError(f"{source}:{n}: not a coverage record: {raw[:80]!r}")
                continue
            end = raw.rfind("' ")
            try:
                count = int(raw[end + 2:])
                keys = dict(item.split("\x02", 1) for item in raw[3:end].split("\x01") if item)
                kind, _, module = keys["page"].partition("/")
                key = (sys.intern(module), keys.get("t") or kind.removeprefix("v_"),
                       int(keys.get("l", 0)), keys.get("n", "0"), keys.get("o", ""),
                       int(keys.get("s") or 1))
            except (ValueError, KeyError):
                raise CoverageError(f"{source}:{n}: not a coverage record: {raw[:80]!r}") from None
            self.counts[key] += count
            if "f" in keys and module not in self.files:
                self.files[module] = keys["f"]
        return self

    def read(self, path: Path) -> Coverage:
        with open(path, errors="replace") as f:
            return self.add(f, str(path))


def parse_dat(*texts: str) -> Coverage:
    """Coverage from coverage.dat texts, merged."""
    cov = Coverage()
    for text in texts:
        cov.add(text.splitlines())
    return cov


def block_of(module: str) -> tuple[str, str] | None:
    """``(instance, block)`` of a Verilog module Amaranth named after its hierarchy, e.g.
    ``nics2_w64.dut.nic1.tx.spray`` -> ``("nics2_w64.dut.nic1", "tx.spray")``; None above the
    NICs."""
    parts = module.split(".")
    for i in range(1, len(parts)):
        if _NIC_INSTANCE.fullmatch(parts[i]):
            return ".".join(parts[:i + 1]), ".".join(parts[i + 1:]) or NIC_ROOT
    return None


@dataclass
class Block:
    name: str
    cls: str = ""
    instances: int = 0
    line: list = field(default_factory=lambda: [0, 0])     # covered, total
    toggle: list = field(default_factory=lambda: [0, 0])
    variants: int = 1   # sets of instances whose points pair up, counted side by side
    triggers: int = 0   # points of Yosys's always-block trigger, left out

    @staticmethod
    def pct(ct) -> float | None:
        return 100.0 * ct[0] / ct[1] if ct[1] else None


def _trigger_lines(path: str) -> set[int]:
    try:
        with open(path, errors="replace") as f:
            return {n for n, text in enumerate(f, 1) if _TRIGGER_LINE.fullmatch(text)}
    except OSError:   # the Verilog is gone: its trigger lines count as the design's
        return set()


def _by_block(cov: Coverage):
    """The line and toggle points under a NIC: ``(block, instance, key, count, module, line)``.

    The key names a point the same way in every instance of a block: ``(line - the module's first
    point's line, comment, rank, type, threshold)``, Yosys's numbered names in the comment made
    alike, and the rank (among the points of that line, comment and type, by column) standing for
    the column, which such names shift. Yosys's trigger points have the type ``trigger``."""
    triggers = {f: _trigger_lines(f) for f in set(cov.files.values())}
    modules: dict[str, list] = defaultdict(list)
    for (module, kind, line, column, comment, thresh), count in cov.counts.items():
        if kind in LINE_KINDS and line in triggers.get(cov.files.get(module), ()):
            kind = TRIGGER
        elif kind in TOGGLE_KINDS and _TRIGGER_REG.match(comment):
            kind = TRIGGER
        elif kind not in LINE_KINDS + TOGGLE_KINDS:
            continue
        modules[module].append((line, int(column) if column.isdigit() else 0,
                                _AUTO_NAME.sub(r"\1#", comment), kind, thresh, count))
    for module, pts in modules.items():
        where = block_of(module)
        if where is None:
            continue
        instance, block = where
        pts.sort()
        first = pts[0][0]
        ranks: dict[tuple, int] = defaultdict(int)
        for line, _, comment, kind, thresh, count in pts:
            base = (line - first, comment, kind)
            rank = ranks[base]
            ranks[base] += 1
            yield block, instance, (line - first, comment, rank, kind, thresh), count, module, line


def aggregate(builds: dict[str, Coverage], classes: dict[str, str] | None = None,
              ) -> dict[str, Block]:
    """Per block, over every instance in every build: covered and total line and toggle points.

    Amaranth emits one module per instance, with the same text for the same component and
    configuration, so instances' points pair up by their line relative to the module's first
    point, column, type and comment; a paired point is covered when its counts, added over the
    instances, reach its threshold (1 unless the data says otherwise: any instance hit it).
    Instances whose points do not pair up (a block built in another configuration, e.g. by a
    system of more NICs) form a variant of their own, counted side by side with the others."""
    per_inst: dict[str, dict[tuple, dict]] = defaultdict(lambda: defaultdict(dict))
    for build, cov in builds.items():
        for block, instance, key, count, _, _ in _by_block(cov):
            per_inst[block][build, instance][key] = count
    blocks = {}
    for name, insts in sorted(per_inst.items()):
        b = Block(name, (classes or {}).get(name, ""), len(insts))
        shapes: dict[frozenset, int] = {}
        combined: dict[tuple, int] = defaultdict(int)
        for keyed in insts.values():
            variant = shapes.setdefault(frozenset(keyed), len(shapes))
            for key, count in keyed.items():
                combined[variant, *key] += count
        b.variants = len(shapes)
        for key, count in combined.items():
            kind, thresh = key[-2:]
            if kind == TRIGGER:
                b.triggers += 1
                continue
            ct = b.line if kind in LINE_KINDS else b.toggle
            ct[1] += 1
            ct[0] += count >= thresh
        blocks[name] = b
    return blocks


def block_classes(directory: Path) -> dict[str, str]:
    """Block name -> Python class, from the ``blocks.json`` a coverage build writes (verif/harness.py:
    the class of every module it emitted)."""
    try:
        modules = json.loads((directory / "blocks.json").read_text())
    except (OSError, ValueError):
        return {}
    return {where[1]: cls for module, cls in modules.items() if (where := block_of(module))}


def find(pattern: str, runs_pattern: str, since: float | None = None) -> dict[Path, list[Path]]:
    """The coverage.dat files of the run directories matching ``runs_pattern`` in the coverage
    builds whose names match ``pattern``, by build directory: those written after ``since``, or
    without it those of the newest build of each name that has any (an older build is of older
    sources)."""
    found: dict[str, list[tuple[float, Path]]] = defaultdict(list)
    for stamp in (BUILD / "sim").glob("*/built.json"):
        try:
            info = json.loads(stamp.read_text())
        except (OSError, ValueError):
            continue
        name = stamp.parent.name.rpartition("-")[0]
        if not info.get("coverage") or not fnmatch.fnmatch(name, pattern):
            continue
        found[name].append((stamp.stat().st_mtime, stamp.parent))
    data = {}
    for name in sorted(found):
        for _, directory in sorted(found[name], reverse=True):
            dats = [d for d in sorted(directory.glob("runs/*/coverage.dat"))
                    if fnmatch.fnmatch(d.parent.name, runs_pattern)
                    and (since is None or d.stat().st_mtime >= since)]
            if dats:
                data[directory] = dats
                if since is None:
                    break
    return data


def _fmt(ct) -> str:
    pct = Block.pct(ct)
    return "-" if pct is None else f"{pct:5.1f}% ({ct[0]}/{ct[1]})"


def table(blocks: dict[str, Block], threshold: float) -> list[str]:
    """Markdown rows, lowest line coverage first."""
    def order(b):
        pct = Block.pct(b.line)
        return (pct if pct is not None else 101.0, b.name)
    rows = ["| block | class | instances | line | toggle | |", "|---|---|---:|---:|---:|---|"]
    for b in sorted(blocks.values(), key=order):
        pct = Block.pct(b.line)
        mark = f"**< {threshold:g}%**" if pct is not None and pct < threshold else ""
        if b.variants > 1:
            mark = (mark + f" {b.variants} variants, counted side by side").strip()
        rows.append(f"| `{b.name}` | {b.cls or '-'} | {b.instances} | {_fmt(b.line)} | "
                    f"{_fmt(b.toggle)} | {mark} |")
    line, toggle = totals(blocks)
    rows.append(f"| **total** | | {sum(b.instances for b in blocks.values())} | {_fmt(line)} | "
                f"{_fmt(toggle)} | |")
    return rows


def totals(blocks: dict[str, Block]) -> tuple[list, list]:
    line, toggle = [0, 0], [0, 0]
    for b in blocks.values():
        for tot, ct in ((line, b.line), (toggle, b.toggle)):
            tot[0] += ct[0]
            tot[1] += ct[1]
    return line, toggle


def report(data: dict[Path, list[Path]], threshold: float, how: str) -> tuple[str, dict[str, Block]]:
    builds, classes = {}, {}
    for directory, dats in data.items():
        cov = builds[directory.name] = Coverage()
        for d in dats:
            cov.read(d)
        classes = block_classes(directory) | classes
    blocks = aggregate(builds, classes)
    if not blocks:
        raise CoverageError("the coverage data holds no NIC block (no module below a nic<i>)")
    line, toggle = totals(blocks)
    under = sorted(b.name for b in blocks.values()
                   if (p := Block.pct(b.line)) is not None and p < threshold)
    merged = ", ".join(f"`{d.relative_to(ROOT) if d.is_relative_to(ROOT) else d}/runs/"
                       f"{{{','.join(r.parent.name for r in runs)}}}`"
                       for d, runs in data.items())
    names = [d.name.rpartition("-")[0] for d in data]
    rebuilt = sorted({n for n in names if names.count(n) > 1})
    if rebuilt:
        merged += (f". The gateware changed during the run, so {', '.join(rebuilt)} was built "
                   "more than once: a block whose Verilog changed counts each version as a "
                   "variant")
    text = "\n".join([
        "# Gateware coverage",
        "",
        f"Produced by `make coverage` (`python -m mrcnic.verif.coverage`): {how}",
        f"Merged: {merged}.",
        "",
        "Verilator line coverage (`--coverage-line`: every statement block, case item and "
        "if/else or ?: branch of the generated Verilog is a point) and toggle coverage "
        "(`--coverage-toggle`: every bit of every signal, each direction), per HDL block: one "
        "Amaranth component, i.e. one Verilog module, named by its path below the NIC. The same "
        "block in every NIC counts once: a point is covered when any NIC hit it. A block's "
        "figures are its own module's, its sub-blocks have rows of their own; the simulation "
        "wrappers above the NICs are left out, and so are the "
        f"{sum(b.triggers for b in blocks.values())} points of the `if (<reg held at 0>) begin "
        "end` that Yosys opens every combinational always block with (never taken, never "
        "toggled, by construction). Lowest line coverage first; blocks under "
        f"{threshold:g}% line coverage are marked.",
        "",
        f"Total: line {_fmt(line).strip()}, toggle {_fmt(toggle).strip()}, over {len(blocks)} "
        f"blocks; {len(under)} under {threshold:g}% line coverage"
        + (f": {', '.join(f'`{n}`' for n in under)}." if under else "."),
        "",
        *table(blocks, threshold),
        "",
    ])
    return text, blocks


def uncovered(data: dict[Path, list[Path]], block: str) -> list[str]:
    """The line points of ``block`` that no run in no NIC hit, with their Verilog source line
    (in the first NIC's module)."""
    out = []
    for dats in data.values():
        cov = Coverage()
        for d in dats:
            cov.read(d)
        hits: dict[tuple, int] = defaultdict(int)
        where: dict[tuple, tuple[str, str, int]] = {}   # (instance, module, line)
        for name, instance, key, count, module, line in _by_block(cov):
            if name == block and key[-2] in LINE_KINDS:
                hits[key] += count
                if key not in where or instance < where[key][0]:
                    where[key] = (instance, module, line)
        sources: dict[str, list[str]] = {}
        for key in sorted(k for k, c in hits.items() if c < k[-1]):
            _, module, line = where[key]
            f = cov.files.get(module, "")
            if f not in sources:
                try:
                    sources[f] = Path(f).read_text(errors="replace").splitlines()
                except OSError:
                    sources[f] = []
            src = sources[f][line - 1].strip() if 0 < line <= len(sources[f]) else ""
            out.append(f"{Path(f).name}:{line} [{key[-2]} {key[1]}] {src}")
    return out


def outcomes(junit: Path) -> list[tuple[str, str]]:
    """Each test of a pytest JUnit XML report and how it went."""
    try:
        root = ElementTree.parse(junit).getroot()
    except (OSError, ElementTree.ParseError):
        return []
    out = []
    for case in root.iter("testcase"):
        verdict = next((c.tag for c in case if c.tag in ("failure", "error", "skipped")), None)
        out.append((case.get("name", "?"), {"failure": "failed", "error": "errored",
                                            "skipped": "skipped"}.get(verdict, "passed")))
    return out


def collected() -> list[str]:
    """The names of the suite's tests."""
    r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                        "-p", "no:cacheprovider", SUITE], cwd=ROOT, capture_output=True, text=True)
    return [line.partition("::")[2] for line in r.stdout.splitlines() if "::" in line]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mrcnic.verif.coverage", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-run", action="store_true",
                    help="only report from the coverage data a previous run left")
    ap.add_argument("-k", dest="select", metavar="EXPR",
                    help="pytest -k expression: run only these scenarios")
    ap.add_argument("--builds", default="nics*", metavar="GLOB",
                    help="coverage builds to read (their names, default %(default)s)")
    ap.add_argument("--runs", default="system_*", metavar="GLOB",
                    help="their run directories to read (default %(default)s: the suite's)")
    ap.add_argument("--threshold", type=float, default=THRESHOLD,
                    help="mark blocks under this line coverage, in %% (default %(default)g)")
    ap.add_argument("--out", type=Path, default=OUT,
                    help="the report (default docs/coverage.md; '-' writes none)")
    ap.add_argument("--uncovered", metavar="BLOCK",
                    help="instead of the report, list BLOCK's line points no run hit")
    args = ap.parse_args(argv)

    since, status = None, 0
    how = "reported from the data in build/sim without running anything (`--no-run`)."
    if args.uncovered is None and not args.no_run:
        # One simulation at a time: each coverage build and run is heavy, and pytest-xdist would
        # build the same system twice at once.
        cmd = [sys.executable, "-m", "pytest", "-n", "0", "-p", "no:cacheprovider", SUITE]
        if args.select:
            cmd += ["-k", args.select]
        shown = " ".join(["pytest", *cmd[3:]])
        junit = BUILD / "coverage" / "junit.xml"
        junit.parent.mkdir(parents=True, exist_ok=True)
        junit.unlink(missing_ok=True)
        print(f"coverage: COVERAGE=1 {shown}", flush=True)
        since = time.time()
        status = subprocess.run([*cmd, f"--junitxml={junit}"], cwd=ROOT,
                                env={**os.environ, "COVERAGE": "1"}).returncode
        minutes = (time.time() - since) / 60
        ran = outcomes(junit)
        tests = ", ".join(f"`{name}` {outcome}" for name, outcome in ran)
        left = sorted(set(collected()) - {name for name, _ in ran}) if args.select else []
        how = (f"`COVERAGE=1 {shown}` ({minutes:.0f} minutes, builds included), then every "
               f"coverage.dat it left merged. Tests: {tests or 'none ran'}"
               + (f"; left out by `-k`: {', '.join(f'`{n}`' for n in left)}." if left else "."))
        if status:
            print(f"coverage: the suite failed (pytest exit {status}); the report covers the "
                  "runs it made", file=sys.stderr)
    try:
        data = find(args.builds, args.runs, since)
        if not data:
            raise CoverageError(
                f"no coverage data: no coverage.dat under build/sim/{args.builds}-*/runs/"
                f"{args.runs} of a COVERAGE=1 build (run `make coverage` without --no-run)")
        if args.uncovered is not None:
            lines = uncovered(data, args.uncovered)
            print("\n".join(lines) if lines else f"{args.uncovered}: no uncovered line point "
                  "(or no such block)")
            return 0
        text, _ = report(data, args.threshold, how)
    except CoverageError as e:
        print(f"coverage: {e}", file=sys.stderr)
        return status or 1
    print(text)
    if str(args.out) != "-":
        args.out.write_text(text)
        print(f"coverage: written to {args.out}")
    return status


if __name__ == "__main__":
    sys.exit(main())
