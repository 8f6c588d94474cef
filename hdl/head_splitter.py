"""Head splitter: takes the first bytes of every frame off into a record of their own."""

from amaranth import Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .stream import PacketStream, check_width, keep_count, keep_mask

__all__ = ["HeadSplitter"]


class HeadSplitter(wiring.Component):
    """Enters: frames. Leaves: on ``head``, each frame's first ``head_bytes`` bytes; on ``o``,
    the rest of the frame realigned to lane 0 (at least one byte must follow the head). One beat
    a cycle; a frame whose rest ends in fewer beats than it took in leaves one beat shorter.

    Attributes
    ----------
    i : In(PacketStream(width))
    head : Out(stream {data: 8 * head_bytes})
    o : Out(PacketStream(width))
    """

    def __init__(self, width=64, head_bytes=14):
        self._width = check_width(width)
        if not isinstance(head_bytes, int) or head_bytes < 1:
            raise ValueError(f"head_bytes must be a positive integer, not {head_bytes!r}")
        self._head = head_bytes
        super().__init__({
            "i": In(PacketStream(width)),
            "head": Out(stream.Signature(data.StructLayout({"data": 8 * head_bytes}))),
            "o": Out(PacketStream(width)),
        })

    def elaborate(self, platform):
        m = Module()
        L, H = self._width // 8, self._head
        whole, s = divmod(H, L)       # head beats that hold no payload; head bytes in the next
        d = self.i.payload
        n = keep_count(m, d.keep)

        head = Signal(8 * H)
        beat = Signal(range(whole + 2))
        carry = Signal(8 * L)         # the payload bytes of the previous beat (L - s of them)
        flush = Signal(range(L + 1))  # bytes of a final beat still to send after the frame ended

        # Output: carry then the bottom s bytes of the current beat.
        m.d.comb += self.o.payload.data.eq(Cat(carry[:8 * (L - s)], d.data[:8 * s]) if s else
                                           d.data)

        head_now = Signal(8 * H)      # the head with the current beat's part in it
        m.d.comb += head_now.eq(head)
        m.d.comb += head_now[8 * whole * L:].eq(d.data[:8 * (H - whole * L)])

        def take_head_beat():
            # A beat that is all head (or its first part) is being taken. The last of them offers
            # the head at once; only if that is not taken does the head wait in PUBLISH.
            for b in range(whole + 1):
                with m.If(beat == b):
                    lo, hi = b * L, min(H, (b + 1) * L)
                    m.d.sync += head[8 * lo:8 * hi].eq(d.data[:8 * (hi - lo)])
            with m.If(beat == whole):
                m.d.comb += [self.head.valid.eq(1), self.head.payload.data.eq(head_now)]
                m.d.sync += [beat.eq(0), carry.eq(d.data >> (8 * s))]
                with m.If(d.last):
                    m.d.sync += flush.eq(n - s)
                    with m.If(self.head.ready):
                        m.next = "FLUSH"
                    with m.Else():
                        m.next = "PUBLISH_LAST"
                with m.Else():
                    with m.If(self.head.ready):
                        m.next = "BODY"
                    with m.Else():
                        m.next = "PUBLISH"
            with m.Else():
                m.d.sync += beat.eq(beat + 1)
                m.next = "HEAD"

        with m.FSM():
            with m.State("HEAD"):
                m.d.comb += self.i.ready.eq(1)
                with m.If(self.i.valid):
                    take_head_beat()
            with m.State("PUBLISH"):
                # Hand the head over, then stream the rest.
                m.d.comb += [self.head.valid.eq(1), self.head.payload.data.eq(head)]
                with m.If(self.head.ready):
                    m.next = "BODY"
            with m.State("PUBLISH_LAST"):
                m.d.comb += [self.head.valid.eq(1), self.head.payload.data.eq(head)]
                with m.If(self.head.ready):
                    m.next = "FLUSH"
            with m.State("BODY"):
                if s:
                    # Each beat in completes the carry into a full beat out; the last beat in may
                    # leave bytes for one more.
                    total = Signal(range(2 * L + 1))
                    m.d.comb += total.eq(L - s + n)
                    m.d.comb += [self.o.valid.eq(self.i.valid), self.i.ready.eq(self.o.ready)]
                    with m.If(d.last & (total <= L)):
                        m.d.comb += [self.o.payload.last.eq(1),
                                     self.o.payload.keep.eq(keep_mask(m, total, L))]
                    with m.Else():
                        m.d.comb += self.o.payload.keep.eq((1 << L) - 1)
                    with m.If(self.i.valid & self.o.ready):
                        m.d.sync += carry.eq(d.data >> (8 * s))
                        with m.If(d.last):
                            with m.If(total <= L):
                                m.next = "HEAD"
                            with m.Else():
                                m.d.sync += flush.eq(total - L)
                                m.next = "FLUSH"
                else:
                    m.d.comb += [self.o.valid.eq(self.i.valid), self.i.ready.eq(self.o.ready),
                                 self.o.payload.keep.eq(d.keep), self.o.payload.last.eq(d.last)]
                    with m.If(self.i.valid & self.o.ready & d.last):
                        m.next = "HEAD"
            with m.State("FLUSH"):
                m.d.comb += [self.o.valid.eq(1), self.o.payload.data.eq(carry),
                             self.o.payload.keep.eq(keep_mask(m, flush, L)),
                             self.o.payload.last.eq(1)]
                with m.If(self.o.ready):
                    if whole == 0:
                        # The next frame's first beat makes no output of its own: take it now.
                        m.d.comb += self.i.ready.eq(1)
                        with m.If(self.i.valid):
                            take_head_beat()
                        with m.Else():
                            m.next = "HEAD"
                    else:
                        m.next = "HEAD"
        return m

