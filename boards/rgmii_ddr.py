"""One RGMII port's pins: the DDR buffers between them and a MAC's DDR ports, the receive clock
in, and the transmit clock out. Board-only: DDR buffers cannot be simulated (the simulation puts
models of them in front of the MAC instead, verif/rgmii_pins.py)."""

from __future__ import annotations

from amaranth import Cat, Module
from amaranth.lib import io, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["RgmiiDdr"]


class RgmiiDdr(wiring.Component):
    """The DDR buffers of an RGMII port, in the convention of :class:`~mrcnic.hdl.eth_mac.EthMac`
    (docs/boards.md): in each byte and control pair the low half is the rising edge's, the high
    half the falling edge's, which is :class:`io.DDRBuffer`'s ``[0]`` and ``[1]``.

    Parameters
    ----------
    pins : {"rx_clk", "rx_ctl", "rx_data", "tx_clk", "tx_ctl", "tx_data": the requested port}
    rx_domain : the receive clock's domain, which the board top makes from ``rx_clk``
    tx_domain : the transmit clock's domain;  txc_domain : the TXC pin's, the transmit clock as
        far shifted as RGMII needs (:class:`~mrcnic.boards.board_clocks.BoardClocks`)

    Attributes
    ----------
    rx_clk : Out(1), the PHY's receive clock, from its pin
    rx_data : Out(8);  rx_ctl : Out(2);  tx_data : In(8);  tx_ctl : In(2), the MAC's DDR ports
    """

    def __init__(self, pins: dict, rx_domain: str, tx_domain: str, txc_domain: str):
        self._pins = dict(pins)
        self._domains = (rx_domain, tx_domain, txc_domain)
        super().__init__({"rx_clk": Out(1), "rx_data": Out(8), "rx_ctl": Out(2),
                          "tx_data": In(8), "tx_ctl": In(2)})

    def elaborate(self, platform):
        m = Module()
        pins = self._pins
        rx, tx, txc = self._domains
        m.submodules.rx_clk = rx_clk = io.Buffer("i", pins["rx_clk"])
        m.d.comb += self.rx_clk.eq(rx_clk.i)
        for name, port in (("rx_data", self.rx_data), ("rx_ctl", self.rx_ctl)):
            m.submodules[name] = buf = io.DDRBuffer("i", pins[name], i_domain=rx)
            m.d.comb += port.eq(Cat(buf.i[0], buf.i[1]))
        for name, port in (("tx_data", self.tx_data), ("tx_ctl", self.tx_ctl)):
            m.submodules[name] = buf = io.DDRBuffer("o", pins[name], o_domain=tx)
            half = len(port) // 2
            m.d.comb += [buf.o[0].eq(port[:half]), buf.o[1].eq(port[half:])]
        # TXC: high for the first half of each period of its (shifted) clock, low for the second.
        m.submodules.tx_clk = tx_clk = io.DDRBuffer("o", pins["tx_clk"], o_domain=txc)
        m.d.comb += [tx_clk.o[0].eq(1), tx_clk.o[1].eq(0)]
        return m
