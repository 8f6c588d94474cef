"""The host-memory ports: how the NIC reads payload from, and places data into, host memory.

Whatever sits behind them (a PCIe DMA engine on a board, the cocotb memory model in tests) sees
the same two ports, both ``amaranth.lib.stream`` interfaces seen from the NIC:

Read: the NIC sends a request {addr, length, tag}; the memory answers with exactly
ceil(length / bytes per beat) beats, byte lane 0 of the first beat holding the byte at ``addr``,
``keep`` contiguous from lane 0 on the last beat, ``last`` on the last beat, ``tag`` echoed on
every beat, and ``error`` set on every beat of a request the memory could not serve (its data
then meaningless). Responses come back in request order.

Write: the NIC sends beats {addr, data, keep, last}, ``addr`` taken from a write's first beat,
the following beats continuing at consecutive addresses; the memory answers each write (after
its last beat) with one {error} acknowledgement, in order.
"""

from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .stream import check_width

__all__ = ["ADDR_BITS", "LENGTH_BITS", "TAG_BITS", "read_request_layout", "read_data_layout",
           "write_layout", "write_ack_layout", "MemReadPort", "MemWritePort"]

ADDR_BITS = 64
LENGTH_BITS = 32
TAG_BITS = 8


def read_request_layout():
    return data.StructLayout({"addr": ADDR_BITS, "length": LENGTH_BITS, "tag": TAG_BITS})


def read_data_layout(width):
    check_width(width)
    return data.StructLayout({"data": width, "keep": width // 8, "last": 1, "tag": TAG_BITS,
                              "error": 1})


def write_layout(width):
    check_width(width)
    return data.StructLayout({"data": width, "keep": width // 8, "last": 1, "addr": ADDR_BITS})


def write_ack_layout():
    return data.StructLayout({"error": 1})


class MemReadPort(wiring.Signature):
    """Host-memory read port, seen from the NIC.

    Interface attributes
    --------------------
    req : Out(stream.Signature(read_request_layout()))
    data : In(stream.Signature(read_data_layout(width)))
    """

    def __init__(self, width=64):
        super().__init__({"req": Out(stream.Signature(read_request_layout())),
                          "data": In(stream.Signature(read_data_layout(width)))})


class MemWritePort(wiring.Signature):
    """Host-memory write port, seen from the NIC.

    Interface attributes
    --------------------
    wr : Out(stream.Signature(write_layout(width)))
    ack : In(stream.Signature(write_ack_layout()))
    """

    def __init__(self, width=64):
        super().__init__({"wr": Out(stream.Signature(write_layout(width))),
                          "ack": In(stream.Signature(write_ack_layout()))})
