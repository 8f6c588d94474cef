"""ICRC inserter: appends the RoCEv2 invariant CRC to every frame (TX)."""

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .crc32 import ICRC_START, crc32_unshift, icrc_beat, icrc_beats
from .stream import PacketStream, check_width, keep_count, packet_layout

__all__ = ["IcrcInserter"]


class IcrcInserter(wiring.Component):
    """Appends the four ICRC bytes to each frame.

    Enters: plain RoCEv2 frames (Ethernet / IPv6 / UDP / BTH / ... / payload), before SRv6
    encapsulation. Leaves: the same frames, four bytes longer. One beat a cycle; a frame whose last
    beat has fewer than four free lanes takes one extra beat, as it does on the wire.

    Parameters
    ----------
    width : data width in bits (a power of two, at least 64).

    Attributes
    ----------
    i : In(PacketStream(width))
    o : Out(PacketStream(width))
    frames : Out(32), frames completed (wraps).
    """

    def __init__(self, width=64):
        self._width = check_width(width)
        super().__init__({"i": In(PacketStream(width)), "o": Out(PacketStream(width)),
                          "frames": Out(32)})

    @property
    def width(self):
        return self._width

    def elaborate(self, platform):
        m = Module()
        W, L = self._width, self._width // 8
        beats = icrc_beats(W)

        crc = Signal(32, init=ICRC_START)
        beat = Signal(range(beats + 1))
        held = Signal(packet_layout(W))   # the beat waiting for its successor (or its ICRC)
        held_valid = Signal()
        held_crc = Signal(32)             # the register after held, a frame's last beat, whole
        tail = Signal()                   # held is the extra beat that carries the ICRC's rest

        crc_next, _ = icrc_beat(m, crc, beat, self.i.payload, W)

        # Bytes in the held last beat (keep is a contiguous run from lane 0).
        count = keep_count(m, held.keep)
        sent = Signal(range(L + 1))       # free lanes of the last beat: ICRC bytes sent in it
        m.d.comb += sent.eq(L - count)
        # The last beat went in whole, its free lanes as zeros: they are taken back, a cycle
        # after the beat, from the beat held.
        held_icrc = Signal(32)
        m.d.comb += held_icrc.eq(~crc32_unshift(m, held_crc, sent[:(L - 1).bit_length()]))
        overflow = held.last & ~tail & (count > L - 4)

        # Output: the held beat, the ICRC merged in after its last byte.
        m.d.comb += [self.o.valid.eq(held_valid), self.o.payload.eq(held)]
        with m.If(held.last & ~tail):
            for n in range(1, L + 1):
                with m.If(count == n):
                    room = min(4, L - n)
                    if room:
                        m.d.comb += [
                            self.o.payload.data[8 * n:8 * (n + room)].eq(held_icrc[:8 * room]),
                            self.o.payload.keep[n:n + room].eq((1 << room) - 1),
                        ]
                    if room < 4:
                        m.d.comb += self.o.payload.last.eq(0)

        accept = Signal()
        m.d.comb += [
            self.i.ready.eq(~held_valid | (self.o.ready & ~overflow)),
            accept.eq(self.i.valid & self.i.ready),
        ]

        with m.If(held_valid & self.o.ready):
            with m.If(overflow):
                # Turn the held beat into the extra beat with the ICRC bytes that did not fit:
                # count > L - 4 here, so L - count of them went out already.
                m.d.sync += [
                    held.data.eq(held_icrc >> (sent * 8)),
                    held.keep.eq(0xF >> sent),
                ]
                m.d.sync += tail.eq(1)
            with m.Else():
                m.d.sync += [held_valid.eq(0), tail.eq(0)]
                with m.If(held.last):
                    m.d.sync += self.frames.eq(self.frames + 1)

        with m.If(accept):
            m.d.sync += [held.eq(self.i.payload), held_valid.eq(1), tail.eq(0)]
            with m.If(self.i.payload.last):
                m.d.sync += [held_crc.eq(crc_next), crc.eq(ICRC_START), beat.eq(0)]
            with m.Else():
                m.d.sync += crc.eq(crc_next)
                with m.If(beat != beats):
                    m.d.sync += beat.eq(beat + 1)
        return m
