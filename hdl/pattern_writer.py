"""Pattern writer: fills a memory region with the test pattern, for a board's traffic tests."""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .host_memory import ADDR_BITS, LENGTH_BITS, MemWritePort
from .pattern import pattern_beat
from .stream import check_width, keep_mask

__all__ = ["PatternWriter", "pattern_job_layout"]


def pattern_job_layout():
    """A region and the seed of its pattern."""
    return data.StructLayout({"addr": ADDR_BITS, "length": LENGTH_BITS, "seed": 32})


class PatternWriter(wiring.Component):
    """Writes bytes ``addr`` .. ``addr + length - 1`` of memory with the pattern of ``seed``
    (sw/pattern.py), one write of the whole region through ``mem``, a beat a cycle, then reports
    on ``done`` whether the memory refused it. A region of no bytes is done at once.

    Attributes
    ----------
    start : In(stream pattern_job_layout());  mem : Out(MemWritePort(width))
    done : Out(stream {error})
    """

    def __init__(self, width=64):
        self._width = check_width(width)
        super().__init__({"start": In(stream.Signature(pattern_job_layout())),
                          "mem": Out(MemWritePort(width)),
                          "done": Out(stream.Signature(data.StructLayout({"error": 1})))})

    def elaborate(self, platform):
        m = Module()
        L = self._width // 8
        job = Signal(pattern_job_layout())
        word = Signal(32)                        # the pattern's word at the beat's lane 0
        left = Signal(LENGTH_BITS)               # bytes still to write
        error = Signal()
        wr, ack, done = self.mem.wr, self.mem.ack, self.done
        m.d.comb += [wr.payload.addr.eq(job.addr),
                     wr.payload.data.eq(pattern_beat(m, job.seed, word, L // 4)),
                     wr.payload.last.eq(left <= L),
                     wr.payload.keep.eq(Mux(left <= L, keep_mask(m, left[:(L).bit_length()], L),
                                            (1 << L) - 1)),
                     done.payload.error.eq(error)]
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.start.ready.eq(1)
                with m.If(self.start.valid):
                    m.d.sync += [job.eq(self.start.payload), word.eq(0),
                                 left.eq(self.start.payload.length), error.eq(0)]
                    with m.If(self.start.payload.length == 0):
                        m.next = "DONE"
                    with m.Else():
                        m.next = "WRITE"
            with m.State("WRITE"):
                m.d.comb += wr.valid.eq(1)
                with m.If(wr.ready):
                    m.d.sync += [word.eq(word + L // 4), left.eq(left - L)]
                    with m.If(left <= L):
                        m.next = "ACK"
            with m.State("ACK"):
                m.d.comb += ack.ready.eq(1)
                with m.If(ack.valid):
                    m.d.sync += error.eq(ack.payload.error)
                    m.next = "DONE"
            with m.State("DONE"):
                m.d.comb += done.valid.eq(1)
                with m.If(done.ready):
                    m.next = "IDLE"
        return m
