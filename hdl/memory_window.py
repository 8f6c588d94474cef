"""Memory window: a host with register access only reads and writes the memory behind the NIC
(host memory, or a board's own) a few bytes at a time."""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from mrcnic.regmap import MEM_WINDOW_BYTES, by_name

from .host_memory import MemReadPort, MemWritePort
from .stream import check_width

__all__ = ["MemoryWindow"]

WINDOW_BITS = 8 * MEM_WINDOW_BYTES


class MemoryWindow(wiring.Component):
    """Carries out one access at a time, as the ``mem.*`` registers stage it: ``access`` 0
    reads ``length`` bytes at ``addr`` into ``rdata``, 1 writes the first ``length`` bytes of
    ``wdata`` there; ``access`` is taken (its command no longer pending) once the memory has
    answered. ``error`` tells whether it refused the last access, and a refused read leaves
    ``rdata`` zero, as does every byte past ``length``.

    Parameters
    ----------
    width : the memory ports' data width.

    Attributes
    ----------
    addr : In(64);  length : In(6), 0 .. MEM_WINDOW_BYTES;  wdata : In(8 x MEM_WINDOW_BYTES)
    access : In(stream.Signature(1))
    rdata : Out(8 x MEM_WINDOW_BYTES);  error : Out(1);  errors : Out(1), an event
    (:attr:`events`): an access refused
    rd : Out(MemReadPort(width));  wr : Out(MemWritePort(width))
    """

    def __init__(self, width=64):
        self._width = check_width(width)
        super().__init__({
            "addr": In(64), "length": In(by_name("mem.length").width),
            "wdata": In(WINDOW_BITS), "access": In(stream.Signature(1)),
            "rdata": Out(WINDOW_BITS), "error": Out(1), "errors": Out(1),
            "rd": Out(MemReadPort(width)), "wr": Out(MemWritePort(width)),
        })

    @property
    def events(self):
        """The counters' event outputs, for the register bank to count."""
        return ("errors",)

    def elaborate(self, platform):
        m = Module()
        width, lanes = self._width, self._width // 8
        beats = -(-MEM_WINDOW_BYTES // lanes)
        # The window's bytes as the beats carry them: beat k holds bytes k*lanes onwards.
        padded = beats * width
        got = Signal(padded)                # read data gathered, beat by beat
        wide = Signal(padded)
        m.d.comb += wide.eq(self.wdata)
        beat = Signal(range(beats + 1))
        failed = Signal()
        length = Signal(range(MEM_WINDOW_BYTES + 1))
        m.d.comb += length.eq(self.length)  # the register's limit keeps it in range

        # Bytes of the window below ``length``, as a mask over the window's bits.
        keep_bits = Signal(WINDOW_BITS)
        for b in range(MEM_WINDOW_BYTES):
            m.d.comb += keep_bits[8 * b:8 * (b + 1)].eq(Mux(b < length, 0xFF, 0))

        rd, wr = self.rd, self.wr
        m.d.comb += [rd.req.payload.addr.eq(self.addr), rd.req.payload.length.eq(length),
                     rd.req.payload.tag.eq(0), rd.data.ready.eq(0), wr.ack.ready.eq(0)]
        # Write beats: beat k's lanes below the bytes still to go.
        left = Signal(range(MEM_WINDOW_BYTES + 1))
        m.d.comb += left.eq(length - beat * lanes)
        with m.Switch(beat):
            for k in range(beats):
                with m.Case(k):
                    m.d.comb += wr.wr.payload.data.eq(wide[k * width:(k + 1) * width])
        # Lanes past the window's bytes are never kept, and a beat as wide as the window is the
        # first and last: said so rather than compared, so no comparison is constant.
        m.d.comb += [wr.wr.payload.keep.eq(Cat(lane < left
                                                for lane in range(min(lanes, MEM_WINDOW_BYTES)))),
                     wr.wr.payload.addr.eq(self.addr + beat * lanes),
                     wr.wr.payload.last.eq(left <= lanes if lanes < MEM_WINDOW_BYTES
                                           else beat == 0)]

        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.access.valid):
                    m.d.sync += [beat.eq(0), failed.eq(0), got.eq(0)]
                    with m.If(length == 0):
                        m.next = "DONE"
                    with m.Elif(self.access.payload):
                        m.next = "WRITE"
                    with m.Else():
                        m.next = "READ"
            with m.State("READ"):
                m.d.comb += rd.req.valid.eq(1)
                with m.If(rd.req.ready):
                    m.next = "READ_DATA"
            with m.State("READ_DATA"):
                m.d.comb += rd.data.ready.eq(1)
                with m.If(rd.data.valid):
                    with m.Switch(beat):
                        for k in range(beats):
                            with m.Case(k):
                                m.d.sync += got[k * width:(k + 1) * width].eq(
                                    rd.data.payload.data)
                    m.d.sync += [beat.eq(beat + 1),
                                 failed.eq(failed | rd.data.payload.error)]
                    with m.If(rd.data.payload.last):
                        m.next = "DONE"
            with m.State("WRITE"):
                m.d.comb += wr.wr.valid.eq(1)
                with m.If(wr.wr.ready):
                    m.d.sync += beat.eq(beat + 1)
                    with m.If(wr.wr.payload.last):
                        m.next = "WRITE_ACK"
            with m.State("WRITE_ACK"):
                m.d.comb += wr.ack.ready.eq(1)
                with m.If(wr.ack.valid):
                    m.d.sync += failed.eq(wr.ack.payload.error)
                    m.next = "DONE"
            with m.State("DONE"):
                m.d.comb += self.access.ready.eq(1)
                m.d.sync += self.error.eq(failed)
                with m.If(failed):
                    m.d.comb += self.errors.eq(1)
                with m.If(~self.access.payload):
                    m.d.sync += self.rdata.eq(Mux(failed, 0, got[:WINDOW_BITS] & keep_bits))
                m.next = "IDLE"
        return m
