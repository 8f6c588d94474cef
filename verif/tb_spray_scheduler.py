"""cocotb test of the spray scheduler against a Python model of each QP's EV profile."""

import random

import cocotb
from cocotb.triggers import ClockCycles
from cocotbext.axi import AxiStreamFrame

from mrcnic.hdl.spray_scheduler import EvState, LoadOp, SprayScheduler
from mrcnic.verif.layouts import decode, encode
from mrcnic.verif.tbkit import params, setup, sink, source


def _layouts(p):
    sig = SprayScheduler(p["qps"], p["evs"], p["planes"], p["backups"]).signature
    return {n: sig.members[n].signature.members["payload"].shape
            for n in ("request", "grant", "load", "update")}


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

    async def update(self, q, i, state, management=0):
        await self.upd.send(AxiStreamFrame(
            encode(self.lay["update"], dict(qp=q, index=i, state=state, management=management))))
        await self.upd.wait()
        await ClockCycles(self.dut.clk, 3)

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
            assert self.state[q][i] is EvState.GOOD, f"QP {q} EV {i} is {self.state[q][i].name}"
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
    # Rounds: at most one more use at each end of the window, which need not start on a round.
    assert max(uses.values()) - min(uses.values()) <= 2, \
        f"uneven spraying over scattered good EVs: {uses}"
    for i in scattered:
        await tb.update(0, i, EvState.GOOD, management=1)
        tb.state[0][i] = EvState.GOOD

    # ASSUMED_BAD with a spare on its plane: the spare takes the index, at once.
    plane = 5 % P
    await tb.add_spare(1, plane, 0xDEAD0001)
    await tb.update(1, 5, EvState.ASSUMED_BAD)
    tb.profile[1][5] = 0xDEAD0001
    assert int(dut.replaced.value) == 1
    gs = await tb.grants([1], 10 * tb.size)
    assert any(g["index"] == 5 for g in gs), "the replacement EV was never used"
    # Without a spare left: the EV leaves the profile until it is GOOD again.
    await tb.update(1, 5, EvState.ASSUMED_BAD)
    tb.state[1][5] = EvState.ASSUMED_BAD
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
    gs = await tb.grants([1], 20 * small)
    assert {g["index"] for g in gs} == set(range(small)), "the new profile is not all used"
    ignored = int(dut.ignored.value)
    await tb.update(1, small, EvState.SKIP)
    assert int(dut.ignored.value) == ignored + 1, "an update beyond the cleared profile went in"
