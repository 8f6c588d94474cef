"""Feedback check: whether a SACK or a NACK speaks of packets its QP has in flight."""

from amaranth import Module, Mux, Signal
from amaranth.lib import enum, wiring
from amaranth.lib.wiring import In, Out

from .reorder_tracker import PSN_BITS, SACK_BITS

__all__ = ["Verdict", "FeedbackCheck"]


class Verdict(enum.Enum, shape=2):
    OK = 0
    STALE = 1      # about PSNs already acknowledged: late, harmless, counted
    INVALID = 2    # about PSNs never sent, or self-contradictory: counted, ignored


class FeedbackCheck(wiring.Component):
    """For the QP's ``una`` and ``nxt``, and its PSNs in flight (``inflight``, ``nxt - una``,
    which the caller has in a register):

    * a SACK (cumulative PSN ``cack``, a bitmap at ``offset`` past it: its bit 0 ``bit0``, its
      highest set bit ``top`` if it has any, ``any``) is STALE if ``cack`` is behind ``una``,
      INVALID if it is past ``nxt``, if its bitmap claims a PSN at or past ``nxt``, or if it
      says ``cack`` both missing and arrived (offset 0, bit 0 set, ``cack`` not ``nxt``); else OK, and
      ``base`` is the PSN its bitmap starts at and ``high`` one past the highest PSN it says
      arrived (``cack`` with an empty bitmap);
    * a NACK for PSN ``psn`` is STALE if ``psn`` is behind ``una`` or SACKed already
      (``outstanding`` 0), INVALID if it is at or past ``nxt``; else OK.

    Combinational.

    Attributes
    ----------
    una, nxt, inflight : In(24)
    cack : In(24); offset : In(16); bit0, any : In(1); top : In(range(64))
    sack : Out(Verdict); base, high : Out(24)
    psn : In(24); outstanding : In(1); nack : Out(Verdict)
    """

    def __init__(self):
        super().__init__({
            "una": In(PSN_BITS), "nxt": In(PSN_BITS), "inflight": In(PSN_BITS),
            "cack": In(PSN_BITS), "offset": In(16), "bit0": In(1), "any": In(1),
            "top": In(range(SACK_BITS)),
            "sack": Out(Verdict), "base": Out(PSN_BITS), "high": Out(PSN_BITS),
            "psn": In(PSN_BITS), "outstanding": In(1), "nack": Out(Verdict),
        })

    def elaborate(self, platform):
        m = Module()
        dc, span = Signal(PSN_BITS), Signal(PSN_BITS)     # cack past una; nxt past cack
        m.d.comb += [dc.eq(self.cack - self.una), span.eq(self.nxt - self.cack)]
        m.d.comb += [self.base.eq(self.cack + self.offset),
                     self.high.eq(Mux(self.any, self.base + self.top + 1, self.cack))]
        with m.If(dc > self.inflight):
            m.d.comb += self.sack.eq(Mux(dc[-1], Verdict.STALE, Verdict.INVALID))
        with m.Elif(self.any & ((self.offset + self.top) >= span)):
            m.d.comb += self.sack.eq(Verdict.INVALID)
        with m.Elif((self.offset == 0) & self.bit0 & (self.cack != self.nxt)):
            m.d.comb += self.sack.eq(Verdict.INVALID)
        with m.Else():
            m.d.comb += self.sack.eq(Verdict.OK)

        dn = Signal(PSN_BITS)
        m.d.comb += dn.eq(self.psn - self.una)
        with m.If(dn >= self.inflight):
            m.d.comb += self.nack.eq(Mux(dn[-1], Verdict.STALE, Verdict.INVALID))
        with m.Elif(~self.outstanding):
            m.d.comb += self.nack.eq(Verdict.STALE)
        with m.Else():
            m.d.comb += self.nack.eq(Verdict.OK)
        return m
