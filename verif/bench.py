"""``make bench``: measures what the blocks cost in cycles, and how two NICs ride out a link's
death, and prints the figures.

Figures go to build/bench/results.json (keys ``<block>_util_w<width>_p<payload bytes>``, the
line utilisation of tb_line_rate; ``failover_us``, ``failover_rtts`` and
``fct_inflation_linkdown`` from the two-NIC system; ``system_sim_kcycles_per_s`` and
``incast_sim_kcycles_per_s``, how fast the simulations themselves run; block ``linerate``: one
QP's 1 MiB write alone, ``line_rate_fraction_1mib``; block ``compare``: MRC beside single-path
RoCE and blind spraying; both in verif/compare.py, which writes docs/results.md; block
``scale``: the scale model's fat tree and its agreement with the RTL, verif/scale_sweep.py,
which writes docs/scale.md) along with
how each was measured. ``--baseline DIR`` runs the same two simulations from another checkout
(its own builds, under DIR/build) and reports their speed beside ours.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from mrcnic.verif import builds, compare, failover_sweep, harness, scale_sweep
from mrcnic.verif.tbkit import CLOCK_NS

BLOCKS = {"system": ("system", builds.nic_system),
          "incast": ("incast", builds.incast_system),
          "icrc_insert": ("inserter", builds.icrc_inserter),
          "icrc_check": ("checker", builds.icrc_checker),
          "parser": ("parser", builds.header_parser),
          "tx": ("tx", builds.nic),
          "rx_front": ("rx_front", builds.rx_front),
          "rx": ("rx", builds.rx),
          "synth": ("synth", None),
          "linerate": ("linerate", None),
          "compare": ("compare", None),
          "scale": ("scale", None)}
PAYLOADS = [64, 1024, 4096]
TX_PAYLOADS = {64: [64, 1024, 4096], 512: [1024, 4096]}
TX_PACKETS = {64: 512, 1024: 256, 4096: 128}    # 32 KiB .. 512 KiB of payload
RX_PAYLOADS = {64: [64, 1024], 512: [1024, 4096]}
RX_PACKETS = {64: 256, 1024: 128, 4096: 64}


#: The failover benches' transfer: 256 KiB each way on one QP pair, seed fixed.
SYSTEM_OPTIONS = failover_sweep.CONFIGS["bench"].options
SYSTEM_SEED = 21
#: The same figures over many seeds, in two configurations: where the dead path sits in each
#: NIC's spray, and so how soon it loses its first packets, varies with the seed.
FAILOVER_CONFIGS = ("demo", "bench")
FAILOVER_SEEDS = "1-20"
SYSTEM_HOW = ("two NICs (verif/tb_system.py), 256 KiB written each way on one QP pair, seed "
              f"{SYSTEM_SEED}; failover_us: simulated time from the plane 0 spine 1 link's death "
              "(30% into the transfer, for good) to the last new or retransmitted data packet any "
              "NIC sprays onto a path through it; failover_rtts: the same over the base RTT (the "
              "RTT NIC 0 measures for one full data packet on the idle system, NICs and network "
              "together); fct_inflation_linkdown: time to "
              "complete every write with the link death / without it. failover_rtts_p50, "
              "failover_rtts_worst, fct_inflation_linkdown_worst: the same over seeds "
              f"{FAILOVER_SEEDS} in each of the configurations "
              f"{', '.join(FAILOVER_CONFIGS)} (verif/failover_sweep.py; suffixed _<config> for "
              "one, unsuffixed the worse of them; failover_seeds each seed's; the plot "
              "build/bench/failover.png)")


#: The incast bench: 64 KiB from each sender to NIC 0 and 128 KiB from NIC 1 to NIC 2.
INCAST_OPTIONS = {"sizes": [64 * 1024], "victim_size": 128 * 1024}
INCAST_SEED = 22
INCAST_HOW = ("eight NICs (verif/tb_system.py, scenario incast), NICs 1-7 each write 64 KiB to "
              f"NIC 0 at once and NIC 1 writes 128 KiB to NIC 2, seed {INCAST_SEED}; "
              "(NIC 1 posts the victim after its incast write); incast_victim_share: the NIC 1 -> "
              "NIC 2 write's goodput (the rate its data arrived at NIC 2, from its first data "
              "frame to its last, while the incast runs) over its max-min fair share (NIC 1's "
              "rate less its seventh of NIC 0's, in payload: times MTU / a full data frame's "
              "bytes)")


SPEED_HOW = ("system_sim_kcycles_per_s: simulated NIC clock cycles (250 MHz) per wall-clock "
             "second of the two-NIC linkdown bench run (seed {seed}), from cocotb's results.xml "
             "(simulated time / the test's real time: the Verilator build excluded); "
             "incast_sim_kcycles_per_s: the same for the eight-NIC incast bench run")


def sim_kcycles_per_s(run: Path) -> tuple[float, float, float]:
    """(thousands of simulated clock cycles per wall second, simulated us, wall s) of the cocotb
    run in ``run``, from its results.xml."""
    case = ET.parse(run / "results.xml").find(".//testcase")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    sim_ns, wall = float(props["sim_time_duration"]), float(case.get("time"))
    return sim_ns / CLOCK_NS / wall / 1000, sim_ns / 1000, wall


#: What the baseline checkout runs: the same scenarios through its own harness and builds.
_BASELINE = """
import json, sys
from mrcnic.verif import builds, harness
from mrcnic.verif.tbkit import CLOCK_NS
which, seed, options = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
if which == "incast":
    b, params = builds.incast_system(64), builds.system_params(64, "incast", seed, options, pcaps=False)
