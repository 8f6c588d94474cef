"""What each entry of each QP's EV profile saw of its path: round trips, ECN marks, losses."""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from mrcnic.wire import TIME_BITS

from .retransmit_tracker import PathEvent, path_event_layout

__all__ = ["path_record_layout", "PathStats"]


def path_record_layout():
    """One entry's record: its last RTT sample, and counts that wrap at 2^32."""
    return data.StructLayout({"rtt": TIME_BITS, "timed": 32, "ecn": 32, "acked": 32,
                              "lost": 32})


class PathStats(wiring.Component):
    """A record per (QP, profile entry), in block RAM, kept from the reliability engine's path
    events about packets sent on that entry: one timed by the SACK it triggered sets ``rtt``
    and counts in ``timed`` (and in ``ecn`` if it arrived marked); one that arrived counts in
    ``acked``; one sent again in ``lost``. Records start at zero and count for as long as the
    NIC runs, whatever EV the entry holds.

    Each event is a read, then a write a cycle later; an event the cycle after another for the
    same record reads what that one writes (the read port is transparent), so none is lost.

    Attributes
    ----------
    event : In(stream path_event_layout), always ready.
    view_qp : In(range(qps)); view_index : In(range(evs)); view : Out(path_record_layout()),
        that entry's record, a cycle later.
    """

    def __init__(self, qps=16, evs=64):
        if not isinstance(qps, int) or qps < 1 or not isinstance(evs, int) or evs < 1:
            raise ValueError(f"qps and evs must be positive integers, not {qps!r}, {evs!r}")
        self._qps, self._evs = qps, evs
        super().__init__({
            "event": In(stream.Signature(path_event_layout(qps, evs), always_ready=True)),
            "view_qp": In(range(qps)), "view_index": In(range(evs)),
            "view": Out(path_record_layout()),
        })

    def elaborate(self, platform):
        m = Module()
        ib = max(1, (self._evs - 1).bit_length())
        m.submodules.records = mem = Memory(shape=path_record_layout(),
                                            depth=self._qps << ib, init=[])
        wr = mem.write_port()
        rd = mem.read_port(transparent_for=(wr,))
        look = mem.read_port()
        ev = self.event.payload
        m.d.comb += [rd.addr.eq(ev.qp << ib | ev.index),
                     look.addr.eq(self.view_qp << ib | self.view_index),
                     self.view.eq(look.data)]

        # the event read this cycle is applied to its record the next
        pending = Signal()
        held = Signal(path_event_layout(self._qps, self._evs))
        addr = Signal(len(rd.addr))
        m.d.sync += [pending.eq(self.event.valid), held.eq(ev), addr.eq(rd.addr)]
        old, new = rd.data, Signal(path_record_layout())
        timed = held.kind == PathEvent.TIMED
        m.d.comb += [
            new.rtt.eq(Mux(timed, held.rtt, old.rtt)),
            new.timed.eq(old.timed + timed),
            new.ecn.eq(old.ecn + (timed & held.ecn)),
            new.acked.eq(old.acked + (held.kind == PathEvent.ACKED)),
            new.lost.eq(old.lost + (held.kind == PathEvent.LOST)),
            wr.addr.eq(addr), wr.data.eq(new), wr.en.eq(pending),
        ]
        return m
