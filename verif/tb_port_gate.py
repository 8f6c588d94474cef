"""cocotb test of the port gate: exactly the frames whose first beat found the port enabled
come out, whole and in order; every other one is discarded whole and counted, however the
enable toggles mid-frame and however the output holds back."""

import random

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge, RisingEdge
from scapy.compat import raw

from mrcnic.verif.packets import random_mrc
from mrcnic.verif.tbkit import params, pauses, setup, sink, source


@cocotb.test()
async def whole_frames_pass_or_are_counted(dut):
    p = params()
    rng = random.Random(p["seed"])
    beat = p["width"] // 8
    await setup(dut)
    src, snk = source(dut, "i"), sink(dut, "o")
    snk.set_pause_generator(pauses(rng, 0.3))
    frames = [raw(random_mrc(rng, max_payload=rng.choice([1, 40, 600])))
              for _ in range(p["count"])]
    passed, dropped = [], 0
    dut.enable.value = 1

    async def feed():
        for f in frames:
            await src.send(f)

    async def toggle():
        while True:                  # the enable changes at any beat, often mid-frame
            await ClockCycles(dut.clk, rng.randrange(1, 3 * (len(frames[0]) // beat + 2)))
            await RisingEdge(dut.clk)     # (so it is settled when watch() reads it)
            dut.enable.value = rng.random() < 0.6

    async def watch():
        """Each frame's fate, read where its first beat is taken."""
        nonlocal dropped
        n, first = 0, True
        while n < len(frames):
            await FallingEdge(dut.clk)
            if int(dut.i_tvalid.value) and int(dut.i_tready.value):
                if first and int(dut.enable.value):
                    passed.append(frames[n])
                elif first:
                    dropped += 1
                first = bool(int(dut.i_tlast.value))
                n += first

    cocotb.start_soon(feed())
    toggler = cocotb.start_soon(toggle())
    await watch()
    toggler.cancel()
    assert 0 < dropped < len(frames), f"{dropped} of {len(frames)} dropped: the test shows nothing"
    for k, want in enumerate(passed):
        got = bytes((await snk.recv()).tdata)
        assert got == want, f"frame {k} that passed came out changed"
    await ClockCycles(dut.clk, 50)
    assert snk.empty(), "a frame came out that should have been discarded"
    assert int(dut.dropped.value) == dropped, \
        f"dropped counts {int(dut.dropped.value)}, {dropped} frames were discarded"
