"""RGMII receive, in the PHY's receive clock: the bytes the DDR input buffer delivers become beats
for the clock-domain crossing, the preamble and FCS taken off and the FCS checked.

Only what must run at the PHY's 125 MHz is here (one byte a cycle: preamble, a byte-wide CRC,
width conversion); the frame's fate is decided in the core clock (:class:`MacRx`).
"""

import enum

from amaranth import C, Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from mrcnic.wire import ETH_FCS_BYTES, ETH_FCS_RESIDUE, ETH_PREAMBLE, ETH_SFD

from .crc32 import crc32_byte
from .stream import check_width

__all__ = ["RxError", "rx_beat_layout", "RgmiiRx"]


class RxError(enum.IntEnum):
    """What went wrong with a received frame, on its last beat."""
    NONE = 0
    FCS = 1        #: its FCS does not match its bytes
    PHY = 2        #: the PHY flagged an error (RX_ER) in it, or it lacked a preamble and SFD
    OVERFLOW = 3   #: the crossing FIFO was full and some of its beats were lost


def rx_beat_layout(width):
    """A received frame's beat: packet fields, and on the last beat what went wrong."""
    check_width(width)
    return data.StructLayout({"data": width, "keep": width // 8, "last": 1,
                              "error": len(RxError).bit_length() - 1})


