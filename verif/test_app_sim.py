"""The application API (mrcnic.app) and the register path it takes (wq.*, cq.*, mem.*) on the
two NICs of ``mrcnic sim serve``: the OCP application flow, QPs taken RESET -> INIT -> RTR ->
RTS on both NICs, writes of 1 B to 1 MiB with and without an immediate, their completions
polled from the registers, and the peer's memory checked byte for byte through the simulated
host's memory, a path the NIC takes no part in. The NIC's own memory window is checked
against that path too, and the CLI's write and mem verbs run on the same NICs."""

from __future__ import annotations

import json
import random
import time

import pytest

from mrcnic import driver, regmap, store
from mrcnic.app import Context, WcOpcode
from mrcnic.ctl import NSCC, Controller, NsccConfig, ProfileState
from mrcnic.ctl_errors import InvalidArgument, IoError
from mrcnic.enums import EvState, QpState, SrMode, WrStatus
from mrcnic.regclient import RegisterError
from mrcnic.regmap import MEM_WINDOW_BYTES
from mrcnic.simctl import RECV_BASE, REGION, SEND_BASE, SimClient, entry_path
from mrcnic.target import Device
from mrcnic.verif.cli_helpers import mrcnic
from mrcnic.verif.fabric import nic_ip

QP = 1          # the system testbench set up QPs 0, 1 and 3 (2 is the probes' DQP) and pinged on
                # QP 0: this one is ours
CLI_QP = 3
#: how long a write may take, in simulated time (the largest, 1 MiB, takes well under a
#: millisecond); the wall clock only guards against a simulation that stopped, since a busy
#: machine slows the simulation down without anything being wrong with the NIC
SIM_BUDGET_NS = 5_000_000
HANG_SECONDS = 600


@pytest.fixture(scope="module")
def nics(served):
    devs = [Device(url) for url in served.urls]
    yield [(dev, Context(dev.regs), SimClient(dev.client)) for dev in devs]
    for dev in devs:
        dev.close()


def dev_qps(dev) -> int:
    return dev.read("global.qps")


class SimDeadline:
    """``budget_ns`` of ``sim``'s time from now; the wall clock only guards against a
    simulation that stopped."""

    def __init__(self, sim, budget_ns: int = SIM_BUDGET_NS):
        self.sim, self.budget = sim, budget_ns
        self.start, self.hang = sim.time_ns(), time.monotonic() + HANG_SECONDS

    def passed(self) -> bool:
        return self.spent() >= self.budget or time.monotonic() >= self.hang

    def spent(self) -> int:
        return self.sim.time_ns() - self.start


def _wait(ctx, cq, sim, want: int, qp: int = QP) -> list:
    """Polls until ``want`` work completions of QP ``qp`` have come (the CQ takes every QP's:
    the other tests' QPs may have left some), within SIM_BUDGET_NS of ``sim``'s time."""
    got, deadline = [], SimDeadline(sim)
    while len(got) < want:
        assert not deadline.passed(), (f"{len(got)} of {want} completions after "
                                       f"{deadline.spent()} ns of simulated time: {got}")
        got += [c for c in ctx.poll_cq(cq, want - len(got)) if c.qp_num == qp]
    return got


#: the CC profile NIC 0's QP follows: its window never above this (NSCC's max_cwnd), where the
#: rel.* registers, every other QP's, let one grow to a MiB
CC_PROFILE, MAX_CWND = 21, 8192


