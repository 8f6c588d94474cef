"""The retransmit tracker alone, in Amaranth's simulator: what its streams offer does not
change while it waits to be taken (stream rules), even when the record it comes from is
rewritten meanwhile; a SACK takes out of the flight only the packets no earlier SACK
took, however often its bitmap repeats them; and the room a SACK makes does not let a packet
go before the SACK's verdict on the EVs it found lost on. (The tracker's behaviour is specified in
test_reliability_hdl.py, on the whole NIC against the sender's reference model.)"""

from amaranth.sim import Simulator

from mrcnic import wire
from mrcnic.enums import EvState, RelMode
from mrcnic.hdl.retransmit_tracker import PathEvent, RetransmitTracker

RTO = 24            # rto_min = rto_max: the timer fires this many cycles after a send
PSN = 100


def _tracker():
    """A tracker of two QPs and four entries each, in a simulator with its clock."""
    dut = RetransmitTracker(qps=2, evs=4, planes=2, window=64, spines=4)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    return dut, sim


def _packet(tries, index, ev):
    """A ``sent`` payload: QP 0's packet PSN, its try, the entry and EV it was granted."""
    return {"pkt": {"wr_id": 7, "qp": 0, "psn": PSN, "length": 64, "last": 1, "tries": tries},
            "index": index, "ev": ev}


def test_an_offered_retransmission_holds_while_its_record_is_rewritten():
    """A packet times out; its retransmission is offered and not taken. Meanwhile an earlier
    retransmission of the same packet is recorded (a ``sent`` with a try, on another entry),
    which rewrites the record the offer came from. The offer must stay as it was: the try and
    the entry to avoid of the record it was made from."""
    dut, sim = _tracker()
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


async def _give(ctx, dut, record, tick):
    """Offers ``record`` on ``feedback`` until the tracker takes it."""
    ctx.set(dut.feedback.payload, record)
    ctx.set(dut.feedback.valid, 1)
    while True:
        taken = ctx.get(dut.feedback.ready)
        await tick()
        if taken:
            break
    ctx.set(dut.feedback.valid, 0)


def _set_up(ctx, dut):
    """Selective mode, a window that never shuts, timers that do not fire: every stream taken."""
    for name, value in (("mode", RelMode.SELECTIVE), ("rto_min", 1 << 15), ("rto_max", 1 << 15),
                        ("reorder", 3), ("cwnd_init", 1 << 20), ("cwnd_min", 1 << 10),
                        ("cwnd_max", 1 << 22), ("target_rtt", 100)):
        ctx.set(getattr(dut, name), value)
    for port in (dut.ev_update, dut.retransmit, dut.cpl):
        ctx.set(port.ready, 1)


def _sack(cack, offset, psns, trigger, ev):
    """A SACK record for QP 0: cumulative PSN ``cack``, bitmap from ``cack + offset`` with
    ``psns`` arrived, triggered by PSN ``trigger`` on EV ``ev``."""
    bitmap = sum(1 << (psn - cack - offset) for psn in psns)
    seth = wire.SETH.pack(cack_psn=cack, sack_offset=offset, sack_bitmap=bitmap,
                          ack_psn_offset=trigger - cack, entropy=ev)
    return {"kind": 2, "opcode": wire.Opcode.SACK, "qp": 0,
            "ext": int.from_bytes(seth, "little")}


async def _send_eight(ctx, dut, tick):
    """QP 0 starts at PSN, then sends eight 64-byte packets through the gate, PSN + k on
    entry k % 4 with EV 0x1000 + k."""
    ctx.set(dut.init.payload, {"qp": 0, "psn": PSN})
    ctx.set(dut.init.valid, 1)
    while not ctx.get(dut.init.ready):
        await tick()
    await tick()
    ctx.set(dut.init.valid, 0)
    await tick()                # (the first window is set the cycle after the start)
    ctx.set(dut.gate_length, 64)
    for k in range(8):
        ctx.set(dut.gate_take, 1)
        ctx.set(dut.sent.payload, {
            "pkt": {"wr_id": k, "qp": 0, "psn": PSN + k, "length": 64, "last": 0,
                    "tries": 0}, "index": k % 4, "ev": 0x1000 + k})
        ctx.set(dut.sent.valid, 1)
        await tick()
    ctx.set(dut.gate_take, 0)
    ctx.set(dut.sent.valid, 0)


