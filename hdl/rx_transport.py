"""RX transport: judges every packet the front end passes, places data, completes messages and
acknowledges."""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from mrcnic import wire

from .ack_generator import AckGenerator
from .frame_filter import FrameFilter
from .host_memory import MemWritePort
from .message_completer import MessageCompleter
from .payload_placer import PayloadPlacer, place_layout
from .qp_context import QpState, static_layout
from .reorder_tracker import PsnStatus, ReorderTracker, result_layout
from .rx_event import ANSWERED, RxOutcome, ack_layout, completion_layout, event_layout
from .rx_front import rx_meta_layout
from .stream import check_width
from .transport_parser import PacketKind, TransportError, TransportParser, transport_layout

__all__ = ["RxTransport", "init_layout", "RX_COUNTERS"]

#: the counters the transport keeps, besides one per outcome (``outcome_<name>``)
RX_COUNTERS = ("ooo", "completions", "sacks", "nacks", "place_errors")


def init_layout(qps):
    """Management: the first PSN and MSN a QP expects from its peer."""
    return data.StructLayout({"qp": range(qps), "psn": 24, "msn": 16})


class RxTransport(wiring.Component):
    """transport parser -> frame filter (holds each frame until judged) -> payload placer ->
    host memory; each packet's outcome (:class:`RxOutcome`) -> message completer ->
    acknowledgement generator.

    Each packet is judged in this order: malformed at the transport layer (OPCODE, TRUNCATED);
    a SACK, NACK, ACK or endpoint packet (FEEDBACK, handed to ``feedback``); no such QP or not
    RTR/RTS, or a data packet to the probe QP (QP); a probe (PROBE: the tracker is only looked
    at); a trimmed data packet (TRIMMED, or TRIMMED_LASTHOP if the last hop cut it); an R_Key
    not the QP's (RKEY); a payload outside the QP's memory region (BOUNDS); an MSN
    ``messages`` or more ahead (BEYOND); then the reorder tracker's verdict (PLACED or, with no
    payload, EMPTY; DUPLICATE; BEYOND). Only PLACED frames are written, and an outcome moves on
    only once every write before it is acknowledged by the memory, so a completion or a SACK
    never runs ahead of the data it reports.

    Attributes
    ----------
    i : In(stream {data, keep, last, meta: rx_meta_layout(planes)}), from the RX front end
    ctx_addr : Out(range(qps));  ctx : In(static_layout()), the QP context a cycle later
    init : In(stream init_layout(qps))
    mem : Out(MemWritePort(width))
    cpl : Out(stream completion_layout(qps));  ack : Out(stream ack_layout(qps))
    feedback : Out(stream transport_layout(planes))
    coalesce : In(8);  timeout : In(32);  share_period : In(16), the acknowledgement generator's
    outcome_<name> : Out(1) for each outcome;  ooo, completions, sacks, nacks,
    place_errors : Out(1): events (:attr:`events`)
    """

    def __init__(self, width=64, planes=2, qps=16, window=256, messages=512, depth=1024):
        self._width = check_width(width)
        self._planes, self._qps = planes, qps
        self._parser = TransportParser(width, planes)
        self._filter = FrameFilter(width, place_layout(), len(RxOutcome), depth)
        self._placer = PayloadPlacer(width)
        self._tracker = ReorderTracker(qps, window)
        self._completer = MessageCompleter(qps, messages)
        self._acks = AckGenerator(qps)
        self._messages = messages
        pkt = data.StructLayout({"data": width, "keep": width // 8, "last": 1,
                                 "meta": rx_meta_layout(planes)})
        super().__init__({
            "i": In(stream.Signature(pkt)),
            "ctx_addr": Out(range(qps)), "ctx": In(static_layout()),
            "init": In(stream.Signature(init_layout(qps))),
            "mem": Out(MemWritePort(width)),
            "cpl": Out(stream.Signature(completion_layout(qps))),
            "ack": Out(stream.Signature(ack_layout(qps))),
            "feedback": Out(stream.Signature(transport_layout(planes))),
            "coalesce": In(8), "timeout": In(32), "share_period": In(16),
            **{f"outcome_{o.name.lower()}": Out(1) for o in RxOutcome},
            **{name: Out(1) for name in RX_COUNTERS},
        })

    @property
    def events(self):
        """The counters' event outputs, for the register bank to count."""
        return (*(f"outcome_{o.name.lower()}" for o in RxOutcome), *RX_COUNTERS)

    def elaborate(self, platform):
        m = Module()
        parser, filt, placer, tracker, completer, acks = (
            self._parser, self._filter, self._placer, self._tracker, self._completer, self._acks)
        for name, sub in (("parser", parser), ("filter", filt), ("placer", placer),
                          ("tracker", tracker), ("completer", completer), ("acks", acks)):
            m.submodules[name] = sub
        Q = self._qps
        flip = wiring.flipped
        wiring.connect(m, flip(self.i), parser.i)
        wiring.connect(m, parser.o, filt.i)
        wiring.connect(m, filt.o, placer.i)
        wiring.connect(m, placer.wr, flip(self.mem.wr))
        wiring.connect(m, completer.cpl, flip(self.cpl))
        wiring.connect(m, completer.o, acks.i)
        wiring.connect(m, acks.ack, flip(self.ack))
        m.d.comb += [acks.coalesce.eq(self.coalesce), acks.timeout.eq(self.timeout),
                     acks.share_period.eq(self.share_period),
                     self.sacks.eq(acks.sacks), self.nacks.eq(acks.nacks),
                     self.outcome_placed.eq(filt.passed)]
        for o in RxOutcome:
            if o is not RxOutcome.PLACED:
                m.d.comb += getattr(self, f"outcome_{o.name.lower()}").eq(
                    getattr(filt, f"dropped{o.value}"))

        # Management: a QP's first PSN and MSN reach the tracker, the completer and the
        # acknowledgement generator; the request is taken once all three have it.
        done = Signal(3)
        inits = (tracker.init, completer.init, acks.init)
        took = Signal(3)
        for k, s in enumerate(inits):
            m.d.comb += [s.valid.eq(self.init.valid & ~done[k]), took[k].eq(s.valid & s.ready),
                         s.payload.qp.eq(self.init.payload.qp)]
        m.d.comb += [tracker.init.payload.psn.eq(self.init.payload.psn),
                     completer.init.payload.msn.eq(self.init.payload.msn),
                     self.init.ready.eq((done | took) == 0b111)]
        with m.If(self.init.ready):
            m.d.sync += done.eq(0)
        with m.Else():
            m.d.sync += done.eq(done | took)

        # --- The judge: one transport record at a time. ---
        layout = transport_layout(self._planes)
        r = Signal(layout)
        t = Signal(result_layout(Q))
        outcome = Signal(RxOutcome)
        qp = r.qp[:max(1, (Q - 1).bit_length())]
        ctx = self.ctx
        rec = parser.rec

        # Feedback records wait in a FIFO of their own, so the judge never waits on a consumer.
        m.submodules.feedbacks = fbq = fifo.SyncFIFOBuffered(width=layout.size, depth=4)
        m.d.comb += [fbq.w_data.eq(r), self.feedback.payload.eq(fbq.r_data),
                     self.feedback.valid.eq(fbq.r_rdy), fbq.r_en.eq(self.feedback.ready)]

        elayout = event_layout(Q)
        queued = data.StructLayout({"placed": 1, "event": elayout})
        m.submodules.events = events = fifo.SyncFIFOBuffered(width=queued.size, depth=16)

        v = filt.verdict.payload
        ew = queued(events.w_data)
        e = ew.event
        m.d.comb += [
            v.drop.eq(outcome != RxOutcome.PLACED), v.reason.eq(outcome),
            v.meta.addr.eq(r.va), v.meta.length.eq(r.length), v.meta.head.eq(r.head),
            ew.placed.eq(outcome == RxOutcome.PLACED),
            e.outcome.eq(outcome), e.qp.eq(qp), e.psn.eq(r.psn), e.ooo.eq(t.ooo),
            e.cack.eq(t.cack), e.sack_offset.eq(t.sack_offset), e.sack_bitmap.eq(t.sack_bitmap),
            e.ev.eq(r.ev), e.ce.eq(r.ce), e.ts.eq(r.ts), e.ackreq.eq(r.ackreq),
            e.is_last.eq(r.is_last), e.msn.eq(r.msn), e.imm.eq(r.imm), e.has_imm.eq(r.has_imm),
            e.length.eq(r.length),
            tracker.arrive.payload.qp.eq(qp), tracker.arrive.payload.psn.eq(r.psn),
            tracker.arrive.payload.peek.eq(r.kind == PacketKind.PROBE),
            completer.msn_qp.eq(qp),
        ]

        state_ok = (ctx.state == QpState.RTR) | (ctx.state == QpState.RTS)
        ahead = Signal(16)
        m.d.comb += ahead.eq(r.msn - completer.msn_next)
        end = r.va + r.length
        region_end = ctx.mr_va + ctx.mr_length
        answered = Signal()
        m.d.comb += answered.eq(outcome.as_value().matches(*ANSWERED))

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += [rec.ready.eq(1), self.ctx_addr.eq(rec.payload.qp)]
                with m.If(rec.valid):
                    m.d.sync += r.eq(rec.payload)
                    m.next = "LOOKUP"
            with m.State("LOOKUP"):
                m.d.comb += self.ctx_addr.eq(qp)
                m.next = "DECIDE"
                with m.If(r.error == TransportError.OPCODE):
                    m.d.sync += outcome.eq(RxOutcome.OPCODE)
                with m.Elif(r.error == TransportError.TRUNCATED):
                    m.d.sync += outcome.eq(RxOutcome.TRUNCATED)
                with m.Elif(r.kind == PacketKind.FEEDBACK):
                    m.d.sync += outcome.eq(RxOutcome.FEEDBACK)
                with m.Elif((r.qp >= Q) | ~state_ok
                            | ((r.kind == PacketKind.DATA) & (r.qp == wire.PROBE_DQP))):
                    m.d.sync += outcome.eq(RxOutcome.QP)
                with m.Elif(r.kind == PacketKind.PROBE):
                    m.d.sync += outcome.eq(RxOutcome.PROBE)
                    m.next = "TRACK"
                with m.Elif(r.trimmed):
                    m.d.sync += outcome.eq(Mux(r.last_hop, RxOutcome.TRIMMED_LASTHOP,
                                               RxOutcome.TRIMMED))
                with m.Elif(r.rkey != ctx.rkey):
                    m.d.sync += outcome.eq(RxOutcome.RKEY)
                with m.Elif((r.va < ctx.mr_va) | (end > region_end)):
                    m.d.sync += outcome.eq(RxOutcome.BOUNDS)
                with m.Elif(~ahead[15] & (ahead >= self._messages)):
                    m.d.sync += outcome.eq(RxOutcome.BEYOND)
                with m.Else():
                    m.next = "TRACK"
            with m.State("TRACK"):
                m.d.comb += tracker.arrive.valid.eq(1)
                with m.If(tracker.arrive.ready):
                    m.next = "TRACKED"
            with m.State("TRACKED"):
                m.d.comb += tracker.result.ready.eq(1)
                res = tracker.result.payload
                with m.If(tracker.result.valid):
                    m.d.sync += t.eq(res)
                    with m.Switch(res.status):
                        with m.Case(PsnStatus.NEW):
                            m.d.sync += outcome.eq(Mux(r.length == 0, RxOutcome.EMPTY,
                                                       RxOutcome.PLACED))
                        with m.Case(PsnStatus.DUPLICATE):
                            m.d.sync += outcome.eq(RxOutcome.DUPLICATE)
                        with m.Case(PsnStatus.BEYOND):
                            m.d.sync += outcome.eq(RxOutcome.BEYOND)
                    m.next = "DECIDE"
            with m.State("DECIDE"):
                fb = outcome == RxOutcome.FEEDBACK
                room = (~answered | events.w_rdy) & (~fb | fbq.w_rdy)
                m.d.comb += [filt.verdict.valid.eq(room),
                             fbq.w_en.eq(fb & room & filt.verdict.ready),
                             events.w_en.eq(answered & room & filt.verdict.ready)]
                with m.If(room & filt.verdict.ready):
                    m.d.sync += t.eq(0)
                    with m.If(((outcome == RxOutcome.PLACED) | (outcome == RxOutcome.EMPTY))
                              & t.ooo):
                        m.d.comb += self.ooo.eq(1)
                    m.next = "IDLE"

        # --- Outcomes move on in order, each once the writes before it are acknowledged. ---
        er = queued(events.r_data)
        ack = self.mem.ack
        need = er.placed
        go = events.r_rdy & (~need | ack.valid)
        m.d.comb += [
            completer.i.payload.eq(er.event),
            completer.i.valid.eq(go),
            events.r_en.eq(go & completer.i.ready),
            ack.ready.eq(events.r_rdy & need & completer.i.ready),
        ]
        with m.If(ack.valid & ack.ready & ack.payload.error):
            m.d.comb += self.place_errors.eq(1)
        with m.If(self.cpl.valid & self.cpl.ready):
            m.d.comb += self.completions.eq(1)
        return m
