"""``mrcnic ev-fmt``, ``mrcnic ev-profile``, ``mrcnic cc-profile`` and ``mrcnic ev replace``:
the profiles of the OCP controller API (:mod:`mrcnic.ctl`) from the command line.

Each command makes its own :class:`~mrcnic.ctl.Controller`, which takes up the profiles the
NIC's store holds (sw/store.py) and writes back what it changed, so one command sees what the
ones before it made. ``add`` moves a profile INIT -> OFFLINE with its attributes, then ONLINE
unless ``--offline``; ``set`` is one modify, all or nothing; ``del`` moves it ONLINE ->
OFFLINE -> INIT as far as it has to.

Refusals, one line each: a bad argument, or a value outside what the NIC reports (its QPs,
ports, EV table size, format modes), is exit status 2 before anything is written. The
controller's own refusal is its message and errno name (a rule of the EV expansion named
with it, as ``ev expand`` names it): exit status 2 for EINVAL and E2BIG, a value the header
calls invalid or too big; 1 for the rest, what this NIC cannot do (EPERM), a profile in use
(EBUSY), an EV the profile does not hold (ENOENT), the NIC failing (EIO).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import ipaddress
import math
import re

from . import cli as _cli
from .cli import (
    _bounded,
    _clock_mhz,
    _ev_bytes,
    _ev_field,
    _fmt_widths,
    _number,
    _print_json,
    _print_table,
    _Refused,
    _rule_text,
    _verb_parser,
)

__all__ = ["add", "add_ev_verbs"]

_U64_MAX = (1 << 64) - 1
_U32_MAX = (1 << 32) - 1
#: the states ``ev replace`` gives an EV, and the ones an event mask names (the header's)
_SETTABLE = ("good", "assumed_bad", "denied")
_EVENTS = ("good", "assumed_bad")
#: what the profile kinds are called in messages
_FMT, _EVP, _CC = "EV format", "EV", "CC"


# -- the controller ---------------------------------------------------------------------------


def _ctl_call(fn, *args, **kwargs):
    """Runs a controller call as :func:`mrcnic.cli._api_call` does; a broken expansion rule is
    told as ``ev expand`` tells it, naming the rule."""
    from .ev_expand import EvProfileError

    def rule_named():
        try:
            return fn(*args, **kwargs)
        except EvProfileError as e:
            raise _Refused(_rule_text(e)) from None
    return _cli._api_call(rule_named)


@contextlib.contextmanager
def _controller(args):
    """(device, controller) of the NIC the command acts on."""
    from .ctl import DEFAULT_CLOCK_HZ, Controller
    mhz = getattr(args, "clock_mhz", None)
    clock = DEFAULT_CLOCK_HZ if mhz is None else round(mhz * 1e6)
    # looked up at each call: whoever stands in for the NIC's device is heard
    with _cli._device(args) as dev:
        yield dev, _ctl_call(Controller, dev.regs, clock)


def _ids(ctl, kind: str) -> list[int]:
    """The ids of the profiles of ``kind`` that are not INIT (as the NIC's store holds them)."""
    return _ctl_call(ctl.profile_ids)[{_FMT: "fmt", _EVP: "ev", _CC: "cc"}[kind]]


def _absent(info, kind: str, pid: int, obj: str) -> None:
    """Refuses to add a profile whose id is in use."""
    if info.state.name != "INIT":
        raise _Refused(f"{kind} profile {pid} exists ({info.state.name}): mrcnic {obj} del "
                       "removes it" + (f", {obj} set changes it" if obj != "ev-fmt" else ""))


def _present(info, kind: str, pid: int, obj: str) -> None:
    if info.state.name == "INIT":
        raise _Refused(f"{kind} profile {pid} is INIT: there is none (mrcnic {obj} add makes "
                       "one)")


def _add(modify, kind: str, pid: int, offline: bool, **attrs) -> None:
    """INIT -> OFFLINE with ``attrs``, then ONLINE unless ``offline``."""
    from .ctl import ProfileState as S
    _ctl_call(modify, pid, state=S.OFFLINE, **attrs)
    if offline:
        return
    try:
        _ctl_call(modify, pid, state=S.ONLINE)
    except _Refused as e:
        # the checks before the first step leave the NIC's failure: say where it stopped
        raise _Refused(f"{e}; {kind} profile {pid} was left OFFLINE", e.status) from None


def _delete(modify, query, kind: str, pid: int, obj: str) -> None:
    from .ctl import ProfileState as S
    info = _ctl_call(query, pid)
    _present(info, kind, pid, obj)
    if info.state is S.ONLINE:
        _ctl_call(modify, pid, state=S.OFFLINE)
    _ctl_call(modify, pid, state=S.INIT)


def _in_range(what: str, value: int, low: int, high: int, has: str) -> None:
    if not low <= value <= high:
        raise _Refused(f"{what} {value} does not exist: this NIC has {has}")


def _qp(dev, qp: int) -> None:
    qps = dev.info["qps"]
    _in_range("QP", qp, 0, qps - 1, f"{qps} QPs, 0 .. {qps - 1} (global.qps)")


def _port(dev, opt: str, port: int) -> None:
    planes = dev.info["planes"]
    _in_range(opt, port, 1, planes, f"ports 1 .. {planes} (one a plane, global.planes)")


def _bound(ctl, dev) -> dict[int, int]:
    """QP -> the EV profile a controller loaded into its table (the store records it)."""
    out = {}
    for qp in range(dev.info["qps"]):
        b = _ctl_call(ctl.binding, qp)
        if b is not None:
            out[qp] = b.profile_id
    return out


def _changed(args, row: dict) -> int:
    """What a verb that changes a profile prints: the profile, with -j; nothing otherwise."""
    if args.json:
        _print_json(args, row)
    return 0


def _shown(args, rows, cells) -> int:
    """Rows as JSON with -j; otherwise a table, ``cells`` turning a row into its columns."""
    if args.json:
        _print_json(args, rows if args.id is None else rows[0])
        return 0
    if rows:
        table = [cells(r) for r in rows]
        _print_table([list(c.values()) for c in table], header=list(table[0]), right=(0,))
    return 0


def _text(value) -> str:
    return "-" if value is None else str(value)


# -- argument types ---------------------------------------------------------------------------


def _profile_id(what: str = "ID"):
    return _bounded(what, 0, _U64_MAX)


def _events(text: str) -> frozenset:
    from .enums import EvState
    names = text.lower().split(",")
    if names == ["none"]:
        return frozenset()
    if not set(names) <= set(_EVENTS):
        raise argparse.ArgumentTypeError(f"{text!r} is not an event mask: good, assumed_bad, "
                                         "both comma-separated, or none")
    return frozenset(EvState[n.upper()] for n in names)


def _real(what: str):
    """An argument type: a finite number of at least 0 (NSCC's ratios)."""
    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            v = math.nan
        if not math.isfinite(v) or v < 0:
            raise argparse.ArgumentTypeError(f"{what} {text!r} is not a number of at least 0 "
                                             "(e.g. 0 or 0.5)")
        return int(text) if text.isdigit() else v      # shown as typed: 0, not 0.0
    return parse


_TEMPLATE = re.compile(r"(?P<block>[^/]+)/(?P<bits>[0-9]+):(?P<usids>[^@]+)@(?P<spine>[0-9]+)")
_TEMPLATE_FORM = ("BLOCK/BITS:USID,...@SPINE_INDEX (e.g. 0xfcbbbb00/32:0x10@0, or with the "
                  "block as an address, fcbb:bb00::/32:0x10@0)")


def _template(text: str):
    from .evmap import UsidTemplate
    m = _TEMPLATE.fullmatch(text)
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r} is not a template: {_TEMPLATE_FORM}")
    bits = int(m["bits"])
    if bits not in (16, 32, 48, 64):
        raise argparse.ArgumentTypeError(f"template {text!r}: the block is 16, 32, 48 or 64 "
                                         f"bits, not {bits}")
    if ":" in m["block"]:
        try:
            addr = int(ipaddress.IPv6Address(m["block"]))
        except ValueError:
            raise argparse.ArgumentTypeError(f"template {text!r}: {m['block']!r} is not an "
                                             "IPv6 address") from None
        if addr & ((1 << (128 - bits)) - 1):
            raise argparse.ArgumentTypeError(f"template {text!r}: {m['block']} has bits set "
                                             f"past its first {bits}")
        block = addr >> (128 - bits)
    else:
        block = _number(m["block"], "template block")
    usids = tuple(_number(u, "uSID") for u in m["usids"].split(","))
    try:
        return UsidTemplate(block, usids, int(m["spine"]), bits)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"template {text!r}: {e}") from None