@pytest.fixture(scope="module")
def connected(nics):
    """QP ``QP`` of each NIC connected to the other's, through the verbs state machine; NIC
    0's follows CC profile ``CC_PROFILE``."""
    rng = random.Random(7)
    psn = [rng.getrandbits(24), rng.getrandbits(24)]
    qps = []
    dev0 = nics[0][0]
    dev0.regs.run(store.clear())       # what other modules' tests kept on this NIC
    ctl = Controller(dev0.regs)
    ctl.modify_cc_profile(CC_PROFILE, state=ProfileState.OFFLINE, algorithm=NSCC)
    ctl.modify_cc_profile(CC_PROFILE, state=ProfileState.ONLINE,
                          config=NsccConfig(max_cwnd=MAX_CWND))
    assert dev0.read("rel.cwnd_max") > MAX_CWND
    for me, (_, ctx, _) in enumerate(nics):
        peer = 1 - me
        attr = ctx.query_device()
        assert attr.max_qp == dev_qps(nics[me][0]) > QP
        cq = ctx.create_cq(attr.max_cqe)
        qp = ctx.create_qp(cq, cq, qp_num=QP)
        assert qp.state is QpState.RESET
        with pytest.raises(InvalidArgument, match="RTS"):
            ctx.post_write(qp, 1, SEND_BASE, 1, RECV_BASE, 0)      # not RTS yet
        ctx.modify_qp(qp, QpState.INIT, **({"cc_profile_id": CC_PROFILE} if me == 0 else {}))
        ctx.modify_qp(qp, QpState.RTR, dest_qp=QP, dst_ip=nic_ip(peer), rq_psn=psn[peer],
                      mode=SrMode.USID, template=peer, path_mtu=1024,
                      rkey=0x200 + QP, mr_va=RECV_BASE + QP * REGION, mr_length=REGION)
        qps.append((ctx, cq, qp))
    for me, (ctx, _, qp) in enumerate(qps):
        ctx.modify_qp(qp, QpState.RTS, sq_psn=psn[me])
        assert qp.state is QpState.RTS
    return qps


@pytest.mark.parametrize("size,imm", [(1, None), (33, 0xC0FFEE), (4097, None),
                                      (65539, 0x12345678), (1 << 20, 0xFEEDF00D)])
def test_a_write_lands_whole_and_completes_on_both_sides(nics, connected, size, imm):
    (_, ctx0, sim0), (_, ctx1, sim1) = nics
    (_, cq0, qp0), (_, cq1, _) = connected
    rng = random.Random(size)
    data = rng.randbytes(size)
    laddr = SEND_BASE + rng.randrange(64)
    va = RECV_BASE + QP * REGION + rng.randrange(REGION - size)
    sim0.host_write(laddr, data)
    wr_id = size & 0xFFFF
    ctx0.post_write(qp0, wr_id, laddr, size, va, 0x200 + QP, imm)
    (sent,) = _wait(ctx0, cq0, sim0, 1)
    assert (sent.wr_id, sent.status, sent.opcode, sent.qp_num, sent.byte_len) == \
        (wr_id, WrStatus.OK, WcOpcode.RDMA_WRITE, QP, size)
    assert sim1.host_read(va, size) == data, "the peer's memory differs from what was written"
    if imm is not None:
        (got,) = _wait(ctx1, cq1, sim1, 1)
        assert (got.opcode, got.qp_num, got.imm_data, got.status) == \
            (WcOpcode.RECV_RDMA_WITH_IMM, QP, imm, WrStatus.OK)
    # a write without an immediate completes nothing on the receiving side
    assert [c for c in ctx1.poll_cq(cq1, 16) if c.qp_num == QP] == []


def test_the_qp_window_follows_its_own_cc_profile_and_each_path_is_counted(nics, connected):
    (dev0, ctx0, sim0), _ = nics
    (_, cq0, qp0), _ = connected
    size = 256 << 10

    def acked():
        got = dev0.regs.run(driver.keeping(("path.qp", "path.entry"), driver.path_stats(QP)))
        return sum(r["acked"] for r in got.values())
    before_acked = acked()
    ctx0.post_write(qp0, 0x5A, SEND_BASE, size, RECV_BASE + QP * REGION, 0x200 + QP)
    (sent,) = _wait(ctx0, cq0, sim0, 1)
    assert sent.status is WrStatus.OK
    number = Controller(dev0.regs).cc_profile_number(CC_PROFILE)
    view = dev0.regs.run(driver.keeping(("rel.view_qp",), driver.congestion(QP)))
    # 256 KiB of SACKs later, the window is still within its own profile's bounds
    assert view["cc_profile"] == number != 0
    assert 0 < view["cwnd"] <= MAX_CWND, view
    # every packet sent again counts on exactly the entry it had gone on
    qps, evs = dev0.info["qps"], dev0.info["evs"]
    stats = {q: dev0.regs.run(driver.keeping(("path.qp", "path.entry"), driver.path_stats(q)))
             for q in range(qps)}
    lost = sum(r["lost"] for per_qp in stats.values() for r in per_qp.values())
    rtx = sum(dev0.read(f"rel.rtx_{c}") for c in ("sack", "trim", "timeout"))
    assert lost == rtx
    mine = stats[QP]
    # the QP sprayed over its profile: entries on both planes took packets that arrived, and
    # each of the write's 256 packets (MTU 1024) arrived once, whatever was sent again
    arrived = {i for i, r in mine.items() if r["acked"]}
    assert {i % dev0.info["planes"] for i in arrived} == set(range(dev0.info["planes"]))
    assert sum(r["acked"] for r in mine.values()) - before_acked == size // 1024
    timed = {i: r for i, r in mine.items() if r["timed"]}
    assert timed and all(0 < r["rtt"] < 1 << 15 and r["ecn"] <= r["timed"] <= r["acked"]
                         for r in timed.values())
    assert len(mine) == evs
    # the CLI shows the same counts
    r = mrcnic("--target", str(dev0.target), "-j", "path", "show", str(QP))
    assert r.returncode == 0, r.stderr
    shown = {row["entry"]: row for row in json.loads(r.stdout)}
    for i in arrived:
        assert shown[i]["acked"] == mine[i]["acked"] and shown[i]["port"] == i % 2 + 1


