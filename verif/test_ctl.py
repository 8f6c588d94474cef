"""The controller API (mrcnic.ctl): the OCP profile state machines, EV events and every refusal
with its errno, against a word store that takes the EV commands and the EV event queue as the NIC
does; then a NIC of ``mrcnic
sim serve``, which loads a GENERATED SRv6 profile into a QP, changes an EV's state and takes a
CC profile, each read back from its registers."""

import errno
import time
from dataclasses import replace as _copy

import pytest

from mrcnic import driver, regmap, store
from mrcnic.ctl import (
    NSCC,
    UNPOPULATED,
    Controller,
    EpOpType,
    EpStatus,
    Ev,
    EvEvent,
    EvMode,
    EvOpEntry,
    EvProbe,
    Feature,
    NsccConfig,
    PortAdminState,
)
from mrcnic.ctl import ProfileState as S
from mrcnic.ctl_errors import (
    Busy,
    InvalidArgument,
    IoError,
    MrcError,
    NotFound,
    NotPermitted,
    NotSupported,
    TooBig,
    nic_failure,
)
from mrcnic.enums import EvState, LoadOp, QpState, SrMode
from mrcnic.ev_expand import (
    EvField,
    EvInvalid,
    EvProfile,
    EvProfileError,
    EvTooBig,
    FormatMode,
    FormatProfile,
    Rule,
)
from mrcnic.evmap import EvLayout, UsidTemplate, ev_split
from mrcnic.mgmt import Status, StatusError, Unreachable
from mrcnic.regclient import RegisterClient, RegisterError
from mrcnic.target import Device
from mrcnic.verif.fabric import FORMATS
from mrcnic.verif.test_regmap import FakeBus

BUILD = {"id": regmap.MRCNIC_ID, "planes": 2, "qps": 4, "evs": 16, "templates": 4,
         "max_usids": 14, "spines": 4, "spares": 2, "cc_profiles": 1}
BLOCK, BLOCK_BITS = FORMATS["F3216"]
LAYOUT = EvLayout(2, 4)
#: a route of one uSID, the spine's: a GENERATED profile can vary its plane and spine together
ONE_USID = UsidTemplate(BLOCK, (0x10,), spine_index=0, block_bits=BLOCK_BITS)
#: the locator, then that uSID with the plane (bit 12) and the spine (bits 1..0) from the EV
SRV6_FIELDS = (EvField(32, BLOCK), EvField(16, 0x10, 0, 7, 0x1003))
STEV_FIELDS = (EvField(16, 0, 0, 0xFFFF, 0xFFFF), EvField(16, 0, 0, 0xFFFF, 0xFFFF))


def _path(offset):
    return regmap.by_offset(offset).path


class FakeNic(FakeBus):
    """The register bank's words, with the EV commands taken as the NIC takes them: a table per
    QP whose entries ev.load writes (GOOD) or empties and ev.set_state changes; ev.state and
    ev.entry read the entry ev.qp and ev.index select (ASSUMED_BAD and 0 past the table's end),
    ev.size the table's length. And the EV event
    queue (evq.*) of ``evq_depth`` entries, which a test fills through :meth:`change` as the
    NIC's spray scheduler would."""

    def __init__(self, evq_depth=4, **build):
        super().__init__()
        for k, v in {**BUILD, **build}.items():
            self.words[regmap.by_name(f"global.{k}").offset] = v
        self.words[regmap.by_name("evq.depth").offset] = evq_depth
        self.tables: dict[int, list[list]] = {}
        self.events: list[int] = []
        self.overflows = 0
        # the endpoint requests (ep.*): a probe's answer comes after ``answer_after`` reads of
        # ep.answers (None: never, a dead path), ``answer_rtt`` cycles its round trip
        self.answer_after: int | None = 2
        self.answer_rtt = 1000
        self.probes: list[tuple[int, int]] = []       # (QP, entry) of each probe sent
        self.flying: list[list[int]] = []             # [reads to go, QP, entry]
        self.status_rounds = 0
        self.cc_sets: dict[int, dict] = {}            # CC profile -> what cc.write stored
        self.cc_chosen: dict[int, int] = {}           # QP -> the CC profile it follows
        self.paths: dict[tuple[int, int], dict] = {}  # (QP, entry) -> path.* of that entry

    def word(self, path):
        return self.words[regmap.by_name(path).offset]

    def change(self, qp, index, state, management=False, replaced=False, others=()):
        """The NIC changed an entry: queued if evq.mask subscribes its state, counted lost if
        the queue is full."""
        if not self.word("evq.mask") >> state.value & 1:
            return
        if len(self.events) == self.word("evq.depth"):
            self.overflows = (self.overflows + 1) & 0xFFFF_FFFF
            return
        fields = {"qp": qp, "index": index, "state": state.value, "management": management,
                  "replaced": replaced, "others": sum(1 << i for i in others)}
        self.events.append(regmap.pack(regmap.EVQ_ENTRY, fields))

    def answer(self, qp, entry, rtt):
        """A probe answer arrives: ep.answers and ep.rtt take it if it is for the entry
        ep.qp and ep.entry select now, as the NIC's do."""
        if (qp, entry) == (self.word("ep.qp"), self.word("ep.entry")):
            at = regmap.by_name("ep.answers").offset
            self.words[at] = (self.words[at] + 1) & 0xFFFF_FFFF
            self.words[regmap.by_name("ep.rtt").offset] = rtt & 0xFFFF

    def _ep_write(self, path, value):
        if path == "ep.probe" and value == 1:
            qp, entry = self.word("ep.qp"), self.word("ep.entry")
            if not self.word("net.port_up") >> entry % self.word("global.planes") & 1:
                self.words[regmap.by_name("ep.refused").offset] += 1
                return
            self.probes.append((qp, entry))
            if self.answer_after is not None:
                self.flying.append([self.answer_after, qp, entry])
        elif path == "ep.status" and value == 1 and self.word("global.control") & 1:
            self.status_rounds += 1
        elif path == "cc.write" and value != 0:
            self.cc_sets[value] = {n: self.word(f"cc.{n}") for n in regmap.CC_PARAMS}
        elif path == "qp.write":
            self.cc_chosen[value] = self.word("qp.cc_profile")

    def write(self, offset, value):
        super().write(offset, value)
        self._ep_write(_path(offset), value)
        qp, index = self.word("ev.qp"), self.word("ev.index")
        table = self.tables.setdefault(qp, [])
        if _path(offset) == "ev.load" and value == LoadOp.CLEAR.value:
            table.clear()
        elif _path(offset) == "ev.load" and value == LoadOp.ENTRY.value:
            table.extend([None] * (index + 1 - len(table)))
            table[index] = [self.word("ev.value"), EvState.GOOD.value]
        elif _path(offset) == "ev.set_state" and index < len(table):
            table[index][1] = value
        elif _path(offset) == "evq.pop" and value == 1 and self.events:
            self.events.pop(0)

    def read(self, offset):
        if _path(offset) == "ep.answers":
            for probe in list(self.flying):
                probe[0] -= 1
                if probe[0] == 0:
                    self.flying.remove(probe)
                    self.answer(probe[1], probe[2], self.answer_rtt)
        if _path(offset) == "ev.state":
            table = self.tables.get(self.word("ev.qp"), [])
            index = self.word("ev.index")
            return table[index][1] if index < len(table) else EvState.ASSUMED_BAD.value
        if _path(offset) == "ev.size":
            return len(self.tables.get(self.word("ev.qp"), []))
        if _path(offset) == "ev.entry":
            table = self.tables.get(self.word("ev.qp"), [])
            index = self.word("ev.index")
            return (table[index] or [0])[0] if index < len(table) else 0
        if _path(offset).startswith("path.") and regmap.by_offset(offset).access.value == "RO":
            rec = self.paths.get((self.word("path.qp"), self.word("path.entry")), {})
            return rec.get(_path(offset).removeprefix("path."), 0)
        if _path(offset) == "cc.view":
            return self.cc_chosen.get(self.word("rel.view_qp"), 0)
        if _path(offset) == "evq.count":
            return len(self.events)
        if _path(offset) == "evq.overflows":
            return self.overflows
        if _path(offset) == "evq.entry":
            word = (offset - regmap.by_name("evq.entry").offset) // 4
            return (self.events[0] if self.events else 0) >> (32 * word) & 0xFFFF_FFFF
        return super().read(offset)

    def register_writes(self):
        """The writes but those of the store, where every change of the profiles goes."""
        return [(o, v) for o, v in self.writes if _path(o) != "store.data"]

    def ev_writes(self):
        return [(_path(o), v) for o, v in self.writes if _path(o).startswith("ev.")]

    def mask_writes(self):
        return [v for o, v in self.writes if _path(o) == "evq.mask"]


def controller(**build):
    nic = FakeNic(**build)
    return nic, Controller(RegisterClient(nic))


def srv6_format(ctl, pid=1, widths=(32, 16)):
    ctl.modify_ev_fmt_profile(pid, state=S.OFFLINE, mode=FormatMode.SRV6, widths=widths)
    ctl.modify_ev_fmt_profile(pid, state=S.ONLINE)


def generated(ctl, pid=7, fmt=1, fields=SRV6_FIELDS, count=8, online=True):
    ctl.modify_ev_profile(pid, state=S.OFFLINE, mode=EvMode.GENERATED, fmt_id=fmt,
                          ev_count=count, fields=fields)
    if online:
        ctl.modify_ev_profile(pid, state=S.ONLINE, min_active=1, event_mask=())


def stev_explicit(ctl, evs, pid=5, fmt=2, online=True):
    """An EXPLICIT STEV profile holding ``evs``, (32-bit value, port) each."""
    ctl.modify_ev_fmt_profile(fmt, state=S.OFFLINE, mode=FormatMode.STEV, widths=(16, 16))
    ctl.modify_ev_fmt_profile(fmt, state=S.ONLINE)
    ctl.modify_ev_profile(pid, state=S.OFFLINE, mode=EvMode.EXPLICIT, fmt_id=fmt,
                          ev_count=len(evs), fields=STEV_FIELDS, min_active=0, event_mask=())
    ctl.replace_evs(pid, [EvOpEntry(UNPOPULATED, Ev(v.to_bytes(4, "big"), port),
                                    EvState.GOOD) for v, port in evs])
    if online:
        ctl.modify_ev_profile(pid, state=S.ONLINE)


def refused(cls, code, fn, *args, match=None, **kwargs):
    with pytest.raises(cls, match=match) as info:
        fn(*args, **kwargs)
    assert info.value.errno == code and isinstance(info.value, MrcError)
    return info.value


# -- the errors -----------------------------------------------------------------------------


