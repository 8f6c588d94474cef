"""A multi-plane leaf-spine fabric that forwards by uSID, as SRv6 uN switches do.

Every switch owns one uSID: leaf ``h`` of plane ``p`` is ``p << 12 | 0x20 + h``, spine ``s`` is
``p << 12 | 0x10 + s`` (the numbering of MRC-REFERENCE's example, see :func:`template`). A switch
that finds its own uSID first after the locator block shifts the rest left by 16 bits and
forwards toward the next uSID; when the carrier is used up it takes the next one from the SRH
(segments_left - 1), and when none is left it decapsulates and delivers the inner packet to the
host below it. A link that is down drops what crosses it from the moment it dies.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from scapy.layers.inet6 import IPv6, IPv6ExtHdrSegmentRouting
from scapy.layers.l2 import Ether

from mrcnic.evmap import USID_BITS, UsidTemplate

__all__ = ["Fabric", "template", "Delivery", "leaf_usid", "spine_usid"]

BLOCK, BLOCK_BITS = 0xFCBB, 16


def leaf_usid(plane, leaf):
    return (plane << 12) | (0x20 + leaf)


def spine_usid(plane, spine):
    return (plane << 12) | (0x10 + spine)


def template(src_leaf: int, dst_leaf: int) -> UsidTemplate:
    """The source route from a host on ``src_leaf`` to a host on ``dst_leaf``, any plane/spine."""
    return UsidTemplate(BLOCK, (0x20 + src_leaf, 0x10, 0x20 + dst_leaf), spine_index=1,
                        block_bits=BLOCK_BITS)


@dataclass
class Delivery:
    frame: bytes | None          # the decapsulated frame, or None if it was dropped
    time: float                  # arrival (or drop) time, seconds
    hops: list = field(default_factory=list)
    dropped_at: tuple | None = None
    reason: str = ""


class Fabric:
    def __init__(self, planes, spines, leaves=4, hop_latency=1e-6, gbps=100.0):
        self.planes, self.spines, self.leaves = planes, spines, leaves
        self.hop_latency, self.gbps = hop_latency, gbps
        self.down: dict[frozenset, float] = {}   # link -> time it died
        self.nodes = {}
        for p in range(planes):
            for h in range(leaves):
                self.nodes[leaf_usid(p, h)] = ("leaf", p, h)
            for s in range(spines):
                self.nodes[spine_usid(p, s)] = ("spine", p, s)

    def kill(self, plane, spine, leaf, at):
        """Link leaf-spine of ``plane`` dies at time ``at`` (both directions)."""
        self.down[frozenset({("spine", plane, spine), ("leaf", plane, leaf)})] = at

    def _dead(self, a, b, t):
        died = self.down.get(frozenset({a, b}))
        return died is not None and t >= died

    def forward(self, frame: bytes, plane: int, t: float, src_leaf: int) -> Delivery:
        pkt = Ether(frame)
        outer = pkt[IPv6]
        at = ("leaf", plane, src_leaf)      # the host's port on this plane is on its leaf
        hops = []
        per_hop = self.hop_latency + len(frame) * 8 / (self.gbps * 1e9)
        t += per_hop
        for _ in range(64):
            da = int(ipaddress.IPv6Address(outer.dst))
            shift = 128 - BLOCK_BITS
            if da >> shift != BLOCK:
                return Delivery(None, t, hops, at, f"destination {outer.dst} is not in the block")
            rest = da & ((1 << shift) - 1)
            usid = rest >> (shift - USID_BITS)
            if usid == 0:   # carrier used up: the next from the SRH, or decapsulate here
                srh = outer.getlayer(IPv6ExtHdrSegmentRouting)
                if srh is not None and srh.segleft > 0:
                    srh.segleft -= 1
                    outer.dst = srh.addresses[srh.segleft]
                    continue
                inner = outer.payload
                while not isinstance(inner, IPv6):
                    inner = inner.payload
                return Delivery(bytes(Ether(src=pkt.src, dst=pkt.dst) / inner), t, hops)
            node = self.nodes.get(usid)
            if node is None:
                return Delivery(None, t, hops, at, f"no switch owns uSID {usid:#06x}")
            if node != at:
                if node[1] != at[1] or node[0] == at[0]:
                    return Delivery(None, t, hops, at, f"{at} has no link to {node}")
                if self._dead(at, node, t):
                    return Delivery(None, t, hops, at, f"link {at}-{node} is down")
                t += per_hop
                at = node
            hops.append(node)
            # uN: shift the remaining uSIDs left, keeping the block.
            rest = (rest << USID_BITS) & ((1 << shift) - 1)
            outer.dst = str(ipaddress.IPv6Address((BLOCK << shift) | rest))
            outer.hlim -= 1
        return Delivery(None, t, hops, at, "routing loop")
