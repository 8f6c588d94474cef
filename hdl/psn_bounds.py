"""PSN bounds: each QP's oldest unacknowledged PSN (``una``) and next to send (``nxt``), and the
served QP's, with what the reliability engine's hole tests take from them, in registers."""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .reorder_tracker import PSN_BITS

__all__ = ["PsnBounds"]


class PsnBounds(wiring.Component):
    """For each of ``qps`` QPs, ``una`` and ``nxt`` (24-bit PSNs, wrapping), in flip-flops: the
    send window compares every QP's at once.

    Changes, taking effect in the next cycle: a QP that starts (``start``, ``start_qp``,
    ``start_psn``) has both at ``start_psn``; a packet sent new (``send``, ``send_qp``,
    ``send_psn``) makes its QP's ``nxt`` one past it; the served QP's ``una`` moves one on
    (``advance``: a PSN acknowledged). A start wins over the others for its QP.

    The served QP (``qp``, which is ``qp_next`` of the cycle before) has its bounds in
    registers, loaded a cycle ahead from ``qp_next``'s values with this cycle's changes: ``una``
    and ``nxt`` selected by the QP in the cycle they are used began the core clock's longest
    path. With them, ``inflight`` (its PSNs in flight, ``nxt - una``), and from those and the
    QP's ``high`` (one past the highest PSN known to have arrived, a register of the user's)
    ``hd_now``: the PSNs from ``una`` to ``high``, or 0 if ``high`` is not in flight. ``hd`` is
    ``hd_now`` of the cycle before, for a user that reads it where neither the QP nor its bounds
    nor ``high`` changed in that cycle. (Worked out from the next cycle's ``una`` and ``high``,
    ``hd`` ended two of the core clock's longest paths, from a SACK's checks and from the
    walk's step.)

    Attributes
    ----------
    una, nxt : Out(ArrayLayout(24, qps)), each QP's.
    start : In(1); start_qp : In(range(qps)); start_psn : In(24)
    send : In(1); send_qp : In(range(qps)); send_psn : In(24)
    advance : In(1)
    qp, qp_next : In(range(qps)); high : In(24), QP ``qp``'s
    c_una, c_nxt, inflight, hd_now, hd : Out(24), QP ``qp``'s.
    """

    def __init__(self, qps=16):
        if not isinstance(qps, int) or qps < 1:
            raise ValueError(f"qps must be a positive integer, not {qps!r}")
        self._qps = qps
        psns = data.ArrayLayout(PSN_BITS, qps)
        super().__init__({
            "una": Out(psns), "nxt": Out(psns),
            "start": In(1), "start_qp": In(range(qps)), "start_psn": In(PSN_BITS),
            "send": In(1), "send_qp": In(range(qps)), "send_psn": In(PSN_BITS),
            "advance": In(1),
            "qp": In(range(qps)), "qp_next": In(range(qps)), "high": In(PSN_BITS),
            "c_una": Out(PSN_BITS), "c_nxt": Out(PSN_BITS),
            "inflight": Out(PSN_BITS), "hd_now": Out(PSN_BITS), "hd": Out(PSN_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        Q = self._qps
        # A register each, written only when its QP changes (the flip-flops' enables): the
        # served QP's next bounds are forwarded from this cycle's changes, not selected from
        # every QP's next value, which took a multiplexer per QP and bit. (A register of
        # ArrayLayout shape, partly assigned, stopped Yosys's ABC9 with no word said when this
        # unit was synthesised alone.)
        una = [Signal(PSN_BITS, name=f"una_q{q}") for q in range(Q)]
        nxt = [Signal(PSN_BITS, name=f"nxt_q{q}") for q in range(Q)]
        una_inc, nxt_inc = Signal(PSN_BITS), Signal(PSN_BITS)
        m.d.comb += [una_inc.eq(self.c_una + 1), nxt_inc.eq(self.send_psn + 1)]
        for q in range(Q):
            m.d.comb += [self.una[q].eq(una[q]), self.nxt[q].eq(nxt[q])]
            with m.If(self.start & (self.start_qp == q)):
                m.d.sync += [una[q].eq(self.start_psn), nxt[q].eq(self.start_psn)]
            with m.Else():
                with m.If(self.send & (self.send_qp == q)):
                    m.d.sync += nxt[q].eq(nxt_inc)
                with m.If(self.advance & (self.qp == q)):
                    m.d.sync += una[q].eq(una_inc)

        # QP qp_next's bounds as they will be: this cycle's changes, or what it has.
        una_n, nxt_n = Signal(PSN_BITS), Signal(PSN_BITS)
        started = self.start & (self.start_qp == self.qp_next)
        with m.If(started):
            m.d.comb += [una_n.eq(self.start_psn), nxt_n.eq(self.start_psn)]
        with m.Else():
            m.d.comb += [una_n.eq(Mux(self.advance & (self.qp == self.qp_next), una_inc,
                                      self.una[self.qp_next])),
                         nxt_n.eq(Mux(self.send & (self.send_qp == self.qp_next), nxt_inc,
                                      self.nxt[self.qp_next]))]
        inflight_n = Signal(PSN_BITS)
        m.d.comb += inflight_n.eq(nxt_n - una_n)
        m.d.sync += [self.c_una.eq(una_n), self.c_nxt.eq(nxt_n), self.inflight.eq(inflight_n)]

        high = Signal(PSN_BITS)
        m.d.comb += [high.eq(self.high - self.c_una),
                     self.hd_now.eq(Mux(high > self.inflight, 0, high))]
        m.d.sync += self.hd.eq(self.hd_now)
        return m
