"""MRC beside what users would otherwise run, on the same gateware, fabric, traffic and seeds:
single-path RoCEv2 and blind spraying (mrcnic.transports), each set through the NICs'
registers alone.

    python -m mrcnic.verif.compare [--scenarios permutation,alltoall,incast,linkdown]
                                   [--transports mrc,roce,spray] [--seeds 1-5] [--jobs 2]

Each (scenario, transport, seed) is one system run (verif/tb_system.py) with the system test's
checks: every byte lands, every message completes once. Per run: goodput, the p50 and p99
message completion time, retransmissions, data packets sent onto a dead path while it was
down, and in the incast the victim's share. ``make bench`` (block ``compare``) runs every
scenario and writes the figures into build/bench/results.json, the plots beside it, and
docs/results.md from them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

from mrcnic import wire
from mrcnic.evmap import EvLayout
from mrcnic.transports import TRANSPORTS
from mrcnic.verif import builds, harness
from mrcnic.verif.failover_sweep import parse_seeds, percentile
from mrcnic.verif.scenarios import KIB, onto_dead_paths, retransmissions


@dataclass(frozen=True)
class Case:
    about: str
    scenario: str
    hosts: int
    options: dict = field(default_factory=dict)
    #: the seeds make bench runs (the victim's share is held to a goal over five)
    seeds: str = "1-3"


CASES = {
    "permutation": Case("4 NICs in pairs, each writing 256 KiB to its partner on 3 QPs at once: "
                        "12 flows over 8 paths", "permutation", 4, {"sizes": [256 * KIB]}),
    "alltoall": Case("4 NICs, each writing 128 KiB to each of the other 3 at once", "alltoall",
                     4, {"sizes": [128 * KIB]}),
    "incast": Case("NICs 1-7 each write 64 KiB to NIC 0 at once (7:1); NIC 1 also writes "
                   "128 KiB to NIC 2, the victim", "incast", 8,
                   {"sizes": [64 * KIB], "victim_size": 128 * KIB}, seeds="1-5"),
    # The link returns 1 ms after it died: with routes set by the source nothing else moves a
    # single-path flow off it, and its return stands for the fabric's routing converging
    # around it (commonly milliseconds or more; MRC needs none of it). The writes are posted
    # over time, so a completion time is the write's own and not that of the writes queued
    # before it: a host posts a 128 KiB write every 100 us at most, its ports then about three
    # quarters busy.
    "linkdown": Case("2 NICs, 12 writes of 32 and 128 KiB on 3 QPs each way, posted one every "
                     "50 us; the plane 0 spine 1 link to NIC 1's leaf dies at 30% of the "
                     "transfer and returns 1 ms later", "linkdown", 2,
                     {"sizes": [32 * KIB] * 6 + [128 * KIB] * 6, "outage_us": 1000.0,
                      "post_gap_us": 50.0}),
}


def _build(case: Case):
    if case.scenario == "incast":
        return builds.incast_system(64, case.hosts)
    return builds.nic_system(64, case.hosts)


def figures(r: dict) -> dict:
    """What one run's results.json says, as the comparison reports it."""
    flows = [f for f in r["flows"] if f["posted_us"] >= 0]          # (not the warm-up ping)
    fct = [f["done_us"] - f["posted_us"] for f in flows]
    data = {int(op) for op in wire.DATA_OPCODES}
    outages = [(f["at_us"] - r["t0_us"],
                None if f["until_us"] is None else f["until_us"] - r["t0_us"], f["paths"])
               for f in r["failures"]]
    sends = [(t, ev) for sent in r["sent"].values() for t, _, ev, op, _, _, _ in sent
             if op in data]
    dead = onto_dead_paths(EvLayout(r["planes"], r["spines"]), outages, sends)
    out = {"goodput_gbps": r["goodput_gbps"], "fct_p50_us": statistics.median(fct),
           "fct_p99_us": percentile(fct, 99), "fct_us": sorted(fct),
           "retransmissions": retransmissions(r),
           "dead_path_packets": dead if r["failures"] else None,
           "done_us": r["fct_us"], "wall_s": r["wall_s"]}
    if "victim" in r:
        out["victim_share"] = r["victim"]["share"]
    if "shared_paths" in r:
        out["shared_paths"] = r["shared_paths"]
    return out


