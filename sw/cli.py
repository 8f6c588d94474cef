"""``mrcnic``: the command line of the MRC NIC's host tools.

``mrcnic [-j] [-p] OBJECT [VERB] ...``, in the manner of iproute2's ``rdma`` and ``devlink``: an
object (``ev``) and what to do with it (``expand``); ``regs`` and ``decode`` stand alone. Each
object adds its parser in one function listed in :data:`_OBJECTS`. ``-j`` (JSON) and ``-p``
(pretty JSON) go before the object or after the verb. A bad argument is one line on stderr
naming it and what is allowed, and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import re
import sys

from . import ev_expand, regmap

__all__ = ["main"]


def _cmd_regs(args) -> int:
    rows = [{"offset": r.offset, "name": r.path, "width": r.width, "access": r.access.value,
             "reset": r.reset, "description": r.doc} for r in regmap.REGISTERS]
    if args.json:
        _print_json(args, rows)
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


def _print_json(args, data) -> None:
    print(json.dumps(data, indent=2 if args.pretty else None))


def _number(text: str, what: str) -> int:
    if re.fullmatch(r"0[xX][0-9a-fA-F]+", text):
        return int(text, 16)
    if re.fullmatch(r"[0-9]+", text):
        return int(text, 10)
    raise argparse.ArgumentTypeError(f"{what} {text!r} is not a number (decimal or 0x-hex)")


def _fmt_widths(text: str) -> tuple[int, ...]:
    return tuple(_number(w, "format field width") for w in text.split(","))


def _ev_field(text: str) -> ev_expand.EvField:
    parts = text.split(":")
    if len(parts) != 5:
        raise argparse.ArgumentTypeError(f"{text!r} is not WIDTH:INIT:MIN:MAX:MASK (five numbers, "
                                         "e.g. 16:0x100:0:0xf:0xf)")
    names = ("WIDTH", "INIT", "MIN", "MAX", "MASK")
    return ev_expand.EvField(*(_number(p, n) for p, n in zip(parts, names, strict=True)))


def _ev_bytes(text: str) -> bytes:
    digits = text[2:] if text[:2].lower() == "0x" else text
    if not re.fullmatch(r"[0-9a-fA-F]+", digits):
        raise argparse.ArgumentTypeError(f"{text!r} is not hex bytes, byte 0 first (e.g. 0x3412: "
                                         "bytes 0x34, 0x12)")
    if len(digits) % 2:
        raise argparse.ArgumentTypeError(f"{text!r} has an odd number of hex digits: an EV is "
                                         "whole bytes")
    if len(digits) > 2 * ev_expand.MAX_EV_BYTES:
        raise argparse.ArgumentTypeError(f"{text!r} is {len(digits) // 2} bytes: an EV is at most "
                                         f"{ev_expand.MAX_EV_BYTES}")
    return bytes.fromhex(digits)


def _refused(args, message: str) -> int:
    print(f"{args.prog}: {message}", file=sys.stderr)
    return 2


def _rule_text(e: ev_expand.EvProfileError) -> str:
    return f"{e.detail} ({e.rule.errno_name}, rule {e.rule.name}: {e.rule.text})"


def _cmd_ev_expand(args) -> int:
    mode = ev_expand.FormatMode[args.mode.upper()] if args.mode else None
    try:
        profile = ev_expand.EvProfile(ev_expand.FormatProfile(args.fmt, mode), args.field)
    except ev_expand.EvProfileError as e:
        return _refused(args, "profile refused: " + _rule_text(e))
    rows = []
    for ev in args.ev:       # every EV checked before anything is printed
        try:
            rows.append({"ev": "0x" + ev.hex(), "fields": list(profile.expand_fields(ev)),
                         "value": "0x" + profile.expand(ev).hex()})
        except ev_expand.EvProfileError as e:
            return _refused(args, "EV refused: " + _rule_text(e))
    if args.json:
        _print_json(args, rows)
    else:
        print("\n".join(r["value"] for r in rows))
    return 0


class _Parser(argparse.ArgumentParser):
    """Reports a bad argument in one line (the usage is one -h away), exit status 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} -h)\n")


