"""Packet records: a record per packet in flight (its descriptor, its EV and profile entry, its
send time), written as it is sent, and the send time of each packet NACKed as trimmed."""

from amaranth import Cat, Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from mrcnic.wire import TIME_BITS

from .reorder_tracker import PSN_BITS
from .segmenter import packet_descriptor_layout

__all__ = ["sent_layout", "record_layout", "PacketRecords"]


def sent_layout(qps, evs):
    """A data packet granted its EV: the tracker records it."""
    return data.StructLayout({"pkt": packet_descriptor_layout(qps), "index": range(evs),
                              "ev": 32})


def record_layout(qps, evs):
    """What is kept of a packet sent: ``sent_layout``'s fields and its send time."""
    sent = sent_layout(qps, evs)
    return data.StructLayout({**{name: f.shape for name, f in sent}, "time": TIME_BITS})


class PacketRecords(wiring.Component):
    """A slot per PSN of each QP's window (``window`` a QP, a power of two) in block RAM, holding
    the record of the packet sent with that PSN: ``sent``'s descriptor, EV and entry, and its
    send time (``now`` as it is sent).

    A packet is recorded as it is sent if it is new (its first try, and its QP's next PSN:
    ``una`` and ``nxt`` are each QP's bounds; one queued before its QP started again is not) or
    a retransmission still in flight (once acknowledged, its slot may already belong to the PSN
    a window later). ``new`` says a new one is recorded (its QP's ``nxt`` moves past it), and
    ``first`` that it is the only one its QP has in flight.

    The read port (``addr_qp``, ``addr_psn``; ``read``, its enable: a record offered on a
    stream is held until taken) gives ``record`` and ``trim_time`` a cycle later, transparent
    for a send in that cycle. ``trimmed`` keeps the record's send time as the trimmed send's of
    the slot named (``addr_qp``, ``addr_psn``): a SACK hole of that send is a full queue's, not
    its path's. A retransmission's later time makes its loss count against its path again.

    Attributes
    ----------
    sent : In(stream sent_layout), always ready.
    now : In(16); una, nxt : In(ArrayLayout(24, qps))
    new, first : Out(1)
    addr_qp : In(range(qps)); addr_psn : In(24); read : In(1)
    record : Out(record_layout); trim_time : Out(16); trimmed : In(1)
    """

    def __init__(self, qps=16, evs=64, window=256):
        if not isinstance(qps, int) or qps < 1:
            raise ValueError(f"qps must be a positive integer, not {qps!r}")
        if not isinstance(window, int) or window < 2 or window & (window - 1):
            raise ValueError(f"window must be a power of two, not {window!r}")
        self._qps, self._evs, self._window = qps, evs, window
        psns = data.ArrayLayout(PSN_BITS, qps)
        super().__init__({
            "sent": In(stream.Signature(sent_layout(qps, evs), always_ready=True)),
            "now": In(TIME_BITS), "una": In(psns), "nxt": In(psns),
            "new": Out(1), "first": Out(1),
            "addr_qp": In(range(qps)), "addr_psn": In(PSN_BITS), "read": In(1),
            "record": Out(record_layout(qps, evs)), "trim_time": Out(TIME_BITS),
            "trimmed": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        wb = self._window.bit_length() - 1
        qb = max(1, (self._qps - 1).bit_length())
        depth = (1 << qb) * self._window

        def slot(qp, psn):
            return Cat(psn[:wb], qp)

        m.submodules.records = mem = Memory(shape=record_layout(self._qps, self._evs),
                                            depth=depth, init=[])
        wr = mem.write_port()
        rd = mem.read_port(transparent_for=(wr,))
        m.submodules.trims = tmem = Memory(shape=TIME_BITS, depth=depth, init=[])
        t_wr = tmem.write_port()
        t_rd = tmem.read_port()

        s = self.sent.payload
        s_q, s_psn = s.pkt.qp, s.pkt.psn
        s_una, s_nxt = self.una[s_q], self.nxt[s_q]
        new = self.sent.valid & (s.pkt.tries == 0) & (s_psn == s_nxt)
        live = (s_psn - s_una)[:PSN_BITS] < (s_nxt - s_una)[:PSN_BITS]
        m.d.comb += [
            self.new.eq(new), self.first.eq(s_una == s_nxt),
            wr.en.eq(new | (self.sent.valid & (s.pkt.tries != 0) & live)),
            wr.addr.eq(slot(s_q, s_psn)),
            wr.data.eq(Cat(s.pkt, s.index, s.ev, self.now)),
        ]
        m.d.comb += [rd.addr.eq(slot(self.addr_qp, self.addr_psn)), rd.en.eq(self.read),
                     t_rd.addr.eq(rd.addr), self.record.eq(rd.data),
                     self.trim_time.eq(t_rd.data)]
        m.d.comb += [t_wr.addr.eq(rd.addr), t_wr.data.eq(self.record.time),
                     t_wr.en.eq(self.trimmed)]
        return m
