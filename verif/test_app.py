"""The application API (mrcnic.app) and the driver programs under it: the QP state machine and
every refusal with its errno, work requests through wq.*, completions through the register
completion queue, the memory window; the CQ and QPs kept in the NIC's store, found by another
program, and the EV and CC profiles a QP is given; and the CLI's write and mem verbs. All
against a word store that takes the wq, cq, mem and qp commands as docs/registers.md says the
NIC does (with the EV commands of verif/test_ctl.py's where a controller's profiles are
loaded)."""

import errno
import json
import random
from collections import deque

import pytest

from mrcnic import app, cli, driver, regmap, store
from mrcnic.app import (
    Capability,
    Context,
    QpState,
    Region,
    SendOpcode,
    WcOpcode,
    WorkCompletion,
)
from mrcnic.ctl import Controller
from mrcnic.ctl import ProfileState as S
from mrcnic.ctl_errors import Busy, InvalidArgument, IoError, MrcError, NotPermitted, TooBig
from mrcnic.enums import SrMode, WrStatus
from mrcnic.evmap import UsidTemplate
from mrcnic.mgmt import Status, StatusError
from mrcnic.regclient import RegisterClient, RegisterError
from mrcnic.verif.test_ctl import BLOCK, BLOCK_BITS, ONE_USID, FakeNic, generated, nscc, srv6_format
from mrcnic.verif.test_regmap import FakeBus

BUILD = {"id": regmap.MRCNIC_ID, "planes": 2, "qps": 4, "evs": 16, "templates": 4,
         "max_usids": 14, "spines": 4, "spares": 2, "cc_profiles": 1}
#: cq.entry's fields as docs/registers.md states them (bits high:low), not as regmap encodes
ENTRY_BITS = {"wr_id": (15, 0), "qp": (31, 16), "status": (35, 32), "recv": (36, 36),
              "has_imm": (37, 37), "msn": (63, 48), "imm": (95, 64)}
#: where the model's memory ends: an access past it is refused
MEMORY_END = 0x2000


def entry(wr_id=0, qp=0, status=0, recv=0, has_imm=0, msn=0, imm=0) -> int:
    return (wr_id | qp << 16 | status << 32 | recv << 36 | has_imm << 37 | msn << 48
            | imm << 64)


class NicModel(FakeBus):
    """The register bank's words, and what the NIC does with its commands:

    * ``wq.post`` stays pending while global.control bit 0 is clear; otherwise the request
      is taken (``posted``, wq.posted counts it) and, with ``complete``, its completion (status
      ``status``) goes to the queue if cq.route has the send bit.
    * the completion queue holds ``depth`` entries (cq.depth) and counts what it cannot take
      in cq.overflows; cq.count and cq.entry (a snapshot on its first word) read it, cq.pop
      takes its head.
    * ``mem.access`` reads or writes ``memory`` (bytes below MEMORY_END; an access reaching
      past it is refused: mem.error 1, mem.errors, a read's mem.rdata 0), logged in
      ``accesses``.
    * ``qp.write`` gives the QP the staged qp.* fields (``contexts``).
    """

    def __init__(self, depth=8, **build):
        super().__init__()
        for k, v in {**BUILD, **build}.items():
            self.words[regmap.by_name(f"global.{k}").offset] = v
        self.set("cq.depth", depth)
        self.set("global.control", 1)
        self.queue: deque[int] = deque()
        self.snapshot = 0
        self.posted: list[dict] = []
        self.complete, self.status = True, WrStatus.OK
        self.memory = bytearray(random.Random(5).randbytes(MEMORY_END))
        self.accesses: list[tuple[str, int, int]] = []
        self.contexts: dict[int, dict] = {}

    def value(self, path) -> int:
        r = regmap.by_name(path)
        return sum(self.words[r.offset + 4 * k] << (32 * k) for k in range(r.words))

    def set(self, path, value) -> None:
        r = regmap.by_name(path)
        for k in range(r.words):
            self.words[r.offset + 4 * k] = value >> (32 * k) & 0xFFFF_FFFF

    def push(self, raw: int) -> None:
        if len(self.queue) >= self.value("cq.depth"):
            self.set("cq.overflows", self.value("cq.overflows") + 1)
        else:
            self.queue.append(raw)

    def write(self, offset, value):
        super().write(offset, value)
        path = regmap.by_offset(offset).path
        if path == "wq.post":
            if not self.value("global.control") & 1:
                self.set("wq.post", 1)            # pending until the NIC is enabled
                return
            req = {name: self.value(f"wq.{name}") for name in
                   ("qp", "opcode", "laddr", "va", "rkey", "length", "imm")}
            self.posted.append({"wr_id": value, **req})
            self.set("wq.posted", self.value("wq.posted") + 1)
            if self.complete and self.value("cq.route") & regmap.CQ_ROUTE_SEND:
                self.push(entry(wr_id=value, qp=req["qp"], status=self.status.value))
        elif path == "cq.pop" and self.queue:
            self.queue.popleft()
        elif path == "mem.access":
            self.access("write" if value else "read")
        elif path == "qp.write":
            self.contexts[value] = {r.name: self.value(r.path) for r in regmap.REGISTERS
                                    if r.block == "qp" and r.access is regmap.Access.RW}

    def access(self, op):
        addr, n = self.value("mem.addr"), self.value("mem.length")
        self.accesses.append((op, addr, n))
        if addr + n > MEMORY_END:
            self.set("mem.error", 1)
            self.set("mem.errors", self.value("mem.errors") + 1)
            self.set("mem.rdata", 0)
            return
        self.set("mem.error", 0)
        if op == "write":
            self.memory[addr:addr + n] = self.value("mem.wdata").to_bytes(32, "little")[:n]
        else:
            self.set("mem.rdata", int.from_bytes(self.memory[addr:addr + n], "little"))

    def read(self, offset):
        r = regmap.by_offset(offset)
        if r.path == "cq.count":
            return len(self.queue)
        if r.path == "cq.entry":
            k = (offset - r.offset) // 4
            if k == 0:
                self.snapshot = self.queue[0] if self.queue else 0
            return self.snapshot >> (32 * k) & 0xFFFF_FFFF
        return super().read(offset)


def client(**kw):
    nic = NicModel(**kw)
    return nic, RegisterClient(nic)


def context(**kw):
    nic = NicModel(**kw)
    return nic, Context(RegisterClient(nic))


def refused(cls, code, fn, *args, match=None, **kwargs):
    with pytest.raises(cls, match=match) as info:
        fn(*args, **kwargs)
    assert isinstance(info.value, MrcError) and info.value.errno == code
    return info.value


RTR = {"dest_qp": 0x345, "dst_ip": "fd00::2", "dst_mac": "02:00:00:00:00:02", "rq_psn": 0x1111}


