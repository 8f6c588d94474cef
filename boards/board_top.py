"""A board's top level: the :class:`~mrcnic.hdl.board_nic.BoardNic` of a configuration behind
the board's pins, its clocks and its PHYs' control pins."""

from __future__ import annotations

from amaranth import ClockDomain, ClockSignal, Elaboratable, Module
from amaranth.lib import io
from amaranth.lib.cdc import ResetSynchronizer

from mrcnic.hdl.board_nic import BoardNic

from .board_clocks import TX_HZ, BoardClocks
from .rgmii_ddr import RgmiiDdr
from .targets import PHY_CONTROL, Board, Config

__all__ = ["BoardTop", "DEFAULT_CORE_HZ", "MEM_SIZE", "rgmii_pins"]

#: the core clock unless the build says another: the least a board's core runs at (the tests
#: run the board NIC at it)
DEFAULT_CORE_HZ = 62_500_000
WIDTH = 64
#: on-chip memory unless the build says otherwise: what the tests run the board NIC with
MEM_SIZE = 1 << 16
#: what each RGMII pin is called in the board's resource (the Versa's port 1 says "ctrl")
RGMII_PIN_NAMES = {"rx_clk": ("rx_clk",), "rx_ctl": ("rx_ctl", "rx_ctrl"),
                   "rx_data": ("rx_data",), "tx_clk": ("tx_clk",),
                   "tx_ctl": ("tx_ctl", "tx_ctrl"), "tx_data": ("tx_data",)}


def rgmii_pins(resource) -> dict[str, str]:
    """{RGMII pin: the name of the subsignal of ``resource`` (an ``eth_rgmii`` resource) that is
    it}; a ValueError if one is missing."""
    names = {s.name for s in resource.ios}
    found = {}
    for pin, candidates in RGMII_PIN_NAMES.items():
        hits = [c for c in candidates if c in names]
        if not hits:
            raise ValueError(f"{resource.name}#{resource.number} has no {pin} pin "
                             f"(it has {', '.join(sorted(names))})")
        found[pin] = hits[0]
    return found


class BoardTop(Elaboratable):
    """``config``'s gateware on ``board``: the board NIC, its ports' DDR buffers (port ``p`` the
    board's ``eth_rgmii`` resource ``board.ports[p]``), the PLL's clocks from the board's
    oscillator (core clock at ``core_hz``), each port's receive clock from its PHY, resets held
    until the PLL locks, and the PHYs' reset released and MDC/MDIO idle.

    Parameters
    ----------
    board : :class:`~mrcnic.boards.targets.Board`;  config : :class:`~mrcnic.boards.targets.Config`
    core_hz : the core clock (a ValueError names those the PLL can make if not this)
    mac, ipv4, ipv6 : the management port's addresses (ints); None: the board's default
    mem_size : bytes of on-chip memory (block RAM) standing in for host memory
    """

    def __init__(self, board: Board, config: Config, core_hz: float = DEFAULT_CORE_HZ,
                 mac: int | None = None, ipv4: int | None = None, ipv6: int | None = None,
                 mem_size: int = MEM_SIZE):
        self.board, self.config = board, config
        given = {"mac": mac, "ipv4": ipv4, "ipv6": ipv6}
        self.addresses = {k: board.addresses[k] if v is None else v for k, v in given.items()}
        osc = board.platform().lookup(board.osc).clock
        self.clocks = BoardClocks(osc.frequency, core_hz, board.tx_clock_phase)
        max_frame = (config.nic or {}).get("max_frame", 2048)
        self.nic = BoardNic(WIDTH, planes=len(board.ports), nic=config.nic, mem_size=mem_size,
                            max_frame=max_frame, **self.addresses)

    @property
    def core_hz(self) -> float:
        return self.clocks.core_hz

    def elaborate(self, platform):
        m = Module()
        board = self.board
        m.submodules.osc = osc = io.Buffer("i", platform.request(board.osc, dir="-"))
        m.submodules.clocks = clocks = self.clocks
        m.d.comb += clocks.osc.eq(osc.i)
        # The PLL's domains: the core, and each port's TX and TXC (one clock for all ports).
        plls = {"sync": clocks.core}
        for p in range(len(board.ports)):
            plls |= {f"eth{p}_tx": clocks.tx, f"eth{p}_txc": clocks.txc}
        for name, clk in plls.items():
            m.domains += ClockDomain(name)
            m.d.comb += ClockSignal(name).eq(clk)
        # Every domain, the PHYs' receive domains too, is held in reset until the PLL locks,
        # and released in its own clock.
        for name in [*plls, *(f"eth{p}_rx" for p in range(len(board.ports)))]:
            m.submodules[f"rst_{name}"] = ResetSynchronizer(~clocks.locked, domain=name)
        m.submodules.board = nic = self.nic
        m.d.comb += nic.link.eq(-1)         # no MDIO: the link is taken as up
        for p, number in enumerate(board.ports):
            resource = platform.lookup("eth_rgmii", number)
            port = platform.request("eth_rgmii", number, dir="-")
            pins = {pin: getattr(port, name) for pin, name in rgmii_pins(resource).items()}
            m.submodules[f"rgmii{p}"] = ddr = RgmiiDdr(pins, f"eth{p}_rx", f"eth{p}_tx",
                                                       f"eth{p}_txc")
            m.domains += (rx := ClockDomain(f"eth{p}_rx"))
            m.d.comb += rx.clk.eq(ddr.rx_clk)
            platform.add_clock_constraint(pins["rx_clk"].io, TX_HZ)
            m.d.comb += [getattr(nic, f"ddr{p}_rx_data").eq(ddr.rx_data),
                         getattr(nic, f"ddr{p}_rx_ctl").eq(ddr.rx_ctl),
                         ddr.tx_data.eq(getattr(nic, f"ddr{p}_tx_data")),
                         ddr.tx_ctl.eq(getattr(nic, f"ddr{p}_tx_ctl"))]
            # The PHY's own pins where the resource has them (shared pins belong to port 0):
            # reset released (the pin is active low: the port inverts), MDC low, MDIO let float.
            names = {s.name for s in resource.ios}
            for name in PHY_CONTROL:
                if name not in names:
                    continue
                pin = getattr(port, name)
                if name == "mdio":
                    m.submodules[f"phy{p}_{name}"] = io.Buffer("i", pin)
                else:
                    m.submodules[f"phy{p}_{name}"] = buf = io.Buffer("o", pin)
                    m.d.comb += buf.o.eq(0)
        return m
