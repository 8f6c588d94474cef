"""The application side of the OCP MRC host API (``mrc.h``) for an mrcnic, over its registers.

A :class:`Context` opens a NIC through a register client (as :class:`mrcnic.ctl.Controller`
does) and gives the header's objects: the device's attributes, a completion queue, QPs with the
verbs state machine, RDMA WRITE and WRITE_WITH_IMM work requests and their completions, and the
application's buffers in the memory behind the NIC::

    from mrcnic.app import Context, QpState
    from mrcnic.target import Device

    with Device("sim://127.0.0.1:40000") as nic:
        ctx = Context(nic.regs)
        cq = ctx.create_cq(16)
        qp = ctx.create_qp(cq, cq, qp_num=1)                       # in RESET
        ctx.modify_qp(qp, QpState.INIT)
        ctx.modify_qp(qp, QpState.RTR, dest_qp=3, dst_ip="fd00::2", dst_mac="02:00:00:00:00:02",
                      rq_psn=0, rkey=0x103, mr_va=0x4300_0000, mr_length=1 << 24)
        ctx.modify_qp(qp, QpState.RTS, sq_psn=0)
        ctx.write_memory(0x1000, b"hello")
        ctx.post_write(qp, wr_id=7, local_addr=0x1000, length=5, remote_addr=0x4300_0000,
                       rkey=0x203, imm=0xC0FFEE)
        ctx.poll_cq(cq, 4)                 # [WorkCompletion(wr_id=7, status=OK, ...)] once acked

Work requests go through the wq.* registers, completions come from the register completion
queue (cq.*), memory through the mem.* window: the register path of a host that has only
register access. What the NIC holds per QP is its context (qp.*), written whole by each
transition (:func:`mrcnic.driver.configure_qp`); the NIC cannot read one back, so the context
keeps what it wrote. Errors are :mod:`mrcnic.ctl_errors`' (EINVAL, E2BIG, EBUSY, EPERM, EIO),
and nothing is written to the NIC before every argument has been checked.

What the NIC cannot do is refused, never changed into something it can:

* **One completion queue.** The NIC has one register completion queue of ``cq.depth``
  entries, which takes every QP's completions: ``create_cq(cqe)`` with ``cqe`` above it is
  ``TooBig`` (``.needed`` the depth), a second CQ ``TooBig`` (``max_cq`` is 1), and a CQ is
  created with ``cqe`` = the depth, as verbs lets a CQ be larger than asked.
* **Receives need no posted buffer**, so there is no ``post_recv``: the NIC completes every
  message a QP receives whole. A write without an immediate is no completion in verbs, and
  :meth:`Context.poll_cq` takes it off the queue and drops it; a receive completion has no
  ``wr_id`` (None).
* **wr_id is 16 bits** (``wq.post``): a larger one is ``InvalidArgument``.
* **A zero-length write** is ``NotPermitted``: the NIC completes it with ZERO_LENGTH.
* **Profiles as the NIC holds them.** ``ev_profile_id`` (INIT) names an ONLINE EV profile
  of the controller (:class:`mrcnic.ctl.Controller`, whose profiles the NIC's store holds;
  ``InvalidArgument`` otherwise). The NIC holds an EV table per QP, so the profile is loaded
  into the QP's at RTR, once its mode and template are known
  (:meth:`~mrcnic.ctl.Controller.bind_ev_profile`: an SRV6 profile needs the QP's ``route``;
  what the controller refuses to load is refused so), and taken out when the QP moves to
  RESET. ``cc_profile_id`` (INIT) names an ONLINE CC profile. A NIC built with CC profiles a
  QP names (``global.cc_profiles`` above 1) gives the QP the one the controller keeps it in
  (``qp.cc_profile``, :meth:`~mrcnic.ctl.Controller.cc_profile_number`). One built with its
  ``rel.*`` registers alone, which every QP's window follows, takes it there
  (:meth:`~mrcnic.ctl.Controller.apply_cc_profile`) unless it is there already, so another
  profile while a QP of this context follows the one applied is ``Busy``, until that QP moves
  to RESET.
* **No per-QP timeout or retry count.** ``timeout``, ``linear_cnt`` and ``exp_cnt`` (RTS) are
  ``NotPermitted`` once in their OCP range (``InvalidArgument`` outside it): every QP's RTO is
  its srtt + 4 rttvar within the NIC's global ``rel.rto_min`` .. ``rel.rto_max``, and a lost
  packet is sent again until it is acknowledged, with no backoff and no count.
* **No MPR or write-with-immediate limits per QP.** ``mpr_dest``, ``mpr`` and
  ``max_write_imm`` are ``NotPermitted`` (the NIC's receive window is fixed when it is built,
  and it takes as many writes with immediate as arrive); ``dynamic_mpr`` is taken only False.
* **A transition rewrites the whole context**, and ``qp.write`` starts the QP's receive side
  again from ``rq_psn``: move a QP to RTS before its peer sends to it. The moves are the verbs
  ones, RESET -> INIT -> RTR -> RTS and any state -> RESET or ERROR; not INIT -> INIT or
  RTS -> RTS, which would restart the receive side of a QP in use.
* The peer's address: ``dst_mac`` may be left out only when every plane has a next hop
  (``net.next_hop_p*``), which then takes the place of any QP's.

mrcnic extras beside the header's attributes: ``path_mtu`` (bytes), ``mode``
(:class:`~mrcnic.enums.SrMode`) and ``template`` (the index of the destination's uSID
template) at RTR, with ``route`` (the :class:`~mrcnic.evmap.UsidTemplate` that index holds,
which an SRV6 EV profile is loaded against), and the first MSN of each direction (``rq_msn``
at RTR, ``sq_msn`` at RTS, 0 unless given, as both peers' must agree).
``create_qp(qp_num=)`` asks for a QP number; without it, the lowest one this context has not
created. A QP has one memory region, the one its peer writes into (``qp.rkey``, ``qp.mr_va``,
``qp.mr_length``): :meth:`Context.set_region` gives it in RESET or INIT, and RTR's ``rkey``,
``mr_va`` and ``mr_length``, each one given, take the place of its value.

The context keeps its objects on the NIC, under ``app`` in the document of its store
(:mod:`mrcnic.store`, beside the controller's ``ctl``): the CQ and each QP created, with its
state, the context last written to the NIC, and its profile ids. Each method first takes up
what another program changed there, and writes back what it changed, so a new
``Context(regs)`` on the same NIC, in this program or another, finds them:
:meth:`Context.cq`, :meth:`Context.qp`, :meth:`Context.qps`. ``Busy`` if another program
changed them while a method ran (what it did is on the NIC, not in the store); ``TooBig`` if
the store cannot hold them. A NIC built without a store keeps nothing: a context then knows
only the objects it made.

If the NIC fails while a transition is written (``IoError``), the QP's context on the NIC is
not known, and the context holds the QP as ERROR until it is moved to RESET.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from . import driver, store
from .ctl import PROTOCOL_VERSIONS, Controller, ProfileState
from .ctl_errors import Busy, InvalidArgument, IoError, NotPermitted, TooBig, run_on_nic
from .enums import QpState, SrMode, WrStatus
from .evmap import UsidTemplate
from .regclient import Program, RegisterClient, read
from .store_part import StorePart, shared

__all__ = ["MAX_MESSAGE", "SendOpcode", "WcOpcode", "Capability", "DeviceAttr", "Cq", "Qp",
           "Region", "WorkCompletion", "Context", "QpState", "WrStatus"]

#: the longest message a work request moves (max_msg_sz), in bytes
MAX_MESSAGE = driver.MAX_MESSAGE
_U24, _U32, _U64 = 1 << 24, 1 << 32, 1 << 64


class SendOpcode(enum.Enum):
    """The work requests a QP takes (the header allows only these two)."""
    RDMA_WRITE = 0
    RDMA_WRITE_WITH_IMM = 1


class WcOpcode(enum.Enum):
    """What a work completion completed."""
    RDMA_WRITE = 0           # a posted write, with or without immediate
    RECV_RDMA_WITH_IMM = 1   # a write with immediate received whole


class Capability(enum.Enum):
    """The device capability bits of ``mrc.h``."""
    TRIM_NACK = 1 << 0       # a trimmed packet is NACKed (TRIMMED) for its retransmission
    DYNAMIC_MPR = 1 << 1     # the responder's MPR changes while the QP runs
    SVC_TIME = 1 << 2        # the responder's service time is taken out of RTT samples


@dataclass(frozen=True)
class DeviceAttr:
    """The device attributes, as the NIC's registers say (:meth:`Context.query_device`).

    The header's write-with-immediate limits, MPR and QP hints are not given: the NIC has no
    limit on writes with immediate and no MPR to report, and no register sizes its QPs by
    peer.
    """
    protocol_versions: frozenset[int]
    max_qp: int                           # global.qps
    max_cq: int                           # one register completion queue
    max_cqe: int                          # cq.depth
    max_msg_sz: int                       # wq.length: 2^31
    max_sge: int                          # one buffer a request (wq.laddr, wq.length)
    opcodes: frozenset[SendOpcode]
    capabilities: frozenset[Capability]


@dataclass(frozen=True, eq=False)
class Cq:
    """A completion queue: the NIC's register completion queue, ``cqe`` entries deep."""
    cqe: int


