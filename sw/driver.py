"""The host driver: what it takes to bring a NIC up and watch it, as register programs.

Each function returns a program (see :mod:`mrcnic.regclient`) that either client runs::

    regs = RegisterClient(transport)             # or AsyncRegisterClient in a simulation
    info = regs.run(identify())
    regs.run(write_template(0, UsidTemplate(0xFCBB, (0x100, 0x200, 0x300), spine_index=1)))
    profile = regs.run(load_ev_profile(qp=3, evs=my_evs, layout=EvLayout(planes=2, spines=4)))

Values are checked against the NIC's own build parameters (read from the ``global`` block)
before anything is written, and a bad one raises :class:`RegisterError` naming it.
"""

from __future__ import annotations

import functools
import ipaddress
from dataclasses import dataclass, fields

from .enums import MTU_CODES, EvState, LoadOp, QpState, RelMode, SprayMode, SrMode, WrOpcode, WrStatus
from .evmap import EvLayout, UsidTemplate
from .regclient import Program, RegisterError, command, read, write
from .regmap import (
    BUS_ERRORS,
    CC_PARAMS,
    CQ_ENTRY,
    CQ_ROUTE_RECV,
    CQ_ROUTE_SEND,
    EVQ_ENTRY,
    MAX_PLANES,
    MEM_WINDOW_BYTES,
    MRCNIC_ID,
    REGISTERS,
    REL_COUNTERS,
    RTO_LIMIT,
    TX_ERROR_REASONS,
    Access,
    by_name,
    unpack,
)
from .wire import PROBE_DQP

__all__ = ["QpConfig", "identify", "set_enabled", "set_addresses", "set_plane_addresses",
           "write_template", "configure_qp", "load_ev_profile", "replace_ev", "clear_ev_profile",
           "set_ev_state", "tx_counters", "rx_counters", "set_ack_policy", "set_reliability",
           "set_port_rate", "set_spray", "set_port_admin", "ports", "rel_counters", "ev_states",
           "ev_table", "ev_entries",
           "set_congestion", "congestion", "path_stats", "PATH_FIELDS",
           "mac_int", "ip_int", "mac_text", "staged_qp",
           "keeping", "COUNTERS", "BOARD_COUNTERS", "counters", "MAX_MESSAGE", "Completion", "post_write",
           "route_completions", "poll_cq", "cq_overflows", "mem_read", "mem_write",
           "EVENT_STATES", "EvEvent", "set_ev_event_mask", "ev_events",
           "probe_start", "probe_send", "probe_result", "port_status_update"]

_MTU_CODE = {size: code for code, size in MTU_CODES.items()}


def mac_int(mac: str | int) -> int:
    if isinstance(mac, int):
        if not 0 <= mac < 1 << 48:
            raise RegisterError(f"MAC address {mac:#x} is not 48 bits")
        return mac
    parts = mac.split(":")
    if len(parts) != 6 or not all(len(p) == 2 for p in parts):
        raise RegisterError(f"{mac!r} is not a MAC address (aa:bb:cc:dd:ee:ff)")
    try:
        return int("".join(parts), 16)
    except ValueError:
        raise RegisterError(f"{mac!r} is not a MAC address (aa:bb:cc:dd:ee:ff)") from None


def mac_text(mac: int) -> str:
    """A 48-bit MAC address as aa:bb:cc:dd:ee:ff."""
    return ":".join(f"{b:02x}" for b in mac.to_bytes(6, "big"))


def ip_int(ip: str | int) -> int:
    try:
        return int(ipaddress.IPv6Address(ip))
    except (ValueError, ipaddress.AddressValueError):
        raise RegisterError(f"{ip!r} is not an IPv6 address") from None


@dataclass(frozen=True)
class QpConfig:
    """A QP's context as the driver sets it."""
    dqp: int
    dst_mac: str | int
    dst_ip: str | int
    template: int = 0
    mtu: int = 4096              # bytes: 256, 512, 1024, 2048 or 4096
    mode: SrMode = SrMode.USID
    state: QpState = QpState.RTS
    next_psn: int = 0
    msn: int = 0
    rkey: int = 0                # the memory region the peer writes into
    mr_va: int = 0
    mr_length: int = 0
    rx_psn: int = 0              # the first PSN and MSN expected from the peer
    rx_msn: int = 0
    cc_profile: int = 0          # the CC profile its window follows (0: the rel.* registers)


def _refusals_checked(fn):
    """The sequence fails if the NIC refused any of its accesses (``global.bus_errors`` moved):
    a refused staged field would otherwise go out with the next command unnoticed."""
    @functools.wraps(fn)
    def program(*args, **kwargs):
        before = yield from read(BUS_ERRORS)
        result = yield from fn(*args, **kwargs)
        refused = ((yield from read(BUS_ERRORS)) - before) % (1 << 32)
        if refused:
            raise RegisterError(f"{fn.__name__}: the NIC refused {refused} access(es) "
                                f"({BUS_ERRORS}); its state after the first one is not known")
        return result
    return program


def identify() -> Program:
    """The NIC's identity and build parameters; refuses anything that is not an mrcnic."""
    nic_id = yield from read("global.id")
    if nic_id != MRCNIC_ID:
        raise RegisterError(f"global.id reads {nic_id:#010x}, not {MRCNIC_ID:#010x}: this is not "
                            "an mrcnic register window")
    info = {"version": (yield from read("global.version"))}
    for k in ("data_width", "planes", "qps", "evs", "templates", "max_usids", "spines",
              "spares", "cc_profiles"):
        info[k] = yield from read(f"global.{k}")
    return info


