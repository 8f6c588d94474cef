"""Congestion window: each QP's window under NSCC, moved by the SACKs, trims and starts the
retransmit tracker hands it."""

from amaranth import Array, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from mrcnic.wire import SETH, TIME_BITS

__all__ = ["CongestionWindow", "CWND_BITS", "receiver_share"]

CWND_BITS = 24          # congestion windows, in bytes
PEN_BITS = SETH.field("rcv_cwnd_pen").bits
RECIPROCAL_SHIFT = 16   # rcv_wnd / n is rcv_wnd x floor(2^16 / n) / 2^16: no divider
RECIPROCAL_ONE = 1 << RECIPROCAL_SHIFT


def receiver_share(rcv_wnd: int, pen: int) -> int:
    """The window a SACK with ``rcv_cwnd_pen`` ``pen`` (2 .. 127) allows, as the gateware
    computes it."""
    return (rcv_wnd * (RECIPROCAL_ONE // pen)) >> RECIPROCAL_SHIFT


class CongestionWindow(wiring.Component):
    """The congestion window of each of ``qps`` QPs, in bytes, within ``cwnd_min`` ..
    ``cwnd_max``.

    * **Start** (``init`` with ``init_qp``): the QP's window is ``cwnd_init`` from the cycle
      after next: the inputs carry the QP's CC profile a cycle after it is named.
    * **SACK** (``sack``, for QP ``qp``; NSCC's four cases on its RTT ``sample`` against
      ``target_rtt``, ``ecn`` its mark): no ECN and below the target, the window grows by
      (target - sample) x ``cc_gain`` / 16; no ECN at or above it, by ``cc_fair``; ECN at or
      above it and ``may_cut``, it shrinks by its 2^-``cc_md`` (``cut`` says so, in the same
      cycle); ECN below the target, no change. A receiver shared by ``pen`` >= 2 busy QPs
      (the SETH's ``rcv_cwnd_pen``, given with ``pen_take`` as the feedback is taken) holds it
      to ``rcv_wnd`` / ``pen`` too (``rcv_wnd`` 0: no such limit). The new window is set the
      cycle after ``sack``, from this cycle's inputs (in one cycle, the arithmetic and the
      choice of QP were the core clock's longest path); ``qp`` must not change between.
    * **Trim** (``trim``, for QP ``qp``): the window gives up ``trim_len`` bytes, NSCC's answer to
      a trimmed packet, at once.

    Of two in one cycle for one QP, a trim wins over a SACK's setting, which wins over a start.

    Attributes
    ----------
    qp : In(range(qps)), the QP ``sack`` and ``trim`` act on.
    init : In(1);  init_qp : In(range(qps))
    sack, ecn, may_cut : In(1);  sample : In(16);  cut : Out(1)
    pen_take : In(1);  pen : In(7)
    trim : In(1);  trim_len : In(13)
    target_rtt, cc_fair : In(16);  cc_gain : In(8);  cc_md : In(4);  cwnd_init, cwnd_min,
        cwnd_max, rcv_wnd : In(24): the QP's CC profile (``rel.*``, or ``cc.*``)
    cwnd : Out(ArrayLayout(24, qps)), every QP's window.
    """

    def __init__(self, qps=16):
        if not isinstance(qps, int) or qps < 1:
            raise ValueError(f"qps must be a positive integer, not {qps!r}")
        self._qps = qps
        super().__init__({
            "qp": In(range(qps)), "init": In(1), "init_qp": In(range(qps)),
            "sack": In(1), "ecn": In(1), "may_cut": In(1), "sample": In(TIME_BITS),
            "cut": Out(1), "pen_take": In(1), "pen": In(PEN_BITS),
            "trim": In(1), "trim_len": In(13),
            "target_rtt": In(16), "cc_fair": In(16), "cc_gain": In(8), "cc_md": In(4),
            "cwnd_init": In(CWND_BITS), "cwnd_min": In(CWND_BITS), "cwnd_max": In(CWND_BITS),
            "rcv_wnd": In(CWND_BITS),
            "cwnd": Out(data.ArrayLayout(CWND_BITS, qps)),
        })

    def elaborate(self, platform):
        m = Module()
        Q = self._qps
        cwnd = [Signal(CWND_BITS, name=f"cwnd_q{q}") for q in range(Q)]
        m.d.comb += [self.cwnd[q].eq(cwnd[q]) for q in range(Q)]
        c_cwnd = Array(cwnd)[self.qp]

        # The receiver's share's reciprocals, floor(2^16 / n), in a ROM (block RAM) read as
        # the feedback is taken (a 128-way selector of constants took 165 LUT4 sites at the
        # board's size).
        m.submodules.reciprocals = recips = Memory(
            shape=RECIPROCAL_ONE.bit_length(), depth=1 << PEN_BITS,
            init=[RECIPROCAL_ONE // n if n else 0 for n in range(1 << PEN_BITS)],
            attrs={"ram_style": "block"})
        recip = recips.read_port()
        pen = Signal(PEN_BITS)
        m.d.comb += [recip.addr.eq(self.pen), recip.en.eq(self.pen_take)]
        with m.If(self.pen_take):
            m.d.sync += pen.eq(self.pen)

        # NSCC: ECN and the RTT against the target.
        below = self.sample < self.target_rtt
        m.d.comb += self.cut.eq(self.ecn & ~below & self.may_cut)
        grown = Signal(CWND_BITS + 2)
        with m.If(~self.ecn & below):
            m.d.comb += grown.eq(
                c_cwnd + (((self.target_rtt - self.sample)[:TIME_BITS] * self.cc_gain) >> 4))
        with m.Elif(~self.ecn):
            m.d.comb += grown.eq(c_cwnd + self.cc_fair)
        with m.Elif(self.cut):
            m.d.comb += grown.eq(c_cwnd - (c_cwnd >> self.cc_md))
        with m.Else():
            m.d.comb += grown.eq(c_cwnd)
        # The receiver's share (receiver_share): a product, not a divider.
        share = Signal(CWND_BITS)
        m.d.comb += share.eq((self.rcv_wnd * recip.data) >> RECIPROCAL_SHIFT)
        ceiling = Signal(CWND_BITS)
        with m.If((self.rcv_wnd != 0) & (pen >= 2) & (share < self.cwnd_max)):
            m.d.comb += ceiling.eq(share)
        with m.Else():
            m.d.comb += ceiling.eq(self.cwnd_max)

        # Worked out every cycle and kept, used the cycle after a SACK (``sack_d``).
        sack_d = Signal()
        cw_grown, cw_top = Signal(CWND_BITS + 2), Signal(CWND_BITS)
        m.d.sync += [sack_d.eq(self.sack), cw_grown.eq(grown), cw_top.eq(ceiling)]
        after_sack = Signal(CWND_BITS)
        with m.If((cw_grown > cw_top) & (cw_top > self.cwnd_min)):
            m.d.comb += after_sack.eq(cw_top)
        with m.Elif((cw_grown > cw_top) | (cw_grown < self.cwnd_min)):
            m.d.comb += after_sack.eq(self.cwnd_min)
        with m.Else():
            m.d.comb += after_sack.eq(cw_grown)

        shrunk = Signal(CWND_BITS + 1)
        m.d.comb += shrunk.eq(c_cwnd - self.trim_len)
        low = shrunk[-1] | (shrunk[:CWND_BITS] < self.cwnd_min)
        after_trim = Mux(low, self.cwnd_min, shrunk[:CWND_BITS])

        init_d, init_q = Signal(), Signal(range(Q))
        m.d.sync += [init_d.eq(self.init), init_q.eq(self.init_qp)]
        for q in range(Q):
            with m.If(self.trim & (self.qp == q)):
                m.d.sync += cwnd[q].eq(after_trim)
            with m.Elif(sack_d & (self.qp == q)):
                m.d.sync += cwnd[q].eq(after_sack)
            with m.Elif(init_d & (init_q == q)):
                m.d.sync += cwnd[q].eq(self.cwnd_init)
        return m
