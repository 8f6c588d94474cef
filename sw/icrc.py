"""The RoCEv2 invariant CRC (ICRC), as the NIC computes it.

The ICRC is CRC-32 (the Ethernet polynomial, reflected, initial value all ones, final inversion)
over: eight bytes of 0xFF standing for the InfiniBand LRH that RoCEv2 does not carry, then the
inner IPv6 header, UDP, BTH and everything after it up to the ICRC, with the fields a network may
change in flight replaced by ones (IPv6 traffic class, flow label and hop limit, the UDP checksum,
BTH byte 4). It follows the payload on the wire, least significant byte first.

SRv6: the ICRC covers the RoCEv2 packet only, never the outer IPv6 header or the SRH. Every
switch on a uSID path rewrites the outer destination (shift-and-forward) and decrements its hop
limit, and the SRH's segments_left changes, so the outer header cannot be covered; the sender
computes the ICRC before encapsulation and the receiver checks it after decapsulation.
"""

from __future__ import annotations

import zlib

from . import wire

__all__ = ["ICRC_MASK", "LRH_BYTES", "CRC_RESIDUE", "mask_fields", "icrc", "icrc_bytes",
           "roce_offset", "roce_icrc_ok", "frame_icrc_ok"]

LRH_BYTES = b"\xff" * 8
#: CRC-32 of any message followed by its own CRC (little-endian): how a checker knows it is right
#: without finding where the CRC starts.
CRC_RESIDUE = 0x2144DF1C

#: The fields replaced by ones, as (header, field, byte offset of the header from the inner IPv6).
ICRC_MASK = (
    (wire.IPV6, "tc", 0), (wire.IPV6, "flow_label", 0), (wire.IPV6, "hop_limit", 0),
    (wire.UDP, "checksum", wire.IPV6.length),
    (wire.BTH, "fecn", wire.IPV6.length + wire.UDP.length),
    (wire.BTH, "becn", wire.IPV6.length + wire.UDP.length),
    (wire.BTH, "resv6", wire.IPV6.length + wire.UDP.length),
)


def mask_fields() -> dict[int, int]:
    """{byte offset from the inner IPv6 header: mask of the bits replaced by ones}."""
    masks: dict[int, int] = {}
    for hdr, name, base in ICRC_MASK:
        first = hdr.bit_offset(name)
        for bit in range(first, first + hdr.field(name).bits):
            byte = base + bit // 8
            masks[byte] = masks.get(byte, 0) | (0x80 >> (bit % 8))
    return masks


_MASKS = mask_fields()
MASKED_SPAN = max(_MASKS) + 1


def icrc(roce: bytes) -> int:
    """ICRC of a RoCEv2 packet given from its (inner) IPv6 header to the end of its payload."""
    if len(roce) < MASKED_SPAN:
        raise ValueError(f"a RoCEv2 packet is at least {MASKED_SPAN} bytes up to the BTH, "
                         f"got {len(roce)}")
    head = bytearray(roce[:MASKED_SPAN])
    for off, m in _MASKS.items():
        head[off] |= m
    return zlib.crc32(bytes(head) + roce[MASKED_SPAN:], zlib.crc32(LRH_BYTES))


def icrc_bytes(roce: bytes) -> bytes:
    """The four ICRC bytes as they follow the payload on the wire."""
    return icrc(roce).to_bytes(4, "little")


def roce_offset(frame: bytes) -> int:
    """Byte offset of the RoCEv2 (inner) IPv6 header in an Ethernet frame, skipping an SRv6
    outer IPv6 header and its SRH if present."""
    off = wire.ETHERNET.length
    eth = wire.ETHERNET.unpack(frame)
    if eth["ethertype"] != wire.ETHERTYPE_IPV6:
        raise ValueError(f"ethertype {eth['ethertype']:#06x} is not IPv6")
    ip = wire.IPV6.unpack(frame[off:])
    nh = ip["next_header"]
    if nh in (wire.IPPROTO_IPV6, wire.IPPROTO_ROUTING):
        off += wire.IPV6.length
        if nh == wire.IPPROTO_ROUTING:
            srh = wire.SRH.unpack(frame[off:])
            off += 8 + 8 * srh["hdr_ext_len"]
    return off


def roce_icrc_ok(roce: bytes) -> bool:
    """True when a RoCEv2 packet (inner IPv6 onwards) ends with its right ICRC."""
    return len(roce) >= MASKED_SPAN + 4 and icrc_bytes(roce[:-4]) == roce[-4:]


def frame_icrc_ok(frame: bytes) -> bool:
    """True when the frame's last four bytes are the right ICRC for its RoCEv2 packet."""
    return roce_icrc_ok(frame[roce_offset(frame):])