class RgmiiRx(wiring.Component):
    """Receives frames from an RGMII PHY at 1 Gb/s, one byte per clock of its ``sync`` domain
    (the PHY's RX clock: rename it).

    Each cycle the DDR input buffer gives one byte: ``ddr_data`` bits 0-3 were captured at the
    rising edge (RXD of the low nibble), bits 4-7 at the falling edge; ``ddr_ctl`` bit 0 at the
    rising edge (RX_DV), bit 1 at the falling edge (RX_DV xor RX_ER). A frame starts with any
    number of preamble bytes and the SFD; what follows up to the end of RX_DV is the frame and
    its FCS. The frame leaves on ``o`` without its FCS, ``width`` bits a beat, every frame ending
    with a last beat that says what went wrong (:class:`RxError`): a carrier with no valid
    preamble and SFD, or no bytes after them, still leaves as a one-byte frame marked PHY or
    FCS, so that the core clock counts it.

    ``o`` never waits for its consumer: a beat offered while the previous one is still not taken
    is lost and its frame ends marked OVERFLOW (a last beat is kept until it can go; a frame that
    starts meanwhile is lost whole). A beat goes at most every ``width / 8`` cycles, so a FIFO
    read every cycle of a core clock faster than an eighth of the PHY's never loses one.

    Attributes
    ----------
    ddr_data : In(8);  ddr_ctl : In(2)
    o : Out(stream rx_beat_layout(width))
    """

    def __init__(self, width=64):
        self._width = check_width(width)
        super().__init__({
            "ddr_data": In(8), "ddr_ctl": In(2),
            "o": Out(stream.Signature(rx_beat_layout(width))),
        })

    def elaborate(self, platform):
        m = Module()
        lanes = self._width // 8
        # The DDR buffer's outputs are registered again here: from the I/O cell to the logic
        # is a long route, and at 125 MHz it left no time for the logic after it.
        byte, ctl = Signal(8), Signal(2)
        m.d.sync += [byte.eq(self.ddr_data), ctl.eq(self.ddr_ctl)]
        dv = ctl[0]
        er = ctl[0] ^ ctl[1]
        o = self.o

        crc = Signal(32)
        delay = Signal(8 * ETH_FCS_BYTES)                # the last four bytes: the FCS at the end
        held = Signal(range(ETH_FCS_BYTES + 1))          # how many of them are the frame's
        word = Signal(self._width)
        # The bytes in ``word``, as its keep: a run of ones from lane 0. (As a count, its
        # compares and the keep made from it were the slower board's receive clock's path.)
        filled = Signal(lanes)
        phy_err = Signal()
        lost = Signal()                                  # a beat of this frame was lost
        end_owed = Signal()                              # a lost last beat still to be sent

        # One beat register: ``o`` holds it until taken. ``put`` asks to send a beat this cycle.
        put = Signal()
        put_word = Signal(self._width)
        put_keep = Signal(lanes)
        put_last = Signal()
        put_error = Signal(RxError)
        beat = Signal(rx_beat_layout(self._width))
        m.d.comb += o.payload.eq(beat)
        busy = Signal()
        m.d.comb += busy.eq(o.valid & ~o.ready)
        with m.If(o.ready):
            m.d.sync += o.valid.eq(0)
        with m.If(put & ~busy):
            m.d.sync += [beat.data.eq(put_word), beat.keep.eq(put_keep), beat.last.eq(put_last),
                         beat.error.eq(put_error), o.valid.eq(1)]
        with m.Elif(end_owed & ~busy):
            m.d.sync += [beat.data.eq(0), beat.keep.eq(1), beat.last.eq(1),
                         beat.error.eq(RxError.OVERFLOW), o.valid.eq(1), end_owed.eq(0)]

        def end_frame(error, keep, data_word):
            """The frame ends this cycle: its last beat goes, or is owed if the beat register
            is still full."""
            m.d.comb += [put.eq(1), put_word.eq(data_word), put_keep.eq(keep), put_last.eq(1),
                         put_error.eq(error)]
            with m.If(busy):
                m.d.sync += end_owed.eq(1)

        with m.FSM():
            with m.State("IDLE"):
                with m.If(dv):
                    m.d.sync += [crc.eq(0xFFFF_FFFF), held.eq(0), filled.eq(0), phy_err.eq(er),
                                 lost.eq(0), word.eq(0)]
                    with m.If(end_owed):
                        m.next = "SKIP"          # nowhere to put its last beat: lost whole
                    with m.Elif(er | ((byte != ETH_PREAMBLE) & (byte != ETH_SFD))):
                        m.next = "BAD"
                    with m.Elif(byte == ETH_SFD):
                        m.next = "FRAME"
                    with m.Else():
                        m.next = "PREAMBLE"
            with m.State("PREAMBLE"):
                with m.If(~dv):
                    end_frame(RxError.PHY, 1, 0)     # a preamble and nothing after it
                    m.next = "IDLE"
                with m.Elif(er | ((byte != ETH_PREAMBLE) & (byte != ETH_SFD))):
                    m.next = "BAD"
                with m.Elif(byte == ETH_SFD):
                    m.next = "FRAME"
            with m.State("BAD"):
                with m.If(~dv):
                    end_frame(RxError.PHY, 1, 0)
                    m.next = "IDLE"
            with m.State("SKIP"):
                with m.If(~dv):
                    m.next = "IDLE"
            with m.State("FRAME"):
                with m.If(dv):
                    m.d.sync += [crc.eq(crc32_byte(crc, byte)),
                                 delay.eq(delay >> 8 | byte << 8 * (ETH_FCS_BYTES - 1))]
                    with m.If(er):
                        m.d.sync += phy_err.eq(1)
                    with m.If(held < ETH_FCS_BYTES):
                        m.d.sync += held.eq(held + 1)
                    with m.Else():
                        # The byte leaving the delay line is the frame's, not the FCS's.
                        out = delay[:8]
                        with m.If(filled[-1]):
                            m.d.comb += [put.eq(1), put_word.eq(word), put_keep.eq(-1)]
                            with m.If(busy):
                                m.d.sync += lost.eq(1)
                            m.d.sync += [word.eq(out), filled.eq(1)]
                        with m.Else():
                            m.d.sync += filled.eq(Cat(C(1, 1), filled[:-1]))
                            for lane in range(lanes):    # the first lane not yet filled
                                here = ~filled[lane] & (filled[lane - 1] if lane else 1)
                                with m.If(here):
                                    m.d.sync += word.word_select(lane, 8).eq(out)
                with m.Else():
                    error = Signal(RxError)
                    with m.If(phy_err):
                        m.d.comb += error.eq(RxError.PHY)
                    with m.Elif(lost):
                        m.d.comb += error.eq(RxError.OVERFLOW)
                    with m.Elif(crc != ETH_FCS_RESIDUE):
                        m.d.comb += error.eq(RxError.FCS)
                    with m.If(~filled[0]):               # no byte beyond an FCS's worth
                        end_frame(Mux(error == RxError.NONE, RxError.FCS, error), 1, 0)
                    with m.Else():
                        end_frame(error, filled, word)
                    m.next = "IDLE"
        return m
