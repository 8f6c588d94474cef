"""``make demo``: two MRC NICs, the whole gateware each, writing to each other across a simulated
multi-plane leaf-spine network that breaks mid-transfer.

What runs where:
  NICs       gateware under Verilator (verif/nic_system.py): two instances of the NIC, each
             with its host memory: segmenter, spray scheduler, SRv6 encapsulation, RX parsing,
             decapsulation, ICRC, placement, SACK/NACK generation, the reliability engine
             (selective retransmit, EV health, probes, port status, NSCC)
  network    verif/network.py, in cocotb: every plane a leaf-spine of its own, each link a
             queue with a rate and a latency; switches forward by uSID (shift-and-forward), mark
             ECN and trim when full; the scenario kills a link or a plane at a given time
  checks     every byte written lands, byte-exact; every message completes exactly once on
             both sides (verif/tb_system.py)

Each run prints its seed; ``--seed`` replays it exactly.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import shutil
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from mrcnic.verif import builds, harness
from mrcnic.verif.fabric import FORMATS, nic_mac
from mrcnic.verif.failover_sweep import demo_options
from mrcnic.verif.scenarios import KIB, SCENARIOS
from mrcnic.verif.tx_model import MTUS


def _args(argv):
    ap = argparse.ArgumentParser(prog="make demo ARGS=...", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    # (the demo is two NICs: the eight-NIC incast is for the tests and the bench)
    two = {k: v for k, v in sorted(SCENARIOS.items()) if v.hosts == 2}
    ap.add_argument("--scenario", default="linkdown", choices=list(two),
                    help="; ".join(f"{k}: {v.about}" for k, v in two.items()).replace("%", "%%"))
    ap.add_argument("--size", type=int, default=256 * KIB,
                    help="bytes of the largest write (1 .. 1 MiB); smaller ones go too")
    ap.add_argument("--mtu", type=int, default=1024, help=f"one of {MTUS}")
    ap.add_argument("--planes", type=int, default=2, help="network planes: 1, 2 or 4")
    ap.add_argument("--spines", type=int, default=4, help="spines per plane (1..8)")
    ap.add_argument("--fabric", default="model", choices=("model", "linux"),
                    help="model: the timed network model (verif/network.py); linux: a real "
                         "Linux SRv6 fabric in network namespaces, the kernel forwarding (root; "
                         "scenarios clean and linkdown; make demo-linux)")
    ap.add_argument("--format", default="F3216", choices=list(FORMATS),
                    help="the route format: F3216 (32-bit locator block) or F1616")
    ap.add_argument("--seed", type=int, default=None, help="replay a run (printed each run)")
    ap.add_argument("--out", default=str(harness.BUILD / "demo"), help="where results go")
    a = ap.parse_args(argv)
    if not 1 <= a.size <= 1 << 20:
        ap.error(f"--size must be 1 .. 1048576 bytes, not {a.size}")
    if a.mtu not in MTUS:
        ap.error(f"--mtu must be one of {MTUS}, not {a.mtu}")
    if a.planes not in (1, 2, 4):
        ap.error(f"--planes must be 1, 2 or 4, not {a.planes}")
    if not 1 <= a.spines <= 8:
        ap.error(f"--spines must be 1 .. 8, not {a.spines}")
    if a.scenario == "planedown" and a.planes < 2:
        ap.error("--scenario planedown needs at least 2 planes")
    if a.fabric == "linux":
        if a.scenario not in ("clean", "linkdown"):
            ap.error(f"--fabric linux runs the clean and linkdown scenarios, not {a.scenario}")
        from mrcnic.verif.linux_fabric import unsupported
        why = unsupported()
        if why:
            ap.error(f"--fabric linux cannot run here: {why}")
    if a.scenario == "linkdown" and a.spines < 2:
        ap.error("--scenario linkdown needs at least 2 spines")
    return a


def _stage(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _follow(path: Path, stop: threading.Event):
    """Prints the testbench's progress as it writes it."""
    seen = 0
    while not stop.is_set():
        time.sleep(1.0)
        if not path.exists():
            continue
        lines = path.read_text().splitlines()
        for line in lines[seen:]:
            try:
                e = json.loads(line)
            except ValueError:
                break
            seen += 1
            if e["event"] == "progress":
                print(f"  t = {e['t_us']:8.1f} us   {e['done']}/{e['total']} messages complete, "
                      f"{e['landed'] / 1024:7.1f} of {e['bytes'] / 1024:.1f} KiB landed",
                      flush=True)
            elif e["event"] == "failure":
                print(f"  t = {e['t_us']:8.1f} us   {e['what']}", flush=True)


