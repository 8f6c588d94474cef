"""The bit-vector helpers (hdl/bits.py) against Python's own arithmetic: the lowest and highest
set bit of every value a narrow vector holds, and of random ones at a SACK bitmap's width."""

import random

import pytest
from amaranth import Module, Signal
from amaranth.sim import Simulator

from mrcnic.hdl.bits import first_set, last_set


def _values(width):
    if width <= 8:
        return range(1 << width)
    rng = random.Random(width)
    one_bit = [1 << i for i in range(width)]
    return [0, (1 << width) - 1, *one_bit, *(rng.getrandbits(width) for _ in range(300))]


@pytest.mark.parametrize("width", [1, 5, 8, 12, 64])
def test_lowest_and_highest_set_bit(width):
    m = Module()
    bits = Signal(width)
    found, low = first_set(m, bits)
    found_high, high = last_set(m, bits)
    sim = Simulator(m)
    wrong = []

    async def bench(ctx):
        for v in _values(width):
            ctx.set(bits, v)
            got = (ctx.get(found), ctx.get(low), ctx.get(found_high), ctx.get(high))
            want = (int(v != 0), (v & -v).bit_length() - 1 if v else 0,
                    int(v != 0), v.bit_length() - 1 if v else 0)
            if got != want:
                wrong.append(f"{v:#x}: (found, lowest, found, highest) {got}, want {want}")

    sim.add_testbench(bench)
    sim.run()
    assert not wrong, "\n".join(wrong[:10])