def _below(what: str, value: int, limit_reg: str) -> Program:
    limit = yield from read(limit_reg)
    if not isinstance(value, int) or not 0 <= value < limit:
        raise RegisterError(f"{what} {value!r} does not exist: this NIC has {limit} "
                            f"({limit_reg})")
    return limit


def _nic_layout(layout: EvLayout) -> Program:
    """Refuses an EV layout other than the NIC's own (its planes, its spines, the default
    field positions, which are the ones the gateware reads)."""
    planes = yield from read("global.planes")
    spines = yield from read("global.spines")
    nic = EvLayout(planes, spines)
    if layout != nic:
        raise RegisterError(f"the EV layout {layout} is not the NIC's {nic}")
    return planes


@_refusals_checked
def set_enabled(on: bool) -> Program:
    """Lets the NIC take work requests (``True``) or stops it taking more (``False``)."""
    yield from write("global.control", int(bool(on)))


@_refusals_checked
def set_port_rate(gbps: float, clock_mhz: float = 250.0, limit: int | None = None) -> Program:
    """Meters each port at ``gbps`` (its line rate; 0 turns the meters off) for a NIC whose core
    clock runs at ``clock_mhz``: a port holding more than ``limit`` bytes (``None``: as it is)
    of what it was given is passed over while another is free (tx.port_rate, tx.port_limit)."""
    for what, v in (("gbps", gbps), ("clock_mhz", clock_mhz)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0:
            raise RegisterError(f"{what} must be a number of at least 0, not {v!r}")
    if clock_mhz == 0:
        raise RegisterError("clock_mhz must be above 0")
    rate = round(gbps * 1000 / 8 / clock_mhz * 256)
    top = (1 << by_name("tx.port_rate").width) - 1
    if not 0 <= rate <= top or (gbps and not rate):
        raise RegisterError(f"{gbps} Gb/s at {clock_mhz} MHz is {rate}/256 bytes a cycle; "
                            f"tx.port_rate holds 1 .. {top}")
    top = (1 << by_name("tx.port_limit").width) - 1
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool)
                              or not 0 <= limit <= top):
        raise RegisterError(f"limit must be 0 .. {top} bytes, not {limit!r}")
    yield from write("tx.port_rate", rate)
    if limit is not None:
        yield from write("tx.port_limit", limit)


@_refusals_checked
def set_spray(mode: SprayMode) -> Program:
    """How each packet's EV is picked (:class:`SprayMode`): MRC's rounds or blind random."""
    try:
        mode = SprayMode(mode)
    except ValueError:
        raise RegisterError(f"spray mode must be one of {[m.name for m in SprayMode]}, "
                            f"not {mode!r}") from None
    yield from write("tx.spray", mode.value)


@_refusals_checked
def set_port_admin(plane: int, up: bool) -> Program:
    """Holds port ``plane`` down (``up`` False: nothing sent or taken there, and the peers hear
    it is down) or lets it up again (net.port_admin)."""
    planes = yield from read("global.planes")
    if not isinstance(plane, int) or isinstance(plane, bool) or not 0 <= plane < planes:
        raise RegisterError(f"port {plane!r} does not exist: this NIC has ports 0 .. "
                            f"{planes - 1} (global.planes)")
    admin = yield from read("net.port_admin")
    yield from write("net.port_admin", admin | 1 << plane if up else admin & ~(1 << plane))


def ports() -> Program:
    """Each port's state, port 0 first: ``{"admin": bool, "up": bool, "frames": n,
    "bytes": n}``: held up by management (net.port_admin), up (its link too: net.port_up), and
    what it has sent."""
    planes = yield from read("global.planes")
    admin = yield from read("net.port_admin")
    up = yield from read("net.port_up")
    out = []
    for p in range(planes):
        out.append({"admin": bool(admin >> p & 1), "up": bool(up >> p & 1),
                    "frames": (yield from read(f"tx.frames_p{p}")),
                    "bytes": (yield from read(f"tx.bytes_p{p}"))})
    return out


@_refusals_checked
def set_addresses(mac: str | int, ip: str | int) -> Program:
    """This NIC's MAC and IPv6 addresses; used from when the NIC is next disabled."""
    mac, ip = mac_int(mac), ip_int(ip)
    yield from write("tx.src_mac", mac)
    yield from write("tx.src_ip", ip)


@_refusals_checked
def set_plane_addresses(plane: int, next_hop: str | int | None = None,
                        sid: str | int | None = None) -> Program:
    """This NIC's place on plane ``plane``'s network: ``next_hop``, the MAC every frame sent
    there goes to (the router port it is cabled to; 0: each QP's dst_mac), and ``sid``, its
    own SRv6 address there (the route's last uSID is its own; 0: take any); ``None`` leaves
    one as it is."""
    planes = yield from read("global.planes")
    if not isinstance(plane, int) or not 0 <= plane < planes:
        raise RegisterError(f"plane must be 0 .. {planes - 1}, not {plane!r}")
    if next_hop is not None:
        yield from write(f"net.next_hop_p{plane}", mac_int(next_hop))
    if sid is not None:
        yield from write(f"net.sid_p{plane}", ip_int(sid))


