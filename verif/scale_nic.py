"""The scale model's NIC: a behavioural MRC NIC grown from the reference models, fast enough
to run hundreds of them.

Its sender's every reliability decision (which packets go again, which EVs change state,
which writes complete, NSCC's window) is the reference model of the gateware's reliability
engine, ``verif/rel_model.py``'s :class:`Sender`, fed the SACKs, NACKs and timeouts the model
network brings back. Its EV choice is :class:`~mrcnic.verif.scale_spray.Spray`, its receiver
the rules of ``hdl/ack_generator.py`` as ``verif/rx_model.py`` states them (a SACK every
``coalesce`` packets, at once for an ECN mark, a message's last packet or a duplicate, after
``ack_timeout`` otherwise; a NACK for a trimmed packet), with the reorder tracker's window
kept as a bitmask. What it leaves out: data (only sizes move), the MAC, and the pipelines,
which are one delay (``nic_delay_ns``) on everything a NIC takes in.

Times: the network's in ns; the NIC's own (send stamps, RTTs, RTO, NSCC) in cycles of
``clock_ns``, 16 bits wide, as the gateware counts them.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field

from mrcnic import regmap, wire
from mrcnic.enums import EvState
from mrcnic.hdl.reorder_tracker import SACK_BITS
from mrcnic.transports import Transport
from mrcnic.verif.rel_model import PSN_MOD, TIME_MOD, Congestion, Sender, retransmitted
from mrcnic.verif.scale_net import ACK, DATA, NACK, PROBE, Packet, Sim
from mrcnic.verif.scale_spray import Spray

__all__ = ["NicConfig", "ScaleNic", "Write"]

SACK_MASK = (1 << SACK_BITS) - 1


@dataclass
class NicConfig:
    """One NIC's settings: what its registers hold, and its frames' sizes on the wire."""
    mtu: int = 1024
    data_overhead: int = 166       # a data frame's headers, FCS, preamble and gap
    ctrl_bytes: int = 154          # a SACK, NACK, probe or trimmed header on the wire
    nic_delay_ns: float = 1800.0   # the pipelines, on whatever a NIC takes in
    clock_ns: float = 4.0
    window: int = 256
    reorder: int = 16
    reo_wnd: int = 1024
    rto_min: int = 4000
    rto_max: int = 16384
    probe_interval: int = 1500
    coalesce: int = 4
    ack_timeout: int = 256
    port_limit: int = 2400         # bytes a port may hold before the spray passes it over
    share_period: int = 0
    cc: Congestion = field(default_factory=Congestion)
    trim_rounds: int = regmap.by_name("tx.trim_rounds").reset
    #: what-ifs the gateware does not do: recycle EVs whose SACK came back unmarked (REPS's
    #: rule, this many kept; 0: off), and a SKIP set by a SACK (an ECN mark, a hole) lasting
    #: this many rotations, as a trim's lasts trim_rounds
    recycle: int = 0
    mark_rounds: int = 1


@dataclass
class Write:
    """A write ``wr_id`` of ``size`` bytes on QP ``qp`` to host ``dst``."""
    wr_id: int
    qp: int
    dst: int
    size: int
    posted_ns: float = 0.0
    done_ns: float | None = None


@dataclass
class _Tx:
    qp: int
    dst: int
    spray: Spray
    writes: deque = field(default_factory=deque)   # posted, not all sent
    nxt: int = 0
    left: int = 0                  # bytes of writes[0] not yet sent
    meta: dict = field(default_factory=dict)       # psn -> (wr_id, last, length)
    rtx: deque = field(default_factory=deque)      # (psn, avoided entry)
    sent_ns: dict = field(default_factory=dict)    # psn -> when it last went out
    tstart: float = 0.0            # the RTO's clock
    armed: bool = False
    probe_due: bool = False


@dataclass
class _Rx:
    base: int = 0
    mask: int = 0                  # bit i: PSN base + i arrived
    pending: int = 0
    last: tuple = (0, 0, 0, 0)     # (psn, ev, ts, plane) of the latest arrival
    flush: bool = False
    seen_ns: float = -1e18


class _Path:
    """An EV layout for fabrics that hash: every EV is a path of its own."""

    @staticmethod
    def path(ev: int) -> int:
        return ev


class ScaleNic:
    """Host ``host``'s NIC on ``fabric``: ``planes`` ports; QP ``q`` talks to ``peers[q]`` over
    ``profiles[q]`` (a list of (ev, plane, path) entries), run as ``transport`` says."""

    def __init__(self, sim: Sim, fabric, host: int, planes: int, peers: dict, profiles: dict,
                 transport: Transport, cfg: NicConfig, seed: int, layout=None,
                 on_done=None, record_sends: bool = False, record_arrivals: bool = False):
        self.sim, self.fabric, self.host, self.cfg, self.t = sim, fabric, host, cfg, transport
        self.planes = list(range(planes))
        self.ports = [fabric.first_port(host, p) for p in self.planes]
        self.rng = random.Random(f"{seed}-nic-{host}")
        self.on_done = on_done
        nq = max(max(peers, default=0), max(profiles, default=0)) + 1
        self.rel = Sender(nq, cfg.window, reorder=cfg.reorder, mode=transport.rel_mode,
                          cc=cfg.cc, planes=planes, reo_wnd=cfg.reo_wnd,
                          layout=layout or _Path(), ev_health=transport.ev_health)
        self.tx: dict[int, _Tx] = {}
        for q, dst in peers.items():
            ents = profiles[q]
            spray = Spray([e[0] for e in ents], [e[1] for e in ents], [e[2] for e in ents],
                          transport.spray, self.rng, health=transport.ev_health,
                          recycle=cfg.recycle, trim_rounds=cfg.trim_rounds,
                          mark_rounds=cfg.mark_rounds)
            self.tx[q] = _Tx(q, dst, spray)
            self.rel.init(q, 0)
        self.order = list(self.tx)
        self.rr = 0
        self.rx: dict[tuple, _Rx] = {}
        self.wake_at = float("inf")        # the engine's earliest wake pending
        self.engine_at = 0.0
        # (the engine's ns a byte: every port's rate together)
        self.engine_ns = 1 / sum(1 / pt.ns_per_byte for pt in self.ports)
        self.sends: list | None = [] if record_sends else None        # (ns, qp, ev, rtx)
        self.arrivals: list | None = [] if record_arrivals else None  # (ns, src, qp, bytes, rtx)
        fabric.attach(host, self._receive)
        if transport.ev_health and cfg.probe_interval:
            sim.at(cfg.probe_interval * cfg.clock_ns, self._probe_tick)

    # --- time ----------------------------------------------------------------------------

    def cycles(self) -> int:
        return int(self.sim.now / self.cfg.clock_ns) % TIME_MOD

    # --- posting and sending ---------------------------------------------------------------

    def post(self, w: Write) -> None:
        w.posted_ns = self.sim.now
        t = self.tx[w.qp]
        if not t.writes:
            t.left = w.size
        t.writes.append(w)
        self.kick()

    def kick(self) -> None:
        self._wake(self.sim.now)

    def _send(self) -> None:
        """The TX engine, one frame at a time at the NIC's rate (all its ports together): the
        next QP in turn with something to send takes a port, one holding no more than
        ``port_limit`` bytes if there is one, else any (the port meters only steer: the
        gateware's spray passes a busy port over while another is calm)."""
        now = self.sim.now
        if self.wake_at <= now:
            self.wake_at = float("inf")
        if self.engine_at > now:
            self._wake(self.engine_at)
            return
        # (calm by the very time a wake for it is set to: it never comes back at once)
        calm = [p for p in self.planes if self._room_at(p) <= now]
        sent = self._one(calm or self.planes)
        if sent is None:
            # (the QP in turn may use only busy ports while another is calm: it goes once
            # one of its own drains)
            self._wake(min(self._room_at(p) for p in self.planes if p not in calm))
        elif sent:
            self._wake(self.engine_at)

    def _room_at(self, p: int) -> float:
        """When port ``p`` holds no more than the limit again."""
        pt = self.ports[p]
        return pt.free_at - self.cfg.port_limit * pt.ns_per_byte

    def _wake(self, t: float) -> None:
        """Runs the engine at ``t`` unless it runs sooner (a later wake then finds it has
        nothing to do, or does it)."""
        t = max(t, self.sim.now)
        if t < self.wake_at:
            self.wake_at = t
            self.sim.at(t, self._send)

    def _engine(self, size: int, start: float) -> None:
        """The engine is busy from ``start`` with a frame of ``size`` wire bytes (its own
        bytes alone)."""
        self.engine_at = start + (size - wire.ETH_WIRE_OVERHEAD) * self.engine_ns

    def _one(self, ready) -> bool | None:
        """The next QP in turn with something to send sends it: True; False if none has;
        None if the one in turn may use only planes whose ports are full now (the engine
        waits for it, as the gateware's does for its grant)."""
        n = len(self.order)
        for k in range(n):
            t = self.tx[self.order[(self.rr + k) % n]]
            sent = self._qp_sends(t, ready)
            if sent is None:
                self.rr = (self.rr + k) % n
                return None
            if sent:
                self.rr = (self.rr + k + 1) % n
                return True
        return False

    def _has_work(self, t: _Tx) -> bool:
        return bool(t.rtx or t.probe_due or (t.writes and self.rel.can_send(t.qp, t.nxt)))

    def _qp_sends(self, t: _Tx, ready) -> bool | None:
        rel, s = self.rel, self.rel.q[t.qp]
        if not self._has_work(t):
            return False
        ready = [p for p in ready if p in t.spray.members]
        if not ready:
            return None
        while t.rtx:                                  # retransmissions first
            psn, avoid = t.rtx.popleft()
            if (psn - s.una) % PSN_MOD >= (s.nxt - s.una) % PSN_MOD:
                continue                              # acknowledged meanwhile
            self._data(t, psn, ready, avoid, tries=1)
            return True
        if t.probe_due:
            t.probe_due = False
            i = t.spray.next_probe()
            if i is not None and t.spray.plane_of[i] in ready:
                ev = t.spray.evs[i]
                rel.probed(t.qp, i, ev)
                self._out(Packet(PROBE, self.host, t.dst, t.qp, s.nxt, ev, self.cfg.ctrl_bytes,
                                 ts=self.cycles()), t.spray.plane_of[i])
                self._engine(self.cfg.ctrl_bytes, self.sim.now)
                return True
        if t.writes and rel.can_send(t.qp, t.nxt):
            self._data(t, t.nxt, ready, None, tries=0)
            return True
        return False

    def _data(self, t: _Tx, psn: int, ready, avoid, tries: int) -> None:
        rel, cfg = self.rel, self.cfg
        if tries == 0:
            w = t.writes[0]
            length = min(cfg.mtu, t.left)
            t.left -= length
            last = t.left == 0
            t.meta[psn] = (w.wr_id, last, length)
            t.nxt = (psn + 1) % PSN_MOD
            if last:
                t.writes.popleft()
                if t.writes:
                    t.left = t.writes[0].size
        wr_id, last, length = t.meta[psn]
        s = rel.q[t.qp]
        if tries == 0 and s.una == s.nxt:
            t.tstart = self.sim.now          # the first in flight starts the clock
        # (the holds reach the spray only with EV health, as rel.ev_health gates them)
        held = rel.suspect[t.qp] if s.hold is not None and self.t.ev_health else None
        planes = rel.planes_for(t.qp, (1 << len(self.planes)) - 1)
        ok = [p for p in ready if planes >> p & 1] or ready
        i = t.spray.pick(ok, held, avoid)
        ev = t.spray.evs[i]
        now = self.cycles()
        rel.sent(t.qp, psn, ev, i, last, wr_id, tries, length, now)
        pkt = Packet(DATA, self.host, t.dst, t.qp, psn, ev, length + cfg.data_overhead,
                     ts=now, rtx=tries > 0)
        pkt.last = last
        t.sent_ns[psn] = self.sim.now
        if self.sends is not None:
            self.sends.append((self.sim.now, t.qp, ev, tries > 0))
        self._out(pkt, t.spray.plane_of[i])
        self._engine(pkt.size, self.sim.now)
        self._arm(t)

    def _out(self, pkt: Packet, plane: int) -> None:
        pkt.plane = plane
        self.fabric.send(pkt)

    # --- feedback ----------------------------------------------------------------------------

    def _apply(self, t: _Tx, o, trim: bool = False) -> None:
        """The reliability engine's outcome ``o``; ``trim``: of a NACK, whose SKIPs are
        trims'."""
        for _, index, state in o.ev_updates:
            t.spray.update(index, EvState(state), trim)
        for _, index in o.paths:
            t.spray.retire_path(index)
        for wr_id in o.completions:
            if self.on_done is not None:
                self.on_done(self.host, wr_id, self.sim.now)
        for _, psn, avoid in o.retransmits:
            t.rtx.append((psn, avoid))
        if o.retransmits or o.completions or o.ev_updates:
            self.kick()

    def _feedback(self, pkt: Packet) -> None:
        t = self.tx.get(pkt.qp)
        if t is None:
            return
        now = self.cycles()
        una = self.rel.q[pkt.qp].una
        if pkt.kind == ACK:
            cack, off, bitmap, m, pr, pen = pkt.ack
            rtt = None if pr else (now - pkt.ts) % TIME_MOD
            if self.cfg.recycle and not pr and m == wire.SackMark.NONE:
                r = self.rel._record(self.rel.q[pkt.qp], pkt.psn)
                if r is not None and r.ev == pkt.ev:
                    t.spray.clean(r.index)
            o = self.rel.sack(pkt.qp, cack, off, bitmap, pkt.psn, pkt.ev, m, rtt=rtt, pr=pr,
                              pen=pen, ts=pkt.ts, now=now)
        else:
            o = self.rel.nack(pkt.qp, pkt.psn, pkt.ack, pkt.ev)
        if self.rel.q[pkt.qp].una != una:
            t.tstart = self.sim.now
        self._apply(t, o, trim=pkt.kind != ACK)
        self.kick()                     # (the window may have opened)

    # --- the retransmission timer -----------------------------------------------------------
    # As the gateware keeps it: a QP's clock (tstart) starts when its first packet goes in
    # flight, again whenever its cumulative ack moves and after a timeout's retransmission;
    # an RTO on it with something outstanding sends the oldest outstanding packet again,
    # unless that one went out less than an RTO ago (then the wait runs from its sending).

    def _rto_ns(self, qp: int) -> float:
        s, cfg = self.rel.q[qp], self.cfg
        est = 0 if s.srtt is None else s.srtt + 4 * s.rttvar
        return min(max(est, cfg.rto_min), cfg.rto_max) * cfg.clock_ns

    def _restart(self, t: _Tx) -> None:
        t.tstart = self.sim.now
        self._arm(t)

    def _arm(self, t: _Tx) -> None:
        if not t.armed:
            t.armed = True
            self.sim.at(t.tstart + self._rto_ns(t.qp), self._rto, t)

    def _rto(self, t: _Tx) -> None:
        t.armed = False
        s = self.rel.q[t.qp]
        if s.una == s.nxt:
            return                       # nothing outstanding: the next send starts it
        now, rto = self.sim.now, self._rto_ns(t.qp)
        # (times compared as the wake was computed, so that it never comes back at once)
        if now < t.tstart + rto:
            self._arm(t)
            return
        p = self.rel.oldest(t.qp)
        if p != s.nxt and now < t.sent_ns.get(p, 0.0) + rto:
            t.tstart = t.sent_ns[p]      # it went out again lately
            self._arm(t)
            return
        self._apply(t, self.rel.timeout(t.qp))
        self._restart(t)

    def _probe_tick(self) -> None:
        for t in self.tx.values():
            if t.spray.bad():
                t.probe_due = True
                self.kick()
        self.sim.at(self.sim.now + self.cfg.probe_interval * self.cfg.clock_ns, self._probe_tick)

    # --- receiving ----------------------------------------------------------------------------

    def _receive(self, pkt: Packet) -> None:
        self.sim.at(self.sim.now + self.cfg.nic_delay_ns, self._take, pkt)

    def _take(self, pkt: Packet) -> None:
        if pkt.kind in (ACK, NACK):
            self._feedback(pkt)
            return
        key = (pkt.src, pkt.qp)
        r = self.rx.get(key)
        if r is None:
            r = self.rx[key] = _Rx()
        r.seen_ns = self.sim.now
        if pkt.kind == PROBE:
            self._sack(pkt, r, pkt.psn, pr=1)
            return
        if pkt.trimmed:
            self._reply(pkt, NACK, pkt.psn, int(wire.NackReason.TRIMMED_LASTHOP
                                                if pkt.trimmed_last else wire.NackReason.TRIMMED))
            return
        diff = (pkt.psn - r.base) % PSN_MOD
        if diff >= PSN_MOD // 2 or (diff < self.cfg.window and r.mask >> diff & 1):
            r.last = (pkt.psn, pkt.ev, pkt.ts, pkt.plane)
            self._sack(pkt, r, pkt.psn)           # a duplicate: at once
            return
        if diff >= self.cfg.window:
            self._reply(pkt, NACK, pkt.psn, int(wire.NackReason.PSN_OOR_WINDOW))
            return
        r.mask |= 1 << diff
        if r.mask & 1:
            run = (~r.mask & (r.mask + 1)).bit_length() - 1
            r.mask >>= run
            r.base = (r.base + run) % PSN_MOD
        if self.arrivals is not None:
            self.arrivals.append((self.sim.now, pkt.src, pkt.qp, pkt.size, pkt.rtx))
        r.last = (pkt.psn, pkt.ev, pkt.ts, pkt.plane)
        r.pending += 1
        if pkt.ce or pkt.last or r.pending >= self.cfg.coalesce:
            self._sack(pkt, r, pkt.psn)
        elif not r.flush:
            r.flush = True
            self.sim.at(self.sim.now + self.cfg.ack_timeout * self.cfg.clock_ns,
                        self._flush, key, r)

    def _flush(self, key, r: _Rx) -> None:
        r.flush = False
        if r.pending:
            psn, ev, ts, plane = r.last
            pkt = Packet(DATA, key[0], self.host, key[1], psn, ev, 0, ts=ts)
            pkt.plane = plane
            self._sack(pkt, r, psn)

    def _pen(self) -> int:
        """The QPs sending to this NIC within the share period (rcv_cwnd_pen)."""
        if not self.cfg.share_period:
            return 0
        since = self.sim.now - self.cfg.share_period * self.cfg.clock_ns
        return min(sum(1 for r in self.rx.values() if r.seen_ns >= since), 127)

    def _sack(self, pkt: Packet, r: _Rx, trig: int, pr: int = 0) -> None:
        r.pending = 0
        rel = (trig - r.base) % PSN_MOD
        off = (rel // SACK_BITS) * SACK_BITS if rel < self.cfg.window and not pr else 0
        bitmap = (r.mask >> off) & SACK_MASK
        m = int(wire.SackMark.SKIP_ONCE if pkt.ce else wire.SackMark.NONE)
        self._reply(pkt, ACK, trig, (r.base, off, bitmap, m, pr, self._pen()))

    def _reply(self, pkt: Packet, kind: int, psn: int, what) -> None:
        out = Packet(kind, self.host, pkt.src, pkt.qp, psn, pkt.ev, self.cfg.ctrl_bytes,
                     ts=pkt.ts, ack=what)
        out.plane = pkt.plane           # (it leaves on the plane the packet came in on)
        # The TX engine builds it, between data frames: it waits for the engine, and the
        # engine's next data frame for it.
        at = max(self.sim.now, self.engine_at)
        self._engine(out.size, at)
        if at > self.sim.now:
            self.sim.at(at, self.fabric.send, out)
        else:
            self.fabric.send(out)

    # --- what it did ---------------------------------------------------------------------------

    def retransmissions(self) -> int:
        return retransmitted(self.rel.counters)
