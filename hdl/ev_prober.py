"""EV prober: sends the probes that can bring ASSUMED_BAD EVs back to GOOD."""

from amaranth import Array, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .bits import first_from

__all__ = ["EvProber", "INTERVAL_BITS", "probe_layout"]

INTERVAL_BITS = 24


def probe_layout(qps):
    """A probe to send: QP ``qp``'s profile entry ``entry``, stamped ``ts``."""
    return data.StructLayout({"qp": range(qps), "entry": 16, "ts": 16})


class EvProber(wiring.Component):
    """Every ``interval`` cycles (0: never), one probe: for the next QP, in turn, with an
    ASSUMED_BAD entry in its profile, the next such entry after the one it probed last. The
    probe leaves for the TX side's acknowledgement path, which sends a PETH on exactly that
    entry's EV; the answer (a SACK with the probe-response bit and that
    EV) is the retransmit tracker's to match.

    Attributes
    ----------
    probe : Out(stream probe_layout(qps))
    bad_qp : Out(range(qps)); bad : In(evs), that QP's ASSUMED_BAD entries on planes it may
        use now (the spray scheduler's view), so a probe never waits for a port that is down
    interval : In(24), cycles between probes;  now : In(16), the TX timestamp counter
    """

    def __init__(self, qps=16, evs=64):
        self._qps, self._evs = qps, evs
        super().__init__({
            "probe": Out(stream.Signature(probe_layout(qps))),
            "bad_qp": Out(range(qps)), "bad": In(evs),
            "interval": In(INTERVAL_BITS), "now": In(16),
        })

    def elaborate(self, platform):
        m = Module()
        Q, E = self._qps, self._evs
        timer = Signal(INTERVAL_BITS)
        qp = Signal(range(Q))
        looked = Signal(range(Q + 1))
        after = [Signal(range(E), name=f"after_q{q}") for q in range(Q)]   # where to look next
        entry = Signal(range(E))
        m.d.comb += self.bad_qp.eq(qp)

        # The first bad entry at or after the QP's mark, wrapping.
        bad = self.bad
        first = first_from(m, bad, Array(after)[qp])

        p = self.probe.payload
        stamp = Signal(16)                    # held while offered: a payload keeps still
        m.d.comb += [p.qp.eq(qp), p.entry.eq(entry), p.ts.eq(stamp)]
        with m.If(~self.probe.valid | self.probe.ready):
            m.d.sync += stamp.eq(self.now)
        with m.FSM():
            with m.State("WAIT"):
                m.d.sync += timer.eq(timer + 1)
                with m.If((self.interval != 0) & (timer + 1 >= self.interval)):
                    m.d.sync += [timer.eq(0), looked.eq(0)]
                    m.next = "LOOK"
            with m.State("LOOK"):
                with m.If(bad.any()):
                    m.d.sync += entry.eq(first)
                    m.next = "SEND"
                with m.Else():
                    m.d.sync += [qp.eq(Mux(qp == Q - 1, 0, qp + 1)), looked.eq(looked + 1)]
                    with m.If(looked == Q - 1):
                        m.next = "WAIT"       # nothing to probe this time
            with m.State("SEND"):
                m.d.comb += self.probe.valid.eq(1)
                with m.If(self.probe.ready):
                    for q in range(Q):
                        with m.If(qp == q):
                            m.d.sync += after[q].eq(entry + 1)
                    m.d.sync += qp.eq(Mux(qp == Q - 1, 0, qp + 1))
                    m.next = "WAIT"
        return m
