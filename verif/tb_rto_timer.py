"""cocotb test of the RTO timer: every cycle, random timer starts and restarts, RTT estimates
for the QP looked at, RTO bounds and clock jumps; the QP looked at, and the cycle after, its
RTO and whether it was due, checked against a model (RTO = srtt + 4 rttvar within the
bounds, the maximum before a first sample; a restart wins over a start of the same QP)."""

import random

import cocotb
from cocotb.triggers import FallingEdge, RisingEdge, Timer

from mrcnic.hdl.rto_timer import rtt_estimate_layout
from mrcnic.verif.layouts import as_int
from mrcnic.verif.tbkit import params, setup
from mrcnic.wire import TIME_BITS

TIME_MOD = 1 << TIME_BITS


def rto_of(est, rto_min, rto_max):
    """The RTO of a QP of estimates ``est`` (bounds with rto_min <= rto_max)."""
    if not est["have_rtt"]:
        return rto_max
    return max(rto_min, min(est["srtt"] + 4 * est["rttvar"], rto_max))


@cocotb.test()
async def each_timer_fires_after_its_rto(dut):
    p = params()
    rng = random.Random(p["seed"])
    qps = p["qps"]
    await setup(dut)
    tstart = [0] * qps
    look, now = 0, rng.randrange(TIME_MOD)
    rto_min, rto_max = 40, 400
    last = None                                   # what the outputs say this cycle
    seen = {"due": 0, "not_due": 0, "idle": 0, "bounded": 0, "estimated": 0}
    for cycle in range(p["cycles"]):
        await FallingEdge(dut.clk)
        now = (now + (rng.randrange(1, 200) if rng.random() < 0.05 else 1)) % TIME_MOD
        if rng.random() < 0.01:
            rto_min, rto_max = sorted([rng.randrange(1 << 10), rng.randrange(1 << 10)])
        est = {"running": int(rng.random() < 0.8), "srtt": rng.randrange(1 << 8),
               "rttvar": rng.randrange(1 << 6), "have_rtt": int(rng.random() < 0.8)}
        start, start_qp = rng.random() < 0.05, rng.randrange(qps)
        restart, restart_qp = rng.random() < 0.05, rng.randrange(qps)
        restart_at = (now - rng.randrange(300)) % TIME_MOD
        for name, value in (("now", now), ("start", int(start)), ("start_qp", start_qp),
                            ("restart", int(restart)), ("restart_qp", restart_qp),
                            ("restart_at", restart_at), ("rto_min", rto_min),
                            ("rto_max", rto_max),
                            ("looked", as_int(rtt_estimate_layout(), est))):
            getattr(dut, name).value = value
        await Timer(1, "ns")
        if cycle == 0:
            look = int(dut.look.value)      # (it went round during the reset's release)
        assert int(dut.look.value) == look, f"cycle {cycle}: looks at {int(dut.look.value)}"
        if last is not None:
            got = {k: int(getattr(dut, k).value) for k in last}
            assert got == last, f"cycle {cycle}: (got, want) " + ", ".join(
                f"{k} ({got[k]}, {v})" for k, v in last.items() if got[k] != v)
        rto = rto_of(est, rto_min, rto_max)
        due = bool(est["running"]) and (now - tstart[look]) % TIME_MOD >= rto
        last = {"qp": look, "running": est["running"], "due": int(due), "rto": rto}
        seen["idle" if not est["running"] else "due" if due else "not_due"] += 1
        seen["estimated" if est["have_rtt"] and rto_min < rto < rto_max else "bounded"] += 1
        await RisingEdge(dut.clk)
        if restart:
            tstart[restart_qp] = restart_at
        if start and not (restart and start_qp == restart_qp):
            tstart[start_qp] = now
        look = (look + 1) % qps
    assert all(seen.values()), f"cases never seen: {seen}"
