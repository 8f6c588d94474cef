"""cocotb test of the spray scheduler against a Python model of each QP's EV profile; every
update is also checked for the change it reports (``changed``), or for reporting none."""

import random

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge
from cocotbext.axi import AxiStreamFrame

from mrcnic.evmap import EvLayout
from mrcnic.hdl.spray_scheduler import EvState, LoadOp, SprayMode, SprayScheduler
from mrcnic.verif.layouts import decode, encode
from mrcnic.verif.tbkit import params, setup, sink, source


def _layouts(p):
    sig = SprayScheduler(p["qps"], p["evs"], p["planes"], p["backups"]).signature
    return {n: sig.members[n].signature.members["payload"].shape
            for n in ("request", "grant", "load", "update", "changed")}


class Tb:
    def __init__(self, dut, p, rng):
        self.dut, self.p, self.rng = dut, p, rng
        self.lay = _layouts(p)
        self.req, self.grant = source(dut, "request"), sink(dut, "grant")
        self.load, self.upd = source(dut, "load"), source(dut, "update")
        P = p["planes"]
        self.size = p["size"]
        self.profile = {q: [rng.getrandbits(32) for _ in range(self.size)] for q in range(p["qps"])}
        self.state = {q: [EvState.GOOD] * self.size for q in range(p["qps"])}
        self.spares = {(q, pl): [] for q in range(p["qps"]) for pl in range(P)}
        self.changes = []          # what ``changed`` reported, in order
        cocotb.start_soon(self._watch_changes())

    async def _watch_changes(self):
        while True:
            await FallingEdge(self.dut.clk)
            if int(self.dut.changed_tvalid.value):
                c = decode(self.lay["changed"], int(self.dut.changed_tdata.value))
                c["others"] = {i for i in range(self.size) if c["others"] >> i & 1}
                self.changes.append(c)

    async def load_all(self):
        for q, evs in self.profile.items():
            for i, ev in enumerate(evs):
                await self.load.send(AxiStreamFrame(
                    encode(self.lay["load"], dict(qp=q, index=i, ev=ev))))
        await self.load.wait()

    async def add_spare(self, q, plane, ev):
        self.spares[(q, plane)].append(ev)
        await self.load.send(AxiStreamFrame(
            encode(self.lay["load"], dict(qp=q, index=plane, ev=ev, op=LoadOp.SPARE))))
        await self.load.wait()

    async def update(self, q, i, state, management=0, path=0, others=None, trim=0):
        """Sends an update and checks the change it reports against the model's state before
        it (the test keeps ``state`` as the gateware should have it): none for a refused one,
        a SKIP, or no change; ``others``, the entries a path-wide ASSUMED_BAD takes with it."""
        ignored = int(self.dut.ignored.value)
        seen = len(self.changes)
        await self.upd.send(AxiStreamFrame(encode(self.lay["update"], dict(
            qp=q, index=i, state=state, management=management, path=path, trim=trim))))
        await self.upd.wait()
        await ClockCycles(self.dut.clk, 3)
        refused = int(self.dut.ignored.value) != ignored
        prior = self.state[q][i] if i < self.size else None
        plane = i % self.p["planes"]
        replaced = False
        if refused or state == EvState.SKIP:
            want = None
        elif state == EvState.GOOD:
            want = prior in (EvState.ASSUMED_BAD, EvState.DENIED)
        elif state == EvState.DENIED:
            want = prior != EvState.DENIED
        else:
            replaced = bool(self.spares[(q, plane)])
            if replaced:
                self.spares[(q, plane)].pop()
            want = prior in (EvState.GOOD, EvState.SKIP) or bool(others)
        got = self.changes[seen:]
        if not want:
            assert not got, f"update {q}/{i} -> {state.name} reported {got}"
            return
        assert len(got) == 1, f"update {q}/{i} -> {state.name} reported {got}, not one change"
        expect = dict(qp=q, index=i, state=state, management=management, replaced=int(replaced),
                      others=set(others or ()) if state == EvState.ASSUMED_BAD else set())
        diff = {k: (got[0][k], v) for k, v in expect.items() if got[0][k] != v}
        assert not diff, f"update {q}/{i} -> {state.name}: (got, want) by field {diff}"

    async def view_state(self, q, i):
        """Entry ``i`` of QP ``q`` as ``view_state`` reads it."""
        self.dut.view_qp.value, self.dut.view_index.value = q, i
        await ClockCycles(self.dut.clk, 1)
        return EvState(int(self.dut.view_state.value))

    async def check_table(self, q):
        """The table the host reads (``view_size``, ``view_ev``) holds QP ``q``'s profile as
        the test keeps it, spares that took an entry's place included; past it, 0."""
        dut = self.dut
        dut.view_qp.value = q
        got = []
        for i in range(self.p["evs"]):
            dut.view_index.value = i
            await ClockCycles(dut.clk, 2)
            got.append(int(dut.view_ev.value))
        size = int(dut.view_size.value)
        want = self.profile[q] + [0] * (self.p["evs"] - len(self.profile[q]))
        assert size == len(self.profile[q]), \
            f"QP {q}: profile size {size}, loaded {len(self.profile[q])}"
        diff = {i: (f"{g:#010x}", f"{w:#010x}")
                for i, (g, w) in enumerate(zip(got, want, strict=True)) if g != w}
        assert not diff, f"QP {q}: table (got, want) by entry {diff}"

    async def grants(self, qps, n):
        """n requests spread over ``qps``; returns the grants in order, each checked."""
        order = [self.rng.choice(qps) for _ in range(n)]
        for q in order:
            await self.req.send(AxiStreamFrame(encode(self.lay["request"], dict(qp=q))))
        out = []
        for q in order:
            g = await self.grant.recv()
            d = decode(self.lay["grant"], g.tdata)
            assert d["qp"] == q, f"grant for QP {d['qp']}, request was for QP {q}"
            i = d["index"]
            assert i < self.size, f"index {i} outside the profile"
            assert d["plane"] == i % self.p["planes"], f"index {i} reported on plane {d['plane']}"
            st, P = self.state[q][i], self.p["planes"]
            # (a plane whose GOOD EVs are all skipped sprays over its skipped ones)
            plane_open = any(self.state[q][j] is EvState.GOOD for j in range(i % P, self.size, P))
            assert st is EvState.GOOD or (st is EvState.SKIP and not plane_open), \
                f"QP {q} EV {i} is {st.name}"
            assert d["ev"] == self.profile[q][i], (f"QP {q} index {i}: EV {d['ev']:#x}, profile "
                                                   f"holds {self.profile[q][i]:#x}")
            out.append(d)
        return out