def test_one_hierarchy_carries_the_headers_errnos():
    for cls, code in ((InvalidArgument, errno.EINVAL), (TooBig, errno.E2BIG),
                      (Busy, errno.EBUSY), (NotPermitted, errno.EPERM), (IoError, errno.EIO),
                      (NotFound, errno.ENOENT), (NotSupported, errno.ENOTSUP)):
        e = cls("why")
        assert isinstance(e, MrcError) and e.errno == code and str(e) == e.message == "why"
    assert TooBig("short", needed=9).needed == 9
    # the expansion rule's errors are the same classes
    with pytest.raises(InvalidArgument) as info:
        EvProfile(FormatProfile((8,)), (EvField(8, 0x100),))
    e = info.value
    assert isinstance(e, EvInvalid) and isinstance(e, EvProfileError) and isinstance(e, ValueError)
    assert e.errno == errno.EINVAL and e.rule is Rule.INIT_VAL
    assert issubclass(EvTooBig, TooBig) and issubclass(EvProfileError, MrcError)


def test_driver_failures_are_einval_before_a_write_and_eio_after():
    assert type(nic_failure(RegisterError("bad value"), written=False)) is InvalidArgument
    assert type(nic_failure(RegisterError("refused 1 access"), written=True)) is IoError
    assert type(nic_failure(Unreachable("no reply"), written=False)) is IoError
    assert type(nic_failure(StatusError(Status.DENIED, "pending"), written=True)) is IoError
    with pytest.raises(TypeError):
        nic_failure(KeyError("x"), written=False)


def test_a_window_that_is_not_an_mrcnic_or_does_not_answer_is_eio():
    nic = FakeNic(id=0x1234)
    refused(IoError, errno.EIO, Controller, RegisterClient(nic), match="not an mrcnic")

    class Silent:
        def read(self, offset):
            raise Unreachable("no reply from 192.0.2.1:19783")

    refused(IoError, errno.EIO, Controller, RegisterClient(Silent()), match="no reply")
    refused(InvalidArgument, errno.EINVAL, Controller, RegisterClient(FakeNic()), clock_hz=0)


# -- the device -----------------------------------------------------------------------------


def test_query_device_says_what_the_registers_say():
    nic, ctl = controller()
    a = ctl.query_device()
    assert a.protocol_versions == {1}
    assert (a.ev_max_fmt_profiles, a.ev_max_profiles) == (4, 4)          # a table per QP
    assert (a.ev_max_count, a.ev_free_count, a.ev_max_count_profile) == (64, 64, 16)
    assert (a.ev_count_align, a.ev_max_width, a.ev_op_max_entries) == (2, 256, 0)
    assert a.ev_fmt_modes == {FormatMode.STEV, FormatMode.SRV6}
    assert a.ev_modes == {EvMode.EXPLICIT, EvMode.GENERATED}
    assert (a.cc_max_profiles, a.cc_algorithms) == (1, (NSCC,))
    assert a.phy_port_mask == 0b110                                    # ports 1 and 2
    assert a.features == {Feature.EV_PROFILE_MODIFY_ONLINE, Feature.CC_PROFILE_MODIFY_ONLINE,
                          Feature.EV_EVENT, Feature.EP_OP_EV_PROBE}
    # the lost changes are counted exactly, but a change is 0 .. 65 of the header's events
    assert Feature.EV_EVENT_PRECISE_DROP_CNT not in a.features
    assert Feature.EV_EVENT not in controller(evq_depth=0)[1].query_device().features

    class Older(FakeNic):
        """A NIC built before the EV event queue: nothing answers at its registers."""
        status = Status.BAD_ADDRESS

        def read(self, offset):
            if _path(offset) == "evq.depth":
                raise StatusError(self.status, "READ at 0x9f0: nothing at the address")
            return super().read(offset)

    older = Controller(RegisterClient(Older()))
    assert Feature.EV_EVENT not in older.query_device().features
    refused(NotPermitted, errno.EPERM, older.create_ev_event_cq, 1, match="without an EV event")
    Older.status = Status.DENIED                        # any other refusal is the NIC failing
    refused(IoError, errno.EIO, Controller, RegisterClient(Older()))
    # read now, not remembered: another build says otherwise
    nic.words[regmap.by_name("global.evs").offset] = 32
    assert ctl.query_device().ev_max_count == 128
    one = controller(planes=1, max_usids=6, evs=8)[1].query_device()
    assert FormatMode.UDP in one.ev_fmt_modes and one.phy_port_mask == 0b10
    assert (one.ev_max_width, one.ev_count_align) == (128, 1)          # one carrier at most


def test_a_port_is_disabled_and_enabled_in_net_port_admin():
    nic, ctl = controller()
    admin = regmap.by_name("net.port_admin").offset
    assert ctl.query_port(1) is ctl.query_port(2) is PortAdminState.ENABLED
    ctl.modify_port(2, PortAdminState.DISABLED)
    assert nic.words[admin] == 0xFF & ~0b10                            # port 2 is plane 1
    assert (ctl.query_port(1), ctl.query_port(2)) == (PortAdminState.ENABLED,
                                                      PortAdminState.DISABLED)
    ctl.modify_port(2, PortAdminState.ENABLED)
    assert nic.words[admin] == 0xFF
    nic.words[regmap.by_name("net.port_up").offset] = 0b10              # plane 0's link down
    assert (ctl.port_up(1), ctl.port_up(2)) == (False, True)
    refused(InvalidArgument, errno.EINVAL, ctl.query_port, 3, match="ports 1 .. 2")
    refused(InvalidArgument, errno.EINVAL, ctl.query_port, 0)
    refused(InvalidArgument, errno.EINVAL, ctl.modify_port, 1, "off")


def test_what_the_nic_has_no_means_for_is_refused_with_the_reason():
    class NoEndpoint(FakeNic):
        """A NIC built before the endpoint requests: nothing answers at ep.*."""

        def read(self, offset):
            if _path(offset).startswith("ep."):
                raise StatusError(Status.BAD_ADDRESS, "nothing at the address")
            return super().read(offset)

    ctl = Controller(RegisterClient(NoEndpoint()))
    assert Feature.EP_OP_EV_PROBE not in ctl.query_device().features
    for op in EpOpType:
        refused(NotSupported, errno.ENOTSUP, ctl.ep_batch_send_wait, op, [], 2_000_000,
                match="built without endpoint requests")
    _, ctl = controller(evq_depth=0)
    refused(NotPermitted, errno.EPERM, ctl.create_ev_event_cq, 1, match="evq.depth 0")


# -- EV format profiles ---------------------------------------------------------------------


def test_a_format_profile_goes_round_its_state_machine():
    _, ctl = controller()
    assert ctl.query_ev_fmt_profile(3).state is S.INIT                  # every id starts INIT
    ctl.modify_ev_fmt_profile(3, state=S.OFFLINE, mode=FormatMode.SRV6)
    ctl.modify_ev_fmt_profile(3, widths=[32, 16, 16])                  # OFFLINE: may change
    ctl.modify_ev_fmt_profile(3, mode=FormatMode.STEV, widths=(16, 16))
    ctl.modify_ev_fmt_profile(3, state=S.ONLINE)
    info = ctl.query_ev_fmt_profile(3, max_fields=2)
    assert (info.state, info.mode, info.widths) == (S.ONLINE, FormatMode.STEV, (16, 16))
    ctl.modify_ev_fmt_profile(3, state=S.OFFLINE)
    ctl.modify_ev_fmt_profile(3, state=S.INIT)
    assert ctl.query_ev_fmt_profile(3) == ctl.query_ev_fmt_profile(4)  # cleared


@pytest.mark.parametrize("setup,kwargs,match", [
    ([], {"state": S.ONLINE}, "not to ONLINE"),
    ([], {"state": S.OFFLINE}, "mode must be set first"),
    ([], {"mode": FormatMode.SRV6}, "configured as it moves to OFFLINE"),
    ([{"state": S.OFFLINE, "mode": FormatMode.SRV6}], {"state": S.ONLINE},
     "widths must be set first"),
    ([{"state": S.OFFLINE, "mode": FormatMode.SRV6, "widths": (32,)}, {"state": S.ONLINE}],
     {"widths": (32, 16)}, "widths cannot be changed there"),
    ([{"state": S.OFFLINE, "mode": FormatMode.SRV6, "widths": (32,)}, {"state": S.ONLINE}],
     {"state": S.INIT}, "not to INIT"),
    ([{"state": S.OFFLINE, "mode": FormatMode.SRV6}], {"state": S.INIT, "widths": (8,)},
     "nothing can be set with it"),
    ([], {"state": 9}, "not a profile state"),
    ([], {"state": S.OFFLINE, "mode": "SRV6"}, "is a FormatMode"),
    ([], {"state": S.OFFLINE, "mode": FormatMode.SRV6, "widths": 32}, "sequence"),
])
def test_a_format_profile_refuses_what_its_state_does_not_allow(setup, kwargs, match):
    _, ctl = controller()
    for step in setup:
        ctl.modify_ev_fmt_profile(1, **step)
    before = ctl.query_ev_fmt_profile(1)
    refused(InvalidArgument, errno.EINVAL, ctl.modify_ev_fmt_profile, 1, match=match, **kwargs)
    assert ctl.query_ev_fmt_profile(1) == before                       # nothing changed


def test_format_fields_are_checked_by_the_expansion_rule():
    _, ctl = controller()
    e = refused(EvInvalid, errno.EINVAL, ctl.modify_ev_fmt_profile, 1, state=S.OFFLINE,
                mode=FormatMode.SRV6, widths=(32, 0))
    assert e.rule is Rule.FMT_WIDTH
    e = refused(EvTooBig, errno.E2BIG, ctl.modify_ev_fmt_profile, 1, state=S.OFFLINE,
                mode=FormatMode.STEV, widths=(32, 8))
    assert e.rule is Rule.FMT_MODE and isinstance(e, TooBig)
    ctl.modify_ev_fmt_profile(1, state=S.OFFLINE, mode=FormatMode.SRV6, widths=(32, 8))
    refused(EvTooBig, errno.E2BIG, ctl.modify_ev_fmt_profile, 1, mode=FormatMode.STEV)


def test_format_limits_come_from_the_device():
    _, ctl = controller()
    refused(NotPermitted, errno.EPERM, ctl.modify_ev_fmt_profile, 1, state=S.OFFLINE,
            mode=FormatMode.UDP, match="2 planes")
    for pid in range(4):                                               # ev_max_fmt_profiles
        ctl.modify_ev_fmt_profile(pid, state=S.OFFLINE, mode=FormatMode.SRV6)
    refused(TooBig, errno.E2BIG, ctl.modify_ev_fmt_profile, 9, state=S.OFFLINE,
            mode=FormatMode.SRV6, match="takes 4")
    ctl.modify_ev_fmt_profile(0, widths=(32, 16, 16))
    e = refused(TooBig, errno.E2BIG, ctl.query_ev_fmt_profile, 0, max_fields=2)
    assert e.needed == 3
    refused(InvalidArgument, errno.EINVAL, ctl.modify_ev_fmt_profile, -1, state=S.OFFLINE)
    _, one = controller(planes=1)
    one.modify_ev_fmt_profile(1, state=S.OFFLINE, mode=FormatMode.UDP, widths=(16,))


