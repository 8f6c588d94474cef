"""Frame filter: holds each frame until its verdict is known, then passes it whole or drops it."""

from amaranth import Module, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .stream import PacketStream, check_width, packet_layout

__all__ = ["verdict_layout", "FrameFilter"]


def verdict_layout(meta, reasons):
    """What decides a frame's fate: ``drop``, why (``reason``, 0 .. reasons - 1), and the record
    that goes with the frame when it passes."""
    # At least one bit even for a single reason: zero-width fields make poor Verilog.
    return data.StructLayout({"drop": 1, "reason": range(max(reasons, 2)), "meta": meta})


class FrameFilter(wiring.Component):
    """Store and forward: every frame is written to block RAM as it arrives, and leaves only
    once its verdict has come (the verdicts come in frame order, at or after each frame's last
    beat, as a parser's records do). A passed frame leaves whole with its verdict's ``meta`` on
    every beat; a dropped one never leaves and is counted by reason. Frames go on arriving
    while earlier ones wait for their verdicts, so the input takes a beat every cycle as long
    as the output keeps up.

    Parameters
    ----------
    width : data width in bits.
    meta : the layout of the record that travels with a passed frame.
    reasons : number of drop reasons counted.
    depth : beats of storage (a power of two). It must exceed the largest frame: a frame that
        fills the storage before its last beat would wait for ever (a frame guard ahead of the
        filter bounds the frames); two of them keep the input moving while one leaves.

    Attributes
    ----------
    i : In(PacketStream(width));  verdict : In(stream verdict_layout(meta, reasons))
    o : Out(stream {data, keep, last, meta})
    passed : Out(1);  dropped<k> : Out(1), events (:attr:`events`): a frame passed, or
        dropped for reason k, this cycle
    """

    def __init__(self, width, meta, reasons=1, depth=512):
        self._width = check_width(width)
        if not isinstance(depth, int) or depth < 4 or depth & (depth - 1):
            raise ValueError(f"depth must be a power of two of at least 4, not {depth!r}")
        if not isinstance(reasons, int) or reasons < 1:
            raise ValueError(f"reasons must be a positive integer, not {reasons!r}")
        self._meta, self._reasons, self._depth = meta, reasons, depth
        out = data.StructLayout({**{n: f.shape for n, f in packet_layout(width)}, "meta": meta})
        members = {
            "i": In(PacketStream(width)),
            "verdict": In(stream.Signature(verdict_layout(meta, reasons))),
            "o": Out(stream.Signature(out)),
            "passed": Out(1),
        }
        members.update({f"dropped{k}": Out(1) for k in range(reasons)})
        super().__init__(members)

    @property
    def events(self):
        """The counters' event outputs, for the register bank to count."""
        return ("passed", *(f"dropped{k}" for k in range(self._reasons)))

    def elaborate(self, platform):
        m = Module()
        D = self._depth
        m.submodules.mem = mem = Memory(shape=packet_layout(self._width), depth=D, init=[])
        wr = mem.write_port()
        rd = mem.read_port(transparent_for=(wr,))
        # Where each stored frame ends, and the verdicts, each in frame order.
        m.submodules.ends = ends = fifo.SyncFIFOBuffered(width=(D - 1).bit_length(), depth=16)
        m.submodules.verdicts = verdicts = fifo.SyncFIFOBuffered(
            width=verdict_layout(self._meta, self._reasons).size, depth=16)
        v = verdict_layout(self._meta, self._reasons)(verdicts.r_data)

        wp = Signal(range(D))
        rp = Signal(range(D))        # the beat rd.data holds
        full = Signal()
        m.d.comb += full.eq((wp + 1)[:len(wp)] == rp)

        # Write: a beat a cycle while there is room (and room to note where a frame ends).
        m.d.comb += [
            self.i.ready.eq(~full & ends.w_rdy),
            wr.en.eq(self.i.valid & self.i.ready), wr.addr.eq(wp), wr.data.eq(self.i.payload),
            ends.w_en.eq(wr.en & self.i.payload.last), ends.w_data.eq((wp + 1)[:len(wp)]),
            verdicts.w_en.eq(self.verdict.valid), verdicts.w_data.eq(self.verdict.payload),
            self.verdict.ready.eq(verdicts.w_rdy),
        ]
        with m.If(wr.en):
            m.d.sync += wp.eq(wp + 1)

        # Read: the head frame, once stored whole and judged, leaves or is skipped in one cycle.
        judged = ends.r_rdy & verdicts.r_rdy
        beat = rd.data
        m.d.comb += [
            self.o.valid.eq(judged & ~v.drop),
            self.o.payload.data.eq(beat.data), self.o.payload.keep.eq(beat.keep),
            self.o.payload.last.eq(beat.last), self.o.payload.meta.eq(v.meta),
        ]
        nxt = Signal(range(D))
        m.d.comb += [nxt.eq(rp), rd.addr.eq(nxt)]
        with m.If(judged & v.drop):
            m.d.comb += [nxt.eq(ends.r_data), ends.r_en.eq(1), verdicts.r_en.eq(1)]
            for k in range(self._reasons):
                with m.If(v.reason == k):
                    m.d.comb += getattr(self, f"dropped{k}").eq(1)
        with m.Elif(self.o.valid & self.o.ready):
            m.d.comb += nxt.eq((rp + 1)[:len(rp)])
            with m.If(beat.last):
                m.d.comb += [ends.r_en.eq(1), verdicts.r_en.eq(1)]
                m.d.comb += self.passed.eq(1)
        m.d.sync += rp.eq(nxt)
        return m
