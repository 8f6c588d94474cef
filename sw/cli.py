"""``mrcnic``: the command line of the MRC NIC's host tools."""

from __future__ import annotations

import argparse
import json
import sys

from . import regmap

__all__ = ["main"]


def _cmd_regs(args) -> int:
    rows = [{"offset": r.offset, "name": r.path, "width": r.width, "access": r.access.value,
             "reset": r.reset, "description": r.doc} for r in regmap.REGISTERS]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    w = max(len(r["name"]) for r in rows)
    print(f"{'offset':<7} {'register':<{w}} {'width':>5} {'access':<6} {'reset':>10}  description")
    for r in rows:
        print(f"{r['offset']:#05x}   {r['name']:<{w}} {r['width']:>5} {r['access']:<6} "
              f"{r['reset']:#10x}  {r['description']}")
    return 0


def _describe(pkt) -> list[str]:
    lines = []
    layer = pkt
    while layer is not None and layer.__class__.__name__ != "NoPayload":
        if layer.__class__.__name__ in ("Raw", "Padding"):
            what = "payload" if layer.__class__.__name__ == "Raw" else "padding"
            lines.append(f"    {what} {len(layer.load)} bytes")
            break
        fields = []
        for f in layer.fields_desc:
            v = layer.getfieldval(f.name)
            if isinstance(v, list):
                v = "[" + ", ".join(str(x) for x in v) + "]"
            else:
                v = f.i2repr(layer, v)
            fields.append(f"{f.name}={v}")
        lines.append(f"    {layer.name}: " + " ".join(fields))
        layer = layer.payload
    return lines


def _mrc_check(pkt, raw: bytes) -> tuple[str, list[str]]:
    """(ICRC verdict, problems) of a dissected frame. The verdict is ``ok``, ``BAD``,
    ``trimmed`` (a trimmed data packet: the four bytes where its ICRC was are no longer one, and
    nothing checks them) or ``n/a`` (not an MRC packet). The problems say why a frame on UDP port
    4791 is not a whole MRC packet: a header missing or cut short, an opcode that is not
    MRC's, bytes after the last header, a length field that disagrees with the frame; empty
    when it is one."""
    from scapy.layers.inet6 import IPv6

    from . import icrc, layers, wire

    try:
        inner = icrc.roce_offset(raw)    # past an SRv6 outer header and SRH
        inner_ip = wire.IPV6.unpack(raw[inner:])
        udp = wire.UDP.unpack(raw[inner + wire.IPV6.length:])
        outer_plen = wire.IPV6.unpack(raw[wire.ETHERNET.length:])["payload_length"]
    except ValueError:                   # not IPv6, or cut short before its UDP header ends
        return "n/a", []
    if (inner_ip["next_header"] != wire.IPPROTO_UDP
            or wire.ROCE_UDP_PORT not in (udp["dport"], udp["sport"])):
        return "n/a", []
    problems = []
    if udp["dport"] != wire.ROCE_UDP_PORT:
        problems.append(f"UDP destination port {udp['dport']}, not {wire.ROCE_UDP_PORT}")
    if raw[wire.ETHERNET.length + 6] == wire.IPPROTO_ROUTING:
        srh_nh = raw[wire.ETHERNET.length + wire.IPV6.length]
        if srh_nh != wire.IPPROTO_IPV6:
            problems.append(f"SRH next header {srh_nh}, not {wire.IPPROTO_IPV6} (IPv6)")
    for at, which in ((wire.ETHERNET.length, "outer IPv6"), (inner, "IPv6")):
        if raw[at] >> 4 != 6 and (which == "IPv6" or inner != wire.ETHERNET.length):
            problems.append(f"{which} version field {raw[at] >> 4}, not 6")
    inner_plen, udp_len = inner_ip["payload_length"], udp["length"]
    follow = len(raw) - inner - wire.IPV6.length
    outer_follow = len(raw) - wire.ETHERNET.length - wire.IPV6.length
    if inner != wire.ETHERNET.length and outer_plen != outer_follow:
        problems.append(f"outer IPv6 payload length {outer_plen}, but {outer_follow} bytes "
                        "follow it")
    if inner_plen != follow:
        problems.append(f"IPv6 payload length {inner_plen}, but {follow} bytes follow it")
    if udp_len != follow:
        problems.append(f"UDP length {udp_len}, but the datagram is {follow} bytes")
    bth = pkt.getlayer(layers.BTH)
    if bth is None:
        return "n/a", problems + ["no BTH after the UDP header"]
    try:
        op = wire.Opcode(bth.opcode)
    except ValueError:
        return "n/a", problems + [f"opcode {bth.opcode:#04x} is not one of MRC's"]
    layer = bth.payload
    for hdr in wire.headers_after_bth(op, bool(bth.tsh)):
        if not isinstance(layer, layers.LAYERS[hdr]):
            problems.append(f"{hdr.name} missing or cut short")
            return "n/a", problems
        layer = layer.payload
    # the payload; bytes past the IPv6 payload length are scapy's Padding, reported above
    rest = len(layer.load) if layer.__class__.__name__ == "Raw" else 0
    if rest and op not in wire.DATA_OPCODES:
        problems.append(f"{rest} bytes after the {op.name} headers")
    routed = pkt.getlayer(IPv6)   # the header switches route on: the outer one, if any
    if (op in wire.DATA_OPCODES and not rest
            and routed.tc >> 2 == wire.DscpClass.TRIMMED):
        return "trimmed", problems
    return ("ok" if icrc.frame_icrc_ok(raw) else "BAD"), problems


