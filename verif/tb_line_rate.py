"""cocotb bench: how close a block comes to one beat a cycle.

Back-to-back frames in, output never back-pressured. Utilisation = the cycles an ideal
back-to-back stream of the frames that leave needs (each frame ceil(bytes / bytes per beat)
beats, no idle cycle between frames) / the cycles from the first beat accepted to the last beat
out. Writes ``line_rate.json`` into the run directory.
"""

import json
import random

import cocotb
from cocotb.triggers import RisingEdge
from scapy.compat import raw
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from mrcnic import layers as L
from mrcnic import wire
from mrcnic.evmap import EvLayout, UsidTemplate
from mrcnic.verif.packets import encapsulate
from mrcnic.verif.tbkit import params, run_dir, setup, sink, source

TEMPLATE = UsidTemplate(0xFCBB, tuple(range(0x10, 0x19)), spine_index=1)   # needs an SRH


def write_only(rng, payload, psn):
    return (Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
            / IPv6(src="fd00::1", dst="fd00::2", tc=wire.DscpClass.DATA_TRIMMABLE << 2 | 2)
            / UDP(sport=rng.getrandbits(16), dport=wire.ROCE_UDP_PORT, chksum=0)
            / L.BTH(opcode=wire.Opcode.WRITE_ONLY, dqp=0x11, psn=psn, tsh=1)
            / L.METH(msn=psn) / L.TSETH(tx_timestamp=psn) / L.RETH(va=0x1000 * psn, rkey=7,
                                                                    dma_length=payload)
            / rng.randbytes(payload))


@cocotb.test()
async def line_rate(dut):
    p = params()
    rng = random.Random(1)
    lanes = p["width"] // 8
    results = {}
    await setup(dut)
    src, snk = source(dut, "i"), sink(dut, "o")
    extra = sink(dut, "meta") if p["dut"] == "parser" else None
    for payload in p["payloads"]:
        frames = []
        for n in range(p["count"]):
            pkt = write_only(rng, payload, n)
            if p["dut"] == "parser":
                pkt = encapsulate(pkt, TEMPLATE, EvLayout(2, 2), 0x101)
            frames.append(raw(pkt))
        sent = [f[:-4] for f in frames] if p["dut"] == "inserter" else frames
        ideal = sum(-(-len(f) // lanes) for f in frames)
        # Count cycles while the frames pass.
        cycle, first, last, done = 0, None, None, 0
        for f in sent:
            src.send_nowait(f)
        while done < len(frames):
            await RisingEdge(dut.clk)
            cycle += 1
            if first is None and dut.i_tvalid.value and dut.i_tready.value:
                first = cycle
            if dut.o_tvalid.value and dut.o_tready.value and dut.o_tlast.value:
                done += 1
                last = cycle
        for _ in frames:
            await snk.recv()
            if extra is not None:
                await extra.recv()
        results[payload] = {"ideal_cycles": ideal, "cycles": last - first + 1,
                            "utilisation": ideal / (last - first + 1), "frames": len(frames)}
    (run_dir() / "line_rate.json").write_text(json.dumps(results))