@cocotb.test()
async def spray_follows_the_rules(dut):
    p = params()
    rng = random.Random(p["seed"])
    P = p["planes"]
    await setup(dut)
    dut.port_ready.value = (1 << P) - 1
    tb = Tb(dut, p, rng)
    await tb.load_all()
    for q in range(p["qps"]):
        await tb.check_table(q)

    # Balance and coverage: planes in turn per QP, every GOOD EV used.
    gs = await tb.grants([0, 1], 40 * tb.size)
    for q in (0, 1):
        mine = [g for g in gs if g["qp"] == q]
        counts = [0] * P
        for g in mine:
            counts[g["plane"]] += 1
            assert max(counts) - min(counts) <= 1, f"QP {q} planes out of balance: {counts}"
        assert {g["index"] for g in mine} == set(range(tb.size)), f"QP {q} left EVs unused"
        # Rounds: within a plane no EV gets ahead of another by more than one packet.
        uses = [0] * tb.size
        for g in mine:
            uses[g["index"]] += 1
            same = [uses[i] for i in range(g["plane"], tb.size, P)]
            assert max(same) - min(same) <= 1, f"QP {q} plane {g['plane']} uneven: {same}"

    # A port that is not ready gets nothing.
    dut.port_ready.value = 1
    await ClockCycles(dut.clk, 3)
    gs = await tb.grants([0], 4 * tb.size)
    assert all(g["plane"] == 0 for g in gs), "a packet went to a plane whose port is not ready"
    dut.port_ready.value = (1 << P) - 1
    # A busy port (holding frames back) gets no new packet while another is free; with every
    # port busy, the planes take their turns.
    if P > 1:
        dut.port_busy.value = 0b10
        await ClockCycles(dut.clk, 3)
        gs = await tb.grants([1], 2 * tb.size)
        assert all(g["plane"] != 1 for g in gs), "a packet went to a busy port"
        dut.port_busy.value = (1 << P) - 1
        await ClockCycles(dut.clk, 3)
        gs = await tb.grants([1], 2 * P)
        counts = [sum(g["plane"] == k for g in gs) for k in range(P)]
        assert counts == [2] * P, f"every port busy, planes out of turn: {counts}"
        dut.port_busy.value = 0

    # DENIED needs management; a DENIED EV is never used and only management brings it back.
    ignored = int(dut.ignored.value)
    await tb.update(0, 3, EvState.DENIED)
    assert int(dut.ignored.value) == ignored + 1
    await tb.update(0, 3, EvState.DENIED, management=1)
    tb.state[0][3] = EvState.DENIED
    await tb.update(0, 3, EvState.GOOD)            # refused: not management
    assert int(dut.ignored.value) == ignored + 2
    gs = await tb.grants([0], 10 * tb.size)
    await tb.update(0, 3, EvState.GOOD, management=1)
    tb.state[0][3] = EvState.GOOD

    # Good EVs scattered among DENIED ones still share the traffic evenly.
    scattered = [i for i in range(tb.size) if i % (3 * P) >= P]
    for i in scattered:
        await tb.update(0, i, EvState.DENIED, management=1)
        tb.state[0][i] = EvState.DENIED
    gs = await tb.grants([0], 8 * tb.size)
    uses = {}
    for g in gs:
        uses[g["index"]] = uses.get(g["index"], 0) + 1
    assert set(uses) == set(range(tb.size)) - set(scattered), "a good EV was left out"
    # Planes in turn, and within a plane rounds: each plane's EVs within one more use at each
    # end of the window, which need not start on a round (each plane's rounds have their own
    # phase, so two planes' EVs may differ by one more).
    per_plane = {}
    for i, n in uses.items():
        per_plane.setdefault(i % P, []).append(n)
    totals = [sum(v) for v in per_plane.values()]
    assert max(totals) - min(totals) <= 1, f"planes not in turn: {per_plane}"
    for pl, v in per_plane.items():
        assert max(v) - min(v) <= 2, f"uneven spraying over plane {pl}'s scattered good EVs: {uses}"
    for i in scattered:
        await tb.update(0, i, EvState.GOOD, management=1)
        tb.state[0][i] = EvState.GOOD

    # A GOOD entry told GOOD (a probe answered late) or ASSUMED_BAD twice changes nothing, and
    # reports no change.
    assert tb.state[0][0] == EvState.GOOD
    await tb.update(0, 0, EvState.GOOD)
    await tb.update(0, 0, EvState.GOOD, management=1)

    # ASSUMED_BAD with a spare on its plane: the spare takes the index, at once.
    plane = 5 % P
    await tb.add_spare(1, plane, 0xDEAD0001)
    await tb.update(1, 5, EvState.ASSUMED_BAD)
    tb.profile[1][5] = 0xDEAD0001
    assert int(dut.replaced.value) == 1
    await tb.check_table(1)
    gs = await tb.grants([1], 10 * tb.size)
    assert any(g["index"] == 5 for g in gs), "the replacement EV was never used"
    # Without a spare left: the EV leaves the profile until it is GOOD again.
    await tb.update(1, 5, EvState.ASSUMED_BAD)
    tb.state[1][5] = EvState.ASSUMED_BAD
    await tb.update(1, 5, EvState.ASSUMED_BAD)
    await tb.grants([1], 10 * tb.size)
    await tb.update(1, 5, EvState.GOOD)
    tb.state[1][5] = EvState.GOOD

    # SKIP: out for at least the next full rotation, then back.
    await tb.update(0, 6, EvState.SKIP)
    tb.state[0][6] = EvState.SKIP
    gs = await tb.grants([0], tb.size)
    tb.state[0][6] = EvState.GOOD
    gs = await tb.grants([0], 12 * tb.size)
    assert any(g["index"] == 6 for g in gs), "a SKIP EV never came back"

    # A plane whose GOOD EVs are all skipped keeps its turn, over the skipped ones: skipping
    # moves traffic within a plane, never onto another plane's port.
    if P > 1:
        lane = [i for i in range(tb.size) if i % P == 0]
        for i in lane:
            await tb.update(0, i, EvState.SKIP)
            tb.state[0][i] = EvState.SKIP
        gs = await tb.grants([0], 2 * P)
        counts = [sum(g["plane"] == k for g in gs) for k in range(P)]
        assert counts == [2] * P, f"planes out of turn with plane 0 all skipped: {counts}"
        for i in lane:
            tb.state[0][i] = EvState.GOOD
        await tb.grants([0], 4 * tb.size)     # the rotation ends: GOOD again

    # An update outside the profile is refused and changes nothing.
    if tb.size < p["evs"]:
        ignored = int(dut.ignored.value)
        await tb.update(0, tb.size, EvState.ASSUMED_BAD)
        assert int(dut.ignored.value) == ignored + 1
        await tb.grants([0, 1], 4 * tb.size)

    # A spare pushed onto a plane whose spares are full is refused and counted.
    ignored = int(dut.ignored.value)
    for k in range(p["backups"] + 1):
        await tb.add_spare(0, 0, 0xBEEF0000 + k)
    await ClockCycles(dut.clk, 2)
    assert int(dut.ignored.value) == ignored + 1, "a spare beyond the list was not refused"

    # CLEAR empties a profile: a smaller one loaded after it is all that is used, and an update
    # beyond it is refused.
    await tb.load.send(AxiStreamFrame(encode(tb.lay["load"], dict(qp=1, op=LoadOp.CLEAR))))
    small = 2 * P
    tb.profile[1] = [rng.getrandbits(32) for _ in range(small)]
    tb.state[1] = [EvState.GOOD] * small
    for i, ev in enumerate(tb.profile[1]):
        await tb.load.send(AxiStreamFrame(encode(tb.lay["load"], dict(qp=1, index=i, ev=ev))))
    await tb.load.wait()
    tb.size = small
    await tb.check_table(1)         # the old profile's entries past the new one read 0
    gs = await tb.grants([1], 20 * small)
    assert {g["index"] for g in gs} == set(range(small)), "the new profile is not all used"
    ignored = int(dut.ignored.value)
    await tb.update(1, small, EvState.SKIP)
    assert int(dut.ignored.value) == ignored + 1, "an update beyond the cleared profile went in"