def test_a_format_an_online_ev_profile_uses_is_busy():
    _, ctl = controller()
    srv6_format(ctl)
    generated(ctl)
    refused(Busy, errno.EBUSY, ctl.modify_ev_fmt_profile, 1, state=S.OFFLINE,
            match="ONLINE EV profile")
    ctl.modify_ev_profile(7, state=S.OFFLINE)
    ctl.modify_ev_fmt_profile(1, state=S.OFFLINE)
    ctl.modify_ev_fmt_profile(1, state=S.INIT)
    refused(InvalidArgument, errno.EINVAL, ctl.modify_ev_profile, 7, state=S.ONLINE,
            match="format profile 1 is INIT")


# -- EV profiles ----------------------------------------------------------------------------


def test_an_ev_profile_goes_round_its_state_machine():
    _, ctl = controller()
    srv6_format(ctl)
    generated(ctl, online=False)
    info = ctl.query_ev_profile(7, max_fields=2)
    assert (info.state, info.mode, info.fmt_id, info.ev_count, info.fields) == (
        S.OFFLINE, EvMode.GENERATED, 1, 8, SRV6_FIELDS)
    ctl.modify_ev_profile(7, min_active=0, event_mask=[], ev_count=4)  # OFFLINE: may change
    ctl.modify_ev_profile(7, state=S.ONLINE, ev_count=8)
    assert ctl.query_ev_profile(7).state is S.ONLINE
    # ONLINE: the fields may change (Feature.EV_PROFILE_MODIFY_ONLINE), and the array with them
    ctl.modify_ev_profile(7, fields=(EvField(32, BLOCK), EvField(16, 0x20, 0, 7, 0x1003)))
    assert ctl.query_ev_array(7)[0].expansion == BLOCK.to_bytes(4, "big") + b"\x00\x20"
    ctl.modify_ev_profile(7, state=S.OFFLINE)
    ctl.modify_ev_profile(7, state=S.INIT)
    assert ctl.query_ev_profile(7).state is S.INIT and ctl.query_ev_profile(7).fields is None


@pytest.mark.parametrize("first,kwargs,cls,match", [
    ({}, {"state": S.OFFLINE, "mode": EvMode.GENERATED, "fmt_id": 1, "ev_count": 8},
     InvalidArgument, "fields must be set first"),
    ({}, {"state": S.OFFLINE, "mode": EvMode.GENERATED, "fields": SRV6_FIELDS},
     InvalidArgument, "fmt_id, ev_count must be set first"),
    ({}, {"state": S.OFFLINE, "mode": EvMode.AUTO}, NotPermitted, "does not choose EVs"),
    ({}, {"state": S.OFFLINE, "fmt_id": 2}, InvalidArgument, "format profile 2 is INIT"),
    ({}, {"state": S.OFFLINE, "ev_count": 18}, TooBig, "hold 16"),
    ({}, {"state": S.OFFLINE, "ev_count": 3}, InvalidArgument, "multiple of 2"),
    ({}, {"state": S.OFFLINE, "ev_count": 0}, InvalidArgument, "1 or more"),
    ({}, {"state": S.OFFLINE, "min_active": 2}, NotPermitted, "last GOOD EV"),
    ({}, {"state": S.OFFLINE, "event_mask": {EvState.DENIED}}, InvalidArgument,
     "only GOOD and ASSUMED_BAD"),
    ({}, {"state": S.OFFLINE, "event_mask": {EvState.SKIP}}, InvalidArgument,
     "only GOOD and ASSUMED_BAD"),
    ({}, {"state": S.OFFLINE, "event_mask": 3}, InvalidArgument, "set of EvStates"),
    ({}, {"state": S.OFFLINE, "fields": (1, 2)}, InvalidArgument, "are EvFields"),
    ({}, {"mode": EvMode.GENERATED}, InvalidArgument, "configured as it moves to OFFLINE"),
    (None, {"state": S.ONLINE}, InvalidArgument, "min_active, event_mask must be set first"),
    ("online", {"ev_count": 4}, InvalidArgument, "ev_count cannot be changed there"),
    ("online", {"state": S.INIT}, InvalidArgument, "not to INIT"),
    ("online", {"mode": EvMode.EXPLICIT}, InvalidArgument, "mode cannot be changed there"),
])
def test_an_ev_profile_refuses_what_its_state_does_not_allow(first, kwargs, cls, match):
    _, ctl = controller()
    srv6_format(ctl)
    if first is None or first == "online":
        generated(ctl, online=first == "online")
    before = ctl.query_ev_profile(7)
    code = {InvalidArgument: errno.EINVAL, NotPermitted: errno.EPERM, TooBig: errno.E2BIG}[cls]
    refused(cls, code, ctl.modify_ev_profile, 7, match=match, **kwargs)
    assert ctl.query_ev_profile(7) == before                           # nothing changed


def test_ev_fields_are_checked_by_the_expansion_rule():
    _, ctl = controller()
    srv6_format(ctl)
    bad = (EvField(32, BLOCK), EvField(16, 0x10, 0, 8, 0x1003))       # 8 needs 4 mask bits
    e = refused(EvInvalid, errno.EINVAL, generated, ctl, fields=bad)
    assert e.rule is Rule.MAX_VAL
    e = refused(EvTooBig, errno.E2BIG, generated, ctl, fields=SRV6_FIELDS + (EvField(8),))
    assert e.rule is Rule.FIELD_COUNT
    e = refused(EvInvalid, errno.EINVAL, generated, ctl, count=10)     # the fields make 8
    assert e.rule is Rule.EV_COUNT
    generated(ctl, online=False)
    e = refused(TooBig, errno.E2BIG, ctl.query_ev_profile, 7, max_fields=1)
    assert e.needed == 2


def test_an_ev_profile_needs_its_format_online_and_its_evs_set():
    _, ctl = controller()
    ctl.modify_ev_fmt_profile(1, state=S.OFFLINE, mode=FormatMode.SRV6)
    generated(ctl, online=False)             # the format has no widths yet: no array yet
    refused(InvalidArgument, errno.EINVAL, ctl.modify_ev_profile, 7, state=S.ONLINE,
            min_active=1, event_mask=(), match="format profile 1 is OFFLINE")
    ctl.modify_ev_fmt_profile(1, widths=(32, 16), state=S.ONLINE)
    ctl.modify_ev_profile(7, state=S.ONLINE, min_active=1, event_mask=())
    assert len(ctl.query_ev_array(7)) == 8
    for pid in range(3):
        generated(ctl, pid=10 + pid, online=False)
    refused(TooBig, errno.E2BIG, generated, ctl, pid=20, match="takes 4 EV profile")


def test_a_generated_profile_is_every_combination_in_order():
    _, ctl = controller()
    srv6_format(ctl)
    generated(ctl)
    array = ctl.query_ev_array(7)
    assert [e.ev.value for e in array] == [bytes([v << 5]) for v in range(8)]
    assert all(e.ev.port == 0 for e in array)        # the NIC gives the port when it loads it
    assert [e.expansion for e in array] == [
        BLOCK.to_bytes(4, "big") + (0x10 | (v >> 2) << 12 | v & 3).to_bytes(2, "big")
        for v in range(8)]
    assert {e.state for e in array} == {EvState.GOOD}
    e = refused(TooBig, errno.E2BIG, ctl.query_ev_array, 7, max_entries=7)
    assert e.needed == 8


# -- EXPLICIT arrays and EV operations ------------------------------------------------------


def test_an_explicit_array_is_filled_by_replace_ev_before_it_goes_online():
    _, ctl = controller()
    ctl.modify_ev_fmt_profile(2, state=S.OFFLINE, mode=FormatMode.STEV, widths=(16, 16))
    ctl.modify_ev_fmt_profile(2, state=S.ONLINE)
    ctl.modify_ev_profile(5, state=S.OFFLINE, mode=EvMode.EXPLICIT, fmt_id=2, ev_count=4,
                          fields=STEV_FIELDS, min_active=1, event_mask=())
    array = ctl.query_ev_array(5)
    assert [(e.ev, e.state, e.expansion) for e in array] == [(UNPOPULATED, None, None)] * 4
    ev = Ev(bytes.fromhex("12340000"), 1)
    ctl.replace_evs(5, [EvOpEntry(UNPOPULATED, ev, EvState.GOOD)])
    refused(InvalidArgument, errno.EINVAL, ctl.modify_ev_profile, 5, state=S.ONLINE,
            match="entry 1 \\(of 3\\) is unpopulated")
    ctl.replace_evs(5, [EvOpEntry(UNPOPULATED, Ev(b"\x12\x34", 2), EvState.DENIED,
                                  all_copies=True)])
    ctl.modify_ev_profile(5, state=S.ONLINE)
    array = ctl.query_ev_array(5)
    assert [e.ev for e in array] == [ev] + [Ev(bytes.fromhex("12340000"), 2)] * 3
    assert [e.state for e in array] == [EvState.GOOD] + [EvState.DENIED] * 3
    assert array[0].expansion == bytes.fromhex("12340000")
    # a value is named without the zero bytes that end it; a port 0 names any port
    got = ctl.query_ev_states(5, [Ev(b"\x12\x34"), Ev(b"\x12\x34\x00", 2)])
    assert [e.state for e in got] == [EvState.GOOD, EvState.DENIED]


def test_replace_ev_refusals():
    _, ctl = controller()
    stev_explicit(ctl, [(0x0000_0000, 1), (0x0000_0100, 2)], online=False)
    one = Ev(bytes(4), 1)
    for entry, cls, match in (
            (EvOpEntry(one, None, EvState.GOOD), InvalidArgument, "needs ev_new"),
            (EvOpEntry(one, Ev(b"\x01", 1), None), InvalidArgument, "GOOD, ASSUMED_BAD or"),
            (EvOpEntry(one, Ev(b"\x01", 1), EvState.SKIP), InvalidArgument, "not .*SKIP"),
            (EvOpEntry(one, Ev(b"\x01", 3), EvState.GOOD), InvalidArgument, "ports 1 .. 2"),
            (EvOpEntry(one, Ev(b"\x01"), EvState.GOOD), InvalidArgument, "port 0 does not"),
            (EvOpEntry(one, Ev(bytes(4) + b"\x01", 1), EvState.GOOD), EvInvalid, "after the 32"),
            (EvOpEntry(Ev(b"\x09", 1), Ev(b"\x01", 1), EvState.GOOD), NotFound, "holds no EV"),
            (EvOpEntry(UNPOPULATED, Ev(b"\x01", 1), EvState.GOOD), NotFound, "holds no EV"),
            (one, InvalidArgument, "is an EvOpEntry")):
        refused(cls, cls.errno, ctl.replace_evs, 5, [entry], match=match)
    assert [e.ev.value for e in ctl.query_ev_array(5)] == [bytes(4), bytes.fromhex("00000100")]
    srv6_format(ctl)
    generated(ctl)
    refused(InvalidArgument, errno.EINVAL, ctl.replace_evs, 7,
            [EvOpEntry(Ev(b"\x00"), Ev(b"\x20", 1), EvState.GOOD)], match="only an EXPLICIT")
    refused(InvalidArgument, errno.EINVAL, ctl.replace_evs, 8, [], match="is INIT")


