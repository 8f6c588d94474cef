"""cocotb test of the PSN bounds: every cycle, random QP starts, new sends and advances of the
served QP's una, the served QP changing; every QP's una and nxt, and the served QP's
registered bounds and in flight, checked against a model of the rules (a start wins for its
QP; the served QP's registers follow ``qp_next`` of the cycle before, with its changes), and
``hd_now`` from them and a random ``high``, ``hd`` a cycle later."""

import random

import cocotb
from amaranth.lib.data import ArrayLayout
from cocotb.triggers import FallingEdge, RisingEdge, Timer

from mrcnic.hdl.reorder_tracker import PSN_BITS
from mrcnic.verif.layouts import decode
from mrcnic.verif.tbkit import params, setup

PSN_MOD = 1 << PSN_BITS


@cocotb.test()
async def each_qp_keeps_its_una_and_nxt(dut):
    p = params()
    rng = random.Random(p["seed"])
    qps = p["qps"]
    psns = ArrayLayout(PSN_BITS, qps)
    await setup(dut)
    una, nxt = [0] * qps, [0] * qps
    served = None              # (una, nxt, inflight) QP qp's registers should hold
    hd_before = None           # hd_now of the cycle before
    qp = 0
    seen = {"start": 0, "send": 0, "advance": 0, "start_wins": 0, "hd_zero": 0, "hd": 0}
    for cycle in range(p["cycles"]):
        await FallingEdge(dut.clk)
        start, start_qp = rng.random() < 0.1, rng.randrange(qps)
        start_psn = rng.choice([0, PSN_MOD - 2, rng.randrange(PSN_MOD)])
        send, send_qp = rng.random() < 0.5, rng.randrange(qps)
        send_psn = nxt[send_qp] if rng.random() < 0.9 else rng.randrange(PSN_MOD)
        advance = rng.random() < 0.4 and una[qp] != nxt[qp]
        qp_next = qp if rng.random() < 0.7 else rng.randrange(qps)
        high = rng.choice([una[qp], nxt[qp], rng.randrange(PSN_MOD),
                           (una[qp] + rng.randrange(8)) % PSN_MOD])
        for name, value in (("start", int(start)), ("start_qp", start_qp),
                            ("start_psn", start_psn), ("send", int(send)), ("send_qp", send_qp),
                            ("send_psn", send_psn), ("advance", int(advance)), ("qp", qp),
                            ("qp_next", qp_next), ("high", high)):
            getattr(dut, name).value = value
        await Timer(1, "ns")
        got = (decode(psns, int(dut.una.value)), decode(psns, int(dut.nxt.value)))
        assert got == (una, nxt), f"cycle {cycle}: (una, nxt) {got}, not {(una, nxt)}"
        hd_now = None
        if served is not None:
            got = tuple(int(getattr(dut, n).value) for n in ("c_una", "c_nxt", "inflight"))
            assert got == served, (f"cycle {cycle}: QP {qp}'s (una, nxt, inflight) {got}, "
                                   f"not {served}")
            c_una, _, inflight = served
            ahead = (high - c_una) % PSN_MOD
            hd_now = 0 if ahead > inflight else ahead
            seen["hd_zero" if hd_now == 0 else "hd"] += 1
            assert int(dut.hd_now.value) == hd_now, (
                f"cycle {cycle}: hd_now {int(dut.hd_now.value)}, not {hd_now} (high {high})")
        if hd_before is not None:
            assert int(dut.hd.value) == hd_before, (
                f"cycle {cycle}: hd {int(dut.hd.value)}, not the cycle before's {hd_before}")
        hd_before = hd_now
        await RisingEdge(dut.clk)
        if advance:
            una[qp] = (una[qp] + 1) % PSN_MOD
            seen["advance"] += 1
        if send:
            nxt[send_qp] = (send_psn + 1) % PSN_MOD
            seen["send"] += 1
        if start:
            seen["start_wins"] += (send and send_qp == start_qp) or (advance and qp == start_qp)
            una[start_qp] = nxt[start_qp] = start_psn
            seen["start"] += 1
        inflight = (nxt[qp_next] - una[qp_next]) % PSN_MOD
        served, qp = (una[qp_next], nxt[qp_next], inflight), qp_next
    assert all(seen.values()), f"cases never seen: {seen}"
