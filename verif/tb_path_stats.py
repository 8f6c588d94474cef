"""cocotb test of the path statistics: random path events (timed arrivals, some ECN-marked,
arrivals and losses) for random entries, back to back and often for the same record, each record then read
through the view port and compared field by field with a model's count."""

import random

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge, RisingEdge, Timer

from mrcnic.hdl.path_stats import path_record_layout
from mrcnic.hdl.retransmit_tracker import PathEvent, path_event_layout
from mrcnic.verif.layouts import decode, encode
from mrcnic.verif.tbkit import params, setup

RECORD = path_record_layout()


@cocotb.test()
async def every_event_counts_in_its_own_record(dut):
    p = params()
    rng = random.Random(p["seed"])
    qps, evs = p["qps"], p["evs"]
    event = path_event_layout(qps, evs)
    await setup(dut)
    model: dict[tuple[int, int], dict] = {}
    # a few hot records, so that events for one record come back to back
    hot = [(rng.randrange(qps), rng.randrange(evs)) for _ in range(3)]
    for _ in range(p["events"]):
        await FallingEdge(dut.clk)
        if rng.random() < 0.3:
            dut.event_tvalid.value = 0
            continue
        qp, index = rng.choice(hot) if rng.random() < 0.6 else (rng.randrange(qps),
                                                                 rng.randrange(evs))
        kind = rng.choice(list(PathEvent))
        rtt, ecn = rng.randrange(1 << 16), rng.random() < 0.4
        dut.event_tdata.value = int.from_bytes(encode(event, {
            "qp": qp, "index": index, "kind": kind, "rtt": rtt, "ecn": ecn}), "little")
        dut.event_tvalid.value = 1
        rec = model.setdefault((qp, index), dict.fromkeys(("rtt", "timed", "ecn", "acked",
                                                           "lost"), 0))
        if kind is PathEvent.TIMED:
            rec.update(rtt=rtt, timed=rec["timed"] + 1, ecn=rec["ecn"] + ecn)
        else:
            rec[kind.name.lower()] += 1
    await FallingEdge(dut.clk)
    dut.event_tvalid.value = 0
    await ClockCycles(dut.clk, 2)
    # every record the events touched, and one they did not (if there is one), reads as counted
    untouched = [((qp, i), dict.fromkeys(model[hot[0]], 0)) for qp in range(qps)
                 for i in range(evs) if (qp, i) not in model][:1]
    for (qp, index), want in [*model.items(), *untouched]:
        await FallingEdge(dut.clk)
        dut.view_qp.value, dut.view_index.value = qp, index
        await RisingEdge(dut.clk)
        await Timer(1, "ns")
        got = decode(RECORD, int(dut.view.value))
        diff = {k: (got[k], v) for k, v in want.items() if got[k] != v}
        assert not diff, f"QP {qp} entry {index}: (got, want) {diff}"
    assert len(model) > 10 and all(sum(r[k] for r in model.values()) > 50
                                   for k in ("timed", "ecn", "acked", "lost"))