def main(argv=None) -> int:
    a = _args(argv)
    seed = a.seed if a.seed is not None else random.randrange(1 << 31)
    out = Path(a.out).resolve()     # (the simulation runs in its own directory)
    out.mkdir(parents=True, exist_ok=True)
    sc_cls = SCENARIOS[a.scenario]
    options = demo_options(a.size, a.mtu)
    sizes = options["sizes"]
    sc = sc_cls(planes=a.planes, spines=a.spines, width=64, **options)
    print(f"mrcnic demo: scenario {a.scenario} ({sc.about}); seed {seed}")
    print(f"  two NICs, {a.planes} planes x {a.spines} spines, MTU {a.mtu}; writes of "
          + ", ".join(str(s) for s in sizes) + " bytes over both NICs' QPs, each way")

    _stage("building the two-NIC system under Verilator (cached after the first run)")
    b = builds.nic_system(64, 2, planes=a.planes, spines=a.spines)
    params = builds.system_params(64, a.scenario, seed, options, planes=a.planes,
                                  spines=a.spines, out=str(out), format=a.format)
    progress = out / "progress.jsonl"
    if progress.exists():
        progress.unlink()
    stop = threading.Event()
    follower = threading.Thread(target=_follow, args=(progress, stop), daemon=True)
    failed = None
    with contextlib.ExitStack() as stack:
        if a.fabric == "linux":
            _stage(f"building the Linux SRv6 fabric: {a.planes} planes x (2 leaves + "
                   f"{a.spines} spines), a namespace each, seg6local End next-csid ({a.format})")
            params.update(_linux(stack, a, out))
            _stage("running: the kernel forwards every frame; the simulated NICs reach it "
                   "through TAP devices")
        else:
            _stage(f"running: about {sc.transfer_us():.0f} us of network time to simulate")
        follower.start()
        try:
            harness.run(b, "mrcnic.verif.tb_system", params, run_dir=out / "sim")
        except harness.SimulationFailed as e:
            failed = str(e)
        finally:
            stop.set()
            follower.join()
    results_file = out / "results.json"
    if failed or not results_file.exists():
        # The assertion that stopped it, without the simulator's log around it.
        lines = (failed or "the simulation ended without results").splitlines()
        why = [ln.strip() for ln in lines if "Error:" in ln] or lines[-20:]
        print("FAILED: " + "\n  ".join(why))
        print(f"  (the whole story: {out}/pcap is what the links carried, {out}/sim/sim.log "
              "the simulation's log)")
        print(f"\nreplay: {_replay(a, seed)}")
        return 1
    r = json.loads(results_file.read_text())
    _summary(r, a, out)
    return 0


def _linux(stack, a, out) -> dict:
    """Builds the Linux fabric for the run (torn down when ``stack`` closes); the testbench's
    parameters that put the NICs on it."""
    from mrcnic.verif.linux_fabric import LinuxFabric
    from mrcnic.verif.linux_net import spec
    block, bits = FORMATS[a.format]
    pcaps = out / "pcap"
    if pcaps.exists():
        shutil.rmtree(pcaps)
    fab = stack.enter_context(LinuxFabric(
        planes=a.planes, spines=a.spines, hosts=2, block=block, block_bits=bits,
        nic_macs={(h, p): nic_mac(h) for h in range(2) for p in range(a.planes)},
        pcap_dir=pcaps))
    return {"linux": spec(fab), "pcaps": False}


