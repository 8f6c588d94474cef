"""Message completer: a message completes once, when all its packets are placed, in MSN order."""

from amaranth import Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .reorder_tracker import PSN_BITS
from .rx_event import TRACKED, RxOutcome, completion_layout, event_layout

__all__ = ["MessageCompleter"]


class MessageCompleter(wiring.Component):
    """Per QP, the next MSN to complete and, for the ``messages`` MSNs from it, the last packet
    of each message that has arrived (its PSN and immediate). A message is whole when the
    cumulative PSN passes its last packet: every PSN before it has arrived, and the events come
    only once their data is placed. Each event of a tracked outcome completes every message it
    makes whole, in MSN order, before it goes on to ``o``.

    The RX transport drops a data packet whose MSN is ``messages`` or more past ``next_msn``
    (``msn_qp`` in, ``msn_next`` out, combinational), so an MSN's slot is never taken twice.

    Attributes
    ----------
    init : In(stream {qp, msn}): management: the QP's first MSN; its slots are cleared
    i : In(stream event_layout(qps));  o : Out(stream event_layout(qps))
    cpl : Out(stream completion_layout(qps))
    msn_qp : In(range(qps));  msn_next : Out(16)
    """

    def __init__(self, qps=16, messages=512):
        if not isinstance(qps, int) or qps < 1:
            raise ValueError(f"qps must be a positive integer, not {qps!r}")
        if not isinstance(messages, int) or messages < 2 or messages & (messages - 1) \
                or messages > 1 << 15:
            raise ValueError(f"messages must be a power of two from 2 to 32768, not {messages!r}")
        self._qps, self._messages = qps, messages
        ev = event_layout(qps)
        super().__init__({
            "init": In(stream.Signature(data.StructLayout({"qp": range(qps), "msn": 16}))),
            "i": In(stream.Signature(ev)),
            "o": Out(stream.Signature(ev)),
            "cpl": Out(stream.Signature(completion_layout(qps))),
            "msn_qp": In(range(qps)),
            "msn_next": Out(16),
        })

    def elaborate(self, platform):
        m = Module()
        M, Q = self._messages, self._qps
        mb = (M - 1).bit_length()
        slot = data.StructLayout({"valid": 1, "last_psn": PSN_BITS, "imm": 32, "has_imm": 1})
        m.submodules.slots = slots = Memory(shape=slot, depth=Q * M, init=[])
        rd, wr = slots.read_port(transparent_for=()), slots.write_port()
        next_msn = [Signal(16, name=f"next_msn{q}") for q in range(Q)]
        m.d.comb += self.msn_next.eq(_pick(m, next_msn, self.msn_qp, 16))

        ev = Signal(event_layout(Q))
        cur = Signal(16)                  # next_msn of the event's QP
        m.d.comb += cur.eq(_pick(m, next_msn, ev.qp, 16))
        m.d.comb += self.o.payload.eq(ev)

        clear_qp = Signal(range(Q))
        clear_at = Signal(mb + 1)

        e = self.i.payload
        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.init.valid):
                    # Management first: the QP's slots are emptied before its traffic counts.
                    m.d.comb += self.init.ready.eq(1)
                    for q in range(Q):
                        with m.If(self.init.payload.qp == q):
                            m.d.sync += next_msn[q].eq(self.init.payload.msn)
                    m.d.sync += [clear_qp.eq(self.init.payload.qp), clear_at.eq(0)]
                    m.next = "CLEAR"
                with m.Elif(self.i.valid):
                    m.d.comb += self.i.ready.eq(1)
                    m.d.sync += ev.eq(e)
                    new = (e.outcome == RxOutcome.PLACED) | (e.outcome == RxOutcome.EMPTY)
                    with m.If(new & e.is_last):
                        m.d.comb += [wr.en.eq(1), wr.addr.eq(Cat(e.msn[:mb], e.qp)),
                                     wr.data.valid.eq(1), wr.data.last_psn.eq(e.psn),
                                     wr.data.imm.eq(e.imm), wr.data.has_imm.eq(e.has_imm)]
                    tracked = Signal()
                    m.d.comb += tracked.eq(e.outcome.as_value().matches(*TRACKED))
                    with m.If(tracked):
                        m.next = "READ"
                    with m.Else():
                        m.next = "PASS"
            with m.State("CLEAR"):
                m.d.comb += [wr.en.eq(1), wr.addr.eq(Cat(clear_at[:mb], clear_qp)),
                             wr.data.valid.eq(0)]
                m.d.sync += clear_at.eq(clear_at + 1)
                with m.If(clear_at == M - 1):
                    m.next = "IDLE"
            with m.State("READ"):
                m.d.comb += rd.addr.eq(Cat(cur[:mb], ev.qp))
                m.next = "JUDGE"
            with m.State("JUDGE"):
                # The address is held: the slot must not change while the completion waits.
                m.d.comb += rd.addr.eq(Cat(cur[:mb], ev.qp))
                s = slot(rd.data)
                # Whole when the cumulative PSN is past the last packet (24-bit serial order).
                gap = Signal(PSN_BITS)
                m.d.comb += gap.eq(ev.cack - s.last_psn - 1)
                with m.If(s.valid & ~gap[PSN_BITS - 1]):
                    c = self.cpl.payload
                    m.d.comb += [self.cpl.valid.eq(1), c.qp.eq(ev.qp), c.msn.eq(cur),
                                 c.imm.eq(s.imm), c.has_imm.eq(s.has_imm)]
                    with m.If(self.cpl.ready):
                        m.d.comb += [wr.en.eq(1), wr.addr.eq(Cat(cur[:mb], ev.qp)),
                                     wr.data.valid.eq(0)]
                        for q in range(Q):
                            with m.If(ev.qp == q):
                                m.d.sync += next_msn[q].eq(cur + 1)
                        m.next = "READ"
                with m.Else():
                    m.next = "PASS"
            with m.State("PASS"):
                m.d.comb += self.o.valid.eq(1)
                with m.If(self.o.ready):
                    m.next = "IDLE"
        return m


def _pick(m, signals, index, width):
    """``signals[index]`` as a mux (index within range)."""
    out = Signal(width)
    with m.Switch(index):
        for q, s in enumerate(signals):
            with m.Case(q):
                m.d.comb += out.eq(s)
    return out