def rts_qp(ctx, qp_num=1, **rtr):
    cq = ctx._cq or ctx.create_cq(1)
    qp = ctx.create_qp(cq, cq, qp_num=qp_num)
    ctx.modify_qp(qp, QpState.INIT)
    ctx.modify_qp(qp, QpState.RTR, **{**RTR, **rtr})
    ctx.modify_qp(qp, QpState.RTS, sq_psn=0x2222)
    return cq, qp


# -- the completion queue entry --------------------------------------------------------------


@pytest.mark.parametrize("name", list(ENTRY_BITS))
def test_each_completion_field_is_read_at_its_own_bits(name):
    high, low = ENTRY_BITS[name]
    value = WrStatus.MEMORY.value if name == "status" else (1 << (high - low + 1)) - 1
    # the bits no field has (38 .. 47) set too: they must reach no field
    c = driver.Completion.decode(value << low | 0x3FF << 38)
    expect = {"wr_id": 0, "qp": 0, "status": WrStatus.OK, "recv": False, "has_imm": False,
              "msn": 0, "imm": 0}
    expect[name] = {"status": WrStatus.MEMORY, "recv": True, "has_imm": True}.get(name, value)
    assert {k: getattr(c, k) for k in expect} == expect


def test_a_whole_entry_decodes_field_by_field():
    raw = entry(wr_id=0xBEEF, qp=3, status=4, recv=1, has_imm=1, msn=0xA5C3, imm=0xDEADBEEF)
    assert driver.Completion.decode(raw) == driver.Completion(
        wr_id=0xBEEF, qp=3, status=WrStatus.QP_NOT_RTS, recv=True, has_imm=True, msn=0xA5C3,
        imm=0xDEADBEEF)


def test_poll_takes_what_is_asked_and_leaves_the_rest():
    nic, c = client()
    for w in range(3):
        nic.push(entry(wr_id=w, qp=1))
    assert [x.wr_id for x in c.run(driver.poll_cq(2))] == [0, 1]
    assert list(nic.queue) == [entry(wr_id=2, qp=1)]
    assert c.run(driver.poll_cq(0)) == [] and len(nic.queue) == 1
    assert [x.wr_id for x in c.run(driver.poll_cq(5))] == [2]
    assert c.run(driver.poll_cq(5)) == []
    pops = [v for o, v in nic.writes if o == regmap.by_name("cq.pop").offset]
    assert pops == [1, 1, 1]


def test_an_entry_of_unknown_status_stays_at_the_head():
    nic, c = client()
    nic.push(entry(wr_id=1))
    nic.push(entry(wr_id=2, status=9))
    assert [x.wr_id for x in c.run(driver.poll_cq(5))] == [1]      # returned, not lost
    with pytest.raises(RegisterError, match="status 9 is not one of"):
        c.run(driver.poll_cq(5))
    assert list(nic.queue) == [entry(wr_id=2, status=9)]


@pytest.mark.parametrize("send,recv,route", [(False, False, 0), (True, False, 1),
                                             (False, True, 2), (True, True, 3)])
def test_completions_are_routed_by_cq_route(send, recv, route):
    nic, c = client()
    c.run(driver.route_completions(send, recv))
    assert nic.value("cq.route") == route


# -- work requests -------------------------------------------------------------------------


def test_a_write_is_staged_and_posted_with_its_id():
    nic, c = client()
    c.run(driver.post_write(2, 0x1234, 0x1000, 0xFFFF_0000_0000_0000, 0xABCD, 1 << 31))
    assert nic.posted == [{"wr_id": 0x1234, "qp": 2, "opcode": 0, "laddr": 0x1000,
                           "va": 0xFFFF_0000_0000_0000, "rkey": 0xABCD, "length": 1 << 31,
                           "imm": 0}]
    imm_writes = [w for w in nic.writes if w[0] == regmap.by_name("wq.imm").offset]
    assert imm_writes == []            # a WRITE stages no immediate
    c.run(driver.post_write(3, 7, 0, 0, 0, 1, imm=0xC0FFEE))
    assert nic.posted[1] | {"laddr": 0} == {"wr_id": 7, "qp": 3, "opcode": 1, "laddr": 0,
                                            "va": 0, "rkey": 0, "length": 1, "imm": 0xC0FFEE}
    assert nic.value("wq.posted") == 2


@pytest.mark.parametrize("args,kw,match", [
    ((4, 0, 0, 0, 0, 1), {}, "QP 4 does not exist"),
    ((0, 1 << 16, 0, 0, 0, 1), {}, "wr_id 65536 is not a 16-bit"),
    ((0, 0, -1, 0, 0, 1), {}, "laddr -1"), ((0, 0, 0, 1 << 64, 0, 1), {}, "va"),
    ((0, 0, 0, 0, 1 << 32, 1), {}, "rkey"), ((0, 0, 0, 0, 0, 0), {}, r"1 \.\. 2\^31"),
    ((0, 0, 0, 0, 0, (1 << 31) + 1), {}, r"1 \.\. 2\^31"), ((0, 0, 0, 0, 0, True), {}, "length"),
    ((0, 0, 0, 0, 0, 1), {"imm": 1 << 32}, "imm"),
])
def test_a_bad_write_is_refused_before_any_write(args, kw, match):
    nic, c = client()
    with pytest.raises(RegisterError, match=match):
        c.run(driver.post_write(*args, **kw))
    assert nic.writes == [] and nic.posted == []


def test_a_write_to_a_disabled_nic_is_refused_not_left_pending():
    nic, c = client()
    nic.set("global.control", 0)
    with pytest.raises(RegisterError, match="global.control bit 0 is clear"):
        c.run(driver.post_write(0, 0, 0, 0, 0, 1))
    assert nic.writes == []


# -- the memory window -----------------------------------------------------------------------


