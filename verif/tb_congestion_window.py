"""cocotb test of the congestion window: every cycle, random starts, SACKs (ECN or not, RTT
samples about the target, receivers shared or not), trims and profile changes, driven as the
retransmit tracker drives them; every QP's window and each SACK's ``cut`` checked against NSCC
as the sender's reference model computes it (``verif/rel_model.py``'s ``Congestion``)."""

import random

import cocotb
from amaranth.lib.data import ArrayLayout
from cocotb.triggers import FallingEdge, RisingEdge, Timer

from mrcnic.hdl.congestion_window import CWND_BITS
from mrcnic.verif.layouts import decode
from mrcnic.verif.rel_model import Congestion
from mrcnic.verif.tbkit import params, setup

PROFILE = ("target_rtt", "cc_fair", "cc_gain", "cc_md", "cwnd_init", "cwnd_min", "cwnd_max",
           "rcv_wnd")


def random_profile(rng) -> Congestion:
    """A profile as a host might set one: mostly sensible, now and then odd (a minimum above
    the maximum, a gain of 0, a receiver window of 0)."""
    lo = rng.choice([1024, 4096, rng.randrange(1 << 16)])
    return Congestion(target_rtt=rng.randrange(1, 1 << 12), cwnd_init=rng.randrange(1 << 20),
                      cwnd_min=lo, cwnd_max=rng.choice([1 << 20, 1 << 17, rng.randrange(1 << 24)]),
                      fair=rng.randrange(1 << 12), gain=rng.randrange(1 << 8),
                      md_shift=rng.randrange(16), rcv_wnd=rng.choice([0, 1 << 18, rng.randrange(1 << 24)]))


def drive_profile(dut, cc: Congestion):
    values = dict(target_rtt=cc.target_rtt, cc_fair=cc.fair, cc_gain=cc.gain, cc_md=cc.md_shift,
                  cwnd_init=cc.cwnd_init, cwnd_min=cc.cwnd_min, cwnd_max=cc.cwnd_max,
                  rcv_wnd=cc.rcv_wnd)
    for name in PROFILE:
        getattr(dut, name).value = values[name]


@cocotb.test()
async def each_window_follows_nscc(dut):
    p = params()
    rng = random.Random(p["seed"])
    qps = p["qps"]
    await setup(dut)
    cc = random_profile(rng)
    drive_profile(dut, cc)
    cwnd = [0] * qps              # reset
    pen_now = 0                   # the rcv_cwnd_pen last taken
    pending = None                # a SACK's window, set at the next edge: (qp, value)
    started = None                # a start, its window set at the edge after next: qp
    seen = {"grow": 0, "fair": 0, "cut": 0, "hold": 0, "share": 0, "trim": 0, "init": 0}
    qp = 0
    for cycle in range(p["cycles"]):
        await FallingEdge(dut.clk)
        # The window's inputs change only when no SACK or start is pending (the tracker's CC
        # profile is its QP's from SACK_CHECK until the window is set).
        if pending is None and started is None and rng.random() < 0.02:
            cc = random_profile(rng)
            drive_profile(dut, cc)
        if pending is None:       # a SACK's QP stays until its window is set
            qp = rng.randrange(qps)
        roll = rng.random()
        init = pending is None and started is None and roll < 0.05
        sack = pending is None and not init and roll < 0.45
        trim = not init and not sack and roll < 0.6
        ecn, may_cut = rng.random() < 0.4, rng.random() < 0.7
        sample = max(0, min((1 << 16) - 1, int(rng.gauss(cc.target_rtt, cc.target_rtt / 2))))
        pen_take = rng.random() < 0.3
        pen = rng.choice([0, 1, 2, 3, rng.randrange(128)])
        trim_len = rng.randrange(1 << 13)
        init_qp = rng.randrange(qps)
        dut.qp.value = qp
        dut.init.value, dut.init_qp.value = int(init), init_qp
        dut.sack.value, dut.ecn.value, dut.may_cut.value = int(sack), int(ecn), int(may_cut)
        dut.sample.value = sample
        dut.pen_take.value, dut.pen.value = int(pen_take), pen
        dut.trim.value, dut.trim_len.value = int(trim), trim_len
        await Timer(1, "ns")
        got = decode(ArrayLayout(CWND_BITS, qps), int(dut.cwnd.value))
        assert got == cwnd, f"cycle {cycle}: the windows are {got}, not {cwnd}"
        if sack:
            new, cut = cc.next(cwnd[qp], ecn, sample, pen_now, may_cut)
            assert int(dut.cut.value) == int(cut), \
                f"cycle {cycle}: a SACK's cut {int(dut.cut.value)}, not {int(cut)}"
        await RisingEdge(dut.clk)
        # What this edge stores: for the QP served, a trim before the last cycle's SACK; a
        # start for its own QP, unless that QP is the one the others set.
        if trim:
            cwnd[qp] = cc.trimmed(cwnd[qp], trim_len)
            seen["trim"] += 1
        elif pending is not None:
            cwnd[qp] = pending[1]
        if started is not None and not (started == qp and (trim or pending is not None)):
            cwnd[started] = cc.cwnd_init
            seen["init"] += 1
        pending, started = None, (init_qp if init else None)
        if sack:
            pending = (qp, new)
            below = sample < cc.target_rtt
            kind = ("cut" if cut else "hold") if ecn else ("grow" if below else "fair")
            seen[kind] += 1
            if cc.rcv_wnd and pen_now >= 2 and new < cc.cwnd_max:
                seen["share"] += 1
        if pen_take:
            pen_now = pen
    assert all(seen.values()), f"cases never seen: {seen}"
