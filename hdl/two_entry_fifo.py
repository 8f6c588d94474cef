"""Two-entry FIFO: a queue two deep in two registers, one feeding the next."""

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

__all__ = ["TwoEntryFIFO", "buffered_fifo"]


class TwoEntryFIFO(wiring.Component):
    """``SyncFIFOBuffered(width=width, depth=2)`` cycle for cycle (the same ports; a write is
    readable two cycles later, and ``w_rdy`` holds while the first register is empty), built
    as two registers where Amaranth's has a one-entry RAM with zero-width pointers, which
    Verilator's lint refuses. Two deep is what a queue needs where its reader takes an entry
    in fewer cycles than its writer makes one; and a queue as wide as a packet descriptor costs
    flip-flops as registers, where a distributed RAM, sixteen deep however few it holds, costs
    six LUT4 sites for each four bits of its width.

    Attributes
    ----------
    w_data : In(width); w_en : In(1); w_rdy : Out(1), the first register is empty
    r_data : Out(width); r_rdy : Out(1), ``r_data`` holds the oldest entry; r_en : In(1)
    level : Out(range(3)), entries held
    """

    def __init__(self, width):
        self._width = width
        super().__init__({"w_data": In(width), "w_en": In(1), "w_rdy": Out(1),
                          "r_data": Out(width), "r_rdy": Out(1), "r_en": In(1),
                          "level": Out(range(3))})

    @property
    def width(self):
        return self._width

    @property
    def depth(self):
        return 2

    def elaborate(self, platform):
        m = Module()
        first = Signal(self._width)         # the entry written, on its way to the head
        held = Signal()
        m.d.comb += [self.w_rdy.eq(~held), self.level.eq(held + self.r_rdy)]
        with m.If(self.w_en & ~held):
            m.d.sync += [first.eq(self.w_data), held.eq(1)]
        with m.If(held & (~self.r_rdy | self.r_en)):
            # (``held`` refuses a write this cycle, so it empties)
            m.d.sync += [self.r_data.eq(first), self.r_rdy.eq(1), held.eq(0)]
        with m.Elif(self.r_en):
            m.d.sync += self.r_rdy.eq(0)
        return m


def buffered_fifo(width, depth):
    """A ``SyncFIFOBuffered`` of ``width`` x ``depth``, or at depth 2 a :class:`TwoEntryFIFO`."""
    if depth == 2:
        return TwoEntryFIFO(width)
    return SyncFIFOBuffered(width=width, depth=depth)
