"""Packets for testbenches: random MRC traffic built with scapy, and readable comparisons."""

from __future__ import annotations

import random

from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrSegmentRouting
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw

from mrcnic import layers as L
from mrcnic import wire
from mrcnic.evmap import EvLayout, UsidTemplate, ev_split, format_addr

__all__ = ["random_mrc", "encapsulate", "packet_diff", "assert_frames_equal"]

_MACS = ("02:00:00:00:00:01", "02:00:00:00:00:02")


def _addr(rng):
    return format_addr((0xFD00 << 112) | rng.getrandbits(64))


def random_mrc(rng: random.Random, *, max_payload=1500, ev=None, payload=None) -> Packet:
    """A random, well-formed MRC packet (plain RoCEv2 framing), any opcode, ICRC included; with
    ``payload``, a data packet carrying exactly that many bytes."""
    ev = rng.getrandbits(32) if ev is None else ev
    sport, fl = ev_split(ev)
    op = rng.choice(sorted(wire.DATA_OPCODES) if payload else list(wire.Opcode))
    tsh = rng.random() < 0.5
    bth = L.BTH(opcode=int(op), se=rng.getrandbits(1), pad=0, tver=0, pkey=0xFFFF,
                dqp=rng.getrandbits(24), ackreq=rng.getrandbits(1), rtx=rng.getrandbits(1),
                tsh=int(tsh and op in wire.DATA_OPCODES), psn=rng.getrandbits(24))
    pkt = bth
    for hdr in wire.headers_after_bth(op, tsh=bool(bth.tsh)):
        layer = L.LAYERS[hdr]
        pkt = pkt / layer(**{f.name: rng.getrandbits(f.bits) for f in hdr.fields if not f.reserved
                             and not (f.enum and f.name in ("m", "nack_reason"))})
    if op in wire.DATA_OPCODES:
        pkt = pkt / Raw(rng.randbytes(payload or rng.randint(1, max_payload)))
    dscp = wire.DscpClass.DATA_TRIMMABLE if op in wire.DATA_OPCODES else wire.DscpClass.CONTROL
    return (Ether(src=_MACS[0], dst=_MACS[1])
            / IPv6(src=_addr(rng), dst=_addr(rng), tc=(dscp << 2) | 0b10, fl=fl,
                   hlim=64)
            / UDP(sport=sport, dport=wire.ROCE_UDP_PORT, chksum=0) / pkt)


def encapsulate(pkt: Packet, template: UsidTemplate, layout: EvLayout, ev: int,
                src="fc00::1", force_srh=False) -> Packet:
    """The SRv6 uSID form of a plain MRC packet: outer IPv6 to the EV's carrier, and an SRH when
    the path needs more than one carrier (or always, with ``force_srh``)."""
    route = template.route(ev, layout)
    inner = pkt[IPv6]
    outer = IPv6(src=src, dst=format_addr(route.dst), hlim=64,
                 tc=inner.tc, fl=inner.fl)
    segments = route.segments or ((route.dst,) if force_srh else ())
    if segments:
        srh = IPv6ExtHdrSegmentRouting(addresses=[format_addr(a) for a in segments],
                                       segleft=len(segments) - 1,
                                       lastentry=len(segments) - 1, nh=wire.IPPROTO_IPV6)
        outer = outer / srh
    else:
        outer.nh = wire.IPPROTO_IPV6
    return Ether(src=pkt[Ether].src, dst=pkt[Ether].dst) / outer / inner.copy()


def _layers(p: Packet):
    out = []
    while p is not None and not isinstance(p, type(None)) and p.__class__.__name__ != "NoPayload":
        out.append(p)
        p = p.payload
    return out


def packet_diff(expected: bytes, got: bytes) -> str:
    """Field-by-field differences between two frames, dissected with scapy ('' if equal)."""
    if expected == got:
        return ""
    lines = []
    e_layers, g_layers = _layers(Ether(expected)), _layers(Ether(got))
    for i in range(max(len(e_layers), len(g_layers))):
        e = e_layers[i] if i < len(e_layers) else None
        g = g_layers[i] if i < len(g_layers) else None
        if e is None or g is None or type(e) is not type(g):
            lines.append(f"  layer {i}: expected {e.name if e else 'nothing'}, "
                         f"got {g.name if g else 'nothing'}")
            continue
        for f in e.fields_desc:
            ev, gv = e.getfieldval(f.name), g.getfieldval(f.name)
            if ev != gv:
                lines.append(f"  {e.name}.{f.name}: expected {f.i2repr(e, ev)}, got {f.i2repr(g, gv)}")
    if len(expected) != len(got):
        lines.append(f"  length: expected {len(expected)} bytes, got {len(got)}")
    if not lines:
        first = next(i for i, (a, b) in enumerate(zip(expected, got, strict=False)) if a != b)
        lines.append(f"  bytes differ from offset {first}")
    return "\n".join(lines)


def assert_frames_equal(expected: bytes, got: bytes, what="frame"):
    d = packet_diff(expected, got)
    if d:
        raise AssertionError(f"{what} differs from the expected packet:\n{d}")
