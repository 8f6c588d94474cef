"""Reference model of the sender's reliability engine (hdl/retransmit_tracker.py): given what
was sent and the SACKs, NACKs and timeouts that follow, which packets go again, which work
requests complete, which EVs change state, and what every ``rel.*`` counter reads."""

from __future__ import annotations

from dataclasses import dataclass, field

from mrcnic import wire
from mrcnic.evmap import EvLayout
from mrcnic.hdl.congestion_window import receiver_share
from mrcnic.hdl.hole_judge import RACK_FRESH
from mrcnic.hdl.retransmit_tracker import PROBES_KEPT, RelMode
from mrcnic.hdl.spray_scheduler import EvState
from mrcnic.regmap import REL_COUNTERS

PSN_MOD = 1 << 24
TIME_MOD = 1 << wire.TIME_BITS     # the TX timestamp counter wraps


def retransmitted(counters: dict) -> int:
    """Packets a NIC sent again, for whatever reason, from its ``rel.*`` counters."""
    return counters["rtx_sack"] + counters["rtx_trim"] + counters["rtx_timeout"]


def smoothed(srtt: int | None, rttvar: int | None, rtt: int) -> tuple[int, int]:
    """The RTT estimates after sample ``rtt`` (RFC 6298's, gains as shifts; ``srtt`` None
    before the first sample), in the 16-bit arithmetic of the timestamps."""
    if srtt is None:
        return rtt, rtt >> 1
    err = rtt - srtt
    return (srtt + (err >> 3)) % TIME_MOD, (rttvar + ((abs(err) - rttvar) >> 2)) % TIME_MOD


def sack_verdict(una: int, nxt: int, cack: int, offset: int, bitmap: int) -> str | None:
    """What is wrong with a SACK for a QP with ``una`` .. ``nxt`` in flight: "stale" (its
    cumulative PSN is behind una), "invalid" (past nxt, a bitmap claiming a PSN never sent, or
    cack both missing and arrived), or None."""
    inflight, dc = (nxt - una) % PSN_MOD, (cack - una) % PSN_MOD
    if dc > inflight:
        return "stale" if dc >= PSN_MOD // 2 else "invalid"
    if bitmap and offset + bitmap.bit_length() - 1 >= (nxt - cack) % PSN_MOD:
        return "invalid"
    if offset == 0 and bitmap & 1:
        return "invalid"
    return None


def nack_verdict(una: int, nxt: int, psn: int, outstanding: bool) -> str | None:
    """What is wrong with a NACK for ``psn``: "stale" (behind una, or SACKed since),
    "invalid" (at or past nxt), or None."""
    dn, inflight = (psn - una) % PSN_MOD, (nxt - una) % PSN_MOD
    if dn >= inflight:
        return "stale" if dn >= PSN_MOD // 2 else "invalid"
    return None if outstanding else "stale"


def rack_timed(reo_wnd: int, rack: int | None, time: int | None, now: int | None) -> bool:
    """RACK's rule: a packet sent at ``time`` left more than ``reo_wnd`` before ``rack``, the
    send time of the latest-sent packet known to have arrived, and that arrival is less than
    RACK_FRESH cycles before ``now`` (None: taken as recent)."""
    if not reo_wnd or rack is None or time is None:
        return False
    if now is not None and (now - rack) % TIME_MOD >= RACK_FRESH:
        return False
    early = (rack - time) % TIME_MOD
    return reo_wnd < early < TIME_MOD // 2


def blame(path, trimmed: bool, marked: set, suspect: set) -> tuple[EvState, bool, bool, bool]:
    """What a SACK hole on ``path`` does, given the QP's marked and suspect paths and whether
    the send was NACKed as trimmed: (its entry's new state, the path retired, the path made
    suspect (and held), the path's mark used up)."""
    if trimmed or path in marked:        # a queue's doing, not the path's
        return EvState.SKIP, False, False, not trimmed
    bad = path in suspect
    return (EvState.ASSUMED_BAD if bad else EvState.SKIP), bad, not bad, False


@dataclass
class Sent:
    psn: int
    ev: int
    index: int
    last: bool
    wr_id: int
    length: int = 0
    time: int | None = None       # the send time (the TX timestamp counter), if known
    trimmed: bool = False         # a NACK said a queue trimmed this send


