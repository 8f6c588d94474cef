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

__all__ = ["RgmiiPins", "ddr_models"]


def ddr_models(m, ddr, pins, rx_domain, tx_domain, ddr_prefix="ddr_", pin_prefix="rgmii_"):
    """Models of the DDR buffers between ``pins`` (``<pin_prefix>rxd``, ``rx_ctl``, ``txd``,
    ``tx_ctl``) and ``ddr``'s DDR-side ports (``<ddr_prefix>rx_data``, ``rx_ctl``, ``tx_data``,
    ``tx_ctl``), clocked by ``rx_domain`` and ``tx_domain``."""
    def pin(name):
        return getattr(pins, pin_prefix + name)

    def port(name):
        return getattr(ddr, ddr_prefix + name)

    # Input DDR: both edges of the receive clock.
    fall_domain = f"{rx_domain}_fall"
    m.domains += ClockDomain(fall_domain, clk_edge="neg", local=True)
    m.d.comb += ClockSignal(fall_domain).eq(ClockSignal(rx_domain))
    inputs = Cat(pin("rxd"), pin("rx_ctl"))
    rise, fall = Signal(5), Signal(5)
    m.d[rx_domain] += rise.eq(inputs)
    m.d[fall_domain] += fall.eq(inputs)
    m.d[rx_domain] += [port("rx_data").eq(Cat(rise[:4], fall[:4])),
                       port("rx_ctl").eq(Cat(rise[4], fall[4]))]

    # Output DDR: the rising edge's half while the clock is high, the falling edge's after.
    out = Signal(10)
    m.d[tx_domain] += out.eq(Cat(port("tx_data")[:4], port("tx_ctl")[0],
                                 port("tx_data")[4:], port("tx_ctl")[1]))
    half = Mux(ClockSignal(tx_domain), out[:5], out[5:])
    m.d.comb += Cat(pin("txd"), pin("tx_ctl")).eq(half)


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

    @property
    def events(self):
        """The MAC's counter events, counted by the test top as the register bank would."""
        return self._mac.events

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

        ddr_models(m, mac, self, "eth_rx", "eth_tx")
        return m