@cocotb.test()
async def a_trim_skip_lasts_its_periods(dut):
    """A trim's SKIP (``trim``) lasts the rest of the QP's current period of ``trim_rounds``
    rotations and the whole next one, to the grant; an ECN mark's SKIP, set beside it, one
    rotation. ``view_state`` reads SKIP for as long as either lasts, and GOOD clears both."""
    p = params()
    rng = random.Random(p["seed"] + 3)
    P, T = p["planes"], 3
    await setup(dut)
    dut.port_ready.value = (1 << P) - 1
    dut.trim_rounds.value = T
    tb = Tb(dut, p, rng)
    await tb.load_all()
    n = tb.size
    state = tb.view_state

    # Into QP 0's second period, partway through a rotation.
    done = (T + 1) * n + n // 3
    await tb.grants([0], done)
    trimmed, marked = 0, 1          # (on different planes, so each plane keeps open EVs)
    await tb.update(0, trimmed, EvState.SKIP, trim=1)
    await tb.update(0, marked, EvState.SKIP)
    assert await state(0, trimmed) == EvState.SKIP and await state(0, marked) == EvState.SKIP
    tb.state[0][trimmed] = tb.state[0][marked] = EvState.SKIP
    # The mark's SKIP: the rest of this rotation and the next.
    rotation_end = (done // n + 2) * n
    await tb.grants([0], rotation_end - done)
    tb.state[0][marked] = EvState.GOOD
    assert await state(0, marked) == EvState.GOOD
    assert await state(0, trimmed) == EvState.SKIP, "a trim's SKIP ended with the mark's"
    # The trim's: to the end of the period after this one, not a grant less.
    period_end = (done // (T * n) + 2) * T * n
    await tb.grants([0], period_end - rotation_end)
    tb.state[0][trimmed] = EvState.GOOD
    assert await state(0, trimmed) == EvState.GOOD, "a trim's SKIP outlasted its periods"
    gs = await tb.grants([0], 2 * n)
    assert any(g["index"] == trimmed for g in gs), "the trimmed EV never came back"
    # GOOD (a probe answered) ends a trim's SKIP at once.
    await tb.update(0, trimmed, EvState.SKIP, trim=1)
    assert await state(0, trimmed) == EvState.SKIP
    await tb.update(0, trimmed, EvState.GOOD)
    assert await state(0, trimmed) == EvState.GOOD
    # trim_rounds 0 acts as 1: the same rotation as a mark's.
    dut.trim_rounds.value = 0
    await tb.update(0, trimmed, EvState.SKIP, trim=1)
    tb.state[0][trimmed] = EvState.SKIP
    await tb.grants([0], 2 * n)
    tb.state[0][trimmed] = EvState.GOOD
    assert await state(0, trimmed) == EvState.GOOD, "trim_rounds 0 did not act as 1"


@cocotb.test()
async def held_paths_wait_and_a_dead_path_goes_whole(dut):
    """A QP's entries on a held path are passed over while another of their plane is usable,
    and used when none is (the plane keeps its turn); ASSUMED_BAD with ``path`` retires every
    GOOD entry on that path, unless nothing would be left; a spare brings its own path to the
    entry it takes."""
    p = params()
    rng = random.Random(p["seed"])
    P, Q = p["planes"], p["qps"]
    lay = EvLayout(P, 4)
    await setup(dut)
    dut.port_ready.value = (1 << P) - 1
    tb = Tb(dut, p, rng)
    # Entry i on plane i % P and spine (i // P) % 4, so each path has several entries.
    for q in range(Q):
        tb.profile[q] = [lay.make(i % P, (i // P) % 4, rng.getrandbits(32))
                         for i in range(tb.size)]
    await tb.load_all()

    def path_of(q, i):
        return lay.path(tb.profile[q][i])

    def hold(q, held):
        dut.hold.value = sum(1 << (q * lay.paths + x) for x in held)

    async def states(q):
        return [await tb.view_state(q, i) for i in range(tb.size)]

    # A held path's entries wait; the other QP does not see QP 0's hold.
    dead = path_of(0, 0)
    on_dead = [i for i in range(tb.size) if path_of(0, i) == dead]
    assert len(on_dead) >= 2, "the profile should put two entries on a path"
    hold(0, {dead})
    await ClockCycles(dut.clk, 2)
    gs = await tb.grants([0, 1], 16 * tb.size)
    used0 = {g["index"] for g in gs if g["qp"] == 0}
    used1 = {g["index"] for g in gs if g["qp"] == 1}
    assert not used0 & set(on_dead), f"QP 0 sprayed on held path {dead}: {used0 & set(on_dead)}"
    assert used0 == set(range(tb.size)) - set(on_dead), f"QP 0 left out {set(range(tb.size)) - used0}"
    assert used1 == set(range(tb.size)), "QP 1 was held by QP 0's hold"
    # Every path held: nothing else is usable, so the hold is not taken.
    hold(0, range(lay.paths))
    await ClockCycles(dut.clk, 2)
    gs = await tb.grants([0], 8 * tb.size)
    assert {g["index"] for g in gs} == set(range(tb.size)), "a QP with every path held stalled"
    # Every path of plane 0 held: the plane keeps its turn, on them.
    if P > 1:
        hold(0, {path_of(0, i) for i in range(0, tb.size, P)})
        await ClockCycles(dut.clk, 2)
        gs = await tb.grants([0], 4 * P)
        counts = [sum(g["plane"] == k for g in gs) for k in range(P)]
        assert counts == [4] * P, f"planes out of turn with plane 0's paths all held: {counts}"
    hold(0, ())
    await ClockCycles(dut.clk, 2)

    # A dead path goes whole: one update retires every GOOD entry on it, no other.
    await tb.update(0, on_dead[0], EvState.ASSUMED_BAD, path=1, others=on_dead[1:])
    for i in on_dead:
        tb.state[0][i] = EvState.ASSUMED_BAD
    got = await states(0)
    assert got == tb.state[0], f"after retiring path {dead}: {got}, expected {tb.state[0]}"
    gs = await tb.grants([0], 8 * tb.size)      # grants() checks none is on the retired path
    assert {g["index"] for g in gs} == set(range(tb.size)) - set(on_dead)
    for i in on_dead:
        await tb.update(0, i, EvState.GOOD)
        tb.state[0][i] = EvState.GOOD

    # Unless it would leave the QP nothing: with only one path GOOD and no spare, only the
    # entry named goes.
    q = 1
    keep = [i for i in range(tb.size) if path_of(q, i) == path_of(q, 0)]
    for i in set(range(tb.size)) - set(keep):
        await tb.update(q, i, EvState.DENIED, management=1)
        tb.state[q][i] = EvState.DENIED
    ignored = int(dut.ignored.value)
    await tb.update(q, keep[0], EvState.ASSUMED_BAD, path=1)
    tb.state[q][keep[0]] = EvState.ASSUMED_BAD
    assert int(dut.ignored.value) == ignored
    got = await states(q)
    assert got == tb.state[q], f"a path-wide retirement left QP {q} with {got}"
    await tb.grants([q], 4 * tb.size)
    await tb.update(q, keep[0], EvState.GOOD)
    tb.state[q][keep[0]] = EvState.GOOD
    for i in set(range(tb.size)) - set(keep):
        await tb.update(q, i, EvState.GOOD, management=1)
        tb.state[q][i] = EvState.GOOD

    # A spare takes its own path to the entry: held on the spare's path, not the old one.
    q, i = 0, 1
    old = path_of(q, i)
    spare = lay.make(i % P, (((i // P) % 4) + 1) % 4, rng.getrandbits(32))
    await tb.add_spare(q, i % P, spare)
    await tb.update(q, i, EvState.ASSUMED_BAD)
    tb.profile[q][i] = spare
    new = path_of(q, i)
    assert new != old
    hold(q, {new})
    await ClockCycles(dut.clk, 2)
    gs = await tb.grants([q], 8 * tb.size)
    assert i not in {g["index"] for g in gs}, "the spare's path was held, yet it was used"
    hold(q, {old})
    await ClockCycles(dut.clk, 2)
    gs = await tb.grants([q], 8 * tb.size)
    assert i in {g["index"] for g in gs}, "the entry was held on the path of the EV it lost"
    hold(q, ())


@cocotb.test()
async def random_mode_draws_every_pick_afresh(dut):
    """Blind spraying (mode RANDOM): GOOD EVs only, every one of them used, and no turns and
    no rounds: a plane or an EV comes again before the others have had theirs, as ROUNDS
    never lets it. Back in ROUNDS, the turns hold again."""
    p = params()
    rng = random.Random(p["seed"] + 1)
    P = p["planes"]
    await setup(dut)
    dut.port_ready.value = (1 << P) - 1
    dut.mode.value = SprayMode.RANDOM.value
    tb = Tb(dut, p, rng)
    await tb.load_all()
    q = 0
    out = rng.sample(range(tb.size), max(1, tb.size // 8))
    for i in out:
        await tb.update(q, i, EvState.DENIED, management=1)
        tb.state[q][i] = EvState.DENIED
    good = set(range(tb.size)) - set(out)
    gs = await tb.grants([q], 16 * len(good) + 64)
    used = [g["index"] for g in gs]
    assert set(used) == good, f"GOOD EVs never drawn: {sorted(good - set(used))}"
    planes = [g["plane"] for g in gs]
    again = sum(a == b for a, b in zip(planes, planes[1:], strict=False))
    assert again, "RANDOM kept the planes in turn"
    share = [planes.count(k) / len(planes) for k in range(P)]
    assert all(abs(x - 1 / P) < 0.15 for x in share), f"planes' shares {share}"
    # an EV drawn twice while another of its plane waited for its first go
    seen, early = set(), False
    for g in gs:
        mine = {i for i in good if i % P == g["plane"]}
        early |= g["index"] in seen and not mine <= seen
        seen.add(g["index"])
    assert early, "RANDOM sprayed in rounds"
    dut.mode.value = SprayMode.ROUNDS.value
    await ClockCycles(dut.clk, 2)
    gs = await tb.grants([q], 4 * P)
    planes = [g["plane"] for g in gs]
    assert all(a != b for a, b in zip(planes, planes[1:], strict=False)) if P > 1 else True, \
        f"back in ROUNDS, the planes out of turn: {planes}"


@cocotb.test()
async def a_profile_of_one_entry_sends_on_it_alone(dut):
    """Single-path RoCE's profile: one EV, at the first entry of the plane its path is on. The
    entries before it were never loaded: they read 0 and are never picked, in either mode."""
    p = params()
    rng = random.Random(p["seed"] + 2)
    P = p["planes"]
    await setup(dut)
    dut.port_ready.value = (1 << P) - 1
    tb = Tb(dut, p, rng)
    await tb.load_all()
    q, plane = 1, P - 1
    await tb.load.send(AxiStreamFrame(encode(tb.lay["load"], dict(qp=q, op=LoadOp.CLEAR))))
    ev = rng.getrandbits(32)
    await tb.load.send(AxiStreamFrame(encode(tb.lay["load"], dict(qp=q, index=plane, ev=ev))))
    await tb.load.wait()
    tb.size = plane + 1
    tb.profile[q] = [0] * plane + [ev]
    tb.state[q] = [EvState.ASSUMED_BAD] * plane + [EvState.GOOD]
    await tb.check_table(q)
    for mode in SprayMode:
        dut.mode.value = mode.value
        await ClockCycles(dut.clk, 2)
        gs = await tb.grants([q], 16)
        assert {g["index"] for g in gs} == {plane}, f"{mode.name}: entries {gs}"


@cocotb.test()
async def sequence_mode_sprays_each_plane_in_profile_order(dut):
    """SEQUENCE: the planes in turn, and each plane's EVs in profile order, round after round,
    from wherever its first pick fell; a SKIP is passed over (the order goes on behind it) and
    a DENIED EV never comes. Two QPs keep their own places."""
    p = params()
    rng = random.Random(p["seed"] + 3)
    P = p["planes"]
    await setup(dut)
    dut.port_ready.value = (1 << P) - 1
    dut.mode.value = SprayMode.SEQUENCE.value
    tb = Tb(dut, p, rng)
    await tb.load_all()

    def in_order(gs, q, allowed):
        """Each plane's picks for QP ``q`` go round ``allowed`` (the plane's entries that may
        come, in profile order) one after the other."""
        last = {}
        for g in (g for g in gs if g["qp"] == q):
            pl, i = g["plane"], g["index"]
            ring = [j for j in allowed if j % P == pl]
            assert i in ring, f"QP {q}: entry {i} is not one that may come ({ring})"
            if pl in last:
                want = ring[(ring.index(last[pl]) + 1) % len(ring)]
                assert i == want, (f"QP {q} plane {pl}: entry {i} after {last[pl]}, want "
                                   f"{want} (the next in profile order)")
            last[pl] = i

    everything = list(range(tb.size))
    gs = await tb.grants([0, 1], 6 * tb.size)
    for q in (0, 1):
        in_order(gs, q, everything)
        planes = [g["plane"] for g in gs if g["qp"] == q]
        assert all(a != b for a, b in zip(planes, planes[1:], strict=False)) if P > 1 else True, \
            f"QP {q}: planes out of turn: {planes}"
    # A SKIP sits out its rotation: the others keep their order without it; it comes back.
    q, skipped = 0, rng.randrange(tb.size)
    await tb.update(q, skipped, EvState.SKIP)
    gs = await tb.grants([q], tb.size - 1)
    assert skipped not in {g["index"] for g in gs}, f"SKIP entry {skipped} picked"
    in_order(gs, q, [i for i in everything if i != skipped])
    gs = await tb.grants([q], 4 * tb.size)
    assert skipped in {g["index"] for g in gs}, f"entry {skipped} never came back from SKIP"
    # A DENIED EV never comes; the rest go round without it.
    denied = (skipped + 1) % tb.size
    await tb.update(q, denied, EvState.DENIED, management=1)
    tb.state[q][denied] = EvState.DENIED
    gs = await tb.grants([q], 2 * tb.size)
    in_order(gs, q, [i for i in everything if i != denied])
