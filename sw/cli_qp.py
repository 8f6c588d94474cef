"""``mrcnic qp add|set|del`` and ``mrcnic mr add|show``: the QPs of the application API
(:mod:`mrcnic.app`) from the command line.

Each command makes its own :class:`~mrcnic.app.Context`, which takes up the CQ and QPs the
NIC's store holds (under ``app``, sw/store.py) and writes back what it changed, so one command
sees what the ones before it made, and so does a program using the API. ``qp set QP STATE``
takes the transition's attributes as iproute2 does, a name and its value each
(``qp set 1 rtr dqp 3 dst-ip fd00::2 rq-psn 0``).

Refusals, one line each: a bad argument or value is exit status 2 before the NIC is reached;
a QP the NIC does not have or that is not created, exit status 2 with nothing written. The
API's own refusal is its message and errno name: exit status 2 for EINVAL and E2BIG, a value
the header calls invalid or too big; 1 for the rest, what this NIC cannot do (EPERM), what is
in use (EBUSY), the NIC failing (EIO).
"""

from __future__ import annotations

import argparse
import ipaddress
import re

from . import cli as _cli
from .cli import _as_number, _bounded, _print_json, _print_table, _Refused, _verb_parser

__all__ = ["add", "add_qp_verbs", "kept_qps"]

_U64_MAX = (1 << 64) - 1
#: the states ``qp set`` moves a QP to, by the names it takes them by (the enums are imported
#: only when a QP is moved: mrcnic.enums takes Amaranth's shapes when it is installed)
_STATES = ("init", "rtr", "rts", "reset", "error")
_MTUS = (256, 512, 1024, 2048, 4096)


# -- the context --------------------------------------------------------------------------------


def _context(dev):
    from .app import Context
    return _cli._api_call(Context, dev.regs)


def _created(args, dev, ctx):
    """The QP ``args.qp``, which the NIC must have and the store hold as created."""
    (q,) = _cli._qps(args, dev)
    for qp in _cli._api_call(ctx.qps):
        if qp.qp_num == q:
            return qp
    raise _Refused(f"QP {q} is not created: mrcnic qp add {q} creates it")


def _row(qp) -> dict:
    return {"qp": qp.qp_num, "state": qp.state.name, "ev_profile_id": qp.ev_profile_id,
            "cc_profile_id": qp.cc_profile_id}


def _cell(value) -> str:
    return "-" if value is None else str(value)


def kept_qps(dev) -> dict[int, dict]:
    """What the NIC's store holds of each created QP, by number: its state and profile ids
    (``qp show``'s)."""
    qps = _cli._api_call(_context(dev).qps)
    return {qp.qp_num: {k: v for k, v in _row(qp).items() if k != "qp"} for qp in qps}


# -- qp set's attributes ------------------------------------------------------------------------


def _uint(bits: int, low: int = 0):
    top = (1 << bits) - 1

    def parse(text: str) -> int:
        n = _as_number(text)
        if n is None or not low <= n <= top:
            raise ValueError(f"a number {low} .. {top:#x} (decimal or 0x-hex)")
        return n
    return parse


def _ipv6(text: str) -> str:
    try:
        return str(ipaddress.IPv6Address(text))
    except ValueError:
        raise ValueError("an IPv6 address (e.g. fd00::2)") from None


def _mac(text: str) -> str:
    if not re.fullmatch(r"[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}", text):
        raise ValueError("a MAC address (aa:bb:cc:dd:ee:ff)")
    return text.lower()


def _mtu(text: str) -> int:
    if not text.isdigit() or int(text) not in _MTUS:
        raise ValueError(f"one of {', '.join(map(str, _MTUS))} (bytes)")
    return int(text)


def _mode(text: str):
    from .enums import SrMode
    names = [m.name.lower() for m in SrMode]
    if text not in names:
        raise ValueError(f"one of {', '.join(names)}")
    return SrMode[text.upper()]


def _route(text: str):
    # the form ev-profile bind takes its --template in
    from .cli_profiles import _TEMPLATE_FORM, _template
    try:
        return _template(text)
    except argparse.ArgumentTypeError:
        raise ValueError(f"a template: {_TEMPLATE_FORM}") from None


#: per state, what ``qp set`` takes: name -> (the API's attribute, its parser, its value's
#: name); the names each state needs in _NEEDED
_ATTRS = {
    "init": {"ev-profile": ("ev_profile_id", _uint(64), "ID"),
                   "cc-profile": ("cc_profile_id", _uint(64), "ID")},
    "rtr": {"dqp": ("dest_qp", _uint(24), "N"), "dst-ip": ("dst_ip", _ipv6, "ADDR"),
                  "rq-psn": ("rq_psn", _uint(24), "N"), "dst-mac": ("dst_mac", _mac, "MAC"),
                  "mtu": ("path_mtu", _mtu, "BYTES"), "mode": ("mode", _mode, "MODE"),
                  "template": ("template", _uint(8), "N"), "route": ("route", _route, "TEMPLATE"),
                  "rkey": ("rkey", _uint(32), "KEY"), "mr-va": ("mr_va", _uint(64), "ADDR"),
                  "mr-length": ("mr_length", _uint(64), "N"),
                  "rq-msn": ("rq_msn", _uint(16), "N")},
    "rts": {"sq-psn": ("sq_psn", _uint(24), "N"), "sq-msn": ("sq_msn", _uint(16), "N")},
    "reset": {}, "error": {},
}
_NEEDED = {"rtr": ("dqp", "dst-ip", "rq-psn"), "rts": ("sq-psn",)}


