"""The retransmit tracker alone, in Amaranth's simulator: what its streams offer does not
change while it waits to be taken (stream rules), even when the record it comes from is
rewritten meanwhile. (The tracker's behaviour is specified in test_reliability_hdl.py, on the
whole NIC against the sender's reference model.)"""

from amaranth.sim import Simulator

from mrcnic.enums import RelMode
from mrcnic.hdl.retransmit_tracker import RetransmitTracker

RTO = 24            # rto_min = rto_max: the timer fires this many cycles after a send
PSN = 100


def _packet(tries, index, ev):
    """A ``sent`` payload: QP 0's packet PSN, its try, the entry and EV it was granted."""
    return {"pkt": {"wr_id": 7, "qp": 0, "psn": PSN, "length": 64, "last": 1, "tries": tries},
            "index": index, "ev": ev}


def test_an_offered_retransmission_holds_while_its_record_is_rewritten():
    """A packet times out; its retransmission is offered and not taken. Meanwhile an earlier
    retransmission of the same packet is recorded (a ``sent`` with a try, on another entry),
    which rewrites the record the offer came from. The offer must stay as it was: the try and
    the entry to avoid of the record it was made from."""
    dut = RetransmitTracker(qps=2, evs=4, planes=2, window=64, spines=4)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    seen = []

    async def bench(ctx):
        for name, value in (("mode", RelMode.SELECTIVE), ("rto_min", RTO), ("rto_max", RTO),
                            ("reorder", 3), ("cwnd_init", 1 << 20), ("cwnd_min", 1 << 10),
                            ("cwnd_max", 1 << 22)):
            ctx.set(getattr(dut, name), value)
        ctx.set(dut.ev_update.ready, 1)     # the timeout's ASSUMED_BAD goes at once
        now = 0

        async def tick():
            nonlocal now
            await ctx.tick()
            now += 1
            ctx.set(dut.now, now)

        ctx.set(dut.init.payload.qp, 0)
        ctx.set(dut.init.payload.psn, PSN)
        ctx.set(dut.init.valid, 1)
        while not ctx.get(dut.init.ready):
            await tick()
        await tick()
        ctx.set(dut.init.valid, 0)
        ctx.set(dut.sent.payload, _packet(0, 1, 0xAAAA_0001))
        ctx.set(dut.sent.valid, 1)
        await tick()
        ctx.set(dut.sent.valid, 0)

        for _ in range(4 * RTO):
            if ctx.get(dut.retransmit.valid):
                break
            await tick()
        assert ctx.get(dut.retransmit.valid), "the packet never timed out"
        offered = ctx.get(dut.retransmit.payload)
        assert (offered.pkt.psn, offered.pkt.tries, offered.avoid) == (PSN, 1, 1)

        # The record is rewritten while the offer waits.
        ctx.set(dut.sent.payload, _packet(1, 2, 0xBBBB_0002))
        ctx.set(dut.sent.valid, 1)
        await tick()
        ctx.set(dut.sent.valid, 0)
        for _ in range(5):
            assert ctx.get(dut.retransmit.valid), "the offer was withdrawn"
            assert ctx.get(dut.retransmit.payload) == offered, \
                "the offered retransmission changed before it was taken"
            await tick()
        ctx.set(dut.retransmit.ready, 1)
        await tick()
        seen.append(offered)

    sim.add_testbench(bench)
    sim.run_until(1e-8 * 400)
    assert seen, "the bench did not finish"