@dataclass
class Congestion:
    """NSCC's parameters (the rel.* registers, with their reset values)."""
    target_rtt: int = 4096
    cwnd_init: int = 65536
    cwnd_min: int = 4096
    cwnd_max: int = 1 << 20
    fair: int = 512
    gain: int = 16
    md_shift: int = 3
    rcv_wnd: int = 0

    def next(self, cwnd: int, ecn: bool, rtt: int, pen: int = 0,
             may_cut: bool = True) -> tuple[int, bool]:
        """The window after a SACK, and whether it took the multiplicative decrease: NSCC's four
        cases (the decrease only if ``may_cut``), then no more than the receiver's share its
        ``rcv_cwnd_pen`` ``pen`` gives, when the receiver is shared (``pen`` 2 or more)."""
        below = rtt < self.target_rtt
        cut = ecn and not below and may_cut
        if not ecn and below:
            cwnd += (self.target_rtt - rtt) * self.gain >> 4      # proportional increase
        elif not ecn:
            cwnd += self.fair                                      # fair increase
        elif cut:
            cwnd -= cwnd >> self.md_shift                          # multiplicative decrease
        top = self.cwnd_max
        if self.rcv_wnd and pen >= 2:
            top = min(top, receiver_share(self.rcv_wnd, pen))
        return max(min(cwnd, top), self.cwnd_min), cut

    def trimmed(self, cwnd: int, length: int) -> int:
        """The window after a NACK for a trimmed packet of ``length`` payload bytes: it gives
        them up (NSCC's answer to a trim at the last hop)."""
        return max(cwnd - length, self.cwnd_min)


@dataclass
class Outcome:
    """What one piece of feedback (or a timeout) makes the sender do, in order."""
    ev_updates: list = field(default_factory=list)     # (qp, index, EvState)
    paths: list = field(default_factory=list)          # (qp, index): that entry's whole path
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
    cwnd: int = 0
    flight: int = 0                               # payload bytes neither cumulatively acked nor SACKed
    srtt: int | None = None
    rttvar: int = 0
    hold: int | None = None   # held since a first hole: until high is ``reorder`` past this
    hole: tuple | None = None  # that hole's (entry index, path), until a second retires it
    cut: int | None = None    # the first PSN sent after the last decrease, until SACKed past
    rack: int | None = None   # the send time of the latest-sent packet known to have arrived


@dataclass
class _Probes:
    """A QP's latest PROBES_KEPT probes, each (index, EV) or None once answered, and the slot
    the next one takes."""
    slots: list = field(default_factory=lambda: [None] * PROBES_KEPT)
    at: int = 0


