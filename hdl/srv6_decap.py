"""SRv6 decapsulator: takes the outer IPv6 header (and SRH) off every frame that has them."""

from amaranth import Module
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from mrcnic import wire

from .front_drop import FrontDrop
from .prefix_inserter import PrefixInserter
from .stream import PacketFIFO, PacketStream, check_width
from .two_entry_fifo import TwoEntryFIFO

__all__ = ["strip_layout", "Srv6Decapsulator", "max_strip"]

ETH = wire.ETHERNET.length


def max_strip(max_segments):
    """The most bytes of outer header a frame can carry: outer IPv6 and an SRH of
    ``max_segments`` segments."""
    return wire.IPV6.length + wire.SRH.length + 16 * max_segments


def strip_layout(max_segments):
    """Per frame: its Ethernet header (which stays) and the outer bytes after it (which go)."""
    return data.StructLayout({"eth": 8 * ETH, "bytes": range(max_strip(max_segments) + 1)})


class Srv6Decapsulator(wiring.Component):
    """Enters: frames, and per frame a record of its Ethernet header and how many bytes of outer
    IPv6 header and SRH follow it (0 for plain RoCEv2; a header parser knows). Leaves: the plain
    RoCEv2 frame, Ethernet header then the inner IPv6 packet. The frame must be well-formed (at
    least its headers): a frame filter ahead of this block sees to that.

    The outer headers are always a multiple of 8 bytes, so the Ethernet header and they together
    are a multiple of 2: the front drop's shifter has half the positions of a byte shifter.

    Attributes
    ----------
    i : In(PacketStream(width));  strip : In(stream strip_layout(max_segments))
    o : Out(PacketStream(width))
    """

    def __init__(self, width=64, max_segments=4):
        self._width = check_width(width)
        self._segs = max_segments
        super().__init__({
            "i": In(PacketStream(width)),
            "strip": In(stream.Signature(strip_layout(max_segments))),
            "o": Out(PacketStream(width)),
        })

    def elaborate(self, platform):
        m = Module()
        most = max_strip(self._segs)
        m.submodules.drop = drop = FrontDrop(self._width, ETH + most, unit=2)
        m.submodules.insert = insert = PrefixInserter(self._width, (ETH,))
        # Slack between dropping the front and putting the Ethernet header back, as in the
        # encapsulator: the next frame's front is dropped while this one's body still leaves.
        m.submodules.body = body = PacketFIFO(self._width, 8)
        wiring.connect(m, wiring.flipped(self.i), drop.i)
        wiring.connect(m, drop.o, body.i)
        wiring.connect(m, body.o, insert.i)
        wiring.connect(m, insert.o, wiring.flipped(self.o))

        # Each record feeds both: how much the front drop removes, what the inserter puts back.
        # (The heads two deep, two registers: the inserter takes a frame's as its first beat
        # leaves the body's slack, before the frame after the next can enter.)
        m.submodules.cuts = cuts = fifo.SyncFIFOBuffered(width=drop.drop.payload.shape().size, depth=4)
        m.submodules.heads = heads = TwoEntryFIFO(8 * ETH)
        both = cuts.w_rdy & heads.w_rdy
        m.d.comb += [
            self.strip.ready.eq(both),
            cuts.w_en.eq(self.strip.valid & both), heads.w_en.eq(self.strip.valid & both),
            cuts.w_data.eq(self.strip.payload.bytes + ETH), heads.w_data.eq(self.strip.payload.eth),
            drop.drop.payload.eq(cuts.r_data), drop.drop.valid.eq(cuts.r_rdy),
            cuts.r_en.eq(drop.drop.ready),
            insert.prefix.payload.data.eq(heads.r_data), insert.prefix.payload.length.eq(ETH),
            insert.prefix.valid.eq(heads.r_rdy), heads.r_en.eq(insert.prefix.ready),
        ]
        return m