def _old_ev(text: str) -> bytes | None:
    return None if text == "unpopulated" else _ev_bytes(text)


# -- EV format profiles -------------------------------------------------------------------------


def _fmt_row(pid: int, info) -> dict:
    return {"id": pid, "state": info.state.name, "mode": info.mode and info.mode.name,
            "widths": None if info.widths is None else list(info.widths)}


def _fmt_cells(row: dict) -> dict:
    widths = row["widths"]
    return {"id": str(row["id"]), "state": row["state"], "mode": _text(row["mode"]),
            "widths": "-" if widths is None else ",".join(map(str, widths))}


def _cmd_fmt_add(args) -> int:
    from .ev_expand import FormatMode
    mode = FormatMode[args.mode.upper()]
    with _controller(args) as (_dev, ctl):
        _absent(_ctl_call(ctl.query_ev_fmt_profile, args.id), _FMT, args.id, "ev-fmt")
        modes = _ctl_call(ctl.query_device).ev_fmt_modes
        if mode not in modes:
            takes = ", ".join(m.name.lower() for m in FormatMode if m in modes)
            raise _Refused(f"--mode {args.mode}: this NIC takes {takes} (its ev_fmt_modes; udp "
                           "only on a NIC of one plane)")
        _add(ctl.modify_ev_fmt_profile, _FMT, args.id, args.offline, mode=mode, widths=args.widths)
        row = _fmt_row(args.id, _ctl_call(ctl.query_ev_fmt_profile, args.id))
    return _changed(args, row)


def _cmd_fmt_show(args) -> int:
    with _controller(args) as (_dev, ctl):
        ids = _ids(ctl, _FMT) if args.id is None else [args.id]
        rows = [_fmt_row(i, _ctl_call(ctl.query_ev_fmt_profile, i)) for i in ids]
    return _shown(args, rows, _fmt_cells)


def _cmd_fmt_del(args) -> int:
    with _controller(args) as (_dev, ctl):
        _delete(ctl.modify_ev_fmt_profile, ctl.query_ev_fmt_profile, _FMT, args.id, "ev-fmt")
    return _changed(args, {"id": args.id, "state": "INIT"})


