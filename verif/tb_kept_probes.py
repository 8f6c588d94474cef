"""cocotb test of the kept probes: every cycle, random probes granted their EVs, a look at one
kept probe of one QP for one EV, and now and then that probe answered; each look checked
against a model (a QP keeps its latest probes in turn, each live until answered or replaced)."""

import random

import cocotb
from cocotb.triggers import FallingEdge, RisingEdge, Timer

from mrcnic.hdl.kept_probes import probed_layout
from mrcnic.verif.layouts import as_int
from mrcnic.verif.tbkit import params, setup


@cocotb.test()
async def each_qp_keeps_its_latest_probes(dut):
    p = params()
    rng = random.Random(p["seed"])
    qps, evs, kept = p["qps"], p["evs"], p["kept"]
    await setup(dut)
    slots = [[None] * kept for _ in range(qps)]     # (ev, index) of each live kept probe
    nxt = [0] * qps
    # EVs from a small set, so looks find them
    pool = [rng.randrange(1 << 32) for _ in range(6)]
    seen = {"hit": 0, "miss_ev": 0, "miss_dead": 0, "forgotten": 0, "replaced": 0}
    for cycle in range(p["cycles"]):
        await FallingEdge(dut.clk)
        probe = rng.random() < 0.3
        pq, pindex, pev = rng.randrange(qps), rng.randrange(evs), rng.choice(pool)
        qp, k = rng.randrange(qps), rng.randrange(kept)
        ev = slots[qp][k][0] if slots[qp][k] and rng.random() < 0.6 else rng.choice(pool)
        forget = rng.random() < 0.2
        dut.probed_tvalid.value = int(probe)
        dut.probed_tdata.value = as_int(probed_layout(qps, evs),
                                        {"qp": pq, "index": pindex, "ev": pev})
        dut.qp.value, dut.k.value, dut.ev.value, dut.forget.value = qp, k, ev, int(forget)
        await Timer(1, "ns")
        slot = slots[qp][k]
        want = slot is not None and slot[0] == ev
        assert int(dut.hit.value) == int(want), \
            f"cycle {cycle}: QP {qp} probe {k} on EV {ev:#x}: hit {int(dut.hit.value)}, kept {slot}"
        if want:
            assert int(dut.index.value) == slot[1], f"cycle {cycle}: entry {int(dut.index.value)}"
        seen["hit" if want else "miss_dead" if slot is None else "miss_ev"] += 1
        await RisingEdge(dut.clk)
        if forget and slot is not None:
            slots[qp][k] = None
            seen["forgotten"] += 1
        if probe:
            seen["replaced"] += slots[pq][nxt[pq]] is not None
            slots[pq][nxt[pq]] = (pev, pindex)
            nxt[pq] = (nxt[pq] + 1) % kept
    assert all(seen.values()), f"cases never seen: {seen}"
