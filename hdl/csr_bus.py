"""The CSR bus between the host interface and the register bank."""

import enum

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from mrcnic.regmap import ADDR_WIDTH

__all__ = ["CSRBus", "Refusal"]


class Refusal(enum.IntEnum):
    """Why the register bank refused an access (the bus's ``refused``)."""
    NONE = 0       #: carried out
    ADDRESS = 1    #: no register at the offset
    ACCESS = 2     #: a write to a register that takes none, or while its block's command is pending
    VALUE = 3      #: a value wider than the register's word or above its limit


class CSRBus(wiring.Signature):
    """A small register bus, seen from the initiator.

    A read: ``r_stb`` high for one cycle with ``addr``; ``r_data`` holds the word from the next
    cycle until the next read. A write: ``w_stb`` high for one cycle with ``addr`` and ``w_data``.
    Addresses are byte offsets of 32-bit words (multiples of 4). No wait states, so a bridge
    (UART, PCIe BAR, Wishbone) needs no handshake logic. ``refused`` tells, from the cycle after
    a strobe until the next strobe, whether that access was carried out (:class:`Refusal`); an
    initiator that only counts on ``global.bus_errors`` may leave it unread.

    Interface attributes
    --------------------
    addr : Out(addr_width)
    r_stb : Out(1)
    r_data : In(32)
    w_stb : Out(1)
    w_data : Out(32)
    refused : In(2), a :class:`Refusal`
    """

    def __init__(self, addr_width=ADDR_WIDTH):
        if not isinstance(addr_width, int) or not 3 <= addr_width <= 32:
            raise ValueError(f"addr_width must be an integer from 3 to 32, not {addr_width!r}")
        super().__init__({"addr": Out(addr_width), "r_stb": Out(1), "r_data": In(32),
                          "w_stb": Out(1), "w_data": Out(32),
                          "refused": In(2)})