def _add_fmt(sub) -> None:
    fmt = sub.add_parser("ev-fmt", help="EV format profiles: the fields an EV expands into "
                                        "(OCP mrc_ctl.h)")
    verbs = fmt.add_subparsers(dest="verb", metavar="VERB", required=True)
    p = _verb_parser(
        verbs, "add", target=True, help="make an EV format profile",
        description="EV format profile ID (INIT) goes OFFLINE with --mode and --widths, then "
                    "ONLINE, as an EV profile needs its format to be; with --offline it stays "
                    "OFFLINE. The widths are checked by the OCP expansion rule (each 1 .. 255 "
                    "bits, at most 256 in all, and within the mode: stev 32, udp 16, srv6 256). "
                    "-j: the profile, as show prints it.")
    p.add_argument("id", metavar="ID", type=_profile_id(), help="the profile's id, 64 bits")
    p.add_argument("--mode", required=True, choices=["stev", "srv6", "udp"],
                   help="where the EV goes: the UDP source port and flow label (stev), an SRv6 "
                        "route (srv6), the UDP source port alone (udp, a NIC of one plane)")
    p.add_argument("--widths", required=True, type=_fmt_widths, metavar="W0,W1,...",
                   help="the format fields' widths in bits, first on the wire first")
    p.add_argument("--offline", action="store_true", help="leave it OFFLINE")
    p.set_defaults(func=_cmd_fmt_add)
    p = _verb_parser(
        verbs, "show", target=True, help="EV format profiles: state, mode, widths",
        description="EV format profile ID (any id: one not configured is INIT), or every one "
                    "that is not INIT: its id, state, mode and format field widths. -j: an "
                    "object, or an array of them without ID.")
    p.add_argument("id", metavar="ID", nargs="?", type=_profile_id(), help="the profile's id")
    p.set_defaults(func=_cmd_fmt_show)
    p = _verb_parser(
        verbs, "del", target=True, help="remove an EV format profile",
        description="EV format profile ID goes OFFLINE if it is ONLINE, then INIT. An ONLINE EV "
                    "profile that uses it keeps it ONLINE (EBUSY, exit status 1).")
    p.add_argument("id", metavar="ID", type=_profile_id(), help="the profile's id")
    p.set_defaults(func=_cmd_fmt_del)


# -- EV profiles --------------------------------------------------------------------------------


def _field_text(f: dict) -> str:
    """A field as --field takes it, its values past 9 in hex."""
    return ":".join([str(f["width"])] + [str(v) if v < 10 else hex(v)
                                         for v in (f["init"], f["min"], f["max"], f["mask"])])


def _evp_row(pid: int, info, bound: dict[int, int]) -> dict:
    fields = None if info.fields is None else [
        {"width": f.width, "init": f.init_val, "min": f.min_val, "max": f.max_val,
         "mask": f.mask} for f in info.fields]
    events = None if info.event_mask is None else [
        s.name for s in sorted(info.event_mask, key=lambda s: s.value)]
    return {"id": pid, "state": info.state.name, "mode": info.mode and info.mode.name,
            "fmt": info.fmt_id, "count": info.ev_count, "min_active": info.min_active,
            "events": events, "qps": sorted(q for q, p in bound.items() if p == pid),
            "fields": fields}


def _evp_cells(row: dict) -> dict:
    events = row["events"]
    return {"id": str(row["id"]), "state": row["state"], "mode": _text(row["mode"]),
            "fmt": _text(row["fmt"]), "count": _text(row["count"]),
            "min_active": _text(row["min_active"]),
            "events": "-" if events is None else ",".join(events) or "none",
            "qps": ",".join(map(str, row["qps"])) or "-",
            "fields": "-" if row["fields"] is None else " ".join(map(_field_text,
                                                                       row["fields"]))}


def _check_count(ctl, count: int) -> None:
    """--count against the NIC's EV tables, as query_device reports them."""
    a = _ctl_call(ctl.query_device)
    top, align = a.ev_max_count_profile, a.ev_count_align
    if not 1 <= count <= top or count % align:
        raise _Refused(f"--count {count}: an EV profile of this NIC holds {align} .. {top} EVs, "
                       f"a multiple of {align} (ev_max_count_profile: global.evs; "
                       "ev_count_align: global.planes, as many EVs on every port)")


def _cmd_evp_add(args) -> int:
    from .ctl import EvMode
    from .ctl import ProfileState as S
    mode = EvMode[args.mode.upper()]
    if mode is EvMode.EXPLICIT and not args.offline:
        raise _Refused("an EXPLICIT profile is added --offline: mrcnic ev replace gives it its "
                       "EVs, then ev-profile set ID --state online")
    with _controller(args) as (dev, ctl):
        _absent(_ctl_call(ctl.query_ev_profile, args.id), _EVP, args.id, "ev-profile")
        _check_count(ctl, args.count)
        fmt = _ctl_call(ctl.query_ev_fmt_profile, args.fmt)
        if not args.offline and fmt.state is not S.ONLINE:
            raise _Refused(f"--fmt {args.fmt}: EV format profile {args.fmt} is "
                           f"{fmt.state.name}; an ONLINE EV profile needs an ONLINE format "
                           "(or add this one --offline)")
        _add(ctl.modify_ev_profile, _EVP, args.id, args.offline, mode=mode, fmt_id=args.fmt,
             ev_count=args.count, fields=tuple(args.field), min_active=args.min_active,
             event_mask=args.events)
        row = _evp_row(args.id, _ctl_call(ctl.query_ev_profile, args.id), {})
    return _changed(args, row)