def test_a_batch_stops_at_the_first_failing_entry_and_says_what_was_done():
    _, ctl = controller()
    stev_explicit(ctl, [(0x0000_0000, 1), (0x0000_0100, 2)])
    batch = [EvOpEntry(Ev(bytes(4), 1), state=EvState.DENIED),
             EvOpEntry(Ev(b"\x77", 1), state=EvState.DENIED),
             EvOpEntry(Ev(bytes.fromhex("00000100"), 2), state=EvState.DENIED)]
    e = refused(NotFound, errno.ENOENT, ctl.modify_ev_states, 5, batch)
    assert e.entry == 1 and e.done == (batch[0],)
    states = [x.state for x in ctl.query_ev_array(5)]
    assert states == [EvState.DENIED, EvState.GOOD]                    # the first took effect
    assert ctl.modify_ev_states(5, batch[2:]) == batch[2:]
    e = refused(InvalidArgument, errno.EINVAL, ctl.modify_ev_states, 5,
                [EvOpEntry(Ev(bytes(4), 1), state=EvState.SKIP)])
    assert e.entry == 0 and e.done == ()
    refused(InvalidArgument, errno.EINVAL, ctl.query_ev_states, 5, [Ev(bytes(4), 1)], qp=0,
            match="not loaded into QP 0")


def test_a_refused_explicit_ev_under_new_fields_leaves_the_profile_as_it_was():
    _, ctl = controller()
    stev_explicit(ctl, [(0x1234_0000, 1), (0x0000_0100, 2)], online=False)
    narrower = (EvField(16, 0, 0, 0xFF, 0xFF), EvField(16, 0, 0, 0xFF, 0xFF))   # 16 EV bits
    before = ctl.query_ev_array(5)
    e = refused(EvInvalid, errno.EINVAL, ctl.modify_ev_profile, 5, fields=narrower)
    assert e.rule is Rule.EV_UNUSED
    assert ctl.query_ev_array(5) == before


# -- loading profiles into QPs ----------------------------------------------------------------


def test_a_generated_srv6_profile_loads_as_the_routes_it_names():
    nic, ctl = controller()
    srv6_format(ctl)
    generated(ctl)
    ctl.modify_ev_states(7, [EvOpEntry(Ev(b"\xa0"), state=EvState.DENIED)])   # before loading
    b = ctl.bind_ev_profile(7, 2, template=ONE_USID)
    assert (b.profile_id, b.qp, b.mode) == (7, 2, SrMode.USID)
    array = ctl.query_ev_array(7)
    for e, nic_ev, entry in zip(array, b.nic_evs, b.entries, strict=True):
        # what the NIC sends on that EV is the expansion, on the port the EV now says
        route = ONE_USID.route(nic_ev, LAYOUT)
        assert route.dst == int.from_bytes(e.expansion.ljust(16, b"\0"), "big")
        assert route.segments == ()
        assert e.ev.port == LAYOUT.plane(nic_ev) + 1 == entry % 2 + 1
        assert nic.tables[2][entry][0] == nic_ev                       # loaded where it says
    assert ctl.binding(2) == b and ctl.binding(1) is None
    assert [v for p, v in nic.ev_writes() if p == "ev.load"] == [LoadOp.CLEAR.value] + [0] * 8
    # the state set before loading went with it, and queries now read the NIC
    denied = b.entries[5]
    assert nic.tables[2][denied][1] == EvState.DENIED.value
    nic.tables[2][b.entries[6]][1] = EvState.ASSUMED_BAD.value         # the NIC marks one
    assert [e.state for e in ctl.query_ev_array(7)][5:7] == [EvState.DENIED, EvState.ASSUMED_BAD]
    assert ctl.query_device().ev_free_count == 3 * 16


def test_ev_states_reach_every_qp_the_profile_is_loaded_into():
    nic, ctl = controller()
    srv6_format(ctl)
    generated(ctl)
    b2 = ctl.bind_ev_profile(7, 2, template=ONE_USID)
    b3 = ctl.bind_ev_profile(7, 3, template=ONE_USID)
    ev = ctl.query_ev_array(7, qp=3)[3].ev
    ctl.modify_ev_states(7, [EvOpEntry(ev, state=EvState.DENIED)])
    assert nic.tables[2][b2.entries[3]][1] == nic.tables[3][b3.entries[3]][1] == 3
    refused(InvalidArgument, errno.EINVAL, ctl.query_ev_states, 7, [ev], match="name one")
    nic.tables[3][b3.entries[3]][1] = EvState.GOOD.value
    assert ctl.query_ev_states(7, [ev], qp=3)[0].state is EvState.GOOD
    assert ctl.query_ev_states(7, [ev], qp=2)[0].state is EvState.DENIED
    # the selectors a look moves are put back
    nic.words[regmap.by_name("ev.qp").offset] = 1
    ctl.query_ev_states(7, [ev], qp=3)
    assert nic.word("ev.qp") == 1


def test_a_loaded_profile_is_busy_until_its_qps_are_emptied():
    nic, ctl = controller()
    srv6_format(ctl)
    generated(ctl)
    ctl.bind_ev_profile(7, 2, template=ONE_USID)
    refused(Busy, errno.EBUSY, ctl.modify_ev_profile, 7, state=S.OFFLINE, match="QP\\(s\\) 2")
    refused(Busy, errno.EBUSY, ctl.modify_ev_profile, 7, fields=SRV6_FIELDS)
    ctl.modify_ev_profile(7, event_mask=())                            # nothing to load
    ctl.unbind_ev_profile(2)
    assert nic.tables[2] == [] and ctl.binding(2) is None
    assert {e.ev.port for e in ctl.query_ev_array(7)} == {0}
    ctl.modify_ev_profile(7, state=S.OFFLINE)
    refused(InvalidArgument, errno.EINVAL, ctl.bind_ev_profile, 7, 2, template=ONE_USID,
            match="only an ONLINE profile")
    refused(InvalidArgument, errno.EINVAL, ctl.unbind_ev_profile, 4, match="has 4")


@pytest.mark.parametrize("template,mode,cls,match", [
    (UsidTemplate(BLOCK, (0x20, 0x10), 1, BLOCK_BITS), None, NotPermitted,
     "EV 0 \\(0x00 port 0\\): it is fcbb:bb00:10:: without an SRH, a destination the "
     "template's route takes on no plane and spine"),
    (ONE_USID, SrMode.PLAIN, NotPermitted, "sends no SRv6 header"),
    (ONE_USID, SrMode.USID_SRH, NotPermitted,
     "EV 0 .* without an SRH, but on plane 0 spine 0 the NIC sends fcbb:bb00:10:: SRH"),
    (None, None, InvalidArgument, "give the UsidTemplate"),
    (UsidTemplate(BLOCK, (0x10,), 0, BLOCK_BITS, plane_shift=8), None, InvalidArgument,
     "no template this NIC holds"),
    (UsidTemplate(0xFCBB_0000_0001, (0x10,), 0, 48), None, InvalidArgument,
     "no template this NIC holds"),
    (ONE_USID, 1, InvalidArgument, "is an SrMode"),
])
def test_an_srv6_profile_the_nic_cannot_send_is_refused_before_any_write(template, mode, cls,
                                                                         match):
    nic, ctl = controller()
    srv6_format(ctl)
    generated(ctl)
    refused(cls, cls.errno, ctl.bind_ev_profile, 7, 1, template=template, mode=mode,
            match=match)
    assert nic.ev_writes() == [] and ctl.binding(1) is None


#: seven uSIDs: six in the first carrier (F3216), the last in a second one, which the SRH holds
SEVEN = UsidTemplate(BLOCK, (0x21, 0x10, 0x22, 0x23, 0x24, 0x25, 0x31), 1, BLOCK_BITS)


def seven_usid_profile(ctl, widths, evs, pid=9):
    """An EXPLICIT SRV6 profile for routes of :data:`SEVEN`: every uSID takes the plane from
    the EV (the NIC puts it in each), the spine's uSID the spine too; ``evs`` are (plane,
    spine), each on its plane's port."""
    usids = [EvField(16, u, 0, 1, 0x1000) for u in SEVEN.usids]
    usids[1] = EvField(16, 0x10, 0, 7, 0x1003)
    fields = (EvField(32, BLOCK), *usids[:6])
    if len(widths) > 7:
        fields += (EvField(32, BLOCK), usids[6])
    srv6_format(ctl, widths=widths)
    ctl.modify_ev_profile(pid, state=S.OFFLINE, mode=EvMode.EXPLICIT, fmt_id=1,
                          ev_count=len(evs), fields=fields, min_active=1, event_mask=())
    for plane, spine in evs:
        bits = [plane, plane, spine >> 1, spine & 1] + [plane] * (len(fields) - 4)
        value = int("".join(map(str, bits)), 2) << (16 - len(bits))
        ctl.replace_evs(pid, [EvOpEntry(UNPOPULATED, Ev(value.to_bytes(2, "big"), plane + 1),
                                        EvState.GOOD)])
    ctl.modify_ev_profile(pid, state=S.ONLINE)


def test_a_route_with_an_srh_segment_loads_when_the_nic_sends_that_srh():
    nic, ctl = controller()
    seven_usid_profile(ctl, (32,) + (16,) * 6 + (32, 16), [(0, 1), (1, 2)])
    b = ctl.bind_ev_profile(9, 0, template=SEVEN)
    for e, nic_ev in zip(ctl.query_ev_array(9), b.nic_evs, strict=True):
        # the destination, then the SRH's other segment: the route's carriers in order
        route = SEVEN.route(nic_ev, LAYOUT)
        assert int.from_bytes(e.expansion[:16], "big") == route.dst
        assert route.segments[0] == int.from_bytes(e.expansion[16:].ljust(16, b"\0"), "big")
        assert route.segments[1:] == (route.dst,) and e.ev.port == LAYOUT.plane(nic_ev) + 1
    assert b.nic_evs == (LAYOUT.make(0, 1), LAYOUT.make(1, 2))
    # without the SRH's segment the profile names a route the NIC cannot send on its own
    _, ctl = controller()
    seven_usid_profile(ctl, (32,) + (16,) * 6, [(0, 1), (1, 2)])
    refused(NotPermitted, errno.EPERM, ctl.bind_ev_profile, 9, 0, template=SEVEN,
            match="EV 0 .* without an SRH, but on plane 0 spine 1 the NIC sends .* SRH")


def test_an_stev_profile_is_the_udp_source_port_and_the_flow_label():
    nic, ctl = controller()
    evs = [(LAYOUT.make(p, s, 0x5A5A_0000 | s << 4), p + 1) for s in range(2) for p in range(2)]
    stev_explicit(ctl, evs)
    b = ctl.bind_ev_profile(5, 0)
    assert b.mode is SrMode.PLAIN and b.template is None
    for (value, port), nic_ev, entry in zip(evs, b.nic_evs, b.entries, strict=True):
        # the NIC sends an EV's high half as the UDP source port, its low half in the flow label
        sport, flow = ev_split(nic_ev)
        assert (sport << 16 | flow) == value and entry % 2 + 1 == port
        assert nic.tables[0][entry] == [value, EvState.GOOD.value]
    refused(NotPermitted, errno.EPERM, ctl.bind_ev_profile, 5, 1, mode=SrMode.USID,
            match="routed by its template")
    refused(InvalidArgument, errno.EINVAL, ctl.bind_ev_profile, 5, 1, template=ONE_USID)
    refused(InvalidArgument, errno.EINVAL, ctl.bind_ev_profile, 5, 4, match="has 4")


