"""What can be built for which board: the boards (their platform, oscillator, Ethernet ports and
management addresses) and the named configurations of the gateware on them.

A board's default configuration is the largest that fits it with margin (packed LUT4 sites at
most :data:`LUT_MARGIN_PCT` of the device). The NIC shares the device with the board's own
logic (:data:`BOARD_LUT4_SITES`), so it may take :func:`nic_budget`: at
:data:`~mrcnic.boards.synth.BOARD_NIC` it packs to nearly a whole 45F (docs/boards.md), so
today the default is ``bringup`` on the Versa and the Colorlight, and ``nic`` only on the
ECPIX-5's 85F.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from amaranth.build import Resource
from amaranth_boards.colorlight_5a75b_r7_0 import Colorlight_5A75B_R70Platform
from amaranth_boards.ecpix5 import ECPIX585Platform
from amaranth_boards.versa_ecp5 import VersaECP5Platform

from .addresses import BOARD_ADDRESSES, BOARD_B_ADDRESSES, BOARD_C_ADDRESSES
from .synth import BOARD_NIC, DEVICES

__all__ = ["BOARDS", "BOARD_LUT4_SITES", "CONFIGS", "LUT_MARGIN_PCT", "Board",
           "Colorlight5A75BTwoPorts", "Config", "NIC_BOARD_LUT4_SITES", "board", "config",
           "nic_budget"]

#: the most of a device's LUT4 sites a default configuration may take: room for routing to close
LUT_MARGIN_PCT = 80.0

#: The PHY's shared management pins: the board top holds them idle (reset released).
PHY_CONTROL = ("rst", "mdc", "mdio")


def _resource(platform: type, name: str, number: int) -> Resource:
    return next(r for r in platform.resources if (r.name, r.number) == (name, number))


def _without(resource: Resource, names) -> Resource:
    """``resource`` without its subsignals called ``names``."""
    return Resource(resource.name, resource.number,
                    *[s for s in resource.ios if s.name not in names], resource.attrs)


class Colorlight5A75BTwoPorts(Colorlight_5A75B_R70Platform):
    """The Colorlight 5A-75B (v7.0) with both Ethernet ports requestable: its two PHYs share one
    reset, MDC and MDIO, which amaranth-boards lists under both ports, so asking for both is a
    conflict. Port 1 here has its data and clock pins only; port 0 keeps the shared pins."""

    resources = [r for r in Colorlight_5A75B_R70Platform.resources
                 if (r.name, r.number) != ("eth_rgmii", 1)] + [
        _without(_resource(Colorlight_5A75B_R70Platform, "eth_rgmii", 1), PHY_CONTROL)]


@dataclass(frozen=True)
class Board:
    """A board the bitstream build knows.

    platform : the amaranth-boards platform class
    osc : the oscillator resource the PLL runs from
    ports : the ``eth_rgmii`` resource numbers, port 0 (the management port's) first
    tx_clock_phase : degrees the RGMII TX clock leaves after the data's edges. RGMII wants it
        centred in the data (90 degrees, 2 ns) by someone: 0 where the PHY delays TXC itself
    addresses : the management port's MAC, IPv4 and IPv6 addresses unless the build says others
    default_config : the largest configuration that fits with margin (see the module's doc)
    why : why that configuration is the default, for the report
    program : how to load the bitstream (openFPGALoader; never needed to build)
    """
    name: str
    platform: type
    osc: str
    ports: tuple[int, ...]
    tx_clock_phase: int
    addresses: dict = field(hash=False)
    default_config: str
    why: str
    program: str


#: LUT4 sites the NIC at BOARD_NIC packs to, as last measured (python -m mrcnic.boards.synth
#: --pack nic_board; docs/boards.md): what keeps it off both boards for now
NIC_BOARD_LUT4_SITES = 40_714

#: LUT4 sites the board around the NIC takes (its MACs, management port, on-chip memory, pattern
#: writer and checker: the ``bringup`` configuration, placed by ``make bitstream``; 12,954 on the
#: Versa, 12,910 on the Colorlight). The NIC has what the margin leaves beside it.
BOARD_LUT4_SITES = 12_954


def nic_budget(device: str) -> int:
    """The LUT4 sites a NIC may pack to on ``device`` and keep the whole board within the
    margin: :data:`LUT_MARGIN_PCT` of the device, less the board's own logic."""
    return int(DEVICES[device]["LUT4"] * LUT_MARGIN_PCT / 100) - BOARD_LUT4_SITES


def _largest(device: str) -> tuple[str, str]:
    """The configuration that fits ``device`` with margin, the larger first, and why."""
    total = DEVICES[device]["LUT4"]
    whole = NIC_BOARD_LUT4_SITES + BOARD_LUT4_SITES
    sizes = (f"the NIC at BOARD_NIC packs to {NIC_BOARD_LUT4_SITES:,} LUT4 sites (python -m "
             f"mrcnic.boards.synth --pack nic_board), and with the board's own "
             f"{BOARD_LUT4_SITES:,} the whole takes {100 * whole / total:.0f}% of the {device}'s "
             f"{total:,}; within the margin the NIC may take {nic_budget(device):,}")
    if NIC_BOARD_LUT4_SITES <= nic_budget(device):
        return "nic", f"nic fits: {sizes}"
    return "bringup", f"nic does not fit: {sizes}"


def _board(name: str, platform: type, **kw) -> Board:
    default, why = _largest(platform.device)
    return Board(name=name, platform=platform, default_config=default, why=why, **kw)


BOARDS: dict[str, Board] = {
    "versa_ecp5": _board(
        "versa_ecp5", VersaECP5Platform, osc="clk100", ports=(0, 1),
        # Its 88E1512 PHYs are taken to add no TX clock delay (as LiteX's Versa target does):
        # the FPGA centres TXC. Not yet checked on a board.
        tx_clock_phase=90, addresses=BOARD_ADDRESSES,
        program="openFPGALoader -b ecp5_evn build/versa_ecp5/top.bit"),
    "colorlight_5a75b": _board(
        "colorlight_5a75b", Colorlight5A75BTwoPorts, osc="clk25", ports=(0, 1),
        # Its B50612D PHYs delay TXC themselves (LiteX's Colorlight targets send it unshifted).
        # Not yet checked on a board.
        tx_clock_phase=0, addresses=BOARD_B_ADDRESSES,
        program="openFPGALoader -c ft232 build/colorlight_5a75b/top.bit"),
    # One Ethernet port, so one plane: MRC sprays over the plane's paths (EVs), and port 0 is
    # also the management port's. The 85F holds the whole NIC.
    "ecpix5_85": _board(
        "ecpix5_85", ECPIX585Platform, osc="clk100", ports=(0,),
        # LiteX's ECPIX-5 target delays TX in the FPGA and leaves RX to the PHY: the FPGA
        # centres TXC. Not yet checked on a board.
        tx_clock_phase=90, addresses=BOARD_C_ADDRESSES,
        program="openFPGALoader -b ecpix5 build/ecpix5_85/top.bit"),
}


@dataclass(frozen=True)
class Config:
    """A configuration of the gateware: ``nic`` the :class:`~mrcnic.hdl.nic.Nic`'s parameters, or
    None for a board without it; ``what`` says what it holds; ``router`` nextpnr's router."""
    name: str
    nic: dict | None = field(hash=False)
    what: str
    router: str = "router1"


CONFIGS: dict[str, Config] = {
    "nic": Config("nic", BOARD_NIC,
                  "the whole board NIC: a MAC a port, the management port, on-chip memory, the "
                  "pattern writer and checker, and the MRC NIC at boards/synth.py's BOARD_NIC",
                  # router1 had not routed it on the 85F after 20 minutes; router2 takes five
                  router="router2"),
    "bringup": Config("bringup", None,
                      "the board without the MRC NIC: a MAC a port (port 1, if there is one, "
                      "counts what it receives and sends nothing), the management port (ARP, "
                      "neighbour discovery, the UDP register protocol over the board's "
                      "registers), on-chip memory, the pattern writer and checker"),
}


def _named(table: dict, kind: str, name: str):
    """``table[name]``; a ValueError naming the ``kind``s there are if none is."""
    try:
        return table[name]
    except KeyError:
        raise ValueError(f"unknown {kind} {name!r}; {kind}s: {', '.join(table)}") from None


def board(name: str) -> Board:
    """The board called ``name``; a ValueError naming the boards there are if none is."""
    return _named(BOARDS, "board", name)


def config(name: str) -> Config:
    """The configuration called ``name``; a ValueError naming those there are if none is."""
    return _named(CONFIGS, "configuration", name)
