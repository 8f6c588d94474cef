"""The controller side of the OCP MRC host API (``mrc_ctl.h``) for an mrcnic.

A :class:`Controller` holds the profiles the header describes (EV format profiles, EV profiles,
CC profiles), each with its state machine INIT -> OFFLINE -> ONLINE -> OFFLINE -> INIT, and puts
them on a NIC through the driver (:mod:`mrcnic.driver`) over a register client::

    from mrcnic.ctl import Controller, EvMode, ProfileState as S
    from mrcnic.ev_expand import EvField, FormatMode
    from mrcnic.evmap import UsidTemplate
    from mrcnic.target import Device

    with Device("sim://127.0.0.1:40000") as nic:
        ctl = Controller(nic.regs)
        ctl.query_device()                                  # what this NIC can do
        ctl.modify_ev_fmt_profile(1, state=S.OFFLINE, mode=FormatMode.SRV6, widths=(32, 16))
        ctl.modify_ev_fmt_profile(1, state=S.ONLINE)
        ctl.modify_ev_profile(7, state=S.OFFLINE, mode=EvMode.GENERATED, fmt_id=1, ev_count=8,
                              fields=(EvField(32, 0xFCBBBB00), EvField(16, 0x10, 0, 7, 0x1003)))
        ctl.modify_ev_profile(7, state=S.ONLINE, min_active=1, event_mask=())
        # QP 2 was configured with template 2, this one (driver.configure_qp, write_template)
        ctl.bind_ev_profile(7, qp=2, template=UsidTemplate(0xFCBBBB00, (0x10,), 0, 32))

The objects, states, transition rules and errors are the header's (docs/driver.md maps each
name); what this NIC cannot do is left out of :meth:`Controller.query_device` and refused with
the header's error and the reason. The NIC holds an EV table per QP (``global.evs`` entries of
32-bit EVs) and ``global.cc_profiles`` CC profiles, of which profile 0 is the rel.* registers
and each QP's window follows the one its context names (``qp.cc_profile``). It takes an EV
profile when :meth:`Controller.bind_ev_profile` loads one into a QP's table, and a CC profile
as it goes ONLINE, into a CC profile of its own (:meth:`Controller.cc_profile_number`), or when
:meth:`Controller.apply_cc_profile` writes one into profile 0; each only if the NIC does
exactly what the profile says. The profiles themselves, their states and which QP's table
holds which are kept in the NIC's store (``store.data``, :mod:`mrcnic.store`), so that every
program driving the NIC sees the same: each call first takes up what another program changed
there. The EV expansion rule is :mod:`mrcnic.ev_expand`'s.
EV events come from the NIC's EV event queue (evq.*), each change of a QP's table named as the
profile EV loaded at that entry (:meth:`Controller.poll_ev_event`). Endpoint requests go
through ep.*: a probe of a profile EV's entry, timed by the NIC, and a port-status round to
every peer (:meth:`Controller.ep_batch_send_wait`).
Nothing here imports the gateware.
"""

from __future__ import annotations

import enum
import errno
import math
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from dataclasses import replace as _copy

from . import driver, store
from .ctl_errors import (
    Busy,
    InvalidArgument,
    IoError,
    MrcError,
    NotFound,
    NotPermitted,
    NotSupported,
    TooBig,
    run_on_nic,
)
from .enums import EvState, SrMode
from .ev_expand import MAX_EV_BYTES, EvField, EvProfile, FormatMode, FormatProfile
from .evmap import EvLayout, Route, UsidTemplate, format_addr
from .mgmt import Status, StatusError
from .regclient import Program, RegisterClient, read, write
from .store_part import StorePart, shared

__all__ = ["API_VERSION", "PROTOCOL_VERSIONS", "NSCC", "DEFAULT_CLOCK_HZ", "ProfileState",
           "EvMode", "Feature", "PortAdminState", "Ev", "UNPOPULATED", "EvOpEntry", "DeviceAttr",
           "NsccConfig", "FormatProfileInfo", "EvProfileInfo", "CcProfileInfo", "Binding",
           "EvEvent", "EvEventCq", "EpOpType", "EpStatus", "EvProbe", "EpResponse", "Controller"]

#: the mrc_ctl.h revision this API follows (MRC_CTL_API_CURRENT_VERSION)
API_VERSION = (1, 0, 1)
#: enum mrc_ctl_protocol_version: the control protocol versions this NIC speaks
PROTOCOL_VERSIONS = frozenset({1})
#: the congestion control algorithm the NIC's window follows, by its common name
NSCC = "uet-1.0-nscc"
#: the NIC's clock: no register reports it; the simulation runs at 250 MHz (verif/tbkit.py)
DEFAULT_CLOCK_HZ = 250_000_000

_U8, _U32, _U64 = 1 << 8, 1 << 32, 1 << 64
#: the largest window rel.cwnd_max holds, in bytes
_CWND_TOP = (1 << 24) - 1
#: rel.target_rtt holds at most this many cycles
_TARGET_TOP = (1 << 16) - 1
#: how many uSIDs a carrier holds at least (F3216's six, against F1616's seven)
_FEWEST_PER_CARRIER = 6


class ProfileState(enum.Enum):
    """``enum mrc_ctl_profile_state``."""
    INIT = 0      # created, not yet configured
    OFFLINE = 1   # configured, not usable; may be changed
    ONLINE = 2    # usable; changed only in the ways the header allows


class EvMode(enum.Enum):
    """``enum mrc_ctl_ev_mode`` (its bit values)."""
    AUTO = 1        # the NIC chooses its EVs
    EXPLICIT = 2    # the controller gives the EV array
    GENERATED = 4   # the EVs are every combination of the fields' values


class Feature(enum.Enum):
    """``enum mrc_ctl_attr_opt``: the optional features (their bit values)."""
    EV_PROFILE_MODIFY_ONLINE = 1 << 0
    CC_PROFILE_MODIFY_ONLINE = 1 << 1
    EV_EVENT = 1 << 2
    EV_EXPLICIT_RANGE = 1 << 3
    EV_EVENT_PRECISE_DROP_CNT = 1 << 4
    EP_OP_EV_PROBE = 1 << 5


class PortAdminState(enum.Enum):
    """``enum mrc_ctl_port_admin_state``."""
    DISABLED = 0
    ENABLED = 1