def _ev_rows(ctl, pid: int, qp: int | None) -> list[dict]:
    """The profile's EVs (query_ev_array), the states as QP ``qp``'s table holds them, and
    where that table holds each."""
    binding = None if qp is None else _ctl_call(ctl.binding, qp)
    table = [] if binding is None else _ctl_call(ctl.nic_table, qp)
    rows = []
    for i, e in enumerate(_ctl_call(ctl.query_ev_array, pid, qp=qp)):
        populated = e.state is not None
        rows.append({"index": i, "ev": "0x" + (e.ev.value.hex() or "0") if populated else None,
                     "port": e.ev.port, "state": e.state.name if populated else None,
                     "expansion": None if e.expansion is None else "0x" + e.expansion.hex(),
                     **({} if binding is None else {"entry": binding.entries[i],
                                                    "nic_ev": _held(table, binding.entries[i])})})
    return rows


def _held(table: list[int], entry: int) -> str | None:
    """The EV the NIC's table holds at ``entry``, read back (None: past the table's end)."""
    return f"{table[entry]:#010x}" if entry < len(table) else None


def _ev_cells(row: dict) -> dict:
    cells = {"index": str(row["index"]), "ev": row["ev"] or "unpopulated",
             "port": str(row["port"] or "-"), "state": row["state"] or "UNKNOWN",
             "expansion": _text(row["expansion"])}
    if "entry" in row:
        cells |= {"entry": str(row["entry"]), "nic_ev": row["nic_ev"] or "-"}
    return cells


def _cmd_evp_show(args) -> int:
    if args.qp is not None and not args.evs:
        raise _Refused("--qp chooses the table whose states --evs shows: give --evs too")
    if args.evs and args.id is None:
        raise _Refused("--evs shows one profile's EVs: give its ID")
    with _controller(args) as (dev, ctl):
        bound = _bound(ctl, dev)
        ids = _ids(ctl, _EVP) if args.id is None else [args.id]
        rows = [_evp_row(i, _ctl_call(ctl.query_ev_profile, i), bound) for i in ids]
        evs = None
        if args.evs:
            qps = rows[0]["qps"]
            qp = args.qp
            if qp is not None:
                _qp(dev, qp)
            elif len(qps) > 1:
                raise _Refused(f"EV profile {args.id} is loaded into QPs "
                               f"{', '.join(map(str, qps))}, each with its own states: give "
                               "--qp")
            elif qps:
                qp = qps[0]
            evs = _ev_rows(ctl, args.id, qp)
    if args.json:
        out = rows
        if evs is not None:
            out[0]["evs"] = evs
        _print_json(args, out if args.id is None else out[0])
        return 0
    _shown(args, rows, _evp_cells)
    if evs:
        print()
        table = [_ev_cells(r) for r in evs]
        _print_table([list(c.values()) for c in table], header=list(table[0]),
                     right=(0, 2) + ((5,) if "entry" in table[0] else ()))
    return 0


def _cmd_evp_set(args) -> int:
    from .ctl import EvMode
    from .ctl import ProfileState as S
    attrs = {"mode": args.mode and EvMode[args.mode.upper()], "fmt_id": args.fmt,
             "ev_count": args.count, "min_active": args.min_active, "event_mask": args.events,
             "fields": args.field and tuple(args.field),
             "state": args.state and S[args.state.upper()]}
    attrs = {k: v for k, v in attrs.items() if v is not None}
    if not attrs:
        raise _Refused("nothing to set: give --state, --min-active, --events, --field, --fmt, "
                       "--count or --mode")
    with _controller(args) as (dev, ctl):
        _present(_ctl_call(ctl.query_ev_profile, args.id), _EVP, args.id, "ev-profile")
        if args.count is not None:
            _check_count(ctl, args.count)
        _ctl_call(ctl.modify_ev_profile, args.id, **attrs)
        row = _evp_row(args.id, _ctl_call(ctl.query_ev_profile, args.id), _bound(ctl, dev))
    return _changed(args, row)


def _cmd_evp_del(args) -> int:
    with _controller(args) as (_dev, ctl):
        _delete(ctl.modify_ev_profile, ctl.query_ev_profile, _EVP, args.id, "ev-profile")
    return _changed(args, {"id": args.id, "state": "INIT"})


def _cmd_evp_bind(args) -> int:
    from .enums import SrMode
    mode = None if args.mode is None else SrMode[args.mode.upper()]
    with _controller(args) as (dev, ctl):
        _qp(dev, args.qp)
        b = _ctl_call(ctl.bind_ev_profile, args.id, args.qp, template=args.template, mode=mode)
    if args.json:
        t = b.template
        _print_json(args, {
            "id": b.profile_id, "qp": b.qp, "mode": b.mode.name,
            "template": None if t is None else {"block": f"{t.block:#x}",
                                                "block_bits": t.block_bits,
                                                "usids": [f"{u:#x}" for u in t.usids],
                                                "spine_index": t.spine_index},
            "entries": list(b.entries), "nic_evs": [f"{n:#010x}" for n in b.nic_evs]})
    return 0


def _cmd_evp_unbind(args) -> int:
    with _controller(args) as (dev, ctl):
        _qp(dev, args.qp)
        was = _ctl_call(ctl.binding, args.qp)
        _ctl_call(ctl.unbind_ev_profile, args.qp)
    if args.json:
        _print_json(args, {"qp": args.qp, "id": None if was is None else was.profile_id})
    return 0


