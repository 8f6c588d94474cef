"""ICRC checker: verifies the RoCEv2 invariant CRC of every frame (RX)."""

from amaranth import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .crc32 import ICRC_START, icrc_beat, icrc_beats, icrc_residue
from .stream import PacketStream, check_width, keep_count

__all__ = ["IcrcChecker", "checked_packet_layout"]


def checked_packet_layout(width):
    """A packet beat with the checker's verdict, meaningful on the last beat."""
    check_width(width)
    return data.StructLayout({"data": width, "keep": width // 8, "last": 1, "icrc_ok": 1})


class IcrcChecker(wiring.Component):
    """Checks the ICRC at the end of each frame without knowing where it starts: the CRC of a
    message followed by its own CRC is a constant.

    Enters: plain RoCEv2 frames ending with their ICRC (after SRv6 decapsulation). Leaves: the
    same beats, unchanged and in the same cycle, with ``icrc_ok`` set on the last beat of a frame
    whose ICRC is right; a downstream store-and-forward buffer drops the rest.

    Attributes
    ----------
    i : In(PacketStream(width))
    o : Out(stream.Signature(checked_packet_layout(width)))
    frames, bad : Out(1), events (:attr:`events`): a frame seen, one with a wrong ICRC.
    """

    def __init__(self, width=64):
        self._width = check_width(width)
        super().__init__({"i": In(PacketStream(width)),
                          "o": Out(stream.Signature(checked_packet_layout(width))),
                          "frames": Out(1), "bad": Out(1)})

    @property
    def width(self):
        return self._width

    @property
    def events(self):
        """The counters' event outputs, for the register bank to count."""
        return ("frames", "bad")

    def elaborate(self, platform):
        m = Module()
        L = self._width // 8
        beats = icrc_beats(self._width)
        crc = Signal(32, init=ICRC_START)
        beat = Signal(range(beats + 1))
        crc_next, fed = icrc_beat(m, crc, beat, self.i.payload, self._width)
        # The last beat was fed whole, its unused lanes as zeros: the residue is compared
        # after as many zeros, not taken back to before them.
        residue = Signal(32)
        with m.Switch(keep_count(m, self.i.payload.keep)):
            for n in range(1, L + 1):
                with m.Case(n):
                    m.d.comb += residue.eq(icrc_residue(L, n))
        ok = Signal()
        m.d.comb += [
            ok.eq(fed & (crc_next == residue)),
            self.o.valid.eq(self.i.valid),
            self.i.ready.eq(self.o.ready),
            self.o.payload.data.eq(self.i.payload.data),
            self.o.payload.keep.eq(self.i.payload.keep),
            self.o.payload.last.eq(self.i.payload.last),
            self.o.payload.icrc_ok.eq(self.i.payload.last & ok),
        ]
        with m.If(self.i.valid & self.i.ready):
            with m.If(self.i.payload.last):
                m.d.sync += [crc.eq(ICRC_START), beat.eq(0)]
                m.d.comb += [self.frames.eq(1), self.bad.eq(~ok)]
            with m.Else():
                m.d.sync += crc.eq(crc_next)
                with m.If(beat != beats):
                    m.d.sync += beat.eq(beat + 1)
        return m
