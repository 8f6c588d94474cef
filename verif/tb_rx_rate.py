"""cocotb benches: RX utilisation, of the front end alone and of the whole receive side.

Back-to-back SRv6 frames (outer IPv6 to the uSID carrier, ICRC right) offered on plane 0 with no
gap, nothing downstream ever back-pressured. Utilisation = the cycles the offered stream takes on
the wire (each frame ceil(bytes / bytes per beat) beats, no idle cycle) / the cycles from the
first beat offered to the last beat taken (1.0 = the input was never held). Writes
``rx_rate.json`` into the run directory.

For the whole receive side the frames are the writes of one QP in order, one packet each, every
one placed, acknowledged and completed; the bench checks that they were.
"""

import json
import random

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge
from scapy.compat import raw
from scapy.layers.l2 import Ether

from mrcnic.evmap import EvLayout, UsidTemplate
from mrcnic.hdl.qp_context import QpState
from mrcnic.verif.packets import encapsulate, random_mrc
from mrcnic.verif.rx_model import RxQp
from mrcnic.verif.tb_rx import Rx
from mrcnic.verif.tbkit import params, run_dir, setup, sink, source
from mrcnic.verif.tx_model import QueuePair, WriteRequest, segment

TEMPLATE = UsidTemplate(0xFCBB, (0x120, 0x110, 0x130), spine_index=1)


def _encap(rng, layout, pkt):
    ev = layout.make(0, rng.randrange(layout.spines), rng.getrandbits(32))
    return raw(encapsulate(pkt, TEMPLATE, layout, ev))


async def _measure(dut, frames, L):
    """Cycles from the first beat offered on plane 0 to the last taken, and the ideal."""
    cycle, first, last, taken = 0, None, None, 0
    total = sum(-(-len(f) // L) for f in frames)
    while taken < total:
        await RisingEdge(dut.clk)
        cycle += 1
        if int(dut.plane0_tvalid.value):
            first = first or cycle
            if int(dut.plane0_tready.value):
                taken += 1
                last = cycle
    return total, last - first + 1


def _write(p, frames, total, cycles):
    (run_dir() / "rx_rate.json").write_text(json.dumps({
        "payload": p["payload"], "packets": len(frames), "ideal_cycles": total,
        "cycles": cycles, "utilisation": total / cycles}))


@cocotb.test()
async def rx_front_rate(dut):
    p = params()
    rng = random.Random(1)
    layout = EvLayout(p["planes"], 4)
    frames = [_encap(rng, layout, random_mrc(rng, payload=p["payload"]))
              for _ in range(p["packets"])]
    await setup(dut)
    src, out = source(dut, "plane0"), sink(dut, "o")
    for f in frames:
        src.send_nowait(f)
    total, cycles = await _measure(dut, frames, p["width"] // 8)
    for _ in frames:
        await out.recv()
    await ClockCycles(dut.clk, 2)
    assert int(dut.frames.value) == len(frames), "not every frame passed"
    _write(p, frames, total, cycles)


@cocotb.test()
async def rx_rate(dut):
    p = params()
    rng = random.Random(1)
    layout = EvLayout(p["planes"], 4)
    n, size = p["packets"], p["payload"]
    c = RxQp(state=QpState.RTS.value, rkey=0xBEEF, mr_va=1 << 40, mr_length=n * size,
             rx_psn=rng.getrandbits(24), rx_msn=rng.getrandbits(16))
    peer = QueuePair(dqp=0, mtu=max(256, size), next_psn=c.rx_psn, msn=c.rx_msn)
    frames, data = [], rng.randbytes(n * size)
    for k in range(n):
        wr = WriteRequest(va=c.mr_va + k * size, rkey=c.rkey, data=data[k * size:(k + 1) * size])
        frames += [_encap(rng, layout, Ether(raw(pkt)))
                   for _, pkt in segment(peer, wr, lambda: rng.getrandbits(32))]
    await setup(dut)
    rx = Rx(dut, rng, {**p, "backpressure": 0.0, "coalesce": 1})
    rx.mem.map(c.mr_va, c.mr_length)
    await rx.configure(0, c)
    for f in frames:
        rx.planes[0].send_nowait(f)
    total, cycles = await _measure(dut, frames, p["width"] // 8)
    for _ in frames:
        await rx.cpl.recv()
    await ClockCycles(dut.clk, 2)
    assert int(dut.outcome_placed.value) == len(frames), "not every packet was placed"
    assert bytes(await rx.mem.read_bytes(c.mr_va, c.mr_length)) == data, "memory differs"
    _write(p, frames, total, cycles)