def _is_uint(v, bound: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < bound


def _profile_id(pid) -> int:
    if not _is_uint(pid, _U64):
        raise InvalidArgument(f"a profile id is a 64-bit unsigned number, not {pid!r}")
    return pid


@dataclass(frozen=True)
class Ev:
    """An EV entry (``struct mrc_ctl_ev``): the EV's value, byte 0 first (at most 32 bytes,
    zero-filled at the end), and its port, 1-based (0: none).

    An EV is named by its value and, unless 0, its port. In an EXPLICIT profile the all-zero
    value with port 0 is :data:`UNPOPULATED` (``MRC_CTL_EV_UNPOPULATED``), an entry not yet
    given an EV (every EV given has a port).
    """
    value: bytes = b""
    port: int = 0

    def __post_init__(self):
        if not isinstance(self.value, (bytes, bytearray)):
            raise InvalidArgument(f"an EV's value is bytes, not {self.value!r}")
        object.__setattr__(self, "value", bytes(self.value))
        if len(self.value) > MAX_EV_BYTES:
            raise InvalidArgument(f"an EV is at most {MAX_EV_BYTES} bytes, not {len(self.value)}")
        if not _is_uint(self.port, _U8):
            raise InvalidArgument(f"an EV's port is 0 .. 255, not {self.port!r}")

    @property
    def key(self) -> bytes:
        """The value without the zero bytes that end it: two values the same but for those
        name the same EV."""
        return self.value.rstrip(b"\0")

    @property
    def unpopulated(self) -> bool:
        return self.port == 0 and not self.key

    def __str__(self) -> str:
        return f"0x{self.value.hex() or '0'} port {self.port}"


UNPOPULATED = Ev()


@dataclass(frozen=True)
class EvOpEntry:
    """One entry of a batch of EV operations (``struct mrc_ctl_ev_op_entry``). What each
    operation reads and fills in:

    ==================  ======  ========  =========  ==========  ===========
    operation           ev      ev_new    state      all_copies  expansion
    ==================  ======  ========  =========  ==========  ===========
    replace_evs         given   given     given      optional    -
    modify_ev_states    given   -         given      -           -
    query_ev_states     given   -         filled     -           -
    query_ev_array      filled  -         filled     -           filled
    ==================  ======  ========  =========  ==========  ===========

    A state is an :class:`~mrcnic.enums.EvState`; None is ``MRC_CTL_EV_UNKNOWN`` (an
    unpopulated entry). ``expansion`` is the EV expanded under its profile: the bytes it puts
    on the wire (:mod:`mrcnic.ev_expand`).
    """
    ev: Ev
    ev_new: Ev | None = None
    state: EvState | None = None
    all_copies: bool = False
    expansion: bytes | None = None


@dataclass(frozen=True)
class DeviceAttr:
    """``struct mrc_ctl_device_attr``, as this NIC's registers say (:meth:`Controller.query_device`)."""
    protocol_versions: frozenset[int]
    ev_max_fmt_profiles: int
    ev_max_profiles: int
    ev_max_count: int
    ev_free_count: int
    ev_max_count_profile: int
    ev_count_align: int
    ev_max_width: int
    ev_fmt_modes: frozenset[FormatMode]
    ev_modes: frozenset[EvMode]
    ev_op_max_entries: int
    cc_max_profiles: int
    cc_algorithms: tuple[str, ...]
    phy_port_mask: int
    features: frozenset[Feature]


def _real(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0


@dataclass(frozen=True)
class NsccConfig:
    """``struct mrc_ctl_cc_nscc_cfg``, field by field (times in ns, sizes in bytes). A field
    left None is not given: the NIC's own rule for it applies. Which fields the NIC takes, and
    how, is :meth:`Controller.apply_cc_profile`'s."""
    disable_qa: int | None = None
    adjust_bytes_threshold: int | None = None
    adjust_period_threshold: int | None = None
    base_rtt: int | None = None
    eta: float | None = None
    fi: float | None = None
    fi_scale: float | None = None
    gamma: float | None = None
    max_md_jump: float | None = None
    max_cwnd: int | None = None
    qa_gate: int | None = None
    qa_threshold: int | None = None
    target_delay: int | None = None

    def __post_init__(self):
        for name in ("disable_qa", "qa_gate"):
            v = getattr(self, name)
            if v is not None and not _is_uint(v, _U8):
                raise InvalidArgument(f"NSCC {name} is an 8-bit unsigned number, not {v!r}")
        for name in ("adjust_bytes_threshold", "adjust_period_threshold", "base_rtt", "max_cwnd",
                     "qa_threshold", "target_delay"):
            v = getattr(self, name)
            if v is not None and not _is_uint(v, _U32):
                raise InvalidArgument(f"NSCC {name} is a 32-bit unsigned number, not {v!r}")
        for name in ("eta", "fi", "fi_scale", "gamma", "max_md_jump"):
            v = getattr(self, name)
            if v is not None and not _real(v):
                raise InvalidArgument(f"NSCC {name} is a finite number of at least 0, not {v!r}")


@dataclass(frozen=True)
class FormatProfileInfo:
    """What :meth:`Controller.query_ev_fmt_profile` reports (``struct mrc_ctl_ev_fmt_profile_attr``)."""
    state: ProfileState
    mode: FormatMode | None
    widths: tuple[int, ...] | None


@dataclass(frozen=True)
class EvProfileInfo:
    """What :meth:`Controller.query_ev_profile` reports (``struct mrc_ctl_ev_profile_attr``)."""
    state: ProfileState
    mode: EvMode | None
    fmt_id: int | None
    ev_count: int | None
    min_active: int | None
    event_mask: frozenset[EvState] | None
    fields: tuple[EvField, ...] | None


@dataclass(frozen=True)
class CcProfileInfo:
    """What :meth:`Controller.query_cc_profile` reports (``struct mrc_ctl_cc_profile_attr``)."""
    state: ProfileState
    algorithm: str | None
    config: NsccConfig | None


@dataclass(frozen=True)
class Binding:
    """An EV profile loaded into a QP's EV table: the NIC EV each of the profile's EVs is loaded
    as, and the table entry it is in (both by the EV's index in the profile's array)."""
    profile_id: int
    qp: int
    template: UsidTemplate | None
    mode: SrMode
    nic_evs: tuple[int, ...]
    entries: tuple[int, ...]


@dataclass(frozen=True)
class EvEvent:
    """``struct mrc_ctl_ev_event``: EV ``ev`` (with its port) of profile ``profile_id`` became
    ``state`` in QP ``qp``'s table.

    ``drop_count`` is the header's without Feature.EV_EVENT_PRECISE_DROP_CNT: 1 when events
    were lost just before this one, else 0. ``lost_changes`` says how many exactly, in the
    NIC's unit: changes of a QP's table (evq.overflows), each one entry's or a path's, which
    stand for 0 .. 65 events of the header's (the controller drops some, expands others).
    ``management``: the controller (ev.set_state) made the change, not the NIC. ``replaced``:
    a spare the NIC held took the EV's place; the entry holds an EV the profile does not have,
    and the controller reports nothing more of it until the entry is written again.
    """
    profile_id: int
    ev: Ev
    state: EvState
    qp: int
    drop_count: int = 0
    lost_changes: int = 0
    management: bool = False
    replaced: bool = False


class EvEventCq:
    """An EV event CQ (``mrc_ctl_create_ev_event_cq``): ``cqe`` as asked, ``depth`` the events
    the NIC's queue holds (evq.depth). What the NIC queued waits here, in the host, until
    polled, so none is lost once taken off the NIC."""

    def __init__(self, cqe: int, depth: int, overflows: int):
        self.cqe, self.depth = cqe, depth
        self._waiting: deque[EvEvent] = deque()
        self._overflows = overflows     # evq.overflows when last read
        self._lost = 0                  # changes lost that no event has carried yet
        self.destroyed = False

    def __repr__(self) -> str:
        return (f"EvEventCq(cqe={self.cqe}, depth={self.depth}"
                f"{', destroyed' if self.destroyed else ''})")


class EpOpType(enum.Enum):
    """``enum mrc_ctl_ep_op_type``."""
    EV_PROBE = 0
    PORT_STATUS_UPDATE = 1


class EpStatus(enum.Enum):
    """What became of one request of an endpoint batch, its value the errno the header's call
    would set for it (mrcnic's: the header returns only the responses that came, and fails the
    call with ETIMEDOUT when some did not)."""
    ANSWERED = 0
    #: no answer within the batch's timeout, or the time ran out before its turn to be sent
    TIMED_OUT = errno.ETIMEDOUT
    #: not sent: the port it leaves on is down (ep.refused); the header's "retry later"
    PORT_DOWN = errno.EAGAIN

    @property
    def errno(self) -> int:
        return self.value


@dataclass(frozen=True)
class EvProbe:
    """An EV_PROBE request (``struct mrc_ctl_ep_req``): EV ``ev`` of EV profile ``profile_id``,
    probed from QP ``qp``'s table (None: the one QP the profile is loaded into).

    The NIC probes an entry of a QP's EV table, towards that QP's peer, so the QP stands for the
    header's source and destination GIDs and the profile for its EV format."""
    profile_id: int
    ev: Ev
    qp: int | None = None


@dataclass(frozen=True)
class EpResponse:
    """One request's result (``struct mrc_ctl_ep_rsp``, then mrcnic's fields).

    ``req_id`` is the request's position in the batch. ``port`` is the port the probe went out
    on, the EV's: the NIC does not report the port an answer came back on. ``rtt_ns`` (None
    unless ANSWERED) includes the responder's time to answer, so ``svc_time_excluded`` (the
    header's ``adj_svc_time``) is False. ``qp``, ``entry``: the table entry probed;
    ``rtt_cycles``: the RTT as the NIC measured it (ep.rtt)."""
    req_id: int
    port: int
    rtt_ns: int | None
    svc_time_excluded: bool
    status: EpStatus
    qp: int
    entry: int
    rtt_cycles: int | None = None


#: how long a probe batch waits between two reads of ep.answers, in seconds
_PROBE_POLL = 0.0005


# What each state lets a modify change (ONLINE: what Feature.*_MODIFY_ONLINE adds), and what
# must have been set before a profile enters a state. In INIT, attributes come with the move to
# OFFLINE and follow its rules.
_FMT_ALLOWED = {ProfileState.OFFLINE: {"mode", "widths"}, ProfileState.ONLINE: set()}
_FMT_NEEDS = {ProfileState.OFFLINE: ("mode",), ProfileState.ONLINE: ("widths",)}
_EV_ALLOWED = {ProfileState.OFFLINE: {"mode", "fmt_id", "ev_count", "min_active", "event_mask",
                                      "fields"},
               ProfileState.ONLINE: {"event_mask", "fields"}}
_EV_NEEDS = {ProfileState.OFFLINE: ("mode", "fmt_id", "ev_count", "fields"),
             ProfileState.ONLINE: ("min_active", "event_mask")}
_CC_ALLOWED = {ProfileState.OFFLINE: {"algorithm", "config"},
               ProfileState.ONLINE: {"config"}}
_CC_NEEDS = {ProfileState.OFFLINE: ("algorithm",), ProfileState.ONLINE: ("config",)}
_MOVES = {(ProfileState.INIT, ProfileState.OFFLINE), (ProfileState.OFFLINE, ProfileState.ONLINE),
          (ProfileState.ONLINE, ProfileState.OFFLINE), (ProfileState.OFFLINE, ProfileState.INIT)}
#: the states a controller may give an EV (SKIP is the NIC's own, for a rotation or more)
_SETTABLE = (EvState.GOOD, EvState.ASSUMED_BAD, EvState.DENIED)
#: the EV states an event mask may name
_EVENT_STATES = frozenset({EvState.GOOD, EvState.ASSUMED_BAD})


@dataclass
class _Fmt:
    state: ProfileState = ProfileState.INIT
    mode: FormatMode | None = None
    widths: tuple[int, ...] | None = None


@dataclass
class _EvProfile:
    state: ProfileState = ProfileState.INIT
    mode: EvMode | None = None
    fmt_id: int | None = None
    ev_count: int | None = None
    min_active: int | None = None
    event_mask: frozenset | None = None
    fields: tuple[EvField, ...] | None = None
    evs: list[Ev] = field(default_factory=list)
    states: list[EvState | None] = field(default_factory=list)
    bindings: dict[int, Binding] = field(default_factory=dict)

    def copy(self) -> _EvProfile:
        return _copy(self, evs=list(self.evs), states=list(self.states),
                     bindings=dict(self.bindings))


@dataclass
class _Cc:
    state: ProfileState = ProfileState.INIT
    algorithm: str | None = None
    config: NsccConfig | None = None
    number: int | None = None     # the NIC's CC profile holding it (qp.cc_profile), 1 and up


def _need(what: str, pid: int, target: ProfileState, needs, values: dict) -> None:
    missing = [name for name in needs[target] if values[name] is None]
    if missing:
        raise InvalidArgument(f"{what} profile {pid} cannot go {target.name}: "
                              f"{', '.join(missing)} must be set first")




#: the controller's fields the NIC's store keeps, and the classes they are made of
_STORED = {"_fmts": dict, "_evps": dict, "_ccs": dict, "_bound": dict, "_applied": lambda: None,
           "_spared": dict}
_STORED_CLASSES = (_Fmt, _EvProfile, _Cc, ProfileState, FormatMode, EvMode, EvState, EvField,
                   Ev, Binding, UsidTemplate, SrMode, NsccConfig)


class Controller:
    """The controller API for the NIC behind ``regs`` (a :class:`~mrcnic.regclient.RegisterClient`,
    e.g. :attr:`mrcnic.target.Device.regs`).

    Parameters
    ----------
    regs : RegisterClient
    clock_hz : int
        The NIC's clock, which turns NSCC's times (ns) into the cycles its registers count: no
        register reports it. :data:`DEFAULT_CLOCK_HZ` is the simulation's.

    Raises
    ------
    IoError
        The NIC does not answer, or is not an mrcnic.
    """

    def __init__(self, regs: RegisterClient, clock_hz: int = DEFAULT_CLOCK_HZ):
        if not isinstance(clock_hz, int) or isinstance(clock_hz, bool) or clock_hz <= 0:
            raise InvalidArgument(f"clock_hz is the NIC's clock in Hz, not {clock_hz!r}")
        self.regs, self.clock_hz = regs, clock_hz
        self._info = self._identify()
        self._layout = EvLayout(self._info["planes"], self._info["spines"])
        self._fmts: dict[int, _Fmt] = {}
        self._evps: dict[int, _EvProfile] = {}
        self._ccs: dict[int, _Cc] = {}
        self._bound: dict[int, int] = {}        # QP -> the EV profile loaded into its table
        self._applied: int | None = None        # the CC profile in the NIC's registers
        self._evcq: EvEventCq | None = None
        self._nic_mask: frozenset | None = None  # evq.mask as last written (None: not known)
        self._spared: dict[int, set[int]] = {}   # QP -> entries a spare now holds
        # the profiles' part of the NIC's store (sw/store.py)
        self._part = StorePart(regs, "ctl", _STORED_CLASSES, "the controller's profiles")
        self._sync()

    # -- the NIC ---------------------------------------------------------------------------

    def _run(self, program: Program):
        return run_on_nic(self.regs, program)

    def _identify(self) -> dict:
        try:
            info = self._run(driver.identify())
        except InvalidArgument as e:       # the window answers, but not as an mrcnic's
            raise IoError(str(e)) from e
        depth = self._built_with("evq.depth")
        # ep.refused stands for the endpoint request block: one at the address means it is there
        ep = self._built_with("ep.refused") is not None
        return {**info, "evq_depth": depth or 0, "ep": ep}

    def _built_with(self, path: str) -> int | None:
        """Register ``path``'s value, or None if the NIC has nothing at its address (it was
        built before that block)."""
        try:
            return self._run(read(path))
        except IoError as e:
            cause = e.__cause__
            if not (isinstance(cause, StatusError) and cause.status is Status.BAD_ADDRESS):
                raise
            return None

    # -- the store ---------------------------------------------------------------------------

    def _encoded(self):
        return store.encode({name: getattr(self, name) for name in _STORED})

    def _sync(self) -> None:
        """Takes up the profiles the NIC's store holds if another program changed them."""
        part = self._part.load()
        if part is None:
            return
        for name, empty in _STORED.items():
            setattr(self, name, part.get(name, empty()))
        self._spared = {qp: set(entries) for qp, entries in self._spared.items()}
        self._nic_mask = None           # written by whoever changed the profiles last

    def _save(self, before) -> None:
        """Writes the profiles to the NIC's store if they changed since ``before``
        (:meth:`_encoded`)."""
        after = self._encoded()
        if after != before:
            self._part.save(after)

    def _nic_states(self, qp: int) -> list[EvState]:
        # the look leaves the selectors it moves as they were, as the CLI's do
        return self._run(driver.keeping(("ev.qp", "ev.index"), driver.ev_states(qp)))

    @property
    def layout(self) -> EvLayout:
        """The NIC's EV layout: where its 32-bit EVs name the plane and the spine."""
        return self._layout

    # -- device ----------------------------------------------------------------------------

    def _device_attr(self, info: dict) -> DeviceAttr:
        qps, evs, planes = info["qps"], info["evs"], info["planes"]
        # A UDP-mode EV is the UDP source port alone, and the NIC sends every packet on the
        # plane its EV's flow-label half names: with one plane that half is 0, as UDP mode says.
        modes = {FormatMode.STEV, FormatMode.SRV6} | ({FormatMode.UDP} if planes == 1 else set())
        # an SRv6 EV is a route's first carrier and, when it has a second, that one (the SRH)
        carriers = -(-info["max_usids"] // _FEWEST_PER_CARRIER)
        return DeviceAttr(
            protocol_versions=PROTOCOL_VERSIONS,
            # a profile is in use in a QP's EV table: there are as many tables as QPs
            ev_max_fmt_profiles=qps, ev_max_profiles=qps,
            ev_max_count=qps * evs, ev_free_count=(qps - len(self._bound)) * evs,
            ev_max_count_profile=evs, ev_count_align=planes, ev_max_width=128 * min(2, carriers),
            ev_fmt_modes=frozenset(modes),
            ev_modes=frozenset({EvMode.EXPLICIT, EvMode.GENERATED}), ev_op_max_entries=0,
            # profile 0 (rel.*) is every QP's unless it names another: each CC profile is
            # one of the others, or, on a NIC with none, can only be applied as profile 0
            cc_max_profiles=max(1, info["cc_profiles"] - 1), cc_algorithms=(NSCC,),
            phy_port_mask=((1 << planes) - 1) << 1,
            # not EV_EVENT_PRECISE_DROP_CNT: the NIC counts lost changes exactly, but a change
            # stands for 0 .. 65 events of the header's (EvEvent.lost_changes)
            features=frozenset({Feature.EV_PROFILE_MODIFY_ONLINE,
                                Feature.CC_PROFILE_MODIFY_ONLINE}
                               | ({Feature.EV_EVENT} if info["evq_depth"] else set())
                               | ({Feature.EP_OP_EV_PROBE} if info["ep"] else set())))

    @shared
    def query_device(self) -> DeviceAttr:
        """``mrc_ctl_query_device``: the controller attributes, from the NIC's ``global``
        registers as they read now."""
        return self._device_attr(self._identify())

    def _limit(self, name: str):
        """One attribute of :meth:`query_device`, from the build parameters read when the
        controller was made (they do not change while a NIC runs)."""
        return getattr(self._device_attr(self._info), name)

    # -- ports -----------------------------------------------------------------------------

    def _port(self, port) -> int:
        planes = self._info["planes"]
        if not _is_uint(port, _U8) or not 1 <= port <= planes:
            raise InvalidArgument(f"port {port!r} does not exist: this NIC has ports 1 .. "
                                  f"{planes}, one a plane")
        return port

    def query_port(self, port: int) -> PortAdminState:
        """A port's administrative state (net.port_admin). A port DISABLED is down: it sends
        and takes nothing, and the peers hear it is down; :meth:`port_up` says whether one is up."""
        self._port(port)
        admin = self._run(read("net.port_admin")) >> (port - 1) & 1
        return PortAdminState.ENABLED if admin else PortAdminState.DISABLED

    def port_up(self, port: int) -> bool:
        """Whether a port is up: ENABLED and its link up (net.port_up)."""
        self._port(port)
        return bool(self._run(read("net.port_up")) >> (port - 1) & 1)

    def modify_port(self, port: int, state: PortAdminState) -> None:
        self._port(port)
        if not isinstance(state, PortAdminState):
            raise InvalidArgument(f"a port's state is a PortAdminState, not {state!r}")
        self._run(driver.set_port_admin(port - 1, state is PortAdminState.ENABLED))

    # -- state machines --------------------------------------------------------------------

    @staticmethod
    def _move(what: str, pid: int, cur: ProfileState, to, given: set[str],
              allowed: dict) -> ProfileState:
        """The state a modify leads to, once it is known to be a move the state machine has and
        ``given`` holds only what the profile's state lets change."""
        if to is not None:
            try:
                to = ProfileState(to)
            except ValueError:
                raise InvalidArgument(f"{to!r} is not a profile state") from None
            if to is not cur and (cur, to) not in _MOVES:
                raise InvalidArgument(f"{what} profile {pid} is {cur.name}: profiles go INIT -> "
                                      f"OFFLINE -> ONLINE -> OFFLINE -> INIT, not to {to.name}")
        new = cur if to is None else to
        if cur is ProfileState.INIT:
            if given and new is not ProfileState.OFFLINE:
                raise InvalidArgument(f"{what} profile {pid} is INIT: it is configured as it "
                                      "moves to OFFLINE")
            cur_rules = ProfileState.OFFLINE
        else:
            cur_rules = cur
        if new is ProfileState.INIT and cur is not ProfileState.INIT and given:
            raise InvalidArgument(f"{what} profile {pid}: a move to INIT clears the profile; "
                                  "nothing can be set with it")
        refused = sorted(given - allowed[cur_rules])
        if refused:
            raise InvalidArgument(f"{what} profile {pid} is {cur.name}: {', '.join(refused)} "
                                  "cannot be changed there")
        return new

    # -- EV format profiles ----------------------------------------------------------------

    @shared
    def modify_ev_fmt_profile(self, profile_id: int, *, state: ProfileState | None = None,
                              mode: FormatMode | None = None, widths=None) -> None:
        """``mrc_ctl_modify_ev_fmt_profile``: the attributes given change (``widths`` is the
        MODIFY_FIELDS operation, one width a format field), then the profile moves to ``state``.
        Nothing changes if anything is refused."""
        pid = _profile_id(profile_id)
        p = self._fmts.get(pid, _Fmt())
        given = {n for n, v in (("mode", mode), ("widths", widths)) if v is not None}
        to = self._move("EV format", pid, p.state, state, given, _FMT_ALLOWED)
        new = _copy(p)
        if mode is not None:
            if not isinstance(mode, FormatMode):
                raise InvalidArgument(f"an EV format mode is a FormatMode, not {mode!r}")
            if mode not in self._limit("ev_fmt_modes"):
                raise NotPermitted(f"EV format profile {pid}: the NIC cannot send {mode.name} "
                                   f"EVs: it sends every packet on the plane its EV's flow-label "
                                   f"half names, and it has {self._info['planes']} planes")
            new.mode = mode
        if widths is not None:
            try:
                new.widths = tuple(widths)
            except TypeError:
                raise InvalidArgument(f"widths are a sequence of format field widths, not "
                                      f"{widths!r}") from None
        if new.widths is not None:
            FormatProfile(new.widths, new.mode).validate()
        if to is not p.state:
            if to is ProfileState.INIT:
                del self._fmts[pid]
                return
            _need("EV format", pid, to, _FMT_NEEDS, {"mode": new.mode, "widths": new.widths})
            if p.state is ProfileState.INIT:
                self._room("EV format", self._fmts, self._limit("ev_max_fmt_profiles"))
            if p.state is ProfileState.ONLINE:
                users = sorted(i for i, e in self._evps.items()
                               if e.fmt_id == pid and e.state is ProfileState.ONLINE)
                if users:
                    raise Busy(f"EV format profile {pid} is used by ONLINE EV profile(s) "
                               f"{', '.join(map(str, users))}")
        new.state = to
        if to is not ProfileState.INIT:
            self._fmts[pid] = new

    @shared
    def query_ev_fmt_profile(self, profile_id: int, max_fields: int | None = None
                             ) -> FormatProfileInfo:
        """``mrc_ctl_query_ev_fmt_profile``; with ``max_fields``, the room the caller has for
        the format fields (TooBig, with ``.needed``, if there are more)."""
        pid = _profile_id(profile_id)
        p = self._fmts.get(pid, _Fmt())
        self._fits("format fields", p.widths, max_fields)
        return FormatProfileInfo(p.state, p.mode, p.widths)

    @staticmethod
    def _room(what: str, profiles: dict, limit: int) -> None:
        if len(profiles) >= limit:
            raise TooBig(f"this NIC takes {limit} {what} profile(s), and "
                         f"{', '.join(map(str, sorted(profiles)))} are configured")

    @staticmethod
    def _fits(what: str, items, room) -> None:
        if room is None or items is None:
            return
        if not _is_uint(room, _U32):
            raise InvalidArgument(f"the room for {what} is a count, not {room!r}")
        if room < len(items):
            raise TooBig(f"there are {len(items)} {what}, room for {room}", needed=len(items))

    # -- EV profiles -----------------------------------------------------------------------

    def _rule(self, p: _EvProfile, pid: int) -> EvProfile:
        """The profile's expansion rule: its fields on its format profile, checked by
        ev_expand (EvInvalid, EvTooBig)."""
        fmt = self._fmts.get(p.fmt_id)
        if fmt is None or fmt.widths is None:
            raise InvalidArgument(f"EV profile {pid}: EV format profile {p.fmt_id} is not "
                                  "configured")
        return EvProfile(FormatProfile(fmt.widths, fmt.mode), p.fields,
                         max_width=self._limit("ev_max_width"))

    def _rule_if_ready(self, p: _EvProfile, pid: int) -> EvProfile | None:
        """The profile's rule once its fields and its format profile's widths are known."""
        fmt = self._fmts.get(p.fmt_id)
        if p.fields is None or fmt is None or fmt.widths is None:
            return None
        return self._rule(p, pid)

    def _explicit_ev(self, rule: EvProfile, ev) -> Ev:
        """An EV of an EXPLICIT array, checked against the profile's rule and the NIC's ports,
        its value cut or zero-filled to the bytes the profile's EVs have."""
        if not isinstance(ev, Ev) or ev.unpopulated:
            raise InvalidArgument(f"an EV array entry is an Ev with a port, not {ev!r}")
        rule.expand(ev.value)
        self._port(ev.port)
        return Ev(ev.key.ljust((rule.ev_bits + 7) // 8, b"\0"), ev.port)

    @shared
    def modify_ev_profile(self, profile_id: int, *, state: ProfileState | None = None,
                          mode: EvMode | None = None, fmt_id: int | None = None,
                          ev_count: int | None = None, min_active: int | None = None,
                          event_mask: Iterable[EvState] | None = None,
                          fields: Iterable[EvField] | None = None) -> None:
        """``mrc_ctl_modify_ev_profile`` without its EV operations (those are
        :meth:`replace_evs` and :meth:`modify_ev_states`): the attributes given change
        (``fields`` is the MODIFY_FIELDS operation), then the profile moves to ``state``.
        Nothing changes if anything is refused."""
        pid = _profile_id(profile_id)
        p = self._evps.get(pid, _EvProfile())
        values = {"mode": mode, "fmt_id": fmt_id, "ev_count": ev_count,
                  "min_active": min_active, "event_mask": event_mask, "fields": fields}
        given = {n for n, v in values.items() if v is not None}
        to = self._move("EV", pid, p.state, state, given, _EV_ALLOWED)
        if p.bindings and ("fields" in given or to is not ProfileState.ONLINE):
            raise Busy(f"EV profile {pid} is loaded into QP(s) "
                       f"{', '.join(map(str, sorted(p.bindings)))}: unbind them first")
        new = p.copy()
        if mode is not None:
            if not isinstance(mode, EvMode):
                raise InvalidArgument(f"an EV mode is an EvMode, not {mode!r}")
            if mode is EvMode.AUTO:
                raise NotPermitted(f"EV profile {pid}: the NIC does not choose EVs itself (AUTO): "
                                   "it sends only on the EVs loaded into each QP's table")
            new.mode = mode
        if fmt_id is not None:
            fmt = self._fmts.get(_profile_id(fmt_id))
            if fmt is None:
                raise InvalidArgument(f"EV profile {pid}: EV format profile {fmt_id} is INIT")
            new.fmt_id = fmt_id
        if ev_count is not None:
            limit, align = self._limit("ev_max_count_profile"), self._limit("ev_count_align")
            if not _is_uint(ev_count, _U32) or ev_count == 0:
                raise InvalidArgument(f"EV profile {pid}: ev_count is 1 or more, not {ev_count!r}")
            if ev_count > limit:
                raise TooBig(f"EV profile {pid}: {ev_count} EVs; this NIC's EV tables hold "
                             f"{limit} (ev_max_count_profile)")
            if ev_count % align:
                raise InvalidArgument(f"EV profile {pid}: ev_count {ev_count} is not a multiple "
                                      f"of {align} (ev_count_align: as many EVs on every port)")
            new.ev_count = ev_count
        if min_active is not None:
            if not _is_uint(min_active, _U32):
                raise InvalidArgument(f"EV profile {pid}: ev_min_active is a count, not "
                                      f"{min_active!r}")
            # (at most 1, it is never above ev_count, as the header asks)
            if min_active > 1:
                raise NotPermitted(f"EV profile {pid}: ev_min_active {min_active}: the NIC keeps "
                                   "only a QP's last GOOD EV from being marked ASSUMED_BAD")
            new.min_active = min_active
        if event_mask is not None:
            new.event_mask = self._event_mask(pid, event_mask)
        if fields is not None:
            new.fields = tuple(fields)
            if not all(isinstance(f, EvField) for f in new.fields):
                raise InvalidArgument(f"EV profile {pid}: fields are EvFields, not {fields!r}")
        if given & {"mode", "fmt_id", "ev_count", "fields"}:
            self._rebuild(pid, p, new)
        if to is not p.state:
            if to is ProfileState.INIT:
                del self._evps[pid]
                return
            _need("EV", pid, to, _EV_NEEDS, {n: getattr(new, n) for n in values})
            if p.state is ProfileState.INIT:
                self._room("EV", self._evps, self._limit("ev_max_profiles"))
            if to is ProfileState.ONLINE:
                self._ready(pid, new)
        if event_mask is not None and p.bindings:
            self._collect()       # what the NIC queued so far is filtered by the old mask
        new.state = to
        self._evps[pid] = new
        self._sync_event_mask()

    @staticmethod
    def _event_mask(pid: int, mask) -> frozenset:
        try:
            states = frozenset(mask)
        except TypeError:
            raise InvalidArgument(f"EV profile {pid}: an event mask is a set of EvStates, not "
                                  f"{mask!r}") from None
        if not states <= _EVENT_STATES:
            raise InvalidArgument(f"EV profile {pid}: an event mask names only GOOD and "
                                  f"ASSUMED_BAD, not {sorted(map(str, states - _EVENT_STATES))}")
        return states

    def _rebuild(self, pid: int, old: _EvProfile, new: _EvProfile) -> None:
        """The EV array after a change of mode, format, count or fields: an EXPLICIT one keeps
        the EVs it has (each checked again), a GENERATED one is every combination again."""
        rule = self._rule_if_ready(new, pid)
        if new.mode is EvMode.GENERATED:
            if rule is None or new.ev_count is None:
                new.evs, new.states = [], []
                return
            n = (rule.ev_bits + 7) // 8
            new.evs = [Ev(v.ljust(n, b"\0")) for v in rule.generated_evs(new.ev_count)]
            new.states = [EvState.GOOD] * len(new.evs)
            return
        keep = old.mode is EvMode.EXPLICIT and new.mode is EvMode.EXPLICIT
        evs = new.evs if keep else []
        states = new.states if keep else []
        count = new.ev_count or 0
        evs = (evs + [UNPOPULATED] * count)[:count]
        states = (states + [None] * count)[:count]
        if rule is not None:
            evs = [e if s is None else self._explicit_ev(rule, e)
                   for e, s in zip(evs, states, strict=True)]
        new.evs, new.states = evs, states

    def _ready(self, pid: int, p: _EvProfile) -> None:
        """Refuses to put ``p`` ONLINE unless its format profile is and every EV is set."""
        fmt = self._fmts.get(p.fmt_id)
        if fmt is None or fmt.state is not ProfileState.ONLINE:
            raise InvalidArgument(f"EV profile {pid} cannot go ONLINE: EV format profile "
                                  f"{p.fmt_id} is {fmt.state.name if fmt else 'INIT'}")
        rule = self._rule(p, pid)
        if p.mode is EvMode.GENERATED:
            if len(p.evs) != p.ev_count:        # its format had no widths when it was made
                self._rebuild(pid, p, p)
        else:
            p.evs = [e if s is None else self._explicit_ev(rule, e)
                     for e, s in zip(p.evs, p.states, strict=True)]
        empty = [i for i, s in enumerate(p.states) if s is None]
        if empty:
            raise InvalidArgument(f"EV profile {pid} cannot go ONLINE: EV array entry {empty[0]} "
                                  f"(of {len(empty)}) is unpopulated; REPLACE_EV fills it")

    @shared
    def query_ev_profile(self, profile_id: int, max_fields: int | None = None) -> EvProfileInfo:
        """``mrc_ctl_query_ev_profile`` without its EV operations (:meth:`query_ev_states`,
        :meth:`query_ev_array`); ``max_fields`` as :meth:`query_ev_fmt_profile`'s."""
        pid = _profile_id(profile_id)
        p = self._evps.get(pid, _EvProfile())
        self._fits("fields", p.fields, max_fields)
        return EvProfileInfo(p.state, p.mode, p.fmt_id, p.ev_count, p.min_active, p.event_mask,
                             p.fields)

    # -- EV operations ---------------------------------------------------------------------

    def _configured(self, pid) -> _EvProfile:
        pid = _profile_id(pid)
        p = self._evps.get(pid)
        if p is None:
            raise InvalidArgument(f"EV profile {pid} is INIT: it has no EVs")
        return p

    @staticmethod
    def _find(pid: int, p: _EvProfile, ev, every: bool) -> list[int]:
        if not isinstance(ev, Ev):
            raise InvalidArgument(f"an EV is an Ev (value, port), not {ev!r}")
        # an unpopulated entry is one without a state
        if ev.unpopulated and p.mode is EvMode.EXPLICIT:
            found = [i for i, s in enumerate(p.states) if s is None]
        else:
            found = [i for i, (e, s) in enumerate(zip(p.evs, p.states, strict=True))
                     if s is not None and e.key == ev.key and ev.port in (0, e.port)]
        if not found:
            raise NotFound(f"EV profile {pid} holds no EV {ev}")
        return found if every else found[:1]

    def _batch(self, entries, one) -> list[EvOpEntry]:
        """Runs ``one`` on each entry in order; the first to fail stops the batch, its error
        saying which entry it was and what the ones before it did."""
        done: list[EvOpEntry] = []
        for k, entry in enumerate(entries):
            try:
                if not isinstance(entry, EvOpEntry):
                    raise InvalidArgument(f"a batch entry is an EvOpEntry, not {entry!r}")
                done.append(one(entry))
            except MrcError as e:
                e.entry, e.done = k, tuple(done)
                raise
        return done

    @staticmethod
    def _settable(state) -> EvState:
        if state not in _SETTABLE:
            raise InvalidArgument(f"an EV's state is set to GOOD, ASSUMED_BAD or DENIED, not "
                                  f"{state!r}")
        return state

    @shared
    def replace_evs(self, profile_id: int, entries: Iterable[EvOpEntry]) -> list[EvOpEntry]:
        """REPLACE_EV on each entry: the EV ``ev`` (one copy, or with ``all_copies`` every one;
        :data:`UNPOPULATED` names an entry not yet given one) becomes ``ev_new``, in ``state``.
        An EXPLICIT profile's only. In a QP's table the new EV takes the old one's entry, so
        it must go out on the same port."""
        pid = _profile_id(profile_id)
        p = self._configured(pid)
        if p.mode is not EvMode.EXPLICIT:
            raise InvalidArgument(f"EV profile {pid} is {p.mode.name}: its EVs are its fields' "
                                  "values, only an EXPLICIT profile's are replaced")
        rule = self._rule(p, pid)

        def one(e: EvOpEntry) -> EvOpEntry:
            if e.ev_new is None:
                raise InvalidArgument("REPLACE_EV needs ev_new")
            state = self._settable(e.state)
            new = self._explicit_ev(rule, e.ev_new)
            targets = self._find(pid, p, e.ev, e.all_copies)
            loads = []
            for qp, b in p.bindings.items():
                nic = self._nic_ev(pid, rule, new, b.template, b.mode, f"the new EV {new}")
                for t in targets:
                    if self._layout.plane(nic) != b.entries[t] % self._info["planes"]:
                        raise NotPermitted(f"EV profile {pid}: {new} would take entry "
                                           f"{b.entries[t]} of QP {qp}'s table, which is on port "
                                           f"{b.entries[t] % self._info['planes'] + 1}")
                    loads.append((qp, t, nic))
            if loads:
                self._collect()   # queued events name the old EVs
            for qp, t, nic in loads:
                b = p.bindings[qp]
                self._run(driver.replace_ev(qp, b.entries[t], nic, self._layout))
                self._spared.get(qp, set()).discard(b.entries[t])
                if state is not EvState.GOOD:
                    self._run(driver.set_ev_state(qp, b.entries[t], state))
                nic_evs = list(b.nic_evs)
                nic_evs[t] = nic
                p.bindings[qp] = _copy(b, nic_evs=tuple(nic_evs))
            for t in targets:
                p.evs[t], p.states[t] = new, state
            return e

        return self._batch(entries, one)

    @shared
    def modify_ev_states(self, profile_id: int, entries: Iterable[EvOpEntry]) -> list[EvOpEntry]:
        """MODIFY_EV_STATE on each entry: every copy of ``ev`` takes ``state`` (GOOD,
        ASSUMED_BAD or DENIED), in the tables of the QPs the profile is loaded into too."""
        pid = _profile_id(profile_id)
        p = self._configured(pid)

        def one(e: EvOpEntry) -> EvOpEntry:
            state = self._settable(e.state)
            if isinstance(e.ev, Ev) and e.ev.unpopulated and p.mode is EvMode.EXPLICIT:
                raise InvalidArgument("an unpopulated entry has no state to set")
            targets = self._find(pid, p, e.ev, every=True)
            for qp, b in p.bindings.items():
                for t in targets:
                    self._run(driver.set_ev_state(qp, b.entries[t], state))
            for t in targets:
                p.states[t] = state
            return e

        return self._batch(entries, one)

    def _state_source(self, pid: int, p: _EvProfile, qp) -> int | None:
        """Whose states a query reads: the NIC's table of QP ``qp`` (the one QP the profile is
        loaded into, if None), or the controller's own (None) for a profile in none."""
        if qp is None:
            if len(p.bindings) > 1:
                raise InvalidArgument(f"EV profile {pid} is loaded into QPs "
                                      f"{', '.join(map(str, sorted(p.bindings)))}, each with "
                                      "its own states: name one")
            return next(iter(p.bindings), None)
        if qp not in p.bindings:
            raise InvalidArgument(f"EV profile {pid} is not loaded into QP {qp!r}")
        return qp

    def _states(self, pid: int, p: _EvProfile, qp) -> list[EvState | None]:
        qp = self._state_source(pid, p, qp)
        if qp is None:
            return list(p.states)
        table = self._nic_states(qp)
        return [table[i] for i in p.bindings[qp].entries]

    @shared
    def query_ev_states(self, profile_id: int, evs: Iterable[Ev], qp: int | None = None
                        ) -> list[EvOpEntry]:
        """QUERY_EV_STATE: each EV's state (its first copy's), as the NIC's table of the QP the
        profile is loaded into says (``qp``: which, if several), or as the controller keeps it
        for a profile loaded nowhere. A batch; each entry an :class:`Ev` or an EvOpEntry."""
        pid = _profile_id(profile_id)
        p = self._configured(pid)
        states: list = []

        def one(e: EvOpEntry) -> EvOpEntry:
            (t,) = self._find(pid, p, e.ev, every=False)
            if not states:
                states.extend(self._states(pid, p, qp))
            return _copy(e, state=states[t])

        return self._batch((e if isinstance(e, EvOpEntry) else EvOpEntry(e) for e in evs), one)

    @shared
    def query_ev_array(self, profile_id: int, max_entries: int | None = None,
                       qp: int | None = None) -> list[EvOpEntry]:
        """QUERY_EV_ARRAY: the profile's EVs in order, each with its port, its state (as
        :meth:`query_ev_states` reads it) and its expansion. ``max_entries``: the room the
        caller has (TooBig, with ``.needed``, if the array is longer)."""
        pid = _profile_id(profile_id)
        p = self._configured(pid)
        self._fits("EVs", p.evs, max_entries)
        rule = self._rule(p, pid)
        states = self._states(pid, p, qp)
        return [EvOpEntry(ev, state=s, expansion=None if kept is None else rule.expand(ev.value))
                for ev, s, kept in zip(p.evs, states, p.states, strict=True)]

    # -- EV profiles on the NIC ------------------------------------------------------------

    def _route(self, tpl: UsidTemplate, plane: int, spine: int, mode: SrMode
               ) -> tuple[tuple[int, ...], bool]:
        """The carriers the NIC sends a packet through on (plane, spine), in visiting order,
        and whether it adds an SRH."""
        carriers = tuple(tpl.carriers(plane, spine))
        return carriers, mode is SrMode.USID_SRH or len(carriers) > 1

    def _nic_ev(self, pid: int, rule: EvProfile, ev: Ev, tpl, mode: SrMode, what: str) -> int:
        """The NIC EV that puts exactly ``ev``'s expansion on the wire for a QP of ``mode`` with
        template ``tpl``, on ``ev``'s port (any, if 0); NotPermitted saying why, the EV named
        ``what``, if none does."""
        exp = rule.expand(ev.value)
        fmode = rule.format.mode
        if fmode is FormatMode.SRV6:
            want = (int.from_bytes(exp[:16].ljust(16, b"\0"), "big"),)
            if len(exp) > 16:
                want += (int.from_bytes(exp[16:32].ljust(16, b"\0"), "big"),)
            L = self._layout
            nic = None
            for plane in range(L.planes):
                for spine in range(L.spines):
                    if self._route(tpl, plane, spine, mode) == (want, len(want) > 1):
                        nic = L.make(plane, spine)
            if nic is None:
                raise NotPermitted(f"EV profile {pid}: {what}: {self._no_route(want, tpl, mode)}")
        elif fmode is FormatMode.STEV:
            # the EV's first 16 bits go in the UDP source port, the next 16 in the flow label
            nic = int.from_bytes(exp.ljust(4, b"\0"), "big")
        else:
            nic = int.from_bytes(exp.ljust(2, b"\0"), "big") << 16
        try:
            port = self._layout.plane(nic) + 1
        except ValueError as e:           # the NIC sends on the plane its EV names
            raise NotPermitted(f"EV profile {pid}: {what}: as the NIC sends it, {e}") from None
        if ev.port not in (0, port):
            raise NotPermitted(f"EV profile {pid}: {what}: the NIC sends it on port {port}, the "
                               f"plane its EV {nic:#010x} names")
        return nic

    def _no_route(self, want: tuple[int, ...], tpl: UsidTemplate, mode: SrMode) -> str:
        asked = format_addr(want[0]) + (f" with an SRH segment {format_addr(want[1])}"
                                        if len(want) > 1 else " without an SRH")
        L = self._layout
        for plane in range(L.planes):
            for spine in range(L.spines):
                carriers, srh = self._route(tpl, plane, spine, mode)
                if carriers[0] == want[0]:
                    sent = Route(carriers[0], tuple(reversed(carriers)) if srh else ())
                    return (f"it is {asked}, but on plane {plane} spine {spine} the NIC sends "
                            f"{sent} (mode {mode.name})")
        return (f"it is {asked}, a destination the template's route takes on no plane and "
                f"spine")

    def _bind_args(self, pid: int, fmode: FormatMode, template, mode) -> SrMode:
        if mode is not None and not isinstance(mode, SrMode):
            raise InvalidArgument(f"a QP's mode is an SrMode, not {mode!r}")
        if fmode is FormatMode.SRV6:
            mode = SrMode.USID if mode is None else mode
            if mode not in (SrMode.USID, SrMode.USID_SRH):
                raise NotPermitted(f"EV profile {pid} is SRV6: a QP in mode {mode!r} sends no "
                                   "SRv6 header")
            if not isinstance(template, UsidTemplate):
                raise InvalidArgument(f"EV profile {pid} is SRV6: give the UsidTemplate the QP's "
                                      f"routes are made from, not {template!r}")
            if (template.block_bits not in driver.TEMPLATE_FORMATS or template.plane_shift != 12
                    or len(template.usids) > self._info["max_usids"]):
                raise InvalidArgument(f"EV profile {pid}: {template} is no template this NIC "
                                      "holds (a 16- or 32-bit block, the plane at bit 12, at "
                                      f"most {self._info['max_usids']} uSIDs)")
            return mode
        mode = SrMode.PLAIN if mode is None else mode
        if mode is not SrMode.PLAIN:
            raise NotPermitted(f"EV profile {pid} is {fmode.name}: a QP in mode {mode!r} puts "
                               "an SRv6 header in front, routed by its template, not by the EV")
        if template is not None:
            raise InvalidArgument(f"EV profile {pid} is {fmode.name}: its EVs are no route, it "
                                  "takes no template")
        return mode

    @shared
    def bind_ev_profile(self, profile_id: int, qp: int, *, template: UsidTemplate | None = None,
                        mode: SrMode | None = None) -> Binding:
        """Loads ONLINE EV profile ``profile_id`` into QP ``qp``'s EV table, in place of what it
        held, with the states the controller keeps for its EVs.

        The NIC cannot read a QP's context back: ``mode`` and ``template`` are what the QP was
        configured with (:func:`mrcnic.driver.configure_qp`), the template the one its
        ``template`` index names. An SRV6 profile takes a QP in mode USID (the default) or
        USID_SRH and its template; an STEV or UDP one a PLAIN QP (the default) and none.

        Each EV is loaded as the NIC EV for which the NIC puts on the wire exactly the EV's
        expansion, and sends it on the EV's port: NotPermitted, naming the first EV for which
        none does and why, and nothing is written, if that cannot be.
        """
        pid = _profile_id(profile_id)
        p = self._configured(pid)
        if p.state is not ProfileState.ONLINE:
            raise InvalidArgument(f"EV profile {pid} is {p.state.name}: only an ONLINE profile "
                                  "is loaded into a QP")
        if not _is_uint(qp, self._info["qps"]):
            raise InvalidArgument(f"QP {qp!r} does not exist: this NIC has {self._info['qps']}")
        rule = self._rule(p, pid)
        mode = self._bind_args(pid, rule.format.mode, template, mode)
        # a GENERATED EV's port is the one the NIC sends it on from the other QPs, if any
        others = set(p.bindings) - {qp}
        nic_evs = [self._nic_ev(pid, rule, ev if others or p.mode is EvMode.EXPLICIT
                                else Ev(ev.value), template, mode, f"EV {i} ({ev})")
                   for i, ev in enumerate(p.evs)]
        ports = [self._layout.plane(n) + 1 for n in nic_evs]
        self._collect()          # queued events name what the table holds now
        try:
            loaded = self._run(driver.load_ev_profile(qp, nic_evs, self._layout))
        except InvalidArgument:
            raise                    # refused before anything was written: the table is as it was
        except MrcError:
            self._forget(qp)
            raise
        self._forget(qp)
        # the driver puts entry i on plane i % planes, each plane's EVs in their order
        free: dict[int, list[int]] = {}
        for entry, nic in enumerate(loaded):
            free.setdefault(nic, []).append(entry)
        entries = tuple(free[nic].pop(0) for nic in nic_evs)
        for i, state in enumerate(p.states):
            if state not in (None, EvState.GOOD):
                self._run(driver.set_ev_state(qp, entries[i], state))
        binding = Binding(pid, qp, template, mode, tuple(nic_evs), entries)
        p.bindings[qp] = binding
        self._bound[qp] = pid
        p.evs = [Ev(ev.value, port) for ev, port in zip(p.evs, ports, strict=True)]
        self._sync_event_mask()
        return binding

    def _forget(self, qp: int) -> None:
        """Drops the controller's record of what QP ``qp``'s table holds."""
        self._spared.pop(qp, None)
        pid = self._bound.pop(qp, None)
        if pid is None:
            return
        p = self._evps[pid]
        del p.bindings[qp]
        if p.mode is EvMode.GENERATED and not p.bindings:
            p.evs = [Ev(ev.value) for ev in p.evs]      # the port is the table's: none now

    @shared
    def unbind_ev_profile(self, qp: int) -> None:
        """Empties QP ``qp``'s EV table (it has no EV to send on until a profile is loaded),
        and the profile it held is no longer in use there."""
        if not _is_uint(qp, self._info["qps"]):
            raise InvalidArgument(f"QP {qp!r} does not exist: this NIC has {self._info['qps']}")
        self._collect()
        self._forget(qp)
        self._run(driver.clear_ev_profile(qp))
        self._sync_event_mask()

    @shared
    def binding(self, qp: int) -> Binding | None:
        """What the controller loaded into QP ``qp``'s table, if anything."""
        pid = self._bound.get(qp)
        return None if pid is None else self._evps[pid].bindings[qp]

    def nic_table(self, qp: int) -> list[int]:
        """The NIC EVs QP ``qp``'s table holds now, entry by entry, as the NIC reads them back
        (``ev.size`` entries, ``ev.entry`` each): a spare that took an entry's place is there,
        not the EV the binding loaded."""
        if not _is_uint(qp, self._info["qps"]):
            raise InvalidArgument(f"QP {qp!r} does not exist: this NIC has {self._info['qps']} "
                                  "QPs (global.qps)")
        return self._run(driver.keeping(("ev.qp", "ev.index"), driver.ev_table(qp)))

    # -- CC profiles -----------------------------------------------------------------------

    @shared
    def modify_cc_profile(self, profile_id: int, *, state: ProfileState | None = None,
                          algorithm: str | None = None, config: NsccConfig | None = None) -> None:
        """``mrc_ctl_modify_cc_profile``: the attributes given change, then the profile moves
        to ``state``; nothing changes if anything is refused.

        On a NIC that keeps several CC profiles, each profile has one of its own
        (:meth:`cc_profile_number`) from OFFLINE on; the NIC takes the configuration when the
        profile goes ONLINE, and again whenever it changes while ONLINE. A profile that a QP's
        window follows (the NIC's cc.view says so) cannot leave ONLINE: Busy. A new
        configuration of the profile :meth:`apply_cc_profile` last applied also goes to profile
        0 at once."""
        pid = _profile_id(profile_id)
        p = self._ccs.get(pid, _Cc())
        given = {n for n, v in (("algorithm", algorithm), ("config", config)) if v is not None}
        to = self._move("CC", pid, p.state, state, given, _CC_ALLOWED)
        new = _copy(p)
        if algorithm is not None:
            if algorithm != NSCC:
                raise InvalidArgument(f"CC profile {pid}: algorithm {algorithm!r} is none of "
                                      f"this NIC's ({NSCC!r})")
            new.algorithm = algorithm
        if config is not None:
            if not isinstance(config, NsccConfig):
                raise InvalidArgument(f"CC profile {pid}: {NSCC} is configured by an "
                                      f"NsccConfig, not {config!r}")
            self._nscc_registers(pid, config)
            new.config = config
        if to is not p.state:
            if to is ProfileState.INIT:
                del self._ccs[pid]
                return
            _need("CC", pid, to, _CC_NEEDS, {"algorithm": new.algorithm, "config": new.config})
            if p.state is ProfileState.INIT:
                self._room("CC", self._ccs, self._limit("cc_max_profiles"))
                taken = {c.number for c in self._ccs.values()}
                free = [n for n in range(1, self._info["cc_profiles"]) if n not in taken]
                new.number = free[0] if free else None
            if p.state is ProfileState.ONLINE and new.number is not None:
                following = self._following(new.number)
                if following:
                    raise Busy(f"CC profile {pid} is the window of QP(s) "
                               f"{', '.join(map(str, following))} (qp.cc_profile "
                               f"{new.number}): move them to another first")
        online = to is ProfileState.ONLINE
        if new.number is not None and online and (config is not None or p.state is not to):
            self._run(driver.set_congestion(profile=new.number,
                                            **self._nscc_registers(pid, new.config)))
        new.state = to
        self._ccs[pid] = new
        if pid == self._applied:
            if not online:
                self._applied = None
            elif config is not None:
                self._run(driver.set_congestion(**self._nscc_registers(pid, new.config)))

    def _following(self, number: int) -> list[int]:
        """The QPs whose window follows NIC CC profile ``number``, as the NIC says (cc.view)."""
        def look():
            out = []
            for q in range(self._info["qps"]):
                yield from write("rel.view_qp", q)
                if (yield from read("cc.view")) == number:
                    out.append(q)
            return out
        return self._run(driver.keeping(("rel.view_qp",), look()))

    @shared
    def profile_ids(self) -> dict[str, list[int]]:
        """The ids of the profiles that are not INIT, by kind: ``fmt`` (EV format), ``ev``,
        ``cc``. The header has no call that lists them (mrcnic extra)."""
        return {"fmt": sorted(self._fmts), "ev": sorted(self._evps), "cc": sorted(self._ccs)}

    @shared
    def applied_cc_profile(self) -> int | None:
        """The CC profile :meth:`apply_cc_profile` last put in the NIC's profile 0 (None: none,
        or it has left ONLINE since) (mrcnic extra)."""
        return self._applied

    @shared
    def cc_profile_number(self, profile_id: int) -> int:
        """The NIC's CC profile (``qp.cc_profile``, :attr:`mrcnic.driver.QpConfig.cc_profile`)
        that ONLINE CC profile ``profile_id`` is kept in: a QP given it follows that profile's
        window. NotSupported on a NIC built with one CC profile (global.cc_profiles 1)."""
        pid = _profile_id(profile_id)
        p = self._ccs.get(pid)
        if p is None or p.state is not ProfileState.ONLINE:
            raise InvalidArgument(f"CC profile {pid} is {p.state.name if p else 'INIT'}: a QP "
                                  "follows only an ONLINE profile")
        if p.number is None:
            raise NotSupported(f"CC profile {pid}: this NIC keeps no CC profile but rel.* "
                               "(global.cc_profiles 1): apply_cc_profile puts it there, for "
                               "every QP")
        return p.number

    @shared
    def query_cc_profile(self, profile_id: int) -> CcProfileInfo:
        """``mrc_ctl_query_cc_profile``."""
        pid = _profile_id(profile_id)
        p = self._ccs.get(pid, _Cc())
        return CcProfileInfo(p.state, p.algorithm, p.config)

    def _cycles(self, ns: int) -> int:
        return (ns * self.clock_hz + 500_000_000) // 1_000_000_000

    def _nscc_registers(self, pid: int, cfg: NsccConfig) -> dict:
        """The arguments of :func:`mrcnic.driver.set_congestion` that put ``cfg`` on the NIC;
        NotPermitted for a field it has no register for, unless the field says what the NIC
        does anyway."""
        def refuse(name, why):
            raise NotPermitted(f"CC profile {pid}: NSCC {name} {getattr(cfg, name)!r}: {why}")

        if cfg.disable_qa == 0:
            refuse("disable_qa", "the NIC has no QuickAdapt to enable (its qa_gate and "
                                 "qa_threshold have nothing to act on)")
        for name, why in (("adjust_bytes_threshold", "the NIC applies each SACK's change to the "
                           "window at once (0)"),
                          ("adjust_period_threshold", "the NIC applies each SACK's change to the "
                           "window at once (0)"),
                          ("eta", "the NIC adds nothing once an adjustment period (0)"),
                          ("fi_scale", "the NIC has no fast increase (0)")):
            if getattr(cfg, name) not in (None, 0):
                refuse(name, why)
        for name in ("gamma", "max_md_jump"):
            if getattr(cfg, name) is not None:
                refuse(name, "the NIC's decrease is its own, cwnd / 2^rel.cc_md once a round "
                             "trip, not scaled by the delay")
        out = {}
        if cfg.fi is not None:
            if cfg.fi != 0:
                refuse("fi", "the NIC's fair increase is rel.cc_fair bytes a SACK, not NSCC's; "
                             "only 0, none, is the same")
            out["fair"] = 0
        if cfg.target_delay is not None:
            # NSCC compares the queueing delay, an RTT sample less base_rtt, with target_delay;
            # the NIC compares the sample itself with rel.target_rtt
            ns = cfg.target_delay + (cfg.base_rtt or 0)
            cycles = self._cycles(ns)
            if not 1 <= cycles <= _TARGET_TOP:
                refuse("target_delay", f"base_rtt + target_delay is {ns} ns, {cycles} cycles of "
                                       f"the NIC's {self.clock_hz} Hz clock; rel.target_rtt "
                                       f"holds 1 .. {_TARGET_TOP}")
            out["target_rtt"] = cycles
        elif cfg.base_rtt is not None:
            raise InvalidArgument(f"CC profile {pid}: NSCC base_rtt without target_delay: the "
                                  "NIC uses the base RTT only as part of its target")
        if cfg.max_cwnd is not None:
            if cfg.max_cwnd == 0:
                raise InvalidArgument(f"CC profile {pid}: NSCC max_cwnd 0 lets nothing be sent")
            if cfg.max_cwnd > _CWND_TOP:
                refuse("max_cwnd", f"rel.cwnd_max holds at most {_CWND_TOP} bytes")
            # NSCC starts a window at its largest
            out["cwnd_max"] = out["cwnd_init"] = cfg.max_cwnd
        return out

    @shared
    def apply_cc_profile(self, profile_id: int) -> dict:
        """Writes ONLINE CC profile ``profile_id`` into the NIC's profile 0 (the rel.*
        registers), which every QP's window follows unless its context names another; returns
        what was written, as
        :func:`mrcnic.driver.set_congestion`'s arguments (registers it leaves out keep their
        values: the NIC's own rules).

        NSCC's target_delay and base_rtt become ``rel.target_rtt`` (their sum in cycles, to the
        nearest), max_cwnd ``rel.cwnd_max`` and ``rel.cwnd_init``, fi 0 ``rel.cc_fair`` 0. The
        other fields have no register: each must be left None or say what the NIC does anyway
        (disable_qa non-zero; eta, fi_scale, adjust_bytes_threshold, adjust_period_threshold 0;
        qa_gate and qa_threshold, with nothing to act on, anything)."""
        pid = _profile_id(profile_id)
        p = self._ccs.get(pid)
        if p is None or p.state is not ProfileState.ONLINE:
            raise InvalidArgument(f"CC profile {pid} is {p.state.name if p else 'INIT'}: only an "
                                  "ONLINE profile is applied")
        regs = self._nscc_registers(pid, p.config)
        self._run(driver.set_congestion(**regs))
        self._applied = pid
        return regs

    # -- EV events -------------------------------------------------------------------------

    @shared
    def create_ev_event_cq(self, cqe: int) -> EvEventCq:
        """``mrc_ctl_create_ev_event_cq``: the EV event CQ, of at least ``cqe`` events.

        The NIC has one EV event queue of ``evq.depth`` events: TooBig (``.needed`` the depth)
        for more, Busy while a CQ of this controller holds it. What the queue held before is
        discarded (no CQ was there for it), and from now on the NIC queues the changes to
        the states the event masks of the profiles loaded into a QP select (evq.mask, their
        union: the NIC's mask is one for every QP)."""
        if not _is_uint(cqe, _U32) or cqe == 0:
            raise InvalidArgument(f"an EV event CQ holds 1 or more events, not {cqe!r}")
        depth = self._info["evq_depth"]
        if depth == 0:
            raise NotPermitted("the NIC was built without an EV event queue (evq.depth 0): it "
                               "reports no EV state change (Feature.EV_EVENT is not offered)")
        if cqe > depth:
            raise TooBig(f"an EV event CQ of {cqe} events: the NIC's EV event queue holds "
                         f"{depth} (evq.depth), and more would be lost there", needed=depth)
        if self._evcq is not None:
            raise Busy(f"the NIC has one EV event queue, and {self._evcq} holds it: destroy "
                       "that one first")
        _, overflows = self._run(driver.ev_events(depth))
        self._evcq = EvEventCq(cqe, depth, overflows)
        self._sync_event_mask(force=True)
        return self._evcq

    def _live(self, cq) -> EvEventCq:
        if not isinstance(cq, EvEventCq):
            raise InvalidArgument(f"an EV event CQ is what create_ev_event_cq returned, not "
                                  f"{cq!r}")
        if cq is not self._evcq:
            raise InvalidArgument(f"{cq} is not this controller's EV event CQ"
                                  + (": it was destroyed" if cq.destroyed else ""))
        return cq

    @shared
    def destroy_ev_event_cq(self, cq: EvEventCq) -> None:
        """``mrc_destroy_cq`` of the EV event CQ: the NIC queues no more changes (evq.mask
        0), and the events not polled go with the CQ."""
        self._live(cq)
        self._evcq, cq.destroyed = None, True
        self._sync_event_mask(force=True)

    def _sync_event_mask(self, force: bool = False) -> None:
        """Sets evq.mask to the union of the event masks of the profiles loaded into a QP
        (only those can have events), while an event CQ is there to take them; 0 otherwise."""
        if self._evcq is None and not force:
            return                         # left 0 when the CQ went, or as another tool left it
        states = frozenset()
        if self._evcq is not None:
            states = states.union(*(p.event_mask or () for p in self._evps.values()
                                    if p.bindings))
        if force or states != self._nic_mask:
            self._nic_mask = None          # not known if the write fails
            self._run(driver.set_ev_event_mask(states))
            self._nic_mask = states

    def _profile_events(self, change: driver.EvEvent) -> list[EvEvent]:
        """The header's events for one change the NIC queued: one for each of the entries
        it covers (the entry, and with ``others`` the rest of its path) that holds an EV of
        the profile loaded into the QP, if that profile's event mask selects the state."""
        spared = self._spared.get(change.qp, set())
        covered = [change.index, *sorted(change.others)]
        known = [i for i in covered if i not in spared]
        if change.replaced:
            # the entry now holds a spare the controller does not know the value of
            self._spared.setdefault(change.qp, set()).add(change.index)
        pid = self._bound.get(change.qp)
        # Dropped here, as the header's CQ would never see them: a change in a QP no profile
        # of this controller is loaded into, and a state its profile's mask does not select
        # (the NIC's mask is the union of every loaded profile's).
        if pid is None:
            return []
        p = self._evps[pid]
        if change.state not in (p.event_mask or ()):
            return []
        at = {entry: j for j, entry in enumerate(p.bindings[change.qp].entries)}
        return [EvEvent(pid, p.evs[at[i]], change.state, change.qp,
                        management=change.management,
                        replaced=change.replaced and i == change.index)
                for i in known if i in at]

    def _collect(self) -> None:
        """Takes every change the NIC queued into the CQ, as the header's events, while the
        bindings that name their EVs are the ones they were made under."""
        cq = self._evcq
        if cq is None:
            return
        changes, overflows = self._run(driver.ev_events(cq.depth))
        for change in changes:
            for event in self._profile_events(change):
                if cq._lost:
                    event = _copy(event, drop_count=1, lost_changes=cq._lost)
                    cq._lost = 0
                cq._waiting.append(event)
        # a change is lost when the queue is full: after the ones it held, which were just
        # taken, so the next event carries the count
        cq._lost += (overflows - cq._overflows) % _U32
        cq._overflows = overflows

    @shared
    def poll_ev_event(self, cq: EvEventCq, max_events: int) -> list[EvEvent]:
        """``mrc_ctl_poll_ev_event``: up to ``max_events`` events, oldest first ([] when
        none is waiting).

        Events are lost only in the NIC, when its queue is full; the first event after a loss
        carries it (``drop_count``, ``lost_changes``). A loss with no event after it yet is
        IoError, naming how many changes were lost (also its ``.lost_changes``), once."""
        self._live(cq)
        if not _is_uint(max_events, _U32) or max_events == 0:
            raise InvalidArgument(f"max_events is the room for 1 or more events, not "
                                  f"{max_events!r}")
        if len(cq._waiting) < max_events:
            self._collect()
        out = [cq._waiting.popleft() for _ in range(min(max_events, len(cq._waiting)))]
        if not out and cq._lost:
            lost, cq._lost = cq._lost, 0
            e = IoError(f"{lost} EV state change(s) were lost: the NIC's EV event queue "
                        f"(evq.depth {cq.depth}) was full, and no event has followed them yet "
                        "to carry the drop count")
            e.lost_changes = lost
            raise e
        return out

    # -- endpoint requests ------------------------------------------------------------------

    @shared
    def ep_batch_send_wait(self, op_type: EpOpType | str, requests, timeout_ns: int
                           ) -> list[EpResponse]:
        """``mrc_ctl_ep_batch_send_wait``: sends a batch of endpoint requests of one type and
        waits up to ``timeout_ns`` (1 .. 2^32 - 1 ns, the header's 32 bits) in all for them.

        EV_PROBE: each request an :class:`EvProbe`, checked before any is sent (the first bad
        one's error carries its position, ``.entry``): an EV the profile does not hold is
        NotFound; a profile not configured, loaded into no QP, or into several with no ``qp``
        named, InvalidArgument. The NIC times one probe at a time (ep.qp, ep.entry), so they go
        one after another, each sent once the one before it is answered or the time is up, and
        the answer to a probe is the next answer heard for its entry (an answer to the NIC's own
        probe of that entry would be taken for it). An answer makes the entry GOOD again, as an
        answer to the NIC's own probes does. Returns an :class:`EpResponse` a request, in their
        order, each with its :class:`EpStatus` (the header's ``rsp`` array is those ANSWERED);
        no cap on the batch's length, as for EV operations (``ev_op_max_entries`` 0).

        PORT_STATUS_UPDATE: the NIC tells every RTR or RTS QP's peer which of its ports are up
        (ep.status), and waits for no answer: ``requests`` is empty (NotPermitted otherwise: the
        NIC cannot address one peer, nor send a port mask other than its ports' state), and the
        result is []. NotPermitted while the NIC is disabled (global.control bit 0), when it
        sends none.

        A NIC built without the endpoint request block (nothing at ep.*, and no
        Feature.EP_OP_EV_PROBE) refuses both with NotSupported.
        """
        op = self._ep_op(op_type)
        if not _is_uint(timeout_ns, _U32) or timeout_ns == 0:
            raise InvalidArgument(f"timeout_ns is 1 .. {_U32 - 1} ns, not {timeout_ns!r}")
        try:
            requests = list(requests)
        except TypeError:
            raise InvalidArgument(f"requests are a sequence, not {requests!r}") from None
        if not self._info["ep"]:
            raise NotSupported("the NIC was built without endpoint requests (nothing at ep.*): "
                               "it sends its probes and port status only of its own accord")
        if op is EpOpType.PORT_STATUS_UPDATE:
            self._announce_ports(requests)
            return []
        targets = []
        for k, request in enumerate(requests):
            try:
                targets.append(self._probe_target(request))
            except MrcError as e:
                e.entry, e.done = k, ()
                raise
        deadline = time.monotonic() + timeout_ns / 1e9
        return [self._probe(k, *target, deadline) for k, target in enumerate(targets)]

    @staticmethod
    def _ep_op(op_type) -> EpOpType:
        if isinstance(op_type, EpOpType):
            return op_type
        if isinstance(op_type, str) and op_type in EpOpType.__members__:
            return EpOpType[op_type]
        raise InvalidArgument(f"an endpoint operation is an EpOpType ("
                              f"{', '.join(EpOpType.__members__)}), not {op_type!r}")

    def _probe_target(self, request) -> tuple[int, int, int]:
        """(QP, table entry, port) an EV_PROBE request probes."""
        if not isinstance(request, EvProbe):
            raise InvalidArgument(f"an EV_PROBE request is an EvProbe, not {request!r}")
        pid = _profile_id(request.profile_id)
        p = self._configured(pid)
        if not p.bindings:
            raise InvalidArgument(f"EV profile {pid} is loaded into no QP: the NIC probes an "
                                  "entry of a QP's EV table (bind_ev_profile)")
        qp = request.qp
        if qp is None:
            if len(p.bindings) > 1:
                raise InvalidArgument(f"EV profile {pid} is loaded into QPs "
                                      f"{', '.join(map(str, sorted(p.bindings)))}: name the one "
                                      "to probe from")
            qp = next(iter(p.bindings))
        elif qp not in p.bindings:
            raise InvalidArgument(f"EV profile {pid} is not loaded into QP {qp!r}")
        (j,) = self._find(pid, p, request.ev, every=False)
        return qp, p.bindings[qp].entries[j], p.evs[j].port

    def _ns(self, cycles: int) -> int:
        return (cycles * 1_000_000_000 + self.clock_hz // 2) // self.clock_hz

    def _probe(self, req_id: int, qp: int, entry: int, port: int, deadline: float
               ) -> EpResponse:
        """Sends one probe and waits for its answer until ``deadline`` (time.monotonic)."""
        def result(status: EpStatus, cycles: int | None = None) -> EpResponse:
            return EpResponse(req_id, port, None if cycles is None else self._ns(cycles), False,
                              status, qp, entry, cycles)

        if time.monotonic() >= deadline:
            return result(EpStatus.TIMED_OUT)        # its turn came too late: not sent
        before, sent = self._run(driver.probe_send(qp, entry))
        if not sent:
            return result(EpStatus.PORT_DOWN)
        while True:
            answers, rtt = self._run(driver.probe_result())
            if answers != before:                    # a 32-bit count: moved, not grown
                return result(EpStatus.ANSWERED, rtt)
            left = deadline - time.monotonic()
            if left <= 0:
                return result(EpStatus.TIMED_OUT)
            time.sleep(min(left, _PROBE_POLL))

    def _announce_ports(self, requests: list) -> None:
        if requests:
            raise NotPermitted(f"PORT_STATUS_UPDATE with {len(requests)} request(s): the NIC "
                               "tells every RTR or RTS QP's peer the state of its ports at once "
                               "(ep.status); it cannot address one peer, nor send a port mask "
                               "other than its ports' state: give no requests")
        if not self._run(read("global.control")) & 1:
            raise NotPermitted("PORT_STATUS_UPDATE: the NIC is disabled (global.control bit 0 "
                               "clear) and sends no port status")
        self._run(driver.port_status_update())
