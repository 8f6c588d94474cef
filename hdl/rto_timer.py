"""RTO timer: each QP's retransmission timer, one QP looked at a cycle in turn."""

from amaranth import Array, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from mrcnic.wire import TIME_BITS

__all__ = ["RtoTimer", "rtt_estimate_layout"]


def rtt_estimate_layout():
    """What the timer needs to know of the QP it looks at: whether it has packets outstanding,
    and its RTT estimates."""
    return data.StructLayout({"running": 1, "srtt": TIME_BITS, "rttvar": TIME_BITS,
                              "have_rtt": 1})


class RtoTimer(wiring.Component):
    """The time each of ``qps`` QPs' timer started, and, for one QP a cycle in turn
    (``look``), whether its RTO has passed since: the answer comes the cycle after, for QP
    ``qp``. The QP's RTO is srtt + 4 rttvar, within ``rto_min`` .. ``rto_max``; ``rto_max``
    before its first RTT sample.

    (Deciding from a QP's state in the cycle that acts on it was the core clock's longest path:
    the state, its RTO, the decision and all the decision steers. The answer is a cycle old:
    the user judges whether anything it did since makes it stale.)

    A QP's timer starts at ``now`` when its first packet goes into flight (``start`` for
    ``start_qp``), or at ``restart_at`` (``restart`` for ``restart_qp``, which wins over a
    start of the same QP).

    Attributes
    ----------
    now : In(16), the TX timestamp counter.
    start : In(1);  start_qp : In(range(qps))
    restart : In(1);  restart_qp : In(range(qps));  restart_at : In(16)
    look : Out(range(qps)), the QP looked at this cycle;  looked : In(rtt_estimate_layout()),
        its state.
    qp : Out(range(qps)), the QP looked at the cycle before;  running : Out(1), it had packets
        outstanding;  due : Out(1), and its RTO had passed;  rto : Out(16), its RTO.
    rto_min, rto_max : In(16)
    """

    def __init__(self, qps=16):
        if not isinstance(qps, int) or qps < 1:
            raise ValueError(f"qps must be a positive integer, not {qps!r}")
        self._qps = qps
        super().__init__({
            "now": In(TIME_BITS), "start": In(1), "start_qp": In(range(qps)),
            "restart": In(1), "restart_qp": In(range(qps)), "restart_at": In(TIME_BITS),
            "look": Out(range(qps)), "looked": In(rtt_estimate_layout()),
            "qp": Out(range(qps)), "running": Out(1), "due": Out(1), "rto": Out(TIME_BITS),
            "rto_min": In(16), "rto_max": In(16),
        })

    def elaborate(self, platform):
        m = Module()
        Q = self._qps
        tstart = [Signal(TIME_BITS, name=f"tstart_q{q}") for q in range(Q)]
        for q in range(Q):
            with m.If(self.restart & (self.restart_qp == q)):
                m.d.sync += tstart[q].eq(self.restart_at)
            with m.Elif(self.start & (self.start_qp == q)):
                m.d.sync += tstart[q].eq(self.now)

        r = self.looked
        est = Signal(TIME_BITS + 3)
        rto = Signal(TIME_BITS)
        m.d.comb += est.eq(r.srtt + (r.rttvar << 2))
        with m.If(~r.have_rtt | (est > self.rto_max)):
            m.d.comb += rto.eq(self.rto_max)
        with m.Elif(est < self.rto_min):
            m.d.comb += rto.eq(self.rto_min)
        with m.Else():
            m.d.comb += rto.eq(est)

        look = self.look
        m.d.sync += [
            look.eq(Mux(look == Q - 1, 0, look + 1)), self.qp.eq(look),
            self.running.eq(r.running),
            self.due.eq(r.running & ((self.now - Array(tstart)[look])[:TIME_BITS] >= rto)),
            self.rto.eq(rto),
        ]
        return m
