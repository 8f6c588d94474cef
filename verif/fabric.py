"""How the multi-plane leaf-spine fabric names its nodes and forwards by uSID, as SRv6 uN
switches do: the one source of the route format, for the simulated network (verif/network.py)
and the Linux one (verif/linux_fabric.py).

Every node owns one uSID: leaf ``h`` of plane ``p`` is ``p << 12 | 0x20 + h``, spine ``s`` is
``p << 12 | 0x10 + s`` (the numbering of MRC-REFERENCE's example), and the NIC of host ``h``,
cabled to leaf ``h``, is ``p << 12 | 0x30 + h``. A route from host ``a`` to host ``b`` is
(leaf a, spine, leaf b, host b), see :func:`template`. A switch that finds its own uSID first
after the locator block shifts the rest left by 16 bits and forwards toward the next uSID (uN:
End with the NEXT-CSID flavour, RFC 9800 4.1); when the carrier is used up it takes the next
one from the SRH (segments_left - 1). The route ends at the NIC that owns the last uSID: it is
the last SR node, and takes the inner packet (RFC 8986 4.1, upper-layer header processing). A
switch left with nothing after its own uSID and no SRH segment drops the packet, as Linux does.
"""

from __future__ import annotations

from dataclasses import dataclass

from mrcnic.evmap import USID_BITS, UsidTemplate

__all__ = ["template", "leaf_usid", "spine_usid", "host_usid", "sid", "nic_mac", "nic_ip", "Step",
           "usid_step", "forward", "Hop", "owner", "neighbours", "node_usid", "port_mac",
           "BLOCK", "BLOCK_BITS", "FORMATS", "ip_offsets", "frame_ev"]

#: The carrier formats: name -> (locator block, its bits). F3216 is the common one.
FORMATS = {"F3216": (0xFCBBBB00, 32), "F1616": (0xFCBB, 16)}
BLOCK, BLOCK_BITS = FORMATS["F3216"]


def leaf_usid(plane, leaf):
    return (plane << 12) | (0x20 + leaf)


def spine_usid(plane, spine):
    return (plane << 12) | (0x10 + spine)


def host_usid(plane, host):
    return (plane << 12) | (0x30 + host)


def nic_mac(host: int) -> str:
    """The MAC of host ``host``'s NIC (every plane's port: the planes are separate networks)."""
    return f"02:00:00:00:00:{host + 1:02x}"


def nic_ip(host: int) -> int:
    """Host ``host``'s IPv6 address (the inner packets' source and destination)."""
    return (0xFD00 << 112) | (host + 1)


def sid(usid: int, block: int = BLOCK, block_bits: int = BLOCK_BITS) -> int:
    """A node's SRv6 address: the block, its uSID, zeros (what its uN route matches on, and a
    NIC's net.sid)."""
    return (block << (128 - block_bits)) | (usid << (128 - block_bits - USID_BITS))


def template(src_leaf: int, dst_leaf: int, block: int = BLOCK,
             block_bits: int = BLOCK_BITS) -> UsidTemplate:
    """The source route from the host on ``src_leaf`` to the host on ``dst_leaf``, any plane
    and spine: its leaf, the spine (the EV's), the peer's leaf, the peer itself."""
    return UsidTemplate(block, (0x20 + src_leaf, 0x10, 0x20 + dst_leaf, 0x30 + dst_leaf),
                        spine_index=1, block_bits=block_bits)


@dataclass
class Step:
    """One uN switch's decision: the uSID it consumed (``own``), the next uSID to forward to
    (None: the route ends at this switch), the frame as it leaves, or why it cannot go on."""
    frame: bytes = b""
    own: int = 0
    next_usid: int | None = None
    error: str = ""


def ip_offsets(frame: bytes) -> tuple[int, int]:
    """(offset of the IPv6 header switches route on, offset of the inner IPv6 header): the
    same for a plain RoCEv2 frame; past the outer header and SRH of an SRv6 one."""
    outer = 14
    nh = frame[outer + 6]
    at = outer + 40
    if nh == 43:
        nh = frame[at]
        at += 8 + 8 * frame[at + 1]
    if nh == 41:
        return outer, at
    return outer, outer


def frame_ev(frame: bytes) -> int:
    """The EV a frame carries: its inner UDP source port and flow label's low half."""
    _, inner = ip_offsets(frame)
    return (int.from_bytes(frame[inner + 40:inner + 42], "big") << 16
            | int.from_bytes(frame[inner + 2:inner + 4], "big"))


