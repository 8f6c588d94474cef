"""Reference model of the sender's reliability engine (hdl/retransmit_tracker.py): given what
was sent and the SACKs, NACKs and timeouts that follow, which packets go again, which work
requests complete, which EVs change state, and what every ``rel.*`` counter reads."""

from __future__ import annotations

from dataclasses import dataclass, field

from mrcnic import wire
from mrcnic.hdl.retransmit_tracker import RelMode
from mrcnic.hdl.spray_scheduler import EvState
from mrcnic.regmap import REL_COUNTERS

PSN_MOD = 1 << 24


@dataclass
class Sent:
    psn: int
    ev: int
    index: int
    last: bool
    wr_id: int


@dataclass
class Outcome:
    """What one piece of feedback (or a timeout) makes the sender do, in order."""
    ev_updates: list = field(default_factory=list)     # (qp, index, EvState)
    completions: list = field(default_factory=list)    # wr_id, in order
    retransmits: list = field(default_factory=list)    # (qp, psn, avoided index)


@dataclass
class _Qp:
    una: int = 0
    nxt: int = 0
    high: int = 0
    out: set = field(default_factory=set)
    pend: set = field(default_factory=set)
    records: dict = field(default_factory=dict)   # slot (psn % window) -> Sent


class Sender:
    def __init__(self, qps: int, window: int, reorder: int = 8,
                 mode: RelMode = RelMode.SELECTIVE):
        self.qps, self.window, self.reorder, self.mode = qps, window, reorder, RelMode(mode)
        self.q = [_Qp() for _ in range(qps)]
        self.counters = dict.fromkeys(REL_COUNTERS, 0)

    def _d(self, a, b):
        return (a - b) % PSN_MOD

    def init(self, qp: int, psn: int):
        self.q[qp] = _Qp(una=psn, nxt=psn, high=psn)

    def sent(self, qp: int, psn: int, ev: int, index: int, last: bool, wr_id: int, tries: int):
        """A packet left on EV ``ev`` (entry ``index`` of the QP's profile)."""
        s = self.q[qp]
        live = self._d(psn, s.una) < self._d(s.nxt, s.una)
        if tries == 0:
            s.nxt = (psn + 1) % PSN_MOD
            s.out.add(psn)
            s.pend.discard(psn)
        elif not live:
            return
        s.records[psn % self.window] = Sent(psn, ev, index, last, wr_id)

    def _record(self, s, psn):
        r = s.records.get(psn % self.window)
        return r if r is not None and r.psn == psn else None

    def _scan(self, qp, s, p, cause, o):
        gbn = self.mode is RelMode.GO_BACK_N
        while True:
            pd, inflight = self._d(p, s.una), self._d(s.nxt, s.una)
            hd = self._d(s.high, s.una)
            hd = 0 if hd > inflight else hd
            if not (pd < inflight if gbn else pd + self.reorder < hd):
                return
            if p not in s.pend and (gbn or p in s.out):
                self._retransmit(qp, s, p, cause, o)
            p = (p + 1) % PSN_MOD

    def _retransmit(self, qp, s, p, cause, o):
        o.retransmits.append((qp, p, self._record(s, p).index))
        s.pend.add(p)
        self.counters[f"rtx_{cause}"] += 1

    def sack(self, qp, cack, sack_offset, bitmap, trig, entropy, m) -> Outcome:
        o = Outcome()
        if qp >= self.qps:
            self.counters["invalid"] += 1
            return o
        if self.mode is RelMode.OFF:
            self.counters["other"] += 1
            return o
        s = self.q[qp]
        inflight, dc = self._d(s.nxt, s.una), self._d(cack, s.una)
        if dc > inflight:
            self.counters["stale" if dc >= PSN_MOD // 2 else "invalid"] += 1
            return o
        top_bit = bitmap.bit_length() - 1
        if bitmap and sack_offset + top_bit >= self._d(s.nxt, cack):
            self.counters["invalid"] += 1
            return o
        if m in (wire.SackMark.SKIP_ONCE, wire.SackMark.ALWAYS_SKIP):
            r = self._record(s, trig)
            if r is not None and r.ev == entropy:
                bad = m == wire.SackMark.ALWAYS_SKIP
                o.ev_updates.append((qp, r.index, EvState.ASSUMED_BAD if bad else EvState.SKIP))
                self.counters["ev_bad" if bad else "ev_skip"] += 1
        base = (cack + sack_offset) % PSN_MOD
        for i in range(64):
            if bitmap >> i & 1:
                s.out.discard((base + i) % PSN_MOD)
        hd = self._d(s.high, s.una)
        hd = 0 if hd > inflight else hd
        top = (base + top_bit + 1) % PSN_MOD if bitmap else cack
        if self._d(top, s.una) > hd:
            s.high = top
        while s.una != cack:
            r = self._record(s, s.una)
            if r is not None and r.last:
                o.completions.append(r.wr_id)
                self.counters["completions"] += 1
            self.counters["acked"] += 1
            s.out.discard(s.una)
            s.pend.discard(s.una)
            s.una = (s.una + 1) % PSN_MOD
        hd = self._d(s.high, s.una)
        hd = 0 if hd > self._d(s.nxt, s.una) else hd
        if self.mode is RelMode.GO_BACK_N and hd <= self.reorder:
            return o
        self._scan(qp, s, s.una, "sack", o)
        return o

    def nack(self, qp, psn, reason, entropy) -> Outcome:
        o = Outcome()
        if qp >= self.qps:
            self.counters["invalid"] += 1
            return o
        if self.mode is RelMode.OFF or reason not in (wire.NackReason.TRIMMED,
                                                      wire.NackReason.TRIMMED_LASTHOP):
            self.counters["other"] += 1
            return o
        s = self.q[qp]
        dn, inflight = self._d(psn, s.una), self._d(s.nxt, s.una)
        if dn >= inflight:
            self.counters["stale" if dn >= PSN_MOD // 2 else "invalid"] += 1
            return o
        if psn not in s.out:
            self.counters["stale"] += 1
            return o
        r = self._record(s, psn)
        if reason == wire.NackReason.TRIMMED and r.ev == entropy:
            o.ev_updates.append((qp, r.index, EvState.SKIP))
            self.counters["ev_skip"] += 1
        self._retransmit(qp, s, psn, "trim", o)
        if self.mode is RelMode.GO_BACK_N:
            self._scan(qp, s, (psn + 1) % PSN_MOD, "trim", o)
        return o

    def timeout(self, qp) -> Outcome:
        """The QP's RTO passed with no progress (and its oldest outstanding packet has been out
        that long)."""
        o = Outcome()
        s = self.q[qp]
        s.pend.clear()
        p = s.una
        while p != s.nxt and not (self.mode is RelMode.GO_BACK_N or p in s.out):
            p = (p + 1) % PSN_MOD
        if p == s.nxt:
            return o
        r = self._record(s, p)
        o.ev_updates.append((qp, r.index, EvState.ASSUMED_BAD))
        self.counters["ev_bad"] += 1
        self._retransmit(qp, s, p, "timeout", o)
        if self.mode is RelMode.GO_BACK_N:
            self._scan(qp, s, (p + 1) % PSN_MOD, "timeout", o)
        return o

    def outstanding(self, qp) -> list[int]:
        s = self.q[qp]
        return sorted(s.out, key=lambda p: self._d(p, s.una))
