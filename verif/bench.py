"""``make bench``: measures what the blocks cost in cycles and prints the figures.

Figures go to build/bench/results.json (keys ``<block>_util_w<width>_p<payload bytes>``, the
line utilisation of tb_line_rate) along with how each was measured.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from mrcnic.verif import builds, harness

BLOCKS = {"icrc_insert": ("inserter", builds.icrc_inserter),
          "icrc_check": ("checker", builds.icrc_checker),
          "parser": ("parser", builds.header_parser),
          "tx": ("tx", builds.nic),
          "rx_front": ("rx_front", builds.rx_front),
          "rx": ("rx", builds.rx)}
PAYLOADS = [64, 1024, 4096]
TX_PAYLOADS = {64: [64, 1024, 4096], 512: [1024, 4096]}
TX_PACKETS = {64: 512, 1024: 256, 4096: 128}    # 32 KiB .. 512 KiB of payload
RX_PAYLOADS = {64: [64, 1024], 512: [1024, 4096]}
RX_PACKETS = {64: 256, 1024: 128, 4096: 64}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="make bench", description=__doc__)
    ap.add_argument("--widths", default="64,512", help="data widths, comma-separated")
    ap.add_argument("--blocks", default=",".join(BLOCKS), help="blocks, comma-separated")
    args = ap.parse_args(argv)
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
        for w in widths:
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
