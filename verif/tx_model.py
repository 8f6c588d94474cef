"""Reference model of the sender: a write request cut into sprayed MRC packets, built with scapy.

What the TX gateware must produce, packet for packet: MTU-sized segments with consecutive PSNs
(24-bit, wrapping), FIRST / MIDDLE / LAST / ONLY opcodes (the _IMM forms when there is an
immediate), METH with the message's MSN, TSETH, and a RETH in every packet with the VA of that
packet's own payload.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from mrcnic import layers as L
from mrcnic import wire
from mrcnic.evmap import EvLayout, ev_split, format_addr

__all__ = ["QueuePair", "WriteRequest", "segment", "EvProfile"]

MTUS = (256, 512, 1024, 2048, 4096)


@dataclass
class QueuePair:
    dqp: int
    src_mac: str = "02:00:00:00:00:01"
    dst_mac: str = "02:00:00:00:00:02"
    src_ip: int = (0xFD00 << 112) | 1
    dst_ip: int = (0xFD00 << 112) | 2
    mtu: int = 1024
    next_psn: int = 0
    msn: int = 0

    def __post_init__(self):
        if self.mtu not in MTUS:
            raise ValueError(f"MTU {self.mtu} is not one of {MTUS}")


@dataclass
class WriteRequest:
    va: int
    rkey: int
    data: bytes
    imm: int | None = None

    def __post_init__(self):
        if not 1 <= len(self.data) <= 1 << 31:
            raise ValueError(f"a write is 1 byte to 2 GiB, not {len(self.data)} bytes")


class EvProfile:
    """A QP's EVs, split evenly over the planes, sprayed planes-first: the next packet goes to
    the plane that has carried the fewest, on a pseudo-random EV of that plane."""

    def __init__(self, layout: EvLayout, per_plane: int, rng: random.Random):
        self.layout = layout
        self.evs = {p: [layout.make(p, i % layout.spines, rng.getrandbits(32))
                        for i in range(per_plane)] for p in range(layout.planes)}
        self.sent = dict.fromkeys(self.evs, 0)
        self.rng = rng

    def pick(self) -> int:
        plane = min(self.sent, key=lambda p: (self.sent[p], p))
        self.sent[plane] += 1
        return self.rng.choice(self.evs[plane])


def _opcode(i, n, imm):
    if n == 1:
        return wire.Opcode.WRITE_ONLY_IMM if imm is not None else wire.Opcode.WRITE_ONLY
    if i == 0:
        return wire.Opcode.WRITE_FIRST
    if i < n - 1:
        return wire.Opcode.WRITE_MIDDLE
    return wire.Opcode.WRITE_LAST_IMM if imm is not None else wire.Opcode.WRITE_LAST


def segment(qp: QueuePair, wr: WriteRequest, evs, timestamp=0):
    """The packets of one write, each on the EV ``evs()`` returns, and the QP advanced."""
    n = -(-len(wr.data) // qp.mtu)
    out = []
    for i in range(n):
        op = _opcode(i, n, wr.imm)
        chunk = wr.data[i * qp.mtu:(i + 1) * qp.mtu]
        ev = evs()
        sport, fl = ev_split(ev)
        pkt = (Ether(src=qp.src_mac, dst=qp.dst_mac)
               / IPv6(src=format_addr(qp.src_ip), dst=format_addr(qp.dst_ip), fl=fl,
                      tc=(wire.DscpClass.DATA_TRIMMABLE << 2) | 0b10, hlim=64)
               / UDP(sport=sport, dport=wire.ROCE_UDP_PORT, chksum=0)
               / L.BTH(opcode=int(op), pkey=0xFFFF, dqp=qp.dqp, psn=qp.next_psn, tsh=1,
                       ackreq=int(i == n - 1))
               / L.METH(msn=qp.msn)
               / L.TSETH(tx_timestamp=timestamp & 0xFFFF)
               / L.RETH(va=wr.va + i * qp.mtu, rkey=wr.rkey, dma_length=len(wr.data)))
        if op in (wire.Opcode.WRITE_LAST_IMM, wire.Opcode.WRITE_ONLY_IMM):
            pkt = pkt / L.ImmDt(imm=wr.imm)
        out.append((ev, pkt / chunk))
        qp.next_psn = (qp.next_psn + 1) & 0xFFFFFF
    qp.msn = (qp.msn + 1) & 0xFFFF
    return out
