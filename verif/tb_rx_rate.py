"""cocotb bench: RX front-end utilisation.

Back-to-back SRv6 frames (outer IPv6 to the uSID carrier, ICRC right) offered on plane 0 with no
gap, the output never back-pressured. Utilisation = the cycles the offered stream takes on the
wire (each frame ceil(bytes / bytes per beat) beats, no idle cycle) / the cycles from the first
beat offered to the last beat taken (1.0 = the input was never held). Writes ``rx_rate.json``
into the run directory.
"""

import json
import random

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge
from scapy.compat import raw

from mrcnic.evmap import EvLayout, UsidTemplate
from mrcnic.verif.packets import encapsulate, random_mrc
from mrcnic.verif.tbkit import params, run_dir, setup, sink, source


@cocotb.test()
async def rx_rate(dut):
    p = params()
    rng = random.Random(1)
    L = p["width"] // 8
    layout = EvLayout(p["planes"], 4)
    tpl = UsidTemplate(0xFCBB, (0x120, 0x110, 0x130), spine_index=1)
    frames = []
    for _ in range(p["packets"]):
        ev = layout.make(0, rng.randrange(4), rng.getrandbits(32))
        pkt = random_mrc(rng, payload=p["payload"], ev=ev)
        frames.append(raw(encapsulate(pkt, tpl, layout, ev)))
    await setup(dut)
    src, out = source(dut, "plane0"), sink(dut, "o")
    for f in frames:
        src.send_nowait(f)
    cycle, first, last, taken = 0, None, None, 0
    total = sum(-(-len(f) // L) for f in frames)
    while taken < total:
        await RisingEdge(dut.clk)
        cycle += 1
        if int(dut.plane0_tvalid.value):
            first = first or cycle
            if int(dut.plane0_tready.value):
                taken += 1
                last = cycle
    for _ in frames:
        await out.recv()
    await ClockCycles(dut.clk, 2)
    assert int(dut.frames.value) == len(frames), "not every frame passed"
    (run_dir() / "rx_rate.json").write_text(json.dumps({
        "payload": p["payload"], "packets": len(frames), "ideal_cycles": total,
        "cycles": last - first + 1, "utilisation": total / (last - first + 1)}))