@dataclass(frozen=True)
class Region:
    """A QP's memory region: ``length`` bytes from ``va`` that its peer may write into with
    R_Key ``rkey`` (the QP's qp.mr_va, qp.mr_length and qp.rkey)."""
    rkey: int
    va: int
    length: int

    def __str__(self) -> str:
        return f"rkey {self.rkey:#x}, {self.length} bytes at {self.va:#x}"


class Qp:
    """A queue pair of a :class:`Context`: its number on the NIC, its CQs, its state, the
    context the NIC holds for it (what the last transition wrote), and the profiles it was
    given at INIT."""

    def __init__(self, qp_num: int, send_cq: Cq, recv_cq: Cq):
        self._num, self.send_cq, self.recv_cq = qp_num, send_cq, recv_cq
        self._cfg = _blank()
        self._ev: int | None = None
        self._cc: int | None = None

    @property
    def qp_num(self) -> int:
        return self._num

    @property
    def state(self) -> QpState:
        return QpState(self._cfg.state)

    @property
    def config(self) -> driver.QpConfig:
        return self._cfg

    @property
    def ev_profile_id(self) -> int | None:
        """The EV profile given at INIT, loaded into the QP's EV table from RTR on; None if
        none was given."""
        return self._ev

    @property
    def cc_profile_id(self) -> int | None:
        """The CC profile given at INIT, which the NIC's congestion registers hold; None if
        none was given."""
        return self._cc

    @property
    def region(self) -> Region | None:
        """The QP's memory region, None while it has none (a length of 0)."""
        c = self._cfg
        return Region(c.rkey, c.mr_va, c.mr_length) if c.mr_length else None

    def __repr__(self) -> str:
        return f"Qp({self._num}, {self.state.name})"