#: tpl.format: the carrier formats the NIC's templates have, by block length
TEMPLATE_FORMATS = {16: 0, 32: 1}


@_refusals_checked
def write_template(index: int, tpl: UsidTemplate) -> Program:
    if tpl.block_bits not in TEMPLATE_FORMATS or tpl.plane_shift != 12:
        raise RegisterError(f"template {index}: the NIC's templates have a 16- or 32-bit block "
                            f"(F1616, F3216) and the plane at bit 12 of each uSID, not "
                            f"{tpl.block_bits} and {tpl.plane_shift}")
    yield from _below("template", index, "global.templates")
    most = yield from read("global.max_usids")
    if len(tpl.usids) > most:
        raise RegisterError(f"template {index} has {len(tpl.usids)} uSIDs; this NIC holds at "
                            f"most {most}")
    yield from write("tpl.block", tpl.block)
    yield from write("tpl.format", TEMPLATE_FORMATS[tpl.block_bits])
    yield from write("tpl.count", len(tpl.usids))
    yield from write("tpl.spine_index", tpl.spine_index)
    yield from write("tpl.usids", sum(u << (16 * i) for i, u in enumerate(tpl.usids)))
    yield from command("tpl.write", index)


@_refusals_checked
def configure_qp(qp: int, cfg: QpConfig) -> Program:
    yield from _below("QP", qp, "global.qps")
    yield from _below(f"QP {qp}: template", cfg.template, "global.templates")
    yield from _below(f"QP {qp}: CC profile", cfg.cc_profile, "global.cc_profiles")
    if cfg.mtu not in _MTU_CODE:
        raise RegisterError(f"QP {qp}: MTU {cfg.mtu!r} is not one of {sorted(_MTU_CODE)}")
    for name, bits in (("dqp", 24), ("next_psn", 24), ("msn", 16), ("rkey", 32), ("mr_va", 64),
                       ("mr_length", 64), ("rx_psn", 24), ("rx_msn", 16)):
        v = getattr(cfg, name)
        if not isinstance(v, int) or not 0 <= v < 1 << bits:
            raise RegisterError(f"QP {qp}: {name} {v!r} is not a {bits}-bit value")
    if cfg.dqp == PROBE_DQP:
        raise RegisterError(f"QP {qp}: dqp {PROBE_DQP} is where EV probes go; no QP can "
                            "receive data there")
    mode, state = SrMode(cfg.mode), QpState(cfg.state)
    for path, value in (("qp.state", state.value), ("qp.dqp", cfg.dqp),
                        ("qp.mtu", _MTU_CODE[cfg.mtu]), ("qp.mode", mode.value),
                        ("qp.template", cfg.template), ("qp.dst_mac", mac_int(cfg.dst_mac)),
                        ("qp.dst_ip", ip_int(cfg.dst_ip)), ("qp.next_psn", cfg.next_psn),
                        ("qp.msn", cfg.msn), ("qp.rkey", cfg.rkey), ("qp.mr_va", cfg.mr_va),
                        ("qp.mr_length", cfg.mr_length), ("qp.rx_psn", cfg.rx_psn),
                        ("qp.rx_msn", cfg.rx_msn), ("qp.cc_profile", cfg.cc_profile)):
        yield from write(path, value)
    yield from command("qp.write", qp)


def staged_qp() -> Program:
    """The QP context the ``qp.*`` registers stage, decoded into a :class:`QpConfig`: what
    the next ``qp.write`` gives a QP (the last :func:`configure_qp` wrote, unless someone has
    staged fields since). The NIC cannot read a QP's own context back: the registers only
    stage one, and ``qp.write`` reads back as pending or not, not as a QP number."""
    raw = {}
    for f in fields(QpConfig):
        raw[f.name] = yield from read(f"qp.{f.name}")
    return QpConfig(**raw | {"state": QpState(raw["state"]), "mode": SrMode(raw["mode"]),
                             "mtu": MTU_CODES[raw["mtu"]], "dst_mac": mac_text(raw["dst_mac"]),
                             "dst_ip": str(ipaddress.IPv6Address(raw["dst_ip"]))})


