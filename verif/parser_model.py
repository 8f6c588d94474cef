"""Reference model of the header parser: the same rules, written as plain Python over bytes."""

from __future__ import annotations

from mrcnic import wire
from mrcnic.hdl.header_parser import ParseError

__all__ = ["parse"]


def _zero(hdr):
    return {f.name: 0 for f in hdr.fields if not f.reserved}


def _fields(hdr, frame, at):
    return {k: v for k, v in hdr.unpack(frame[at:]).items() if not hdr.field(k).reserved}


def parse(frame: bytes, max_segments=4, max_frame=9600) -> dict:
    """The record the parser must report for ``frame`` (the :func:`parsed_layout` as a dict)."""
    n = len(frame)
    rec = {"error": ParseError.NONE, "outer_present": 0, "srh_present": 0, "frame_length": n,
           "eth": _fields(wire.ETHERNET, frame + bytes(14), 0)}
    for key, hdr in (("outer", wire.IPV6), ("srh", wire.SRH), ("ip", wire.IPV6),
                     ("udp", wire.UDP), ("bth", wire.BTH)):
        rec[key] = _zero(hdr)

    def fail(reason):
        out = {k: v for k, v in rec.items()}
        for key, hdr in (("outer", wire.IPV6), ("srh", wire.SRH), ("ip", wire.IPV6),
                         ("udp", wire.UDP), ("bth", wire.BTH)):
            out[key] = _zero(hdr)
        out["outer_present"] = out["srh_present"] = 0
        out["error"] = reason
        return out

    if n > max_frame:
        return fail(ParseError.OVERSIZE)
    if n < 54:
        return fail(ParseError.TRUNCATED)
    if rec["eth"]["ethertype"] != wire.ETHERTYPE_IPV6:
        return fail(ParseError.ETHERTYPE)
    first = _fields(wire.IPV6, frame, 14)
    if first["version"] != 6:
        return fail(ParseError.IP_VERSION)
    nh = first["next_header"]
    if nh == wire.IPPROTO_UDP:
        at = 14
    elif nh == wire.IPPROTO_IPV6:
        at = 54
        rec["outer"], rec["outer_present"] = first, 1
    elif nh == wire.IPPROTO_ROUTING:
        if n < 62:
            return fail(ParseError.TRUNCATED)
        srh = _fields(wire.SRH, frame, 54)
        segs = srh["hdr_ext_len"] // 2
        if (srh["routing_type"] != 4 or srh["hdr_ext_len"] % 2 or segs > max_segments
                or srh["last_entry"] + 1 != segs or srh["segments_left"] > srh["last_entry"]
                or srh["next_header"] != wire.IPPROTO_IPV6):
            return fail(ParseError.SRH_MALFORMED)
        at = 62 + 16 * segs
        rec["outer"], rec["outer_present"], rec["srh"], rec["srh_present"] = first, 1, srh, 1
    else:
        return fail(ParseError.NOT_UDP)
    if n < at + 60:
        return fail(ParseError.TRUNCATED)
    ip = _fields(wire.IPV6, frame, at)
    udp = _fields(wire.UDP, frame, at + 40)
    if ip["version"] != 6:
        return fail(ParseError.IP_VERSION)
    if ip["next_header"] != wire.IPPROTO_UDP:
        return fail(ParseError.NOT_UDP)
    if udp["dport"] != wire.ROCE_UDP_PORT:
        return fail(ParseError.NOT_ROCE)
    if (ip["payload_length"] != n - at - 40 or udp["length"] != ip["payload_length"]
            or (rec["outer_present"] and first["payload_length"] != n - 54)):
        return fail(ParseError.LENGTH)
    rec["ip"], rec["udp"], rec["bth"] = ip, udp, _fields(wire.BTH, frame, at + 48)
    return rec