def _usage(state: str) -> str:
    """``STATE NAME VALUE ... [NAME VALUE] ...``: what ``qp set`` takes for ``state``."""
    needed = _NEEDED.get(state, ())
    words = [state]
    for name, (_, _, value) in _ATTRS[state].items():
        words.append(f"{name} {value}" if name in needed else f"[{name} {value}]")
    return " ".join(words)


def _attrs(state_name: str, words: list[str]) -> dict:
    """The API's attributes ``qp set QP STATE NAME VALUE ...`` gives, each checked."""
    state = state_name
    takes, out = _ATTRS[state], {}
    for i in range(0, len(words), 2):
        name = words[i]
        if name not in takes:
            raise _Refused(f"{state_name} takes {', '.join(takes) or 'no attribute'}, not "
                           f"{name!r}: {_usage(state)}")
        attr, parse, value = takes[name]
        if i + 1 == len(words):
            raise _Refused(f"{name} needs its value: {name} {value}")
        if attr in out:
            raise _Refused(f"{name} is given twice")
        try:
            out[attr] = parse(words[i + 1])
        except ValueError as e:
            raise _Refused(f"{name} {words[i + 1]!r} is not {e}") from None
    missing = [n for n in _NEEDED.get(state, ()) if takes[n][0] not in out]
    if missing:
        raise _Refused(f"{state_name} needs {', '.join(missing)}: {_usage(state)}")
    return out


# -- the verbs ----------------------------------------------------------------------------------


def _shown(args, rows: list[dict], hexed=()) -> int:
    if args.json:
        _print_json(args, rows)
    elif rows:
        header = list(rows[0])
        _print_table([[f"{v:#x}" if k in hexed else _cell(v) for k, v in r.items()]
                      for r in rows], header=header,
                     right=[i for i, k in enumerate(header) if k != "state"])
    return 0


def _cmd_qp_add(args) -> int:
    with _cli._device(args) as dev:
        if args.qp is not None:
            _cli._qps(args, dev)              # before a CQ is made for it
        ctx = _context(dev)
        cq = _cli._api_call(ctx.cq)
        if cq is None:
            cq = _cli._api_call(ctx.create_cq, 1)       # the NIC's one queue, as deep as it is
        qp = _cli._api_call(ctx.create_qp, cq, cq, qp_num=args.qp)
    if args.json:
        _print_json(args, _row(qp))
        return 0
    return _shown(args, [_row(qp)])


def _cmd_qp_set(args) -> int:
    attrs = _attrs(args.state, args.attrs)
    with _cli._device(args) as dev:
        ctx = _context(dev)
        qp = _created(args, dev, ctx)
        from .enums import QpState
        _cli._api_call(ctx.modify_qp, qp, QpState[args.state.upper()], **attrs)
    if args.json:
        _print_json(args, _row(qp))
    return 0


def _cmd_qp_del(args) -> int:
    with _cli._device(args) as dev:
        ctx = _context(dev)
        _cli._api_call(ctx.destroy_qp, _created(args, dev, ctx))
    return 0


def _region_row(qp) -> dict:
    r = qp.region
    return {"qp": qp.qp_num, "state": qp.state.name, "rkey": r.rkey, "va": r.va,
            "length": r.length}


def _cmd_mr_add(args) -> int:
    if args.va + args.length > _U64_MAX + 1:
        raise _Refused(f"--length {args.length} bytes at --va {args.va:#x} run past the end of "
                       "the 64-bit address space")
    with _cli._device(args) as dev:
        ctx = _context(dev)
        qp = _created(args, dev, ctx)
        _cli._api_call(ctx.set_region, qp, va=args.va, length=args.length, rkey=args.rkey)
    if args.json:
        _print_json(args, _region_row(qp))
    return 0


def _cmd_mr_show(args) -> int:
    with _cli._device(args) as dev:
        ctx = _context(dev)
        qps = _cli._api_call(ctx.qps) if args.qp is None else [_created(args, dev, ctx)]
    return _shown(args, [_region_row(qp) for qp in qps if qp.region is not None],
                  hexed=("rkey", "va"))


def _qp_number(text: str) -> int:
    return _cli._number(text, "QP")


_SET_FORMS = "\n".join(f"  {_usage(s)}" for s in _ATTRS)