@_refusals_checked
def load_ev_profile(qp: int, evs, layout: EvLayout, spares=()) -> Program:
    """Replaces QP ``qp``'s EV profile by ``evs`` (and its spares by ``spares``).

    The NIC keeps entry ``i`` of a profile on plane ``i % planes``, so the EVs are ordered by
    the plane their own plane field names: each plane must hold the same number. Returns the
    profile as loaded, entry by entry.
    """
    yield from _below("QP", qp, "global.qps")
    planes = yield from _nic_layout(layout)
    evs, spares = list(evs), list(spares)
    size = yield from read("global.evs")
    if not 1 <= len(evs) <= size:
        raise RegisterError(f"QP {qp}: a profile holds 1 .. {size} EVs, not {len(evs)}")
    for ev in evs + spares:
        if not isinstance(ev, int) or not 0 <= ev < 1 << 32:
            raise RegisterError(f"QP {qp}: EV {ev!r} is not a 32-bit value")
    room = yield from read("global.spares")
    for p in range(planes):
        n = sum(1 for ev in spares if layout.plane(ev) == p)
        if n > room:
            raise RegisterError(f"QP {qp}: {n} spares for plane {p}; the NIC keeps {room}")
    by_plane: list[list[int]] = [[] for _ in range(planes)]
    for ev in evs:
        by_plane[layout.plane(ev)].append(ev)
    counts = [len(b) for b in by_plane]
    if len(set(counts)) != 1:
        raise RegisterError(f"QP {qp}: a profile needs as many EVs on every plane; these have "
                            + ", ".join(f"{n} on plane {p}" for p, n in enumerate(counts)))
    profile = [by_plane[i % planes][i // planes] for i in range(len(evs))]
    yield from write("ev.qp", qp)
    yield from command("ev.load", LoadOp.CLEAR.value)
    for i, ev in enumerate(profile):
        yield from write("ev.index", i)
        yield from write("ev.value", ev)
        yield from command("ev.load", LoadOp.ENTRY.value)
    for ev in spares:
        yield from write("ev.index", layout.plane(ev))
        yield from write("ev.value", ev)
        yield from command("ev.load", LoadOp.SPARE.value)
    return profile


@_refusals_checked
def replace_ev(qp: int, index: int, ev: int, layout: EvLayout) -> Program:
    """Entry ``index`` of QP ``qp``'s profile becomes ``ev``, GOOD; the other entries stay as
    they are. ``ev`` must name the entry's own plane, ``index % planes``."""
    yield from _below("QP", qp, "global.qps")
    planes = yield from _nic_layout(layout)
    yield from _below(f"QP {qp}: profile entry", index, "global.evs")
    if not isinstance(ev, int) or not 0 <= ev < 1 << 32:
        raise RegisterError(f"QP {qp}: EV {ev!r} is not a 32-bit value")
    try:
        plane = layout.plane(ev)
    except ValueError as e:
        raise RegisterError(f"QP {qp}: {e}") from None
    if plane != index % planes:
        raise RegisterError(f"QP {qp}: EV {ev:#010x} is on plane {plane}, entry {index} on "
                            f"plane {index % planes} (entry i is on plane i % planes)")
    yield from write("ev.qp", qp)
    yield from write("ev.index", index)
    yield from write("ev.value", ev)
    yield from command("ev.load", LoadOp.ENTRY.value)


@_refusals_checked
def clear_ev_profile(qp: int) -> Program:
    """Empties QP ``qp``'s profile and spares: it has no EV to send on until one is loaded."""
    yield from _below("QP", qp, "global.qps")
    yield from write("ev.qp", qp)
    yield from command("ev.load", LoadOp.CLEAR.value)


@_refusals_checked
def set_ev_state(qp: int, index: int, state: EvState) -> Program:
    """Sets entry ``index`` of QP ``qp``'s profile to ``state`` (DENIED only this way)."""
    yield from _below("QP", qp, "global.qps")
    yield from _below(f"QP {qp}: profile entry", index, "global.evs")
    yield from write("ev.qp", qp)
    yield from write("ev.index", index)
    yield from command("ev.set_state", EvState(state).value)


def ev_states(qp: int) -> Program:
    """The state of every entry of QP ``qp``'s profile (up to global.evs; entries past the
    profile read ASSUMED_BAD), as :class:`EvState` values."""
    yield from _below("QP", qp, "global.qps")
    size = yield from read("global.evs")
    yield from write("ev.qp", qp)
    out = []
    for i in range(size):
        yield from write("ev.index", i)
        out.append(EvState((yield from read("ev.state"))))
    return out


def ev_table(qp: int) -> Program:
    """The EVs QP ``qp``'s profile holds now, entry by entry, as the NIC reads them back: those
    loaded, and each spare where it took an entry's place."""
    yield from _below("QP", qp, "global.qps")
    yield from write("ev.qp", qp)
    size = yield from read("ev.size")
    out = []
    for i in range(size):
        yield from write("ev.index", i)
        out.append((yield from read("ev.entry")))
    return out


def ev_entries(qp: int) -> Program:
    """Every entry of QP ``qp``'s profile (up to global.evs) in one pass over ``ev.index``:
    its :class:`EvState` and the EV it holds, as :func:`ev_states` and :func:`ev_table` read
    them (None past the profile's end)."""
    yield from _below("QP", qp, "global.qps")
    evs = yield from read("global.evs")
    yield from write("ev.qp", qp)
    size = yield from read("ev.size")
    out = []
    for i in range(evs):
        yield from write("ev.index", i)
        state = EvState((yield from read("ev.state")))
        out.append((state, (yield from read("ev.entry")) if i < size else None))
    return out


def rx_counters() -> Program:
    """Every RX counter, by its register name without the ``rx.`` prefix."""
    out = {}
    for reg in REGISTERS:
        if reg.block == "rx" and reg.access is Access.RO:
            out[reg.name] = yield from read(f"rx.{reg.name}")
    return out


@_refusals_checked
def set_ack_policy(coalesce: int, timeout_cycles: int,
                   share_period: int | None = None) -> Program:
    """SACK every ``coalesce`` new data packets (1 .. 255) or after ``timeout_cycles``; with
    ``share_period`` (cycles, 0 .. 65535; 0 turns it off) the SACKs tell the senders how many
    QPs this port takes data for (rx.share_period)."""
    if not isinstance(coalesce, int) or not 1 <= coalesce <= 255:
        raise RegisterError(f"coalesce must be 1 .. 255 packets, not {coalesce!r}")
    if not isinstance(timeout_cycles, int) or not 1 <= timeout_cycles < 1 << 32:
        raise RegisterError(f"the ACK timeout must be 1 .. 2^32 - 1 cycles, not {timeout_cycles!r}")
    top = (1 << by_name("rx.share_period").width) - 1
    if share_period is not None and (not isinstance(share_period, int)
                                     or not 0 <= share_period <= top):
        raise RegisterError(f"the share period must be 0 .. {top} cycles, not {share_period!r}")
    yield from write("rx.coalesce", coalesce)
    yield from write("rx.ack_timeout", timeout_cycles)
    if share_period is not None:
        yield from write("rx.share_period", share_period)


def rel_counters() -> Program:
    """Every counter of the reliability engine, by its register name without ``rel.``."""
    out = {}
    for reg in REGISTERS:
        if reg.block == "rel" and reg.name in REL_COUNTERS:
            out[reg.name] = yield from read(f"rel.{reg.name}")
    return out


def congestion(qp: int) -> Program:
    """QP ``qp``'s congestion state: window and bytes in flight (bytes), last and smoothed
    RTT (cycles), and the CC profile its window follows."""
    yield from _below("QP", qp, "global.qps")
    yield from write("rel.view_qp", qp)
    out = {}
    for name in ("cwnd", "inflight", "rtt", "srtt"):
        out[name] = yield from read(f"rel.{name}")
    out["cc_profile"] = yield from read("cc.view")
    return out


#: what path.* reports of an entry
PATH_FIELDS = ("rtt", "timed", "ecn", "acked", "lost")


def path_stats(qp: int, entries=None) -> Program:
    """What each of ``entries`` (default: every one, global.evs) of QP ``qp``'s profile saw of
    its path (path.*): {entry: {rtt, timed, ecn, acked, lost}}. Moves path.qp and path.entry."""
    yield from _below("QP", qp, "global.qps")
    evs = yield from read("global.evs")
    entries = range(evs) if entries is None else list(entries)
    for i in entries:
        if not isinstance(i, int) or not 0 <= i < evs:
            raise RegisterError(f"entry {i!r} does not exist: a profile has entries 0 .. "
                                f"{evs - 1} (global.evs)")
    yield from write("path.qp", qp)
    out = {}
    for i in entries:
        yield from write("path.entry", i)
        out[i] = {}
        for name in PATH_FIELDS:
            out[i][name] = yield from read(f"path.{name}")
    return out


def keeping(paths, program: Program) -> Program:
    """Runs ``program`` and then writes the registers ``paths`` back as it found them, so that
    a look through a selector (``rel.view_qp``; ``ev.qp`` and ``ev.index``, which also stage
    the ``ev`` commands) leaves every register as it was."""
    saved = []
    for path in paths:
        saved.append((path, (yield from read(path))))
    result = yield from program
    for path, value in saved:
        yield from write(path, value)
    return result


@_refusals_checked
def set_congestion(target_rtt: int | None = None, cwnd_init: int | None = None,
                   cwnd_min: int | None = None, cwnd_max: int | None = None,
                   fair: int | None = None, gain: int | None = None,
                   md_shift: int | None = None, rcv_wnd: int | None = None,
                   profile: int = 0) -> Program:
    """NSCC's parameters (docs/registers.md, rel.*), and ``rcv_wnd``, the bytes a peer's port
    takes in flight, which the SACKs' rcv_cwnd_pen divide (0: ignore them); one left ``None``
    stays as it is.

    ``profile`` 0: the rel.* registers, the profile every QP follows unless its
    ``QpConfig.cc_profile`` names another. 1 and up (below global.cc_profiles): the NIC stores
    that profile from the cc.* registers (cc.write), which cannot be read back, so a value left
    ``None`` is profile 0's as it stands; ``rcv_wnd``, the port's, is not a profile's."""
    values = {"target_rtt": target_rtt, "cwnd_init": cwnd_init, "cwnd_min": cwnd_min,
              "cwnd_max": cwnd_max, "cc_fair": fair, "cc_gain": gain, "cc_md": md_shift,
              "rcv_wnd": rcv_wnd}
    for name, v in values.items():
        top = (1 << by_name(f"rel.{name}").width) - 1
        low = 1 if name in ("target_rtt", "cwnd_min", "cwnd_max", "cwnd_init") else 0
        if v is not None and (not isinstance(v, int) or not low <= v <= top):
            raise RegisterError(f"{name} must be {low} .. {top}, not {v!r}")
    if profile != 0:
        if rcv_wnd is not None:
            raise RegisterError("rcv_wnd is the port's, not a CC profile's: set it with "
                                "profile 0")
        yield from _below("CC profile", profile, "global.cc_profiles")
        for name in CC_PARAMS:
            if values[name] is None:
                values[name] = yield from read(f"rel.{name}")
    lo = values["cwnd_min"] if values["cwnd_min"] is not None else (
        yield from read("rel.cwnd_min"))
    hi = values["cwnd_max"] if values["cwnd_max"] is not None else (
        yield from read("rel.cwnd_max"))
    if lo > hi:
        raise RegisterError(f"cwnd_min ({lo}) is above cwnd_max ({hi})")
    if profile == 0:
        for name, v in values.items():
            if v is not None:
                yield from write(f"rel.{name}", v)
        return
    for name in CC_PARAMS:
        yield from write(f"cc.{name}", values[name])
    yield from command("cc.write", profile)


@_refusals_checked
def set_reliability(mode: RelMode = RelMode.SELECTIVE, reorder: int | None = None,
                    rto_min: int | None = None, rto_max: int | None = None,
                    probe_interval: int | None = None,
                    status_interval: int | None = None,
                    reo_wnd: int | None = None, ev_health: bool | None = None) -> Program:
    """How lost packets are recovered (:class:`RelMode`), whether losses change the EVs'
    state (``ev_health``: MRC's EV health; off for single-path RoCE and blind spraying), the
    SACK reorder threshold in PSNs
    and in time (``reo_wnd`` cycles, 0: off), the RTO bounds, the interval between probes of
    ASSUMED_BAD EVs and between repeats of the port status to the peers, in cycles (0: never,
    and only on port changes); a value left ``None`` stays as it is."""
    try:
        mode = RelMode(mode)
    except ValueError:
        raise RegisterError(f"mode must be one of {[m.name for m in RelMode]}, not {mode!r}") \
            from None
    for what, v in (("reorder", reorder), ("reo_wnd", reo_wnd), ("rto_min", rto_min),
                    ("rto_max", rto_max)):
        low, top = (0, 65535) if what in ("reorder", "reo_wnd") else (1, RTO_LIMIT)
        if v is not None and (not isinstance(v, int) or not low <= v <= top):
            raise RegisterError(f"{what} must be {low} .. {top}, not {v!r}")
    for what, v in (("probe_interval", probe_interval), ("status_interval", status_interval)):
        top = (1 << by_name(f"rel.{what}").width) - 1
        if v is not None and (not isinstance(v, int) or not 0 <= v <= top):
            raise RegisterError(f"{what} must be 0 .. {top}, not {v!r}")
    if rto_min is not None and rto_max is not None and rto_min > rto_max:
        raise RegisterError(f"rto_min ({rto_min}) is above rto_max ({rto_max})")
    if ev_health is not None and not isinstance(ev_health, bool):
        raise RegisterError(f"ev_health must be True or False, not {ev_health!r}")
    yield from write("rel.mode", mode.value)
    if ev_health is not None:
        yield from write("rel.ev_health", int(ev_health))
    for what, v in (("reorder", reorder), ("reo_wnd", reo_wnd), ("rto_min", rto_min),
                    ("rto_max", rto_max), ("probe_interval", probe_interval),
                    ("status_interval", status_interval)):
        if v is not None:
            yield from write(f"rel.{what}", v)


def tx_counters() -> Program:
    planes = yield from read("global.planes")
    out = {"requests": (yield from read("tx.requests")), "errors": {},
           "ev_refused": (yield from read("tx.ev_refused")),
           "ev_replaced": (yield from read("tx.ev_replaced")), "planes": []}
    for why in TX_ERROR_REASONS:
        out["errors"][why] = yield from read(f"tx.err_{why}")
    for p in range(planes):
        out["planes"].append({"frames": (yield from read(f"tx.frames_p{p}")),
                              "bytes": (yield from read(f"tx.bytes_p{p}"))})
    return out


#: Every counter register (RO, counting events since reset), in register-map order: those the
#: register map marks as counters, global.bus_errors (which the bank counts itself) and
#: ep.answers (a count for the profile entry ep.entry names). The other RO registers are not
#: counts: parser.last_error is a reason code, ev.state one EV's state (:func:`ev_states`),
#: net.port_up the ports' (:func:`ports`), rel.cwnd, rel.inflight, rel.rtt and rel.srtt one
#: QP's (:func:`congestion`), cq.count and cq.entry the completion queue's (:func:`poll_cq`),
#: evq.count and evq.entry the EV event queue's (:func:`ev_events`), mem.error and mem.rdata
#: the last memory access's (:func:`mem_read`), and ep.rtt the last probe answer's
#: (:func:`probe_result`).
COUNTERS: tuple[str, ...] = tuple(
    r.path for r in REGISTERS if r.block not in ("mac", "mgmt")
    and (r.counts or r.path in {BUS_ERRORS, "ep.answers"}))
#: What a board counts around the NIC: its MACs' frames and errors and its management port's
#: requests (the mac.* and mgmt.* registers; a NIC without a board has none).
BOARD_COUNTERS: tuple[str, ...] = tuple(
    r.path for r in REGISTERS if r.block in ("mac", "mgmt") and r.counts)
#: the per-plane counters' planes: the NIC has registers for MAX_PLANES, its own read 0 beyond
_COUNTER_PLANE = {f"tx.{what}_p{p}": p for what in ("frames", "bytes") for p in range(MAX_PLANES)}
_COUNTER_PLANE |= {r.path: int(r.name.rpartition("_p")[2]) for r in REGISTERS
                   if r.block == "mac"}


def counters(board: bool = False) -> Program:
    """Every counter of :data:`COUNTERS` (and with ``board``, of :data:`BOARD_COUNTERS`) but the
    per-plane ones of planes the NIC was not built with, ``{"block.name": value}`` in
    register-map order."""
    planes = yield from read("global.planes")
    out = {}
    for path in COUNTERS + (BOARD_COUNTERS if board else ()):
        if _COUNTER_PLANE.get(path, 0) < planes:
            out[path] = yield from read(path)
    return out


# -- work requests, completions and memory through registers ------------------------------

#: the longest message a work request moves (wq.length), in bytes
MAX_MESSAGE = 1 << 31


def _uint(what: str, value, bits: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 1 << bits:
        raise RegisterError(f"{what} {value!r} is not a {bits}-bit value")
    return value


@_refusals_checked
def post_write(qp: int, wr_id: int, laddr: int, va: int, rkey: int, length: int,
               imm: int | None = None) -> Program:
    """Posts an RDMA WRITE of ``length`` bytes at ``laddr`` in this NIC's memory to ``va`` in
    the memory region of QP ``qp``'s peer, whose R_Key is ``rkey``; with ``imm``, a WRITE_IMM
    whose receive completion carries it. ``wr_id`` (16 bits) names the request in its
    completion (:func:`poll_cq`, when cq.route sends send completions there). Returns once
    the TX side has taken the request."""
    enabled = yield from read("global.control")
    if not enabled & 1:
        # wq.post stays pending until the NIC is enabled: the post would never return
        raise RegisterError("the NIC takes no work requests: global.control bit 0 is clear "
                            "(set_enabled(True) once it is set up)")
    yield from _below("QP", qp, "global.qps")
    _uint("wr_id", wr_id, by_name("wq.post").width)
    _uint("laddr", laddr, 64)
    _uint("va", va, 64)
    _uint("rkey", rkey, 32)
    if (not isinstance(length, int) or isinstance(length, bool)
            or not 1 <= length <= MAX_MESSAGE):
        raise RegisterError(f"length {length!r} is not 1 .. 2^31 bytes (wq.length)")
    if imm is not None:
        _uint("imm", imm, 32)
    opcode = WrOpcode.WRITE if imm is None else WrOpcode.WRITE_IMM
    yield from write("wq.qp", qp)
    yield from write("wq.opcode", opcode.value)
    yield from write("wq.laddr", laddr)
    yield from write("wq.va", va)
    yield from write("wq.rkey", rkey)
    yield from write("wq.length", length)
    if imm is not None:
        yield from write("wq.imm", imm)
    yield from command("wq.post", wr_id)


@_refusals_checked
def route_completions(send: bool, recv: bool) -> Program:
    """Sends send completions (``send``) and receive completions (``recv``) to the register
    completion queue (cq.*) instead of the completion stream."""
    yield from write("cq.route", (CQ_ROUTE_SEND if send else 0) | (CQ_ROUTE_RECV if recv else 0))


@dataclass(frozen=True)
class Completion:
    """One entry of the register completion queue (cq.entry, fields at regmap.CQ_ENTRY).

    ``recv`` False: work request ``wr_id`` of QP ``qp`` completed with ``status``. ``recv``
    True: QP ``qp`` received message ``msn`` whole (status OK), with the immediate ``imm`` if
    ``has_imm``; ``wr_id`` then means nothing.
    """
    wr_id: int
    qp: int
    status: WrStatus
    recv: bool
    has_imm: bool
    msn: int
    imm: int

    @classmethod
    def decode(cls, entry: int) -> Completion:
        f = unpack(CQ_ENTRY, entry)
        try:
            status = WrStatus(f["status"])
        except ValueError:
            raise RegisterError(f"cq.entry {entry:#026x}: status {f['status']} is not one "
                                f"of {[s.name for s in WrStatus]}") from None
        return cls(wr_id=f["wr_id"], qp=f["qp"], status=status, recv=bool(f["recv"]),
                   has_imm=bool(f["has_imm"]), msn=f["msn"], imm=f["imm"])


@_refusals_checked
def poll_cq(max_entries: int) -> Program:
    """Takes up to ``max_entries`` entries from the register completion queue, oldest first,
    as :class:`Completion` values (fewer, or none, if fewer are waiting)."""
    if not isinstance(max_entries, int) or isinstance(max_entries, bool) or max_entries < 0:
        raise RegisterError(f"max_entries {max_entries!r} is not a number of at least 0")
    waiting = yield from read("cq.count")
    out = []
    for _ in range(min(waiting, max_entries)):
        raw = yield from read("cq.entry")
        try:
            entry = Completion.decode(raw)
        except RegisterError:
            # it stays at the head, unpopped: the entries before it are returned, not lost,
            # and the next poll reports it
            if out:
                break
            raise
        out.append(entry)
        yield from command("cq.pop", 1)
    return out


def cq_overflows() -> Program:
    """Completions lost so far because the register completion queue was full."""
    return (yield from read("cq.overflows"))


def _mem_span(addr, length: int) -> None:
    _uint("address", addr, 64)
    if addr + length > 1 << 64:
        raise RegisterError(f"{length} bytes at {addr:#x} run past the end of the 64-bit "
                            "address space")


def _mem_chunks(addr: int, length: int):
    """(address, bytes) of each access: none crosses a MEM_WINDOW_BYTES boundary, so each
    stays within one aligned block whatever the memory behind the window cuts its accesses
    at (beats, bursts, pages); an unaligned span costs one access more."""
    end = addr + length
    while addr < end:
        n = min(end, (addr // MEM_WINDOW_BYTES + 1) * MEM_WINDOW_BYTES) - addr
        yield addr, n
        addr += n


def _mem_access(addr: int, n: int, op: int, what: str) -> Program:
    yield from write("mem.addr", addr)
    yield from write("mem.length", n)
    yield from command("mem.access", op)
    if (yield from read("mem.error")):
        raise RegisterError(f"the memory refused a {what} of {n} bytes at {addr:#x} (mem.error)")


@_refusals_checked
def mem_read(addr: int, length: int) -> Program:
    """``length`` bytes of the memory behind the NIC from ``addr`` on, through the mem.*
    window, MEM_WINDOW_BYTES at most an access."""
    if not isinstance(length, int) or isinstance(length, bool) or length < 0:
        raise RegisterError(f"length {length!r} is not a number of bytes")
    _mem_span(addr, length)
    out = bytearray()
    for at, n in _mem_chunks(addr, length):
        yield from _mem_access(at, n, 0, "read")
        rdata = yield from read("mem.rdata")
        out += rdata.to_bytes(MEM_WINDOW_BYTES, "little")[:n]
    return bytes(out)


@_refusals_checked
def mem_write(addr: int, data: bytes) -> Program:
    """Writes ``data`` to the memory behind the NIC from ``addr`` on, through the mem.*
    window, MEM_WINDOW_BYTES at most an access."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise RegisterError(f"data is bytes, not {type(data).__name__}")
    data = bytes(data)
    _mem_span(addr, len(data))
    for at, n in _mem_chunks(addr, len(data)):
        chunk = data[at - addr:at - addr + n]
        yield from write("mem.wdata", int.from_bytes(chunk, "little"))
        yield from _mem_access(at, n, 1, "write")


# -- EV events ---------------------------------------------------------------------------

#: the states an EV event can report (SKIP is the NIC's own, for a rotation or more)
EVENT_STATES = (EvState.GOOD, EvState.ASSUMED_BAD, EvState.DENIED)


@_refusals_checked
def set_ev_event_mask(states) -> Program:
    """Queues the EV state changes to the states given (GOOD, ASSUMED_BAD, DENIED) in the EV
    event queue (evq.*), and no others; an empty set: none."""
    states = set(states)
    bad = [s for s in states if s not in EVENT_STATES]
    if bad:
        raise RegisterError(f"EV events report changes to {', '.join(s.name for s in EVENT_STATES)}"
                            f", not {bad}")
    yield from write("evq.mask", sum(1 << EvState(s).value for s in states))


@dataclass(frozen=True)
class EvEvent:
    """One entry of the EV event queue (evq.entry, fields at regmap.EVQ_ENTRY): entry ``index``
    of QP ``qp``'s EV table changed to ``state``; ``management`` set it (ev.set_state), not the
    reliability engine; ``replaced``: a spare EV took the entry's place (ASSUMED_BAD);
    ``others``: the entries of the QP that went ASSUMED_BAD with it, their path's."""
    qp: int
    index: int
    state: EvState
    management: bool
    replaced: bool
    others: frozenset[int]

    @classmethod
    def decode(cls, entry: int) -> EvEvent:
        f = unpack(EVQ_ENTRY, entry)
        return cls(qp=f["qp"], index=f["index"], state=EvState(f["state"]),
                   management=bool(f["management"]), replaced=bool(f["replaced"]),
                   others=frozenset(i for i in range(EVQ_ENTRY["others"][1])
                                    if f["others"] >> i & 1))


@_refusals_checked
def ev_events(max_events: int) -> Program:
    """Takes up to ``max_events`` events from the EV event queue, oldest first; and the events
    lost so far because it was full (evq.overflows)."""
    if not isinstance(max_events, int) or isinstance(max_events, bool) or max_events < 0:
        raise RegisterError(f"max_events {max_events!r} is not a number of at least 0")
    waiting = yield from read("evq.count")
    out = []
    for _ in range(min(waiting, max_events)):
        out.append(EvEvent.decode((yield from read("evq.entry"))))
        yield from command("evq.pop", 1)
    lost = yield from read("evq.overflows")
    return out, lost


# -- endpoint requests --------------------------------------------------------------------

@_refusals_checked
def probe_send(qp: int, entry: int) -> Program:
    """Sends a probe on entry ``entry`` of QP ``qp``'s EV profile (ep.probe): (how many answers
    had been heard for that entry before (ep.answers), so the probe's answer is the next one
    (:func:`probe_result`); whether the NIC sent it: not while the entry's plane has its port
    down (ep.refused)). A refusal is returned, not raised, for the controller's batches, where
    one refused probe does not stop the others."""
    yield from _below("QP", qp, "global.qps")
    yield from _below(f"QP {qp}: entry", entry, "global.evs")
    yield from write("ep.qp", qp)
    yield from write("ep.entry", entry)
    before = yield from read("ep.answers")
    refused = yield from read("ep.refused")
    yield from command("ep.probe", 1)
    return before, (yield from read("ep.refused")) == refused


def probe_start(qp: int, entry: int) -> Program:
    """:func:`probe_send`, raising if the NIC refused the probe; the answers heard before."""
    before, sent = yield from probe_send(qp, entry)
    if not sent:
        raise RegisterError(f"QP {qp} entry {entry}: the NIC sent no probe: the port of its "
                            "plane is down (ep.refused)")
    return before


def probe_result() -> Program:
    """(answers heard for ep.qp's entry ep.entry, the last one's RTT in cycles)."""
    answers = yield from read("ep.answers")
    rtt = yield from read("ep.rtt")
    return answers, rtt


@_refusals_checked
def port_status_update() -> Program:
    """Tells every RTR or RTS QP's peer this NIC's port status now (ep.status)."""
    yield from command("ep.status", 1)
