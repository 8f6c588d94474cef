"""Port-status reporter: tells the peer of every QP which of this NIC's ports are up."""

from amaranth import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from mrcnic.regmap import MAX_PLANES

from .ev_prober import INTERVAL_BITS

__all__ = ["status_layout", "PortStatusReporter"]


def status_layout(qps):
    """This NIC's port mask (bit p: the port of plane p is up), for QP ``qp``'s peer, stamped
    ``ts``."""
    return data.StructLayout({"qp": range(qps), "mask": MAX_PLANES, "ts": 16})


class PortStatusReporter(wiring.Component):
    """While the NIC is enabled: when a port goes down or comes back, and every ``interval``
    cycles (0: only on changes), a round of updates, one per QP in turn, each carrying the
    ports' state. The TX side sends each as an ERTH to the QP's peer (only for a QP that is RTR
    or RTS), so the peer stops spraying onto a plane this NIC cannot receive on, and uses it
    again once it is back. The repeats heal an update the network lost.

    A change during a round starts the round again with the new mask. While the NIC is
    disabled nothing is sent, and the peers are taken to believe every port up (what a QP
    assumes when it starts), so ports already down at enable are reported then.

    Attributes
    ----------
    status : Out(stream status_layout(qps))
    kick : In(stream.Signature(1)): a round now (an endpoint request); taken while no round
        is under way (a change then starts one too), and while the NIC is disabled (when
        nothing is sent)
    port_ready : In(planes), each port's own readiness
    enable : In(1);  interval : In(24);  now : In(16), the TX timestamp counter
    """

    def __init__(self, qps=16, planes=2):
        if not 1 <= planes <= MAX_PLANES:
            raise ValueError(f"planes must be 1 .. {MAX_PLANES}, not {planes!r}")
        self._qps, self._planes = qps, planes
        super().__init__({
            "status": Out(stream.Signature(status_layout(qps))),
            "kick": In(stream.Signature(1)),
            "port_ready": In(planes), "enable": In(1),
            "interval": In(INTERVAL_BITS), "now": In(16),
        })

    def elaborate(self, platform):
        m = Module()
        Q, P = self._qps, self._planes
        everything = (1 << P) - 1
        told = Signal(P, init=everything)     # what the peers were last told
        timer = Signal(INTERVAL_BITS)
        qp = Signal(range(Q))
        stamp = Signal(16)                    # held while offered: a payload keeps still
        s = self.status.payload
        m.d.comb += [s.qp.eq(qp), s.mask.eq(told), s.ts.eq(stamp)]
        with m.If(~self.status.valid | self.status.ready):
            m.d.sync += stamp.eq(self.now)
        changed = self.port_ready != told
        with m.FSM():
            with m.State("WAIT"):
                m.d.comb += self.kick.ready.eq(1)       # a change starts a round anyway
                m.d.sync += timer.eq(timer + 1)
                with m.If(~self.enable | (self.interval == 0)):
                    # a repeat comes a whole interval after the register is set
                    m.d.sync += timer.eq(0)
                with m.If(~self.enable):
                    m.d.sync += told.eq(everything)
                with m.Elif(changed):
                    m.d.sync += [told.eq(self.port_ready), qp.eq(0), timer.eq(0)]
                    m.next = "SEND"
                with m.Elif(self.kick.valid
                            | ((self.interval != 0) & (timer + 1 >= self.interval))):
                    m.d.sync += [qp.eq(0), timer.eq(0)]
                    m.next = "SEND"
            with m.State("SEND"):
                m.d.comb += self.status.valid.eq(1)
                with m.If(self.status.ready):
                    with m.If(changed):
                        m.d.sync += [told.eq(self.port_ready), qp.eq(0)]
                    with m.Elif(qp == Q - 1):
                        m.next = "WAIT"
                    with m.Else():
                        m.d.sync += qp.eq(qp + 1)
        return m
