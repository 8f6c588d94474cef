"""Counter bank: event counters in block RAM behind one adder."""

from amaranth import Array, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

__all__ = ["CounterBank"]


def _signature(steps, width):
    return {
        "inc": In(data.ArrayLayout(max(steps), len(steps))),
        "rd_addr": In(range(len(steps))), "rd_en": In(1), "rd_data": Out(width),
    }


class CounterBank(wiring.Component):
    """Counters kept in block RAM, where each would otherwise be a register, an adder and a
    share of the register bank's read multiplexer.

    Each counter has a small pending count in flip-flops that takes its increments. One counter
    a cycle, in turn, has its pending count added to its word in the RAM and cleared, so a
    pending count never holds more than one round of increments. A read adds the counter's
    pending count to its word, so it is exact: the count of every increment given before the
    cycle of ``rd_en``. A reset clears every counter (the first round after it writes each word
    afresh).

    Parameters
    ----------
    steps : for each counter, the width of its increment (1 for an event counter).
    width : the counters' width; they wrap.

    Attributes
    ----------
    inc : In(ArrayLayout(max(steps), len(steps))): each counter's increment this cycle (bits above
        its step are ignored).
    rd_addr : In(range(len(steps))); rd_en : In(1): read counter ``rd_addr``.
    rd_data : Out(width): its count, from the cycle after ``rd_en`` until the next.
    """

    def __init__(self, steps, width=32):
        steps = list(steps)
        if not steps or any(not isinstance(s, int) or not 1 <= s <= 32 for s in steps):
            raise ValueError(f"steps must be increment widths from 1 to 32, not {steps!r}")
        if not isinstance(width, int) or not 1 <= width <= 64:
            raise ValueError(f"width must be an integer from 1 to 64, not {width!r}")
        self._steps, self._width = steps, width
        super().__init__(_signature(steps, width))

    def elaborate(self, platform):
        m = Module()
        N, W = len(self._steps), self._width
        m.submodules.words = mem = Memory(shape=W, depth=N, init=[])
        wr = mem.write_port()
        # (Only one counter reads its own write back on the next turn.)
        sweep = mem.read_port(transparent_for=(wr,) if N == 1 else ())
        bus = mem.read_port(transparent_for=(wr,))

        # A pending count gathers at most N cycles of increments between its turns.
        pend = [Signal(min(W, (N * ((1 << s) - 1)).bit_length()), name=f"pend{i}")
                for i, s in enumerate(self._steps)]
        turn = Signal(range(N))
        # The first round after a reset clears the words (a reset does not reach the RAM): each
        # is written with its pending count alone, and reads as 0 until then.
        first = Signal(init=1)
        taken = Signal(W)             # the pending count taken at the last turn, to be added...
        taken_of = Signal(range(N))   # ...to this counter's word...
        taken_first = Signal(init=1)  # ...or to 0
        m.d.sync += [turn.eq(Mux(turn == N - 1, 0, turn + 1)),
                     taken.eq(Array(pend)[turn]), taken_of.eq(turn), taken_first.eq(first)]
        with m.If(turn == N - 1):
            m.d.sync += first.eq(0)
        # The increments are taken into a register first: they come from the blocks' decisions
        # made in the same cycle, and each pending count's adder was the end of those paths.
        inc = [Signal(s, name=f"inc{i}") for i, s in enumerate(self._steps)]
        for i, (p, s) in enumerate(zip(pend, self._steps, strict=True)):
            m.d.sync += [inc[i].eq(self.inc[i][:s]), p.eq(Mux(turn == i, 0, p) + inc[i])]
        m.d.comb += [sweep.addr.eq(turn), wr.addr.eq(taken_of), wr.en.eq(1),
                     wr.data.eq(Mux(taken_first, 0, sweep.data) + taken)]

        # A read: the word as it is after this cycle's write (the port is transparent) plus the
        # pending count as it is now and the increment on its way to it. A counter whose turn
        # it is still has its pending count; one written this cycle has the count taken from it
        # in its word.
        pend_now = Signal(W)
        stale = Signal()
        with m.If(self.rd_en):
            m.d.sync += [pend_now.eq(Array(pend)[self.rd_addr] + Array(inc)[self.rd_addr]),
                         stale.eq(first & (self.rd_addr >= turn))]
        m.d.comb += [bus.addr.eq(self.rd_addr), bus.en.eq(self.rd_en),
                     self.rd_data.eq(Mux(stale, 0, bus.data) + pend_now)]
        return m
