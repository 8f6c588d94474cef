"""cocotb test of the QP rows: every cycle, a random QP served next, the served QP's row given
back changed at random, now and then a QP's fresh row, and two reads of any QPs; the served
row, the row to come and the reads checked against a model of the rows (a write is seen by the
next cycle's reads, and the served QP's register forwards this cycle's write)."""

import random

import cocotb
from amaranth.lib.data import ArrayLayout
from cocotb.triggers import FallingEdge, RisingEdge, Timer

from mrcnic.verif.layouts import as_int, decode
from mrcnic.verif.tbkit import params, setup


@cocotb.test()
async def each_qp_keeps_its_row(dut):
    p = params()
    rng = random.Random(p["seed"])
    qps, width, readers = p["qps"], p["width"], p["readers"]
    await setup(dut)
    rows = [0] * qps              # zero from the start
    qp = 0                        # after reset
    reg = 0                       # the served QP's register
    seen = {"forwarded": 0, "fresh": 0, "fresh_served": 0, "kept": 0}
    for cycle in range(p["cycles"]):
        await FallingEdge(dut.clk)
        qp_next = qp if rng.random() < 0.5 else rng.randrange(qps)
        # mostly the served row given back, changed or not; now and then a fresh row for a
        # QP that starts, any QP
        fresh = rng.random() < 0.1
        update_qp = rng.choice([qp, qp_next, rng.randrange(qps)]) if fresh else qp
        update = reg if not fresh and rng.random() < 0.4 else rng.getrandbits(width)
        read_qp = [rng.randrange(qps) for _ in range(readers)]
        dut.qp.value, dut.qp_next.value = qp, qp_next
        dut.update.value, dut.update_qp.value = update, update_qp
        dut.read_qp.value = as_int(ArrayLayout(range(qps), readers), read_qp)
        await Timer(1, "ns")
        assert int(dut.row.value) == reg, \
            f"cycle {cycle}: QP {qp}'s row {int(dut.row.value):#x}, not {reg:#x}"
        got = decode(ArrayLayout(width, readers), int(dut.read.value))
        want = [rows[q] for q in read_qp]
        assert got == want, f"cycle {cycle}: QPs {read_qp} read {got}, not {want}"
        at, written = update_qp, update
        want_next = written if at == qp_next else rows[qp_next]
        assert int(dut.row_next.value) == want_next, \
            f"cycle {cycle}: QP {qp_next}'s row to come {int(dut.row_next.value):#x}, not {want_next:#x}"
        seen["forwarded"] += at == qp_next and not fresh
        seen["fresh_served"] += fresh and at == qp_next
        seen["fresh"] += fresh
        seen["kept"] += not fresh and update == reg
        await RisingEdge(dut.clk)
        rows[at] = written
        qp, reg = qp_next, want_next
    assert all(seen.values()), f"cases never seen: {seen}"
