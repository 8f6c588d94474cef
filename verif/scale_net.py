"""The scale model's network: an event-driven fabric of output queues, fast enough for a
1024-host fat tree in pure Python.

Each link direction is a :class:`Port`: a FIFO drained at the link's rate, then the link's
latency. Its queue is never walked: a FIFO that is always serving holds exactly the bytes its
drain has not reached, so a packet's departure is known the moment it is queued
(``free_at``), and the backlog it finds is ``(free_at - now) x rate``. One event per packet
per hop. What the ports do is what ``verif/network.py`` does to the RTL system's frames:

* a data packet that finds the queue full is trimmed to its headers (or dropped, if it may
  not be), and headers, acknowledgements and probes go ahead of the data (strict priority:
  they leave after their own serialisation, and push the data behind them back by it);
* ECN: a data packet that finds more than ``ecn_lo`` bytes queued is marked, always above
  ``ecn_hi`` and in between with a probability that rises linearly (``ecn_lo == ecn_hi``: a
  plain threshold, the RTL network's rule), never on a last hop;
* random loss, and links that die (dropping what enters them and what is on the wire then)
  and come back.

Two fabrics: :class:`LeafSpine`, the RTL system's (every plane a leaf-spine of its own, the
EV's plane and spine fields choosing the path, as the NIC's SRv6 source route does), whose
link methods are those of ``verif/network.py``'s Network so the scenarios' failures apply
unchanged; and :class:`FatTree`, a three-tier k-ary fat tree whose switches pick their
uplink by hashing the flow and the EV, as ECMP switches do.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections import Counter

__all__ = ["Sim", "Packet", "Port", "LeafSpine", "FatTree", "DATA", "ACK", "NACK", "PROBE"]

DATA, ACK, NACK, PROBE = range(4)


class Sim:
    """The event loop: callbacks at times in nanoseconds, in time order (ties in the order
    they were scheduled)."""

    def __init__(self):
        self.now = 0.0
        self._q: list = []
        self._seq = itertools.count()
        self.events = 0

    def at(self, t: float, fn, *args) -> None:
        heapq.heappush(self._q, (t, next(self._seq), fn, args))

    def run(self, until: float = float("inf"), stop=None) -> None:
        """Runs events up to ``until`` ns, or until ``stop()`` holds after one."""
        q, pop = self._q, heapq.heappop
        while q and q[0][0] <= until:
            t, _, fn, args = pop(q)
            self.now = t
            self.events += 1
            fn(*args)
            if stop is not None and stop():
                return


class Packet:
    """One packet: its route (the ports it crosses, in order) and what the NICs read."""
    __slots__ = ("kind", "src", "dst", "qp", "psn", "ev", "size", "ce", "trimmed",
                 "trimmed_last", "ts", "route", "hop", "plane", "ack", "rtx", "last")

    def __init__(self, kind, src, dst, qp, psn, ev, size, ts=0, ack=None, rtx=False):
        self.kind, self.src, self.dst, self.qp, self.psn, self.ev = kind, src, dst, qp, psn, ev
        self.size, self.ts, self.ack, self.rtx = size, ts, ack, rtx
        self.ce = False
        self.trimmed = False
        self.trimmed_last = False  # trimmed by the last hop's queue, the receiver's own
        self.route = None
        self.hop = 0
        self.plane = 0
        self.last = False          # a message's last packet: its SACK goes at once


class Port:
    """One direction of a link, from node ``src`` to node ``dst``; ``deliver(pkt)`` takes
    what arrives at its far end."""

    def __init__(self, sim: Sim, src, dst, gbps: float, latency_ns: float, queue_bytes: int,
                 ecn_lo: int, ecn_hi: int, last_hop: bool, rng: random.Random,
                 header_bytes: int, loss: float = 0.0):
        self.sim, self.src, self.dst = sim, src, dst
        self.ns_per_byte = 8 / gbps
        self.latency = latency_ns
        self.queue_bytes, self.ecn_lo, self.ecn_hi = queue_bytes, ecn_lo, ecn_hi
        self.last_hop, self.rng, self.loss = last_hop, rng, loss
        self.header_bytes = header_bytes
        self.free_at = 0.0
        self.down = False
        self.epoch = 0
        self.deliver = None
        self.count = Counter()

    def offer(self, pkt: Packet) -> None:
        now = self.sim.now
        if self.down:
            self.count["dropped_down"] += 1
            return
        if self.loss and self.rng.random() < self.loss:
            self.count["lost"] += 1
            return
        free = self.free_at if self.free_at > now else now
        if pkt.kind == DATA and not pkt.trimmed:
            queued = (free - now) / self.ns_per_byte
            if queued + pkt.size > self.queue_bytes:
                self.count["trimmed"] += 1
                pkt.trimmed = True
                pkt.trimmed_last = self.last_hop
                pkt.size = self.header_bytes
            else:
                if not self.last_hop and queued > self.ecn_lo and not pkt.ce:
                    if queued >= self.ecn_hi or self.rng.random() < (
                            (queued - self.ecn_lo) / (self.ecn_hi - self.ecn_lo)):
                        pkt.ce = True
                        self.count["ecn_marked"] += 1
                self.free_at = free + pkt.size * self.ns_per_byte
                self.sim.at(self.free_at + self.latency, self._arrive, pkt, self.epoch)
                return
        # headers, acknowledgements, probes: ahead of the data
        ser = pkt.size * self.ns_per_byte
        self.free_at = free + ser
        self.sim.at(now + ser + self.latency, self._arrive, pkt, self.epoch)

    def _arrive(self, pkt: Packet, epoch: int) -> None:
        if epoch != self.epoch:
            self.count["dropped_down"] += 1        # on the wire when the link died
            return
        self.count["delivered"] += 1
        self.deliver(pkt)

    def set_down(self, down: bool) -> None:
        if down and not self.down:
            self.epoch += 1
            self.free_at = self.sim.now
        self.down = down


def forward(pkt: Packet) -> None:
    """A switch passes the packet to the next port of its route."""
    pkt.hop += 1
    pkt.route[pkt.hop].offer(pkt)


class _Fabric:
    """What both fabrics share: the ports, keyed (from node, to node); hosts attach a
    receive function; ``route(src, dst, ev, qp)`` is a packet's list of ports."""

    def __init__(self, sim: Sim, seed: int, header_bytes: int):
        self.sim = sim
        self.rng = random.Random(f"{seed}-fabric")
        self.header_bytes = header_bytes
        self.links: dict[tuple, Port] = {}
        self.hosts_rx: dict[int, object] = {}
        self._routes: dict[tuple, list] = {}

    def _port(self, a, b, cfg) -> Port:
        p = Port(self.sim, a, b, rng=self.rng, header_bytes=self.header_bytes,
                 last_hop=b[0] == "host", **cfg)
        if b[0] == "host":
            p.deliver = lambda pkt, h=b[2]: self.hosts_rx[h](pkt)
        else:
            p.deliver = forward
        self.links[(a, b)] = p
        return p

    def attach(self, host: int, rx) -> None:
        self.hosts_rx[host] = rx

    def send(self, pkt: Packet) -> None:
        """Host ``pkt.src`` puts the packet on the first link of its route."""
        key = (pkt.src, pkt.dst, pkt.ev, pkt.qp)
        route = self._routes.get(key)
        if route is None:
            route = self._routes[key] = self.route(pkt.src, pkt.dst, pkt.ev, pkt.qp)
        pkt.route, pkt.hop = route, 0
        route[0].offer(pkt)

    def totals(self) -> Counter:
        c = Counter()
        for p in self.links.values():
            c.update(p.count)
        return c


