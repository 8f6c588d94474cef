"""cocotb test of the counter bank: every read, whenever it comes and however the counters
move, is the sum of every increment given before it, wrapped to the bank's width; a reset
clears every count."""

import random

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge, RisingEdge

from mrcnic.verif.tbkit import params, setup


@cocotb.test()
async def every_read_is_the_sum_of_the_increments_before_it(dut):
    p = params()
    rng = random.Random(p["seed"])
    steps, mask = p["steps"], (1 << p["width"]) - 1
    lane = max(steps)
    await setup(dut)
    counts = [0] * len(steps)

    async def run(cycles, burst):
        """``cycles`` cycles of increments (all counters at their largest in a burst), with a
        read now and then, each checked against the sum of the increments before it."""
        pending = None                      # (counter, expected) of the read issued last cycle
        for cycle in range(cycles):
            await FallingEdge(dut.clk)
            if pending is not None:
                k, want = pending
                got = int(dut.rd_data.value)
                assert got == want, f"cycle {cycle}: counter {k} read {got:#x}, not {want:#x}"
            incs = [((1 << s) - 1) if burst else rng.choice([0, 0, 1, rng.randrange(1 << s)])
                    for s in steps]
            # bits above a counter's step are not its increment
            dut.inc.value = sum((v | (rng.randrange(1 << (lane - s)) << s if s < lane else v))
                                << (lane * i) for i, (v, s) in enumerate(zip(incs, steps, strict=True)))
            k = rng.randrange(len(steps))
            read = rng.random() < 0.3
            dut.rd_en.value, dut.rd_addr.value = int(read), k
            pending = (k, counts[k] & mask) if read else None
            for i, v in enumerate(incs):
                counts[i] += v
        await FallingEdge(dut.clk)
        dut.rd_en.value, dut.inc.value = 0, 0
        if pending is not None:
            assert int(dut.rd_data.value) == pending[1]

    async def read_all():
        for k in range(len(steps)):
            await FallingEdge(dut.clk)
            dut.rd_en.value, dut.rd_addr.value = 1, k
            await FallingEdge(dut.clk)
            dut.rd_en.value = 0
            assert int(dut.rd_data.value) == counts[k] & mask, f"counter {k}"

    # Right after reset, while the first round clears the words, reads and increments agree.
    await run(p["cycles"] // 3, burst=False)
    # Every counter at its largest increment every cycle: no pending count overflows, and the
    # narrow bank wraps.
    await run(200 + 40 * len(steps), burst=True)
    await run(p["cycles"], burst=False)
    await read_all()

    # The data read stays until the next read.
    await FallingEdge(dut.clk)
    dut.rd_en.value, dut.rd_addr.value = 1, 0
    await FallingEdge(dut.clk)
    dut.rd_en.value, dut.inc.value = 0, 1
    held = int(dut.rd_data.value)
    await ClockCycles(dut.clk, 5)
    assert int(dut.rd_data.value) == held
    dut.inc.value = 0
    counts[0] += 5

    # A reset clears every counter, even ones that counted a moment before.
    await RisingEdge(dut.clk)
    dut.rst.value = 1
    await ClockCycles(dut.clk, 2)
    dut.rst.value = 0
    counts = [0] * len(steps)
    await run(len(steps) * 3 + 50, burst=False)
    await read_all()