def _evp_attr_options(p, adding: bool) -> None:
    """The attributes of an EV profile, as add (required ones required) and set take them."""
    p.add_argument("--fmt", required=adding, metavar="FMT_ID", type=_profile_id("FMT_ID"),
                   help="the EV format profile it expands on")
    p.add_argument("--mode", required=adding, choices=["generated", "explicit"],
                   help="generated: its EVs are every combination of its fields' values "
                        "(min .. max of each), the first --count of them; explicit: mrcnic ev "
                        "replace gives them one by one")
    p.add_argument("--count", type=_bounded("count", 1, _U32_MAX), required=adding, metavar="N",
                   help="its EVs: up to the NIC's global.evs, a multiple of global.planes")
    p.add_argument("--field", type=_ev_field, action="append", required=adding,
                   metavar="WIDTH:INIT:MIN:MAX:MASK",
                   help="a field, for the next format field (repeat it; with set, the fields "
                        "given replace them all)")
    p.add_argument("--min-active", type=_bounded("min-active", 0, _U32_MAX), metavar="N",
                   default=1 if adding else None,
                   help="ev_min_active: the fewest GOOD EVs the NIC keeps from being marked "
                        "ASSUMED_BAD (this NIC keeps a QP's last one: 0 or 1" +
                        ("; default 1)" if adding else ")"))
    p.add_argument("--events", type=_events, metavar="good,assumed_bad|none",
                   default=frozenset() if adding else None,
                   help="the event mask: the state changes reported as EV events" +
                        (" (default none)" if adding else ""))


def _add_evp(sub) -> None:
    evp = sub.add_parser("ev-profile", help="EV profiles: the EVs a QP sprays on (OCP "
                                            "mrc_ctl.h), and which QPs hold them")
    verbs = evp.add_subparsers(dest="verb", metavar="VERB", required=True)
    p = _verb_parser(
        verbs, "add", target=True, help="make an EV profile",
        description="EV profile ID (INIT) goes OFFLINE with the attributes given, then ONLINE "
                    "(its format must be ONLINE); with --offline it stays OFFLINE. An EXPLICIT "
                    "profile is added --offline: its EVs start unpopulated, mrcnic ev replace "
                    "fills them, then ev-profile set ID --state online. The fields are checked "
                    "by the OCP expansion rule (mrcnic ev expand -h lists the rules). -j: the "
                    "profile, as show prints it.")
    p.add_argument("id", metavar="ID", type=_profile_id(), help="the profile's id, 64 bits")
    _evp_attr_options(p, adding=True)
    p.add_argument("--offline", action="store_true", help="leave it OFFLINE")
    p.set_defaults(func=_cmd_evp_add)
    p = _verb_parser(
        verbs, "show", target=True, help="EV profiles; with --evs, one's EVs and their states",
        description="EV profile ID (one not configured is INIT), or every one that is not INIT: "
                    "state, mode, format profile, EV count, min_active, event mask, the QPs it "
                    "is loaded into (as the store records it) and its fields, as --field "
                    "takes them. With --evs, then its EV array (QUERY_EV_ARRAY): each EV's "
                    "value, byte 0 first, its port (- none: a GENERATED EV loaded nowhere), its "
                    "state (UNKNOWN: unpopulated) and its expansion, the bytes it puts on the "
                    "wire; while it is loaded into a QP, the states are that QP's table's, and "
                    "the entry of the table each EV is in and the NIC's 32-bit EV for it "
                    "(mrcnic ev show QP reads the same entries). -j: an object (evs: an array), "
                    "or an array of them without ID.")
    p.add_argument("id", metavar="ID", nargs="?", type=_profile_id(), help="the profile's id")
    p.add_argument("--evs", action="store_true", help="and its EVs")
    p.add_argument("--qp", type=lambda t: _number(t, "QP"), metavar="QP",
                   help="whose table's states --evs shows, when the profile is loaded into "
                        "several QPs")
    p.set_defaults(func=_cmd_evp_show)
    p = _verb_parser(
        verbs, "set", target=True, help="change an EV profile, or move it OFFLINE or ONLINE",
        description="One modify of EV profile ID: the attributes given change, then it moves "
                    "to --state; all or nothing. OFFLINE, every attribute may change; ONLINE, "
                    "the event mask and the fields (EV_PROFILE_MODIFY_ONLINE), not while it is "
                    "loaded into a QP (EBUSY: ev-profile unbind first); the controller refuses "
                    "the rest, naming the rule. -j: the profile, as show prints it.")
    p.add_argument("id", metavar="ID", type=_profile_id(), help="the profile's id")
    p.add_argument("--state", choices=["offline", "online"],
                   help="the state it moves to (INIT: ev-profile del)")
    _evp_attr_options(p, adding=False)
    p.set_defaults(func=_cmd_evp_set)
    p = _verb_parser(
        verbs, "del", target=True, help="remove an EV profile",
        description="EV profile ID goes OFFLINE if it is ONLINE, then INIT. One loaded into a "
                    "QP stays (EBUSY, exit status 1): ev-profile unbind first.")
    p.add_argument("id", metavar="ID", type=_profile_id(), help="the profile's id")
    p.set_defaults(func=_cmd_evp_del)
    p = _verb_parser(
        verbs, "bind", target=True, help="load an ONLINE EV profile into a QP's EV table",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Loads every EV of ONLINE EV profile ID into QP QP's EV table, in place\n"
                    "of what it held, each as the NIC EV for which the NIC puts exactly the\n"
                    "EV's expansion on the wire, on the EV's port; an EV none does is refused\n"
                    "(EPERM, exit status 1), naming it and why, and nothing is written. The\n"
                    "NIC cannot read a QP's context back: --mode and --template say how the QP\n"
                    "was configured. -j: the binding: the table entry and the NIC EV of each EV.",
        epilog="--template BLOCK/BITS:USID,USID,...@SPINE_INDEX, the uSID template the QP's\n"
               "template index names (mrcnic.evmap.UsidTemplate):\n"
               "  BLOCK        the locator block, a number (0xfcbbbb00) or an IPv6 address\n"
               "               whose first BITS bits it is (fcbb:bb00::)\n"
               "  BITS         its length: 16 (F1616) or 32 (F3216) on this NIC\n"
               "  USID,...     the route's uSIDs in hop order, plane and spine bits 0\n"
               "  SPINE_INDEX  which uSID, from 0, takes the spine number\n"
               "The NIC puts the plane number at bit 12 of every uSID. Example:\n"
               "  0xfcbbbb00/32:0x10@0  one uSID, 0x10, the spine's.")
    p.add_argument("id", metavar="ID", type=_profile_id(), help="the profile's id")
    p.add_argument("qp", metavar="QP", type=lambda t: _number(t, "QP"),
                   help="the QP (decimal or 0x-hex, below global.qps)")
    p.add_argument("--template", type=_template, metavar="BLOCK/BITS:USID,...@SPINE_INDEX",
                   help="the QP's uSID template: an SRV6 profile needs it, an STEV or UDP one "
                        "takes none (below)")
    p.add_argument("--mode", choices=["plain", "usid", "usid_srh"],
                   help="the QP's mode: plain for an STEV or UDP profile, usid (default) or "
                        "usid_srh for an SRV6 one")
    p.set_defaults(func=_cmd_evp_bind)
    p = _verb_parser(
        verbs, "unbind", target=True, help="empty a QP's EV table",
        description="Empties QP QP's EV table (it sends on no EV until a profile is loaded "
                    "again); the profile it held is no longer in use there. -j: {qp, id}, id "
                    "the profile it held (null: none a controller loaded).")
    p.add_argument("qp", metavar="QP", type=lambda t: _number(t, "QP"),
                   help="the QP (decimal or 0x-hex, below global.qps)")
    p.set_defaults(func=_cmd_evp_unbind)


