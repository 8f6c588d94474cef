"""cocotb test of the front drop: each frame leaves without its first ``bytes`` bytes,
whatever the gaps and back-pressure, and back-to-back frames lose no cycle to it."""

import random

import cocotb
from cocotb.triggers import ClockCycles
from cocotbext.axi import AxiStreamFrame

from mrcnic.verif.layouts import encode
from mrcnic.verif.tbkit import StallCounter, StreamRules, params, pauses, setup, sink, source


def _layout(p):
    from mrcnic.hdl.front_drop import FrontDrop
    sig = FrontDrop(p["width"], p["max_bytes"], p["unit"]).signature
    return sig.members["drop"].signature.members["payload"].shape


@cocotb.test()
async def front_drop_cuts_each_frame(dut):
    p = params()
    rng = random.Random(p["seed"])
    U, MAX, L = p["unit"], p["max_bytes"], p["width"] // 8
    lay = _layout(p)
    await setup(dut)
    src, drops, out = source(dut, "i"), source(dut, "drop"), sink(dut, "o")
    rules = StreamRules(dut, "o")

    async def run(n, gap, bp, frames=None, cuts=None):
        for s, pr in ((src, gap), (drops, gap), (out, bp)):
            s.set_pause_generator(pauses(rng, pr) if pr else None)
            s.pause = False
        cuts = cuts or [U * rng.randint(0, MAX // U) for _ in range(n)]
        frames = frames or [rng.randbytes(c + rng.choice([1, 2, L - 1, L, L + 1,
                                                          rng.randint(1, 600)]))
                            for c in cuts]
        for f, c in zip(frames, cuts, strict=True):
            drops.send_nowait(AxiStreamFrame(encode(lay, {"bytes": c})))
            src.send_nowait(f)
        for k, (f, c) in enumerate(zip(frames, cuts, strict=True)):
            got = bytes((await out.recv()).tdata)
            assert got == f[c:], (f"frame {k} ({len(f)} bytes, drop {c}): {len(got)} bytes "
                                  f"out, {len(f) - c} expected")

    await run(p["count"], 0.0, 0.0)
    await run(p["count"], 0.3, 0.3)
    await run(p["count"], 0.0, 0.7)

    # Back to back, typical SRv6 strips (outer IPv6 and Ethernet: 54; with a 2-carrier SRH: 94):
    # the input waits no cycle.
    cuts = [rng.choice([54, 94]) for _ in range(30)]
    frames = [rng.randbytes(c + rng.randint(200, 1100)) for c in cuts]
    held = StallCounter(dut, "i")
    await run(30, 0.0, 0.0, frames, cuts)
    stalls = held.stop()
    await ClockCycles(dut.clk, 2)
    assert stalls == 0, f"the input waited {stalls} cycles"

    # Frames no longer than their drop leave nothing, and the frames after them are unharmed.
    cuts = [8, 16, 2 * L, 10, 54, 8]
    frames = [rng.randbytes(8), rng.randbytes(300), rng.randbytes(2 * L - 4), rng.randbytes(90),
              rng.randbytes(54), rng.randbytes(200)]
    for f, c in zip(frames, cuts, strict=True):
        drops.send_nowait(AxiStreamFrame(encode(lay, {"bytes": c})))
        src.send_nowait(f)
    for k, (f, c) in enumerate(zip(frames, cuts, strict=True)):
        if len(f) > c:
            got = bytes((await out.recv()).tdata)
            assert got == f[c:], f"frame {k} after a fully dropped one: {len(got)} bytes out"
    await ClockCycles(dut.clk, 20)
    assert out.empty(), "a fully dropped frame left something"
    rules.check()
