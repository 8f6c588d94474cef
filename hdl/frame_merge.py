"""Frame merge: two packet streams onto one, a whole frame at a time."""

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .stream import PacketStream, check_width

__all__ = ["FrameMerge"]


class FrameMerge(wiring.Component):
    """Frames from ``i0`` and ``i1`` leave on ``o`` whole, never interleaved. The two take turns:
    after a frame from one, the other goes first if it has a frame waiting.

    Attributes
    ----------
    i0, i1 : In(PacketStream(width));  o : Out(PacketStream(width))
    """

    def __init__(self, width=64):
        super().__init__({"i0": In(PacketStream(check_width(width))),
                          "i1": In(PacketStream(width)), "o": Out(PacketStream(width))})

    def elaborate(self, platform):
        m = Module()
        ins = (self.i0, self.i1)
        sel = Signal()              # whose turn it is, or whose frame is under way
        mid = Signal()              # a frame is under way (or its beat offered and not taken)
        pick = Signal()
        m.d.comb += pick.eq(sel)
        mine = Mux(sel, self.i1.valid, self.i0.valid)
        other = Mux(sel, self.i0.valid, self.i1.valid)
        with m.If(~mid & ~mine & other):
            m.d.comb += pick.eq(~sel)
        for n, src in enumerate(ins):
            with m.If(pick == n):
                m.d.comb += [self.o.valid.eq(src.valid), self.o.payload.eq(src.payload),
                             src.ready.eq(self.o.ready)]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += [mid.eq(~self.o.payload.last), sel.eq(pick)]
            with m.If(self.o.payload.last):
                m.d.sync += sel.eq(~pick)
        with m.Elif(self.o.valid):
            m.d.sync += [mid.eq(1), sel.eq(pick)]      # an offered beat stays offered
        return m
