"""Pattern checker: reads a memory region and counts the bytes that differ from the test pattern,
for a board's traffic tests."""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .host_memory import LENGTH_BITS, MemReadPort
from .pattern import pattern_beat
from .pattern_writer import pattern_job_layout
from .stream import check_width

__all__ = ["PatternChecker", "check_result_layout"]


def check_result_layout():
    """``bad``: bytes that differ from the pattern; ``error``: the memory refused the read."""
    return data.StructLayout({"bad": LENGTH_BITS, "error": 1})


class PatternChecker(wiring.Component):
    """Reads bytes ``addr`` .. ``addr + length - 1`` through ``mem`` (one read of the whole
    region, taken a beat a cycle) and reports on ``done`` how many differ from the pattern of
    ``seed`` (sw/pattern.py), and whether the memory refused the read (then ``bad`` counts
    nothing). A region of no bytes is done at once, with nothing bad.

    Attributes
    ----------
    start : In(stream pattern_job_layout());  mem : Out(MemReadPort(width))
    done : Out(stream check_result_layout())
    """

    def __init__(self, width=64):
        self._width = check_width(width)
        super().__init__({"start": In(stream.Signature(pattern_job_layout())),
                          "mem": Out(MemReadPort(width)),
                          "done": Out(stream.Signature(check_result_layout()))})

    def elaborate(self, platform):
        m = Module()
        L = self._width // 8
        job = Signal(pattern_job_layout())
        word = Signal(32)
        result = Signal(check_result_layout())
        req, rsp, done = self.mem.req, self.mem.data, self.done
        m.d.comb += [req.payload.addr.eq(job.addr), req.payload.length.eq(job.length),
                     done.payload.eq(result)]

        # Each beat passes three registers: the beat with its pattern, then its count of bytes
        # that differ, then the total. Read, compare, count and sum in fewer cycles were the
        # core clock's deepest paths on the boards (the memory's read path ends in a shifter).
        d = rsp.payload
        got = Signal.like(d)
        got_valid = Signal()
        want = Signal(self._width)
        pattern_now = pattern_beat(m, job.seed, word, L // 4)   # (the beat coming now's)
        m.d.sync += got_valid.eq(0)
        differs = Cat(*[(got.data.word_select(k, 8) != want.word_select(k, 8)) & got.keep[k]
                        for k in range(L)])
        pend = Signal(range(L + 1))
        m.d.sync += pend.eq(Mux(got_valid & ~result.error, sum(differs[k] for k in range(L)), 0))
        with m.If(~result.error):
            m.d.sync += result.bad.eq(result.bad + pend)

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.start.ready.eq(1)
                with m.If(self.start.valid):
                    m.d.sync += [job.eq(self.start.payload), word.eq(0), result.eq(0)]
                    with m.If(self.start.payload.length == 0):
                        m.next = "DONE"
                    with m.Else():
                        m.next = "ASK"
            with m.State("ASK"):
                m.d.comb += req.valid.eq(1)
                with m.If(req.ready):
                    m.next = "READ"
            with m.State("READ"):
                m.d.comb += rsp.ready.eq(1)
                with m.If(rsp.valid):
                    m.d.sync += [word.eq(word + L // 4), got.eq(d),
                                 want.eq(pattern_now)]
                    with m.If(d.error):
                        m.d.sync += [result.error.eq(1), result.bad.eq(0)]
                    with m.Else():
                        m.d.sync += got_valid.eq(1)
                    with m.If(d.last):
                        m.next = "COUNT"
            with m.State("COUNT"):         # the last beat is counted...
                m.next = "SUM"
            with m.State("SUM"):           # ...and its count joins the total
                m.next = "DONE"
            with m.State("DONE"):
                m.d.comb += done.valid.eq(1)
                with m.If(done.ready):
                    m.next = "IDLE"
        return m