def _output_options(parser: argparse.ArgumentParser, default) -> None:
    parser.add_argument("-j", "--json", action="store_true", default=default, help="print JSON")
    parser.add_argument("-p", "--pretty", action="store_true", default=default,
                        help="print indented JSON (implies -j)")


def _verb_parser(sub, name: str, **kwargs) -> argparse.ArgumentParser:
    """A verb that prints JSON on -j/-p, given before the object or after the verb."""
    p = sub.add_parser(name, **kwargs)
    _output_options(p, argparse.SUPPRESS)   # SUPPRESS: leaves the global -j/-p as given
    p.set_defaults(json_ok=True)
    return p


def _add_regs(sub) -> None:
    p = _verb_parser(sub, "regs", help="the register map as a table")
    p.set_defaults(func=_cmd_regs)


def _add_decode(sub) -> None:
    p = sub.add_parser("decode", help="dissect every packet of a pcap with the MRC layers; "
                       "exit 1 if a frame on UDP port 4791 is not a whole MRC packet")
    p.add_argument("pcap", help="a pcap file, e.g. one the testbenches wrote under build/")
    p.add_argument("-b", "--brief", action="store_true", help="one line per packet")
    p.add_argument("-c", "--count", type=_positive, help="stop after this many packets")
    p.set_defaults(func=_cmd_decode)


def _add_ev(sub) -> None:
    ev = sub.add_parser("ev", help="entropy values (EVs): the OCP expansion rule")
    verbs = ev.add_subparsers(dest="verb", metavar="VERB", required=True)
    rules = "\n".join(f"  {r.errno_name:<6} {r.name:<11} {r.text} ({r.source})"
                      for r in ev_expand.Rule)
    p = _verb_parser(
        verbs, "expand", formatter_class=argparse.RawDescriptionHelpFormatter,
        help="expand EVs under an EV profile, as the OCP reference does",
        description="Expand each EV under the EV profile the --field options give, on the EV "
                    "format profile --fmt gives (OCP mrc_ctl.h). Prints one line per EV: the "
                    "expanded value over the whole format width, rounded up to whole bytes, "
                    "byte 0 first.",
        epilog="A profile or EV that breaks a rule is refused with its errno (the rule's source: "
               "the OCP header, its reference program, or mrcnic where they are silent):\n" + rules)
    p.add_argument("--fmt", type=_fmt_widths, required=True, metavar="W0,W1,...",
                   help="the format fields' widths in bits, first on the wire first")
    p.add_argument("--field", type=_ev_field, action="append", required=True,
                   metavar="WIDTH:INIT:MIN:MAX:MASK",
                   help="a field of the EV profile, for the next format field (repeat it)")
    p.add_argument("--mode", choices=[m.name.lower() for m in ev_expand.FormatMode],
                   help="the format's mode, which bounds its width (stev 32, udp 16, srv6 256 "
                        "bits); none: only the 32-byte bound")
    p.add_argument("ev", type=_ev_bytes, nargs="+", metavar="EV",
                   help="hex bytes, byte 0 first (0x3412: 0x34 then 0x12), up to 32; shorter "
                        "ones are zero-filled at the end")
    p.set_defaults(func=_cmd_ev_expand)


#: One function per object: each adds its parser and verbs.
_OBJECTS = (_add_regs, _add_decode, _add_ev)


def _parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="mrcnic", description="Host tools for the mrcnic MRC NIC.")
    _output_options(ap, False)
    sub = ap.add_subparsers(dest="command", metavar="OBJECT", required=True)
    for add in _OBJECTS:
        add(sub)
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
    ap = _parser()
    args = ap.parse_args(argv)
    args.json = args.json or args.pretty
    if args.json and not getattr(args, "json_ok", False):
        ap.error(f"{args.command} has no JSON output (-j, -p)")
    args.prog = f"{ap.prog} {args.command}" + (f" {args.verb}" if getattr(args, "verb", None) else "")
    try:
        return args.func(args)
    except BrokenPipeError:   # output piped into head and the like
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