def test_an_stev_ev_on_another_port_than_the_nic_sends_it_on_is_refused():
    nic, ctl = controller()
    stev_explicit(ctl, [(LAYOUT.make(0, 0), 2), (LAYOUT.make(1, 0), 1)])
    refused(NotPermitted, errno.EPERM, ctl.bind_ev_profile, 5, 0,
            match="EV 0 \\(0x00000000 port 2\\): the NIC sends it on port 1")
    _, ctl = controller()
    stev_explicit(ctl, [(LAYOUT.make(0, 0), 1), (LAYOUT.make(0, 1), 1)])   # both on port 1
    e = refused(InvalidArgument, errno.EINVAL, ctl.bind_ev_profile, 5, 0)
    assert "as many EVs on every plane" in str(e)                     # the driver's rule
    assert ctl.binding(0) is None


def test_a_udp_profile_is_the_udp_source_port_alone():
    nic, ctl = controller(planes=1, evs=8)
    ctl.modify_ev_fmt_profile(3, state=S.OFFLINE, mode=FormatMode.UDP, widths=(16,))
    ctl.modify_ev_fmt_profile(3, state=S.ONLINE)
    ctl.modify_ev_profile(4, state=S.OFFLINE, mode=EvMode.GENERATED, fmt_id=3, ev_count=4,
                          fields=(EvField(16, 0xC000, 0, 3, 0x0003),), min_active=0,
                          event_mask=())
    ctl.modify_ev_profile(4, state=S.ONLINE)
    b = ctl.bind_ev_profile(4, 1)
    for e, nic_ev in zip(ctl.query_ev_array(4), b.nic_evs, strict=True):
        assert ev_split(nic_ev) == (int.from_bytes(e.expansion, "big"), 0)   # flow label 0
        assert e.ev.port == 1


def test_replace_ev_on_a_loaded_profile_takes_the_old_evs_entry():
    nic, ctl = controller()
    evs = [(LAYOUT.make(p, 0, 0x10), p + 1) for p in range(2)]
    stev_explicit(ctl, evs)
    b = ctl.bind_ev_profile(5, 1)
    old = Ev(evs[1][0].to_bytes(4, "big"), 2)
    new = LAYOUT.make(1, 3, 0x20)
    nic.writes.clear()
    ctl.replace_evs(5, [EvOpEntry(old, Ev(new.to_bytes(4, "big"), 2), EvState.DENIED)])
    entry = b.entries[1]
    assert nic.tables[1][entry] == [new, EvState.DENIED.value]
    assert nic.tables[1][b.entries[0]][0] == evs[0][0]                # the other stays
    assert ("ev.load", LoadOp.CLEAR.value) not in nic.ev_writes()
    assert ctl.binding(1).nic_evs == (evs[0][0], new)
    # an EV for the other port cannot take that entry
    wrong = Ev(LAYOUT.make(0, 2).to_bytes(4, "big"), 1)
    nic.writes.clear()
    refused(NotPermitted, errno.EPERM, ctl.replace_evs, 5,
            [EvOpEntry(Ev(new.to_bytes(4, "big")), wrong, EvState.GOOD)], match="on port 2")
    assert nic.ev_writes() == []


def test_the_driver_replaces_one_entry_in_place_and_empties_a_table():
    nic = FakeNic()
    regs = RegisterClient(nic)
    regs.run(driver.load_ev_profile(1, [LAYOUT.make(p, s) for s in range(2) for p in range(2)],
                                    LAYOUT))
    for index, ev, match in ((1, LAYOUT.make(0, 3), "on plane 0, entry 1 on plane 1"),
                             (16, LAYOUT.make(0, 3), "entry 16 does not exist"),
                             (0, 1 << 32, "32-bit"), (0, LAYOUT.make(0, 3), "QP 4")):
        nic.writes.clear()
        with pytest.raises(RegisterError, match=match):
            regs.run(driver.replace_ev(4 if "QP 4" in match else 1, index, ev, LAYOUT))
        assert nic.ev_writes() == []
    regs.run(driver.replace_ev(1, 3, LAYOUT.make(1, 3, 0x77), LAYOUT))
    assert [e[0] for e in nic.tables[1]] == [LAYOUT.make(0, 0), LAYOUT.make(1, 0),
                                             LAYOUT.make(0, 1), LAYOUT.make(1, 3, 0x77)]
    regs.run(driver.clear_ev_profile(1))
    assert nic.tables[1] == [] and nic.ev_writes()[-1] == ("ev.load", LoadOp.CLEAR.value)


def test_a_nic_that_refuses_an_access_while_loading_is_eio():
    nic, ctl = controller()
    srv6_format(ctl)
    generated(ctl)
    ctl.bind_ev_profile(7, 2, template=ONE_USID)
    write, errors = nic.write, regmap.by_name("global.bus_errors").offset

    def refusing(offset, value):         # the bank refuses ev.value, as it does a locked block
        if _path(offset) == "ev.value":
            nic.words[errors] += 1
        else:
            write(offset, value)

    nic.write = refusing
    refused(IoError, errno.EIO, ctl.bind_ev_profile, 7, 2, template=ONE_USID,
            match="refused 8 access")
    assert ctl.binding(2) is None                    # what the table holds is not known now


# -- EV events --------------------------------------------------------------------------------

GOOD, BAD, DENIED = EvState.GOOD, EvState.ASSUMED_BAD, EvState.DENIED
STEV_EVS = [(LAYOUT.make(p, s, 0x5A5A_0000 | s << 4), p + 1) for s in range(2) for p in range(2)]


def two_loaded(depth=4):
    """Profile 7 (GENERATED SRv6; events GOOD and ASSUMED_BAD) in QP 2, profile 5 (EXPLICIT
    STEV; events ASSUMED_BAD) in QP 1."""
    nic, ctl = controller(evq_depth=depth)
    srv6_format(ctl)
    generated(ctl)
    ctl.modify_ev_profile(7, event_mask={GOOD, BAD})
    stev_explicit(ctl, STEV_EVS)
    ctl.modify_ev_profile(5, event_mask={BAD})
    return nic, ctl, ctl.bind_ev_profile(7, 2, template=ONE_USID), ctl.bind_ev_profile(5, 1)


def test_one_event_cq_as_deep_as_the_nic_queue_and_its_refusals():
    nic, ctl, b7, _ = two_loaded(depth=4)
    nic.words[regmap.by_name("evq.mask").offset] = 0b1101        # another tool subscribed
    nic.change(2, b7.entries[0], DENIED)
    refused(InvalidArgument, errno.EINVAL, ctl.create_ev_event_cq, 0, match="1 or more")
    refused(InvalidArgument, errno.EINVAL, ctl.create_ev_event_cq, "4")
    e = refused(TooBig, errno.E2BIG, ctl.create_ev_event_cq, 5, match="holds 4 \\(evq.depth\\)")
    assert e.needed == 4 and nic.events != []                         # refused: nothing taken
    cq = ctl.create_ev_event_cq(4)
    assert (cq.cqe, cq.depth) == (4, 4)
    assert nic.events == [] and ctl.poll_ev_event(cq, 4) == []       # queued with no CQ there
    assert nic.word("evq.mask") == 0b0101                             # GOOD, ASSUMED_BAD
    refused(Busy, errno.EBUSY, ctl.create_ev_event_cq, 1, match="destroy that one first")
    refused(InvalidArgument, errno.EINVAL, ctl.poll_ev_event, cq, 0, match="1 or more")
    refused(InvalidArgument, errno.EINVAL, ctl.poll_ev_event, "cq", 1)
    ctl.destroy_ev_event_cq(cq)
    assert nic.word("evq.mask") == 0
    refused(InvalidArgument, errno.EINVAL, ctl.poll_ev_event, cq, 1, match="destroyed")
    refused(InvalidArgument, errno.EINVAL, ctl.destroy_ev_event_cq, cq)
    again = ctl.create_ev_event_cq(1)
    refused(InvalidArgument, errno.EINVAL, controller()[1].poll_ev_event, again, 1,
            match="not this controller's")


def test_the_nic_queues_the_union_of_the_loaded_profiles_masks_while_a_cq_is_there():
    nic, ctl = controller()
    srv6_format(ctl)
    generated(ctl)
    ctl.modify_ev_profile(7, event_mask={GOOD})
    stev_explicit(ctl, STEV_EVS)
    ctl.modify_ev_profile(5, event_mask={BAD})
    assert ctl.query_ev_profile(5).event_mask == {BAD}
    ctl.bind_ev_profile(7, 2, template=ONE_USID)
    assert nic.mask_writes() == []                                    # no CQ to queue for
    cq = ctl.create_ev_event_cq(4)
    assert nic.word("evq.mask") == 0b0001                             # 5 is loaded nowhere
    ctl.bind_ev_profile(5, 1)
    assert nic.word("evq.mask") == 0b0101
    ctl.modify_ev_profile(7, event_mask=())
    assert nic.word("evq.mask") == 0b0100
    ctl.modify_ev_profile(7, event_mask={GOOD, BAD})
    assert nic.word("evq.mask") == 0b0101
    writes = len(nic.mask_writes())
    ctl.modify_ev_profile(5, event_mask={BAD})                        # the union is as it was
    ctl.modify_ev_profile(7, event_mask={GOOD})
    assert len(nic.mask_writes()) == writes
    ctl.unbind_ev_profile(1)
    assert nic.word("evq.mask") == 0b0001
    ctl.unbind_ev_profile(2)
    assert nic.word("evq.mask") == 0
    ctl.bind_ev_profile(7, 2, template=ONE_USID)
    assert nic.word("evq.mask") == 0b0001
    ctl.destroy_ev_event_cq(cq)
    assert nic.word("evq.mask") == 0
    writes = len(nic.mask_writes())
    ctl.bind_ev_profile(5, 1)
    assert len(nic.mask_writes()) == writes and nic.word("evq.mask") == 0


def test_an_event_names_the_profiles_ev_at_the_entry_and_the_profiles_mask_filters():
    nic, ctl, b7, b5 = two_loaded()
    cq = ctl.create_ev_event_cq(4)
    array7, array5 = ctl.query_ev_array(7), ctl.query_ev_array(5)
    nic.change(2, b7.entries[3], BAD)
    nic.change(1, b5.entries[2], GOOD, management=True)   # queued for 7's sake; 5 wants none
    nic.change(3, 0, BAD)                                 # QP 3 holds no profile
    nic.change(1, b5.entries[0], BAD)
    assert ctl.poll_ev_event(cq, 8) == [EvEvent(7, array7[3].ev, BAD, qp=2),
                                        EvEvent(5, array5[0].ev, BAD, qp=1)]
    assert array7[3].ev.port == b7.entries[3] % 2 + 1 and array5[0].ev.port == STEV_EVS[0][1]
    nic.change(2, b7.entries[3], GOOD, management=True)
    (e,) = ctl.poll_ev_event(cq, 8)
    assert (e.ev, e.state, e.management, e.replaced, e.drop_count) == (
        array7[3].ev, GOOD, True, False, 0)
    assert ctl.poll_ev_event(cq, 8) == [] and nic.events == []