def add_qp_verbs(verbs) -> None:
    """Adds ``add``, ``set`` and ``del`` to the ``qp`` object's verbs."""
    p = _verb_parser(
        verbs, "add", target=True, help="create a QP, in RESET",
        description="Creates QP QP (none: the lowest not created) in RESET, written so to the "
                    "NIC, and keeps it in the NIC's store for the next commands (mrcnic.app). "
                    "Its completions go to the NIC's one register completion queue (cq.*), "
                    "which is created first if it is not (cq.route then takes every QP's "
                    "completions); it stays when the QP is deleted. Prints the QP: number, "
                    "state and profile ids (-j: {qp, state, ev_profile_id, cc_profile_id}). A "
                    "QP created already is EBUSY, exit status 1.")
    p.add_argument("qp", nargs="?", metavar="QP", type=_qp_number,
                   help="the QP (decimal or 0x-hex, below global.qps)")
    p.set_defaults(func=_cmd_qp_add)
    p = _verb_parser(
        verbs, "set", target=True, formatter_class=argparse.RawDescriptionHelpFormatter,
        help="move a created QP to another state, with that transition's attributes",
        description="Moves QP QP to STATE, written whole to the NIC, as mrcnic.app's modify_qp "
                    "does: RESET -> INIT -> RTR -> RTS, and to RESET or ERROR from any state. "
                    "The attributes follow STATE, a name and its value each:\n\n" + _SET_FORMS
                    + "\n\nev-profile names an ONLINE EV profile, loaded into the QP's EV table "
                      "at rtr (route: the template of the QP's template index, for an SRv6 "
                      "profile, as BLOCK/BITS:USID,...@SPINE_INDEX) and taken out at reset; "
                      "cc-profile an ONLINE CC profile, applied to the NIC's one set of "
                      "congestion registers (EBUSY while another QP follows another one). "
                      "rkey, mr-va and mr-length each take the place of what mr add gave. "
                      "-j: the QP as qp add prints it.")
    p.add_argument("qp", metavar="QP", type=_qp_number, help="the QP (decimal or 0x-hex)")
    p.add_argument("state", metavar="STATE", choices=list(_STATES),
                   help=", ".join(_STATES))
    p.add_argument("attrs", nargs="*", metavar="NAME VALUE",
                   help="the transition's attributes (see above)")
    p.set_defaults(func=_cmd_qp_set)
    p = _verb_parser(
        verbs, "del", target=True, help="move a created QP to RESET and free its number",
        description="Moves QP QP to RESET (its EV profile, if one was loaded at rtr, is taken "
                    "out of its EV table) and frees its number. The completion queue stays.")
    p.add_argument("qp", metavar="QP", type=_qp_number, help="the QP (decimal or 0x-hex)")
    p.set_defaults(func=_cmd_qp_del, json_ok=False)


def add(sub) -> None:
    """Adds the ``mr`` object: a QP's memory region."""
    mr = sub.add_parser("mr", help="the memory region of a QP: where its peer writes")
    verbs = mr.add_subparsers(dest="verb", metavar="VERB", required=True)
    p = _verb_parser(
        verbs, "add", target=True, help="give a created QP its memory region",
        description="QP QP's peer may write LENGTH bytes from --va on, with R_Key --rkey: the "
                    "QP's qp.mr_va, qp.mr_length and qp.rkey, written to the NIC with its "
                    "context (mrcnic.app's set_region). The NIC holds one region a QP, in its "
                    "context, so the QP must be RESET or INIT (writing the context of a QP that "
                    "receives starts its receive side again; EINVAL otherwise) and have none "
                    "(E2BIG: qp set QP reset clears it). qp set QP rtr keeps it, unless given "
                    "rkey, mr-va or mr-length, each of which takes the place of its value. "
                    "-j: the region as mr show prints it.")
    p.add_argument("qp", metavar="QP", type=_qp_number, help="the QP (decimal or 0x-hex)")
    p.add_argument("--va", required=True, metavar="ADDR", type=_bounded("va", 0, _U64_MAX),
                   help="where the region starts in this NIC's memory")
    p.add_argument("--length", required=True, metavar="N",
                   type=_bounded("length", 1, _U64_MAX), help="its bytes, at least 1")
    p.add_argument("--rkey", required=True, metavar="KEY",
                   type=_bounded("rkey", 0, (1 << 32) - 1),
                   help="the R_Key the peer's writes carry")
    p.set_defaults(func=_cmd_mr_add)
    p = _verb_parser(
        verbs, "show", target=True, help="the memory region of each created QP",
        description="Per created QP that has a region (mr add, or qp set rtr's rkey, mr-va "
                    "and mr-length): its state, R_Key, start and length, as the NIC's store "
                    "holds them. -j: a JSON array of {qp, state, rkey, va, length}.")
    p.add_argument("qp", nargs="?", metavar="QP", type=_qp_number,
                   help="the QP (decimal or 0x-hex); none: every created QP")
    p.set_defaults(func=_cmd_mr_show)
