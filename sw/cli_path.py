"""``mrcnic path show``: per entry of a QP's EV profile, the path it takes and what it saw."""

from __future__ import annotations

from . import cli
from .cli import (
    _chosen,
    _clock_mhz,
    _nic_call,
    _print_json,
    _print_table,
    _qp_argument,
    _Refused,
    _verb_parser,
)

__all__ = ["add"]

_COLUMNS = ("qp", "entry", "port", "state", "ev", "route", "rtt", "rtt_ns", "timed", "ecn",
            "acked", "lost")


def _rows(dev, q: int, show_all: bool, clock_hz: float) -> list[dict]:
    from . import driver
    from .ctl import Controller
    from .ctl_errors import MrcError
    from .evmap import EvLayout
    planes = dev.info["planes"]
    # the EVs as the NIC holds them (a spare where one took an entry's place), not as loaded
    entries = _nic_call(dev.regs.run, driver.keeping(("ev.qp", "ev.index"),
                                                     driver.ev_entries(q)))
    stats = _nic_call(dev.regs.run, driver.keeping(("path.qp", "path.entry"),
                                                   driver.path_stats(q)))
    try:
        binding = Controller(dev.regs).binding(q)
    except MrcError as e:
        raise _Refused(f"the NIC's store: {e}", 1) from None
    template = None if binding is None else binding.template
    layout = EvLayout(planes, dev.info["spines"])
    rows = []
    for i, (state, ev) in enumerate(entries):
        s = stats[i]
        if not (show_all or ev is not None or s["acked"] or s["lost"]):
            continue
        route = "-"
        if ev is not None and template is not None:
            route = str(template.route(ev, layout))
        rows.append({"qp": q, "entry": i, "port": i % planes + 1, "state": state.name,
                     "ev": "-" if ev is None else f"{ev:#010x}", "route": route,
                     "rtt": s["rtt"], "rtt_ns": int(s["rtt"] * 1e9 / clock_hz + 0.5),
                     "timed": s["timed"], "ecn": s["ecn"], "acked": s["acked"],
                     "lost": s["lost"]})
    return rows


def _cmd_path_show(args) -> int:
    from .ctl import DEFAULT_CLOCK_HZ
    clock_hz = DEFAULT_CLOCK_HZ if args.clock_mhz is None else args.clock_mhz * 1e6
    with cli._device(args) as dev:      # (looked up now: tests stand a fake NIC in)
        count = dev.info["qps"]
        qps = _chosen(args.qp, 0, count, "QP", f"{count} QPs, 0 .. {count - 1} (global.qps)")
        rows = [r for q in qps for r in _rows(dev, q, args.all, clock_hz)]
    if args.json:
        _print_json(args, rows)
        return 0
    if not rows:
        print("no entry holds an EV that the NIC or its store knows of (--all shows every one)")
        return 0
    _print_table([[str(r[k]) for k in _COLUMNS] for r in rows], header=list(_COLUMNS),
                 right=(0, 1, 2, 6, 7, 8, 9, 10, 11))
    return 0


def add(sub) -> None:
    path = sub.add_parser("path", help="the paths each QP's EV profile sprays over")
    verbs = path.add_subparsers(dest="verb", metavar="VERB", required=True)
    p = _verb_parser(
        verbs, "show", target=True,
        help="per EV profile entry: port, state, EV, route, RTT, ECN marks, losses",
        description="Per QP, each entry of its EV profile: its port (entry i is on plane "
                    "i % planes, port plane + 1), its state (ev.state), the NIC EV it holds "
                    "(ev.entry, read back: a spare that took the entry's place shows as itself) "
                    "and the route that EV takes (by the template of the controller's binding in "
                    "the NIC's store, when a controller loaded the profile; else -), and what "
                    "the NIC saw of it (path.*): the last RTT a SACK timed, in cycles and "
                    "ns, how many packets sent on it a SACK timed (the packet that triggered "
                    "it) and how many of those arrived ECN-marked, how many arrived, and how "
                    "many were sent again. The counts run from the NIC's reset, whatever EV the "
                    "entry held. Entries shown: those of the profile (ev.size), and any other "
                    "with counts; --all: every one.")
    _qp_argument(p, "the QP")
    p.add_argument("--all", action="store_true", help="every entry, global.evs of them")
    p.add_argument("--clock-mhz", type=_clock_mhz, metavar="MHZ",
                   help="the NIC's clock for the ns column (default: the simulation's, 250)")
    p.set_defaults(func=_cmd_path_show)

