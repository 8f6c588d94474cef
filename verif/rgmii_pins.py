"""The MAC at RGMII pins for simulation: behavioural models of the DDR I/O buffers a board puts in
front of it (``amaranth.lib.io.DDRBuffer`` cannot be simulated), so that cocotbext-eth's RGMII
source and sink, which drive and sample pins on both clock edges, talk to it.

The models follow ``DDRBuffer``'s documented timing with a latency of one cycle each way: an
input bit is sampled at the rising edge (``i[0]``) and the falling edge after it (``i[1]``), both
presented after the next rising edge; an output's ``o[0]`` is driven from a rising edge and
``o[1]`` from the falling edge after it, for the values of ``o`` at the rising edge before.
"""

from amaranth import Cat, ClockDomain, ClockSignal, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from mrcnic.hdl.eth_mac import EthMac

__all__ = ["RgmiiPins"]


class RgmiiPins(wiring.Component):
    """An :class:`EthMac` (its parameters) behind DDR buffer models, at the pins.

    Attributes
    ----------
    rgmii_rxd : In(4);  rgmii_rx_ctl : In(1)  (sampled on both edges of ``eth_rx``'s clock)
    rgmii_txd : Out(4);  rgmii_tx_ctl : Out(1)  (changing on both edges of ``eth_tx``'s clock;
        a PHY samples them a quarter period later, as a board's TX clock delay arranges)
    phy_tx_clk : In(1), unused here: the TX clock as the PHY sees it, which the testbench drives
        a quarter period behind ``eth_tx``'s for the RGMII sink to sample on
    and every member of :class:`EthMac` but its ``ddr_*`` ports.
    """

    def __init__(self, **params):
        self._mac = EthMac(**params)
        members = {n: m for n, m in self._mac.signature.members.items()
                   if not n.startswith("ddr_")}
        super().__init__({"rgmii_rxd": In(4), "rgmii_rx_ctl": In(1),
                          "rgmii_txd": Out(4), "rgmii_tx_ctl": Out(1), "phy_tx_clk": In(1),
                          **members})

    def elaborate(self, platform):
        m = Module()
        m.submodules.mac = mac = self._mac
        for name in self.signature.members:
            if name in mac.signature.members:
                member = mac.signature.members[name]
                if member.is_port:
                    ours, theirs = getattr(self, name), getattr(mac, name)
                    m.d.comb += ours.eq(theirs) if member.flow == Out else theirs.eq(ours)
        wiring.connect(m, mac.rx, wiring.flipped(self.rx))
        wiring.connect(m, wiring.flipped(self.tx), mac.tx)

        # Input DDR: both edges of eth_rx's clock.
        m.domains.eth_rx_fall = ClockDomain("eth_rx_fall", clk_edge="neg", local=True)
        m.d.comb += ClockSignal("eth_rx_fall").eq(ClockSignal("eth_rx"))
        pins = Cat(self.rgmii_rxd, self.rgmii_rx_ctl)
        rise, fall = Signal(5), Signal(5)
        m.d.eth_rx += rise.eq(pins)
        m.d.eth_rx_fall += fall.eq(pins)
        m.d.eth_rx += [mac.ddr_rx_data.eq(Cat(rise[:4], fall[:4])),
                       mac.ddr_rx_ctl.eq(Cat(rise[4], fall[4]))]

        # Output DDR: the rising edge's half while the clock is high, the falling edge's after.
        out = Signal(10)
        m.d.eth_tx += out.eq(Cat(mac.ddr_tx_data[:4], mac.ddr_tx_ctl[0],
                                 mac.ddr_tx_data[4:], mac.ddr_tx_ctl[1]))
        half = Mux(ClockSignal("eth_tx"), out[:5], out[5:])
        m.d.comb += Cat(self.rgmii_txd, self.rgmii_tx_ctl).eq(half)
        return m
