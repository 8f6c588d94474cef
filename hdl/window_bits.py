"""Window bits: for each QP, two bits for each PSN of its window, read and changed for one QP
at a time."""

from amaranth import Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

__all__ = ["WindowBits"]


class WindowBits(wiring.Component):
    """For each of ``qps`` QPs, a bit ``acked`` and a bit ``pend`` for each of the ``window``
    slots of its PSNs, in a row of a distributed RAM a QP: QP ``qp``'s row is read at once, and
    written back in the same cycle with that cycle's changes (a clear, then a set, of each
    field's bits), which read from the next cycle. (As flip-flops with their load logic, for
    any QP, such bits cost about 1,900 LUT4 sites at a board's size.)

    Attributes
    ----------
    qp : In(range(qps));  acked, pend : Out(window), its row.
    ack_set, ack_clear, pend_set, pend_clear : In(window)
    """

    def __init__(self, qps=16, window=256):
        for name, value in (("qps", qps), ("window", window)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, not {value!r}")
        self._qps, self._window = qps, window
        W = window
        super().__init__({
            "qp": In(range(qps)), "acked": Out(W), "pend": Out(W),
            "ack_set": In(W), "ack_clear": In(W), "pend_set": In(W), "pend_clear": In(W),
        })

    def elaborate(self, platform):
        m = Module()
        W = self._window
        m.submodules.rows = mem = Memory(shape=data.StructLayout({"acked": W, "pend": W}),
                                         depth=1 << max(1, (self._qps - 1).bit_length()),
                                         init=[])
        wr, rd = mem.write_port(), mem.read_port(domain="comb")
        acked, pend = Signal(W), Signal(W)
        m.d.comb += [rd.addr.eq(self.qp), acked.eq(rd.data.acked), pend.eq(rd.data.pend),
                     self.acked.eq(acked), self.pend.eq(pend),
                     wr.addr.eq(self.qp), wr.en.eq(1),
                     wr.data.acked.eq((acked & ~self.ack_clear) | self.ack_set),
                     wr.data.pend.eq((pend & ~self.pend_clear) | self.pend_set)]
        return m