def test_the_nic_window_and_the_host_see_the_same_bytes(nics):
    (dev0, ctx0, sim0), _ = nics
    rng = random.Random(3)
    for n in (0, 1, MEM_WINDOW_BYTES - 1, MEM_WINDOW_BYTES, MEM_WINDOW_BYTES + 1, 100):
        addr = SEND_BASE + 0x8000 + rng.randrange(64)
        data = rng.randbytes(n)
        ctx0.write_memory(addr, data)                     # through the NIC's window...
        assert sim0.host_read(addr, n + 8)[:n] == data    # ...is what the host holds
        other = rng.randbytes(n)
        sim0.host_write(addr, other)                      # and the other way round
        assert ctx0.read_memory(addr, n) == other
    errors = dev0.read("mem.errors")
    with pytest.raises(IoError, match="refused"):
        ctx0.read_memory(0x2000_0000, 4)                  # the host has no memory there
    assert dev0.read("mem.errors") == errors + 1 and dev0.read("mem.error") == 1


def test_the_cli_writes_and_reads_memory(served, nics):
    (dev0, _, sim0), (_, _, sim1) = nics
    url0, url1 = served.urls
    peer_va = RECV_BASE + CLI_QP * REGION + 0x40
    payload = bytes(range(1, 41))
    r = mrcnic("--target", url0, "mem", "write", hex(SEND_BASE + 0x100), "0x" + payload.hex())
    assert r.returncode == 0, r.stderr
    r = mrcnic("--target", url0, "-j", "mem", "read", hex(SEND_BASE + 0x100), "40")
    assert r.returncode == 0, r.stderr
    assert bytes.fromhex(json.loads(r.stdout)["data"].removeprefix("0x")) == payload
    # QP 3 is as the system testbench set it up: the peer's region has R_Key 0x103
    r = mrcnic("--target", url0, "-j", "write", str(CLI_QP), "--laddr", hex(SEND_BASE + 0x100),
               "--va", hex(peer_va), "--rkey", "0x103", "--length", "40", "--imm", "0x77")
    assert r.returncode == 0, r.stderr
    done = json.loads(r.stdout)
    assert done["status"] == "OK" and done["qp"] == CLI_QP, done
    assert sim1.host_read(peer_va, 40) == payload
    # a bad argument: one line, exit 2, nothing posted
    posted = dev0.read("wq.posted")
    r = mrcnic("--target", url0, "write", str(CLI_QP), "--laddr", "0x0", "--va", "0x0",
               "--rkey", "0x1", "--length", "0")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert dev0.read("wq.posted") == posted


def test_completions_not_routed_stay_with_the_stream(nics, connected):
    """With cq.route clear the NIC's completions go to its completion stream (the system
    testbench's host takes them there), and the register queue stays empty."""
    (dev0, ctx0, sim0), _ = nics
    (_, cq0, qp0), _ = connected
    dev0.regs.run(driver.route_completions(False, False))
    try:
        sim0.host_write(SEND_BASE, b"x" * 8)
        ctx0.post_write(qp0, 5, SEND_BASE, 8, RECV_BASE + QP * REGION, 0x200 + QP)
        time.sleep(2)
        assert dev0.read("cq.count") == 0
    finally:
        dev0.regs.run(driver.route_completions(True, True))


