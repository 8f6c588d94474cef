"""A 1 Gb/s Ethernet MAC for an RGMII PHY, from the DDR I/O buffers' ports inward."""

from amaranth import DomainRenamer, Module
from amaranth.lib import cdc, fifo, wiring
from amaranth.lib.wiring import In, Out

from mrcnic import regmap
from mrcnic.wire import ETH_IFG_BYTES

from .mac_rx import MAC_RX_COUNTERS, MacRx
from .mac_tx import MacTx
from .rgmii_rx import RgmiiRx, rx_beat_layout
from .rgmii_tx import RgmiiTx
from .stream import PacketRegSlice, PacketStream, check_width, packet_layout
from .stream_crossing import StreamCrossing

__all__ = ["EthMac", "MAC_COUNTERS"]

#: the MAC's counters, each an event output, as the register map lists them: MacRx's, prefixed
#: rx_, then the sender's
MAC_COUNTERS = tuple(regmap.MAC_COUNTERS)
if MAC_COUNTERS[:len(MAC_RX_COUNTERS)] != tuple(f"rx_{n}" for n in MAC_RX_COUNTERS):
    raise AssertionError("the register map's MAC counters must list the receive ones first")


class EthMac(wiring.Component):
    """One Ethernet port: frames between the core clock's packet streams and an RGMII PHY.

    Three clock domains: ``sync`` (the core, where ``rx``, ``tx`` and the counters live),
    ``rx_domain`` (the PHY's RX clock, which the DDR input buffer's ``ddr_rx_*`` ports are in)
    and ``tx_domain`` (the TX clock of the DDR output buffer's ``ddr_tx_*``). Only preamble,
    a byte-wide CRC and width conversion run at the PHY's 125 MHz; the frames cross in an
    :class:`~amaranth.lib.fifo.AsyncFIFO` (received) and a :class:`StreamCrossing` (sent), and
    the checks, buffers and counters run in the core clock. The core clock must move
    ``width`` bits a cycle at least as fast as the line moves them (15.6 MHz at 64 bits), with
    margin for the core's own pauses.

    Received: frames without their FCS, only good ones (:class:`MacRx`); sent: any frame of at
    least one byte, padded and given its FCS (:class:`RgmiiTx`).

    Parameters
    ----------
    width : data width in bits;  max_frame : the longest frame received, bytes without FCS;
    rx_depth, tx_depth : beats of receive and send buffer in the core clock (``rx_depth`` as
    :class:`MacRx`'s ``depth``);  ifg : idle bytes between frames sent;
    rx_domain, tx_domain : the PHY clocks' domain names.

    Attributes
    ----------
    ddr_rx_data : In(8);  ddr_rx_ctl : In(2);  ddr_tx_data : Out(8);  ddr_tx_ctl : Out(2)
        the DDR buffers' two bits or nibbles a cycle, rising edge's in the low bits
    rx : Out(PacketStream(width));  tx : In(PacketStream(width))
    rx_frames .. tx_underruns : events (:attr:`events`) of :data:`MAC_COUNTERS`, in the core
        clock: MacRx's, MacTx's, and a frame cut short
    """

    def __init__(self, width=64, max_frame=9600, rx_depth=None, tx_depth=512,
                 ifg=ETH_IFG_BYTES, rx_domain="eth_rx", tx_domain="eth_tx"):
        self._width = check_width(width)
        self._rx_domain, self._tx_domain = rx_domain, tx_domain
        # Built here so bad parameters fail at construction.
        self._rgmii_rx = RgmiiRx(width)
        self._mac_rx = MacRx(width, max_frame, rx_depth)
        self._mac_tx = MacTx(width, tx_depth)
        self._rgmii_tx = RgmiiTx(width, ifg)
        super().__init__({
            "ddr_rx_data": In(8), "ddr_rx_ctl": In(2),
            "ddr_tx_data": Out(8), "ddr_tx_ctl": Out(2),
            "rx": Out(PacketStream(width)), "tx": In(PacketStream(width)),
            **{f"rx_{name}": Out(self._mac_rx.signature.members[name].shape)
               for name in MAC_RX_COUNTERS},
            "tx_frames": Out(1), "tx_bytes": Out(self._mac_tx.signature.members["bytes"].shape),
            "tx_underruns": Out(1),
        })
        assert set(self.signature.members) >= set(MAC_COUNTERS)

    @property
    def events(self):
        """The counters' event outputs, for the register bank to count."""
        return MAC_COUNTERS

    def elaborate(self, platform):
        m = Module()
        rxd, txd = self._rx_domain, self._tx_domain
        m.submodules.rgmii_rx = DomainRenamer(rxd)(self._rgmii_rx)
        m.submodules.mac_rx = mac_rx = self._mac_rx
        m.submodules.mac_tx = mac_tx = self._mac_tx
        m.submodules.rgmii_tx = DomainRenamer(txd)(self._rgmii_tx)

        # Receive: PHY clock -> crossing -> store and forward in the core clock.
        m.d.comb += [self._rgmii_rx.ddr_data.eq(self.ddr_rx_data),
                     self._rgmii_rx.ddr_ctl.eq(self.ddr_rx_ctl)]
        beat = rx_beat_layout(self._width)
        m.submodules.rx_cdc = rx_cdc = fifo.AsyncFIFO(width=beat.size, depth=8,
                                                      w_domain=rxd, r_domain="sync")
        src = self._rgmii_rx.o
        m.d.comb += [rx_cdc.w_data.eq(src.payload), rx_cdc.w_en.eq(src.valid),
                     src.ready.eq(rx_cdc.w_rdy),
                     mac_rx.i.payload.eq(rx_cdc.r_data), mac_rx.i.valid.eq(rx_cdc.r_rdy),
                     rx_cdc.r_en.eq(1)]
        # The frames leave from a register: the buffer's block RAM output straight into the
        # receiver's parsing (the NIC's header parser) was the boards' core clock's longest path.
        m.submodules.rx_slice = rx_slice = PacketRegSlice(self._width)
        wiring.connect(m, mac_rx.o, rx_slice.i)
        wiring.connect(m, rx_slice.o, wiring.flipped(self.rx))

        # Send: store and forward in the core clock -> crossing -> PHY clock.
        wiring.connect(m, wiring.flipped(self.tx), mac_tx.i)
        # The transmitter takes each beat into a register of its own and asks for the next
        # from a flip-flop, and the crossing's receiving side is flip-flops that choose between
        # pointers computed ahead: on a speed-6 ECP5 the 125 MHz TX clock's critical path was
        # first the transmitter's logic behind AsyncFIFO's read side, then that read side.
        m.submodules.tx_cdc = tx_cdc = StreamCrossing(packet_layout(self._width), depth=8,
                                                      i_domain="sync", o_domain=txd)
        wiring.connect(m, mac_tx.o, tx_cdc.i)
        wiring.connect(m, tx_cdc.o, self._rgmii_tx.i)
        m.d.comb += [self.ddr_tx_data.eq(self._rgmii_tx.ddr_data),
                     self.ddr_tx_ctl.eq(self._rgmii_tx.ddr_ctl)]
        m.submodules.underrun = underrun = cdc.PulseSynchronizer(i_domain=txd, o_domain="sync")
        m.d.comb += underrun.i.eq(self._rgmii_tx.underrun)

        # Counters.
        for name in MAC_RX_COUNTERS:
            m.d.comb += getattr(self, f"rx_{name}").eq(getattr(mac_rx, name))
        m.d.comb += [self.tx_frames.eq(mac_tx.frames), self.tx_bytes.eq(mac_tx.bytes)]
        m.d.comb += self.tx_underruns.eq(underrun.o)
        return m