def test_a_path_change_is_an_event_for_each_entry_it_covers():
    nic, ctl, b7, _ = two_loaded()
    cq = ctl.create_ev_event_cq(4)
    array = ctl.query_ev_array(7)
    first, *rest = (b7.entries[i] for i in (5, 1, 3))
    nic.change(2, first, BAD, others={*rest, 12})         # entry 12 holds none of the 8 EVs
    want = [EvEvent(7, array[b7.entries.index(i)].ev, BAD, qp=2) for i in [first, *sorted(rest)]]
    assert ctl.poll_ev_event(cq, 2) == want[:2]            # the third waits in the CQ
    assert nic.events == []
    assert ctl.poll_ev_event(cq, 2) == want[2:]


def test_changes_lost_in_a_full_queue_are_carried_by_the_next_event():
    nic, ctl, b7, _ = two_loaded(depth=4)
    nic.overflows = 0xFFFF_FFFF                           # the counter wraps on the next loss
    cq = ctl.create_ev_event_cq(4)
    array = ctl.query_ev_array(7)
    for i in range(6):
        nic.change(2, b7.entries[i], BAD)                 # two find the queue full
    got = ctl.poll_ev_event(cq, 8)
    assert [e.ev for e in got] == [array[i].ev for i in range(4)]
    assert {(e.drop_count, e.lost_changes) for e in got} == {(0, 0)}
    # nothing follows the loss yet: it is said once, as an error
    e = refused(IoError, errno.EIO, ctl.poll_ev_event, cq, 8, match="2 EV state change")
    assert e.lost_changes == 2
    assert ctl.poll_ev_event(cq, 8) == []
    for i in range(5):
        nic.change(2, b7.entries[i], GOOD)                # one lost
    assert [e.drop_count for e in ctl.poll_ev_event(cq, 8)] == [0] * 4
    nic.change(3, 0, BAD)                                 # dropped: it carries nothing
    nic.change(2, b7.entries[6], BAD)
    (e,) = ctl.poll_ev_event(cq, 8)
    assert (e.ev, e.drop_count, e.lost_changes) == (array[6].ev, 1, 1)
    nic.change(2, b7.entries[7], BAD)
    assert ctl.poll_ev_event(cq, 8)[0].drop_count == 0


def test_an_entry_a_spare_took_is_reported_once_then_no_longer_the_profiles():
    nic, ctl, b7, b5 = two_loaded()
    cq = ctl.create_ev_event_cq(4)
    array = ctl.query_ev_array(7)
    entry = b7.entries[4]
    nic.change(2, entry, BAD, replaced=True)
    (e,) = ctl.poll_ev_event(cq, 8)
    assert (e.ev, e.state, e.replaced) == (array[4].ev, BAD, True)
    nic.change(2, entry, GOOD)                            # the spare's change, not the EV's
    nic.change(2, b7.entries[5], BAD, others={entry})
    assert [(x.ev, x.replaced) for x in ctl.poll_ev_event(cq, 8)] == [(array[5].ev, False)]
    b7 = ctl.bind_ev_profile(7, 2, template=ONE_USID)     # loaded again: the profile's EVs
    nic.change(2, entry, GOOD)
    assert [x.ev for x in ctl.poll_ev_event(cq, 8)] == [array[4].ev]
    # REPLACE_EV writes the entry: it holds the profile's EV again
    old = ctl.query_ev_array(5)[1].ev
    nic.change(1, b5.entries[1], BAD, replaced=True)
    nic.change(1, b5.entries[1], BAD)
    assert [x.ev for x in ctl.poll_ev_event(cq, 8)] == [old]
    new = Ev(LAYOUT.make(1, 2, 0x10).to_bytes(4, "big"), 2)
    ctl.replace_evs(5, [EvOpEntry(old, new, GOOD)])
    nic.change(1, b5.entries[1], BAD)
    assert [x.ev for x in ctl.poll_ev_event(cq, 8)] == [new]


def test_events_queued_before_a_table_changes_name_what_it_held():
    nic, ctl, b7, _ = two_loaded()
    cq = ctl.create_ev_event_cq(4)
    array = ctl.query_ev_array(7)
    nic.change(2, b7.entries[0], BAD)
    ctl.unbind_ev_profile(2)
    nic.change(2, b7.entries[1], BAD)                     # QP 2 holds nothing now
    assert ctl.poll_ev_event(cq, 8) == [EvEvent(7, array[0].ev, BAD, qp=2)]
    assert array[0].ev.port != 0                          # the port it had while loaded
    # a mask change filters what was queued before it by the mask it had
    b7 = ctl.bind_ev_profile(7, 2, template=ONE_USID)
    nic.change(2, b7.entries[2], GOOD)
    ctl.modify_ev_profile(7, event_mask={BAD})
    nic.change(2, b7.entries[3], GOOD)
    assert [(e.ev, e.state) for e in ctl.poll_ev_event(cq, 8)] == [(array[2].ev, GOOD)]


# -- CC profiles ----------------------------------------------------------------------------


def nscc(ctl, pid=3, **cfg):
    ctl.modify_cc_profile(pid, state=S.OFFLINE, algorithm=NSCC)
    ctl.modify_cc_profile(pid, state=S.ONLINE, config=NsccConfig(**cfg))


def test_a_cc_profile_goes_round_its_state_machine_and_onto_the_nic():
    nic, ctl = controller()
    refused(InvalidArgument, errno.EINVAL, ctl.modify_cc_profile, 3, state=S.OFFLINE,
            match="algorithm must be set first")
    refused(InvalidArgument, errno.EINVAL, ctl.modify_cc_profile, 3, state=S.OFFLINE,
            algorithm="dcqcn", match="none of this NIC's")
    ctl.modify_cc_profile(3, state=S.OFFLINE, algorithm=NSCC)
    refused(InvalidArgument, errno.EINVAL, ctl.modify_cc_profile, 3, state=S.ONLINE,
            match="config must be set first")
    refused(InvalidArgument, errno.EINVAL, ctl.apply_cc_profile, 3, match="OFFLINE")
    cfg = NsccConfig(target_delay=6000, base_rtt=2000, max_cwnd=300_000, disable_qa=1,
                     qa_gate=3, qa_threshold=40_000, eta=0.0, fi_scale=0,
                     adjust_bytes_threshold=0, adjust_period_threshold=0, fi=0)
    ctl.modify_cc_profile(3, state=S.ONLINE, config=cfg)
    info = ctl.query_cc_profile(3)
    assert (info.state, info.algorithm, info.config) == (S.ONLINE, NSCC, cfg)
    written = ctl.apply_cc_profile(3)
    # 8000 ns at 250 MHz; the window starts at its largest, as NSCC's does
    assert written == {"target_rtt": 2000, "cwnd_max": 300_000, "cwnd_init": 300_000,
                       "fair": 0}
    regs = {p: nic.word(f"rel.{p}") for p in ("target_rtt", "cwnd_max", "cwnd_init", "cc_fair")}
    assert regs == {"target_rtt": 2000, "cwnd_max": 300_000, "cwnd_init": 300_000, "cc_fair": 0}
    # ONLINE, its configuration may change (Feature.CC_PROFILE_MODIFY_ONLINE): to the NIC at once
    ctl.modify_cc_profile(3, config=NsccConfig(target_delay=4000))
    assert nic.word("rel.target_rtt") == 1000 and nic.word("rel.cwnd_max") == 300_000
    refused(InvalidArgument, errno.EINVAL, ctl.modify_cc_profile, 3, algorithm=NSCC,
            match="algorithm cannot be changed there")
    refused(TooBig, errno.E2BIG, ctl.modify_cc_profile, 4, state=S.OFFLINE, algorithm=NSCC,
            match="takes 1 CC profile")
    ctl.modify_cc_profile(3, state=S.OFFLINE)
    nic.writes.clear()
    ctl.modify_cc_profile(3, config=NsccConfig(target_delay=9000))    # applied no longer
    assert nic.register_writes() == []
    ctl.modify_cc_profile(3, state=S.INIT)
    assert ctl.query_cc_profile(3).state is S.INIT


def test_the_clock_turns_nanoseconds_into_cycles():
    nic = FakeNic()
    ctl = Controller(RegisterClient(nic), clock_hz=156_250_000)       # 6.4 ns a cycle
    nscc(ctl, target_delay=10_000)
    assert ctl.apply_cc_profile(3) == {"target_rtt": 1563}             # 1562.5: half rounds up
    assert nic.word("rel.target_rtt") == 1563


@pytest.mark.parametrize("cfg,cls,match", [
    ({"gamma": 0.8}, NotPermitted, "gamma 0.8: the NIC's decrease is its own"),
    ({"max_md_jump": 0.5}, NotPermitted, "max_md_jump"),
    ({"fi": 5.0}, NotPermitted, "fi 5.0: the NIC's fair increase"),
    ({"eta": 0.15}, NotPermitted, "eta 0.15"),
    ({"fi_scale": 0.25}, NotPermitted, "no fast increase"),
    ({"adjust_bytes_threshold": 8192}, NotPermitted, "at once"),
    ({"adjust_period_threshold": 12_000}, NotPermitted, "at once"),
    ({"disable_qa": 0}, NotPermitted, "no QuickAdapt"),
    ({"target_delay": 300_000}, NotPermitted, "75000 cycles"),
    ({"target_delay": 1}, NotPermitted, "0 cycles"),
    ({"max_cwnd": 1 << 24}, NotPermitted, "at most 16777215"),
    ({"max_cwnd": 0}, InvalidArgument, "lets nothing be sent"),
    ({"base_rtt": 5000}, InvalidArgument, "base_rtt without target_delay"),
])
def test_nscc_fields_the_nic_has_no_register_for_are_refused(cfg, cls, match):
    nic, ctl = controller()
    ctl.modify_cc_profile(3, state=S.OFFLINE, algorithm=NSCC)
    refused(cls, cls.errno, ctl.modify_cc_profile, 3, config=NsccConfig(**cfg), match=match)
    assert ctl.query_cc_profile(3).config is None
    assert nic.register_writes() == []


@pytest.mark.parametrize("cfg", [{"disable_qa": 256}, {"target_delay": -1}, {"gamma": "0.8"},
                                 {"eta": float("nan")}, {"max_cwnd": 1 << 32}, {"fi": True}])
def test_an_nscc_config_of_the_wrong_shape_is_einval(cfg):
    refused(InvalidArgument, errno.EINVAL, NsccConfig, **cfg)


def test_a_cc_profile_needs_an_nscc_config():
    _, ctl = controller()
    ctl.modify_cc_profile(3, state=S.OFFLINE, algorithm=NSCC)
    refused(InvalidArgument, errno.EINVAL, ctl.modify_cc_profile, 3, config={"gamma": 1},
            match="NsccConfig")


# -- endpoint requests ----------------------------------------------------------------------

