"""Suspect paths: each QP's paths that lost a packet with none arriving on them since, and the
hold that keeps its new packets off them."""

from amaranth import Array, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["SuspectPaths"]


class SuspectPaths(wiring.Component):
    """For each of ``qps`` QPs, a bit for each of its ``paths`` (an EV's plane and spine: a dead
    link loses every packet sent its way, on whichever of the QP's entries, so they share the
    evidence): suspect, it lost a packet with none arriving on it since. And whether the QP is
    holding: while it is, its suspect paths are its ``hold``, which the spray scheduler passes
    over.

    Changes are for QP ``qp``, taking effect in the next cycle: ``suspect_set`` and
    ``suspect_clear`` (a clear wins), ``hold_start`` and ``hold_end`` (a start wins). A QP that
    starts again (``restart``, ``restart_qp``) has none suspect and is not holding, whatever
    else is asked of it in that cycle.

    Attributes
    ----------
    qp : In(range(qps));  suspect : Out(paths), its suspect paths;  holding : Out(1)
    suspect_set, suspect_clear : In(paths);  hold_start, hold_end : In(1)
    restart : In(1);  restart_qp : In(range(qps))
    hold : Out(ArrayLayout(paths, qps)), each QP's paths to pass over for now.
    """

    def __init__(self, qps=16, paths=8):
        for name, value in (("qps", qps), ("paths", paths)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, not {value!r}")
        self._qps, self._paths = qps, paths
        super().__init__({
            "qp": In(range(qps)), "suspect": Out(paths), "holding": Out(1),
            "suspect_set": In(paths), "suspect_clear": In(paths),
            "hold_start": In(1), "hold_end": In(1),
            "restart": In(1), "restart_qp": In(range(qps)),
            "hold": Out(data.ArrayLayout(paths, qps)),
        })

    def elaborate(self, platform):
        m = Module()
        Q = self._qps
        suspect = [Signal(self._paths, name=f"suspect_q{q}") for q in range(Q)]
        holding = Signal(Q)
        m.d.comb += [self.suspect.eq(Array(suspect)[self.qp]),
                     self.holding.eq(holding.bit_select(self.qp, 1))]
        for q in range(Q):
            m.d.comb += self.hold[q].eq(Mux(holding[q], suspect[q], 0))
            with m.If(self.restart & (self.restart_qp == q)):
                m.d.sync += [suspect[q].eq(0), holding[q].eq(0)]
            with m.Elif(self.qp == q):
                m.d.sync += suspect[q].eq((suspect[q] | self.suspect_set) & ~self.suspect_clear)
                with m.If(self.hold_start):
                    m.d.sync += holding[q].eq(1)
                with m.Elif(self.hold_end):
                    m.d.sync += holding[q].eq(0)
        return m
