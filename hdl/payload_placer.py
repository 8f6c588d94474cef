"""Payload placer: writes each data packet's payload to host memory at its RETH address."""

from amaranth import Module, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from .front_drop import FrontDrop
from .host_memory import ADDR_BITS, write_layout
from .stream import check_width, keep_mask, packet_layout
from .transport_parser import EXT_BYTES, HEAD_BYTES

__all__ = ["place_layout", "PayloadPlacer"]


def place_layout():
    """Where a frame's payload goes: its address, its length (at least 1) and the bytes of
    headers in front of it."""
    return data.StructLayout({"addr": ADDR_BITS, "length": 16, "head": 8})


class PayloadPlacer(wiring.Component):
    """Enters: frames (headers, payload, ICRC) with their :func:`place_layout` record on every
    beat. Leaves: on ``wr``, one host-memory write per frame of exactly its payload, realigned to
    lane 0 and addressed at ``addr``; the headers and the ICRC are dropped. One beat a cycle.

    Attributes
    ----------
    i : In(stream {data, keep, last, meta: place_layout()});  wr : Out(stream write_layout(width))
    """

    def __init__(self, width=64):
        self._width = check_width(width)
        # A frame's first beat must be all header, or its destination (queued with that beat)
        # could not reach the write it starts in the same cycle.
        if width // 8 > HEAD_BYTES:
            raise ValueError(f"the payload placer needs a beat of at most {HEAD_BYTES} bytes, "
                             f"not {width // 8}")
        pkt = data.StructLayout({**{n: f.shape for n, f in packet_layout(width)},
                                 "meta": place_layout()})
        super().__init__({
            "i": In(stream.Signature(pkt)),
            "wr": Out(stream.Signature(write_layout(width))),
        })

    def elaborate(self, platform):
        m = Module()
        L = self._width // 8
        # Header stacks are an even number of bytes (74 plus whole 4-byte headers).
        m.submodules.front = front = FrontDrop(self._width, HEAD_BYTES + EXT_BYTES, unit=2)
        dest = data.StructLayout({"addr": ADDR_BITS, "length": 16})
        m.submodules.dests = dests = fifo.SyncFIFOBuffered(width=dest.size, depth=4)

        # At a frame's first beat the front drop takes its header length along with the beat,
        # and its destination waits for the payload.
        d = self.i.payload
        first = Signal(init=1)
        go = ~first | dests.w_rdy
        dw = dest(dests.w_data)
        m.d.comb += [
            front.i.payload.data.eq(d.data), front.i.payload.keep.eq(d.keep),
            front.i.payload.last.eq(d.last),
            front.i.valid.eq(self.i.valid & go), self.i.ready.eq(front.i.ready & go),
            front.drop.payload.bytes.eq(d.meta.head),
            front.drop.valid.eq(self.i.valid & first & dests.w_rdy),
            dw.addr.eq(d.meta.addr), dw.length.eq(d.meta.length),
            dests.w_en.eq(self.i.valid & self.i.ready & first),
        ]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += first.eq(d.last)

        # The payload, cut at its length: what follows (the ICRC) is dropped.
        p = front.o.payload
        dr = dest(dests.r_data)
        sent = Signal(16)                   # payload bytes of this frame already written
        left = Signal(17)
        m.d.comb += left.eq(dr.length - sent)
        w = self.wr.payload
        with m.FSM():
            with m.State("WRITE"):
                m.d.comb += [w.data.eq(p.data), w.addr.eq(dr.addr),
                             self.wr.valid.eq(front.o.valid & dests.r_rdy),
                             front.o.ready.eq(self.wr.ready & dests.r_rdy)]
                with m.If(left <= L):
                    m.d.comb += [w.keep.eq(keep_mask(m, left, L)), w.last.eq(1)]
                with m.Else():
                    m.d.comb += w.keep.eq((1 << L) - 1)
                with m.If(self.wr.valid & self.wr.ready):
                    m.d.sync += sent.eq(sent + L)
                    with m.If(left <= L):
                        m.d.comb += dests.r_en.eq(1)
                        m.d.sync += sent.eq(0)
                        with m.If(~p.last):
                            m.next = "TAIL"
            with m.State("TAIL"):
                # The rest of the ICRC, in a beat of its own.
                m.d.comb += front.o.ready.eq(1)
                with m.If(front.o.valid & p.last):
                    m.next = "WRITE"
        return m