def test_a_sack_takes_each_packet_out_of_the_flight_once():
    """Eight 64-byte packets are in flight. A SACK says PSNs 2 and 3 (of the eight) arrived,
    then another says 2, 3 and 5: the bytes in flight fall by two packets, then by one, and
    each of the three is reported arrived (a path event ACKED) once."""
    dut, sim = _tracker()
    flights, acked = [], []

    async def bench(ctx):
        _set_up(ctx, dut)
        now = 0

        async def tick():
            nonlocal now
            if ctx.get(dut.path_event.valid) and \
                    ctx.get(dut.path_event.payload.kind) == PathEvent.ACKED:
                acked.append(ctx.get(dut.path_event.payload.index))
            await ctx.tick()
            now += 1
            ctx.set(dut.now, now)

        await _send_eight(ctx, dut, tick)
        await tick()                # (a packet's bytes count the cycle after it passes the gate)
        flights.append(ctx.get(dut.view_inflight))

        for arrived in ((2, 3), (2, 3, 5)):
            last = arrived[-1]
            await _give(ctx, dut, _sack(PSN, 2, [PSN + k for k in arrived], PSN + last,
                                        0x1000 + last), tick)
            for _ in range(200):
                await tick()
            flights.append(ctx.get(dut.view_inflight))

    sim.add_testbench(bench)
    sim.run_until(1e-8 * 1000)
    assert flights == [8 * 64, 6 * 64, 5 * 64], f"bytes in flight: {flights}"
    assert sorted(acked) == [1, 2, 3], f"entries of the packets reported arrived: {acked}"


def test_a_probe_is_answered_once_by_the_first_answer_on_its_ev():
    """Three probes leave on entries 0, 1 and 2 (EVs 0x2000 .. 0x2002). An answer on the last
    one's EV sets entry 2 GOOD; the same answer again finds that probe answered and does
    nothing; an answer on the first one's EV, two probes later, still finds it. Then four more
    probes leave, the QP's last four of which are kept: the first one's EV is no longer known."""
    dut, sim = _tracker()
    answers = []

    async def bench(ctx):
        _set_up(ctx, dut)

        async def tick(n=1):
            for _ in range(n):
                if ctx.get(dut.probe_answer.valid):
                    answers.append(ctx.get(dut.probe_answer.payload.index))
                await ctx.tick()

        ctx.set(dut.init.payload, {"qp": 0, "psn": PSN})
        ctx.set(dut.init.valid, 1)
        await tick()
        ctx.set(dut.init.valid, 0)

        async def probe(index, ev):
            ctx.set(dut.probed.payload, {"qp": 0, "index": index, "ev": ev})
            ctx.set(dut.probed.valid, 1)
            await tick()
            ctx.set(dut.probed.valid, 0)

        async def answer(ev):
            seth = wire.SETH.pack(cack_psn=PSN, pr=1, entropy=ev)
            await _give(ctx, dut, {"kind": 2, "opcode": wire.Opcode.SACK, "qp": 0,
                                   "ext": int.from_bytes(seth, "little")}, tick)
            await tick(30)
            return list(answers)

        for k in range(3):
            await probe(k, 0x2000 + k)
        assert await answer(0x2002) == [2]
        assert await answer(0x2002) == [2], "a probe was answered twice"
        assert await answer(0x2000) == [2, 0]
        await probe(3, 0x2003)
        await probe(3, 0x2003)      # (slot 0: the first probe's is overwritten)
        assert await answer(0x2001) == [2, 0, 1]
        answers.clear()
        for _ in range(4):
            await probe(3, 0x2003)
        assert await answer(0x2000) == [], "an answer matched a probe no longer kept"
        assert await answer(0x2003) == [3]

    sim.add_testbench(bench)
    sim.run_until(1e-8 * 2000)
    assert answers == [3], f"entries answered at the end: {answers}"


def test_a_sacks_verdict_on_an_ev_comes_before_the_sends_it_makes_room_for():
    """Eight 64-byte packets fill QP 0's window (512 bytes). A SACK says the last seven arrived:
    their bytes leave the flight, and the first packet, three or more below the highest
    arrived, is a hole, so its entry (0) goes SKIP. The QP's next packet must not pass the gate
    before that SKIP is out: let go in between, it would take its EV from a scheduler that has
    not heard of the hole, and on a dead path it would be lost too. The gate must open after."""
    dut, sim = _tracker()
    opened, skipped = [], []

    async def bench(ctx):
        _set_up(ctx, dut)
        ctx.set(dut.cwnd_init, 8 * 64)
        now = 0

        async def tick():
            nonlocal now
            if ctx.get(dut.gate_open) or ctx.get(dut.gate_ready) & 1:
                opened.append(now)
            u = dut.ev_update
            if ctx.get(u.valid) and ctx.get(u.payload.index) == 0:
                skipped.append((now, ctx.get(u.payload.state)))
            await ctx.tick()
            now += 1
            ctx.set(dut.now, now)

        await _send_eight(ctx, dut, tick)
        ctx.set(dut.gate_qp, 0)
        ctx.set(dut.gate_psn, PSN + 8)
        await tick()
        opened.clear()              # (open while the packets were still being counted)
        await tick()
        assert not opened, "the window was open with eight packets in flight"
        await _give(ctx, dut, _sack(PSN, 1, [PSN + k for k in range(1, 8)], PSN + 7, 0x1007),
                    tick)
        for _ in range(200):
            await tick()

    sim.add_testbench(bench)
    sim.run_until(1e-8 * 1000)
    assert skipped and skipped[0][1] == EvState.SKIP, f"entry 0's updates: {skipped}"
    assert opened, "the SACK never opened the window"
    assert skipped[0][0] < opened[0], (
        f"the window opened at cycle {opened[0]}, before the hole's SKIP at {skipped[0][0]}")