# -- EV replace -------------------------------------------------------------------------------


def _port_of(ctl, dev, pid: int, old) -> int:
    """The port of the first copy of EV ``old`` in profile ``pid``'s array."""
    qps = sorted(q for q, p in _bound(ctl, dev).items() if p == pid)
    # the ports are the profile's: any table it is in reads them alike
    for e in _ctl_call(ctl.query_ev_array, pid, qp=qps[0] if qps else None):
        if e.state is not None and e.ev.key == old.key and old.port in (0, e.ev.port):
            return e.ev.port
    # as the controller would refuse it, had it a port to check the new EV against
    raise _Refused(f"EV profile {pid} holds no EV {old} (ENOENT)", 1)


def _cmd_ev_replace(args) -> int:
    from .ctl import Ev, EvMode, EvOpEntry
    from .enums import EvState
    state = EvState[args.state.upper()]
    with _controller(args) as (dev, ctl):
        for opt, port in (("--port", args.port), ("--old-port", args.old_port)):
            if port is not None:
                _port(dev, opt, port)
        old = Ev(args.old or b"", args.old_port or 0)
        port = args.port
        info = _ctl_call(ctl.query_ev_profile, args.profile)
        # the controller refuses a profile not EXPLICIT before it looks at the EVs
        if port is None and info.mode is EvMode.EXPLICIT:
            if old.unpopulated:
                raise _Refused("NEW_EV needs --port: the unpopulated entry it fills has none")
            port = _port_of(ctl, dev, args.profile, old)
        new = Ev(args.new, port or 0)
        _ctl_call(ctl.replace_evs, args.profile,
                  [EvOpEntry(old, new, state, all_copies=args.all_copies)])
    if args.json:
        _print_json(args, {"profile": args.profile,
                           "old": None if old.unpopulated else "0x" + old.value.hex(),
                           "new": "0x" + new.value.hex(), "port": new.port,
                           "state": state.name, "all_copies": args.all_copies})
    return 0


