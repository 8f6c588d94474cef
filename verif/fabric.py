"""How the simulated multi-plane leaf-spine fabric names its switches and forwards by uSID, as
SRv6 uN switches do (verif/network.py times it).

Every switch owns one uSID: leaf ``h`` of plane ``p`` is ``p << 12 | 0x20 + h``, spine ``s`` is
``p << 12 | 0x10 + s`` (the numbering of MRC-REFERENCE's example, see :func:`template`). A switch
that finds its own uSID first after the locator block shifts the rest left by 16 bits and
forwards toward the next uSID; when the carrier is used up it takes the next one from the SRH
(segments_left - 1), and when none is left the route ends at that switch.
"""

from __future__ import annotations

from dataclasses import dataclass

from mrcnic.evmap import USID_BITS, UsidTemplate

__all__ = ["template", "leaf_usid", "spine_usid", "Step", "usid_step", "BLOCK", "BLOCK_BITS",
           "ip_offsets"]

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


def usid_step(frame: bytes, block: int = BLOCK, block_bits: int = BLOCK_BITS) -> Step:
    """What a uN switch does with ``frame``: its outer destination's first uSID is the switch's
    own; the rest shift left by a uSID (the block stays) and the hop limit drops by one; when
    the carrier is used up the SRH's next segment becomes the destination (segments_left - 1),
    and when none is left the route ends here."""
    eth = 14
    if len(frame) < eth + 40 or frame[12:14] != b"\x86\xdd":
        return Step(error="not IPv6")
    nh = frame[eth + 6]
    srh = eth + 40 if nh == 43 else None
    if nh not in (41, 43):
        return Step(error="not SRv6 (no outer header to route on)")
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
    if own == 0 and next_segment():
        own = first()
    if own is None:
        return Step(error=f"destination is not in block {block:#x}")
    if own == 0:
        return Step(error="the route is used up")
    rest = (dst() & ((1 << shift) - 1)) << USID_BITS & ((1 << shift) - 1)
    out[eth + 24:eth + 40] = ((block << shift) | rest).to_bytes(16, "big")
    nxt = first()
    if nxt == 0:
        nxt = first() if next_segment() else None
    return Step(bytes(out), own, nxt or None)
