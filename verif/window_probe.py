"""Test fixture for the memory window and the memory share: the window's registers as plain
ports, the datapath's side of the share handed to the testbench (the names
:class:`~mrcnic.verif.memory_probe.MemoryPortProbe` gives it), and the shared ports for the
host-memory model."""

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
from mrcnic.hdl.memory_share import MemoryShare
from mrcnic.hdl.memory_window import WINDOW_BITS, MemoryWindow

__all__ = ["WindowProbe"]


class WindowProbe(wiring.Component):
    def __init__(self, width=64, outstanding=8):
        self._window = MemoryWindow(width)
        self._share = MemoryShare(width, outstanding)
        super().__init__({
            "mem_rd": Out(MemReadPort(width)), "mem_wr": Out(MemWritePort(width)),
            "rd_req": In(stream.Signature(read_request_layout())),
            "rd_data": Out(stream.Signature(read_data_layout(width))),
            "wr": In(stream.Signature(write_layout(width))),
            "wr_ack": Out(stream.Signature(write_ack_layout())),
            "addr": In(64), "length": In(6), "wdata": In(WINDOW_BITS),
            "access": In(stream.Signature(1)),
            "rdata": Out(WINDOW_BITS), "error": Out(1), "errors": Out(1),
        })

    @property
    def events(self):
        """The counters' event outputs, for the register bank to count."""
        return ("errors",)

    def elaborate(self, platform):
        m = Module()
        m.submodules.window = win = self._window
        m.submodules.share = share = self._share
        for name in ("addr", "length", "wdata"):
            m.d.comb += getattr(win, name).eq(getattr(self, name))
        for name in ("rdata", "error", "errors"):
            m.d.comb += getattr(self, name).eq(getattr(win, name))
        wiring.connect(m, wiring.flipped(self.access), win.access)
        wiring.connect(m, win.rd, share.rd1)
        wiring.connect(m, win.wr, share.wr1)
        wiring.connect(m, share.rd, wiring.flipped(self.mem_rd))
        wiring.connect(m, share.wr, wiring.flipped(self.mem_wr))
        for src, dst in ((self.rd_req, share.rd0.req), (share.rd0.data, self.rd_data),
                         (self.wr, share.wr0.wr), (share.wr0.ack, self.wr_ack)):
            m.d.comb += [dst.payload.eq(src.payload), dst.valid.eq(src.valid),
                         src.ready.eq(dst.ready)]
        return m
