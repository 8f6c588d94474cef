"""cocotb test of the suspect paths: every cycle, random paths found lost or working for one
QP, holds started and ended, and QPs starting again; each QP's hold, and the served QP's
suspect paths and hold, checked against a model of the rules (a clear wins over a set, a start
over an end, a restart over everything)."""

import random

import cocotb
from amaranth.lib.data import ArrayLayout
from cocotb.triggers import FallingEdge, RisingEdge, Timer

from mrcnic.verif.layouts import decode
from mrcnic.verif.tbkit import params, setup


@cocotb.test()
async def each_qp_holds_its_suspect_paths(dut):
    p = params()
    rng = random.Random(p["seed"])
    qps, paths = p["qps"], p["paths"]
    await setup(dut)
    suspect, holding = [0] * qps, [False] * qps
    seen = {"held": 0, "holding_none": 0, "restart": 0, "ended": 0}
    for cycle in range(p["cycles"]):
        await FallingEdge(dut.clk)
        qp = rng.randrange(qps)
        s_set = 1 << rng.randrange(paths) if rng.random() < 0.3 else 0
        s_clr = (1 << rng.randrange(paths) | (s_set if rng.random() < 0.2 else 0)
                 if rng.random() < 0.3 else 0)
        start, end = rng.random() < 0.15, rng.random() < 0.15
        restart, restart_qp = rng.random() < 0.03, rng.randrange(qps)
        for name, value in (("qp", qp), ("suspect_set", s_set), ("suspect_clear", s_clr),
                            ("hold_start", int(start)), ("hold_end", int(end)),
                            ("restart", int(restart)), ("restart_qp", restart_qp)):
            getattr(dut, name).value = value
        await Timer(1, "ns")
        hold = decode(ArrayLayout(paths, qps), int(dut.hold.value))
        want = [s if h else 0 for s, h in zip(suspect, holding, strict=True)]
        assert hold == want, f"cycle {cycle}: the QPs hold {hold}, not {want}"
        assert int(dut.suspect.value) == suspect[qp], f"cycle {cycle}: QP {qp}'s suspects"
        assert int(dut.holding.value) == int(holding[qp]), f"cycle {cycle}: QP {qp} holding"
        seen["held"] += bool(holding[qp] and suspect[qp])
        seen["holding_none"] += bool(holding[qp] and not suspect[qp])
        await RisingEdge(dut.clk)
        if not (restart and restart_qp == qp):
            suspect[qp] = (suspect[qp] | s_set) & ~s_clr
            if start:
                holding[qp] = True
            elif end:
                seen["ended"] += holding[qp]
                holding[qp] = False
        if restart:
            suspect[restart_qp], holding[restart_qp] = 0, False
            seen["restart"] += 1
    assert all(seen.values()), f"cases never seen: {seen}"
