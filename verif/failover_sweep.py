"""The link-down scenario over many seeds: does failover hold on every one, and how its figures
spread.

    python -m mrcnic.verif.failover_sweep [--configs demo,demo_mtu4096,demo_4x8]
                                          [--seeds 1-50] [--jobs 2] [--clean]
                                          [--against build/sweep/earlier.json]

Each (configuration, seed) is one two-NIC system run (verif/tb_system.py, scenario linkdown)
with its own checks: every byte lands once, and every entry on the dead path that lost two
new packets a SACK could show in time is ASSUMED_BAD before the link returns. A seed whose
figures miss :data:`GOALS` (failover within 3 base RTTs; with ``--clean``, the transfer
within 1.10 times the clean one's) is listed as such. The runs go
``--jobs`` at a time, each in build/sweep/<configuration>/<seed>/ (results.json; a failed
run keeps its pcaps for
verif/failover_trace.py). ``--clean`` also runs each seed without the failure, for the
completion-time inflation. Printed: the failures, and per configuration the distribution of
failover_rtts (the last data packet onto the dead path after its death, in base RTTs) and of
the inflation; written: build/sweep/<name>.json. ``--against`` an earlier sweep's file prints,
per configuration, how failover_rtts moved seed by seed (see :func:`paired`).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

from mrcnic.verif import builds, harness
from mrcnic.verif.scenarios import KIB

#: The demo's writes (verif/demo.py): these, those below its largest, and its largest.
DEMO_SIZES = (1, 7, 256, 1000, 4096, 10000, 64 * KIB)


def demo_options(size: int = 256 * KIB, mtu: int = 1024) -> dict:
    """The system testbench's options for the demo's writes up to ``size`` bytes at ``mtu``."""
    return {"sizes": tuple(sorted({s for s in DEMO_SIZES if s < size} | {size})), "mtu": mtu}


@dataclass(frozen=True)
class Config:
    about: str
    planes: int = 2
    spines: int = 4
    options: dict = field(default_factory=demo_options)


#: The link-down figures' goals (``make bench``'s, for every seed): the last data packet onto
#: the dead path at most this many base RTTs after its death, and the transfer at most this
#: many times as long as without the death. A seed over either is reported by its figure; it
#: is a figure missed, not a check failed (the sweep's exit status is the checks').
GOALS = {"failover_rtts": 3.0, "fct_inflation_linkdown": 1.10}

CONFIGS = {
    "demo": Config("make demo's default: 2 planes x 4 spines, MTU 1024, writes of 1 B .. 256 KiB "
                   "on three QPs each way; the link returns"),
    "demo_mtu4096": Config("the same at MTU 4096", options=demo_options(mtu=4096)),
    "demo_4x8": Config("the same over 4 planes x 8 spines", planes=4, spines=8),
    "bench": Config("the failover bench's: 256 KiB each way on one QP pair, the link never "
                    "returns", options={"sizes": [256 * KIB, 256 * KIB], "back": None}),
}


def parse_seeds(text: str) -> list[int]:
    """``1-50``, ``3,7,9`` or a mix: the seeds, in order, each once."""
    out = []
    try:
        for part in text.split(","):
            lo, dash, hi = part.partition("-")
            out += range(int(lo), int(hi if dash else lo) + 1)
    except ValueError:
        raise ValueError(f"seeds must look like 1-50 or 3,7,9, not {text!r}") from None
    if not out:
        raise ValueError(f"no seeds in {text!r}")
    return list(dict.fromkeys(out))


def _build(cfg: Config):
    return builds.nic_system(64, 2, planes=cfg.planes, spines=cfg.spines)


def run_one(name: str, seed: int, scenario: str = "linkdown", root: Path | None = None) -> dict:
    """One run; its figures, and ``error`` (the assertion that stopped it) or None."""
    cfg = CONFIGS[name]
    out = (root or harness.BUILD / "sweep") / name / f"{scenario}-{seed}"
    b = _build(cfg)                 # (cached: built before the runs are handed out)
    error = None
    try:
        harness.run(b, "mrcnic.verif.tb_system", builds.system_params(
            64, scenario, seed, cfg.options, planes=cfg.planes, spines=cfg.spines,
            out=str(out), pcaps=scenario != "clean"), run_dir=out / "sim")
    except harness.SimulationFailed as e:
        error = e.reason()
    res = out / "results.json"
    r = json.loads(res.read_text()) if res.exists() else None
    if error is None and r is None:
        error = "no results"
    fig = {"config": name, "seed": seed, "scenario": scenario, "error": error}
    if r is not None:
        fig["fct_us"] = r["fct_us"]
        if r["failover"]:
            last = r["failover"][0]["last_after_us"] or 0.0
            fig.update(failover_us=last, failover_rtts=last / r["base_rtt_us"],
                       base_rtt_us=r["base_rtt_us"])
    return fig


def percentile(values, p):
    """The ``p`` percentile (0..100) of ``values``, by the nearest rank."""
    v = sorted(values)
    return v[max(0, min(len(v) - 1, math.ceil(p / 100 * len(v)) - 1))]


def summarise(runs: list[dict]) -> dict:
    """Per configuration: passed, failed (seed and why), and the figures' distribution."""
    out = {}
    for name in dict.fromkeys(r["config"] for r in runs):
        down = [r for r in runs if r["config"] == name and r["scenario"] == "linkdown"]
        clean = {r["seed"]: r for r in runs if r["config"] == name and r["scenario"] == "clean"}
        s = {"runs": len(down), "passed": sum(r["error"] is None for r in down),
             "failed": {r["seed"]: r["error"] for r in down if r["error"] is not None}}
        rtts = [(r["failover_rtts"], r["seed"]) for r in down if "failover_rtts" in r]
        if rtts:
            v = [x for x, _ in rtts]
            s.update(failover_rtts_p50=statistics.median(v), failover_rtts_mean=statistics.fmean(v),
                     failover_rtts_p90=percentile(v, 90), failover_rtts_worst=max(rtts)[0],
                     failover_rtts_worst_seed=max(rtts)[1], failover_rtts=dict(
                         (seed, round(x, 3)) for x, seed in rtts))
        infl = [(r["fct_us"] / clean[r["seed"]]["fct_us"], r["seed"]) for r in down
                if "fct_us" in r and clean.get(r["seed"], {}).get("fct_us")
                and clean[r["seed"]]["error"] is None]
        if infl:
            v = [x for x, _ in infl]
            s.update(fct_inflation_linkdown_p50=statistics.median(v),
                     fct_inflation_linkdown_worst=max(infl)[0],
                     fct_inflation_linkdown_worst_seed=max(infl)[1],
                     fct_inflation_linkdown=dict((seed, round(x, 4)) for x, seed in infl))
        s["clean_failed"] = {seed: r["error"] for seed, r in clean.items() if r["error"]}
        s["over_goal"] = over_goal(s)
        out[name] = s
    return out