def _summary(r, a, out):
    P, S = r["planes"], r["spines"]
    print()
    print("summary")
    print(f"  seed               {r['seed']}  (replay: {_replay(a, r['seed'])})")
    print(f"  messages           {r['messages']}, {r['bytes']} bytes, all byte-exact, each "
          "completed once on both sides")
    print(f"  transfer           {r['fct_us']:.1f} us of simulated time; goodput "
          f"{r['goodput_gbps']:.2f} Gb/s (both NICs together)")
    for h, c in enumerate(r["rel"]):
        print(f"  NIC {h} sent again   {c['rtx_sack']} for SACK holes, {c['rtx_trim']} for trims, "
              f"{c['rtx_timeout']} on timeouts; EVs set SKIP {c['ev_skip']}, ASSUMED_BAD "
              f"{c['ev_bad']}; probes {c['probes_sent']} sent, {c['probes_answered']} answered; "
              f"port status {c['status_sent']} sent, {c['status_received']} received")
    net = r["network"]
    if a.fabric == "linux":
        print(f"  network            Linux routers ({a.format}, seg6local End next-csid): "
              f"{net.get('sent', 0)} frames sent into them, {net.get('delivered', 0)} delivered "
              "to the NICs")
    else:
        print(f"  network            {net.get('delivered', 0)} link deliveries; lost "
              f"{net.get('lost', 0)}, dropped at dead links {net.get('dropped_down', 0)}, "
              f"trimmed {net.get('trimmed', 0)}, ECN-marked {net.get('ecn_marked', 0)}, "
              f"duplicated {net.get('duplicated', 0)}")
    for f, fo in zip(r["failures"], r["failover"], strict=True):
        until = ("never returns" if f["until_us"] is None
                 else f"returns at {f['until_us'] - r['t0_us']:.1f} us")
        print(f"  failure            {f['what']}: dies at {f['at_us'] - r['t0_us']:.1f} us, {until}")
        if fo["last_after_us"] is None:
            print("  failover           no data packet was sprayed onto it after it died")
        else:
            print(f"  failover           the last data packet sprayed onto it left "
                  f"{fo['last_after_us']:.2f} us after it died "
                  f"({fo['last_after_us'] / r['base_rtt_us']:.2f} base RTTs of "
                  f"{r['base_rtt_us']:.2f} us, as NIC 0 measured it idle; "
                  + ("the Linux routers take no simulated time)" if a.fabric == "linux" else
                     f"{r['wire_rtt_us']:.2f} us of it on the wire)"))
    # Per EV: its state for host 0's QP 0, at each snapshot.
    for label, states in r["ev_states"].items():
        entries = states.get("0.0", [])
        counts = Counter(s for _, _, s in entries)
        print(f"  EV states ({label:9s}) NIC 0 QP 0: "
              + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + "   "
              + " ".join(f"p{p}s{s}:{st[0]}" for p, s, st in entries))
    # Traffic per path.
    per_path = Counter()
    for pkts in r["sent"].values():
        for _, _, ev, *_ in pkts:
            per_path[_path(ev, P, S)] += 1
    print("  frames per path    " + "  ".join(f"p{p}s{s}: {per_path[(p, s)]}"
                                               for p in range(P) for s in range(S)))
    _plot(out / "paths.png", r)
    if a.fabric == "linux":
        print(f"\n  pcaps: {out}/pcap/ (one per link direction of the Linux fabric, wall-clock "
              "stamps; a spine's, e.g. p0_leaf0-p0_spine1.pcap then p0_spine1-p0_leaf1.pcap, "
              "show the outer destination shift one uSID a hop; tshark or `mrcnic decode`)")
    else:
        print(f"\n  pcaps: {out}/pcap/ (one per link direction, e.g. p0_host0-p0_leaf0.pcap; "
              "open with wireshark or `mrcnic decode FILE`)")
    print(f"  plot:  {out}/paths.png (frames per path over time)")
    print(f"  data:  {out}/results.json")


def _replay(a, seed) -> str:
    verb = "make demo-linux" if a.fabric == "linux" else "make demo"
    fmt = f" --format {a.format}" if a.format != "F3216" else ""
    return f"{verb} ARGS='--scenario {a.scenario} --seed {seed}{fmt}'"


def _path(ev, planes, spines):
    from mrcnic.evmap import EvLayout
    lay = EvLayout(planes, spines)
    return lay.plane(ev), lay.spine(ev)


def _plot(path, r):
    """One row per path, a dot per frame a NIC sent onto it: new data, retransmissions and
    control frames (acknowledgements, probes, port status) apart; the outage shaded."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mrcnic import wire
    P, S = r["planes"], r["spines"]
    data = {int(op) for op in wire.DATA_OPCODES}
    kinds = {"new data": ([], [], "tab:blue", 6), "retransmission": ([], [], "tab:red", 14),
             "control": ([], [], "tab:gray", 3)}
    for pkts in r["sent"].values():
        for t, _, ev, op, _, rtx, _ in pkts:
            p, s = _path(ev, P, S)
            kind = "control" if op not in data else "retransmission" if rtx else "new data"
            kinds[kind][0].append(t)
            kinds[kind][1].append(p * S + s + {"new data": 0, "retransmission": 0.15,
                                              "control": -0.2}[kind])
    fig, ax = plt.subplots(figsize=(11, 0.45 * P * S + 2))
    for label, (xs, ys, colour, size) in kinds.items():
        ax.scatter(xs, ys, s=size, c=colour, label=label, linewidths=0)
    for f in r["failures"]:
        start = f["at_us"] - r["t0_us"]
        stop = (f["until_us"] - r["t0_us"]) if f["until_us"] is not None else r["fct_us"]
        ax.axvspan(start, stop, color="k", alpha=0.08, label=f"{f['what']} down")
    ax.set_yticks(range(P * S))
    ax.set_yticklabels([f"plane {p} spine {s}" for p in range(P) for s in range(S)])
    ax.set_xlabel("simulated time (us)")
    ax.set_title(f"mrcnic demo: {r['scenario']}, seed {r['seed']}: frames sent per path")
    ax.legend(loc="upper right", fontsize=7, markerscale=2)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