class LeafSpine(_Fabric):
    """The RTL system's fabric: host ``h`` on leaf ``h`` of every plane, every leaf of a plane
    cabled to each of its spines; the EV's plane and spine fields (``layout``) pick the path.
    ``link_cfg(a, b)`` gives each link direction's verif.network.LinkConfig."""

    def __init__(self, sim: Sim, planes: int, spines: int, hosts: int, link_cfg, layout,
                 seed: int = 0, header_bytes: int = 64):
        super().__init__(sim, seed, header_bytes)
        self.planes, self.spines, self.hosts, self.layout = planes, spines, hosts, layout
        for p in range(planes):
            for h in range(hosts):
                host, leaf = ("host", p, h), ("leaf", p, h)
                pairs = [(host, leaf), (leaf, host)]
                for s in range(spines):
                    spine = ("spine", p, s)
                    pairs += [(leaf, spine), (spine, leaf)]
                for a, b in pairs:
                    c = link_cfg(a, b)
                    self._port(a, b, dict(gbps=c.gbps, latency_ns=c.latency_ns,
                                          queue_bytes=c.queue_bytes, ecn_lo=c.ecn_bytes,
                                          ecn_hi=c.ecn_bytes, loss=c.loss))

    def route(self, src, dst, ev, qp):
        p, s = self.layout.plane(ev), self.layout.spine(ev)
        nodes = [("host", p, src), ("leaf", p, src), ("spine", p, s), ("leaf", p, dst),
                 ("host", p, dst)]
        return [self.links[(a, b)] for a, b in zip(nodes, nodes[1:], strict=False)]

    def first_port(self, host, plane):
        return self.links[(("host", plane, host), ("leaf", plane, host))]

    # verif.network.Network's ways of naming links, for the scenarios' failures
    def cable(self, a, b) -> list[Port]:
        return [self.links[(a, b)], self.links[(b, a)]]

    def spine_link(self, plane, spine, leaf) -> list[Port]:
        return self.cable(("leaf", plane, leaf), ("spine", plane, spine))

    def plane_links(self, plane) -> list[Port]:
        return [lk for (a, _), lk in self.links.items() if a[1] == plane]


