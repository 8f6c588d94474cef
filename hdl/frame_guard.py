"""Frame guard: no frame from a port may run on forever or stall for ever half-way."""

from amaranth import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .stream import PacketStream, check_width, keep_count

__all__ = ["guarded_layout", "FrameGuard"]


def guarded_layout(width, **extra):
    """A packet beat with ``cut``: on a last beat, the frame was ended by a guard, not by its
    sender, and must be dropped. ``extra`` adds fields (the merge adds the plane)."""
    check_width(width)
    return data.StructLayout({"data": width, "keep": width // 8, "last": 1, "cut": 1, **extra})


class FrameGuard(wiring.Component):
    """Passes frames from a port unchanged, except two kinds that would hold up everything
    behind them (a merge gives a port the output for a whole frame):

    * a frame longer than ``max_frame`` bytes ends with the beat that crosses the limit, marked
      ``cut``; the rest of it, up to its own last beat, is discarded;
    * a frame whose next beat does not come within ``timeout`` cycles ends at once with a
      one-byte beat marked ``cut``; whatever of it arrives later is discarded the same way.

    Attributes
    ----------
    i : In(PacketStream(width));  o : Out(stream guarded_layout(width))
    oversize, stalled : Out(32), frames cut for each reason (wrap)
    """

    def __init__(self, width=64, max_frame=9600, timeout=1024):
        self._width = check_width(width)
        for name, v, lo in (("max_frame", max_frame, 64), ("timeout", timeout, 2)):
            if not isinstance(v, int) or v < lo:
                raise ValueError(f"{name} must be an integer of at least {lo}, not {v!r}")
        self._max, self._timeout = max_frame, timeout
        super().__init__({
            "i": In(PacketStream(width)),
            "o": Out(stream.Signature(guarded_layout(width))),
            "oversize": Out(32), "stalled": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        i, o = self.i, self.o
        length = Signal(range(self._max + self._width // 8 + 1))   # bytes of the frame so far
        inside = Signal()            # a frame has started and not ended
        discard = Signal()           # dropping the rest of a cut frame
        idle = Signal(range(self._timeout + 1))
        n = keep_count(m, i.payload.keep)
        over = Signal()
        m.d.comb += over.eq(length + n > self._max)
        expired = Signal()
        m.d.comb += expired.eq(inside & ~discard & (idle == self._timeout))

        with m.If(expired):
            # End the frame now with a filler byte; its own beats, if they come, are dropped.
            m.d.comb += [o.valid.eq(1), o.payload.keep.eq(1), o.payload.last.eq(1),
                         o.payload.cut.eq(1)]
            with m.If(o.ready):
                m.d.sync += [inside.eq(0), discard.eq(1), idle.eq(0), length.eq(0),
                             self.stalled.eq(self.stalled + 1)]
        with m.Elif(discard):
            m.d.comb += i.ready.eq(1)
            with m.If(i.valid & i.payload.last):
                m.d.sync += discard.eq(0)
        with m.Else():
            m.d.comb += [o.payload.data.eq(i.payload.data), o.payload.keep.eq(i.payload.keep),
                         o.payload.last.eq(i.payload.last | over), o.payload.cut.eq(over),
                         o.valid.eq(i.valid), i.ready.eq(o.ready)]
            with m.If(i.valid & o.ready):
                m.d.sync += idle.eq(0)
                with m.If(over):
                    m.d.sync += [inside.eq(0), length.eq(0), discard.eq(~i.payload.last),
                                 self.oversize.eq(self.oversize + 1)]
                with m.Elif(i.payload.last):
                    m.d.sync += [inside.eq(0), length.eq(0)]
                with m.Else():
                    m.d.sync += [inside.eq(1), length.eq(length + n)]
            with m.Elif(inside & ~i.valid):
                m.d.sync += idle.eq(idle + 1)
        return m
