"""StreamCrossing in Amaranth's simulator: every payload arrives once and in order across two
unrelated clocks, whichever side is slower, with the writer and reader stalling at random; a
write-domain reset (of a few cycles, as a board's is) empties it of what it held."""

import gc
import random
import warnings

import pytest
from amaranth import ClockDomain, Module
from amaranth.hdl import UnusedElaboratable
from amaranth.sim import Simulator

from mrcnic.hdl.stream_crossing import StreamCrossing

COUNT = 300


def _bench(w_period, r_period):
    m = Module()
    w, r = ClockDomain("w"), ClockDomain("r")
    m.domains += [w, r]
    m.submodules.dut = dut = StreamCrossing(16, depth=8, i_domain="w", o_domain="r")
    sim = Simulator(m)
    sim.add_clock(w_period, domain="w")
    sim.add_clock(r_period, domain="r")
    return sim, dut, w


async def _write(ctx, dut, values, rng, sent, rate=0.7, give_up=None):
    """Writes ``values`` in turn, each offered with probability ``rate`` a cycle; stops when one
    waits ``give_up`` cycles."""
    for k in values:
        waited = 0
        while True:
            valid = rng.random() < rate
            ctx.set(dut.i.valid, valid)
            ctx.set(dut.i.payload, k)
            *_, ready = await ctx.tick("w").sample(dut.i.ready)    # as the edge saw it
            if valid and ready:
                sent.append(k)
                break
            waited += 1
            if waited == give_up:
                ctx.set(dut.i.valid, 0)
                return
    ctx.set(dut.i.valid, 0)


async def _read(ctx, dut, count, rng, got):
    """Reads until ``got`` holds ``count`` payloads, ready with probability 0.6 a cycle."""
    while len(got) < count:
        ready = rng.random() < 0.6
        ctx.set(dut.o.ready, ready)
        *_, valid, payload = await ctx.tick("r").sample(dut.o.valid, dut.o.payload)
        if ready and valid:
            got.append(payload)


@pytest.mark.parametrize("w_period,r_period", [(16e-9, 8e-9), (8e-9, 13e-9)],
                         ids=["reader_faster", "writer_faster"])
def test_every_payload_once_in_order(w_period, r_period):
    sim, dut, _ = _bench(w_period, r_period)
    rng = random.Random(7)
    sent, got = [], []

    async def writer(ctx):
        await _write(ctx, dut, range(COUNT), rng, sent)

    async def reader(ctx):
        await _read(ctx, dut, COUNT, rng, got)

    sim.add_testbench(writer)
    sim.add_testbench(reader)
    sim.run_until(COUNT * 40 * max(w_period, r_period))
    assert got == list(range(COUNT)), _first_diff(got, 0)


def test_write_reset_empties_it():
    sim, dut, w = _bench(8e-9, 13e-9)
    rng = random.Random(3)
    sent, got = [], []
    phase = ["fill"]

    async def writer(ctx):
        # with nothing read, it takes the RAM's 8 and the output register's one
        await _write(ctx, dut, range(20), rng, sent, rate=1, give_up=8)
        assert sent == list(range(9))
        ctx.set(w.rst, 1)                     # the nine are to be forgotten
        for n in range(12):
            await ctx.tick("w")               # (not .repeat(), which stops at a reset)
            if n == 2:
                ctx.set(w.rst, 0)
        phase[0] = "after"
        await _write(ctx, dut, range(100, 200), rng, sent)

    async def reader(ctx):
        ctx.set(dut.o.ready, 0)
        while phase[0] == "fill":
            await ctx.tick("r")
        await _read(ctx, dut, 100, rng, got)

    sim.add_testbench(writer)
    sim.add_testbench(reader)
    sim.run_until(100e-6)
    assert got == list(range(100, 200)), _first_diff(got, 100)


def test_depth_refused():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)    # (the one refused)
        with pytest.raises(ValueError, match="power of two") as refused:
            StreamCrossing(8, depth=6)
        del refused                           # (its traceback holds the half-made one)
        gc.collect()


def _first_diff(got, start):
    for n, v in enumerate(got):
        if v != start + n:
            return f"payload {n} is {v}, where {start + n} was due"
    return f"{len(got)} payloads arrived; {start + len(got)} was due next"


def test_full_rate():
    """A reader that is always ready, on a clock a little faster than the writer's, takes a
    payload every writer cycle: the writer never waits once the pointers are through their
    synchronizers."""
    sim, dut, _ = _bench(8.5e-9, 8e-9)
    cycles = [0]

    async def writer(ctx):
        for k in range(COUNT):
            ctx.set(dut.i.valid, 1)
            ctx.set(dut.i.payload, k)
            while True:
                cycles[0] += 1
                *_, ready = await ctx.tick("w").sample(dut.i.ready)
                if ready:
                    break
        ctx.set(dut.i.valid, 0)

    async def reader(ctx):
        ctx.set(dut.o.ready, 1)

    sim.add_testbench(writer)
    sim.add_testbench(reader)
    sim.run_until(COUNT * 3 * 8.5e-9)
    assert cycles[0] == COUNT
