"""cocotb test of the frame filter: passed frames leave whole, in order, with their record;
dropped ones never leave and are counted by reason; the input never waits while the output
keeps up."""

import random

import cocotb
from amaranth import unsigned
from cocotb.triggers import ClockCycles
from cocotbext.axi import AxiStreamFrame

from mrcnic.hdl.frame_filter import verdict_layout
from mrcnic.verif.layouts import encode
from mrcnic.verif.tbkit import StallCounter, StreamRules, last_user, params, pauses, setup, sink, source

META_BITS = 20


@cocotb.test()
async def filter_passes_and_drops_by_verdict(dut):
    p = params()
    rng = random.Random(p["seed"])
    R = p["reasons"]
    layout = verdict_layout(unsigned(META_BITS), R)
    await setup(dut)
    src, vsrc, out = source(dut, "i"), source(dut, "verdict"), sink(dut, "o")
    rules = StreamRules(dut, "o")

    async def run(n, gap, bp, late):
        src.set_pause_generator(pauses(rng, gap) if gap else None)
        src.pause = False
        out.set_pause_generator(pauses(rng, bp) if bp else None)
        out.pause = False
        frames = [rng.randbytes(rng.choice([1, 7, 64, rng.randint(1, 1600)])) for _ in range(n)]
        verdicts = [(rng.random() < 0.3, rng.randrange(R), rng.getrandbits(META_BITS))
                    for _ in range(n)]
        before = [int(getattr(dut, f"dropped{k}").value) for k in range(R)]
        for f in frames:
            src.send_nowait(f)

        async def judge():
            for drop, reason, meta in verdicts:
                if late:
                    await ClockCycles(dut.clk, rng.randint(0, late))
                await vsrc.send(AxiStreamFrame(encode(layout, {
                    "drop": drop, "reason": reason, "meta": meta})))

        cocotb.start_soon(judge())
        want = [(f, v[2]) for f, v in zip(frames, verdicts, strict=True) if not v[0]]
        for k, (f, meta) in enumerate(want):
            got = await out.recv()
            assert bytes(got.tdata) == f, f"passed frame {k} changed ({len(got.tdata)} bytes, " \
                                          f"{len(f)} sent)"
            assert last_user(got) == meta, f"passed frame {k}: record {last_user(got):#x}, " \
                                           f"expected {meta:#x}"
        await ClockCycles(dut.clk, 40)
        assert out.empty(), "a dropped frame left"
        for k in range(R):
            dropped = sum(1 for d, r, _ in verdicts if d and r == k)
            assert int(getattr(dut, f"dropped{k}").value) - before[k] == dropped, f"reason {k}"

    await run(p["count"], 0.0, 0.0, 0)
    await run(p["count"], 0.3, 0.3, 30)          # verdicts late, gaps, back-pressure
    await run(p["count"], 0.0, 0.6, 5)           # heavy back-pressure: storage fills

    # Line rate: frames back to back, prompt verdicts, output free: the input never waits.
    src.set_pause_generator(None)
    src.pause = False
    out.set_pause_generator(None)
    out.pause = False
    frames = [rng.randbytes(rng.randint(60, 1500)) for _ in range(40)]
    held = StallCounter(dut, "i")
    for f in frames:
        src.send_nowait(f)
        vsrc.send_nowait(AxiStreamFrame(encode(layout, {"drop": 0, "meta": 1})))
    for _ in frames:
        await out.recv()
    stalls = held.stop()
    assert stalls == 0, f"the input waited {stalls} cycles"
    rules.check()