def _system_run(build, scenario: str, seed: int, options: dict, out: Path):
    """One system run (verif/tb_system.py) into ``out``: the assertion that stopped it (or
    None), and its results.json (or None: it wrote none)."""
    error = None
    try:
        harness.run(build, "mrcnic.verif.tb_system", builds.system_params(
            64, scenario, seed, options, out=str(out), pcaps=False), run_dir=out / "sim")
    except harness.SimulationFailed as e:
        error = e.reason()
    res = out / "results.json"
    return error, json.loads(res.read_text()) if res.exists() else None


def run_one(case: str, transport: str, seed: int, root: Path) -> dict:
    """One run; its figures, and ``error`` (the assertion that stopped it) or None."""
    c = CASES[case]
    error, r = _system_run(_build(c), c.scenario, seed,
                           {**c.options, "hosts": c.hosts, "transport": transport},
                           root / case / transport / str(seed))
    fig = {"case": case, "transport": transport, "seed": seed, "error": error}
    if r is not None:
        fig.update(figures(r))
    elif error is None:
        fig["error"] = "no results"
    return fig


def sweep(cases, transports, seeds=None, jobs=2, root: Path | None = None, progress=print):
    """Every (case, transport, seed), ``jobs`` at once; the builds first, one at a time.
    ``seeds`` None: each case's own."""
    root = root or harness.BUILD / "compare"
    for case in cases:
        _build(CASES[case])
    todo = [(c, t, s) for c in cases for t in transports
            for s in (seeds or parse_seeds(CASES[c].seeds))]

    def label(r):
        what = "ok" if r["error"] is None else f"FAILED: {r['error']}"
        return f"{r['case']} {r['transport']} seed {r['seed']}: {what}"

    runs = harness.run_many(run_one, [(*t, root) for t in todo], jobs, label, progress)
    runs.sort(key=lambda r: (cases.index(r["case"]), transports.index(r["transport"]),
                             r["seed"]))
    return runs


METRICS = ("goodput_gbps", "fct_p50_us", "fct_p99_us", "retransmissions", "dead_path_packets",
           "victim_share")


def summarise(runs: list[dict]) -> dict:
    """Per case and transport: each metric's median over the seeds that passed (and the
    worst victim share), the seeds that failed, and every completion time."""
    out: dict = {}
    for r in runs:
        s = out.setdefault(r["case"], {}).setdefault(r["transport"], {
            "runs": 0, "failed": {}, "seeds": {}, "fct_us": []})
        s["runs"] += 1
        if r["error"] is not None:
            s["failed"][r["seed"]] = r["error"]
            continue
        s["seeds"][r["seed"]] = {k: r[k] for k in METRICS if r.get(k) is not None}
        s["fct_us"] += r["fct_us"]
    for per in out.values():
        for s in per.values():
            for k in METRICS:
                v = [f[k] for f in s["seeds"].values() if k in f]
                if v:
                    s[k] = statistics.median(v)
            shares = [f["victim_share"] for f in s["seeds"].values() if "victim_share" in f]
            if shares:
                s["victim_share_worst"] = min(shares)
    return out


def goals(summary: dict) -> dict:
    """The issue's figures from the summary: MRC against the others where both ran."""
    g = {}

    def get(case, t, k):
        return summary.get(case, {}).get(t, {}).get(k)

    mrc, roce = get("permutation", "mrc", "goodput_gbps"), get("permutation", "roce",
                                                                 "goodput_gbps")
    if mrc and roce:
        g["goodput_ratio_mrc_vs_roce_permutation"] = mrc / roce
    mrc, roce = get("linkdown", "mrc", "fct_p99_us"), get("linkdown", "roce", "fct_p99_us")
    if mrc and roce:
        g["p99_fct_ratio_roce_vs_mrc_linkdown"] = roce / mrc
    # (incast_victim_share itself is the incast block's, from its own seed)
    for t in TRANSPORTS:
        share, worst = get("incast", t, "victim_share"), get("incast", t, "victim_share_worst")
        if share is not None:
            g["incast_victim_share_median" if t == "mrc" else f"incast_victim_share_{t}"] = share
            g["incast_victim_share_worst" + ("" if t == "mrc" else f"_{t}")] = worst
    return g