@pytest.mark.parametrize("addr", [0x1000, 0x1001, 0x101F, 0x1011])
@pytest.mark.parametrize("length", [0, 1, 31, 32, 33, 100])
def test_memory_moves_in_window_sized_accesses_that_cover_the_span(addr, length):
    nic, c = client()
    data = random.Random(addr * 1000 + length).randbytes(length)
    before = bytes(nic.memory)
    c.run(driver.mem_write(addr, data))
    assert bytes(nic.memory) == before[:addr] + data + before[addr + length:]
    assert c.run(driver.mem_read(addr, length)) == data
    for op in ("write", "read"):
        spans = [(a, n) for o, a, n in nic.accesses if o == op]
        # contiguous, exactly the span, no access empty or over 32 bytes or across a 32-byte
        # boundary
        assert sum(n for _, n in spans) == length
        assert all(a + n == b for (a, n), (b, _) in zip(spans, spans[1:], strict=False))
        assert not spans or spans[0][0] == addr
        assert all(1 <= n <= 32 and a // 32 == (a + n - 1) // 32 for a, n in spans)
        blocks = len(range(addr // 32, (addr + length - 1) // 32 + 1)) if length else 0
        assert len(spans) == blocks
    if length == 0:
        assert nic.writes == []          # nothing to move: not one access


def test_a_refused_access_names_its_address():
    nic, c = client()
    with pytest.raises(RegisterError, match="refused a read of 24 bytes at 0x2000"):
        c.run(driver.mem_read(MEMORY_END - 16, 40))
    with pytest.raises(RegisterError, match="refused a write of 8 bytes at 0x2000"):
        c.run(driver.mem_write(MEMORY_END - 24, bytes(32)))
    assert nic.value("mem.errors") == 2


@pytest.mark.parametrize("fn,args,match", [
    (driver.mem_read, (-1, 4), "address -1"), (driver.mem_read, (0, -1), "length -1"),
    (driver.mem_read, ((1 << 64) - 2, 3), "past the end"),
    (driver.mem_write, ((1 << 64) - 1, b"ab"), "past the end"),
    (driver.mem_write, (0, "text"), "bytes, not str"),
])
def test_a_bad_memory_access_is_refused_before_any_write(fn, args, match):
    nic, c = client()
    with pytest.raises(RegisterError, match=match):
        c.run(fn(*args))
    assert nic.writes == []


# -- the application API: device, CQ, QPs ----------------------------------------------------


def test_query_device_says_what_the_registers_say():
    nic, ctx = context(depth=32)
    a = ctx.query_device()
    assert (a.max_qp, a.max_cq, a.max_cqe, a.max_msg_sz, a.max_sge) == (4, 1, 32, 1 << 31, 1)
    assert a.opcodes == {SendOpcode.RDMA_WRITE, SendOpcode.RDMA_WRITE_WITH_IMM}
    assert a.capabilities == {Capability.TRIM_NACK}
    nic.set("global.qps", 16)                           # read now, not remembered
    assert ctx.query_device().max_qp == 16


def test_a_window_that_is_not_an_mrcnic_is_eio():
    nic = NicModel(id=0x1234)
    refused(IoError, errno.EIO, Context, RegisterClient(nic), match="not an mrcnic")


def test_the_one_completion_queue():
    nic, ctx = context(depth=8)
    e = refused(TooBig, errno.E2BIG, ctx.create_cq, 9, match="holds 8")
    assert e.needed == 8
    refused(InvalidArgument, errno.EINVAL, ctx.create_cq, 0)
    assert nic.writes == []
    cq = ctx.create_cq(3)
    assert cq.cqe == 8 and nic.value("cq.route") == regmap.CQ_ROUTE_SEND | regmap.CQ_ROUTE_RECV
    refused(TooBig, errno.E2BIG, ctx.create_cq, 1, match="one completion queue")
    qp = ctx.create_qp(cq, cq)
    refused(Busy, errno.EBUSY, ctx.destroy_cq, cq, match=r"QPs \[0\]")
    ctx.destroy_qp(qp)
    ctx.destroy_cq(cq)
    assert nic.value("cq.route") == 0
    refused(InvalidArgument, errno.EINVAL, ctx.poll_cq, cq, 1)
    assert ctx.create_cq(8) is not cq


def test_qps_are_created_in_reset_below_global_qps():
    nic, ctx = context()
    cq = ctx.create_cq(1)
    assert ctx.create_qp(cq, cq, qp_num=2).qp_num == 2
    assert [ctx.create_qp(cq, cq).qp_num for _ in range(3)] == [0, 1, 3]
    assert nic.contexts[3]["state"] == QpState.RESET.value
    refused(TooBig, errno.E2BIG, ctx.create_qp, cq, cq, match="every QP")
    nic2, ctx2 = context()
    cq2 = ctx2.create_cq(1)
    writes = list(nic2.writes)
    refused(InvalidArgument, errno.EINVAL, ctx2.create_qp, cq2, cq2, qp_num=4, match="0 .. 3")
    refused(InvalidArgument, errno.EINVAL, ctx2.create_qp, cq2, app.Cq(8),
            match="not this context's")
    assert nic2.writes == writes
    ctx2.create_qp(cq2, cq2, qp_num=1)
    writes = list(nic2.writes)
    refused(Busy, errno.EBUSY, ctx2.create_qp, cq2, cq2, qp_num=1)
    assert nic2.writes == writes and nic2.contexts.keys() == {1}


def test_a_qp_goes_reset_init_rtr_rts_each_written_whole():
    nic, ctx = context()
    cq = ctx.create_cq(4)
    qp = ctx.create_qp(cq, cq, qp_num=1)
    ctx.modify_qp(qp, QpState.INIT)
    assert qp.state is QpState.INIT and nic.contexts[1]["state"] == QpState.INIT.value
    ctx.modify_qp(qp, QpState.RTR, **RTR, path_mtu=1024, mode=SrMode.PLAIN, template=3,
                  rkey=0x103, mr_va=0x4300_0000, mr_length=1 << 24, rq_msn=9)
    assert nic.contexts[1] == {
        "state": QpState.RTR.value, "dqp": 0x345, "mtu": 2, "mode": SrMode.PLAIN.value,
        "template": 3, "dst_mac": 0x02_00_00_00_00_02, "dst_ip": 0xFD00 << 112 | 2,
        "next_psn": 0, "msn": 0, "rkey": 0x103, "mr_va": 0x4300_0000, "mr_length": 1 << 24,
        "rx_psn": 0x1111, "rx_msn": 9, "cc_profile": 0}
    rtr = nic.contexts[1]
    ctx.modify_qp(qp, QpState.RTS, sq_psn=0x2222, sq_msn=5)
    # RTS adds what it takes to what RTR wrote
    assert nic.contexts[1] == rtr | {"state": QpState.RTS.value, "next_psn": 0x2222, "msn": 5}
    ctx.modify_qp(qp, QpState.ERROR)
    assert nic.contexts[1]["state"] == QpState.ERROR.value and nic.contexts[1]["dqp"] == 0x345
    ctx.modify_qp(qp, QpState.RESET)
    assert nic.contexts[1]["state"] == 0 and nic.contexts[1]["dqp"] == 0   # the context cleared
    assert qp.state is QpState.RESET


def test_the_next_hops_stand_for_a_missing_dst_mac():
    nic, ctx = context()
    cq = ctx.create_cq(4)
    qp = ctx.create_qp(cq, cq)
    ctx.modify_qp(qp, QpState.INIT)
    rtr = {k: v for k, v in RTR.items() if k != "dst_mac"}
    nic.set("net.next_hop_p0", 0x02_00_00_00_00_AA)
    refused(InvalidArgument, errno.EINVAL, ctx.modify_qp, qp, QpState.RTR, **rtr,
            match=r"needs dst_mac: plane 1 has no next hop \(net.next_hop_p1 is 0\)")
    nic.set("net.next_hop_p1", 0x02_00_00_00_00_BB)
    ctx.modify_qp(qp, QpState.RTR, **rtr)
    assert qp.state is QpState.RTR and nic.contexts[0]["dst_mac"] == 0


@pytest.mark.parametrize("path,to", [
    ((), QpState.RTR), ((), QpState.RTS), ((QpState.INIT,), QpState.INIT),
    ((QpState.INIT,), QpState.RTS), ((QpState.INIT, QpState.RTR), QpState.INIT),
    ((QpState.INIT, QpState.RTR, QpState.RTS), QpState.RTS),
    ((QpState.INIT, QpState.RTR, QpState.RTS), QpState.RTR),
    ((QpState.ERROR,), QpState.INIT),
])
def test_moves_the_state_machine_lacks_are_einval(path, to):
    nic, ctx = context()
    cq = ctx.create_cq(4)
    qp = ctx.create_qp(cq, cq)
    args = {QpState.RTR: RTR, QpState.RTS: {"sq_psn": 1}}
    for state in path:
        ctx.modify_qp(qp, state, **args.get(state, {}))
    writes, state = list(nic.writes), qp.state
    refused(InvalidArgument, errno.EINVAL, ctx.modify_qp, qp, to, **args.get(to, {}),
            match=f"is {state.name}: QPs go RESET -> INIT -> RTR -> RTS")
    assert nic.writes == writes and qp.state is state


@pytest.mark.parametrize("to,attrs,cls,match", [
    (QpState.INIT, {"ev_profile_id": 7}, InvalidArgument, "EV profile 7 is INIT; a QP takes "
                                                           "an ONLINE one"),
    (QpState.INIT, {"cc_profile_id": 1}, InvalidArgument, "CC profile 1 is INIT; a QP takes "
                                                          "an ONLINE one"),
    (QpState.INIT, {"cc_profile_id": 1 << 64}, InvalidArgument, "cc_profile_id is 0 .. "),
    (QpState.RTR, {**RTR, "route": "0xfcbb/16"}, InvalidArgument, "route is the UsidTemplate"),
    (QpState.RTR, {**RTR, "route": ONE_USID}, InvalidArgument, "given none at INIT"),
    (QpState.INIT, {"ev_profile_id": -1}, InvalidArgument, "ev_profile_id is 0 .. "),
    (QpState.INIT, {"sq_psn": 1}, InvalidArgument, "sq_psn is not taken there"),
    (QpState.INIT, {"qkey": 1}, InvalidArgument, "qkey is not taken there"),
    (QpState.RTR, {**RTR, "dest_qp": None}, InvalidArgument, "needs dest_qp"),
    (QpState.RTR, {"dst_ip": "fd00::2"}, InvalidArgument, "needs dest_qp, rq_psn"),
    (QpState.RTR, {**RTR, "dest_qp": 2}, InvalidArgument, "where EV probes go"),
    (QpState.RTR, {**RTR, "dest_qp": 1 << 24}, InvalidArgument, "dest_qp is 0 .. 16777215"),
    (QpState.RTR, {**RTR, "rq_psn": 1 << 24}, InvalidArgument, "rq_psn"),
    (QpState.RTR, {**RTR, "dst_ip": "nope"}, InvalidArgument, "not an IPv6 address"),
    (QpState.RTR, {**RTR, "dst_mac": "02:00"}, InvalidArgument, "not a MAC address"),
    (QpState.RTR, {**RTR, "path_mtu": 1500}, InvalidArgument, "MTU 1500"),
    (QpState.RTR, {**RTR, "mode": 5}, InvalidArgument, "mode is an SrMode"),
    (QpState.RTR, {**RTR, "template": 4}, InvalidArgument, "template 4 does not exist"),
    (QpState.RTR, {**RTR, "mr_length": 1 << 64}, InvalidArgument, "mr_length"),
    (QpState.RTR, {**RTR, "mpr_dest": 64}, NotPermitted, "receive window is fixed"),
    (QpState.RTR, {**RTR, "max_write_imm": 8}, NotPermitted, "as many writes with immediate"),
    (QpState.RTR, {**RTR, "dynamic_mpr": True}, NotPermitted, "dynamic_mpr True"),
    (QpState.RTS, {}, InvalidArgument, "needs sq_psn"),
    (QpState.RTS, {"sq_psn": 1, "timeout": 25}, InvalidArgument, "timeout is 0 .. 24"),
    (QpState.RTS, {"sq_psn": 1, "timeout": 14}, NotPermitted, "rel.rto_min .. rel.rto_max"),
    (QpState.RTS, {"sq_psn": 1, "linear_cnt": 8}, InvalidArgument, "linear_cnt is 0 .. 7"),
    (QpState.RTS, {"sq_psn": 1, "linear_cnt": 7}, NotPermitted, "no retry count"),
    (QpState.RTS, {"sq_psn": 1, "exp_cnt": 26}, InvalidArgument, "exp_cnt is 0 .. 25"),
    (QpState.RTS, {"sq_psn": 1, "exp_cnt": 25}, NotPermitted, "neither backs off nor counts"),
    (QpState.RTS, {"sq_psn": 1, "mpr": 4}, NotPermitted, "receive window is fixed"),
    (QpState.ERROR, {"sq_psn": 1}, InvalidArgument, "it takes no attribute"),
])
def test_every_refusal_names_its_reason_and_writes_nothing(to, attrs, cls, match):
    nic, ctx = context()
    cq = ctx.create_cq(4)
    qp = ctx.create_qp(cq, cq)
    before = {QpState.INIT: (), QpState.RTR: (QpState.INIT,),
              QpState.RTS: (QpState.INIT, QpState.RTR), QpState.ERROR: ()}[to]
    for state in before:
        ctx.modify_qp(qp, state, **(RTR if state is QpState.RTR else {}))
    writes, state = list(nic.writes), qp.state
    code = errno.EPERM if cls is NotPermitted else errno.EINVAL
    refused(cls, code, ctx.modify_qp, qp, to, **attrs, match=match)
    assert nic.writes == writes and qp.state is state


def test_what_agrees_with_the_nic_is_taken():
    _, ctx = context()
    cq = ctx.create_cq(4)
    qp = ctx.create_qp(cq, cq)
    ctx.modify_qp(qp, QpState.INIT, ev_profile_id=None, cc_profile_id=None)
    ctx.modify_qp(qp, QpState.RTR, **RTR, dynamic_mpr=False)
    assert qp.state is QpState.RTR


def test_a_nic_that_fails_a_transition_leaves_the_qp_in_error():
    nic, ctx = context()
    cq = ctx.create_cq(4)
    qp = ctx.create_qp(cq, cq)
    refuse = nic.write

    def write(offset, value):            # the NIC refuses the QP number: counted, not taken
        if regmap.by_offset(offset).path == "qp.write":
            nic.set(regmap.BUS_ERRORS, nic.value(regmap.BUS_ERRORS) + 1)
            return
        refuse(offset, value)

    nic.write = write
    refused(IoError, errno.EIO, ctx.modify_qp, qp, QpState.INIT, match="refused 1 access")
    assert qp.state is QpState.ERROR
    refused(InvalidArgument, errno.EINVAL, ctx.modify_qp, qp, QpState.RTR, **RTR)


# -- the application API: work requests and completions ------------------------------------


def test_a_write_needs_an_rts_qp_and_arguments_the_nic_takes():
    nic, ctx = context()
    cq = ctx.create_cq(4)
    qp = ctx.create_qp(cq, cq)
    refused(InvalidArgument, errno.EINVAL, ctx.post_write, qp, 1, 0, 8, 0, 0,
            match="is RESET: a QP sends in RTS only")
    _, qp = rts_qp(ctx, qp_num=2)
    writes = list(nic.writes)
    for args, cls, match in (
            ((1 << 16, 0, 8, 0, 0), InvalidArgument, "wr_id is 0 .. 65535"),
            ((1, 0, 0, 0, 0), NotPermitted, "ZERO_LENGTH"),
            ((1, 0, (1 << 31) + 1, 0, 0), InvalidArgument, "above max_msg_sz"),
            ((1, 0, -1, 0, 0), InvalidArgument, "number of bytes"),
            ((1, 1 << 64, 8, 0, 0), InvalidArgument, "laddr"),
            ((1, 0, 8, 0, 1 << 32), InvalidArgument, "rkey")):
        code = errno.EPERM if cls is NotPermitted else errno.EINVAL
        refused(cls, code, ctx.post_write, qp, *args, match=match)
    nic.set("global.control", 0)
    refused(InvalidArgument, errno.EINVAL, ctx.post_write, qp, 1, 0, 8, 0, 0,
            match="global.control bit 0 is clear")
    assert nic.writes == writes and nic.posted == []


def test_completions_are_work_completions_and_plain_receives_are_dropped():
    nic, ctx = context()
    cq, qp = rts_qp(ctx, qp_num=1)
    ctx.post_write(qp, 7, 0x1000, 100, 0x4300_0000, 0x103)
    ctx.post_write(qp, 8, 0x1000, 5, 0x4300_0000, 0x103, imm=0xC0FFEE)
    assert [p["opcode"] for p in nic.posted] == [0, 1]
    nic.push(entry(qp=1, recv=1, msn=4))                             # no immediate
    nic.push(entry(qp=1, recv=1, has_imm=1, msn=5, imm=0xFEED))
    nic.push(entry(wr_id=9, qp=3, status=WrStatus.BAD_QP.value))     # another's post
    assert ctx.poll_cq(cq, 2) == [
        WorkCompletion(7, WrStatus.OK, WcOpcode.RDMA_WRITE, 1, None, 100),
        WorkCompletion(8, WrStatus.OK, WcOpcode.RDMA_WRITE, 1, None, 5)]
    # the receive without immediate is taken off and dropped; the one with it counts
    assert ctx.poll_cq(cq, 1) == [
        WorkCompletion(None, WrStatus.OK, WcOpcode.RECV_RDMA_WITH_IMM, 1, 0xFEED, None)]
    assert len(nic.queue) == 1
    assert ctx.poll_cq(cq, 8) == [
        WorkCompletion(9, WrStatus.BAD_QP, WcOpcode.RDMA_WRITE, 3, None, None)]
    assert ctx.poll_cq(cq, 8) == []
    refused(InvalidArgument, errno.EINVAL, ctx.poll_cq, cq, -1)


def test_lost_completions_are_eio_once_and_nothing_is_taken():
    nic, ctx = context(depth=2)
    nic.set("cq.overflows", 5)                 # lost before the CQ existed: not its loss
    cq, qp = rts_qp(ctx)
    for w in range(3):
        ctx.post_write(qp, w, 0, 1, 0, 0)
    refused(IoError, errno.EIO, ctx.poll_cq, cq, 4, match="1 completion")
    assert len(nic.queue) == 2
    assert [wc.wr_id for wc in ctx.poll_cq(cq, 4)] == [0, 1]


def test_the_applications_buffers_through_the_window():
    nic, ctx = context()
    ctx.write_memory(0x1005, b"hello, world")
    assert bytes(nic.memory[0x1005:0x1011]) == b"hello, world"
    assert ctx.read_memory(0x1003, 4) == bytes(nic.memory[0x1003:0x1005]) + b"he"
    refused(IoError, errno.EIO, ctx.read_memory, 0x1FFF, 2,
            match="refused a read of 1 bytes at 0x2000")
    refused(InvalidArgument, errno.EINVAL, ctx.write_memory, -1, b"x")


# -- the NIC's store: what one program made, another finds -------------------------------------


def again(nic) -> Context:
    """The context of another program on the same NIC."""
    return Context(RegisterClient(nic))


def test_a_new_context_finds_the_cq_and_the_qps_as_they_were_left():
    nic, ctx = context(depth=8)
    cq, qp1 = rts_qp(ctx, qp_num=1, rkey=0x103, mr_va=0x4300_0000, mr_length=1 << 24)
    qp3 = ctx.create_qp(cq, cq, qp_num=3)
    ctx.modify_qp(qp3, QpState.INIT)
    writes = list(nic.writes)
    other = again(nic)
    assert nic.writes == writes                                       # finding writes nothing
    assert other.cq().cqe == 8
    assert [(q.qp_num, q.state) for q in other.qps()] == [(1, QpState.RTS), (3, QpState.INIT)]
    assert other.qp(1).config == qp1.config
    assert other.qp(1).region == Region(0x103, 0x4300_0000, 1 << 24)
    assert other.qp(1).send_cq is other.qp(1).recv_cq is other.cq()
    refused(InvalidArgument, errno.EINVAL, other.qp, 2, match="QP 2 is not created")
    refused(InvalidArgument, errno.EINVAL, other.qp, 4, match=r"qp_num is 0 \.\. 3")
    refused(TooBig, errno.E2BIG, other.create_cq, 1, match="one completion queue")
    refused(Busy, errno.EBUSY, other.create_qp, other.cq(), other.cq(), qp_num=3)
    # what the other program does with them, this one sees, on the objects it holds
    other.post_write(other.qp(1), 7, 0x1000, 8, 0x4300_0000, 0x103)
    assert nic.posted[-1]["qp"] == 1
    other.modify_qp(other.qp(3), QpState.RTR, **RTR)
    assert ctx.qp(3) is qp3 and qp3.state is QpState.RTR
    other.destroy_qp(other.qp(1))
    assert [q.qp_num for q in ctx.qps()] == [3] and ctx.cq() is cq
    refused(InvalidArgument, errno.EINVAL, ctx.modify_qp, qp1, QpState.ERROR,
            match="not a QP of this context")
    # the write's length is known to the program that posted it only
    assert ctx.poll_cq(cq, 4) == [WorkCompletion(7, WrStatus.OK, WcOpcode.RDMA_WRITE, 1, None,
                                                 None)]


def test_the_store_holds_the_controllers_part_beside_the_applications():
    nic = ProfiledNic()
    regs = RegisterClient(nic)
    Context(regs).create_cq(1)                   # the first document the NIC holds
    ctl = Controller(regs)                       # reads it: no profile yet
    assert ctl.query_cc_profile(3).state is S.INIT
    nscc(ctl, 3, target_delay=5000)
    ctx = again(nic)
    ctx.create_qp(ctx.cq(), ctx.cq(), qp_num=2)
    _, doc = regs.run(store.load())
    assert set(doc) == {"app", "ctl"}
    assert Controller(regs).query_cc_profile(3).state is S.ONLINE
    assert [q.qp_num for q in again(nic).qps()] == [2]


def test_another_program_changing_the_qps_meanwhile_is_ebusy_one_changing_profiles_is_not():
    nic, ctx = context()
    cq = ctx.create_cq(1)
    other = again(nic)
    meanwhile = []
    write = nic.write

    def write_then_act(offset, value):     # the other program acts while a QP is written
        write(offset, value)
        if regmap.by_offset(offset).path == "qp.write" and meanwhile:
            meanwhile.pop()()

    nic.write = write_then_act
    meanwhile.append(lambda: other.create_qp(other.cq(), other.cq(), qp_num=2))
    refused(Busy, errno.EBUSY, ctx.create_qp, cq, cq, qp_num=1,
            match="another program changed the application's CQ and QPs in the NIC's store")
    # the other's QP stands; this one's is on the NIC but not in the store
    assert [q.qp_num for q in again(nic).qps()] == [2] and nic.contexts.keys() == {1, 2}
    assert [q.qp_num for q in ctx.qps()] == [2]
    meanwhile.append(lambda: nscc(Controller(RegisterClient(nic)), 3))
    ctx.create_qp(cq, cq, qp_num=1)
    assert [q.qp_num for q in again(nic).qps()] == [1, 2]
    assert Controller(RegisterClient(nic)).query_cc_profile(3).state is S.ONLINE


def test_lost_completions_are_eio_once_whichever_program_polls():
    nic, ctx = context(depth=2)
    nic.set("cq.overflows", 5)                 # lost before the CQ existed: not its loss
    cq, qp = rts_qp(ctx)
    first = again(nic)
    assert first.poll_cq(first.cq(), 4) == []
    for w in range(3):
        ctx.post_write(qp, w, 0, 1, 0, 0)
    other = again(nic)
    refused(IoError, errno.EIO, other.poll_cq, other.cq(), 4, match="1 completion")
    assert ctx.poll_cq(cq, 1)[0].wr_id == 0      # told already, by the other program
    third = again(nic)
    assert [wc.wr_id for wc in third.poll_cq(third.cq(), 4)] == [1]


def test_a_nic_built_without_a_store_keeps_nothing_and_each_context_what_it_made():
    class Older(NicModel):
        def read(self, offset):
            if regmap.by_offset(offset).path == "store.data":
                raise StatusError(Status.BAD_ADDRESS, "nothing at the address")
            return super().read(offset)

    nic = Older()
    ctx = again(nic)
    cq, qp = rts_qp(ctx)
    assert ctx.qps() == [qp] and ctx.cq() is cq and nic.contexts[1]["state"] == QpState.RTS.value
    assert [o for o, _ in nic.writes if regmap.by_offset(o).path == "store.data"] == []
    other = again(nic)
    assert other.qps() == [] and other.cq() is None


def test_a_region_is_given_in_reset_or_init_and_rtr_keeps_it():
    nic, ctx = context()
    cq = ctx.create_cq(1)
    qp = ctx.create_qp(cq, cq, qp_num=1)
    writes = list(nic.writes)
    for kw, match in (({"va": 0, "length": 0, "rkey": 1}, r"length is 1 \.\. "),
                      ({"va": -1, "length": 1, "rkey": 1}, r"va is 0 \.\. "),
                      ({"va": 0, "length": 1, "rkey": 1 << 32}, r"rkey is 0 \.\. "),
                      ({"va": (1 << 64) - 4, "length": 8, "rkey": 1}, "past the end")):
        refused(InvalidArgument, errno.EINVAL, ctx.set_region, qp, **kw, match=match)
    assert nic.writes == writes and qp.region is None
    region = ctx.set_region(qp, va=0x4300_0000, length=1 << 20, rkey=0x103)
    assert region == qp.region == Region(0x103, 0x4300_0000, 1 << 20)
    assert (nic.contexts[1]["state"], nic.contexts[1]["rkey"], nic.contexts[1]["mr_va"],
            nic.contexts[1]["mr_length"]) == (QpState.RESET.value, 0x103, 0x4300_0000, 1 << 20)
    writes = list(nic.writes)
    refused(TooBig, errno.E2BIG, ctx.set_region, qp, va=0, length=1, rkey=1,
            match=r"has its region already \(rkey 0x103, 1048576 bytes at 0x43000000\)")
    assert nic.writes == writes
    ctx.modify_qp(qp, QpState.INIT)
    ctx.modify_qp(qp, QpState.RTR, **RTR)
    assert {k: nic.contexts[1][k] for k in ("state", "rkey", "mr_va", "mr_length")} == {
        "state": QpState.RTR.value, "rkey": 0x103, "mr_va": 0x4300_0000, "mr_length": 1 << 20}
    writes = list(nic.writes)
    refused(InvalidArgument, errno.EINVAL, ctx.set_region, qp, va=0, length=1, rkey=1,
            match="QP 1 is RTR: its region is given in RESET or INIT")
    assert nic.writes == writes
    ctx.modify_qp(qp, QpState.RESET)                   # clears it
    assert qp.region is None and nic.contexts[1]["mr_length"] == 0
    ctx.modify_qp(qp, QpState.INIT)
    ctx.set_region(qp, va=0x1000, length=64, rkey=0x103)
    ctx.modify_qp(qp, QpState.RTR, **RTR, rkey=0x204)   # what RTR gives takes the place
    assert again(nic).qp(1).region == Region(0x204, 0x1000, 64)
    assert nic.contexts[1]["rkey"] == 0x204


# -- the EV and CC profiles a QP is given ----------------------------------------------------


class ProfiledNic(NicModel, FakeNic):
    """The model with the EV tables of verif/test_ctl.py's FakeNic (``tables``), so that a
    controller's loads into a QP's table show."""


def profiled(**build):
    """A NIC whose controller has EV profile 7 ONLINE (SRv6, GENERATED, 8 EVs, for a QP of
    template ONE_USID); that controller, and a context."""
    nic = ProfiledNic(**build)
    regs = RegisterClient(nic)
    ctl = Controller(regs)
    srv6_format(ctl)
    generated(ctl)
    return nic, ctl, Context(regs)


def test_an_ev_profile_given_at_init_is_loaded_at_rtr_and_taken_out_at_reset():
    nic, ctl, ctx = profiled()
    cq = ctx.create_cq(1)
    qp = ctx.create_qp(cq, cq, qp_num=2)
    ctx.modify_qp(qp, QpState.INIT, ev_profile_id=7)
    assert qp.ev_profile_id == 7 and nic.tables.get(2, []) == []   # the route is not known yet
    ctx.modify_qp(qp, QpState.RTR, **RTR, mode=SrMode.USID, template=2, route=ONE_USID)
    b = ctl.binding(2)
    assert (b.profile_id, b.template, b.mode) == (7, ONE_USID, SrMode.USID)
    assert [nic.tables[2][entry][0] for entry in b.entries] == list(b.nic_evs)
    assert nic.contexts[2]["state"] == QpState.RTR.value
    assert again(nic).qp(2).ev_profile_id == 7
    ctx.modify_qp(qp, QpState.RTS, sq_psn=1)
    assert ctl.binding(2) == b
    ctx.destroy_qp(qp)                                   # through RESET
    assert nic.tables[2] == [] and ctl.binding(2) is None
    assert nic.contexts[2]["state"] == QpState.RESET.value


def test_a_plain_qp_takes_no_srv6_profile_and_one_in_reset_again_takes_none():
    nic, ctl, ctx = profiled()
    cq = ctx.create_cq(1)
    qp = ctx.create_qp(cq, cq, qp_num=1)
    ctx.modify_qp(qp, QpState.INIT, ev_profile_id=7)
    ctx.modify_qp(qp, QpState.RESET)                      # never loaded: nothing to take out
    assert qp.ev_profile_id is None and ctl.binding(1) is None
    ctx.modify_qp(qp, QpState.INIT)
    ctx.modify_qp(qp, QpState.RTR, **RTR, mode=SrMode.PLAIN)
    assert ctl.binding(1) is None and nic.tables.get(1, []) == []


@pytest.mark.parametrize("init,rtr,cls,match", [
    ({"ev_profile_id": 9}, None, InvalidArgument, "EV profile 9 is INIT; a QP takes an ONLINE"),
    ({"ev_profile_id": 8}, None, InvalidArgument, "EV profile 8 is OFFLINE"),
    ({"ev_profile_id": 7}, {"mode": SrMode.USID}, InvalidArgument, "give the UsidTemplate"),
    ({"ev_profile_id": 7}, {"mode": SrMode.PLAIN, "route": ONE_USID}, NotPermitted,
     "sends no SRv6 header"),
    # a route whose spine uSID is not the one the profile's EVs vary: no NIC EV puts them on
    # the wire
    ({"ev_profile_id": 7}, {"mode": SrMode.USID,
                            "route": UsidTemplate(BLOCK, (0x20, 0x10), 0, BLOCK_BITS)},
     NotPermitted, "EV 0"),
    # the driver's own checks come before the load
    ({"ev_profile_id": 7}, {"mode": SrMode.USID, "route": ONE_USID, "template": 4},
     InvalidArgument, "template 4 does not exist"),
])
def test_an_ev_profile_the_qp_cannot_take_is_refused_with_nothing_written(init, rtr, cls, match):
    nic, ctl, ctx = profiled()
    generated(ctl, pid=8, online=False)
    cq = ctx.create_cq(1)
    qp = ctx.create_qp(cq, cq, qp_num=2)
    if rtr is not None:
        ctx.modify_qp(qp, QpState.INIT, **init)
    writes, state = list(nic.writes), qp.state
    code = errno.EPERM if cls is NotPermitted else errno.EINVAL
    if rtr is None:
        refused(cls, code, ctx.modify_qp, qp, QpState.INIT, **init, match=match)
    else:
        refused(cls, code, ctx.modify_qp, qp, QpState.RTR, **RTR, **rtr, match=match)
    assert nic.writes == writes and qp.state is state
    assert nic.tables.get(2, []) == [] and ctl.binding(2) is None


def rel_writes(nic) -> list:
    return [(o, v) for o, v in nic.writes if regmap.by_offset(o).block == "rel"]


def test_a_cc_profile_given_at_init_is_applied_and_holds_the_one_set_of_registers():
    nic, ctl, ctx = profiled()
    nscc(ctl, 3, target_delay=5000, base_rtt=3000, max_cwnd=123_456)
    cq = ctx.create_cq(1)
    qps = [ctx.create_qp(cq, cq, qp_num=n) for n in range(4)]
    ctx.modify_qp(qps[0], QpState.INIT, cc_profile_id=3)
    # 8000 ns at 250 MHz
    assert (nic.value("rel.target_rtt"), nic.value("rel.cwnd_max")) == (2000, 123_456)
    assert qps[0].cc_profile_id == 3 and again(nic).qp(0).cc_profile_id == 3
    applied = rel_writes(nic)
    ctx.modify_qp(qps[1], QpState.INIT, cc_profile_id=3)    # there already: not written again
    assert rel_writes(nic) == applied
    writes = list(nic.writes)
    refused(Busy, errno.EBUSY, ctx.modify_qp, qps[2], QpState.INIT, cc_profile_id=4,
            match="one set of congestion registers, which every QP's window follows, and QPs "
                  "0, 1 of this context follow CC profile 3 there: busy, not beyond the NIC")
    assert nic.writes == writes and qps[2].state is QpState.RESET
    # once no QP follows it, another profile may take the registers, if it is ONLINE
    ctx.modify_qp(qps[0], QpState.RESET)
    ctx.destroy_qp(qps[1])
    assert qps[0].cc_profile_id is None
    refused(InvalidArgument, errno.EINVAL, ctx.modify_qp, qps[2], QpState.INIT,
            cc_profile_id=4, match="CC profile 4 is INIT; a QP takes an ONLINE one")
    ctl.modify_cc_profile(3, state=S.OFFLINE)
    ctl.modify_cc_profile(3, state=S.INIT)
    nscc(ctl, 4, target_delay=1000)
    ctx.modify_qp(qps[2], QpState.INIT, cc_profile_id=4)
    assert nic.value("rel.target_rtt") == 250
    assert nic.contexts[2]["cc_profile"] == 0          # the rel.* registers: profile 0


def test_on_a_nic_with_cc_profiles_each_qp_is_given_the_one_it_names():
    nic, ctl, ctx = profiled(cc_profiles=4)
    nscc(ctl, 3, target_delay=5000)
    nscc(ctl, 5, target_delay=1000)
    cq = ctx.create_cq(1)
    qps = [ctx.create_qp(cq, cq, qp_num=n) for n in range(2)]
    rel = rel_writes(nic)
    ctx.modify_qp(qps[0], QpState.INIT, cc_profile_id=3)
    ctx.modify_qp(qps[1], QpState.INIT, cc_profile_id=5)        # another: no conflict
    numbers = [ctl.cc_profile_number(3), ctl.cc_profile_number(5)]
    assert [nic.contexts[n]["cc_profile"] for n in range(2)] == numbers and 0 not in numbers
    assert rel_writes(nic) == rel                                 # profile 0 untouched
    ctx.modify_qp(qps[0], QpState.RTR, **RTR)
    assert nic.contexts[0]["cc_profile"] == numbers[0]            # kept by each transition
    ctx.modify_qp(qps[0], QpState.RESET)
    assert nic.contexts[0]["cc_profile"] == 0
    ctl.modify_cc_profile(3, state=S.OFFLINE)
    refused(InvalidArgument, errno.EINVAL, ctx.modify_qp, qps[0], QpState.INIT, cc_profile_id=3,
            match="CC profile 3 is OFFLINE")


# -- the CLI's write and mem verbs against the model ---------------------------------------


class ModelDevice:
    """What the CLI's verbs use of a target.Device, over the model."""

    def __init__(self, nic):
        self.nic, self.regs = nic, RegisterClient(nic)
        self.info = self.regs.run(driver.identify())

    def read(self, path):
        return self.regs.read(path)

    def write(self, path, value):
        if regmap.by_name(path).access is regmap.Access.CMD:
            self.regs.command(path, value)
        else:
            self.regs.write(path, value)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass


@pytest.fixture
def model_cli(monkeypatch, capsys):
    nic = NicModel()
    monkeypatch.setattr(cli, "_device", lambda args, where=None: ModelDevice(nic))

    def run(*argv):
        code = cli.main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err
    return nic, run


WRITE = ("write", "1", "--laddr", "0x1000", "--va", "0x43000000", "--rkey", "0x103",
         "--length", "64")


def test_cli_write_posts_and_prints_its_completion(model_cli):
    nic, run = model_cli
    nic.push(entry(qp=0, recv=1, msn=3))              # ahead of it: taken off, and said so
    code, out, err = run(*WRITE, "--wr-id", "0x33", "--imm", "0xfeed")
    assert code == 0
    assert out.split("\n")[0].split() == ["qp", "wr_id", "opcode", "length", "imm", "status"]
    assert out.split("\n")[1].split() == ["1", "51", "WRITE_IMM", "64", "0xfeed", "OK"]
    assert err == "mrcnic write: 1 other completion(s) were ahead of it in the queue and were " \
                  "taken off\n"
    assert nic.posted[0] == {"wr_id": 0x33, "qp": 1, "opcode": 1, "laddr": 0x1000,
                             "va": 0x4300_0000, "rkey": 0x103, "length": 64, "imm": 0xFEED}
    assert nic.value("cq.route") == 0                 # send completions went back
    code, out, _ = run("-j", *WRITE)
    assert code == 0 and json.loads(out) == {"qp": 1, "wr_id": 1, "opcode": "WRITE",
                                             "length": 64, "status": "OK"}


def test_cli_write_fails_on_a_bad_status_or_no_completion(model_cli):
    nic, run = model_cli
    nic.status = WrStatus.QP_NOT_RTS
    code, out, err = run(*WRITE)
    assert code == 1 and "QP_NOT_RTS" in out
    assert err == "mrcnic write: QP 1 work request 0 failed: QP_NOT_RTS\n"
    nic.complete = False
    code, out, err = run(*WRITE, "--timeout", "0.05")
    assert (code, out) == (1, "") and len(err.splitlines()) == 1
    assert "no completion of QP 1 work request 1 within 0.05 s" in err
    nic.set("global.control", 0)
    code, _, err = run(*WRITE)
    assert code == 1 and "global.control bit 0 is clear" in err and len(nic.posted) == 2
    code, _, err = run(*WRITE[:1], "4", *WRITE[2:])
    assert code == 2 and "QP 4 does not exist" in err and len(nic.posted) == 2


def test_cli_mem_reads_as_hexdump_and_writes_hex_or_a_file(model_cli, tmp_path):
    nic, run = model_cli
    assert run("mem", "write", "0x1001", "68656c6c6f0a")[0] == 0
    f = tmp_path / "b.bin"
    f.write_bytes(bytes(range(20)))
    assert run("mem", "write", "0x1007", "--file", str(f)) == (0, "", "")
    code, out, _ = run("mem", "read", "0x1000", "40")
    assert code == 0
    lines = out.splitlines()
    row = bytes(nic.memory[0x1000:0x1010])
    first = row[0]
    assert row[1:] == b"hello\n\x00\x01\x02\x03\x04\x05\x06\x07\x08"
    text = (chr(first) if 0x20 <= first < 0x7F else ".") + "hello" + "." * 10
    assert lines[0] == ("0000000000001000  " + " ".join(f"{b:02x}" for b in row[:8]) + "  "
                        + " ".join(f"{b:02x}" for b in row[8:]) + f"  |{text}|")
    assert len(lines) == 3 and lines[2].startswith("0000000000001020  ")
    assert lines[2].split("  ")[1].split() == [f"{b:02x}" for b in nic.memory[0x1020:0x1028]]
    code, out, _ = run("-j", "mem", "read", "0x1001", "6")
    assert json.loads(out) == {"addr": 0x1001, "length": 6, "data": "68656c6c6f0a"}
    assert bytes(nic.memory[0x1007:0x101B]) == bytes(range(20))
    code, _, err = run("mem", "read", "0x1ff0", "32")
    assert code == 1 and err == "mrcnic mem read: the memory refused a read of 16 bytes at " \
                                "0x2000 (mem.error)\n"
