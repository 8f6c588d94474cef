"""Test fixture for the host-memory model: hands the NIC side of both host-memory ports to the
testbench, so the model is exercised through the same ports, signals and timing the gateware
will use."""

from amaranth import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from mrcnic.hdl.host_memory import (
    MemReadPort,
    MemWritePort,
    read_data_layout,
    read_request_layout,
    write_ack_layout,
    write_layout,
)

__all__ = ["MemoryPortProbe"]


class MemoryPortProbe(wiring.Component):
    def __init__(self, width=64):
        super().__init__({
            "mem_rd": Out(MemReadPort(width)), "mem_wr": Out(MemWritePort(width)),
            "rd_req": In(stream.Signature(read_request_layout())),
            "rd_data": Out(stream.Signature(read_data_layout(width))),
            "wr": In(stream.Signature(write_layout(width))),
            "wr_ack": Out(stream.Signature(write_ack_layout())),
        })

    def elaborate(self, platform):
        m = Module()
        for src, dst in ((self.rd_req, self.mem_rd.req), (self.mem_rd.data, self.rd_data),
                         (self.wr, self.mem_wr.wr), (self.mem_wr.ack, self.wr_ack)):
            m.d.comb += [dst.payload.eq(src.payload), dst.valid.eq(src.valid),
                         src.ready.eq(dst.ready)]
        return m
