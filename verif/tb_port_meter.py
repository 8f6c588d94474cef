"""cocotb test of the port meter: it is busy exactly while a MAC sending at ``rate`` would hold
more than ``limit`` bytes of what it was handed, the wire's preamble, FCS and gap included."""

import random
from fractions import Fraction

import cocotb
from cocotb.triggers import FallingEdge

from mrcnic.hdl.port_meter import RATE_FRACTION_BITS
from mrcnic.verif.tbkit import params, setup
from mrcnic.wire import ETH_WIRE_OVERHEAD


class MacQueue:
    """A port sending ``rate`` bytes a cycle: the bytes it still holds, exactly."""

    def __init__(self, rate: Fraction):
        self.rate, self.held = rate, Fraction(0)

    def cycle(self, taken: int, last: bool) -> None:
        self.held = max(Fraction(0), self.held + taken + (ETH_WIRE_OVERHEAD if last else 0)
                        - self.rate)


async def _drive(dut, frames, queue: MacQueue, limit: int, what: str):
    """Hands ``frames`` ((length, gap in cycles after it)) to the port a beat a cycle, and
    checks ``busy`` against ``queue`` every cycle, including while it drains afterwards."""
    beat = int(params()["beat"])
    schedule = []
    for length, gap in frames:
        while length > beat:
            schedule.append((beat, False))
            length -= beat
        schedule.append((length, True))
        schedule += [(0, False)] * gap
    busy_cycles, n, calm = 0, 0, 0
    while n < len(schedule) or calm < 8:     # and then until it has drained
        taken, last = schedule[n] if n < len(schedule) else (0, False)
        calm = calm + 1 if n >= len(schedule) and (queue.held == 0 or not queue.rate) else 0
        await FallingEdge(dut.clk)
        busy = bool(dut.busy.value)
        want = queue.rate != 0 and queue.held > limit
        assert busy == want, (f"{what}, cycle {n}: busy {busy}, but a MAC at "
                              f"{float(queue.rate)} bytes a cycle holds {float(queue.held):.2f} "
                              f"bytes (limit {limit})")
        busy_cycles += busy
        dut.taken.value, dut.last.value = taken, int(last)
        queue.cycle(taken, last)
        n += 1
    return busy_cycles


@cocotb.test()
async def busy_while_a_mac_would_hold_more_than_the_limit(dut):
    p = params()
    rng = random.Random(p["seed"])
    beat = int(p["beat"])
    await setup(dut)
    dut.taken.value, dut.last.value = 0, 0

    # Off: never busy, however much it is handed.
    dut.rate.value, dut.limit.value = 0, 0
    assert await _drive(dut, [(1500, 0)] * 20, MacQueue(Fraction(0)), 0, "rate 0") == 0

    # A port at half the datapath's rate, given frames back to back: busy once the queue it
    # would hold passes the limit, free again once that has drained.
    rate = beat * (1 << RATE_FRACTION_BITS) // 2
    dut.rate.value, dut.limit.value = rate, 4096
    n = await _drive(dut, [(1000, 0)] * 20, MacQueue(Fraction(rate, 1 << RATE_FRACTION_BITS)),
                     4096, "half rate, back to back")
    assert n > 0, "20 frames at twice a port's rate never made it busy"

    # Frames spaced to exactly the port's rate, overhead included, never fill it.
    length = 1000
    gap = (length + ETH_WIRE_OVERHEAD) * 2 // beat - -(-length // beat)
    n = await _drive(dut, [(length, gap)] * 20, MacQueue(Fraction(rate, 1 << RATE_FRACTION_BITS)),
                     length, "at the port's rate")
    assert n == 0, "frames at exactly the port's rate made it busy"

    # Random frames, gaps, rates and limits.
    for k in range(int(p["count"])):
        rate = rng.randrange(beat << (RATE_FRACTION_BITS - 3), beat << RATE_FRACTION_BITS)
        limit = rng.choice([0, 64, rng.randrange(0, 1 << 16)])
        dut.rate.value, dut.limit.value = rate, limit
        frames = [(rng.randrange(1, 3000), rng.choice([0, 0, rng.randrange(0, 200)]))
                  for _ in range(rng.randrange(1, 12))]
        await _drive(dut, frames, MacQueue(Fraction(rate, 1 << RATE_FRACTION_BITS)), limit,
                     f"round {k} (rate {rate}/256, limit {limit})")