def over_goal(s: dict) -> dict:
    """The seeds of one configuration's summary whose figures miss :data:`GOALS`: seed ->
    {figure: value}."""
    out = {}
    for key, goal in GOALS.items():
        for seed, v in s.get(key, {}).items():
            if v > goal:
                out.setdefault(seed, {})[key] = v
    return dict(sorted(out.items()))


def passed(summary: dict) -> bool:
    """No run failed its checks, clean or not (a goal missed is reported, not failed)."""
    return all(not s["failed"] and not s["clean_failed"] for s in summary.values())


def paired(before: dict, after: dict) -> dict:
    """Per configuration in both summaries, failover_rtts seed by seed: after less before.

    A change that moves when packets leave by a cycle reshuffles which packet is the last onto
    the dead path, and a seed's figure can move by more than an RTT either way; the figures are
    spread in two lumps, so their median can jump between them with a few seeds. Whether a change
    moved failover at all is the mean of the differences against its standard error."""
    out = {}
    for name in before.keys() & after.keys():
        a = {int(k): v for k, v in before[name].get("failover_rtts", {}).items()}
        b = {int(k): v for k, v in after[name].get("failover_rtts", {}).items()}
        seeds = sorted(a.keys() & b.keys())
        if len(seeds) < 2:
            continue
        d = [b[k] - a[k] for k in seeds]
        out[name] = {"seeds": len(seeds), "mean_diff": statistics.fmean(d),
                     "stderr": statistics.stdev(d) / math.sqrt(len(d)),
                     "up": sum(x > 0 for x in d), "down": sum(x < 0 for x in d),
                     "largest_move": max(d, key=abs)}
    return out


def _histogram(values, lo, hi, bins=12, width=40) -> list[str]:
    step = (hi - lo) / bins or 1.0
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, max(0, int((v - lo) / step)))] += 1
    top = max(counts) or 1
    return [f"    {lo + i * step:6.2f} .. {lo + (i + 1) * step:6.2f} | "
            + "#" * round(c * width / top) + f" {c}" for i, c in enumerate(counts) if c]


def report(summary: dict) -> None:
    for name, s in summary.items():
        print(f"\n{name}: {CONFIGS[name].about}")
        print(f"  {s['passed']}/{s['runs']} seeds passed")
        for seed, why in sorted(s["failed"].items()):
            print(f"  seed {seed} FAILED: {why}")
        for seed, why in sorted(s["clean_failed"].items()):
            print(f"  seed {seed} (clean run) FAILED: {why}")
        for seed, figs in s["over_goal"].items():
            print(f"  seed {seed} MISSED the goal: " + ", ".join(
                f"{k} {v:.3f} (goal <= {GOALS[k]})" for k, v in figs.items()))
        if "failover_rtts_p50" in s:
            v = list(s["failover_rtts"].values())
            print(f"  failover_rtts: mean {s['failover_rtts_mean']:.2f}, "
                  f"p50 {s['failover_rtts_p50']:.2f}, p90 "
                  f"{s['failover_rtts_p90']:.2f}, worst {s['failover_rtts_worst']:.2f} (seed "
                  f"{s['failover_rtts_worst_seed']})")
            print("\n".join(_histogram(v, 0.0, max(GOALS["failover_rtts"], max(v)))))
        if "fct_inflation_linkdown_worst" in s:
            print(f"  fct_inflation_linkdown: p50 {s['fct_inflation_linkdown_p50']:.4f}, worst "
                  f"{s['fct_inflation_linkdown_worst']:.4f} (seed "
                  f"{s['fct_inflation_linkdown_worst_seed']})")


