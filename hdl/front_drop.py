"""Front drop: removes a per-frame number of leading bytes from every frame."""

from amaranth import Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .stream import PacketStream, check_width, keep_count, keep_mask

__all__ = ["FrontDrop"]


class FrontDrop(wiring.Component):
    """Enters: on ``drop``, one record per frame (``bytes``, a multiple of ``unit``); on ``i``, the
    frame. Leaves: the rest of the frame, realigned to lane 0; a frame no longer than its drop
    leaves nothing (and the next frame is not affected).
    One beat a cycle; a frame whose rest ends in a beat of its own (the last input beat did not
    hold all of it) takes one more cycle, during which the next frame's first beat is taken if
    it leaves nothing yet.

    Parameters
    ----------
    width : data width in bits.
    max_bytes : the most bytes a frame loses.
    unit : ``bytes`` is always a multiple of this (a power of two): the shifts, and so the
        cases of the realigning multiplexer, are the multiples of it within a beat.

    Attributes
    ----------
    drop : In(stream {bytes});  i : In(PacketStream(width));  o : Out(PacketStream(width))
    """

    def __init__(self, width=64, max_bytes=256, unit=2):
        self._width = check_width(width)
        if not isinstance(unit, int) or unit < 1 or unit & (unit - 1) or unit > width // 8:
            raise ValueError(f"unit must be a power of two of at most a beat, not {unit!r}")
        if not isinstance(max_bytes, int) or max_bytes < 0:
            raise ValueError(f"max_bytes must be a non-negative integer, not {max_bytes!r}")
        self._max, self._unit = max_bytes, unit
        super().__init__({
            "drop": In(stream.Signature(data.StructLayout({"bytes": range(max_bytes + 1)}))),
            "i": In(PacketStream(width)),
            "o": Out(PacketStream(width)),
        })

    def elaborate(self, platform):
        m = Module()
        L = self._width // 8
        lb = (L - 1).bit_length()
        d, o = self.i.payload, self.o.payload
        n = keep_count(m, d.keep)

        # This frame's shift (bytes dropped modulo the beat) and whole beats still to drop.
        req = self.drop.payload.bytes
        s = Signal(range(L))
        skip = Signal(range(self._max // L + 2))
        prev = Signal(8 * L)         # the previous beat, as it came
        flush = Signal(range(L + 1))
        s_now = Signal(range(L))     # the next frame's shift and whole beats, from its record
        skip_now = Signal(range(self._max // L + 2))
        m.d.comb += [s_now.eq(req[:lb]), skip_now.eq(req >> lb)]

        # Every beat that leaves shifted is bytes sh .. sh + L - 1 of lo then hi (hi zero but
        # in SHIFT): one multiplexer, with a case per shift the unit allows. A shifter each
        # for the first beat, the carry and the rest was most of the block.
        sh = Signal(range(L))
        lo, hi = Signal(8 * L), Signal(8 * L)
        shifted = Signal(8 * L)
        # (a beat that leaves unshifted is the case sh = 0: s is 0 in PASS)
        m.d.comb += [sh.eq(s), lo.eq(d.data), o.data.eq(shifted)]
        both = Cat(lo, hi)
        with m.Switch(sh):
            for k in range(0, L, self._unit):
                with m.Case(k):
                    m.d.comb += shifted.eq(both[8 * k:8 * (k + L)])

        def kept_beat(shift):
            """The first beat of the frame that keeps bytes: from lane ``shift`` on."""
            with m.If(shift == 0):
                m.d.comb += [o.keep.eq(d.keep), o.last.eq(d.last),
                             self.o.valid.eq(1), self.i.ready.eq(self.o.ready)]
                with m.If(self.o.ready & ~d.last):
                    m.next = "PASS"
                with m.Elif(self.o.ready):
                    m.next = "START"
            with m.Elif(d.last & (n <= shift)):
                # Nothing is left of a frame no longer than its drop: it ends here, and the
                # next frame starts clean.
                m.d.comb += self.i.ready.eq(1)
                m.next = "START"
            with m.Elif(d.last):
                # The whole rest is in this beat.
                m.d.comb += [o.last.eq(1),
                             o.keep.eq(keep_mask(m, n - shift, L)), self.o.valid.eq(1),
                             self.i.ready.eq(self.o.ready)]
                with m.If(self.o.ready):
                    m.next = "START"
            with m.Else():
                m.d.comb += self.i.ready.eq(1)
                m.d.sync += prev.eq(d.data)
                m.next = "SHIFT"

        def start_frame():
            """The first beat of a frame, with its drop record."""
            m.d.sync += s.eq(s_now)
            with m.If(self.drop.valid & self.i.valid):
                with m.If(skip_now != 0):
                    m.d.comb += [self.i.ready.eq(1), self.drop.ready.eq(1)]
                    m.d.sync += skip.eq(skip_now - 1)
                    m.next = "SKIP"
                    with m.If(d.last):          # a frame shorter than its drop: nothing left
                        m.next = "START"
                with m.Else():
                    kept_beat(s_now)
                    m.d.comb += self.drop.ready.eq(self.i.ready)

        with m.FSM():
            with m.State("START"):
                m.d.comb += sh.eq(s_now)
                start_frame()
            with m.State("SKIP"):
                with m.If(self.i.valid):
                    with m.If(skip != 0):
                        m.d.comb += self.i.ready.eq(1)
                        m.d.sync += skip.eq(skip - 1)
                        with m.If(d.last):
                            m.next = "START"
                    with m.Else():
                        kept_beat(s)
            with m.State("PASS"):
                m.d.comb += [o.keep.eq(d.keep), o.last.eq(d.last),
                             self.o.valid.eq(self.i.valid), self.i.ready.eq(self.o.ready)]
                with m.If(self.i.valid & self.o.ready & d.last):
                    m.next = "START"
            with m.State("SHIFT"):
                # The previous beat's last L - s bytes, then the first s bytes of this one.
                total = Signal(range(2 * L + 1))
                m.d.comb += [total.eq(L - s + n), lo.eq(prev), hi.eq(d.data),
                             self.o.valid.eq(self.i.valid), self.i.ready.eq(self.o.ready)]
                with m.If(d.last & (total <= L)):
                    m.d.comb += [o.last.eq(1), o.keep.eq(keep_mask(m, total, L))]
                with m.Else():
                    m.d.comb += o.keep.eq((1 << L) - 1)
                with m.If(self.i.valid & self.o.ready):
                    m.d.sync += prev.eq(d.data)
                    with m.If(d.last):
                        with m.If(total <= L):
                            m.next = "START"
                        with m.Else():
                            m.d.sync += flush.eq(total - L)
                            m.next = "FLUSH"
            with m.State("FLUSH"):
                m.d.comb += [lo.eq(prev), self.o.valid.eq(1), o.last.eq(1),
                             o.keep.eq(keep_mask(m, flush, L))]
                with m.If(self.o.ready):
                    m.next = "START"
                    # The next frame's first beat, if it leaves nothing of its own yet, is taken
                    # in the same cycle, so back-to-back frames lose no cycle here.
                    with m.If(self.drop.valid & self.i.valid & ((skip_now != 0)
                                                                | ((s_now != 0) & ~d.last))):
                        start_frame()
        return m