def add_ev_verbs(verbs) -> None:
    """``ev replace``, among the ``ev`` object's verbs."""
    p = _verb_parser(
        verbs, "replace", target=True, help="replace an EV of an EXPLICIT EV profile",
        description="REPLACE_EV: EV OLD_EV of EXPLICIT EV profile PROFILE (its first copy, or "
                    "with --all-copies every one) becomes NEW_EV, in --state; in the table of "
                    "every QP the profile is loaded into too, in the old EV's entry, so NEW_EV "
                    "must go out on the same port (EPERM, exit status 1, otherwise). OLD_EV "
                    "unpopulated (or all zero, without --old-port) names an entry not given an "
                    "EV yet, as MRC_CTL_EV_UNPOPULATED does: that is how an EXPLICIT profile's "
                    "array is filled before it goes ONLINE. An EV the profile does not hold is "
                    "ENOENT, exit status 1. -j: what was replaced.")
    p.add_argument("profile", metavar="PROFILE", type=_profile_id("PROFILE"),
                   help="the EV profile's id")
    p.add_argument("old", metavar="OLD_EV", type=_old_ev,
                   help="hex bytes, byte 0 first, as ev expand takes them; or unpopulated")
    p.add_argument("new", metavar="NEW_EV", type=_ev_bytes, help="hex bytes, byte 0 first")
    p.add_argument("--port", type=lambda t: _number(t, "port"), metavar="N",
                   help="NEW_EV's port, 1 .. global.planes (default: OLD_EV's)")
    p.add_argument("--old-port", type=lambda t: _number(t, "port"), metavar="N",
                   help="OLD_EV's port, when copies of it are on several (default: any)")
    p.add_argument("--state", choices=_SETTABLE, default="good",
                   help="NEW_EV's state (default good)")
    p.add_argument("--all-copies", action="store_true",
                   help="every copy of OLD_EV (every unpopulated entry), not the first")
    p.set_defaults(func=_cmd_ev_replace)


# -- CC profiles --------------------------------------------------------------------------------

#: NsccConfig's fields as options: (field, metavar, type, help). gamma and max_md_jump are
#: left out: the NIC's decrease is its own, and the controller takes no value of them.
_NSCC_OPTIONS = (
    ("target_delay", "NS", _bounded("target-delay", 0, _U32_MAX),
     "the queueing delay NSCC aims at; with --base-rtt, rel.target_rtt"),
    ("base_rtt", "NS", _bounded("base-rtt", 0, _U32_MAX),
     "the round trip with no queue (with --target-delay)"),
    ("max_cwnd", "BYTES", _bounded("max-cwnd", 0, _U32_MAX),
     "the largest window: rel.cwnd_max and rel.cwnd_init"),
    ("fi", "X", _real("fi"), "the fair increase: 0 only, none (rel.cc_fair 0)"),
    ("disable_qa", "N", _bounded("disable-qa", 0, 255), "non-zero only: the NIC has no "
                                                        "QuickAdapt"),
    ("qa_gate", "N", _bounded("qa-gate", 0, 255), "QuickAdapt's gate (acts on nothing here)"),
    ("qa_threshold", "BYTES", _bounded("qa-threshold", 0, _U32_MAX),
     "QuickAdapt's threshold (acts on nothing here)"),
    ("eta", "X", _real("eta"), "0 only"),
    ("fi_scale", "X", _real("fi-scale"), "0 only"),
    ("adjust_bytes_threshold", "BYTES", _bounded("adjust-bytes-threshold", 0, _U32_MAX),
     "0 only: the NIC applies each SACK's change at once"),
    ("adjust_period_threshold", "NS", _bounded("adjust-period-threshold", 0, _U32_MAX),
     "0 only"),
)


def _nscc_given(args) -> dict:
    return {name: getattr(args, name) for name, *_ in _NSCC_OPTIONS
            if getattr(args, name) is not None}


def _cc_row(ctl, pid: int) -> dict:
    from .ctl import ProfileState as S
    from .ctl_errors import NotSupported

    def nic_profile():
        try:
            return ctl.cc_profile_number(pid)
        except NotSupported:          # the NIC keeps none but rel.*, which --apply writes
            return None

    info = _ctl_call(ctl.query_cc_profile, pid)
    config = None if info.config is None else {
        k: v for k, v in dataclasses.asdict(info.config).items() if v is not None}
    return {"id": pid, "state": info.state.name, "algorithm": info.algorithm,
            "nic_profile": _ctl_call(nic_profile) if info.state is S.ONLINE else None,
            "config": config}


def _cc_cells(row: dict) -> dict:
    config = row["config"]
    return {"id": str(row["id"]), "state": row["state"], "algorithm": _text(row["algorithm"]),
            "nic_profile": _text(row["nic_profile"]),
            "config": "-" if config is None else
            " ".join(f"{k}={v}" for k, v in config.items()) or "none"}


#: set_congestion's arguments that are not named as their registers are
_CC_REGISTERS = {"fair": "rel.cc_fair", "gain": "rel.cc_gain", "md_shift": "rel.cc_md"}


def _cmd_cc_add(args) -> int:
    from .ctl import NSCC, NsccConfig
    with _controller(args) as (_dev, ctl):
        _absent(_ctl_call(ctl.query_cc_profile, args.id), _CC, args.id, "cc-profile")
        config = _ctl_call(NsccConfig, **_nscc_given(args))
        _add(ctl.modify_cc_profile, _CC, args.id, args.offline, algorithm=NSCC, config=config)
        row = _cc_row(ctl, args.id)
    return _changed(args, row)


def _cmd_cc_show(args) -> int:
    with _controller(args) as (_dev, ctl):
        ids = _ids(ctl, _CC) if args.id is None else [args.id]
        rows = [_cc_row(ctl, i) for i in ids]
    return _shown(args, rows, _cc_cells)