def _mix(x: int) -> int:
    """A 64-bit finaliser (splitmix64's): a well-spread hash of ``x``."""
    x &= 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return x ^ (x >> 31)


class FatTree(_Fabric):
    """A three-tier k-ary fat tree (k^3/4 hosts; k/2 hosts a ToR, k/2 ToRs and k/2 Aggs a
    pod, k pods, (k/2)^2 cores, Agg ``a`` of every pod cabled to cores a*k/2 .. a*k/2 + k/2 - 1),
    1:1 at every tier. Going down the route is fixed. Going up, with ``routing`` "ecmp" each
    switch picks its uplink by hashing the flow, the EV and a salt of its own; with "srv6"
    the EV names the route, as the uSIDs an SRv6 fabric forwards on would (:meth:`srv6_ev`).
    ``link(a, b)`` gives each link direction's port settings (gbps, latency_ns, queue_bytes,
    ecn_lo, ecn_hi)."""

    ROUTINGS = ("ecmp", "srv6")

    def __init__(self, sim: Sim, k: int, link, seed: int = 0, header_bytes: int = 64,
                 routing: str = "ecmp"):
        if k < 2 or k % 2:
            raise ValueError(f"a fat tree's k is even and at least 2, not {k!r}")
        if routing not in self.ROUTINGS:
            raise ValueError(f"routing is one of {', '.join(self.ROUTINGS)}, not {routing!r}")
        super().__init__(sim, seed, header_bytes)
        self.k, self.half, self.routing = k, k // 2, routing
        self.hosts = k ** 3 // 4
        half = self.half
        salts = random.Random(f"{seed}-salts")
        self.salt = {}
        for pod in range(k):
            for i in range(half):
                for kind in ("tor", "agg"):
                    self.salt[(kind, pod, i)] = salts.getrandbits(64)
        for h in range(self.hosts):
            tor = ("tor", h // (half * half), h // half % half)
            for a, b in ((("host", 0, h), tor), (tor, ("host", 0, h))):
                self._port(a, b, link(a, b))
        for pod in range(k):
            for t in range(half):
                for g in range(half):
                    tor, agg = ("tor", pod, t), ("agg", pod, g)
                    self._port(tor, agg, link(tor, agg))
                    self._port(agg, tor, link(agg, tor))
            for g in range(half):
                for j in range(half):
                    agg, core = ("agg", pod, g), ("core", 0, g * half + j)
                    self._port(agg, core, link(agg, core))
                    self._port(core, agg, link(core, agg))

    def pod(self, h: int) -> int:
        return h // (self.half * self.half)

    def tor(self, h: int) -> tuple:
        return ("tor", self.pod(h), h // self.half % self.half)

    def routes(self) -> int:
        """The routes between two pods: an Agg and one of its cores."""
        return self.half * self.half

    def srv6_ev(self, route: int, entropy: int = 0) -> int:
        """With "srv6" routing, an EV for route ``route`` (0 .. :meth:`routes` - 1): the Agg
        in its low bits, the Agg's core above them; ``entropy`` in the bits from 16 up. Between
        two ToRs of a pod only the Agg counts; under one ToR, nothing."""
        if not 0 <= route < self.routes():
            raise ValueError(f"route is 0 .. {self.routes() - 1}, not {route!r}")
        return (entropy << 16 | route) & 0xFFFFFFFF

    def route_of(self, ev: int) -> int:
        """The route (0 .. :meth:`routes` - 1) an EV names with "srv6" routing."""
        return (ev & 0xFFFF) % self.routes()

    def _pick(self, switch, flow: int, ev: int) -> int:
        if self.routing == "srv6":
            r = self.route_of(ev)
            return (r if switch[0] == "tor" else r // self.half) % self.half
        return _mix(flow * 0x9E3779B97F4A7C15 ^ ev * 0xC2B2AE3D27D4EB4F ^ self.salt[switch]) \
            % self.half

    def route(self, src, dst, ev, qp):
        flow = (src * self.hosts + dst) * 1024 + qp
        hs, hd = ("host", 0, src), ("host", 0, dst)
        ts, td = self.tor(src), self.tor(dst)
        if ts == td:
            nodes = [hs, ts, hd]
        else:
            g = self._pick(ts, flow, ev)
            up = ("agg", ts[1], g)
            if ts[1] == td[1]:
                nodes = [hs, ts, up, td, hd]
            else:
                core = ("core", 0, g * self.half + self._pick(up, flow, ev))
                nodes = [hs, ts, up, core, ("agg", td[1], g), td, hd]
        return [self.links[(a, b)] for a, b in zip(nodes, nodes[1:], strict=False)]

    def first_port(self, host, plane):
        return self.links[(("host", 0, host), self.tor(host))]

    def core_downlinks(self, pod: int, agg: int) -> list[Port]:
        """The links from Agg ``agg`` of pod ``pod``'s cores down to it."""
        return [self.links[(("core", 0, agg * self.half + j), ("agg", pod, agg))]
                for j in range(self.half)]
