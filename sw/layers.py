"""Scapy layers for MRC's transport headers, generated from :mod:`mrcnic.wire`, and for the
board management protocol, generated from :mod:`mrcnic.mgmt`.

Importing this module binds UDP port 4791 to :class:`BTH` and each header to what follows it, so
``Ether(raw_bytes)`` dissects a whole MRC packet, SRv6 outer header and SRH included (scapy's own
IPv6 and SRH layers), down to the ICRC, which :class:`BTH` carries as a trailer field. It binds
the management port to :class:`Mgmt`, a header and its data words.
"""

from __future__ import annotations

from scapy.fields import BitEnumField, BitField, FCSField, FieldListField, XBitField, XIntField
from scapy.layers.inet import UDP
from scapy.packet import Packet, Raw, bind_bottom_up, bind_layers, bind_top_down

from . import icrc as _icrc
from . import mgmt, wire

__all__ = ["BTH", "METH", "TSETH", "RETH", "ImmDt", "AETH", "SETH", "NETH", "PETH", "ERTH",
           "EETH", "LAYERS", "Mgmt"]


def _fields(hdr: wire.Header):
    out = []
    for f in hdr.fields:
        if f.enum is not None:
            out.append(BitEnumField(f.name, 0, f.bits, {e.value: e.name for e in f.enum}))
        elif f.bits >= 16:
            out.append(XBitField(f.name, 0, f.bits))
        else:
            out.append(BitField(f.name, 0, f.bits))
    return out


def _layer(hdr: wire.Header, cls_name: str, body: dict | None = None):
    ns = {"name": f"MRC {hdr.name}", "fields_desc": _fields(hdr), "wire_header": hdr,
          "__doc__": f"{hdr.title}: {hdr.doc}"}
    ns.update(body or {})
    return type(cls_name, (Packet,), ns)


def _bth_below(pkt):
    p = pkt.underlayer
    while p is not None and not isinstance(p, BTH):
        p = p.underlayer
    return p


def _bth_post_build(self, p, pay):
    p += pay
    if self.icrc is None:
        udp = self.underlayer
        ip = udp.underlayer if udp is not None else None
        if not isinstance(udp, UDP) or ip is None:
            raise ValueError("an MRC BTH needs IPv6 / UDP beneath it to compute its ICRC")
        # The ICRC covers the inner IPv6 header onwards: build that stack alone, with a
        # placeholder ICRC so that the lengths come out right and the copy does not recurse.
        stack = ip.copy()
        stack[BTH].icrc = 0
        roce = bytes(stack)
        p = p[:-4] + _icrc.icrc_bytes(roce[:-4])
    return p


class BTH(Packet):
    """Base Transport Header with MRC's opcodes and the rtx / tsh bits; ends with the ICRC."""
    name = "MRC BTH"
    wire_header = wire.BTH
    fields_desc = _fields(wire.BTH) + [FCSField("icrc", None, fmt="<I")]
    post_build = _bth_post_build


def _meth_guess(self, payload):
    bth = _bth_below(self)
    return TSETH if bth is not None and bth.tsh else RETH


def _reth_guess(self, payload):
    bth = _bth_below(self)
    if bth is not None and bth.opcode in (wire.Opcode.WRITE_LAST_IMM, wire.Opcode.WRITE_ONLY_IMM):
        return ImmDt
    return Raw


METH = _layer(wire.METH, "METH", {"guess_payload_class": _meth_guess})
TSETH = _layer(wire.TSETH, "TSETH")
RETH = _layer(wire.RETH, "RETH", {"guess_payload_class": _reth_guess})
ImmDt = _layer(wire.IMMDT, "ImmDt")
AETH = _layer(wire.AETH, "AETH")
SETH = _layer(wire.SETH, "SETH")
NETH = _layer(wire.NETH, "NETH")
PETH = _layer(wire.PETH, "PETH")
ERTH = _layer(wire.ERTH, "ERTH")
EETH = _layer(wire.EETH, "EETH")

LAYERS = {wire.BTH: BTH, wire.METH: METH, wire.TSETH: TSETH, wire.RETH: RETH, wire.IMMDT: ImmDt,
          wire.AETH: AETH, wire.SETH: SETH, wire.NETH: NETH, wire.PETH: PETH, wire.ERTH: ERTH,
          wire.EETH: EETH}

# Dissection: our BTH goes first on UDP 4791 so that scapy.contrib.roce, if loaded too, does not
# take MRC packets.
bind_bottom_up(UDP, BTH, dport=wire.ROCE_UDP_PORT)
UDP.payload_guess.insert(0, UDP.payload_guess.pop())
bind_top_down(UDP, BTH, dport=wire.ROCE_UDP_PORT, sport=0xC000)
for _op in wire.Opcode:
    _first = wire.headers_after_bth(_op, tsh=False)[0]
    bind_bottom_up(BTH, LAYERS[_first], opcode=int(_op))
bind_layers(TSETH, RETH)
for _upper, _op in ((METH, wire.Opcode.WRITE_ONLY), (AETH, wire.Opcode.ACKNOWLEDGE),
                    (SETH, wire.Opcode.SACK), (NETH, wire.Opcode.NACK), (PETH, wire.Opcode.PROBE),
                    (ERTH, wire.Opcode.ENDPOINT_REQUEST), (EETH, wire.Opcode.ENDPOINT_RESPONSE)):
    bind_top_down(BTH, _upper, opcode=int(_op))


def _mgmt_words(pkt):
    return mgmt.data_words(pkt.opcode, pkt.reply, pkt.status, pkt.count)


_mgmt_fields = _fields(mgmt.HEADER)
for _f in _mgmt_fields:   # so that Mgmt(opcode=..., ...) builds a packet a server takes
    _f.default = {"magic": mgmt.MAGIC, "version": mgmt.VERSION}.get(_f.name, _f.default)
Mgmt = _layer(mgmt.HEADER, "Mgmt", {
    "name": "MRC NIC management",
    "fields_desc": _mgmt_fields + [
        FieldListField("data", [], XIntField("word", 0), count_from=_mgmt_words)]})
# requests go to the port, replies come from it
bind_layers(UDP, Mgmt, dport=mgmt.DEFAULT_PORT)
bind_bottom_up(UDP, Mgmt, sport=mgmt.DEFAULT_PORT)
