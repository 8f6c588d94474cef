"""cocotb test of RX ingress: every plane's frames come out whole, in order, tagged with their
plane, the planes in turn; frames that overrun the limit or stall half-way come out cut short,
marked, and counted, and never hold the other planes up."""

import random

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge
from scapy.compat import raw

from mrcnic.verif.packets import random_mrc
from mrcnic.verif.tbkit import StreamRules, last_user, params, pauses, setup, sink, source


def expected(frame: bytes, max_frame: int, lanes: int) -> tuple[bytes, int]:
    """What the guard lets through of ``frame``, and whether it is cut."""
    if len(frame) <= max_frame:
        return frame, 0
    return frame[:min((max_frame // lanes + 1) * lanes, len(frame))], 1


@cocotb.test()
async def ingress_merges_and_guards(dut):
    p = params()
    rng = random.Random(p["seed"])
    P, L, MAX = p["planes"], p["width"] // 8, p["max_frame"]
    assert P >= 2, "the test needs a second plane to show one does not hold another up"
    await setup(dut)
    out = sink(dut, "o")
    rules = StreamRules(dut, "o")
    srcs = [source(dut, f"plane{pl}") for pl in range(P)]

    async def receive(n):
        got = []
        for _ in range(n):
            f = await out.recv()
            u = last_user(f)
            got.append((u >> 1, bytes(f.tdata), u & 1))
        return got

    # 1. Every plane loaded, no gaps: strict turns, no idle cycle on the output.
    per = 12
    frames = {pl: [raw(random_mrc(rng, max_payload=400)) for _ in range(per)] for pl in range(P)}
    for pl in range(P):
        for f in frames[pl]:
            srcs[pl].send_nowait(f)
    beats = busy = 0
    started = False

    async def count():
        nonlocal beats, busy, started
        while True:
            await RisingEdge(dut.clk)
            v, r = int(dut.o_tvalid.value), int(dut.o_tready.value)
            started = started or v
            if started and beats < sum(-(-len(f) // L) for fs in frames.values() for f in fs):
                busy += 1
                beats += v & r

    counter = cocotb.start_soon(count())
    got = await receive(P * per)
    counter.cancel()
    assert [g[0] for g in got] == [k % P for k in range(P * per)], "planes did not take turns"
    for pl in range(P):
        mine = [(f, c) for q, f, c in got if q == pl]
        assert mine == [(f, 0) for f in frames[pl]], f"plane {pl}'s frames changed"
    assert busy == beats, f"the output idled: {beats} beats in {busy} cycles"

    # 2. Random sizes, some over the limit, random gaps: each plane's frames in order, the long
    # ones cut at the limit and marked.
    for s in srcs:
        s.set_pause_generator(pauses(rng, 0.2))
    out.set_pause_generator(pauses(rng, 0.2))
    want = {pl: [] for pl in range(P)}
    oversize = [0] * P
    for _ in range(p["count"]):
        pl = rng.randrange(P)
        f = raw(random_mrc(rng, max_payload=1500))
        if rng.random() < 0.2:
            f += rng.randbytes(MAX - len(f) + rng.randint(1, 3 * L)) if len(f) <= MAX else b""
        want[pl].append(expected(f, MAX, L))
        oversize[pl] += len(f) > MAX
        srcs[pl].send_nowait(f)
    got = await receive(p["count"])
    for pl in range(P):
        mine = [(f, c) for q, f, c in got if q == pl]
        assert len(mine) == len(want[pl]), f"plane {pl}: {len(mine)} frames, {len(want[pl])} sent"
        for k, (g, w) in enumerate(zip(mine, want[pl], strict=True)):
            assert g == w, (f"plane {pl} frame {k}: {len(g[0])} bytes cut={g[1]}, expected "
                            f"{len(w[0])} bytes cut={w[1]}")
    await ClockCycles(dut.clk, 2)
    for pl in range(P):
        assert int(getattr(dut, f"oversize{pl}").value) == oversize[pl], f"plane {pl} oversize"
    for s in srcs:
        s.set_pause_generator(None)
        s.pause = False
    out.set_pause_generator(None)
    out.pause = False

    # 3. A frame that stops half-way on plane 0: it ends, cut, after the timeout; the other
    # planes go on meanwhile; when the rest of it comes it is dropped, and the next frame is
    # whole.
    stuck = raw(random_mrc(rng, max_payload=200)) + rng.randbytes(8 * L)
    nxt = raw(random_mrc(rng, max_payload=200))
    others = [raw(random_mrc(rng, max_payload=200)) for _ in range(3)]
    srcs[0].pause = False
    srcs[0].send_nowait(stuck)
    for _ in range(3):
        await RisingEdge(dut.clk)
    srcs[0].pause = True                   # the plane stops sending mid-frame
    for f in others:
        srcs[P - 1].send_nowait(f)
    got = await receive(1 + len(others))
    firsts = [g for g in got if g[0] == 0]
    assert len(firsts) == 1 and firsts[0][2] == 1, "the stalled frame did not end cut"
    cut_frame = firsts[0][1]
    assert cut_frame[:-1] == stuck[:len(cut_frame) - 1] and cut_frame[-1] == 0, \
        "the stalled frame should be its first beats and one filler byte"
    assert [g[1] for g in got if g[0] == P - 1] == others, "another plane was held up"
    assert int(dut.stalled0.value) == 1
    srcs[0].pause = False                  # the rest of the stalled frame arrives: dropped
    srcs[0].send_nowait(nxt)
    (pl, f, cut), = await receive(1)
    assert (pl, f, cut) == (0, nxt, 0), "the frame after a stalled one was not whole"

    # A frame offered and not yet taken keeps the output, even when a plane whose turn comes
    # first shows up meanwhile (plane 0 went last, so plane 1's turn comes before plane 2's).
    await ClockCycles(dut.clk, 10)
    out.pause = True
    late, early = raw(random_mrc(rng, max_payload=100)), raw(random_mrc(rng, max_payload=100))
    srcs[2 % P].send_nowait(early)
    await ClockCycles(dut.clk, 6)
    srcs[1].send_nowait(late)
    await ClockCycles(dut.clk, 6)
    out.pause = False
    got = await receive(2)
    assert [(g[0], g[1]) for g in got] == [(2 % P, early), (1, late)], \
        "the frame offered first was replaced by one whose turn came first"
    rules.check()
