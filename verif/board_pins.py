"""A board NIC at its RGMII pins for simulation: :class:`~mrcnic.hdl.board_nic.BoardNic` behind
models of its DDR buffers (verif/rgmii_pins.py), as the board top puts the real ones."""

from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from mrcnic.hdl.board_nic import BoardNic
from mrcnic.verif.rgmii_pins import ddr_models

__all__ = ["BoardPins", "board_domains"]


def board_domains(planes: int) -> tuple[str, ...]:
    """The clock domains of a board's ports, besides the core clock."""
    return tuple(f"eth{p}_{d}" for p in range(planes) for d in ("rx", "tx"))


class BoardPins(wiring.Component):
    """A :class:`BoardNic` (its parameters) at the pins of its ports.

    Attributes
    ----------
    rgmii<p>_rxd : In(4);  rgmii<p>_rx_ctl : In(1);  rgmii<p>_txd : Out(4);
    rgmii<p>_tx_ctl : Out(1);  phy<p>_tx_clk : In(1), unused here (see :class:`RgmiiPins`)
    link : In(planes)
    """

    def __init__(self, **params):
        self._board = BoardNic(**params)
        self._planes = params.get("planes", 2)
        members = {}
        for p in range(self._planes):
            members |= {f"rgmii{p}_rxd": In(4), f"rgmii{p}_rx_ctl": In(1),
                        f"rgmii{p}_txd": Out(4), f"rgmii{p}_tx_ctl": Out(1),
                        f"phy{p}_tx_clk": In(1)}
        super().__init__({**members, "link": In(self._planes)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.board = board = self._board
        m.d.comb += board.link.eq(self.link)
        for p in range(self._planes):
            ddr_models(m, board, self, f"eth{p}_rx", f"eth{p}_tx", ddr_prefix=f"ddr{p}_",
                       pin_prefix=f"rgmii{p}_")
        return m
