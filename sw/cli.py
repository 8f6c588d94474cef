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
        if layer.__class__.__name__ == "Raw":
            lines.append(f"    payload {len(layer.load)} bytes")
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


def _cmd_decode(args) -> int:
    from scapy.error import Scapy_Exception
    from scapy.layers.l2 import Ether
    from scapy.utils import PcapReader

    from . import (
        icrc,
        layers,  # noqa: F401  (binds the MRC layers into scapy)
    )

    try:
        reader = PcapReader(args.pcap)
    except FileNotFoundError:
        print(f"mrcnic decode: {args.pcap}: no such file", file=sys.stderr)
        return 2
    except (Scapy_Exception, OSError, EOFError) as e:
        print(f"mrcnic decode: {args.pcap} is not a pcap file ({e})", file=sys.stderr)
        return 2
    count = 0
    with reader:
        for n, p in enumerate(reader):
            if args.count is not None and n >= args.count:
                break
            raw = bytes(p)
            pkt = Ether(raw)
            try:
                ok = "ok" if icrc.frame_icrc_ok(raw) else "BAD"
            except ValueError:
                ok = "n/a"
            print(f"#{n} t={float(p.time):.9f} len={len(raw)} icrc={ok}  {pkt.summary()}")
            if not args.brief:
                print("\n".join(_describe(pkt)))
            count += 1
    print(f"{count} packets", file=sys.stderr)
    return 0


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="mrcnic", description="Host tools for the mrcnic MRC NIC.")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", required=True)
    p = sub.add_parser("regs", help="the register map as a table")
    p.add_argument("-j", "--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_cmd_regs)
    p = sub.add_parser("decode", help="dissect every packet of a pcap with the MRC layers")
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
