"""Hole judge: whether an outstanding packet is lost, by count or by time, and what its loss
says of the path that carried it."""

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from mrcnic.enums import EvState
from mrcnic.wire import TIME_BITS

from .reorder_tracker import PSN_BITS

__all__ = ["HoleJudge", "RACK_FRESH"]

#: The time rule takes an arrival for this many cycles (65 us at 250 MHz): well inside the 16-bit
#: clock's half turn, so "sent before it" never wraps.
RACK_FRESH = 1 << 14


class HoleJudge(wiring.Component):
    """A packet ``pd`` PSNs past its QP's ``una``, still outstanding, is lost by count when it
    is ``reorder`` or more below the highest known to have arrived (``hd``: the PSNs from
    ``una`` to one past that one), and by time (RACK's rule, ``timed_on``: ``reo_wnd`` not 0
    and the QP has a latest arrival) when its record (``record``: the record read is the
    packet's) says it left more than ``reo_wnd`` cycles before the latest-sent packet known to
    have arrived (``rack_ts``), and that arrival is less than ``RACK_FRESH`` cycles old by
    ``now`` (the 16-bit times wrap).

    Its loss blames its path (``lost_on``, one bit of the QP's paths): the entry goes SKIP and
    the path becomes suspect (``suspect``, which also starts the QP's hold); or, if the path was
    suspect already, every entry on it goes ASSUMED_BAD (``retire``). A queue's doing blames
    nothing, and only sets the entry SKIP: a send NACKed as trimmed (its record's send time
    ``time`` is the trimmed one's, ``trim_time``), or a path ``marked`` (its latest arrival
    carried ECN), whose mark it uses up (``unmark``; a trimmed send leaves the mark).

    Combinational.

    Attributes
    ----------
    pd, hd : In(24); reorder, reo_wnd : In(16)
    rack_on : In(1); rack_ts, now, time, trim_time : In(16); record : In(1)
    lost_on, marked, suspects : In(paths), the packet's path and the QP's marked and suspect
        paths.
    counted, timed_on, lost : Out(1)
    state : Out(EvState), SKIP or ASSUMED_BAD; retire, suspect, unmark : Out(1)
    """

    def __init__(self, paths=8):
        if not isinstance(paths, int) or paths < 1:
            raise ValueError(f"paths must be a positive integer, not {paths!r}")
        super().__init__({
            "pd": In(PSN_BITS), "hd": In(PSN_BITS), "reorder": In(16), "reo_wnd": In(16),
            "rack_on": In(1), "rack_ts": In(TIME_BITS), "now": In(TIME_BITS),
            "time": In(TIME_BITS), "trim_time": In(TIME_BITS), "record": In(1),
            "lost_on": In(paths), "marked": In(paths), "suspects": In(paths),
            "counted": Out(1), "timed_on": Out(1), "lost": Out(1),
            "state": Out(EvState), "retire": Out(1), "suspect": Out(1), "unmark": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.d.comb += [self.counted.eq((self.pd + self.reorder) < self.hd),
                     self.timed_on.eq((self.reo_wnd != 0) & self.rack_on)]
        early = Signal(TIME_BITS)      # how long before the latest arrived it left
        fresh = Signal(TIME_BITS)      # how long ago that arrival left
        m.d.comb += [early.eq(self.rack_ts - self.time), fresh.eq(self.now - self.rack_ts)]
        timed = (self.timed_on & ~early[-1] & (early > self.reo_wnd) & (fresh < RACK_FRESH))
        m.d.comb += self.lost.eq(self.counted | (self.record & timed))

        trimmed = self.trim_time == self.time
        queued = trimmed | (self.marked & self.lost_on).any()
        again = (self.suspects & self.lost_on).any() & ~queued
        m.d.comb += [self.state.eq(Mux(again, EvState.ASSUMED_BAD, EvState.SKIP)),
                     self.retire.eq(again), self.suspect.eq(~again & ~queued),
                     self.unmark.eq(queued & ~trimmed)]
        return m