def sweep(names: list[str], seeds: list[int], jobs: int = 2, clean: bool = False,
          root: Path | None = None, progress=print) -> list[dict]:
    """Every (configuration, seed) run, ``jobs`` at once; the builds come first, one at a
    time."""
    for name in names:
        _build(CONFIGS[name])
    todo = [(n, s, sc) for n in names for s in seeds
            for sc in (("linkdown", "clean") if clean else ("linkdown",))]

    def label(r):
        what = "ok" if r["error"] is None else f"FAILED: {r['error']}"
        fo = f", failover {r['failover_rtts']:.2f} RTTs" if "failover_rtts" in r else ""
        return f"{r['config']} {r['scenario']} seed {r['seed']}: {what}{fo}"

    runs = harness.run_many(run_one, [(*t, root) for t in todo], jobs, label, progress)
    runs.sort(key=lambda r: (names.index(r["config"]), r["seed"], r["scenario"]))
    return runs


def plot(summary: dict, path: Path) -> None:
    """Each configuration's failover_rtts and FCT inflation, one dot per seed, with the goals."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = list(summary)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key, goal, label in (
            (axes[0], "failover_rtts", GOALS["failover_rtts"],
             "failover (base RTTs after the death)"),
            (axes[1], "fct_inflation_linkdown", GOALS["fct_inflation_linkdown"],
             "completion time, link down / clean")):
        for i, name in enumerate(names):
            v = list(summary[name].get(key, {}).values())
            if v:
                ax.boxplot([v], positions=[i], widths=0.5, showfliers=False)
                ax.scatter([i + (k % 7 - 3) * 0.03 for k in range(len(v))], v, s=10, alpha=0.6)
        ax.axhline(goal, color="red", linestyle="--", linewidth=1, label=f"goal {goal}")
        ax.set_xticks(range(len(names)), names)
        ax.set_title(label)
        ax.legend()
    seeds = max(len(s.get("failover_rtts", {})) for s in summary.values())
    fig.suptitle(f"link down mid-transfer: {seeds} seeds per configuration")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mrcnic.verif.failover_sweep",
                                 description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default="demo,demo_mtu4096,demo_4x8",
                    help=f"comma-separated, of: {', '.join(CONFIGS)}")
    ap.add_argument("--seeds", default="1-50", help="e.g. 1-50 or 3,7,9")
    ap.add_argument("--jobs", type=int, default=2, help="runs at once")
    ap.add_argument("--clean", action="store_true",
                    help="also run each seed without the failure (completion-time inflation)")
    ap.add_argument("--name", default="failover", help="build/sweep/<name>.json")
    ap.add_argument("--against", type=Path, metavar="JSON",
                    help="an earlier sweep's build/sweep/<name>.json: compare seed by seed")
    a = ap.parse_args(argv)
    names = a.configs.split(",")
    bad = [n for n in names if n not in CONFIGS]
    if bad:
        ap.error(f"unknown configuration(s) {bad}; they are {', '.join(CONFIGS)}")
    try:
        seeds = parse_seeds(a.seeds)
    except ValueError as e:
        ap.error(str(e))
    if a.jobs < 1:
        ap.error(f"--jobs must be at least 1, not {a.jobs}")
    earlier = None
    if a.against is not None:
        try:
            earlier = json.loads(a.against.read_text())["summary"]
        except (OSError, ValueError, KeyError) as e:
            ap.error(f"--against {a.against}: not a sweep's results ({e})")
    runs = sweep(names, seeds, a.jobs, a.clean)
    summary = summarise(runs)
    report(summary)
    if earlier is not None:
        for name, p in paired(earlier, summary).items():
            print(f"\n{name} against {a.against}: failover_rtts moved by {p['mean_diff']:+.2f} "
                  f"+- {p['stderr']:.2f} (mean of {p['seeds']} seeds' differences and its "
                  f"standard error; {p['up']} up, {p['down']} down, the largest "
                  f"{p['largest_move']:+.2f})")
    out = harness.BUILD / "sweep" / f"{a.name}.json"
    out.write_text(json.dumps({"runs": runs, "summary": summary}, indent=1))
    print(f"\nwritten: {out}")
    return 0 if passed(summary) else 1


if __name__ == "__main__":
    sys.exit(main())
