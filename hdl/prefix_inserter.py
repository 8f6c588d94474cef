"""Prefix inserter: puts a per-frame run of bytes in front of every frame."""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .bits import word_mux
from .stream import PacketStream, check_width, keep_count, keep_mask

__all__ = ["PrefixInserter", "prefix_layout"]


def prefix_layout(max_bytes):
    return data.StructLayout({"data": 8 * max_bytes, "length": range(max_bytes + 1)})


class PrefixInserter(wiring.Component):
    """Enters: on ``prefix``, one record per frame (``length`` bytes of ``data``, byte 0 first);
    on ``i``, the frame's body from lane 0 (at least one byte). Leaves: prefix then body, one
    beat a cycle once the prefix is out.

    Parameters
    ----------
    width : data width in bits.
    lengths : every prefix length that can occur; the body is realigned by the prefix length
        modulo the beat, so naming them keeps that multiplexer to the cases that exist.
    """

    def __init__(self, width=64, lengths=(14,)):
        self._width = check_width(width)
        lengths = tuple(sorted(set(lengths)))
        if not lengths or any(not isinstance(x, int) or x < 1 for x in lengths):
            raise ValueError(f"lengths must be positive integers, not {lengths!r}")
        self._lengths = lengths
        self._max = max(lengths)
        super().__init__({
            "prefix": In(stream.Signature(prefix_layout(self._max))),
            "i": In(PacketStream(width)),
            "o": Out(PacketStream(width)),
        })

    def elaborate(self, platform):
        m = Module()
        L = self._width // 8
        beats = self._max // L + 1
        shifts = sorted({x % L for x in self._lengths})

        pre = Signal(8 * L * beats)
        length = Signal(range(self._max + 1))
        whole = Signal(range(beats + 1))       # beats that are all prefix
        s = Signal(range(L))                   # prefix bytes in the beat the body starts in
        m.d.comb += [whole.eq(length // L), s.eq(length % L)]

        d = self.i.payload
        n = keep_count(m, d.keep)
        beat = Signal(range(beats + 1))          # (never 0 bits wide)
        # Beat ``beat`` of the prefix. The beat the body starts in reads its prefix bytes from
        # here too (``first``): one multiplexer over the prefix, the block's largest part.
        here = word_mux(m, pre, beat, 8 * L, "here")
        first = Signal()                       # the body's first beat is next
        carry = Signal(8 * L)                  # the body bytes that move to the next beat
        lead = Signal(8 * L)                   # what the body's s bytes come after
        m.d.comb += lead.eq(Mux(first, here, carry))
        body = Signal(8 * L)                   # the body's beat (none after its last)
        joined = Signal(8 * L)                 # lead's s bytes, then the body's first L - s
        rest = Signal(8 * L)
        m.d.comb += body.eq(d.data)
        with m.Switch(s):
            for k in shifts:
                with m.Case(k):
                    m.d.comb += [joined.eq(Cat(lead[:8 * k], body[:8 * (L - k)])),
                                 rest.eq(d.data[8 * (L - k):])]
        total = Signal(range(2 * L + 1))
        m.d.comb += total.eq(s + n)
        flush = Signal(range(L + 1))

        def take_prefix():
            # Latch the next frame's prefix; called when idle and as a frame ends, so frames
            # follow each other without a gap.
            pl = self.prefix.payload
            m.d.comb += self.prefix.ready.eq(1)
            with m.If(self.prefix.valid):
                m.d.sync += [pre.eq(pl.data), length.eq(pl.length), beat.eq(0), first.eq(1)]
                with m.If(pl.length < L):          # no whole prefix beat
                    m.next = "BODY"
                with m.Else():
                    m.next = "PREFIX"
            with m.Else():
                m.next = "IDLE"

        with m.FSM():
            with m.State("IDLE"):
                take_prefix()
            with m.State("PREFIX"):
                # (entered with at least one whole beat of prefix, left after the last)
                m.d.comb += [self.o.valid.eq(1), self.o.payload.data.eq(here),
                             self.o.payload.keep.eq((1 << L) - 1)]
                with m.If(self.o.ready):
                    m.d.sync += beat.eq(beat + 1)
                    with m.If(beat + 1 == whole):
                        m.next = "BODY"
            with m.State("BODY"):
                m.d.comb += [self.o.valid.eq(self.i.valid), self.i.ready.eq(self.o.ready),
                             self.o.payload.data.eq(joined)]
                with m.If(d.last & (total <= L)):
                    m.d.comb += [self.o.payload.keep.eq(keep_mask(m, total, L)),
                                 self.o.payload.last.eq(1)]
                with m.Else():
                    m.d.comb += self.o.payload.keep.eq((1 << L) - 1)
                with m.If(self.i.valid & self.o.ready):
                    m.d.sync += [carry.eq(rest), first.eq(0)]
                    with m.If(d.last):
                        with m.If(total <= L):
                            take_prefix()
                        with m.Else():
                            m.d.sync += flush.eq(total - L)
                            m.next = "FLUSH"
            with m.State("FLUSH"):
                # (carry's bytes are the s that lead joined takes; the rest of carry is zero)
                m.d.comb += [self.o.valid.eq(1), body.eq(0), self.o.payload.data.eq(joined),
                             self.o.payload.keep.eq(keep_mask(m, flush, L)),
                             self.o.payload.last.eq(1)]
                with m.If(self.o.ready):
                    take_prefix()
        return m
