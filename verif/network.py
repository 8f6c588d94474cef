"""A timed multi-plane leaf-spine network for cocotb, joining NIC instances port by port.

Every plane is a leaf-spine of its own: host ``h`` has one port per plane, cabled to leaf ``h``
of that plane, and every leaf of a plane is cabled to every spine of it. Each cable is two
:class:`Link` objects, one per direction, each a queue drained at the link's rate followed by
its latency. A switch forwards by the packet's outer uSID carrier as an SRv6 uN switch does
(verif/fabric.py's :func:`forward`, which a Linux router with the fabric's routes agrees with:
its own uSID first, shift the rest, on to the next), so the NIC's source route decides the
path; the last leaf forwards the frame, still encapsulated, to the NIC whose uSID comes last
(the NIC's receive side decapsulates). What the kernel drops the model drops, counted by why.

What the links do to traffic, all from a seeded generator so that a failure replays:

* ECN: an ECN-capable packet that finds more than ``ecn_bytes`` queued is marked CE, on every
  hop but the last (MRC keeps ECN off on last-hop switches: a mark means path imbalance).
* Trimming: a trimmable data packet that finds the queue full is cut to its headers
  (:func:`trim`) and queued ahead of the data at control priority; anything else that finds it
  full is dropped.
* Random loss, duplication and reordering (a packet held back ``reorder_ns`` longer).
* Links that go down and come back at given times: a dead link drops what enters it and what
  is on the wire when it dies.
* A pcap per link direction, of what it delivered, stamped in simulated time.
"""

from __future__ import annotations

import random
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path

import cocotb
from cocotb.triggers import Event, Timer
from cocotb.utils import get_sim_time

from mrcnic import wire
from mrcnic.verif.fabric import BLOCK, BLOCK_BITS, forward, ip_offsets
from mrcnic.verif.pcap import Pcap

__all__ = ["LinkConfig", "Link", "Failure", "Network", "trim"]

ETH = wire.ETHERNET.length
ECN_MASK = 0b11
ECN_CE = 0b11
TRIMMABLE = {wire.DscpClass.DATA_TRIMMABLE, wire.DscpClass.DATA_TRIMMABLE_RTX}


@dataclass
class LinkConfig:
    """One direction of a cable."""
    gbps: float = 16.0            # the 64-bit NIC's port rate at 250 MHz
    latency_ns: float = 400.0     # wire and switch pipeline
    queue_bytes: int = 64 * 1024  # the output queue; full: trim (trimmable data) or drop
    ecn_bytes: int = 24 * 1024    # mark CE above this, not on the last hop
    loss: float = 0.0             # each packet's chance to vanish
    dup: float = 0.0              # ...to arrive twice
    reorder: float = 0.0          # ...to be held back reorder_ns
    reorder_ns: float = 3000.0


def _tc(frame: bytes, at: int) -> int:
    return (int.from_bytes(frame[at:at + 2], "big") >> 4) & 0xFF


def tc_of(frame: bytes) -> int:
    """The traffic class switches see: the outer IPv6 header's."""
    return _tc(frame, ip_offsets(frame)[0])


def set_tc(frame: bytes, tc: int) -> bytes:
    """The frame with traffic class ``tc`` where switches see it (the ICRC does not cover it)."""
    out = bytearray(frame)
    _set_tc(out, ip_offsets(frame)[0], tc)
    return bytes(out)


def _set_tc(frame: bytearray, at: int, tc: int) -> None:
    word = int.from_bytes(frame[at:at + 4], "big")
    word = (word & ~(0xFF << 20)) | (tc << 20)
    frame[at:at + 4] = word.to_bytes(4, "big")


def trim(frame: bytes, last_hop: bool = False) -> bytes:
    """What a trimming switch forwards (wire.TRIMMED_PACKET): the headers through RETH and
    ImmDt, then the 4 bytes where the ICRC was; every IPv6 payload length and the UDP length
    rewritten; DSCP TRIMMED (TRIMMED_LASTHOP if ``last_hop``) on the header the switches
    route on."""
    outer, inner = ip_offsets(frame)
    udp = inner + wire.IPV6.length
    bth_at = udp + wire.UDP.length
    bth = wire.BTH.unpack(frame[bth_at:])
    ext = sum(h.length for h in wire.headers_after_bth(bth["opcode"], bool(bth["tsh"])))
    keep = bth_at + wire.BTH.length + ext
    out = bytearray(frame[:keep] + frame[-wire.ICRC_BYTES:])
    cut = len(frame) - len(out)
    for at in {outer, inner}:
        plen = int.from_bytes(out[at + 4:at + 6], "big") - cut
        out[at + 4:at + 6] = plen.to_bytes(2, "big")
    ulen = int.from_bytes(out[udp + 4:udp + 6], "big") - cut
    out[udp + 4:udp + 6] = ulen.to_bytes(2, "big")
    ecn = _tc(frame, outer) & ECN_MASK
    dscp = wire.DscpClass.TRIMMED_LASTHOP if last_hop else wire.DscpClass.TRIMMED
    _set_tc(out, outer, (dscp << 2) | ecn)
    return bytes(out)