@dataclass(frozen=True)
class WorkCompletion:
    """A work completion. ``wr_id`` is None for a receive (no receive request was posted);
    ``imm_data`` None without an immediate; ``byte_len`` the posted length of a write this
    context posted, else None (the NIC does not report lengths)."""
    wr_id: int | None
    status: WrStatus
    opcode: WcOpcode
    qp_num: int
    imm_data: int | None
    byte_len: int | None


def _blank() -> driver.QpConfig:
    return driver.QpConfig(dqp=0, dst_mac=0, dst_ip=0, state=QpState.RESET)


def _uint(what: str, v, bound: int) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < bound:
        raise InvalidArgument(f"{what} is 0 .. {bound - 1}, not {v!r}")
    return v


def _until_first_write(program: Program) -> Program:
    """``program``'s reads up to its first write, which is not made: the checks a driver
    program makes before it writes, so they can be passed before anything else is written."""
    try:
        op = next(program)
        while op[0] in ("r", "rb"):
            op = program.send((yield op))
    except StopIteration:
        return
    program.close()



# What the NIC's store keeps of the context (under "app"): the CQ, the serial of the last CQ
# made (a CQ destroyed and made again is another), and each QP with the serial of its CQs.
@dataclass(frozen=True)
class _KeptCq:
    cqe: int
    overflows: int        # cq.overflows when last looked at: a loss is reported once


@dataclass(frozen=True)
class _KeptQp:
    config: driver.QpConfig
    send_cq: int
    recv_cq: int
    ev_profile_id: int | None = None
    cc_profile_id: int | None = None


_KEPT_CLASSES = (_KeptCq, _KeptQp, driver.QpConfig, QpState, SrMode)




# What each target state needs and takes. Attributes the NIC has no means for are named in
# _REFUSED with the range the header allows them and why they are refused within it.
_REQUIRED = {QpState.INIT: (), QpState.RTR: ("dest_qp", "dst_ip", "rq_psn"),
             QpState.RTS: ("sq_psn",), QpState.RESET: (), QpState.ERROR: ()}
_OPTIONAL = {
    QpState.INIT: ("ev_profile_id", "cc_profile_id"),
    QpState.RTR: ("dst_mac", "path_mtu", "mode", "template", "route", "rkey", "mr_va",
                  "mr_length", "rq_msn", "mpr_dest", "max_write_imm", "dynamic_mpr"),
    QpState.RTS: ("sq_msn", "timeout", "linear_cnt", "exp_cnt", "mpr", "max_write_imm"),
    QpState.RESET: (), QpState.ERROR: (),
}
_MOVES = {(QpState.RESET, QpState.INIT), (QpState.INIT, QpState.RTR),
          (QpState.RTR, QpState.RTS)}
