"""EV -> path: the one source of how an entropy value becomes a source route.

An EV is 32 bits: the UDP source port (bits 31..16) concatenated with the low 16 bits of the
inner IPv6 flow label (bits 15..0). In SRv6 uSID mode the EV's low half names the path:
its plane field selects the network plane (and so the NIC port), its spine field the uplink/spine.
The rest of the EV is free entropy.

Each destination has a :class:`UsidTemplate`: a locator block and the uSIDs of the path in hop
order. The plane number goes into every uSID (its top bits), the spine into the uSID of the hop
that chooses the spine. The uSIDs are packed into carriers, each one IPv6 address: the block,
then as many 16-bit uSIDs as fit, zero-filled (the end-of-carrier marker). The first carrier is
the outer destination address; when the path needs more, an SRH carries all carriers in reverse
order (RFC 8754 segment list, not reduced, so segments_left = last_entry = carriers - 1).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

__all__ = ["EV_BITS", "USID_BITS", "ev_join", "ev_split", "EvLayout", "UsidTemplate", "Route",
           "format_addr"]

EV_BITS = 32
USID_BITS = 16


def ev_split(ev: int) -> tuple[int, int]:
    """(UDP source port, flow label low 16 bits) of an EV."""
    if not 0 <= ev < 1 << EV_BITS:
        raise ValueError(f"EV {ev:#x} is not a 32-bit value")
    return ev >> 16, ev & 0xFFFF


def ev_join(sport: int, flow_label: int) -> int:
    """The EV a packet carries, from its UDP source port and inner flow label."""
    if not 0 <= sport <= 0xFFFF:
        raise ValueError(f"UDP source port {sport} is not 16 bits")
    if not 0 <= flow_label < 1 << 20:
        raise ValueError(f"flow label {flow_label:#x} is not 20 bits")
    return (sport << 16) | (flow_label & 0xFFFF)


def format_addr(addr: int) -> str:
    return str(ipaddress.IPv6Address(addr))


def _bits_for(n: int) -> int:
    return max(0, (n - 1).bit_length())


@dataclass(frozen=True)
class EvLayout:
    """Where the plane and spine fields sit in an EV.

    Parameters
    ----------
    planes, spines : counts; each field is just wide enough for its count.
    plane_shift, spine_shift : bit positions of the fields in the EV.
    """
    planes: int = 2
    spines: int = 2
    plane_shift: int = 8
    spine_shift: int = 0

    def __post_init__(self):
        for name in ("planes", "spines"):
            v = getattr(self, name)
            if not isinstance(v, int) or not 1 <= v <= 16:
                raise ValueError(f"{name} must be an integer from 1 to 16, not {v!r}")
        if self.plane_shift + self.plane_bits > 16 or self.spine_shift + self.spine_bits > 16:
            raise ValueError("the plane and spine fields must lie in the EV's low 16 bits")
        pm = ((1 << self.plane_bits) - 1) << self.plane_shift
        sm = ((1 << self.spine_bits) - 1) << self.spine_shift
        if pm & sm:
            raise ValueError(f"plane field {pm:#06x} and spine field {sm:#06x} overlap")

    @property
    def plane_bits(self) -> int:
        return _bits_for(self.planes)

    @property
    def spine_bits(self) -> int:
        return _bits_for(self.spines)

    @staticmethod
    def _field(ev: int, shift: int, bits: int) -> int:
        return (ev >> shift) & ((1 << bits) - 1)

    def plane(self, ev: int) -> int:
        p = self._field(ev, self.plane_shift, self.plane_bits)
        if p >= self.planes:
            raise ValueError(f"EV {ev:#010x} names plane {p}, but there are {self.planes}")
        return p

    def spine(self, ev: int) -> int:
        s = self._field(ev, self.spine_shift, self.spine_bits)
        if s >= self.spines:
            raise ValueError(f"EV {ev:#010x} names spine {s}, but there are {self.spines}")
        return s

    @property
    def paths(self) -> int:
        """How many path numbers :meth:`path` can give: every (plane, spine) field value."""
        return 1 << (self.plane_bits + self.spine_bits)

    def path(self, ev: int) -> int:
        """The path an EV names, as one number: its plane field above its spine field. The raw
        fields, unchecked, as the gateware reads them."""
        return (self._field(ev, self.plane_shift, self.plane_bits) << self.spine_bits
                | self._field(ev, self.spine_shift, self.spine_bits))

    def make(self, plane: int, spine: int, entropy: int = 0) -> int:
        """An EV for (plane, spine); ``entropy`` fills the bits outside both fields."""
        if not 0 <= plane < self.planes or not 0 <= spine < self.spines:
            raise ValueError(f"(plane {plane}, spine {spine}) is outside "
                             f"{self.planes} planes x {self.spines} spines")
        pm = ((1 << self.plane_bits) - 1) << self.plane_shift
        sm = ((1 << self.spine_bits) - 1) << self.spine_shift
        return (entropy & ~(pm | sm) & 0xFFFFFFFF) | (plane << self.plane_shift) | (
            spine << self.spine_shift)


@dataclass(frozen=True)
class Route:
    """Where a packet on one EV goes: the outer destination and, if needed, the SRH segments."""
    dst: int
    segments: tuple[int, ...] = ()   # SRH segment list, segment[0] first (i.e. last visited)

    @property
    def segments_left(self) -> int:
        return len(self.segments) - 1 if self.segments else 0

    def __str__(self):
        s = format_addr(self.dst)
        if self.segments:
            s += " SRH[" + ", ".join(format_addr(a) for a in self.segments) + "]"
        return s


@dataclass(frozen=True)
class UsidTemplate:
    """The source route to one destination, before the EV picks plane and spine.

    Parameters
    ----------
    block : the locator block value (e.g. 0xfcbb).
    block_bits : its length, a multiple of 16 (16 for F1616, 32 for F3216).
    usids : the path's uSIDs in hop order, plane and spine bits zero.
    spine_index : which uSID receives the spine number (ORed into its low bits).
    plane_shift : bit position of the plane number inside every uSID.
    """
    block: int
    usids: tuple[int, ...]
    spine_index: int
    block_bits: int = 16
    plane_shift: int = 12

    def __post_init__(self):
        if self.block_bits % USID_BITS or not USID_BITS <= self.block_bits <= 64:
            raise ValueError(f"block_bits {self.block_bits} must be 16, 32, 48 or 64")
        if not 0 <= self.block < 1 << self.block_bits:
            raise ValueError(f"block {self.block:#x} does not fit in {self.block_bits} bits")
        if not self.usids:
            raise ValueError("a template needs at least one uSID")
        for u in self.usids:
            if not 0 < u < 1 << USID_BITS:
                raise ValueError(f"uSID {u:#x} must be a non-zero 16-bit value")
        if not 0 <= self.spine_index < len(self.usids):
            raise ValueError(f"spine_index {self.spine_index} is outside the {len(self.usids)} uSIDs")

    @property
    def per_carrier(self) -> int:
        """uSIDs one carrier holds."""
        return (128 - self.block_bits) // USID_BITS

    def usids_for(self, plane: int, spine: int) -> list[int]:
        out = [u | (plane << self.plane_shift) for u in self.usids]
        out[self.spine_index] |= spine
        return out

    def carriers(self, plane: int, spine: int) -> list[int]:
        us = self.usids_for(plane, spine)
        n = self.per_carrier
        result = []
        for i in range(0, len(us), n):
            chunk = us[i:i + n]
            addr = self.block
            for u in chunk:
                addr = (addr << USID_BITS) | u
            addr <<= USID_BITS * (n - len(chunk))
            result.append(addr)
        return result

    def route(self, ev: int, layout: EvLayout) -> Route:
        """The outer destination (and SRH segments) for a packet sent on ``ev``."""
        cs = self.carriers(layout.plane(ev), layout.spine(ev))
        return Route(cs[0], tuple(reversed(cs)) if len(cs) > 1 else ())