else:
    b, params = builds.nic_system(64, 2), builds.system_params(64, "linkdown", seed, options, pcaps=False)
print(harness.run(b, "mrcnic.verif.tb_system", params, tag="bench_speed_" + which))
"""


def baseline_speed(checkout: Path, which: str, seed: int, options: dict) -> tuple:
    """The simulation speed of another checkout of this project on the same scenario: its
    mrcnic package is made importable from a folder of links, ahead of ours."""
    with tempfile.TemporaryDirectory() as tmp:
        pkg = Path(tmp) / "mrcnic"
        pkg.mkdir()
        for f in (checkout / "sw").iterdir():
            (pkg / f.name).symlink_to(f)
        for sub in ("hdl", "verif", "boards"):
            (pkg / sub).symlink_to(checkout / sub)
        env = {**os.environ, "PYTHONPATH": tmp, "MRCNIC_BUILD": str(checkout / "build")}
        r = subprocess.run([sys.executable, "-c", _BASELINE, which, str(seed), json.dumps(options)],
                           env=env, capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(f"the baseline at {checkout} failed:\n{r.stdout[-2000:]}"
                               f"\n{r.stderr[-3000:]}")
        return sim_kcycles_per_s(Path(r.stdout.strip().splitlines()[-1]))


def _speed(results, key, run, baseline, which, seed, options):
    kc, sim_us, wall = sim_kcycles_per_s(run)
    results[key] = round(kc, 3)
    print(f"{key:<28} {kc:.2f}   ({sim_us:.1f} us simulated in {wall:.1f} s)")
    if baseline is not None:
        bkc, bsim, bwall = baseline_speed(baseline, which, seed, options)
        results[f"{key}_baseline"] = round(bkc, 3)
        results[f"{key}_speedup"] = round(kc / bkc, 3)
        print(f"{key + '_baseline':<28} {bkc:.2f}   ({bsim:.1f} us simulated in {bwall:.1f} s by "
              f"{baseline}); speedup {kc / bkc:.2f}x (goal >= 3)")


def _incast(b, results, baseline=None):
    run = harness.run(b, "mrcnic.verif.tb_system",
                      builds.system_params(64, "incast", INCAST_SEED, INCAST_OPTIONS,
                                           pcaps=False), tag="bench_incast")
    _speed(results, "incast_sim_kcycles_per_s", run, baseline, "incast", INCAST_SEED,
           INCAST_OPTIONS)
    r = json.loads((run / "results.json").read_text())
    v = r["victim"]
    results["incast_victim_share"] = round(v["share"], 4)
    print(f"{'incast_victim_share':<28} {v['share']:.4f}   (victim {v['gbps']:.2f} Gb/s / fair "
          f"{v['fair_gbps']:.2f} Gb/s; its data arrived {v['first_us']:.1f}-{v['last_us']:.1f} "
          f"us, it completed at {v['done_us']:.1f} us ({v['fct_gbps']:.2f} Gb/s over its "
          f"completion time), the incast at {v['incast_done_us']:.1f} us; goal >= 0.90)")


def _linkdown(b, seed):
    """The clean and link-down runs of one seed: (failover us, its RTTs, FCT inflation, the
    link-down run's results, the clean run's, the link-down run's directory)."""
    runs, dirs = {}, {}
    for scenario in ("clean", "linkdown"):
        dirs[scenario] = harness.run(
            b, "mrcnic.verif.tb_system",
            builds.system_params(64, scenario, seed, SYSTEM_OPTIONS, pcaps=False),
            tag=f"bench_{scenario}_{seed}")
        runs[scenario] = json.loads((dirs[scenario] / "results.json").read_text())
    down, clean = runs["linkdown"], runs["clean"]
    last = down["failover"][0]["last_after_us"] or 0.0
    return (last, last / down["base_rtt_us"], down["fct_us"] / clean["fct_us"], down, clean,
            dirs["linkdown"])


def _system(b, results, baseline=None):
    last, rtts, inflation, down, clean, run = _linkdown(b, SYSTEM_SEED)
    _speed(results, "system_sim_kcycles_per_s", run, baseline, "system", SYSTEM_SEED,
           SYSTEM_OPTIONS)
    results["failover_us"] = round(last, 3)
    results["failover_rtts"] = round(rtts, 3)
    results["fct_inflation_linkdown"] = round(inflation, 4)
    print(f"{'failover_us':<28} {last:.3f}   (last data packet onto the dead path after it "
          f"died; base RTT {down['base_rtt_us']:.2f} us, {down['wire_rtt_us']:.2f} us of it "
          "on the wire)")
    goals = failover_sweep.GOALS
    print(f"{'failover_rtts':<28} {results['failover_rtts']:.3f}   "
          f"(goal <= {goals['failover_rtts']})")
    print(f"{'fct_inflation_linkdown':<28} {results['fct_inflation_linkdown']:.4f}   "
          f"({down['fct_us']:.1f} us with the link death / {clean['fct_us']:.1f} us without; "
          f"goal <= {goals['fct_inflation_linkdown']})")
    _failover_seeds(results)


def _failover_seeds(results):
    """The failover figures' distribution over FAILOVER_SEEDS in each FAILOVER_CONFIGS."""
    seeds = failover_sweep.parse_seeds(FAILOVER_SEEDS)
    print(f"  ({len(seeds)} seeds x {len(FAILOVER_CONFIGS)} configurations, each with and "
          "without the link death ...)", flush=True)
    runs = failover_sweep.sweep(list(FAILOVER_CONFIGS), seeds, jobs=os.cpu_count() or 1,
                                clean=True, root=harness.BUILD / "bench" / "failover",
                                progress=None)
    summary = failover_sweep.summarise(runs)
    for stale in [k for k in results if k.startswith(("failover_rtts_", "fct_inflation_"))]:
        del results[stale]
    keys = ("failover_rtts_p50", "failover_rtts_worst", "fct_inflation_linkdown_worst")
    goals = {f"{k}_worst": f"<= {v}" for k, v in failover_sweep.GOALS.items()}
    for name, s in summary.items():
        failed = {**s["failed"], **{f"{k} (clean)": v for k, v in s["clean_failed"].items()}}
        if failed:
            print(f"  {name}: FAILED on seeds {failed}")
        if s["over_goal"]:
            print(f"  {name}: MISSED a goal on seeds {s['over_goal']}")
        for key in keys:
            results[f"{key}_{name}"] = round(s[key], 4)
            worst = (f", seed {s[key + '_seed']}" if key + "_seed" in s else "")
            print(f"{key + '_' + name:<36} {s[key]:.3f}   ({s['passed']}/{s['runs']} seeds "
                  f"passed{worst}{'; goal ' + goals[key] if key in goals else ''})")
    # Unsuffixed: the worse configuration's worst; the median of every seed of both.
    for key in keys[1:]:
        results[key] = max(results[f"{key}_{n}"] for n in summary)
    results["failover_rtts_p50"] = round(statistics.median(
        v for s in summary.values() for v in s["failover_rtts"].values()), 4)
    results["failover_seeds"] = {name: {"failover_rtts": s["failover_rtts"],
                                        "fct_inflation_linkdown": s["fct_inflation_linkdown"],
                                        "failed": s["failed"]}
                                 for name, s in summary.items()}
    plot = harness.BUILD / "bench" / "failover.png"
    failover_sweep.plot(summary, plot)
    print(f"  (plot: {plot})")


SYNTH_HOW = ("synth_<block>_<cell>: ECP5 cells of each block alone at the NIC's default "
             "configuration (64 bits), and of the whole NIC at it and at boards/synth.py's "
             "BOARD_NIC (nic_board), from the PyPI Yosys's synth_ecp5 (python -m "
             "mrcnic.boards.synth, build/synth/); synth_<block>_status: ok, or crashed / "
             "timeout / error with no cells; synth_<block>_lut4_sites: the LUT4 sites "
             "nextpnr-ecp5's packer gives it (logic, carry chains and distributed RAM), and "
             "_pct_<device> their share of each board's device; then each board's bitstream "
             "at its default configuration (python -m mrcnic.boards.bitstream, build/<board>/"
             "report.json): fmax_core_mhz_<board>, fmax_rgmii_rx_mhz_<board> and "
             "fmax_rgmii_tx_mhz_<board> (the slowest port's) from nextpnr's timing after "
             "routing, lut_pct_<board> (LUT4 sites) and bram_pct_<board> (DP16KD) of the device, "
             "nic_config_<board> the configuration built")


def _synth(results, names=None):
    """Every block (or ``names``) through synth_ecp5, a block per core, each given
    boards.synth's timeout."""
    from mrcnic.boards import synth
    runs = synth.synth_blocks(list(names or synth.BLOCKS), jobs=os.cpu_count() or 1,
                              progress=lambda line: print(f"  {line}", flush=True), pack=True)
    for stale in [k for k in results if k.startswith(tuple(f"synth_{n}_" for n in runs))]:
        del results[stale]
    for name, r in runs.items():
        results[f"synth_{name}_status"] = r["status"]
        for cell, column in synth.CELLS.items():
            if r["status"] == "ok":
                results[f"synth_{name}_{column.lower()}"] = r["cells"].get(cell, 0)
        if "packed" in r:
            results[f"synth_{name}_lut4_sites"] = r["packed"]["TRELLIS_COMB"]
            for dev, fill in r["fill"].items():
                results[f"synth_{name}_lut4_sites_pct_{dev.lower().replace('-', '_')}"] = \
                    fill["TRELLIS_COMB"]
    print(synth.report(runs))
    # Each board's bitstream at its default configuration, one after the other.
    from mrcnic.boards import bitstream
    for board in bitstream.targets.BOARDS:
        report = bitstream.build(board, say=lambda line: print(f"  {line}", flush=True),
                                 yosys_steps=False)
        results.update(bitstream.bench_figures(report))
        print(bitstream.summary(report))
        device = bitstream.targets.board(board).platform.device
        results[f"nic_budget_lut4_sites_{board}"] = bitstream.targets.nic_budget(device)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="make bench", description=__doc__)
    ap.add_argument("--widths", default="64,512", help="data widths, comma-separated")
    ap.add_argument("--blocks", default=",".join(BLOCKS), help="blocks, comma-separated")
    ap.add_argument("--baseline", metavar="DIR", type=Path,
                    help="another checkout of this project: also run the system and incast "
                         "simulations there and report their speed beside ours")
    args = ap.parse_args(argv)
    if args.baseline is not None and not (args.baseline / "verif" / "tb_system.py").exists():
        ap.error(f"--baseline {args.baseline}: not a checkout of this project "
                 "(no verif/tb_system.py)")
    try:
        widths = [int(w) for w in args.widths.split(",")]
    except ValueError:
        ap.error(f"--widths must be numbers like 64,512, not {args.widths!r}")
    blocks = args.blocks.split(",")
    for b in blocks:
        if b not in BLOCKS:
            ap.error(f"unknown block {b!r}; blocks are {', '.join(BLOCKS)}")
    out = harness.BUILD / "bench"
    out.mkdir(parents=True, exist_ok=True)
    path = out / "results.json"
    results = json.loads(path.read_text()) if path.exists() else {}
    for block in blocks:
        dut, build = BLOCKS[block]
        if dut == "linerate":
            t0 = time.monotonic()
            compare.line_rate(results, os.cpu_count() or 1, docs=harness.ROOT / "docs")
            print(f"  ({block}: {time.monotonic() - t0:.0f} s)", file=sys.stderr)
            continue
        if dut == "compare":
            t0 = time.monotonic()
            compare.bench(results, os.cpu_count() or 1, docs=harness.ROOT / "docs")
            print(f"  ({block}: {time.monotonic() - t0:.0f} s)", file=sys.stderr)
            continue
        if dut == "scale":
            t0 = time.monotonic()
            scale_sweep.bench(results, os.cpu_count() or 1, docs=harness.ROOT / "docs")
            print(f"  ({block}: {time.monotonic() - t0:.0f} s)", file=sys.stderr)
            continue
        if dut == "synth":
            t0 = time.monotonic()
            _synth(results)
            print(f"  ({block}: {time.monotonic() - t0:.0f} s)", file=sys.stderr)
            continue
        for w in widths:
            if dut in ("system", "incast") and w != 64:
                continue          # the systems are simulated at 64 bits only: build nothing
            t0 = time.monotonic()
            b = build(w)
            if dut == "tx":
                for payload in TX_PAYLOADS.get(w, PAYLOADS):
                    run = harness.run(b, "mrcnic.verif.tb_tx_rate",
                                      {**builds.NIC_CONFIG, "width": w, "payload": payload,
                                       "packets": TX_PACKETS[payload]}, tag=f"bench_p{payload}")
                    f = json.loads((run / "tx_rate.json").read_text())
                    key = f"tx_util_w{w}_p{payload}"
                    results[key] = round(f["utilisation"], 4)
                    results[f"tx_latency_w{w}_p{payload}"] = f["latency"]
                    print(f"{key:<28} {f['utilisation']:.4f}   ({f['ideal_cycles']} ideal / "
                          f"{f['cycles']} cycles, {f['packets']} packets; first beat out "
                          f"{f['latency']} cycles after the first request)")
                print(f"  ({block} w{w}: {time.monotonic() - t0:.0f} s)", file=sys.stderr)
                continue
            if dut in ("rx_front", "rx"):
                config = builds.RX_FRONT_CONFIG if dut == "rx_front" else builds.RX_CONFIG
                for payload in RX_PAYLOADS.get(w, PAYLOADS):
                    run = harness.run(b, "mrcnic.verif.tb_rx_rate",
                                      {**config, "width": w, "payload": payload,
                                       "packets": RX_PACKETS[payload]}, tag=f"bench_p{payload}",
                                      testcase=f"{dut}_rate")
                    f = json.loads((run / "rx_rate.json").read_text())
                    key = f"{dut}_util_w{w}_p{payload}"
                    results[key] = round(f["utilisation"], 4)
                    print(f"{key:<28} {f['utilisation']:.4f}   ({f['ideal_cycles']} ideal / "
                          f"{f['cycles']} cycles, {f['packets']} SRv6 frames offered)")
                print(f"  ({block} w{w}: {time.monotonic() - t0:.0f} s)", file=sys.stderr)
                continue
            if dut in ("system", "incast"):
                (_system if dut == "system" else _incast)(b, results, args.baseline)
                print(f"  ({block}: {time.monotonic() - t0:.0f} s)", file=sys.stderr)
                continue
            count = 40 if w == 64 else 100
            run = harness.run(b, "mrcnic.verif.tb_line_rate",
                              {"dut": dut, "width": w, "payloads": PAYLOADS, "count": count},
                              tag="bench")
            figures = json.loads((run / "line_rate.json").read_text())
            for payload, f in figures.items():
                key = f"{block}_util_w{w}_p{payload}"
                results[key] = round(f["utilisation"], 4)
                print(f"{key:<28} {f['utilisation']:.4f}   ({f['ideal_cycles']} ideal / "
                      f"{f['cycles']} cycles, {f['frames']} frames)")
            print(f"  ({block} w{w}: {time.monotonic() - t0:.0f} s)", file=sys.stderr)
    results["_how_system"] = SYSTEM_HOW
    results["_how_incast"] = INCAST_HOW
    results["_how_speed"] = SPEED_HOW.format(seed=SYSTEM_SEED)
    results["_how_synth"] = SYNTH_HOW
    results["_how"] = ("line utilisation: ideal back-to-back cycles of the frames that leave / "
                       "cycles from first beat (tx: first work request) in to last beat out; "
                       "input back-to-back, output never back-pressured (verif/tb_line_rate.py, "
                       "verif/tb_tx_rate.py); tx_latency: cycles from the first work request to "
                       "the first beat out, counted once inside the tx span; rx_front: wire "
                       "cycles of back-to-back SRv6 frames offered on one plane / cycles until "
                       "the RX front end took them; rx: the same with data packets of one QP in order, each "
                       "placed, acknowledged and completed, memory never back-pressured "
                       "(verif/tb_rx_rate.py)")
    path.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    print(f"written: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
