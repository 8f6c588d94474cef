"""The packet stream every block speaks, and the small stream helpers they share.

A packet stream carries a frame as beats of ``width`` bits: byte lane 0 (``data[0:8]``) is the
first byte on the wire; ``keep`` has one bit per lane, all ones except on the last beat, where it
is a contiguous run from lane 0 with at least one bit set; ``last`` marks a frame's final beat.
"""

from amaranth import Module, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["check_width", "packet_layout", "PacketStream", "RegSlice", "PacketRegSlice", "PacketFIFO",
           "RecordMerge",
           "keep_count", "keep_mask"]


def check_width(width):
    if not isinstance(width, int) or width < 64 or width & (width - 1):
        raise ValueError(f"data width must be a power of two of at least 64 bits, not {width!r}")
    return width


def packet_layout(width):
    check_width(width)
    return data.StructLayout({"data": width, "keep": width // 8, "last": 1})


def PacketStream(width):
    """``stream.Signature`` of a packet stream ``width`` bits wide."""
    return stream.Signature(packet_layout(width))


def keep_count(m, keep):
    """The number of bytes a beat holds, for a ``keep`` that is a contiguous run from lane 0."""
    count = Signal(range(len(keep) + 1))
    for n in range(1, len(keep) + 1):
        with m.If(keep == (1 << n) - 1):
            m.d.comb += count.eq(n)
    return count


def keep_mask(m, count, lanes):
    """The ``keep`` of a beat holding ``count`` bytes (0 .. lanes) from lane 0."""
    mask = Signal(lanes)
    for k in range(1, lanes + 1):
        with m.If(count == k):
            m.d.comb += mask.eq((1 << k) - 1)
    return mask


class RegSlice(wiring.Component):
    """Registers a stream of any payload in both directions (valid/payload and ready) without
    losing a cycle: a two-entry skid buffer, so a long path between two blocks can be cut
    anywhere at full rate. An entry taken leaves a cycle later.

    Parameters
    ----------
    shape : the payload's shape.
    """

    def __init__(self, shape):
        self._shape = shape
        super().__init__({"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape))})

    def elaborate(self, platform):
        m = Module()
        skid = Signal(self._shape)
        skid_valid = Signal()
        m.d.comb += self.i.ready.eq(~skid_valid)
        with m.If(self.o.ready | ~self.o.valid):
            with m.If(skid_valid):
                m.d.sync += [self.o.payload.eq(skid), self.o.valid.eq(1), skid_valid.eq(0)]
            with m.Else():
                m.d.sync += [self.o.payload.eq(self.i.payload), self.o.valid.eq(self.i.valid)]
        with m.Elif(self.i.valid & self.i.ready):
            m.d.sync += [skid.eq(self.i.payload), skid_valid.eq(1)]
        return m


class PacketRegSlice(RegSlice):
    """A :class:`RegSlice` of the packet stream.

    Parameters
    ----------
    width : data width in bits.
    """

    def __init__(self, width=64):
        self._width = check_width(width)
        super().__init__(packet_layout(width))

    @property
    def width(self):
        return self._width


class PacketFIFO(wiring.Component):
    """A synchronous FIFO of packet beats in block RAM (``depth`` beats)."""

    def __init__(self, width=64, depth=512):
        self._width = check_width(width)
        if not isinstance(depth, int) or depth < 2:
            raise ValueError(f"FIFO depth must be an integer of at least 2, not {depth!r}")
        self._depth = depth
        super().__init__({"i": In(PacketStream(width)), "o": Out(PacketStream(width)),
                          "level": Out(range(depth + 1))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.fifo = f = fifo.SyncFIFOBuffered(
            width=packet_layout(self._width).size, depth=self._depth)
        m.d.comb += [
            f.w_data.eq(self.i.payload), f.w_en.eq(self.i.valid), self.i.ready.eq(f.w_rdy),
            self.o.payload.eq(f.r_data), self.o.valid.eq(f.r_rdy), f.r_en.eq(self.o.ready),
            self.level.eq(f.level),
        ]
        return m


class RecordMerge(wiring.Component):
    """Merges streams of one record layout into one: the lowest-numbered input offering wins,
    and a record offered and not yet taken stays offered (no change under ``valid``).

    Parameters
    ----------
    layout : the records' layout;  n : inputs.

    Attributes
    ----------
    i0 .. i<n-1> : In(stream layout);  o : Out(stream layout)
    """

    def __init__(self, layout, n=2):
        if not isinstance(n, int) or n < 2:
            raise ValueError(f"a merge needs at least two inputs, not {n!r}")
        self._n = n
        super().__init__({**{f"i{k}": In(stream.Signature(layout)) for k in range(n)},
                          "o": Out(stream.Signature(layout))})

    def elaborate(self, platform):
        m = Module()
        ins = [getattr(self, f"i{k}") for k in range(self._n)]
        held = Signal()                       # offered last cycle, not taken: keep the choice
        held_k = Signal(range(self._n))
        pick = Signal(range(self._n))
        for k in reversed(range(self._n)):    # the lowest valid input, assigned last, wins
            with m.If(ins[k].valid):
                m.d.comb += pick.eq(k)
        with m.If(held):
            m.d.comb += pick.eq(held_k)
        for k, i in enumerate(ins):
            with m.If(pick == k):
                m.d.comb += [self.o.payload.eq(i.payload), self.o.valid.eq(i.valid),
                             i.ready.eq(self.o.ready)]
        m.d.sync += [held.eq(self.o.valid & ~self.o.ready), held_k.eq(pick)]
        return m