#: The figures MRC is held to (issue: evaluation), each with its bound.
GOALS = {"goodput_ratio_mrc_vs_roce_permutation": 1.5,
         "p99_fct_ratio_roce_vs_mrc_linkdown": 5.0,
         "incast_victim_share": 0.90, "incast_victim_share_median": 0.90,
         "incast_victim_share_worst": 0.85, "line_rate_fraction_1mib": 0.95}

#: Line rate: one QP's 1 MiB write alone on a clean fabric (scenario linerate), per
#: (transport, MTU), each under its key; the first is held to its goal.
LINE_RATE = {"line_rate_fraction_1mib": ("mrc", 1024),
             "line_rate_fraction_1mib_mtu4096": ("mrc", 4096),
             "line_rate_fraction_1mib_roce": ("roce", 1024)}
LINE_RATE_SEED = 1
LINE_RATE_HOW = (
    "verif/compare.py, scenario linerate (verif/scenarios.py): NIC 0's QP 0 writes 1 MiB to "
    f"NIC 1 alone on a clean fabric, seed {LINE_RATE_SEED}, per transport and MTU; "
    "line_rate_fraction_1mib[_mtu4096|_roce]: the least time the write's data frames take on "
    "the sender's ports at their line rate (frame, FCS, preamble and gap; both planes for "
    "mrc) / its completion time from posting; line_rate[key]: that, and where the time goes "
    "(lead_us: posting to the first frame's arrival; span_us: first to last arrival, "
    "span_fraction: that span's ideal over it; tail_us: last arrival to completion)")

HOW = ("verif/compare.py: each case's system run (verif/tb_system.py) per transport "
       "(mrcnic.transports: mrc, roce, spray, set through the NICs' registers alone) and seed, "
       "the same fabric, traffic and seeds for all three; compare[case][transport]: the median "
       "over the seeds of goodput_gbps (every write's payload over the time to complete them "
       "all), fct_p50_us and fct_p99_us (each write's completion time from its posting, by "
       "nearest rank), retransmissions (rtx_sack + rtx_trim + rtx_timeout over the NICs), "
       "dead_path_packets (data packets sent onto the dead link's path while it was down) and "
       "victim_share (incast); goodput_ratio_mrc_vs_roce_permutation and "
       "p99_fct_ratio_roce_vs_mrc_linkdown: MRC's against single-path RoCE's; "
       "incast_victim_share_median, _worst and _[worst_]<transport>: the victim's share, median "
       "and worst over the incast's seeds (incast_victim_share alone: the incast block's seed)")


def bench(results: dict, jobs: int, docs: Path | None = None) -> None:
    """``make bench``'s block compare: every case, transport and seed; the figures into
    ``results``, the plots beside build/bench/results.json, and docs/results.md from them."""
    root = harness.BUILD / "compare"
    runs = sweep(list(CASES), list(TRANSPORTS), None, jobs, root,
                 progress=lambda line: print(line, flush=True))
    summary = summarise(runs)
    report(summary)
    for stale in [k for k in results if k.startswith(("incast_victim_share_", "goodput_ratio_",
                                                      "p99_fct_ratio_"))]:
        del results[stale]
    results["compare"] = {case: {t: {k: v for k, v in s.items() if k != "fct_us"}
                                 for t, s in per.items()} for case, per in summary.items()}
    for k, v in goals(summary).items():
        results[k] = round(v, 4)
        bound = f"goal >= {GOALS[k]}" if k in GOALS else ""
        print(f"{k:<44} {v:.3f}   {bound}")
    results["_how_compare"] = HOW
    plots = plot(summary, root, harness.BUILD / "bench")
    for p in plots:
        print(f"  (plot: {p})")
    if docs is not None:
        write_doc(results, plots, docs)
        print(f"  (written: {docs / 'results.md'})")


def line_rate_run(key: str, root: Path) -> dict:
    """One line-rate run (scenario linerate); its figures, and ``error`` or None."""
    transport, mtu = LINE_RATE[key]
    error, r = _system_run(builds.nic_system(64, 2), "linerate", LINE_RATE_SEED,
                           {"transport": transport, "mtu": mtu}, root / "linerate" / key)
    r = r or {}
    return {"key": key, "transport": transport, "mtu": mtu,
            "error": error or (None if "line_rate" in r else "no figures"),
            **r.get("line_rate", {})}


