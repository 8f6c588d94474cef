"""Send window: whether a QP may send its next packet, by its PSNs in flight and its bytes in
flight against its congestion window; and the bytes in flight themselves."""

from amaranth import Array, Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .bits import decode
from .congestion_window import CWND_BITS
from .reorder_tracker import PSN_BITS

__all__ = ["SendWindow", "FLIGHT_BITS"]

FLIGHT_BITS = 32        # a QP's payload bytes in flight


class SendWindow(wiring.Component):
    """For each of ``qps`` QPs: a packet may go while its PSN is less than ``window`` past the
    QP's ``una`` and, unless ``unlimited`` (reliability off), while the QP's payload bytes in
    flight are below its congestion window; never for QP ``qp`` while ``busy`` (the retransmit
    tracker is handling its feedback or a timeout: the EVs a SACK finds lost on are judged
    before the sends its acknowledgements make room for).

    Bytes in flight: a packet's payload counts once it passes the gate (``gate_take``, from the
    next cycle but one: the gate's answer in the next does not include it, so pass one packet
    in two cycles at most); ``acked_len`` bytes of QP ``qp`` leave as they are acknowledged or
    SACKed, from the next cycle but one too. A QP that starts again (``restart``) has nothing
    in flight from the next cycle: a packet passing the gate for it in that cycle was queued
    before, and bytes acknowledged in that cycle or the one before were of its last life, so
    neither counts.

    Attributes
    ----------
    una, nxt : In(ArrayLayout(24, qps)), each QP's oldest unacknowledged and next PSN.
    cwnd : In(ArrayLayout(24, qps)), each QP's congestion window.
    unlimited : In(1), no byte limit (reliability off).
    qp : In(range(qps));  busy : In(1);  acked_len : In(13)
    restart : In(1);  restart_qp : In(range(qps))
    gate_qp : In(range(qps));  gate_psn : In(24);  gate_length : In(13);  gate_open : Out(1),
        whether QP ``gate_qp`` may send PSN ``gate_psn``;  gate_take : In(1), it is sent.
    gate_ready : Out(qps), the QPs whose next PSN (``nxt``) ``gate_open`` would let go.
    flight : Out(ArrayLayout(32, qps)), each QP's payload bytes in flight.
    """

    def __init__(self, qps=16, window=256):
        if not isinstance(qps, int) or qps < 1:
            raise ValueError(f"qps must be a positive integer, not {qps!r}")
        if not isinstance(window, int) or window < 1 or window & (window - 1):
            raise ValueError(f"window must be a power of two, not {window!r}")
        self._qps, self._window = qps, window
        super().__init__({
            "una": In(data.ArrayLayout(PSN_BITS, qps)), "nxt": In(data.ArrayLayout(PSN_BITS, qps)),
            "cwnd": In(data.ArrayLayout(CWND_BITS, qps)), "unlimited": In(1),
            "qp": In(range(qps)), "busy": In(1), "acked_len": In(13),
            "restart": In(1), "restart_qp": In(range(qps)),
            "gate_qp": In(range(qps)), "gate_psn": In(PSN_BITS), "gate_length": In(13),
            "gate_open": Out(1), "gate_take": In(1), "gate_ready": Out(qps),
            "flight": Out(data.ArrayLayout(FLIGHT_BITS, qps)),
        })

    def elaborate(self, platform):
        m = Module()
        Q, W = self._qps, self._window
        una = [self.una[q] for q in range(Q)]
        nxt = [self.nxt[q] for q in range(Q)]
        cwnd = [self.cwnd[q] for q in range(Q)]
        flight = [Signal(FLIGHT_BITS, name=f"flight_q{q}") for q in range(Q)]
        m.d.comb += [self.flight[q].eq(flight[q]) for q in range(Q)]

        # One rule, asked for the gate's QP and PSN and for each QP's next.
        shut = Signal(Q)                 # the QP being served, while busy
        m.d.comb += shut.eq(Mux(self.busy, decode(self.qp, Q), 0))

        def may(psn, una, flight, cwnd, shut):
            return (((psn - una)[:PSN_BITS] < W) & (self.unlimited | (flight < cwnd)) & ~shut)

        m.d.comb += self.gate_open.eq(may(
            self.gate_psn, Array(una)[self.gate_qp], Array(flight)[self.gate_qp],
            Array(cwnd)[self.gate_qp], shut.bit_select(self.gate_qp, 1)))
        m.d.comb += self.gate_ready.eq(Cat(
            may(nxt[q], una[q], flight[q], cwnd[q], shut[q]) for q in range(Q)))

        # A packet's bytes count a cycle after it passes the gate (``tk``): the gate's decision
        # and this accounting were one path, the core clock's longest. The gate never sees the
        # lag: the TX pipeline passes at most one packet in two cycles.
        tk, tk_q, tk_len = Signal(), Signal(range(Q)), Signal(13)
        m.d.sync += [tk.eq(self.gate_take & ~(self.restart & (self.gate_qp == self.restart_qp))),
                     tk_q.eq(self.gate_qp), tk_len.eq(self.gate_length)]
        # Acknowledged bytes leave a cycle later too (``ak``): the tracker's walk, from its record
        # RAM through the test of the record into ``acked_len``, and this subtraction were one
        # path, the core clock's longest. The window only opens a cycle later for it. A restart
        # wins over bytes acknowledged in its cycle or the one before: its QP has nothing in
        # flight, and no bytes to take off.
        ak_q, ak_len = Signal(range(Q)), Signal(13)
        m.d.sync += [ak_q.eq(self.qp), ak_len.eq(Mux(
            self.restart & (self.restart_qp == self.qp), 0, self.acked_len))]
        # Two adders, one for each QP that may change (the gate's and the tracker's), not two a
        # QP.
        took_q = Signal(FLIGHT_BITS)     # the gate's QP's bytes with what it takes (and gives back)
        gave_q = Signal(FLIGHT_BITS)     # the tracker's QP's, less what it acknowledged
        m.d.comb += [
            took_q.eq(Array(flight)[tk_q] + tk_len - Mux(ak_q == tk_q, ak_len, 0)),
            gave_q.eq(Array(flight)[ak_q] - ak_len),
        ]
        for q in range(Q):
            with m.If(self.restart & (self.restart_qp == q)):
                m.d.sync += flight[q].eq(0)
            with m.Elif(tk & (tk_q == q)):
                m.d.sync += flight[q].eq(took_q)
            with m.Elif(ak_q == q):
                m.d.sync += flight[q].eq(gave_q)
        return m