class Link:
    """One direction of a cable, from ``src`` to ``dst`` (node names), delivering to
    ``deliver(frame)``."""

    def __init__(self, net: Network, src, dst, cfg: LinkConfig, last_hop: bool, deliver):
        self.net, self.src, self.dst, self.cfg = net, src, dst, cfg
        self.last_hop = last_hop
        self.deliver = deliver
        self.name = f"{_name(src)}-{_name(dst)}"
        self.control: deque = deque()       # control and trimmed packets: served first
        self.data: deque = deque()
        self.queued = 0                     # bytes waiting
        self.down = False
        self.epoch = 0                      # bumps when the link dies: what was on the wire is lost
        self.count = Counter()
        self.log: list[tuple[float, int]] = []   # (time in ns, EV) of each packet it carried
        self._wake = Event()
        self._pcap = None
        if net.pcap_dir is not None:
            self._pcap = Pcap(net.pcap_dir / f"{self.name}.pcap")
        cocotb.start_soon(self._drain())

    def offer(self, frame: bytes) -> None:
        """A frame enters the link's queue (or does not)."""
        rng, cfg = self.net.rng, self.cfg
        self.count["offered"] += 1
        if self.down:
            self.count["dropped_down"] += 1
            return
        if rng.random() < cfg.loss:
            self.count["lost"] += 1
            return
        outer, _ = ip_offsets(frame)
        tc = _tc(frame, outer)
        dscp = tc >> 2
        control = dscp == wire.DscpClass.CONTROL or dscp in wire.TRIMMED_CLASSES
        if self.queued + len(frame) > cfg.queue_bytes:
            if dscp not in TRIMMABLE:
                self.count["dropped_full"] += 1
                return
            frame = trim(frame, self.last_hop)
            self.count["trimmed"] += 1
            control = True
        elif (not self.last_hop and self.queued > cfg.ecn_bytes and tc & ECN_MASK
              and tc & ECN_MASK != ECN_CE):
            f = bytearray(frame)
            _set_tc(f, outer, tc | ECN_CE)
            frame = bytes(f)
            self.count["ecn_marked"] += 1
        (self.control if control else self.data).append(frame)
        self.queued += len(frame)
        self._wake.set()

    async def _drain(self):
        while True:
            if not self.control and not self.data:
                self._wake.clear()
                await self._wake.wait()
                continue
            frame = (self.control or self.data).popleft()
            await Timer(round((len(frame) + wire.ETH_WIRE_OVERHEAD) * 8 / self.cfg.gbps * 1000), "ps")
            self.queued -= len(frame)
            if self.down:
                self.count["dropped_down"] += 1
                continue
            copies = 2 if self.net.rng.random() < self.cfg.dup else 1
            self.count["duplicated"] += copies - 1
            for _ in range(copies):
                delay = self.cfg.latency_ns
                if self.net.rng.random() < self.cfg.reorder:
                    delay += self.cfg.reorder_ns
                    self.count["reordered"] += 1
                cocotb.start_soon(self._arrive(frame, delay, self.epoch))

    async def _arrive(self, frame, delay_ns, epoch):
        await Timer(round(delay_ns * 1000), "ps")
        if epoch != self.epoch:
            self.count["dropped_down"] += 1       # it was on the wire when the link died
            return
        now = get_sim_time("ns")
        self.count["delivered"] += 1
        self.log.append((now, self.net.ev_of(frame)))
        if self._pcap is not None:
            self._pcap.write(frame, now)
        self.deliver(frame)

    def set_down(self, down: bool) -> None:
        if down and not self.down:
            self.epoch += 1
        self.down = down

    def close(self):
        if self._pcap is not None:
            self._pcap.close()


def _name(node) -> str:
    kind, plane, n = node
    return f"p{plane}_{kind}{n}"


@dataclass
class Failure:
    """Links that go down at ``at_ns`` and come back at ``until_ns`` (None: never), in
    simulated ns. ``paths`` are the (plane, spine) paths it cuts for the traffic of ``hosts``;
    ``ports`` the (host, plane) NIC ports that lose their link with it."""
    links: list
    at_ns: float
    until_ns: float | None = None
    what: str = ""
    paths: list = field(default_factory=list)
    hosts: list = field(default_factory=list)
    ports: list = field(default_factory=list)

    def hit(self, host: int, path: tuple) -> bool:
        """Whether ``host``'s traffic on ``path`` crosses what this failure kills."""
        return host in self.hosts and list(path) in [list(p) for p in self.paths]


