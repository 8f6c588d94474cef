"""cocotb test of the whole TX pipeline: work requests in; on each plane, packets that equal,
byte for byte (ICRC included), what the reference sender and the EV mapping say for the EV the
spray scheduler chose; payload read from the host-memory model."""

import random

import cocotb
from cocotb.triggers import ClockCycles
from cocotbext.axi import AxiStreamFrame
from scapy.layers.l2 import Ether

from mrcnic import layers as L
from mrcnic.hdl.segmenter import WrOpcode, WrStatus, completion_layout, work_request_layout
from mrcnic.verif.layouts import decode, encode
from mrcnic.verif.packets import assert_frames_equal
from mrcnic.verif.tbkit import PcapTap, params, sink, source
from mrcnic.verif.tx_model import WriteRequest, segment
from mrcnic.verif.tx_setup import BASE, configure, reference_frame, sent_ev


@cocotb.test()
async def tx_sends_what_the_reference_says(dut):
    p = params()
    rng = random.Random(p["seed"])
    Q, P, T = p["qps"], p["planes"], p["templates"]
    cfg = await configure(dut, p, rng, not_ready=(Q - 1,))
    layout, mem, templates, qps, modes, profiles = (cfg.layout, cfg.mem, cfg.templates, cfg.qps,
                                                    cfg.modes, cfg.profiles)

    # Work requests and what they must become.
    expected, errors = {}, []
    wr_src = source(dut, "wr")
    free = BASE
    for n in range(p["count"]):
        q = rng.randrange(Q)
        length = rng.choice([1, 100, qps[q].mtu, rng.randint(1, p["max_length"])])
        if rng.random() < 0.05:
            length = 0
        data = rng.randbytes(length)
        laddr, free = free, free + length + 64
        await mem.write_bytes(laddr, data) if length else None
        imm = rng.getrandbits(32) if rng.random() < 0.3 else None
        va, rkey = rng.getrandbits(48), rng.getrandbits(32)
        await wr_src.send(AxiStreamFrame(encode(work_request_layout(), {
            "wr_id": n, "qp": q, "opcode": WrOpcode.WRITE_IMM if imm is not None else
            WrOpcode.WRITE, "laddr": laddr, "va": va, "rkey": rkey, "length": length,
            "imm": imm or 0})))
        if length == 0:
            errors.append((n, WrStatus.ZERO_LENGTH))
        elif q == Q - 1:
            errors.append((n, WrStatus.QP_NOT_RTS))
        else:
            for _, pkt in segment(qps[q], WriteRequest(va, rkey, data, imm), lambda: 0):
                expected[(pkt[L.BTH].dqp, pkt[L.BTH].psn)] = (q, pkt)

    # Collect every plane.
    taps = [PcapTap(dut, f"plane{pl}", f"tx_plane{pl}") for pl in range(P)]
    sinks = [sink(dut, f"plane{pl}", rng, p["backpressure"]) for pl in range(P)]
    got = []

    async def collect(pl):
        while True:
            f = await sinks[pl].recv()
            got.append((pl, bytes(f.tdata)))

    for pl in range(P):
        cocotb.start_soon(collect(pl))
    cl = completion_layout(Q)
    csink = sink(dut, "cpl")
    for n, status in errors:
        c = decode(cl, (await csink.recv()).tdata)
        assert (c["wr_id"], c["status"]) == (n, status), f"completion {c}, expected {n} {status}"
    for _ in range(200000):
        if len(got) >= len(expected):
            break
        await ClockCycles(dut.clk, 10)
    await ClockCycles(dut.clk, 20)
    assert len(got) == len(expected), f"{len(got)} packets left, {len(expected)} expected"

    seen = set()
    per_plane = {q: [0] * P for q in range(Q)}
    for k, (pl, frame) in enumerate(got):
        pkt = Ether(frame)
        key = (pkt[L.BTH].dqp, pkt[L.BTH].psn)
        assert key in expected, f"packet {k}: DQP {key[0]:#x} PSN {key[1]:#x} was never asked for"
        assert key not in seen, f"packet {k}: DQP {key[0]:#x} PSN {key[1]:#x} sent twice"
        seen.add(key)
        q, want = expected[key]
        ev = sent_ev(frame)
        assert ev in profiles[q], f"packet {k}: EV {ev:#x} is not in QP {q}'s profile"
        assert pl == layout.plane(ev), f"packet {k}: EV {ev:#x} is on plane " \
                                       f"{layout.plane(ev)}, left on plane {pl}"
        per_plane[q][pl] += 1
        assert_frames_equal(reference_frame(want, frame, templates[q % T], layout, modes[q]),
                            frame, f"packet {k} (QP {q}, plane {pl})")
    for q, counts in per_plane.items():
        if sum(counts) > 1:
            assert max(counts) - min(counts) <= 1 + sum(counts) // 8, \
                f"QP {q} planes unbalanced: {counts}"
    for t in taps:
        t.close()
