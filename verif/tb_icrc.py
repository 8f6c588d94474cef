"""cocotb tests of the ICRC inserter and checker: scapy-built MRC packets in, the packets scapy
says are right out."""

import random

import cocotb
from cocotb.triggers import ClockCycles
from scapy.compat import raw

from mrcnic import icrc, wire
from mrcnic.verif.packets import assert_frames_equal, random_mrc
from mrcnic.verif.tbkit import PcapTap, last_user, params, recv_packet, setup, sink, source


def _traffic(p):
    rng = random.Random(p["seed"])
    return rng, [raw(random_mrc(rng, max_payload=p.get("max_payload", 1500)))
                 for _ in range(p["count"])]


@cocotb.test()
async def inserter_appends_the_icrc_scapy_computes(dut):
    """Frames without ICRC in; each frame out equals the scapy packet, ICRC included."""
    p = params()
    rng, frames = _traffic(p)
    await setup(dut)
    src, snk = source(dut, "i", rng, p["gap"]), sink(dut, "o", rng, p["backpressure"])
    taps = [PcapTap(dut, "i", "inserter_in"), PcapTap(dut, "o", "inserter_out")]
    for f in frames:
        await src.send(f[:-4])
    for n, f in enumerate(frames):
        got = await recv_packet(snk)
        assert_frames_equal(f, raw(got), f"frame {n} of {len(frames)}")
    await ClockCycles(dut.clk, 2)
    assert int(dut.frames.value) == len(frames)
    for t in taps:
        t.close()


@cocotb.test()
async def checker_flags_exactly_the_corrupted_frames(dut):
    """Whole frames in, some with one bit flipped; icrc_ok equals the Python ICRC's verdict."""
    p = params()
    rng, frames = _traffic(p)
    sent, expect = [], []
    for f in frames:
        f = bytearray(f)
        if rng.random() < 0.3:
            # Anywhere, Ethernet header and masked fields included: the verdict must follow
            # the rules, not the position.
            f[rng.randrange(len(f))] ^= 1 << rng.randrange(8)
        sent.append(bytes(f))
        # The checker sees plain frames: the RoCEv2 packet starts right after Ethernet.
        expect.append(icrc.roce_icrc_ok(bytes(f[wire.ETHERNET.length:])))
    await setup(dut)
    src, snk = source(dut, "i", rng, p["gap"]), sink(dut, "o", rng, p["backpressure"])
    for f in sent:
        await src.send(f)
    for n, (f, ok) in enumerate(zip(sent, expect, strict=True)):
        got = await snk.recv()
        assert bytes(got.tdata) == f, f"frame {n} was changed on its way through"
        assert last_user(got) == ok, f"frame {n}: icrc_ok {last_user(got)}, expected {ok}"
    await ClockCycles(dut.clk, 2)
    assert int(dut.frames.value) == len(frames)
    assert int(dut.bad.value) == expect.count(False)
    assert 0 < expect.count(False) < len(frames), "the traffic must hold good and bad frames"
