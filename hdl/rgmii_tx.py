"""RGMII transmit, in the TX clock: beats from the clock-domain crossing become the bytes the DDR
output buffer sends, with preamble, padding, FCS and the gap between frames added."""

from amaranth import Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from mrcnic.wire import ETH_FCS_BYTES, ETH_IFG_BYTES, ETH_MIN_FRAME, ETH_PREAMBLE, ETH_PREAMBLE_BYTES, ETH_SFD

from .crc32 import crc32_byte
from .stream import PacketStream, check_width, keep_count

__all__ = ["RgmiiTx"]


class RgmiiTx(wiring.Component):
    """Sends frames to an RGMII PHY at 1 Gb/s, one byte per clock of its ``sync`` domain (the TX
    clock: rename it).

    Each frame from ``i`` goes out as seven preamble bytes and the SFD, the frame, zeros up to
    the least frame (60 bytes before the FCS), and its FCS; at least ``ifg`` idle bytes separate
    frames. ``ddr_data`` is the byte for the DDR output buffer: bits 0-3 go out after the rising
    edge (TXD), bits 4-7 after the falling edge; ``ddr_ctl`` bit 0 after the rising edge (TX_EN),
    bit 1 after the falling edge (TX_EN xor TX_ER).

    A frame's beats must come as fast as they are sent: the core clock hands over whole frames
    (:class:`MacTx`). If the next beat is missing when its first byte is due, the frame is
    ended with TX_ER (the PHY sends an error symbol, so the receiver drops it), its remaining
    beats are discarded as they come, and ``underrun`` pulses for one cycle.

    Attributes
    ----------
    i : In(PacketStream(width))
    ddr_data : Out(8);  ddr_ctl : Out(2);  underrun : Out(1)
    """

    def __init__(self, width=64, ifg=ETH_IFG_BYTES):
        self._width = check_width(width)
        if not isinstance(ifg, int) or ifg < 1:
            raise ValueError(f"ifg must be a positive number of byte times, not {ifg!r}")
        self._ifg = ifg
        super().__init__({"i": In(PacketStream(width)), "ddr_data": Out(8), "ddr_ctl": Out(2),
                          "underrun": Out(1)})

    def elaborate(self, platform):
        m = Module()
        lanes = self._width // 8
        i = self.i
        shift = Signal(self._width)                 # the beat being sent, next byte in bits 0-7
        left = Signal(range(lanes + 1))             # bytes of it still to send
        last = Signal()                             # it is the frame's last beat
        length = Signal(range(ETH_MIN_FRAME + 1))   # frame bytes sent, saturating
        crc = Signal(32)
        step = Signal(range(max(ETH_PREAMBLE_BYTES, ETH_FCS_BYTES) + 1))
        gap = Signal(range(self._ifg + 1), init=self._ifg)
        # The next beat waits in a register of its own, taken from ``i`` whenever it is empty:
        # ``i.ready`` is then a flip-flop, not the end of the state machine's logic (at 125 MHz
        # the crossing's read pointer could not also carry that). A beat lasts 8 or more bytes
        # here, so one in reserve keeps up.
        nxt = Signal.like(i.payload)
        nxt_valid = Signal()
        m.d.comb += i.ready.eq(~nxt_valid)
        with m.If(~nxt_valid):
            m.d.sync += [nxt.eq(i.payload), nxt_valid.eq(i.valid)]
        n = keep_count(m, nxt.keep)
        pad_to = ETH_MIN_FRAME - ETH_FCS_BYTES

        def send(byte, err=0):
            m.d.sync += [self.ddr_data.eq(byte), self.ddr_ctl.eq(1 | (~err & 1) << 1)]

        def take_beat():
            m.d.sync += [shift.eq(nxt.data), left.eq(n), last.eq(nxt.last), nxt_valid.eq(0)]

        def data_byte(byte):
            send(byte)
            m.d.sync += crc.eq(crc32_byte(crc, byte))
            with m.If(length != pad_to):
                m.d.sync += length.eq(length + 1)

        m.d.sync += self.underrun.eq(0)
        with m.FSM():
            with m.State("IDLE"):
                m.d.sync += [self.ddr_data.eq(0), self.ddr_ctl.eq(0)]
                with m.If(gap != self._ifg):
                    m.d.sync += gap.eq(gap + 1)
                with m.Elif(nxt_valid):
                    take_beat()
                    send(ETH_PREAMBLE)
                    m.d.sync += [step.eq(1), length.eq(0), crc.eq(0xFFFF_FFFF)]
                    m.next = "PREAMBLE"
            with m.State("PREAMBLE"):
                with m.If(step == ETH_PREAMBLE_BYTES - 1):
                    send(ETH_SFD)
                    m.next = "DATA"
                with m.Else():
                    send(ETH_PREAMBLE)
                    m.d.sync += step.eq(step + 1)
            with m.State("DATA"):
                data_byte(shift[:8])
                m.d.sync += [shift.eq(shift >> 8), left.eq(left - 1)]
                with m.If(left == 1):
                    with m.If(last):
                        with m.If((length == pad_to) | (length == pad_to - 1)):
                            m.next = "FCS_START"
                        with m.Else():
                            m.next = "PAD"
                    with m.Elif(nxt_valid):
                        take_beat()
                    with m.Else():
                        m.next = "UNDERRUN"
            with m.State("PAD"):
                data_byte(Const(0, 8))
                with m.If(length == pad_to - 1):
                    m.next = "FCS_START"
            with m.State("FCS_START"):
                # The register now holds every byte: its complement is the FCS, low byte first.
                send(~crc[:8])
                m.d.sync += [crc.eq(~crc >> 8), step.eq(1)]
                m.next = "FCS"
            with m.State("FCS"):
                send(crc[:8])
                m.d.sync += [crc.eq(crc >> 8), step.eq(step + 1)]
                with m.If(step == ETH_FCS_BYTES - 1):
                    m.d.sync += gap.eq(0)
                    m.next = "IDLE"
            with m.State("UNDERRUN"):
                send(0, err=1)
                m.d.sync += self.underrun.eq(1)
                m.next = "DISCARD"
            with m.State("DISCARD"):
                m.d.sync += [self.ddr_data.eq(0), self.ddr_ctl.eq(0), gap.eq(0)]
                with m.If(last):
                    m.next = "IDLE"
                with m.Elif(nxt_valid):
                    m.d.sync += [nxt_valid.eq(0), last.eq(nxt.last)]
        return m