def test_a_dead_spine_link_shows_in_the_ev_events_and_its_return_too(nics):
    """EV events (evq.*) from the gateware: a spine link dies under a QP's traffic, and the
    NIC reports every entry on that path ASSUMED_BAD, none of them GOOD while it stays dead;
    the link comes back, the probes find it, and they are reported GOOD. Every event is a
    real change (an entry's events alternate), and none is lost. (A healthy entry may be
    taken for lost under the failover's reordering and reported ASSUMED_BAD: its probe then
    brings it back, which the events must show too.)"""
    (dev0, _, sim0), _ = nics
    regs, q = dev0.regs, 0
    planes, spines = sim0.info["planes"], sim0.info["spines"]
    size = dev0.read("global.evs")
    dead = {i for i in range(size) if entry_path(i, planes, spines) == (0, 1)}
    regs.run(driver.set_ev_event_mask({EvState.GOOD, EvState.ASSUMED_BAD}))
    while regs.run(driver.ev_events(64))[0]:
        pass                                   # what earlier tests left
    lost = dev0.read("evq.overflows")
    route = dev0.read("cq.route")
    regs.run(driver.route_completions(True, bool(route & 2)))
    history = {i: [] for i in range(size)}     # each entry's states, as reported

    def take():
        for e in regs.run(driver.ev_events(64))[0]:
            assert e.qp == q and not e.management and not e.replaced, f"unexpected {e}"
            for i in (e.index, *sorted(e.others)):
                assert not history[i] or history[i][-1] is not e.state, \
                    f"entry {i} reported {e.state.name} twice running: {history[i]}"
                history[i].append(e.state)

    def until(done, budget_ns=SIM_BUDGET_NS):
        deadline = SimDeadline(sim0, budget_ns)
        while not done() and not deadline.passed():
            take()
            time.sleep(0.1)
        take()

    try:
        assert not sim0.set_link(0, 1, 1, False)
        sim0.host_write(SEND_BASE, random.Random(5).randbytes(1 << 16))
        for k in range(4):
            regs.run(driver.post_write(q, 0x7000 + k, laddr=SEND_BASE, length=1 << 16,
                                       va=RECV_BASE + q * REGION + (k << 16), rkey=0x100 + q))
        done, deadline = set(), SimDeadline(sim0)
        while len(done) < 4 and not deadline.passed():
            done |= {c.wr_id for c in regs.run(driver.poll_cq(16))
                     if not c.recv and c.qp == q and c.status is WrStatus.OK}
        assert done == {0x7000 + k for k in range(4)}, "the writes did not ride out the failure"
        until(lambda: all(history[i] for i in dead), budget_ns=1_000_000)
        for i in dead:
            assert history[i] == [EvState.ASSUMED_BAD], \
                f"entry {i} of the dead path reported {history[i]} while it was down"
        assert sim0.set_link(0, 1, 1, True)
        mark = {i: len(h) for i, h in history.items()}
        until(lambda: all(history[i][mark[i]:] == [EvState.GOOD] for i in dead))
        for i in dead:
            assert history[i][mark[i]:] == [EvState.GOOD], \
                f"entry {i} of the dead path after its return: {history[i][mark[i]:]}"
        # every entry ends in use, as the NIC's own states say (SKIP, left out for a rotation
        # after an ECN mark, is in use), and its events said so last
        until(lambda: all(not h or h[-1] is EvState.GOOD for h in history.values()))
        states = regs.run(driver.ev_states(q))
        assert set(states) <= {EvState.GOOD, EvState.SKIP}, states
        assert all(not h or h[-1] is EvState.GOOD for h in history.values()), history
        assert dev0.read("evq.overflows") == lost
    finally:
        sim0.set_link(0, 1, 1, True)
        regs.run(driver.set_ev_event_mask(()))
        dev0.write("cq.route", route)


