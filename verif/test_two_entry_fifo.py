"""TwoEntryFIFO in Amaranth's simulator, beside Amaranth's own SyncFIFOBuffered of depth 2 (the
queue it stands in for), both given the same writes and reads at random: every port agrees on
every cycle, so the blocks that use it behave as they did with Amaranth's."""

import random

from amaranth import Module
from amaranth.hdl import Fragment
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.sim import Simulator

from mrcnic.hdl.two_entry_fifo import TwoEntryFIFO, buffered_fifo

CYCLES = 3000
OUTPUTS = ("w_rdy", "r_rdy", "level")


def test_two_entry_fifo_matches_amaranths_buffered_fifo():
    m = Module()
    m.submodules.dut = dut = TwoEntryFIFO(12)
    m.submodules.ref = ref = SyncFIFOBuffered(width=12, depth=2)
    sim = Simulator(m)
    sim.add_clock(1e-8)
    rng = random.Random(7)
    seen = {"writes": 0, "reads": 0, "full": 0}

    async def bench(ctx):
        for cycle in range(CYCLES):
            # (bursts of each rate, so the queue both fills and drains)
            w_rate, r_rate = ((0.9, 0.3), (0.3, 0.9), (0.6, 0.6))[(cycle // 200) % 3]
            w_en, r_en, data = rng.random() < w_rate, rng.random() < r_rate, rng.randrange(4096)
            for f in (dut, ref):
                ctx.set(f.w_en, w_en)
                ctx.set(f.r_en, r_en)
                ctx.set(f.w_data, data)
            got = {name: ctx.get(getattr(dut, name)) for name in OUTPUTS}
            want = {name: ctx.get(getattr(ref, name)) for name in OUTPUTS}
            if want["r_rdy"]:
                got["r_data"], want["r_data"] = ctx.get(dut.r_data), ctx.get(ref.r_data)
            assert got == want, f"cycle {cycle}: " + ", ".join(
                f"{k} {got[k]} (SyncFIFOBuffered {want[k]})" for k in want if got[k] != want[k])
            seen["writes"] += w_en and want["w_rdy"]
            seen["reads"] += r_en and want["r_rdy"]
            seen["full"] += want["level"] == 2
            await ctx.tick()

    sim.add_testbench(bench)
    sim.run()
    # The run went through every state: entries written and read, the queue full.
    assert min(seen.values()) > 100, seen


def test_buffered_fifo_takes_two_entry_fifo_at_depth_two_only():
    m = Module()
    m.submodules.two = two = buffered_fifo(8, 2)
    m.submodules.deeper = deeper = buffered_fifo(8, 4)
    Fragment.get(m, None)      # (elaborated: each is used)
    assert isinstance(two, TwoEntryFIFO)
    assert isinstance(deeper, SyncFIFOBuffered) and deeper.depth == 4
