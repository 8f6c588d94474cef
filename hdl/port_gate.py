"""Port gate: a port's received frames pass whole while it is administratively up, and are
discarded whole, and counted, while it is down."""

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .stream import PacketStream

__all__ = ["PortGate"]


class PortGate(wiring.Component):
    """Between a port's MAC and the receive side. Each frame's fate is decided at its first
    beat, by ``enable`` then: a change while a frame goes by never cuts it, nor lets its tail
    through as a frame of its own. A discarded frame is taken at once, whatever ``o`` does.

    Attributes
    ----------
    i : In(PacketStream(width));  o : Out(PacketStream(width))
    enable : In(1), the port is up
    dropped : Out(1), an event (:attr:`events`): a frame discarded (at its last beat)
    """

    def __init__(self, width: int):
        super().__init__({"i": In(PacketStream(width)), "o": Out(PacketStream(width)),
                          "enable": In(1), "dropped": Out(1)})

    @property
    def events(self):
        """The counters' event outputs, for the register bank to count."""
        return ("dropped",)

    def elaborate(self, platform):
        m = Module()
        mid = Signal()        # the frame under way has had its first beat
        discard = Signal()    # ...and is being discarded
        passing = Signal()
        m.d.comb += [passing.eq(Mux(mid, ~discard, self.enable)),
                     self.o.payload.eq(self.i.payload), self.o.valid.eq(self.i.valid & passing),
                     self.i.ready.eq(Mux(passing, self.o.ready, 1))]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += mid.eq(~self.i.payload.last)
            with m.If(~mid):
                m.d.sync += discard.eq(~self.enable)
            with m.If(self.i.payload.last & ~passing):
                m.d.comb += self.dropped.eq(1)
        return m
