"""Reorder tracker: which PSNs of each QP have arrived, in a window past the first one missing."""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .bits import first_set

__all__ = ["PsnStatus", "ReorderTracker", "SACK_BITS", "result_layout"]

PSN_BITS = 24
SACK_BITS = 64          # the SACK bitmap's width (SETH.sack_bitmap)


class PsnStatus(enum.Enum, shape=2):
    NEW = 0          # first arrival, inside the window: place it
    DUPLICATE = 1    # arrived before (or behind the cumulative PSN): drop it, acknowledge
    BEYOND = 2       # past the window: drop it, NACK PSN_OOR_WINDOW
    PEEK = 3         # not an arrival: a look at the QP's state (for a probe's answer)


def result_layout(qps):
    return data.StructLayout({
        "qp": range(qps), "psn": PSN_BITS, "status": PsnStatus,
        "ooo": 1,                   # a NEW PSN other than the one expected next
        "cack": PSN_BITS,           # cumulative: every PSN before it has arrived (after this one)
        "sack_offset": 16,          # bitmap bit 0 is PSN cack + sack_offset
        "sack_bitmap": SACK_BITS,
    })


class ReorderTracker(wiring.Component):
    """Per QP: the cumulative PSN (the first one missing) and a bitmap of the ``window`` PSNs from
    it, in block RAM. Each arriving PSN is judged NEW, DUPLICATE or BEYOND; a NEW one is recorded
    and the cumulative PSN moves past every PSN that has now arrived in a row. The result also
    gives what a SACK for this arrival carries: the cumulative PSN and 64 bits of the bitmap with
    their offset.

    MRC-REFERENCE fixes the SACK's fields, not these rules; this project chose them:
    PSNs compare by 24-bit serial arithmetic, so a PSN up to 2^23 - 1 ahead of the cumulative
    PSN is ahead (NEW within the window, BEYOND past it) and any other is behind (DUPLICATE);
    the SACK's 64 bits are the block, aligned to the new cumulative PSN, that holds this PSN, or
    the first block when this PSN is behind it or past the window.

    One PSN every three cycles (read; find the run of arrivals; judge, shift and write back),
    so a QP's next PSN always sees the last one's update. (The run's search, the 256-bit shift
    and the write back in one cycle were one of the boards' core clock's longest paths.)

    Attributes
    ----------
    init : In(stream {qp, psn}): management: the QP's first expected PSN; its bitmap is cleared
    arrive : In(stream {qp, psn, peek}): a data packet's PSN; with ``peek``, nothing is recorded
        and the result (status PEEK) gives the QP's cumulative PSN and first block
    result : Out(stream result_layout(qps))
    """

    def __init__(self, qps=16, window=256):
        if not isinstance(qps, int) or qps < 1:
            raise ValueError(f"qps must be a positive integer, not {qps!r}")
        if not isinstance(window, int) or window < SACK_BITS or window & (window - 1) \
                or window > 1 << 16:
            raise ValueError(f"window must be a power of two from {SACK_BITS} to 65536, "
                             f"not {window!r}")
        self._qps, self._window = qps, window
        req = data.StructLayout({"qp": range(qps), "psn": PSN_BITS})
        super().__init__({
            "init": In(stream.Signature(req)),
            "arrive": In(stream.Signature(data.StructLayout(
                {"qp": range(qps), "psn": PSN_BITS, "peek": 1}))),
            "result": Out(stream.Signature(result_layout(qps))),
        })

    def elaborate(self, platform):
        m = Module()
        W = self._window
        at = (W - 1).bit_length()
        state = data.StructLayout({"base": PSN_BITS, "bits": W})
        m.submodules.mem = mem = Memory(shape=state, depth=self._qps, init=[])
        rd = mem.read_port(transparent_for=())
        wr = mem.write_port()
        # Each QP's base again, read at once: the arrival's distance from it is taken as the
        # arrival is, so that JUDGE starts from a register, not from a subtraction.
        m.submodules.bases = bases = Memory(shape=PSN_BITS, depth=self._qps, init=[])
        base_rd = bases.read_port(domain="comb")
        base_wr = bases.write_port()
        m.d.comb += [base_wr.en.eq(wr.en), base_wr.addr.eq(wr.addr),
                     base_wr.data.eq(wr.data.base), base_rd.addr.eq(self.arrive.payload.qp)]

        qp = Signal(range(self._qps))
        psn = Signal(PSN_BITS)
        peek = Signal()
        cur = rd.data
        diff = Signal(PSN_BITS)                 # psn - base
        inside = Signal()                       # diff < W
        mark = Signal(W)                        # this PSN's bit, if it is inside and recorded
        arrival_diff = Signal(PSN_BITS)
        m.d.comb += arrival_diff.eq(self.arrive.payload.psn - base_rd.data)
        behind = diff[PSN_BITS - 1]             # more than 2^23 back: an old PSN
        # Found in RUN from the QP's row, and kept for JUDGE, which reads the row again.
        seen = Signal()                         # this PSN has arrived before
        run = Signal(range(W + 1))              # arrivals in a row from bit 0: the first zero

        # The bitmap with this PSN recorded, then the run of arrivals from bit 0 taken off.
        bits = Signal(W)
        m.d.comb += bits.eq(cur.bits | mark)
        gap, first_gap = first_set(m, ~bits, name="gap")
        new_base = Signal(PSN_BITS)
        new_bits = Signal(W)
        m.d.comb += [new_base.eq(cur.base + run), new_bits.eq(bits >> run)]

        # The SACK's view: the aligned 64-PSN block holding this PSN, counted from the new base
        # (psn - new_base is diff - run).
        rel = Signal(PSN_BITS)
        m.d.comb += rel.eq(diff - run)
        blocks = W // SACK_BITS
        block = Signal(range(max(blocks, 2)))     # (a window of one block: no zero-width value)
        with m.If(~rel[PSN_BITS - 1] & (rel < W) & ~peek):
            m.d.comb += block.eq(rel >> (SACK_BITS - 1).bit_length())
        r = self.result.payload

        with m.FSM():
            with m.State("IDLE"):
                # Management first: a QP being set up must not see a stale bitmap.
                with m.If(self.init.valid):
                    m.d.comb += [self.init.ready.eq(1), wr.en.eq(1),
                                 wr.addr.eq(self.init.payload.qp),
                                 wr.data.base.eq(self.init.payload.psn), wr.data.bits.eq(0)]
                with m.Elif(self.arrive.valid):
                    m.d.comb += [self.arrive.ready.eq(1), rd.addr.eq(self.arrive.payload.qp)]
                    a = self.arrive.payload
                    near = arrival_diff < W
                    m.d.sync += [qp.eq(a.qp), psn.eq(a.psn), peek.eq(a.peek),
                                 diff.eq(arrival_diff), inside.eq(near),
                                 mark.eq(Mux(near & ~a.peek, 1 << arrival_diff[:at], 0))]
                    m.next = "RUN"
            with m.State("RUN"):
                # (the row is read again for JUDGE: nothing writes it in between)
                m.d.comb += rd.addr.eq(qp)
                m.d.sync += [seen.eq((cur.bits & mark).any()), run.eq(Mux(gap, first_gap, W))]
                m.next = "JUDGE"
            with m.State("JUDGE"):
                m.d.comb += [rd.addr.eq(qp), self.result.valid.eq(1), r.qp.eq(qp), r.psn.eq(psn),
                             r.cack.eq(new_base), r.sack_offset.eq(block * SACK_BITS),
                             r.sack_bitmap.eq(new_bits.word_select(block, SACK_BITS))]
                with m.If(peek):
                    m.d.comb += r.status.eq(PsnStatus.PEEK)
                with m.Elif(behind | (inside & seen)):
                    m.d.comb += r.status.eq(PsnStatus.DUPLICATE)
                with m.Elif(inside):
                    m.d.comb += [r.status.eq(PsnStatus.NEW), r.ooo.eq(diff != 0)]
                with m.Else():
                    m.d.comb += r.status.eq(PsnStatus.BEYOND)
                with m.If(self.result.ready):
                    with m.If(inside & ~seen & ~peek):
                        m.d.comb += [wr.en.eq(1), wr.addr.eq(qp),
                                     wr.data.base.eq(new_base), wr.data.bits.eq(new_bits)]
                    m.next = "IDLE"
        return m