def _answer(regs, before: int, seconds: float = 5.0):
    """The RTT of the probe answer after ``before`` answers, or None if none comes."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        answers, rtt = regs.run(driver.probe_result())
        if answers != before:
            return rtt
        time.sleep(0.02)
    return None


def test_a_probe_is_answered_with_its_round_trip(nics):
    """Endpoint requests (ep.*): a probe on a QP's entry comes back with an RTT like the
    QP's data packets' own; one on a path that is dead gets no answer; one on a plane whose
    port is down is refused, and nothing is sent."""
    (dev0, _, sim0), _ = nics
    regs, q = dev0.regs, 0
    planes, spines = sim0.info["planes"], sim0.info["spines"]
    data_rtt = regs.run(driver.congestion(q))["rtt"]     # the start-up write's, on QP 0
    assert data_rtt > 0
    for entry in (0, 1, 5):
        rtt = _answer(regs, regs.run(driver.probe_start(q, entry)))
        assert rtt is not None, f"entry {entry}: no answer"
        # a probe is smaller than a full data packet, so it comes back a little sooner
        assert 0.3 * data_rtt < rtt <= 1.2 * data_rtt, (entry, rtt, data_rtt)
    dead = next(i for i in range(16) if entry_path(i, planes, spines) == (0, 1))
    assert not sim0.set_link(0, 1, 1, False)
    try:
        assert _answer(regs, regs.run(driver.probe_start(q, dead)), 1.0) is None
    finally:
        sim0.set_link(0, 1, 1, True)
    refused = dev0.read("ep.refused")
    regs.run(driver.set_port_admin(1, False))
    try:
        with pytest.raises(RegisterError, match="port of its plane is down"):
            regs.run(driver.probe_start(q, 1))
    finally:
        regs.run(driver.set_port_admin(1, True))
    assert dev0.read("ep.refused") == refused + 1


def test_a_port_status_update_reaches_every_peer(nics):
    """ep.status: one round of port status, to every RTR or RTS QP's peer, at once."""
    (dev0, _, _), (dev1, _, _) = nics
    interval = dev0.read("rel.status_interval")
    dev0.write("rel.status_interval", 0)       # no repeats: what is sent is the request's
    try:
        time.sleep(0.2)
        sent, heard = dev0.read("rel.status_sent"), dev1.read("rel.status_received")
        dev0.regs.run(driver.port_status_update())
        qps = 3                                # the simulation's QPs in RTS: 0, 1 and 3
        deadline = time.monotonic() + 5
        while dev1.read("rel.status_received") < heard + qps and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
        assert dev0.read("rel.status_sent") == sent + qps
        assert dev1.read("rel.status_received") == heard + qps
    finally:
        dev0.write("rel.status_interval", interval)


def test_the_front_end_counters_agree_with_what_it_passed_and_dropped(nics):
    """icrc.* and parser.*, the checker's and the parser's own counts, against the receive
    side's: every frame parsed was passed or dropped for one reason, every frame checked was
    passed or dropped for its ICRC, every malformed one was dropped as such. Read while the
    NICs are idle (the reads agree twice running), after the other tests' traffic."""
    # the drops for the parser's reasons: all but a guard's cut, the ICRC and not_mine
    parse_drops = [r for r in regmap.RX_FRONT_DROPS if r not in ("cut", "icrc", "not_mine")]
    for dev, _, _ in nics:
        names = ["icrc.frames", "icrc.bad", "parser.frames", "parser.errors", "rx.frames",
                 *(f"rx.drop_{r}" for r in regmap.RX_FRONT_DROPS)]
        deadline = time.monotonic() + 10
        while True:
            before = {n: dev.read(n) for n in names}
            after = {n: dev.read(n) for n in names}
            if before == after or time.monotonic() > deadline:
                break
        c = after
        drops = sum(c[f"rx.drop_{r}"] for r in regmap.RX_FRONT_DROPS)
        assert c["rx.frames"] > 0 and c["icrc.frames"] > 0, c
        assert c["parser.frames"] == c["rx.frames"] + drops, c
        assert c["icrc.frames"] == c["rx.frames"] + c["rx.drop_icrc"], c
        assert c["icrc.bad"] >= c["rx.drop_icrc"], c       # a trimmed frame passes anyway
        assert c["parser.errors"] >= sum(c[f"rx.drop_{r}"] for r in parse_drops), c