def _cmd_decode(args) -> int:
    from scapy.error import Scapy_Exception
    from scapy.layers.l2 import Ether
    from scapy.utils import PcapReader

    from . import layers  # noqa: F401  (binds the MRC layers into scapy)

    try:
        reader = PcapReader(args.pcap)
    except FileNotFoundError:
        print(f"mrcnic decode: {args.pcap}: no such file", file=sys.stderr)
        return 2
    except (Scapy_Exception, OSError, EOFError) as e:
        print(f"mrcnic decode: {args.pcap} is not a pcap file ({e})", file=sys.stderr)
        return 2
    count = undecoded = not_mrc = 0
    with reader:
        for n, p in enumerate(reader):
            if args.count is not None and n >= args.count:
                break
            raw = bytes(p)
            head = f"#{n} t={float(p.time):.9f} len={len(raw)}"
            count += 1
            try:
                pkt = Ether(raw)
            except Exception as e:  # scapy raises whatever its field parsers raise
                undecoded += 1
                print(f"{head} icrc=n/a  PROBLEM: not an Ethernet frame "
                      f"({type(e).__name__}: {e}): {raw[:64].hex()}")
                continue
            verdict, problems = _mrc_check(pkt, raw)
            note = ""
            if problems:
                undecoded += 1
                note = "  PROBLEM: " + "; ".join(problems)
            elif verdict == "n/a":
                not_mrc += 1
                note = "  (not MRC: no UDP port 4791)"
            print(f"{head} icrc={verdict}  {pkt.summary()}{note}")
            if not args.brief:
                print("\n".join(_describe(pkt)))
    tail = "".join([f", {undecoded} not decoded (PROBLEM)" if undecoded else "",
                    f", {not_mrc} not MRC" if not_mrc else ""])
    print(f"{count} packets{tail}", file=sys.stderr)
    return 1 if undecoded else 0


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="mrcnic", description="Host tools for the mrcnic MRC NIC.")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", required=True)
    p = sub.add_parser("regs", help="the register map as a table")
    p.add_argument("-j", "--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_cmd_regs)
    p = sub.add_parser("decode", help="dissect every packet of a pcap with the MRC layers; "
                       "exit 1 if a frame on UDP port 4791 is not a whole MRC packet")
    p.add_argument("pcap", help="a pcap file, e.g. one the testbenches wrote under build/")
    p.add_argument("-b", "--brief", action="store_true", help="one line per packet")
    p.add_argument("-c", "--count", type=_positive, help="stop after this many packets")
    p.set_defaults(func=_cmd_decode)
    return ap


def _positive(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not positive")
    return v


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:   # output piped into head and the like
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