def usid_step(frame: bytes, block: int = BLOCK, block_bits: int = BLOCK_BITS) -> Step:
    """What a uN node does with ``frame`` whose outer destination's first uSID (``own``) is its
    own (RFC 9800 4.1.1, NEXT-CSID): if anything follows it in the carrier, the rest shift left
    by a uSID (the block stays) and the first of them is next (0: nobody's); if nothing does,
    the SRH's next segment becomes the destination (segments_left - 1) and its first uSID is
    next; with no segment left ``next_usid`` is None: the route ends at this node. The hop
    limit drops by one. Whatever follows the IPv6 header (the NIC's inner IPv6 header, or not)."""
    eth = 14
    if len(frame) < eth + 40 or frame[12:14] != b"\x86\xdd":
        return Step(error="not IPv6")
    nh = frame[eth + 6]
    srh = eth + 40 if nh == 43 else None
    if frame[eth + 7] <= 1:
        return Step(error="hop limit exhausted")
    out = bytearray(frame)
    out[eth + 7] -= 1
    shift = 128 - block_bits

    def dst():
        return int.from_bytes(out[eth + 24:eth + 40], "big")

    def next_segment():
        """The SRH's next carrier, or False when there is none."""
        if srh is None or out[srh + 3] == 0:
            return False
        out[srh + 3] -= 1
        at = srh + 8 + 16 * out[srh + 3]
        out[eth + 24:eth + 40] = out[at:at + 16]
        return True

    def first():
        d = dst()
        if d >> shift != block:
            return None
        return (d >> (shift - USID_BITS)) & ((1 << USID_BITS) - 1)

    own = first()
    if own is None:
        return Step(error=f"destination is not in block {block:#x}")
    rest = (dst() & ((1 << shift) - 1)) << USID_BITS & ((1 << shift) - 1)
    if rest:
        out[eth + 24:eth + 40] = ((block << shift) | rest).to_bytes(16, "big")
        nxt = first()
    else:
        nxt = first() if next_segment() else None
    return Step(bytes(out), own, nxt)


_KINDS = ("host", "leaf", "spine")


def node_usid(node) -> int:
    """The uSID a node ((kind, plane, number)) owns."""
    kind, plane, n = node
    return {"host": host_usid, "leaf": leaf_usid, "spine": spine_usid}[kind](plane, n)


def owner(usid: int, hosts: int, spines: int):
    """The node that owns ``usid`` in a fabric of ``hosts`` hosts (and leaves) and ``spines``
    spines a plane, or None."""
    plane, low = usid >> 12, usid & 0xFFF
    for kind, base, count in (("spine", 0x10, spines), ("leaf", 0x20, hosts),
                              ("host", 0x30, hosts)):
        if base <= low < base + count:
            return (kind, plane, low - base)
    return None


def neighbours(node, hosts: int, spines: int) -> list:
    """The nodes cabled to ``node``: a leaf's spines and its host, a spine's leaves, a host's
    leaf (one plane each)."""
    kind, p, n = node
    if kind == "leaf":
        return [("spine", p, s) for s in range(spines)] + [("host", p, n)]
    if kind == "spine":
        return [("leaf", p, h) for h in range(hosts)]
    return [("leaf", p, n)]


def port_mac(node, peer) -> int:
    """The MAC of ``node``'s port toward ``peer`` (locally administered, unique in the fabric;
    a host's is its NIC's on that plane, which the testbenches set themselves)."""
    (k, p, n), (pk, _, pn) = node, peer
    return int.from_bytes(bytes([0x02, _KINDS.index(k) << 4 | p, n, _KINDS.index(pk), pn, 0x01]),
                          "big")


@dataclass
class Hop:
    """Where a switch sends a frame (``to``: the next node, None: dropped, ``why``) and the
    frame as it leaves."""
    to: tuple | None
    frame: bytes = b""
    why: str = ""


def forward(node, frame: bytes, hosts: int, spines: int, block: int = BLOCK,
            block_bits: int = BLOCK_BITS, dst_mac=None, came_from=None) -> Hop:
    """A switch's decision for ``frame``, as a Linux router with the fabric's routes makes it:
    its own uSID first: uN (shift, and on to the next uSID's owner; nothing after it and no SRH
    segment left: dropped, RFC 8986 4.1); a neighbour's uSID first: forwarded to it unchanged
    (plain IPv6 forwarding, the route to that neighbour's prefix); anything else: no route. The
    hop limit drops by one on the way (a frame with 1 left is dropped). The Ethernet addresses
    become this port's and the next node's (``dst_mac(node)`` for a host, if given). A frame
    that came from ``came_from`` addressed to another MAC than this port's is not taken."""
    eth = 14
    if came_from is not None and frame[0:6] != port_mac(node, came_from).to_bytes(6, "big"):
        return Hop(None, why="addressed to another MAC than this port's")
    if len(frame) < eth + 40 or frame[12:14] != b"\x86\xdd":
        return Hop(None, why="not IPv6")
    shift = 128 - block_bits
    dst = int.from_bytes(frame[eth + 24:eth + 40], "big")
    if dst >> shift != block:
        return Hop(None, why=f"no route: destination not in block {block:#x}")
    first = (dst >> (shift - USID_BITS)) & ((1 << USID_BITS) - 1)
    if first == node_usid(node):
        step = usid_step(frame, block, block_bits)
        if step.error:
            return Hop(None, why=step.error)
        if step.next_usid is None:
            return Hop(None, why="nothing after its own uSID and no SRH segment left (End drops "
                                 "it: RFC 8986 4.1)")
        if step.next_usid == 0:
            return Hop(None, why="no route: a zero uSID next")
        target, out = owner(step.next_usid, hosts, spines), bytearray(step.frame)
    else:
        if frame[eth + 7] <= 1:
            return Hop(None, why="hop limit exhausted")
        target, out = owner(first, hosts, spines), bytearray(frame)
        out[eth + 7] -= 1
    if target not in neighbours(node, hosts, spines):
        return Hop(None, why=f"no route to the next uSID's owner {target}")
    mac = dst_mac(target) if (target[0] == "host" and dst_mac) else port_mac(target, node)
    out[0:6] = mac.to_bytes(6, "big")
    out[6:12] = port_mac(node, target).to_bytes(6, "big")
    return Hop(target, bytes(out))
