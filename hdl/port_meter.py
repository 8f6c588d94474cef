"""Port meter: what a port running at its line rate would still hold of the frames given it."""

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from mrcnic.wire import ETH_WIRE_OVERHEAD

__all__ = ["PortMeter", "RATE_FRACTION_BITS"]

#: ``rate`` is in 2^-8 bytes a cycle: 8 Gb/s at 250 MHz is 4 bytes, 1024
RATE_FRACTION_BITS = 8
_BACKLOG_BITS = 32               # in 2^-8 bytes: 16 MiB, far beyond any port's queue


class PortMeter(wiring.Component):
    """The backlog of one port as its MAC would have it: each byte handed to the port adds one,
    each frame's end the preamble, FCS and gap the wire adds (``ETH_WIRE_OVERHEAD``), and every
    cycle ``rate`` / 256 bytes leave, down to none. ``busy`` while more than ``limit`` bytes wait.

    The planes take packets in turn, each at its share of the NIC's rate, but a port's line
    rate is the share only on average: retransmissions, acknowledgements and a plane the
    spray passed over for a while overload one port, whose queue then stands (the NIC sends no
    faster than all its ports together drain) and delays every packet on it until its RTT looks
    like loss. A board's MAC says so by holding frames back; a port whose frames are taken at
    once (a deeper FIFO, or a model network) says nothing, and this is its MAC's count.

    Attributes
    ----------
    taken : In(range(max_beat + 1)), the bytes the port takes this cycle
    last : In(1), a frame's last beat is among them
    rate : In(16), bytes the port sends a cycle, in 2^-8 (0: not metered, never busy)
    limit : In(16), bytes that may wait before the port is busy
    busy : Out(1)
    """

    def __init__(self, max_beat: int):
        self._max_beat = max_beat
        super().__init__({"taken": In(range(max_beat + 1)), "last": In(1), "rate": In(16),
                          "limit": In(16), "busy": Out(1)})

    def elaborate(self, platform):
        m = Module()
        one = 1 << RATE_FRACTION_BITS
        backlog = Signal(_BACKLOG_BITS)
        added = Signal(_BACKLOG_BITS + 1)
        m.d.comb += added.eq(backlog + (self.taken + Mux(self.last, ETH_WIRE_OVERHEAD, 0)) * one)
        top = (1 << _BACKLOG_BITS) - 1
        with m.If(self.rate == 0):
            m.d.sync += backlog.eq(0)
        with m.Elif(added <= self.rate):
            m.d.sync += backlog.eq(0)
        with m.Else():
            m.d.sync += backlog.eq(Mux(added - self.rate > top, top, added - self.rate))
        m.d.comb += self.busy.eq((self.rate != 0) & (backlog > self.limit * one))
        return m