class Sender:
    def __init__(self, qps: int, window: int, reorder: int = 8,
                 mode: RelMode = RelMode.SELECTIVE, cc: Congestion | None = None, planes: int = 2,
                 spines: int = 4, reo_wnd: int = 0, layout=None, ev_health: bool = True):
        self.qps, self.window, self.reorder, self.mode = qps, window, reorder, RelMode(mode)
        self.ev_health = ev_health     # rel.ev_health: only then is a trim news of a path
        self.reo_wnd = reo_wnd         # the time rule's window, in cycles (0: off)
        self.planes = planes
        # (``layout``: anything whose ``path(ev)`` names an EV's path; the scale model's
        # hashed fabrics give every EV a path of its own)
        self.layout = layout or EvLayout(planes, spines)
        self.cc = cc or Congestion()
        self.q = [_Qp(cwnd=self.cc.cwnd_init) for _ in range(qps)]
        self.counters = dict.fromkeys(REL_COUNTERS, 0)
        self.probes = {}                          # qp -> _Probes
        self.peer = [(1 << planes) - 1] * qps     # planes each QP's peer can receive on
        self.suspect = [set() for _ in range(qps)]   # paths that lost a packet, none since
        self.marked = [set() for _ in range(qps)]    # paths whose latest arrival had ECN

    def _d(self, a, b):
        return (a - b) % PSN_MOD

    def init(self, qp: int, psn: int):
        self.q[qp] = _Qp(una=psn, nxt=psn, high=psn, cwnd=self.cc.cwnd_init)
        self.peer[qp] = (1 << self.planes) - 1
        self.suspect[qp] = set()
        self.marked[qp] = set()

    def endpoint(self, qp: int, op: int, mask: int = 0):
        """An ERTH for QP ``qp``: a port status sets the planes its peer can receive on."""
        mask &= (1 << self.planes) - 1
        if qp >= self.qps or (op == wire.EndpointOp.PORT_STATUS and not mask):
            self.counters["invalid"] += 1
        elif op == wire.EndpointOp.PORT_STATUS:
            self.peer[qp] = mask
            self.counters["status_received"] += 1
        else:
            self.counters["other"] += 1

    def status_sent(self):
        """This NIC told a QP's peer its port status."""
        self.counters["status_sent"] += 1

    def planes_for(self, qp: int, port_ready: int) -> int:
        """The planes QP ``qp`` may send on: ready here and up at its peer, unless none is."""
        both = port_ready & self.peer[qp]
        return both or port_ready

    def sample(self, qp: int, trig: int, ecn: bool, rtt: int, pen: int = 0):
        """An accepted SACK's RTT sample: the smoothed RTT as TCP keeps it, and NSCC's window
        (``trig``: the PSN that triggered it; ``pen``: its rcv_cwnd_pen). The window is cut at
        most once a round trip: not for a packet sent before the last cut."""
        s = self.q[qp]
        after = s.cut is not None and self._d(s.nxt, trig) <= self._d(s.nxt, s.cut)
        may_cut = s.cut is None or after
        s.srtt, s.rttvar = smoothed(s.srtt, s.rttvar, rtt)
        s.cwnd, cut = self.cc.next(s.cwnd, ecn, rtt, pen, may_cut)
        if cut:
            s.cut = s.nxt
        elif after:
            s.cut = None

    def can_send(self, qp: int, psn: int) -> bool:
        """Whether QP ``qp``'s next new packet, PSN ``psn``, may leave now."""
        s = self.q[qp]
        return self._d(psn, s.una) < self.window and (self.mode is RelMode.OFF
                                                     or s.flight < s.cwnd)

    def sent(self, qp: int, psn: int, ev: int, index: int, last: bool, wr_id: int, tries: int,
             length: int, time: int | None = None):
        """A packet with ``length`` payload bytes left on EV ``ev`` (entry ``index`` of the
        QP's profile) at ``time`` (the TX timestamp counter; None: the time rule passes it
        over)."""
        s = self.q[qp]
        live = self._d(psn, s.una) < self._d(s.nxt, s.una)
        if tries == 0:
            if psn != s.nxt:
                return            # queued before the QP restarted: not recorded
            s.nxt = (psn + 1) % PSN_MOD
            s.out.add(psn)
            s.pend.discard(psn)
            s.flight += length
        elif not live:
            return
        s.records[psn % self.window] = Sent(psn, ev, index, last, wr_id, length, time)

    def _record(self, s, psn):
        r = s.records.get(psn % self.window)
        return r if r is not None and r.psn == psn else None

    def _timed(self, s, r, now) -> bool:
        """RACK's rule (:func:`rack_timed`) for record ``r``."""
        return r is not None and rack_timed(self.reo_wnd, s.rack, r.time, now)

    def _scan(self, qp, s, p, cause, o, now=None):
        gbn = self.mode is RelMode.GO_BACK_N
        timed_on = bool(self.reo_wnd) and s.rack is not None
        while True:
            pd, inflight = self._d(p, s.una), self._d(s.nxt, s.una)
            hd = self._d(s.high, s.una)
            hd = 0 if hd > inflight else hd
            counted = pd + self.reorder < hd
            if not (pd < inflight if gbn else counted or (timed_on and pd < inflight)):
                return
            if p not in s.pend and gbn:
                self._retransmit(qp, s, p, cause, o)
            elif p not in s.pend and p in s.out:
                if counted or self._timed(s, self._record(s, p), now):
                    self._blame(qp, s, p, o)
                    self._retransmit(qp, s, p, cause, o)
                elif pd >= hd:
                    return        # above the highest arrived: first sends leave in PSN order
            p = (p + 1) % PSN_MOD

    def _blame(self, qp, s, p, o):
        """A SACK hole blames its path: the entry SKIP and the path suspect (and held), or, if
        the path lost one before and nothing arrived on it since, the whole path ASSUMED_BAD
        (it stays suspect). A hole of a send NACKed as trimmed, or the first on a path whose
        latest arrival carried ECN, only sets its entry SKIP: a trimmed packet was lost to a
        full queue, not to its path, and one held in a long queue is overtaken as a lost one
        is; but a link that dies under load has its last arrival marked, so the mark excuses
        one hole and only another marked arrival renews it."""
        r = self._record(s, p)
        if r is None:
            return
        path = self.layout.path(r.ev)
        state, bad, suspect, unmark = blame(path, r.trimmed, self.marked[qp], self.suspect[qp])
        o.ev_updates.append((qp, r.index, state))
        self.counters["ev_bad" if bad else "ev_skip"] += 1
        if unmark:
            self.marked[qp].discard(path)        # (excused once: an ECN arrival renews it)
        if suspect:
            self.suspect[qp].add(path)
            s.hold, s.hole = s.nxt, (r.index, path)
        if bad:
            o.paths.append((qp, r.index))
            if s.hole is not None and s.hole[1] == path:
                s.hole = None

    def _hold_check(self, qp, s, o):
        """A hold ends once the highest PSN known to have arrived is ``reorder`` past every
        packet sent by then; if nothing arrived on its hole's path meanwhile, with that path
        ASSUMED_BAD."""
        if s.hold is None or not self.reorder <= self._d(s.high, s.hold) < PSN_MOD // 2:
            return
        s.hold = None
        if s.hole is None:
            return
        index, path = s.hole
        if path in self.suspect[qp]:
            o.ev_updates.append((qp, index, EvState.ASSUMED_BAD))
            o.paths.append((qp, index))
            self.counters["ev_bad"] += 1

    def held(self, qp: int) -> set:
        """The paths QP ``qp``'s new packets keep off now (the tracker's ``hold``): its suspect
        paths, from a first hole until the hold ends."""
        s = self.q[qp]
        return set() if s.hold is None else set(self.suspect[qp])

    def _retransmit(self, qp, s, p, cause, o):
        o.retransmits.append((qp, p, self._record(s, p).index))
        s.pend.add(p)
        self.counters[f"rtx_{cause}"] += 1

    def probed(self, qp: int, index: int, ev: int):
        """A probe left on EV ``ev``, entry ``index`` of the QP's profile."""
        kept = self.probes.setdefault(qp, _Probes())
        kept.slots[kept.at] = (index, ev)
        kept.at = (kept.at + 1) % PROBES_KEPT
        self.counters["probes_sent"] += 1

    def sack(self, qp, cack, sack_offset, bitmap, trig, entropy, m, rtt=None, pr=0,
             pen=0, ts=None, now=None) -> Outcome:
        """A SACK; ``rtt``, the sample the NIC took from it (rel.rtt), moves the window, and its
        ``rcv_cwnd_pen`` ``pen`` may hold it; ``ts``, the send time it echoes, is the latest
        known to have arrived if it is later than the last (not for a probe's answer); ``now``,
        the NIC's clock as it takes the SACK (16 bits), if known."""
        o = Outcome()
        if qp >= self.qps:
            self.counters["invalid"] += 1
            return o
        if self.mode is RelMode.OFF:
            self.counters["other"] += 1
            return o
        s = self.q[qp]
        slots = self.probes[qp].slots if qp in self.probes else []
        hit = next((k for k, pb in enumerate(slots) if pb and pb[1] == entropy), None)
        if pr and hit is not None and m != wire.SackMark.ALWAYS_SKIP:
            o.ev_updates.append((qp, slots[hit][0], EvState.GOOD))
            self.counters["probes_answered"] += 1
            self.suspect[qp].discard(self.layout.path(entropy))     # the path works
            slots[hit] = None
        wrong = sack_verdict(s.una, s.nxt, cack, sack_offset, bitmap)
        if wrong:
            self.counters[wrong] += 1
            return o
        inflight, top_bit = self._d(s.nxt, s.una), bitmap.bit_length() - 1
        if rtt is not None:
            self.sample(qp, trig, m == wire.SackMark.SKIP_ONCE, rtt, pen)
        if ts is not None and not pr and (
                s.rack is None or (ts - s.rack) % TIME_MOD < TIME_MOD // 2):
            s.rack = ts
        r = self._record(s, trig)
        if r is not None and r.ev == entropy:
            path = self.layout.path(r.ev)
            self.suspect[qp].discard(path)     # one arrived on this path
            if m == wire.SackMark.SKIP_ONCE:   # its queue is long: a hole there is no blame
                self.marked[qp].add(path)
            else:
                self.marked[qp].discard(path)
        if m in (wire.SackMark.SKIP_ONCE, wire.SackMark.ALWAYS_SKIP):
            if r is not None and r.ev == entropy:
                bad = m == wire.SackMark.ALWAYS_SKIP
                o.ev_updates.append((qp, r.index, EvState.ASSUMED_BAD if bad else EvState.SKIP))
                self.counters["ev_bad" if bad else "ev_skip"] += 1
        base = (cack + sack_offset) % PSN_MOD
        for i in range(64):
            psn = (base + i) % PSN_MOD
            if bitmap >> i & 1 and psn in s.out:
                s.out.discard(psn)
                got = self._record(s, psn)
                s.flight -= got.length if got is not None else 0      # SACKed: out of flight
        hd = self._d(s.high, s.una)
        hd = 0 if hd > inflight else hd
        top = (base + top_bit + 1) % PSN_MOD if bitmap else cack
        if self._d(top, s.una) > hd:
            s.high = top
        self._hold_check(qp, s, o)
        while s.una != cack:
            r = self._record(s, s.una)
            if r is not None and r.last:
                o.completions.append(r.wr_id)
                self.counters["completions"] += 1
            self.counters["acked"] += 1
            if s.una in s.out:          # (a SACKed one left the flight then)
                s.flight -= r.length if r is not None else 0
            s.out.discard(s.una)
            s.pend.discard(s.una)
            s.una = (s.una + 1) % PSN_MOD
        hd = self._d(s.high, s.una)
        hd = 0 if hd > self._d(s.nxt, s.una) else hd
        if self.mode is RelMode.GO_BACK_N and hd <= self.reorder:
            return o
        self._scan(qp, s, s.una, "sack", o, now)
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
        wrong = nack_verdict(s.una, s.nxt, psn, psn in s.out)
        if wrong:
            self.counters[wrong] += 1
            return o
        r = self._record(s, psn)
        # The receiver's port, or (no EV health to skip the path) the only news there is
        if reason == wire.NackReason.TRIMMED_LASTHOP or not self.ev_health:
            s.cwnd = self.cc.trimmed(s.cwnd, r.length)
        r.trimmed = True
        # (without EV health the NIC moves no EV, and counts none moved)
        blame = reason == wire.NackReason.TRIMMED and r.ev == entropy and self.ev_health
        # (too few packets after it for a SACK hole to show it: it would wait for a timeout)
        revealed = self._d(s.nxt, psn) > self.reorder
        if self.mode is RelMode.GO_BACK_N or s.flight - r.length < s.cwnd or not revealed:
            self._lost(qp, s, psn, EvState.SKIP if blame else None, "trim", o)
            return o
        # No room in the window: it waits to be a SACK hole. A retransmission trimmed too
        # is a hole again (a scan passes over the ones already resent).
        s.pend.discard(psn)
        if blame:
            o.ev_updates.append((qp, r.index, EvState.SKIP))
            self.counters["ev_skip"] += 1
        return o

    def rto(self, qp: int, rto_min: int, rto_max: int) -> int:
        """QP ``qp``'s RTO in cycles, as the tracker's timer takes it (hdl/rto_timer.py)."""
        s = self.q[qp]
        if s.srtt is None:
            return rto_max
        return min(max(s.srtt + 4 * s.rttvar, rto_min), rto_max)

    def oldest(self, qp: int) -> int:
        """The PSN a timeout of QP ``qp`` looks at: its oldest outstanding packet (with
        GO_BACK_N, ``una``), or ``nxt`` if it has none."""
        s = self.q[qp]
        p = s.una
        while p != s.nxt and not (self.mode is RelMode.GO_BACK_N or p in s.out):
            p = (p + 1) % PSN_MOD
        return p

    def expire(self, qp: int, now: int, rto: int) -> tuple[Outcome, int | None]:
        """QP ``qp``'s timer fired at ``now`` (the TX timestamp counter) with RTO ``rto``,
        as the tracker takes it: what was resent may be resent again; the oldest outstanding
        packet, if it has been out ``rto`` itself, is lost (:meth:`timeout`); if it went out
        again lately, nothing is sent. Returns the outcome and the time the timer runs from
        then: that packet's send time, or None for ``now``."""
        s = self.q[qp]
        p = self.oldest(qp)
        r = self._record(s, p) if p != s.nxt else None
        if r is not None and r.time is not None and (now - r.time) % TIME_MOD < rto:
            s.pend.clear()
            return Outcome(), r.time
        return self.timeout(qp), None

    def timeout(self, qp) -> Outcome:
        """The QP's RTO passed with no progress (and its oldest outstanding packet has been out
        that long)."""
        o = Outcome()
        s = self.q[qp]
        s.pend.clear()
        p = self.oldest(qp)
        if p == s.nxt:
            return o
        self._lost(qp, s, p, EvState.ASSUMED_BAD, "timeout", o)
        return o

    def _lost(self, qp, s, p, state, cause, o):
        """Packet ``p`` is lost: its EV goes to ``state`` (unless None), it is sent again, and
        with GO_BACK_N everything after it too."""
        if state is not None:
            o.ev_updates.append((qp, self._record(s, p).index, state))
            self.counters["ev_bad" if state is EvState.ASSUMED_BAD else "ev_skip"] += 1
        self._retransmit(qp, s, p, cause, o)
        if self.mode is RelMode.GO_BACK_N:
            self._scan(qp, s, (p + 1) % PSN_MOD, cause, o)