def line_rate(results: dict, jobs: int, docs: Path | None = None) -> None:
    """``make bench``'s block linerate: each LINE_RATE run, its figures into ``results``, and
    docs/results.md again from them (with the comparison's plots, if it has run)."""
    root = harness.BUILD / "compare"
    builds.nic_system(64, 2)
    runs = harness.run_many(line_rate_run, [(k, root) for k in LINE_RATE], jobs,
                            lambda r: f"{r['key']}: {r['error'] or 'ok'}",
                            lambda line: print(line, flush=True))
    results["line_rate"] = {}
    for r in sorted(runs, key=lambda r: list(LINE_RATE).index(r["key"])):
        k = r.pop("key")
        results.pop(k, None)
        if r["error"]:
            print(f"{k:<44} FAILED: {r['error']}")
            continue
        results[k] = round(r["fraction"], 4)
        results["line_rate"][k] = {n: round(v, 4) if isinstance(v, float) else v
                                   for n, v in r.items() if n != "error"}
        bound = f"goal >= {GOALS[k]}" if k in GOALS else ""
        print(f"{k:<44} {r['fraction']:.3f}   {bound} ({r['transport']}, MTU {r['mtu']}: "
              f"{r['fct_us']:.1f} us / ideal {r['ideal_us']:.1f} us, {r['gbps']:.2f} of "
              f"{r['best_gbps']:.2f} Gb/s; lead {r['lead_us']:.1f} us, frames "
              f"{r['span_fraction']:.3f} of their rate, tail {r['tail_us']:.1f} us)")
    results["_how_line_rate"] = LINE_RATE_HOW
    if docs is not None:
        write_doc(results, sorted((harness.BUILD / "bench").glob("compare_*.png")), docs)
        print(f"  (written: {docs / 'results.md'})")