#: four EVs, (value, port): plane 0 and 1 on spine 0, then on spine 1
PROBE_EVS = [(LAYOUT.make(p, s, 0x5A5A_0000), p + 1) for s in range(2) for p in range(2)]
EVS = [Ev(v.to_bytes(4, "big"), port) for v, port in PROBE_EVS]
#: a batch's timeout when its probes are answered: long enough for a loaded host's sleeps
WAIT = 1_000_000_000
ANSWERED, TIMED_OUT, PORT_DOWN = EpStatus.ANSWERED, EpStatus.TIMED_OUT, EpStatus.PORT_DOWN


def probing(**build):
    """EXPLICIT STEV profile 5 of PROBE_EVS loaded into QP 1, both ports up."""
    nic, ctl = controller(**build)
    nic.words[regmap.by_name("net.port_up").offset] = 0b11
    stev_explicit(ctl, PROBE_EVS)
    return nic, ctl, ctl.bind_ev_profile(5, 1)


def test_a_probe_is_answered_with_its_round_trip_in_ns():
    nic, ctl, b = probing()
    nic.answer_after, nic.answer_rtt = 3, 1234
    # an EV named without its port is the profile's all the same
    out = ctl.ep_batch_send_wait(EpOpType.EV_PROBE,
                                 [EvProbe(5, EVS[3]), EvProbe(5, Ev(EVS[0].value))], WAIT)
    assert [(r.req_id, r.status, r.qp, r.entry, r.port) for r in out] == [
        (0, ANSWERED, 1, b.entries[3], 2), (1, ANSWERED, 1, b.entries[0], 1)]
    # each probe went out on its EV's entry, one after the other
    assert nic.probes == [(1, b.entries[3]), (1, b.entries[0])]
    assert (out[0].rtt_cycles, out[0].rtt_ns) == (1234, 1234 * 4)       # 250 MHz: 4 ns a cycle
    assert out[0].svc_time_excluded is False and out[0].status.errno == 0
    # ep.answers is a 32-bit count: past its top it is 0 again, and that is an answer too
    nic.words[regmap.by_name("ep.answers").offset] = 0xFFFF_FFFF
    (r,) = ctl.ep_batch_send_wait("EV_PROBE", [EvProbe(5, EVS[0])], WAIT)
    assert r.status is ANSWERED and nic.word("ep.answers") == 0


def test_the_clock_turns_a_probes_cycles_into_ns_to_the_nearest():
    nic = FakeNic()
    nic.words[regmap.by_name("net.port_up").offset] = 0b11
    ctl = Controller(RegisterClient(nic), clock_hz=300_000_000)     # 3 1/3 ns a cycle
    stev_explicit(ctl, PROBE_EVS)
    ctl.bind_ev_profile(5, 1)
    for rtt, ns in ((1000, 3333), (1001, 3337), (3, 10), (0xFFFF, 218450)):
        nic.answer_rtt = rtt
        (r,) = ctl.ep_batch_send_wait(EpOpType.EV_PROBE, [EvProbe(5, EVS[1])], WAIT)
        assert (r.rtt_cycles, r.rtt_ns) == (rtt, ns)


def test_a_probe_never_answered_times_out_within_the_timeout():
    nic, ctl, b = probing()
    nic.answer_after = None                                          # a dead path
    start = time.monotonic()
    out = ctl.ep_batch_send_wait(EpOpType.EV_PROBE, [EvProbe(5, EVS[0]), EvProbe(5, EVS[1])],
                                 50_000_000)                         # 50 ms for the batch
    elapsed = time.monotonic() - start
    assert [(r.status, r.rtt_ns, r.rtt_cycles) for r in out] == [(TIMED_OUT, None, None)] * 2
    assert out[0].status.errno == errno.ETIMEDOUT
    assert 0.05 <= elapsed < 0.5, elapsed
    # the first took all the time: the second's turn came after it, and it was not sent
    assert nic.probes == [(1, b.entries[0])]
    # a probe answered after one that timed out is still heard, when time is left
    nic.answer_after = 2
    assert [r.status for r in ctl.ep_batch_send_wait(EpOpType.EV_PROBE, [EvProbe(5, EVS[1])],
                                                     WAIT)] == [ANSWERED]


def test_a_probe_on_a_port_that_is_down_is_refused_and_the_rest_go():
    nic, ctl, b = probing()
    nic.words[regmap.by_name("net.port_up").offset] = 0b01          # port 2 down
    out = ctl.ep_batch_send_wait(EpOpType.EV_PROBE, [EvProbe(5, EVS[1]), EvProbe(5, EVS[2])],
                                 WAIT)
    assert [(r.status, r.port, r.rtt_ns) for r in out] == [(PORT_DOWN, 2, None),
                                                          (ANSWERED, 1, 4000)]
    assert out[0].status.errno == errno.EAGAIN
    assert nic.word("ep.refused") == 1 and nic.probes == [(1, b.entries[2])]


def test_a_probe_names_the_qp_when_its_profile_is_loaded_into_several():
    nic, ctl, b1 = probing()
    b3 = ctl.bind_ev_profile(5, 3)
    refused(InvalidArgument, errno.EINVAL, ctl.ep_batch_send_wait, EpOpType.EV_PROBE,
            [EvProbe(5, EVS[0])], WAIT, match="loaded into QPs 1, 3: name the one")
    refused(InvalidArgument, errno.EINVAL, ctl.ep_batch_send_wait, EpOpType.EV_PROBE,
            [EvProbe(5, EVS[0], qp=2)], WAIT, match="not loaded into QP 2")
    out = ctl.ep_batch_send_wait(EpOpType.EV_PROBE, [EvProbe(5, EVS[2], qp=3),
                                                     EvProbe(5, EVS[2], qp=1)], WAIT)
    assert [(r.qp, r.entry) for r in out] == [(3, b3.entries[2]), (1, b1.entries[2])]
    assert nic.probes == [(3, b3.entries[2]), (1, b1.entries[2])]


@pytest.mark.parametrize("op,requests,timeout,cls,match", [
    ("EV_PING", [], 1000, InvalidArgument, "an endpoint operation is an EpOpType"),
    (0, [], 1000, InvalidArgument, "not 0"),
    (EpOpType.EV_PROBE, [], 0, InvalidArgument, "timeout_ns is 1 .. 4294967295 ns, not 0"),
    (EpOpType.EV_PROBE, [], -5, InvalidArgument, "not -5"),
    (EpOpType.EV_PROBE, [], 1 << 32, InvalidArgument, "not 4294967296"),
    (EpOpType.EV_PROBE, [], 1.5e6, InvalidArgument, "not 1500000.0"),
    (EpOpType.EV_PROBE, None, 1000, InvalidArgument, "requests are a sequence"),
    (EpOpType.EV_PROBE, [EvProbe(5, EVS[0]), EVS[1]], 1000, InvalidArgument,
     "an EV_PROBE request is an EvProbe"),
    (EpOpType.EV_PROBE, [EvProbe(5, EVS[0]), EvProbe(5, Ev(b"\x99", 1))], 1000, NotFound,
     "EV profile 5 holds no EV 0x99 port 1"),
    (EpOpType.EV_PROBE, [EvProbe(5, EVS[0]), EvProbe(5, Ev(EVS[0].value, 2))], 1000, NotFound,
     "holds no EV"),
    (EpOpType.EV_PROBE, [EvProbe(5, EVS[0]), EvProbe(6, EVS[0])], 1000, InvalidArgument,
     "EV profile 6 is INIT"),
    (EpOpType.EV_PROBE, [EvProbe(5, EVS[0]), EvProbe(-1, EVS[0])], 1000, InvalidArgument,
     "a profile id is a 64-bit unsigned number"),
    (EpOpType.PORT_STATUS_UPDATE, [EvProbe(5, EVS[0])], 1000, NotPermitted,
     "cannot address one peer"),
])
def test_every_refusal_of_an_endpoint_batch_has_its_errno_and_sends_nothing(
        op, requests, timeout, cls, match):
    nic, ctl, _ = probing()
    nic.words[regmap.by_name("global.control").offset] = 1
    e = refused(cls, cls.errno, ctl.ep_batch_send_wait, op, requests, timeout, match=match)
    if requests and len(requests) == 2:
        assert (e.entry, e.done) == (1, ())                         # the second, none done
    assert nic.probes == [] and nic.status_rounds == 0
    assert nic.word("ep.refused") == 0


def test_a_profile_loaded_into_no_qp_cannot_be_probed():
    nic, ctl = controller()
    stev_explicit(ctl, PROBE_EVS)
    refused(InvalidArgument, errno.EINVAL, ctl.ep_batch_send_wait, EpOpType.EV_PROBE,
            [EvProbe(5, EVS[0])], 1000, match="loaded into no QP")
    assert ctl.ep_batch_send_wait(EpOpType.EV_PROBE, [], 1000) == []
    assert nic.probes == []


def test_a_port_status_update_goes_to_every_peer_at_once():
    nic, ctl = controller()
    # disabled, the NIC sends no port status: refused rather than taken for nothing
    refused(NotPermitted, errno.EPERM, ctl.ep_batch_send_wait, EpOpType.PORT_STATUS_UPDATE, [],
            1000, match="global.control bit 0 clear")
    assert nic.status_rounds == 0
    nic.words[regmap.by_name("global.control").offset] = 1
    assert ctl.ep_batch_send_wait("PORT_STATUS_UPDATE", (), 1000) == []
    assert nic.status_rounds == 1
    assert [v for o, v in nic.writes if _path(o) == "ep.status"] == [1]


# -- a NIC of mrcnic sim serve ----------------------------------------------------------------


def test_a_generated_srv6_profile_loads_into_a_qp_of_a_simulated_nic(served):
    with Device(served.urls[0]) as dev:
        dev.regs.run(store.clear())          # what other tests of this module kept there
        ctl = Controller(dev.regs)
        # QP 2 carries no traffic there (probes go to it): set it up with a template of its own
        dev.regs.run(driver.write_template(2, ONE_USID))
        dev.regs.run(driver.configure_qp(2, driver.QpConfig(
            dqp=9, dst_mac="02:00:00:00:00:02", dst_ip="fd00::2", template=2,
            mode=SrMode.USID, state=QpState.RESET)))
        srv6_format(ctl)
        generated(ctl)
        b = ctl.bind_ev_profile(7, 2, template=ONE_USID)
        states = dev.regs.run(driver.ev_states(2))
        assert states == [EvState.GOOD] * 8 + [EvState.ASSUMED_BAD] * 8   # 8 entries loaded
        # the NIC cannot read its table back; ev.value holds what went into the last entry
        assert dev.read("ev.value") == b.nic_evs[b.entries.index(7)] and dev.read("ev.qp") == 2
        array = ctl.query_ev_array(7)
        assert [e.state for e in array] == [EvState.GOOD] * 8
        assert sorted(b.entries) == list(range(8))
        # a program connecting afterwards finds the profiles and the binding on the NIC
        with Device(served.urls[0]) as again:
            later = Controller(again.regs)
            assert later.binding(2) == b and later.query_ev_array(7) == array
            assert later.query_ev_fmt_profile(1) == ctl.query_ev_fmt_profile(1)
        for e, nic_ev, entry in zip(array, b.nic_evs, b.entries, strict=True):
            assert ONE_USID.route(nic_ev, LAYOUT).dst == int.from_bytes(
                e.expansion.ljust(16, b"\0"), "big")
            assert e.ev.port == entry % 2 + 1

        # an EV's state changes on the NIC, and reads back from it
        ev = array[6].ev
        ctl.modify_ev_states(7, [EvOpEntry(ev, state=EvState.DENIED)])
        assert dev.regs.run(driver.ev_states(2))[b.entries[6]] is EvState.DENIED
        assert ctl.query_ev_states(7, [ev])[0].state is EvState.DENIED
        ctl.modify_ev_states(7, [EvOpEntry(ev, state=EvState.GOOD)])
        assert dev.regs.run(driver.ev_states(2))[b.entries[6]] is EvState.GOOD

        ctl.unbind_ev_profile(2)
        assert dev.regs.run(driver.ev_states(2)) == [EvState.ASSUMED_BAD] * 16


