"""cocotb test of the window bits: every cycle, one QP's row read, and random bits of it set and
cleared; every row read checked against a model (a clear, then a set, seen from the next
cycle)."""

import random

import cocotb
from cocotb.triggers import FallingEdge, RisingEdge, Timer

from mrcnic.verif.tbkit import params, setup


def some_bits(rng, window):
    """None, one, a few, or every bit: as the walk, a SACK's bitmap or a restart changes them."""
    roll = rng.random()
    if roll < 0.5:
        return 0
    if roll < 0.8:
        return 1 << rng.randrange(window)
    if roll < 0.95:
        return rng.getrandbits(window)
    return (1 << window) - 1


@cocotb.test()
async def each_qp_keeps_its_bits(dut):
    p = params()
    rng = random.Random(p["seed"])
    qps, window = p["qps"], p["window"]
    await setup(dut)
    rows = [[0, 0] for _ in range(qps)]     # [acked, pend], zero from the start
    for cycle in range(p["cycles"]):
        await FallingEdge(dut.clk)
        qp = rng.randrange(qps)
        change = {name: some_bits(rng, window)
                  for name in ("ack_set", "ack_clear", "pend_set", "pend_clear")}
        dut.qp.value = qp
        for name, value in change.items():
            getattr(dut, name).value = value
        await Timer(1, "ns")
        got = [int(dut.acked.value), int(dut.pend.value)]
        assert got == rows[qp], f"cycle {cycle}: QP {qp}: (acked, pend) " \
            f"{tuple(map(hex, got))}, not {tuple(map(hex, rows[qp]))}"
        acked, pend = rows[qp]
        rows[qp] = [(acked & ~change["ack_clear"]) | change["ack_set"],
                    (pend & ~change["pend_clear"]) | change["pend_set"]]
        await RisingEdge(dut.clk)