def _cmd_cc_set(args) -> int:
    from .ctl import NsccConfig
    from .ctl import ProfileState as S
    given = _nscc_given(args)
    if not given and args.state is None and not args.apply:
        raise _Refused("nothing to set: give an NSCC option, --state or --apply")
    with _controller(args) as (_dev, ctl):
        info = _ctl_call(ctl.query_cc_profile, args.id)
        _present(info, _CC, args.id, "cc-profile")
        attrs = {}
        if given:
            # the options given change; the fields not given keep their values
            attrs["config"] = _ctl_call(dataclasses.replace, info.config or NsccConfig(),
                                        **given)
        if args.state is not None:
            attrs["state"] = S[args.state.upper()]
        if attrs:
            _ctl_call(ctl.modify_cc_profile, args.id, **attrs)
        written = _ctl_call(ctl.apply_cc_profile, args.id) if args.apply else None
        row = _cc_row(ctl, args.id)
    if written is None:
        return _changed(args, row)
    registers = {_CC_REGISTERS.get(k, f"rel.{k}"): v for k, v in written.items()}
    if args.json:
        _print_json(args, {**row, "registers": registers})
    else:
        _print_table([[k, str(v)] for k, v in registers.items()], header=["register", "value"],
                     right=(1,))
    return 0


def _cmd_cc_del(args) -> int:
    with _controller(args) as (_dev, ctl):
        _delete(ctl.modify_cc_profile, ctl.query_cc_profile, _CC, args.id, "cc-profile")
    return _changed(args, {"id": args.id, "state": "INIT"})


def _cc_options(p) -> None:
    for name, metavar, kind, what in _NSCC_OPTIONS:
        p.add_argument("--" + name.replace("_", "-"), dest=name, type=kind, metavar=metavar,
                       help=f"NSCC {name}: {what}")
    p.add_argument("--clock-mhz", metavar="MHZ", type=_clock_mhz,
                   help="the NIC's clock, which turns ns into the cycles rel.target_rtt counts "
                        "(no register reports it; default: mrcnic.ctl.DEFAULT_CLOCK_HZ, the "
                        "simulation's)")


def _add_cc(sub) -> None:
    cc = sub.add_parser("cc-profile", help="CC profiles: the congestion control QPs' windows "
                                           "follow (OCP mrc_ctl.h, NSCC)")
    verbs = cc.add_subparsers(dest="verb", metavar="VERB", required=True)
    kept = ("The NIC's CC profile 0 is the rel.* registers, which set --apply writes and "
            "every QP follows unless its context names another (qp.cc_profile); a NIC built "
            "with more (global.cc_profiles) keeps each ONLINE profile in one of its own, 1 and "
            "up (show's nic_profile), and takes each change of it at once.")
    taken = ("The NIC takes target_delay + base_rtt as rel.target_rtt, max_cwnd as "
             "rel.cwnd_max and rel.cwnd_init, fi 0 as rel.cc_fair 0; the other fields only as "
             "what it does anyway (docs/driver.md, Applying a CC profile): anything else is "
             "EPERM, exit status 1, when it is given.")
    p = _verb_parser(
        verbs, "add", target=True, help="make a CC profile (NSCC)",
        description="CC profile ID (INIT) goes OFFLINE with algorithm uet-1.0-nscc and the NSCC "
                    "fields given (the others not given: the NIC's own rules), then ONLINE; "
                    "with --offline it stays OFFLINE. " + kept + " " + taken + " -j: the "
                    "profile, as show prints it.")
    p.add_argument("id", metavar="ID", type=_profile_id(), help="the profile's id, 64 bits")
    _cc_options(p)
    p.add_argument("--offline", action="store_true", help="leave it OFFLINE")
    p.set_defaults(func=_cmd_cc_add)
    p = _verb_parser(
        verbs, "show", target=True, help="CC profiles: state, algorithm, NSCC fields",
        description="CC profile ID (one not configured is INIT), or every one that is not INIT: "
                    "state, algorithm, the NIC's profile an ONLINE one is kept in (- none: a "
                    "NIC with rel.* alone) and the NSCC fields given. -j: an object, or an "
                    "array of them without ID.")
    p.add_argument("id", metavar="ID", nargs="?", type=_profile_id(), help="the profile's id")
    p.set_defaults(func=_cmd_cc_show)
    p = _verb_parser(
        verbs, "set", target=True, help="change a CC profile; --apply puts it in the registers",
        description="One modify of CC profile ID: the NSCC fields given change (the others "
                    "keep their values), then it moves to --state; all or nothing. ONLINE, its "
                    "configuration may change (CC_PROFILE_MODIFY_ONLINE), and goes to the NIC "
                    "at once: to its own profile there, and to rel.* if it is the profile "
                    "applied. With --apply, then the ONLINE profile is written into rel.*, and "
                    "the registers written are printed (-j: the profile and registers). "
                    + kept + " " + taken)
    p.add_argument("id", metavar="ID", type=_profile_id(), help="the profile's id")
    _cc_options(p)
    p.add_argument("--state", choices=["offline", "online"],
                   help="the state it moves to (INIT: cc-profile del)")
    p.add_argument("--apply", action="store_true",
                   help="write it into the NIC's congestion registers (rel.*)")
    p.set_defaults(func=_cmd_cc_set)
    p = _verb_parser(
        verbs, "del", target=True, help="remove a CC profile",
        description="CC profile ID goes OFFLINE if it is ONLINE, then INIT; one a QP's window "
                    "follows (its qp.cc_profile) stays ONLINE (EBUSY, exit status 1). rel.* "
                    "keeps what --apply put there.")
    p.add_argument("id", metavar="ID", type=_profile_id(), help="the profile's id")
    p.set_defaults(func=_cmd_cc_del)


def add(sub) -> None:
    """The ``ev-fmt``, ``ev-profile`` and ``cc-profile`` objects, among the top-level ones."""
    _add_fmt(sub)
    _add_evp(sub)
    _add_cc(sub)
