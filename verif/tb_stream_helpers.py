"""cocotb test of the stream helpers: frames pass through a register slice or a FIFO unchanged,
in order, whatever the gaps on the input and the back-pressure on the output."""

import random

import cocotb
from cocotb.triggers import ClockCycles
from scapy.compat import raw

from mrcnic.verif.packets import random_mrc
from mrcnic.verif.tbkit import params, pauses, setup, sink, source


@cocotb.test()
async def frames_pass_unchanged(dut):
    p = params()
    rng = random.Random(p["seed"])
    frames = [raw(random_mrc(rng, max_payload=300)) for _ in range(p["count"])]
    await setup(dut)
    src, snk = source(dut, "i"), sink(dut, "o")
    # Phases: free-flowing, then heavy gaps, then heavy back-pressure.
    for gap, bp in ((0.0, 0.0), (0.6, 0.1), (0.1, 0.7)):
        src.set_pause_generator(pauses(rng, gap) if gap else None)
        snk.set_pause_generator(pauses(rng, bp) if bp else None)
        if not gap:
            src.pause = False   # a killed pause generator may leave its last state behind
        if not bp:
            snk.pause = False
        for f in frames:
            await src.send(f)
        for n, f in enumerate(frames):
            got = await snk.recv()
            assert bytes(got.tdata) == f, f"frame {n} (gap {gap}, back-pressure {bp}) changed"
        await ClockCycles(dut.clk, 4)
