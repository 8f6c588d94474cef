"""QP rows: a row of state for each QP, kept in distributed RAM, the served QP's row in a
register."""

from amaranth import Module, Mux
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

__all__ = ["QpRows"]


class QpRows(wiring.Component):
    """A row of ``layout`` for each of ``qps`` QPs, in a distributed RAM, for a user that serves
    one QP at a time (``qp``) and changes only that QP's row.

    ``row`` is QP ``qp``'s row, in a register: it is loaded as the next QP is named
    (``qp_next``, which is ``qp`` in the next cycle) with what that QP's row is to be, this
    cycle's write where it is to that QP, else the RAM's. (Read from the RAM by ``qp`` in the
    cycle it is used, the row began the core clock's longest path.) ``row_next`` is what it is
    loaded with. Every cycle ``update`` is written as QP ``update_qp``'s row: the user gives
    back ``row`` with its changes for ``qp``, or a fresh row for a QP that starts again. (In
    flip-flops, with load logic and a selector for each reader, such rows cost what the RAM's
    copies do at 4 QPs, and more with every QP.)

    ``readers`` more read ports, at once and for any QP: ``read[i]`` is QP ``read_qp[i]``'s row
    as the RAM holds it.

    Attributes
    ----------
    qp, qp_next : In(range(qps));  row, row_next : Out(layout)
    update : In(layout);  update_qp : In(range(qps))
    read_qp : In(ArrayLayout(range(qps), readers));  read : Out(ArrayLayout(layout, readers))
    """

    def __init__(self, qps, layout, readers=0):
        if not isinstance(qps, int) or qps < 1:
            raise ValueError(f"qps must be a positive integer, not {qps!r}")
        if not isinstance(readers, int) or readers < 0:
            raise ValueError(f"readers must be a count, not {readers!r}")
        self._qps, self._layout, self._readers = qps, layout, readers
        super().__init__({
            "qp": In(range(qps)), "qp_next": In(range(qps)),
            "row": Out(layout), "row_next": Out(layout),
            "update": In(layout), "update_qp": In(range(qps)),
            "read_qp": In(data.ArrayLayout(range(qps), readers)),
            "read": Out(data.ArrayLayout(layout, readers)),
        })

    def elaborate(self, platform):
        m = Module()
        depth = 1 << max(1, (self._qps - 1).bit_length())
        m.submodules.rows = mem = Memory(shape=self._layout, depth=depth, init=[])
        wr, rd = mem.write_port(), mem.read_port(domain="comb")
        m.d.comb += [wr.en.eq(1), wr.addr.eq(self.update_qp), wr.data.eq(self.update),
                     rd.addr.eq(self.qp_next),
                     self.row_next.eq(Mux(wr.addr == self.qp_next, wr.data, rd.data))]
        m.d.sync += self.row.eq(self.row_next)
        for i in range(self._readers):
            port = mem.read_port(domain="comb")
            m.d.comb += [port.addr.eq(self.read_qp[i]), self.read[i].eq(port.data)]
        return m
