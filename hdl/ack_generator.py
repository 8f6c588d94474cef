"""Acknowledgement generator: SACKs (coalesced) and NACKs from the receiver's packet outcomes."""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from mrcnic import wire

from .bits import decode
from .reorder_tracker import PSN_BITS, SACK_BITS
from .rx_event import AckKind, RxOutcome, ack_layout, event_layout

__all__ = ["AckGenerator"]


class AckGenerator(wiring.Component):
    """Per QP: arrivals not yet acknowledged, when the first of them came, the out-of-order and
    byte counts the SACK reports, and the last arrival's SACK view. From each event:

    - a new data packet (PLACED or EMPTY) is acknowledged by a SACK of its own view when it is
      the ``coalesce``-th unacknowledged one, or when it came ECN-CE marked (``m`` = SKIP_ONCE,
      so the sender skips its EV) or asked for an ACK (BTH ``a``); otherwise it waits;
    - a duplicate is acknowledged at once: its sender evidently missed the last SACK;
    - a probe is answered at once by a SACK with the probe-response bit, echoing its EV (and
      ``m`` = SKIP_ONCE if it came ECN-CE marked);
    - BEYOND, TRIMMED, TRIMMED_LASTHOP, RKEY and BOUNDS are NACKed at once (PSN_OOR_WINDOW,
      TRIMMED, TRIMMED_LASTHOP, and UNEXP_EVENT for both access violations);
    - between events the QPs are scanned in turn, and one whose oldest unacknowledged arrival is
      ``timeout`` cycles old gets a SACK of its last arrival's view.

    Every SACK's ``rcv_cwnd_pen`` is the number of QPs that took new data in this period of
    ``share_period`` cycles or the last (the SACK's own QP included; at most 127), or 0 when
    ``share_period`` is 0. The senders divide this port between them by it: in an incast the
    last hop marks no ECN, and a sender's own feedback, one SACK per ``coalesce`` of its
    packets, comes too rarely to stop the window it opened before the incast began.

    Any SACK acknowledges everything before it, so it resets the QP's count. MRC-REFERENCE fixes
    the SACK's fields, not these rules; this project chose them (docs/architecture.md).

    Attributes
    ----------
    init : In(stream {qp}): management: the QP's counts start again from zero
    i : In(stream event_layout(qps));  ack : Out(stream ack_layout(qps))
    coalesce : In(8), arrivals per SACK (0 acts as 1);  timeout : In(32), cycles
    share_period : In(16), cycles (0: ``rcv_cwnd_pen`` is 0)
    sacks, nacks : Out(1), events (:attr:`events`): one sent
    """

    def __init__(self, qps=16):
        if not isinstance(qps, int) or qps < 1:
            raise ValueError(f"qps must be a positive integer, not {qps!r}")
        self._qps = qps
        super().__init__({
            "init": In(stream.Signature(data.StructLayout({"qp": range(qps)}))),
            "i": In(stream.Signature(event_layout(qps))),
            "ack": Out(stream.Signature(ack_layout(qps))),
            "coalesce": In(8), "timeout": In(32), "share_period": In(16),
            "sacks": Out(1), "nacks": Out(1),
        })

    @property
    def events(self):
        """The counters' event outputs, for the register bank to count."""
        return ("sacks", "nacks")

    def elaborate(self, platform):
        m = Module()
        Q = self._qps
        view = data.StructLayout({"psn": PSN_BITS, "ev": 32, "ts": 16, "cack": PSN_BITS,
                                  "sack_offset": 16, "sack_bitmap": SACK_BITS})
        state = data.StructLayout({"pending": 8, "since": 32, "ooo_count": 15, "rcvd_bytes": 24,
                                   "last": view})
        m.submodules.states = states = Memory(shape=state, depth=Q, init=[])
        rd, wr = states.read_port(transparent_for=()), states.write_port()

        now = Signal(32)
        m.d.sync += now.eq(now + 1)
        scan = Signal(range(Q))
        ev = Signal(event_layout(Q))
        st = state(rd.data)
        a = self.ack.payload
        limit = Signal(9)
        m.d.comb += limit.eq(Mux(self.coalesce == 0, 1, self.coalesce))

        # The QPs that took new data this period (cur) and the last (prev).
        cur, prev, tick = Signal(Q), Signal(Q), Signal(16)
        took = Signal(Q)           # this cycle's arrival, one-hot
        active = Signal(Q)
        m.d.comb += active.eq(cur | prev | took)
        with m.If(self.share_period == 0):
            m.d.sync += [cur.eq(0), prev.eq(0), tick.eq(0)]
        with m.Elif(tick + 1 >= self.share_period):
            m.d.sync += [prev.eq(cur | took), cur.eq(0), tick.eq(0)]
        with m.Else():
            m.d.sync += [cur.eq(cur | took), tick.eq(tick + 1)]
        senders = Signal(range(Q + 1))
        m.d.comb += senders.eq(sum(active[q] for q in range(Q)))
        # (rcv_cwnd_pen is 7 bits: saturate only where more QPs than that can be counted)
        said = Mux(senders > 127, 127, senders) if Q > 127 else senders
        pen = Mux(self.share_period == 0, 0, said)

        def sack(v, counts, *, m_mark=0, pr=0):
            m.d.comb += [a.kind.eq(AckKind.SACK), a.psn.eq(v.psn), a.ev.eq(v.ev), a.ts.eq(v.ts),
                         a.cack.eq(v.cack), a.sack_offset.eq(v.sack_offset),
                         a.sack_bitmap.eq(v.sack_bitmap), a.m.eq(m_mark), a.pr.eq(pr),
                         a.ooo_count.eq(counts.ooo_count), a.rcvd_bytes.eq(counts.rcvd_bytes),
                         a.rcv_cwnd_pen.eq(pen)]

        with m.If(self.ack.valid & self.ack.ready):
            with m.If(a.kind == AckKind.SACK):
                m.d.comb += self.sacks.eq(1)
            with m.Else():
                m.d.comb += self.nacks.eq(1)

        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.init.valid):
                    m.d.comb += [self.init.ready.eq(1), wr.en.eq(1),
                                 wr.addr.eq(self.init.payload.qp), wr.data.eq(0)]
                with m.Elif(self.i.valid):
                    m.d.comb += [self.i.ready.eq(1), rd.addr.eq(self.i.payload.qp)]
                    m.d.sync += ev.eq(self.i.payload)
                    m.next = "EVENT"
                with m.Else():
                    m.d.comb += rd.addr.eq(scan)
                    m.next = "SCAN"

            with m.State("EVENT"):
                # The QP's state after this event, and whether it is acknowledged now.
                nxt = Signal(state)
                arrived = Signal(view)
                send = Signal()
                mark = Mux(ev.ce, wire.SackMark.SKIP_ONCE, wire.SackMark.NONE)
                m.d.comb += [
                    arrived.psn.eq(ev.psn), arrived.ev.eq(ev.ev), arrived.ts.eq(ev.ts),
                    arrived.cack.eq(ev.cack), arrived.sack_offset.eq(ev.sack_offset),
                    arrived.sack_bitmap.eq(ev.sack_bitmap),
                    nxt.eq(st), a.qp.eq(ev.qp), rd.addr.eq(ev.qp),
                ]
                O = RxOutcome
                with m.Switch(ev.outcome):
                    with m.Case(O.PLACED, O.EMPTY):
                        count = st.pending + 1
                        m.d.comb += [
                            took.eq(decode(ev.qp, Q)),
                            nxt.ooo_count.eq(st.ooo_count + ev.ooo),
                            nxt.rcvd_bytes.eq(st.rcvd_bytes + ev.length), nxt.last.eq(arrived),
                            nxt.since.eq(Mux(st.pending == 0, now, st.since)),
                            nxt.pending.eq(count),
                            send.eq(ev.ce | ev.ackreq | (count >= limit)),
                        ]
                        sack(arrived, nxt, m_mark=mark)
                    with m.Case(O.DUPLICATE):
                        m.d.comb += [nxt.last.eq(arrived), send.eq(1)]
                        sack(arrived, nxt, m_mark=mark)
                    with m.Case(O.PROBE):
                        m.d.comb += send.eq(1)
                        sack(arrived, nxt, m_mark=mark, pr=1)
                    with m.Default():
                        m.d.comb += [send.eq(1), a.kind.eq(AckKind.NACK), a.psn.eq(ev.psn),
                                     a.ev.eq(ev.ev), a.ts.eq(ev.ts)]
                        with m.Switch(ev.outcome):
                            with m.Case(O.BEYOND):
                                m.d.comb += a.nack_reason.eq(wire.NackReason.PSN_OOR_WINDOW)
                            with m.Case(O.TRIMMED):
                                m.d.comb += a.nack_reason.eq(wire.NackReason.TRIMMED)
                            with m.Case(O.TRIMMED_LASTHOP):
                                m.d.comb += a.nack_reason.eq(wire.NackReason.TRIMMED_LASTHOP)
                            with m.Default():
                                m.d.comb += a.nack_reason.eq(wire.NackReason.UNEXP_EVENT)
                m.d.comb += [wr.addr.eq(ev.qp), wr.data.eq(nxt)]
                with m.If(send & (a.kind == AckKind.SACK)):
                    m.d.comb += wr.data.pending.eq(0)
                with m.If(~send):
                    m.d.comb += wr.en.eq(1)
                    m.next = "IDLE"
                with m.Else():
                    m.d.comb += self.ack.valid.eq(1)
                    with m.If(self.ack.ready):
                        m.d.comb += wr.en.eq(1)
                        m.next = "IDLE"

            with m.State("SCAN"):
                due = Signal()
                age = (now - st.since)[:32]
                m.d.comb += due.eq((st.pending != 0) & (age >= self.timeout))
                sack(st.last, st)
                m.d.comb += [rd.addr.eq(scan), a.qp.eq(scan), wr.addr.eq(scan), wr.data.eq(st),
                             wr.data.pending.eq(0)]
                with m.If(~due):
                    m.d.sync += scan.eq(Mux(scan == Q - 1, 0, scan + 1))
                    m.next = "IDLE"
                with m.Else():
                    m.d.comb += self.ack.valid.eq(1)
                    with m.If(self.ack.ready):
                        m.d.comb += wr.en.eq(1)
                        m.d.sync += scan.eq(Mux(scan == Q - 1, 0, scan + 1))
                        m.next = "IDLE"
        return m
