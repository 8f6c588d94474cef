"""The CSR bus between the host interface and the register bank."""

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from mrcnic.regmap import ADDR_WIDTH

__all__ = ["CSRBus"]


class CSRBus(wiring.Signature):
    """A small register bus, seen from the initiator.

    A read: ``r_stb`` high for one cycle with ``addr``; ``r_data`` holds the word from the next
    cycle until the next read. A write: ``w_stb`` high for one cycle with ``addr`` and ``w_data``.
    Addresses are byte offsets of 32-bit words (multiples of 4). No wait states, so a bridge
    (UART, PCIe BAR, Wishbone) needs no handshake logic.

    Interface attributes
    --------------------
    addr : Out(addr_width)
    r_stb : Out(1)
    r_data : In(32)
    w_stb : Out(1)
    w_data : Out(32)
    """

    def __init__(self, addr_width=ADDR_WIDTH):
        if not isinstance(addr_width, int) or not 3 <= addr_width <= 32:
            raise ValueError(f"addr_width must be an integer from 3 to 32, not {addr_width!r}")
        super().__init__({"addr": Out(addr_width), "r_stb": Out(1), "r_data": In(32),
                          "w_stb": Out(1), "w_data": Out(32)})