def test_a_port_disabled_on_a_simulated_nic_is_down(served):
    with Device(served.urls[1]) as dev:
        ctl = Controller(dev.regs)
        assert ctl.port_up(2) and ctl.query_port(2) is PortAdminState.ENABLED
        ctl.modify_port(2, PortAdminState.DISABLED)
        try:
            assert not ctl.port_up(2) and ctl.query_port(2) is PortAdminState.DISABLED
            assert ctl.port_up(1), "holding port 2 down took port 1 with it"
        finally:
            ctl.modify_port(2, PortAdminState.ENABLED)
        assert ctl.port_up(2)


def test_a_cc_profile_lands_in_the_rel_registers_of_a_simulated_nic(served):
    names = ("target_rtt", "cwnd_init", "cwnd_max", "cc_fair")
    with Device(served.urls[1]) as dev:
        saved = {n: dev.read(f"rel.{n}") for n in names}
        refusals = dev.read("global.bus_errors")
        dev.regs.run(store.clear())
        ctl = Controller(dev.regs)
        nscc(ctl, target_delay=5000, base_rtt=3000, max_cwnd=123_456, fi=0, disable_qa=1)
        try:
            written = ctl.apply_cc_profile(3)
            got = {n: dev.read(f"rel.{n}") for n in names}
        finally:
            dev.regs.run(driver.set_congestion(target_rtt=saved["target_rtt"],
                                               cwnd_init=saved["cwnd_init"],
                                               cwnd_max=saved["cwnd_max"], fair=saved["cc_fair"]))
        assert written == {"target_rtt": 2000, "cwnd_max": 123_456, "cwnd_init": 123_456,
                           "fair": 0}
        assert got == {"target_rtt": 2000, "cwnd_init": 123_456, "cwnd_max": 123_456,
                       "cc_fair": 0}
        assert dev.read("global.bus_errors") == refusals               # the NIC took every write


# -- the profiles kept on the NIC -------------------------------------------------------------


def test_every_program_driving_the_nic_sees_the_same_profiles():
    nic, first = controller()
    srv6_format(first)
    generated(first)
    stev_explicit(first, [(LAYOUT.make(p, 0, 0x10), p + 1) for p in range(2)])
    nscc(first, max_cwnd=200_000)
    first.bind_ev_profile(7, 2, template=ONE_USID)
    # a second controller, as the next mrcnic command makes, finds all of it
    second = Controller(RegisterClient(nic))
    for pid in (7, 5):
        assert second.query_ev_profile(pid) == first.query_ev_profile(pid)
        assert second.query_ev_array(pid) == first.query_ev_array(pid)
    assert second.query_ev_fmt_profile(1) == first.query_ev_fmt_profile(1)
    assert second.query_cc_profile(3) == first.query_cc_profile(3)
    assert second.binding(2) == first.binding(2) and second.binding(1) is None
    assert second.query_device().ev_free_count == first.query_device().ev_free_count
    # and what it changes, the first sees at its next call
    second.unbind_ev_profile(2)
    second.modify_ev_profile(5, state=S.OFFLINE)
    assert first.binding(2) is None
    assert first.query_ev_profile(5).state is S.OFFLINE
    first.modify_ev_profile(5, state=S.INIT)
    assert second.query_ev_profile(5).state is S.INIT


def test_a_change_made_meanwhile_by_another_program_is_ebusy():
    nic, ctl = controller()
    srv6_format(ctl)
    generated(ctl)
    other = Controller(RegisterClient(nic))
    real_write = nic.write
    meddled = []

    def write(offset, value):
        real_write(offset, value)
        if _path(offset) == "ev.load" and not meddled:
            # another program changes the profiles while this one is half way through
            meddled.append(1)
            other.modify_ev_fmt_profile(3, state=S.OFFLINE, mode=FormatMode.STEV,
                                        widths=(16, 16))
    nic.write = write
    refused(Busy, errno.EBUSY, ctl.bind_ev_profile, 7, 2, template=ONE_USID,
            match="another program changed the controller's profiles")
    # what the other did stands; this one's binding is on the NIC but not in the store
    assert Controller(RegisterClient(nic)).query_ev_fmt_profile(3).state is S.OFFLINE
    assert Controller(RegisterClient(nic)).binding(2) is None
    # a change of another part (the application's) meanwhile is no conflict
    meddled.clear()
    nic.write = real_write
    ctl.unbind_ev_profile(2)
    doc = RegisterClient(nic).run(store.load())[1]
    gen = RegisterClient(nic).run(store.generation())
    RegisterClient(nic).run(store.save({**doc, "app": {"x": 1}}, gen + 1))
    ctl.bind_ev_profile(7, 2, template=ONE_USID)
    assert RegisterClient(nic).run(store.load())[1]["app"] == {"x": 1}


def test_profiles_too_large_for_the_store_are_e2big():
    import random
    rng = random.Random(5)
    nic, ctl = controller(qps=1024)
    stev_explicit(ctl, [(LAYOUT.make(0, 0), 1), (LAYOUT.make(1, 0), 2)], pid=1, online=False)
    e = None
    for pid in range(2, 400):
        evs = [(LAYOUT.make(k % 2, rng.randrange(4), rng.randrange(1 << 16)), k % 2 + 1)
               for k in range(16)]
        try:
            ctl.modify_ev_profile(pid, state=S.OFFLINE, mode=EvMode.EXPLICIT, fmt_id=2,
                                  ev_count=16, fields=STEV_FIELDS, min_active=0, event_mask=())
            ctl.replace_evs(pid, [EvOpEntry(UNPOPULATED, Ev(v.to_bytes(4, "big"), port),
                                            EvState.GOOD) for v, port in evs])
        except TooBig as caught:
            e = caught
            break
    assert e is not None and "store cannot hold" in str(e) and e.errno == errno.E2BIG
    assert 10 < pid < 200


def test_a_store_this_software_cannot_read_is_eio():
    nic = FakeNic()
    RegisterClient(nic).run(store.save({"ctl": {"@class": "Unknown"}}, 1))
    with pytest.raises(IoError, match="does not keep there"):
        Controller(RegisterClient(nic))


# -- CC profiles on a NIC that keeps several ---------------------------------------------------


def test_each_cc_profile_is_a_nic_profile_that_qps_follow():
    nic, ctl = controller(cc_profiles=4)
    assert ctl.query_device().cc_max_profiles == 3
    nscc(ctl, pid=30, max_cwnd=200_000)
    nscc(ctl, pid=40, max_cwnd=50_000, target_delay=2000)
    assert ctl.cc_profile_number(30) == 1 and ctl.cc_profile_number(40) == 2
    rel = {n: nic.word(f"rel.{n}") for n in regmap.CC_PARAMS}
    # what the profile sets, the rest profile 0's (rel.*) as it stood
    assert nic.cc_sets[1] == {**rel, "cwnd_max": 200_000, "cwnd_init": 200_000}
    assert nic.cc_sets[2] == {**rel, "cwnd_max": 50_000, "cwnd_init": 50_000,
                              "target_rtt": 500}
    assert {n: nic.word(f"rel.{n}") for n in regmap.CC_PARAMS} == rel   # profile 0 untouched
    # modified ONLINE: the NIC's profile changes at once
    ctl.modify_cc_profile(40, config=NsccConfig(max_cwnd=60_000))
    assert nic.cc_sets[2]["cwnd_max"] == 60_000
    nscc(ctl, pid=50)
    refused(TooBig, errno.E2BIG, nscc, ctl, pid=60, match="takes 3 CC profile")
    # a QP on profile 40's NIC profile holds it ONLINE
    RegisterClient(nic).run(driver.configure_qp(2, driver.QpConfig(
        dqp=9, dst_mac="02:00:00:00:00:02", dst_ip="fd00::2", cc_profile=2)))
    assert nic.cc_chosen[2] == 2
    refused(Busy, errno.EBUSY, ctl.modify_cc_profile, 40, state=S.OFFLINE,
            match=r"window of QP\(s\) 2 \(qp.cc_profile 2\)")
    RegisterClient(nic).run(driver.configure_qp(2, driver.QpConfig(
        dqp=9, dst_mac="02:00:00:00:00:02", dst_ip="fd00::2")))
    ctl.modify_cc_profile(40, state=S.OFFLINE)
    refused(InvalidArgument, errno.EINVAL, ctl.cc_profile_number, 40, match="is OFFLINE")
    ctl.modify_cc_profile(40, state=S.INIT)
    nscc(ctl, pid=60)                                  # its NIC profile is free again
    assert ctl.cc_profile_number(60) == 2
    # a second controller finds the numbers on the NIC's store
    assert Controller(RegisterClient(nic)).cc_profile_number(60) == 2


def test_a_nic_with_one_cc_profile_only_applies_one():
    nic, ctl = controller(cc_profiles=1)
    nscc(ctl, pid=3, max_cwnd=200_000)
    refused(NotSupported, errno.ENOTSUP, ctl.cc_profile_number, 3, match="global.cc_profiles 1")
    assert nic.cc_sets == {}


def test_each_qp_of_a_simulated_nic_starts_its_window_from_its_own_cc_profile(served):
    with Device(served.urls[0]) as dev:
        dev.regs.run(store.clear())
        ctl = Controller(dev.regs)
        assert ctl.query_device().cc_max_profiles == dev.info["cc_profiles"] - 1 >= 1
        nscc(ctl, pid=11, max_cwnd=12_345)
        number = ctl.cc_profile_number(11)
        # QP 2 carries no traffic there (probes go to it)
        cfg = driver.QpConfig(dqp=9, dst_mac="02:00:00:00:00:02", dst_ip="fd00::2",
                              state=QpState.RESET, cc_profile=number)
        dev.regs.run(driver.configure_qp(2, cfg))
        on_profile = dev.regs.run(driver.congestion(2))
        dev.regs.run(driver.configure_qp(2, _copy(cfg, cc_profile=0)))
        on_rel = dev.regs.run(driver.congestion(2))
        assert (on_profile["cc_profile"], on_profile["cwnd"]) == (number, 12_345)
        assert (on_rel["cc_profile"], on_rel["cwnd"]) == (0, dev.read("rel.cwnd_init"))
        # no QP follows it any more: it may go OFFLINE
        ctl.modify_cc_profile(11, state=S.OFFLINE)