_REFUSED = {
    "timeout": (25, "the NIC has no ACK timeout per QP: each QP's RTO is its srtt + 4 rttvar "
                    "within the global rel.rto_min .. rel.rto_max"),
    "linear_cnt": (8, "the NIC has no retry count: a lost packet is sent again until it is "
                      "acknowledged"),
    "exp_cnt": (26, "the NIC neither backs off nor counts retries: a lost packet is sent "
                    "again, each RTO alike, until it is acknowledged"),
    "mpr_dest": (_U32, "the NIC's receive window is fixed when it is built"),
    "mpr": (_U32, "the NIC's receive window is fixed when it is built"),
    "max_write_imm": (_U32, "the NIC takes as many writes with immediate as arrive"),
}


class Context:
    """The application API for the NIC behind ``regs`` (a
    :class:`~mrcnic.regclient.RegisterClient`, e.g. :attr:`mrcnic.target.Device.regs`), with
    the CQ and QPs its store holds (:meth:`cq`, :meth:`qps`).

    Raises
    ------
    IoError
        The NIC does not answer, is not an mrcnic, or its store holds what this software
        cannot read.
    """

    def __init__(self, regs: RegisterClient):
        self.regs = regs
        try:
            self._info = self._run(driver.identify())
        except InvalidArgument as e:      # the window answers, but not as an mrcnic's
            raise IoError(str(e)) from e
        self._cq: Cq | None = None
        self._cq_serial = 0                              # the last CQ's, made here or not
        self._qps: dict[int, Qp] = {}
        self._posted: dict[tuple[int, int], int] = {}    # (QP, wr_id) -> length
        self._overflows = 0                              # cq.overflows when last looked at
        self._ctl: Controller | None = None
        self._part = StorePart(regs, "app", _KEPT_CLASSES, "the application's CQ and QPs")
        self._sync()

    def _run(self, program: Program):
        return run_on_nic(self.regs, program)

    def _controller(self) -> Controller:
        """The controller whose profiles a QP names, made when first needed (it reads the
        NIC's build and the store's profiles)."""
        if self._ctl is None:
            self._ctl = Controller(self.regs)
        return self._ctl

    # -- the store -------------------------------------------------------------------------

    def _encoded(self):
        cq = None if self._cq is None else _KeptCq(self._cq.cqe, self._overflows)
        # every QP completes to the one CQ, the last one made
        qps = {n: _KeptQp(q._cfg, self._cq_serial, self._cq_serial, q._ev, q._cc)
               for n, q in sorted(self._qps.items())}
        return store.encode({"cq": cq, "cq_serial": self._cq_serial, "qps": qps})

    def _sync(self) -> None:
        """Takes up the CQ and QPs the NIC's store holds if another program changed them; the
        objects of those this context knew already stay the same objects."""
        part = self._part.load()
        if part is None:
            return
        cq, serial, kept = part.get("cq"), part.get("cq_serial", 0), part.get("qps", {})
        if (not (cq is None or isinstance(cq, _KeptCq)) or not isinstance(serial, int)
                or not isinstance(kept, dict)
                or not all(isinstance(n, int) and isinstance(k, _KeptQp)
                           for n, k in kept.items())):
            raise IoError("the NIC's store does not hold an application's CQ and QPs under "
                          "'app'")
        if kept and (cq is None or any((k.send_cq, k.recv_cq) != (serial, serial)
                                       for k in kept.values())):
            raise IoError("the NIC's store holds QPs of a completion queue that is not there")
        if cq is None:
            self._cq = None
        else:
            if self._cq is None or serial != self._cq_serial:
                self._cq = Cq(cq.cqe)
            self._overflows = cq.overflows
        self._cq_serial = serial
        qps = {}
        for num, k in kept.items():
            qp = self._qps.get(num) or Qp(num, self._cq, self._cq)
            qp.send_cq = qp.recv_cq = self._cq
            qp._cfg, qp._ev, qp._cc = k.config, k.ev_profile_id, k.cc_profile_id
            qps[num] = qp
        self._qps = qps

    def _save(self, before) -> None:
        """Writes the CQ and QPs to the NIC's store if they changed since ``before``
        (:meth:`_encoded`)."""
        after = self._encoded()
        if after != before:
            self._part.save(after)

    # -- the device ------------------------------------------------------------------------

    def query_device(self) -> DeviceAttr:
        """The device attributes, read from the NIC's registers now."""
        info = self._run(driver.identify())
        depth = self._run(read("cq.depth"))
        return DeviceAttr(
            protocol_versions=PROTOCOL_VERSIONS, max_qp=info["qps"], max_cq=1, max_cqe=depth,
            max_msg_sz=MAX_MESSAGE, max_sge=1, opcodes=frozenset(SendOpcode),
            capabilities=frozenset({Capability.TRIM_NACK}))

    # -- completion queues -----------------------------------------------------------------

    @shared
    def cq(self) -> Cq | None:
        """The completion queue, if it is created (by this context or another on the NIC)."""
        return self._cq

    @shared
    def create_cq(self, cqe: int) -> Cq:
        """The completion queue, at least ``cqe`` entries deep; send and receive completions
        go to it from now on (cq.route)."""
        if not isinstance(cqe, int) or isinstance(cqe, bool) or cqe < 1:
            raise InvalidArgument(f"cqe is a number of entries of at least 1, not {cqe!r}")
        depth = self._run(read("cq.depth"))
        if cqe > depth:
            raise TooBig(f"a completion queue of {cqe} entries: the NIC's holds {depth} "
                         "(cq.depth)", needed=depth)
        if self._cq is not None:
            raise TooBig("the NIC has one completion queue (cq.*), and it is created: give "
                         "it as both CQs of every QP, or destroy it first")
        self._run(driver.route_completions(send=True, recv=True))
        # what was lost before this CQ existed is no loss of its own
        self._overflows = self._run(driver.cq_overflows())
        self._cq = Cq(depth)
        self._cq_serial += 1
        return self._cq

    @shared
    def destroy_cq(self, cq: Cq) -> None:
        """Frees the completion queue: completions go to the completion stream again."""
        self._own_cq(cq, "cq")
        if self._qps:
            raise Busy(f"QPs {sorted(self._qps)} still use the completion queue")
        self._run(driver.route_completions(send=False, recv=False))
        self._cq = None

    def _own_cq(self, cq, what: str) -> Cq:
        if cq is None or cq is not self._cq:
            raise InvalidArgument(f"{what} {cq!r} is not this context's completion queue")
        return cq

    # -- queue pairs -----------------------------------------------------------------------

    @shared
    def qp(self, qp_num: int) -> Qp:
        """QP ``qp_num``, created by this context or another on the NIC."""
        _uint("qp_num", qp_num, self._info["qps"])
        if qp_num not in self._qps:
            raise InvalidArgument(f"QP {qp_num} is not created (create_qp)")
        return self._qps[qp_num]

    @shared
    def qps(self) -> list[Qp]:
        """The QPs created, by this context or another on the NIC, in the order of their
        numbers."""
        return [self._qps[n] for n in sorted(self._qps)]

    @shared
    def create_qp(self, send_cq: Cq, recv_cq: Cq, *, qp_num: int | None = None) -> Qp:
        """A QP in RESET (written so to the NIC), completing to ``send_cq`` and ``recv_cq``:
        QP ``qp_num``, or the lowest this context has not created."""
        self._own_cq(send_cq, "send_cq")
        self._own_cq(recv_cq, "recv_cq")
        count = self._info["qps"]
        if qp_num is None:
            free = [q for q in range(count) if q not in self._qps]
            if not free:
                raise TooBig(f"every QP of the NIC is created ({count}, global.qps)")
            qp_num = free[0]
        _uint("qp_num", qp_num, count)
        if qp_num in self._qps:
            raise Busy(f"QP {qp_num} is created already")
        qp = Qp(qp_num, send_cq, recv_cq)
        self._run(driver.configure_qp(qp_num, qp.config))
        self._qps[qp_num] = qp
        return qp

    @shared
    def destroy_qp(self, qp: Qp) -> None:
        """Moves the QP to RESET and frees its number."""
        self.modify_qp(qp, QpState.RESET)
        del self._qps[qp.qp_num]

    def _own_qp(self, qp) -> Qp:
        if not isinstance(qp, Qp) or self._qps.get(qp.qp_num) is not qp:
            raise InvalidArgument(f"{qp!r} is not a QP of this context")
        return qp

    @shared
    def modify_qp(self, qp: Qp, state: QpState, **attrs) -> None:
        """Moves ``qp`` to ``state`` with the attributes that transition takes, and writes its
        context to the NIC; all or nothing."""
        self._own_qp(qp)
        try:
            state = QpState(state)
        except ValueError:
            raise InvalidArgument(f"{state!r} is not a QP state") from None
        cur = qp.state
        if state not in (QpState.RESET, QpState.ERROR) and (cur, state) not in _MOVES:
            raise InvalidArgument(f"QP {qp.qp_num} is {cur.name}: QPs go RESET -> INIT -> RTR "
                                  f"-> RTS, and to RESET or ERROR from any state; not to "
                                  f"{state.name}")
        allowed = _REQUIRED[state] + _OPTIONAL[state]
        unknown = sorted(set(attrs) - set(allowed))
        if unknown:
            raise InvalidArgument(f"QP {qp.qp_num} to {state.name}: {', '.join(unknown)} "
                                  f"{'is' if len(unknown) == 1 else 'are'} not taken there; "
                                  f"it takes {', '.join(allowed) or 'no attribute'}")
        missing = [name for name in _REQUIRED[state] if attrs.get(name) is None]
        if missing:
            raise InvalidArgument(f"QP {qp.qp_num} to {state.name} needs {', '.join(missing)}")
        given = {k: v for k, v in attrs.items() if v is not None}
        for name, v in given.items():
            if name in _REFUSED:
                bound, why = _REFUSED[name]
                _uint(name, v, bound)
                raise NotPermitted(f"QP {qp.qp_num}: {name} {v}: {why}")
        if given.get("dynamic_mpr", False) is not False:
            raise NotPermitted(f"QP {qp.qp_num}: dynamic_mpr {given['dynamic_mpr']!r}: the "
                               "NIC's receive window is fixed when it is built")
        cfg = self._next_config(qp, state, given)
        ev, cc = qp._ev, qp._cc                # the QP's profiles once it has moved
        apply_cc = False
        if state is QpState.INIT:
            ev, cc = given.get("ev_profile_id"), given.get("cc_profile_id")
            if ev is not None:
                self._check_ev_profile(qp, _uint("ev_profile_id", ev, _U64))
            if cc is not None and self._info.get("cc_profiles", 1) > 1:
                # the NIC keeps the profiles a QP names: the QP's own, none shared
                number = self._controller().cc_profile_number(_uint("cc_profile_id", cc, _U64))
                cfg = replace(cfg, cc_profile=number)
            elif cc is not None:
                apply_cc = self._check_cc_profile(qp, _uint("cc_profile_id", cc, _U64))
        elif state is QpState.RESET:
            ev = cc = None
        route = given.get("route")
        if route is not None:
            if not isinstance(route, UsidTemplate):
                raise InvalidArgument(f"route is the UsidTemplate of the QP's template, not "
                                      f"{route!r}")
            if qp._ev is None:
                raise InvalidArgument(f"QP {qp.qp_num}: route is what an SRV6 EV profile is "
                                      "loaded against, and the QP was given none at INIT "
                                      "(ev_profile_id)")
        # the driver's own checks, before the controller writes anything
        self._run(_until_first_write(driver.configure_qp(qp.qp_num, cfg)))
        if apply_cc:
            self._controller().apply_cc_profile(cc)
        if state is QpState.RTR and qp._ev is not None:
            # loaded before the QP can send: it sprays only on what its table holds
            self._controller().bind_ev_profile(qp._ev, qp.qp_num, template=route,
                                               mode=cfg.mode)
        try:
            self._run(driver.configure_qp(qp.qp_num, cfg))
        except IoError:
            qp._cfg = replace(qp._cfg, state=QpState.ERROR)
            if state is QpState.INIT:          # its CC profile is applied: it holds it
                qp._ev, qp._cc = ev, cc
            raise
        loaded = qp._ev if state is QpState.RESET else None
        qp._cfg, qp._ev, qp._cc = cfg, ev, cc
        if loaded is not None:
            self._unload(qp.qp_num, loaded)

    def _check_ev_profile(self, qp: Qp, pid: int) -> None:
        info = self._controller().query_ev_profile(pid)
        if info.state is not ProfileState.ONLINE:
            raise InvalidArgument(f"QP {qp.qp_num}: ev_profile_id {pid}: EV profile {pid} is "
                                  f"{info.state.name}; a QP takes an ONLINE one, which is "
                                  "loaded into its EV table at RTR")

    def _check_cc_profile(self, qp: Qp, pid: int) -> bool:
        """Whether CC profile ``pid`` is to be applied for ``qp``; refuses what the NIC's one
        set of congestion registers cannot take now."""
        ctl = self._controller()
        info = ctl.query_cc_profile(pid)
        applied = ctl.applied_cc_profile()
        users = sorted(n for n, q in self._qps.items()
                       if q is not qp and applied is not None and q._cc == applied)
        if applied != pid and users:
            who = f"QP{'s' if len(users) > 1 else ''} {', '.join(map(str, users))}"
            raise Busy(f"QP {qp.qp_num}: cc_profile_id {pid}: the NIC has one set of "
                       f"congestion registers, which every QP's window follows, and {who} of "
                       f"this context follow{'' if len(users) > 1 else 's'} CC profile "
                       f"{applied} there: busy, not beyond the NIC; another profile can take "
                       f"them once {who} {'are' if len(users) > 1 else 'is'} moved to RESET")
        if info.state is not ProfileState.ONLINE:
            raise InvalidArgument(f"QP {qp.qp_num}: cc_profile_id {pid}: CC profile {pid} is "
                                  f"{info.state.name}; a QP takes an ONLINE one, which is "
                                  "applied to the NIC's congestion registers")
        return applied != pid

    def _unload(self, qp_num: int, pid: int) -> None:
        """Empties QP ``qp_num``'s EV table if it holds EV profile ``pid``, as RTR loaded it."""
        ctl = self._controller()
        binding = ctl.binding(qp_num)
        if binding is not None and binding.profile_id == pid:
            ctl.unbind_ev_profile(qp_num)

    def _next_config(self, qp: Qp, state: QpState, given: dict) -> driver.QpConfig:
        if state is QpState.RESET:
            return _blank()
        cfg = replace(qp.config, state=state)
        if state is QpState.RTR:
            mode = given.get("mode", cfg.mode)
            if not isinstance(mode, SrMode):
                raise InvalidArgument(f"mode is an SrMode ({', '.join(m.name for m in SrMode)}), "
                                      f"not {mode!r}")
            if "dst_mac" not in given:
                self._check_next_hops(qp)
            for name in ("dest_qp", "rq_psn"):
                _uint(name, given[name], _U24)
            # the region set_region gave stays unless RTR gives its fields
            cfg = replace(cfg, dqp=given["dest_qp"], dst_ip=given["dst_ip"],
                          dst_mac=given.get("dst_mac", 0), rx_psn=given["rq_psn"],
                          rx_msn=given.get("rq_msn", 0), mtu=given.get("path_mtu", cfg.mtu),
                          mode=mode, template=given.get("template", 0),
                          rkey=given.get("rkey", cfg.rkey), mr_va=given.get("mr_va", cfg.mr_va),
                          mr_length=given.get("mr_length", cfg.mr_length))
        elif state is QpState.RTS:
            _uint("sq_psn", given["sq_psn"], _U24)
            cfg = replace(cfg, next_psn=given["sq_psn"], msn=given.get("sq_msn", 0))
        # the rest (addresses, MTU, template, widths) configure_qp checks before its first
        # write, which run_on_nic reports as InvalidArgument
        return cfg

    def _check_next_hops(self, qp: Qp) -> None:
        planes = self._info["planes"]
        hops = [self._run(read(f"net.next_hop_p{p}")) for p in range(planes)]
        bare = [p for p, hop in enumerate(hops) if not hop]
        if bare:
            raise InvalidArgument(f"QP {qp.qp_num} to RTR needs dst_mac: plane "
                                  f"{bare[0]} has no next hop (net.next_hop_p{bare[0]} is 0), "
                                  "so its frames go to the QP's dst_mac")

    @shared
    def set_region(self, qp: Qp, *, va: int, length: int, rkey: int) -> Region:
        """Gives ``qp`` its memory region: ``length`` bytes from ``va``, which its peer writes
        into with R_Key ``rkey``; written to the NIC with the QP's context, in its state.

        The NIC holds one region a QP (qp.mr_va, qp.mr_length, qp.rkey), in the QP's
        context: a QP that has one is TooBig (a move to RESET clears it), and one past INIT
        is InvalidArgument (writing the context of a QP that receives starts its receive
        side again). RTR keeps the region unless it is given ``rkey``, ``mr_va`` or
        ``mr_length``, each of which takes the place of its value."""
        self._own_qp(qp)
        _uint("rkey", rkey, _U32)
        _uint("va", va, _U64)
        if not isinstance(length, int) or isinstance(length, bool) or not 1 <= length < _U64:
            raise InvalidArgument(f"length is 1 .. {_U64 - 1} bytes, not {length!r}")
        if va + length > _U64:
            raise InvalidArgument(f"{length} bytes at {va:#x} run past the end of the 64-bit "
                                  "address space")
        if qp.state not in (QpState.RESET, QpState.INIT):
            raise InvalidArgument(f"QP {qp.qp_num} is {qp.state.name}: its region is given in "
                                  "RESET or INIT, or with RTR (rkey, mr_va, mr_length); "
                                  "writing the context of a QP that receives starts its "
                                  "receive side again")
        if qp.region is not None:
            raise TooBig(f"QP {qp.qp_num} has its region already ({qp.region}): the NIC holds "
                         "one a QP (qp.rkey, qp.mr_va, qp.mr_length); a move to RESET clears "
                         "it")
        cfg = replace(qp.config, rkey=rkey, mr_va=va, mr_length=length)
        try:
            self._run(driver.configure_qp(qp.qp_num, cfg))
        except IoError:
            qp._cfg = replace(qp._cfg, state=QpState.ERROR)
            raise
        qp._cfg = cfg
        return qp.region

    # -- work requests and completions -----------------------------------------------------

    @shared
    def post_write(self, qp: Qp, wr_id: int, local_addr: int, length: int, remote_addr: int,
                   rkey: int, imm: int | None = None) -> None:
        """Posts an RDMA WRITE (with ``imm``: WRITE_WITH_IMM) of ``length`` bytes at
        ``local_addr`` to ``remote_addr`` in the peer's region of R_Key ``rkey``; returns once
        the NIC has taken it. Its completion comes to the QP's send CQ."""
        self._own_qp(qp)
        if qp.state is not QpState.RTS:
            raise InvalidArgument(f"QP {qp.qp_num} is {qp.state.name}: a QP sends in RTS only")
        _uint("wr_id", wr_id, 1 << 16)
        if not isinstance(length, int) or isinstance(length, bool) or length < 0:
            raise InvalidArgument(f"length is a number of bytes, not {length!r}")
        if length == 0:
            raise NotPermitted("a write of 0 bytes: the NIC completes one with ZERO_LENGTH")
        if length > MAX_MESSAGE:
            raise InvalidArgument(f"length {length} is above max_msg_sz, 2^31 bytes")
        self._run(driver.post_write(qp.qp_num, wr_id, local_addr, remote_addr, rkey, length,
                                    imm))
        self._posted[qp.qp_num, wr_id] = length

    @shared
    def poll_cq(self, cq: Cq, num_entries: int) -> list[WorkCompletion]:
        """Up to ``num_entries`` work completions, oldest first (none waiting: an empty list).

        Raises IoError, and takes nothing, if completions were lost since the last poll
        because the queue was full (cq.overflows); the next poll goes on from there.
        """
        self._own_cq(cq, "cq")
        if not isinstance(num_entries, int) or isinstance(num_entries, bool) or num_entries < 0:
            raise InvalidArgument(f"num_entries is a number of at least 0, not {num_entries!r}")
        lost = self._run(driver.cq_overflows())
        if lost != self._overflows:
            n, self._overflows = (lost - self._overflows) % _U32, lost
            raise IoError(f"{n} completion(s) lost: the completion queue was full "
                          "(cq.overflows); poll it more often")
        out: list[WorkCompletion] = []
        while len(out) < num_entries:
            batch = self._run(driver.poll_cq(num_entries - len(out)))
            if not batch:
                break
            for c in batch:
                wc = self._completion(c)
                if wc is not None:
                    out.append(wc)
        return out

    def _completion(self, c: driver.Completion) -> WorkCompletion | None:
        if not c.recv:
            return WorkCompletion(c.wr_id, c.status, WcOpcode.RDMA_WRITE, c.qp, None,
                                  self._posted.pop((c.qp, c.wr_id), None))
        # The register queue reports every message received whole; in verbs only a write
        # with immediate completes a receive, so one without is taken off and dropped.
        if not c.has_imm:
            return None
        return WorkCompletion(None, c.status, WcOpcode.RECV_RDMA_WITH_IMM, c.qp, c.imm, None)

    # -- the application's buffers ---------------------------------------------------------

    def read_memory(self, addr: int, n: int) -> bytes:
        """``n`` bytes of the memory behind the NIC at ``addr`` (the mem.* window)."""
        return self._run(driver.mem_read(addr, n))

    def write_memory(self, addr: int, data: bytes) -> None:
        """Writes ``data`` to the memory behind the NIC at ``addr`` (the mem.* window)."""
        self._run(driver.mem_write(addr, data))
