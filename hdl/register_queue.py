"""Register queue: records kept for a host that reads them through registers, oldest first."""

from amaranth import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

__all__ = ["RegisterQueue", "packed"]


def packed(m, layout, width, fields):
    """A ``width``-bit entry from {field: value}, laid out as ``layout`` (the register map's
    CQ_ENTRY or EVQ_ENTRY: name -> (lowest bit, width)); fields left out are zero."""
    entry = Signal(width)
    for name, value in fields.items():
        low, bits = layout[name]
        m.d.comb += entry[low:low + bits].eq(value)
    return entry


class RegisterQueue(wiring.Component):
    """Takes a record every cycle it is offered one; a record that finds the queue full is
    lost and counted, so whatever feeds it never waits on a host that does not poll. The host
    reads the oldest record and how many wait, and pops one at a time.

    Parameters
    ----------
    width : bits a record;  depth : records the queue holds;  count_bits : width of ``count``.

    Attributes
    ----------
    i : In(stream.Signature(width, always_ready=True))
    count : Out(count_bits), records waiting;  entry : Out(width), the oldest (0 when none)
    pop : In(stream.Signature(1)), the oldest record leaves (nothing happens when none)
    overflows : Out(1), an event (:attr:`events`): a record lost to a full queue
    """

    def __init__(self, width, depth, count_bits=16):
        if not isinstance(depth, int) or not 2 <= depth < 1 << count_bits:
            raise ValueError(f"depth must be 2 .. {(1 << count_bits) - 1}, not {depth!r}")
        self._width, self._depth = width, depth
        super().__init__({"i": In(stream.Signature(width, always_ready=True)),
                          "count": Out(count_bits), "entry": Out(width),
                          "pop": In(stream.Signature(1)), "overflows": Out(1)})

    @property
    def events(self):
        """The counters' event outputs, for the register bank to count."""
        return ("overflows",)

    def elaborate(self, platform):
        m = Module()
        m.submodules.fifo = fifo = SyncFIFOBuffered(width=self._width, depth=self._depth)
        m.d.comb += [fifo.w_data.eq(self.i.payload), fifo.w_en.eq(self.i.valid)]
        with m.If(self.i.valid & ~fifo.w_rdy):
            m.d.comb += self.overflows.eq(1)
        m.d.comb += [self.count.eq(fifo.level),
                     self.entry.eq(Mux(fifo.r_rdy, fifo.r_data, 0)),
                     self.pop.ready.eq(1), fifo.r_en.eq(self.pop.valid)]
        return m
