"""MAC transmit, in the core clock: a frame is handed to the PHY's clock only once it is whole, so
that the byte-a-cycle sender never waits for a beat mid-frame."""

from amaranth import Module, Signal
from amaranth.lib import fifo, wiring
from amaranth.lib.wiring import In, Out

from .stream import PacketStream, check_width, keep_count, packet_layout

__all__ = ["MacTx"]


class MacTx(wiring.Component):
    """Store and forward for transmission: beats from ``i`` fill a block-RAM FIFO, and a frame
    leaves on ``o`` once its last beat is in (or, for a frame longer than the FIFO, once the FIFO
    is full: then it goes cut-through, and a sender that stalls may underrun).

    ``frames`` and ``bytes`` count the frames handed on.

    Parameters
    ----------
    width : data width in bits;  depth : beats of FIFO (at least two).

    Attributes
    ----------
    i : In(PacketStream(width));  o : Out(PacketStream(width))
    frames, bytes : events (:attr:`events`): a frame handed on (at its last beat), a beat's bytes
    """

    def __init__(self, width=64, depth=512):
        self._width = check_width(width)
        if not isinstance(depth, int) or depth < 2:
            raise ValueError(f"depth must be an integer of at least 2 beats, not {depth!r}")
        self._depth = depth
        super().__init__({"i": In(PacketStream(width)), "o": Out(PacketStream(width)),
                          "frames": Out(1), "bytes": Out(range(width // 8 + 1))})

    @property
    def events(self):
        """The counters' event outputs, for the register bank to count."""
        return ("frames", "bytes")

    def elaborate(self, platform):
        m = Module()
        m.submodules.fifo = f = fifo.SyncFIFOBuffered(width=packet_layout(self._width).size,
                                                      depth=self._depth)
        i, o = self.i, self.o
        whole = Signal(range(self._depth + 2))    # frames whose last beat is in the FIFO
        sending = Signal()                         # a frame has begun to leave
        m.d.comb += [f.w_data.eq(i.payload), f.w_en.eq(i.valid), i.ready.eq(f.w_rdy),
                     o.payload.eq(f.r_data)]
        go = Signal()
        m.d.comb += go.eq(sending | (whole != 0) | (f.level == self._depth))
        m.d.comb += [o.valid.eq(f.r_rdy & go), f.r_en.eq(o.ready & go)]

        came = i.valid & i.ready & i.payload.last
        left = o.valid & o.ready & o.payload.last
        with m.If(came & ~left):
            m.d.sync += whole.eq(whole + 1)
        with m.Elif(left & ~came & (whole != 0)):
            m.d.sync += whole.eq(whole - 1)
        with m.If(o.valid & o.ready):
            m.d.sync += sending.eq(~o.payload.last)
            m.d.comb += [self.bytes.eq(keep_count(m, o.payload.keep)),
                         self.frames.eq(o.payload.last)]
        return m