@dataclass
class Network:
    """``hosts`` hosts (NICs), each on leaf ``h`` of every plane, ``spines`` spines a plane.

    ``attach(h, plane, send, mac)`` gives the function that hands frames to host ``h``'s port on
    ``plane`` (and its MAC, the Ethernet destination its leaf writes); ``inject(h, plane,
    frame)`` is what that port sends. Routes are in the format of ``block`` (``block_bits``).
    ``link_cfg(a, b)`` is the configuration of the link from node ``a`` to node ``b`` (nodes
    are (kind, plane, number), kind "host", "leaf" or "spine")."""
    planes: int
    spines: int
    hosts: int
    link_cfg: object = None
    seed: int = 0
    pcap_dir: Path | None = None
    ev_of: object = None          # frame -> EV, for the per-path log
    block: int = BLOCK
    block_bits: int = BLOCK_BITS

    def __post_init__(self):
        self.rng = random.Random(self.seed)
        if self.pcap_dir is not None:
            self.pcap_dir = Path(self.pcap_dir)
            self.pcap_dir.mkdir(parents=True, exist_ok=True)
        if self.ev_of is None:
            self.ev_of = lambda frame: 0
        if self.link_cfg is None:
            self.link_cfg = lambda a, b: LinkConfig()
        self.links: dict[tuple, Link] = {}
        self.ports: dict[tuple, object] = {}
        self.macs: dict[tuple, int] = {}
        self.count = Counter()
        for p in range(self.planes):
            for h in range(self.hosts):
                host, leaf = ("host", p, h), ("leaf", p, h)
                self._link(host, leaf, lambda f, leaf=leaf, host=host: self._switch(leaf, f, host))
                self._link(leaf, host, lambda f, h=h, p=p: self.ports[(h, p)](f))
                for s in range(self.spines):
                    spine = ("spine", p, s)
                    self._link(leaf, spine,
                               lambda f, spine=spine, leaf=leaf: self._switch(spine, f, leaf))
                    self._link(spine, leaf,
                               lambda f, leaf=leaf, spine=spine: self._switch(leaf, f, spine))

    def _link(self, a, b, deliver):
        # The leaf-to-host link is the last hop: no ECN marking there.
        self.links[(a, b)] = Link(self, a, b, self.link_cfg(a, b), b[0] == "host", deliver)

    def attach(self, host: int, plane: int, send, mac: int | None = None) -> None:
        self.ports[(host, plane)] = send
        if mac is not None:
            self.macs[(host, plane)] = mac

    def inject(self, host: int, plane: int, frame: bytes) -> None:
        self.links[(("host", plane, host), ("leaf", plane, host))].offer(frame)

    def _switch(self, node, frame: bytes, came_from) -> None:
        """A switch's forwarding decision (uN shift-and-forward, as fabric.forward says)."""
        hop = forward(node, frame, self.hosts, self.spines, self.block, self.block_bits,
                      lambda host: self.macs.get((host[2], host[1]), 0), came_from)
        if hop.to is None:
            self.count[f"dropped at a {node[0]}: {hop.why}"] += 1
            return
        self.links[(node, hop.to)].offer(hop.frame)

    def cable(self, a, b) -> list[Link]:
        """Both directions of the cable between nodes ``a`` and ``b``."""
        return [self.links[(a, b)], self.links[(b, a)]]

    def spine_link(self, plane, spine, leaf) -> list[Link]:
        return self.cable(("leaf", plane, leaf), ("spine", plane, spine))

    def plane_links(self, plane) -> list[Link]:
        return [lk for (a, _), lk in self.links.items() if a[1] == plane]

    async def schedule(self, failures: list[Failure], t0_ns: float = 0.0, on_event=None):
        """Runs the failures' timetable (times from ``t0_ns``); ``on_event(text)`` hears of
        each change."""
        events = []
        for f in failures:
            events.append((f.at_ns, True, f))
            if f.until_ns is not None:
                events.append((f.until_ns, False, f))
        for at, down, f in sorted(events, key=lambda e: e[0]):
            now = get_sim_time("ns") - t0_ns
            if at > now:
                await Timer(round((at - now) * 1000), "ps")
            for lk in f.links:
                lk.set_down(down)
            text = f"{f.what} {'dies' if down else 'comes back'}"
            self.count[text] += 1
            if on_event is not None:
                on_event(text)

    def totals(self) -> Counter:
        c = Counter()
        for lk in self.links.values():
            c.update(lk.count)
        return c

    def close(self):
        for lk in self.links.values():
            lk.close()