def write_doc(results: dict, plots: list[Path], docs: Path) -> None:
    """docs/results.md from the comparison's figures, its plots copied to docs/results/."""
    import shutil
    pics = docs / "results"
    pics.mkdir(parents=True, exist_ok=True)
    lines = ["# MRC beside single-path RoCE and blind spraying", "",
             "Generated by `make bench` (block `compare`, `verif/compare.py`) from "
             "build/bench/results.json; do not edit by hand.", "",
             "The same gateware, fabric, traffic and seeds for all three transports, each set "
             "through the NICs' registers alone (`mrcnic.transports`):", ""]
    lines += [f"- `{t.name}`: {t.about}." for t in TRANSPORTS.values()]
    lines += ["", "## Goals", "", "| figure | value | goal |", "|---|---|---|"]
    for k in sorted(k for k in results if k in GOALS or k.startswith(
            ("incast_victim_share", "goodput_ratio_", "p99_fct_ratio_"))):
        goal = f">= {GOALS[k]}" + (" (met)" if results[k] >= GOALS[k] else " (missed)") \
            if k in GOALS else "(beside MRC's)"
        lines.append(f"| `{k}` | {results[k]:.3f} | {goal} |")
    for case, per in results.get("compare", {}).items():
        lines += ["", f"## {case}", "", CASES[case].about + ".", "",
                  "| transport | goodput Gb/s | p50 FCT us | p99 FCT us | retransmissions "
                  "| packets onto the dead path | victim share | seeds passed |",
                  "|---|---|---|---|---|---|---|---|"]
        for t, s in per.items():
            def cell(k, fmt="{:.2f}", s=s):
                return fmt.format(s[k]) if k in s else "-"
            lines.append(f"| {t} | {cell('goodput_gbps')} | {cell('fct_p50_us')} | "
                         f"{cell('fct_p99_us')} | {cell('retransmissions', '{:.0f}')} | "
                         f"{cell('dead_path_packets', '{:.0f}')} | "
                         f"{cell('victim_share', '{:.3f}')} | "
                         f"{s['runs'] - len(s['failed'])}/{s['runs']} |")
    if results.get("line_rate"):
        lines += ["", "## Line rate", "",
                  "One QP's 1 MiB write alone on a clean fabric (scenario `linerate`): its rate "
                  "over the best its sender's ports allow, their line rate times the payload's "
                  "part of the frames on the wire.", "",
                  "| transport | MTU | completion us | ideal us | fraction | Gb/s | best Gb/s "
                  "| lead us | frames' own rate | tail us |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for r in results["line_rate"].values():
            lines.append(f"| {r['transport']} | {r['mtu']} | {r['fct_us']:.1f} | "
                         f"{r['ideal_us']:.1f} | {r['fraction']:.3f} | {r['gbps']:.2f} | "
                         f"{r['best_gbps']:.2f} | {r['lead_us']:.1f} | "
                         f"{r['span_fraction']:.3f} | {r['tail_us']:.1f} |")
        mrc = [r for r in results["line_rate"].values() if r["transport"] == "mrc"]
        steady = min(r["span_fraction"] for r in mrc) if mrc else 0.0
        lines += ["", "Beyond the ideal there is the lead, from posting to the first frame's "
                  "arrival (that frame stored and forwarded at every hop, and the NICs' "
                  "pipelines), and the tail, from the last frame's arrival to the completion "
                  "(its SACK coming back)."]
        if steady >= 0.99:
            lines[-1] += (f" Between them MRC's frames arrive at {steady:.3f} or more of their "
                          "rate: the window, NSCC, the acknowledgements and the scheduler do "
                          "not hold the write back, and what remains is latency, a larger "
                          "part of the time at the larger MTU (a larger frame to store and "
                          "forward at each hop).")
        else:
            lines[-1] += (f" Between them MRC's frames arrive at as little as {steady:.3f} of "
                          "their rate: the sender itself holds the write back.")
        lines += ["", "Single-path RoCE sends on one plane's port alone.",
                  "", LINE_RATE_HOW + "."]
    lines += ["", "## Plots", ""]
    for p in plots:
        shutil.copyfile(p, pics / p.name)
        lines.append(f"![{p.stem}](results/{p.name})")
        lines.append("")
    lines += ["## How measured", "", HOW + ".", ""]
    (docs / "results.md").write_text("\n".join(lines))


def plot(summary: dict, runs_root: Path, out: Path) -> list[Path]:
    """Completion-time CDFs, a panel per case and a line per transport; and the link-down
    run's data packets per path over time, a panel per transport (first seed)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    paths = []
    cases = list(summary)
    fig, axes = plt.subplots(1, len(cases), figsize=(4.5 * len(cases), 3.6), squeeze=False)
    for ax, case in zip(axes[0], cases, strict=True):
        for t, s in summary[case].items():
            v = sorted(s["fct_us"])
            if v:
                ax.step(v, [(i + 1) / len(v) for i in range(len(v))], where="post", label=t)
        ax.set_title(case)
        ax.set_xlabel("message completion time (us)")
        ax.set_xscale("log")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("fraction of messages")
    axes[0][0].legend()
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    paths.append(out / "compare_fct_cdf.png")
    fig.savefig(paths[-1], dpi=100)
    plt.close(fig)

    if "linkdown" in summary:
        ts = list(summary["linkdown"])
        fig, axes = plt.subplots(len(ts), 1, figsize=(9, 2.4 * len(ts)), squeeze=False)
        for ax, t in zip(axes[:, 0], ts, strict=True):
            seeds = sorted(summary["linkdown"][t]["seeds"]) or [None]
            res = runs_root / "linkdown" / t / str(seeds[0]) / "results.json"
            if seeds[0] is None or not res.exists():
                continue
            _path_traffic(ax, json.loads(res.read_text()), t)
        axes[-1][0].set_xlabel("time from the first write (us)")
        fig.tight_layout()
        paths.append(out / "compare_linkdown_paths.png")
        fig.savefig(paths[-1], dpi=100)
        plt.close(fig)
    return paths


def _path_traffic(ax, r: dict, transport: str, bins: int = 80):
    """Data packets sent per path (a row each) per time bin, darker for more; the dead
    link's time shaded red beneath its path's row label."""
    data = {int(op) for op in wire.DATA_OPCODES}
    layout = EvLayout(r["planes"], r["spines"])
    sent = [(t, layout.plane(ev), layout.spine(ev)) for s in r["sent"].values()
            for t, _, ev, op, _, _, _ in s if op in data and t >= 0]
    if not sent:
        return
    end = max(t for t, _, _ in sent)
    step = end / bins
    keys = [(pl, sp) for pl in range(r["planes"]) for sp in range(r["spines"])]
    grid = [[0] * bins for _ in keys]
    for t, pl, sp in sent:
        grid[keys.index((pl, sp))][min(bins - 1, int(t / step))] += 1
    ax.imshow(grid, aspect="auto", cmap="Greys", interpolation="nearest",
              extent=(0, end, len(keys) - 0.5, -0.5))
    dead = {(pl, sp) for f in r["failures"] for pl, sp in f["paths"]}
    ax.set_yticks(range(len(keys)), [f"p{pl} s{sp}" + (" (dies)" if (pl, sp) in dead else "")
                                     for pl, sp in keys], fontsize=7)
    for f in r["failures"]:
        start = f["at_us"] - r["t0_us"]
        stop = end if f["until_us"] is None else min(end, f["until_us"] - r["t0_us"])
        for pl, sp in f["paths"]:
            row = keys.index((pl, sp))
            ax.fill_between([start, stop], row - 0.5, row + 0.5, color="red", alpha=0.25)
    ax.set_title(f"{transport}: data packets per path per {step:.1f} us (red: the link is "
                 "down)", fontsize=9)


def report(summary: dict) -> None:
    for case, per in summary.items():
        print(f"\n{case}: {CASES[case].about}")
        print(f"  {'transport':<10} {'goodput Gb/s':>12} {'p50 us':>9} {'p99 us':>9} "
              f"{'rtx':>6} {'dead-path':>9} {'victim':>7}  seeds")
        for t, s in per.items():
            cell = [f"{s[k]:.2f}" if k in s else "-" for k in
                    ("goodput_gbps", "fct_p50_us", "fct_p99_us")]
            rtx = f"{s['retransmissions']:.0f}" if "retransmissions" in s else "-"
            dead = f"{s['dead_path_packets']:.0f}" if "dead_path_packets" in s else "-"
            vic = f"{s['victim_share']:.3f}" if "victim_share" in s else "-"
            ok = f"{s['runs'] - len(s['failed'])}/{s['runs']}"
            print(f"  {t:<10} {cell[0]:>12} {cell[1]:>9} {cell[2]:>9} {rtx:>6} {dead:>9} "
                  f"{vic:>7}  {ok}")
            for seed, why in sorted(s["failed"].items()):
                print(f"    seed {seed} FAILED: {why}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mrcnic.verif.compare", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", default=",".join(CASES),
                    help=f"comma-separated, of {', '.join(CASES)}")
    ap.add_argument("--transports", default=",".join(TRANSPORTS),
                    help=f"comma-separated, of {', '.join(TRANSPORTS)}")
    ap.add_argument("--seeds", help="seeds: 1-5, or 3,7,9 (default: each scenario's own, "
                    + "; ".join(f"{n} {c.seeds}" for n, c in CASES.items()) + ")")
    ap.add_argument("--jobs", type=int, default=2, help="runs at once")
    args = ap.parse_args(argv)
    cases = args.scenarios.split(",")
    transports = args.transports.split(",")
    for what, got, known in (("scenario", cases, CASES), ("transport", transports, TRANSPORTS)):
        bad = [x for x in got if x not in known]
        if bad:
            ap.error(f"unknown {what} {bad[0]!r}; {what}s are {', '.join(known)}")
    try:
        seeds = None if args.seeds is None else parse_seeds(args.seeds)
    except ValueError as e:
        ap.error(str(e))
    if args.jobs < 1:
        ap.error(f"--jobs must be at least 1, not {args.jobs}")
    root = harness.BUILD / "compare"
    runs = sweep(cases, transports, seeds, args.jobs, root)
    summary = summarise(runs)
    report(summary)
    for k, v in goals(summary).items():
        print(f"{k:<44} {v:.3f}")
    (root / "summary.json").write_text(json.dumps(summary, indent=1))
    for p in plot(summary, root, root):
        print(f"plot: {p}")
    return 1 if any(s["failed"] for per in summary.values() for s in per.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
