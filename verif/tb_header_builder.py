"""cocotb test of the header builder: each packet out equals, field by field, the one the
reference sender builds with scapy (less its ICRC), its payload read from the host-memory model
and its peer from a table of the QPs' contexts; a failed read sends nothing and completes in
error."""

import random

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge
from cocotbext.axi import AxiStreamFrame
from scapy.compat import raw
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from mrcnic import layers as L
from mrcnic.evmap import EvLayout
from mrcnic.hdl.header_builder import build_request_layout, frame_layout
from mrcnic.hdl.qp_context import SrMode, peer_layout
from mrcnic.hdl.segmenter import WrStatus, completion_layout
from mrcnic.icrc import icrc_bytes
from mrcnic.verif.host_memory import HostMemory
from mrcnic.verif.layouts import decode, encode
from mrcnic.verif.packets import assert_frames_equal
from mrcnic.verif.tbkit import params, recv_packet, setup, sink, source
from mrcnic.verif.tx_model import MTUS, EvProfile, QueuePair, WriteRequest, segment

BASE, SIZE = 0x4000_0000, 1 << 20
BROKEN = (BASE + SIZE - 0x1000, 0x1000)   # reads here fail


def route_of(peer: dict) -> dict:
    return {"template": peer["template"], "mode": peer["mode"]}


async def serve_peers(dut, peers):
    """The QP context's peer read port: ``peer`` follows ``peer_qp`` within the cycle (the
    builder's ``peer_qp`` comes from its registers, so it is settled by the falling edge)."""
    while True:
        await FallingEdge(dut.clk)
        dut.peer.value = peers[int(dut.peer_qp.value)]


@cocotb.test()
async def packets_match_the_reference_sender(dut):
    p = params()
    rng = random.Random(p["seed"])
    qps = p["qps"]
    await setup(dut)
    mem = HostMemory(dut, read="mem", write=None, rng=rng, latency=(2, 12), gap=p["gap"])
    mem.map(BASE, SIZE)
    mem.fail(*BROKEN)
    proto = QueuePair(dqp=0)
    dut.src_mac.value = int(proto.src_mac.replace(":", ""), 16)
    dut.src_ip.value = proto.src_ip
    req = source(dut, "req", rng, p["gap"])
    out = sink(dut, "o", rng, p["backpressure"])
    cpl = sink(dut, "cpl")
    frames = sink(dut, "frame")
    profile = EvProfile(EvLayout(2, 4), 8, rng)
    # Each QP's peer, in the context the builder reads (a different one for every QP).
    qps_ctx = [QueuePair(dqp=rng.getrandbits(24), dst_mac="02:00:00:00:00:%02x" % (q + 16),
                         dst_ip=(0xFD00 << 112) | rng.getrandbits(64)) for q in range(qps)]
    peers = [int.from_bytes(encode(peer_layout(), {
        "dqp": c.dqp, "dst_mac": int(c.dst_mac.replace(":", ""), 16), "dst_ip": c.dst_ip,
        "template": rng.getrandbits(8), "mode": rng.choice(list(SrMode))}), "little")
        for c in qps_ctx]
    cocotb.start_soon(serve_peers(dut, peers))

    expected = []     # (frame scapy packet or None, wr_id, qp)
    free = BASE       # each message gets its own memory: reads overlap later writes otherwise
    for n in range(p["count"]):
        q = rng.randrange(qps)
        qp = QueuePair(dqp=qps_ctx[q].dqp, mtu=rng.choice(MTUS),
                       next_psn=rng.getrandbits(24), msn=rng.getrandbits(16),
                       dst_mac=qps_ctx[q].dst_mac, dst_ip=qps_ctx[q].dst_ip)
        length = rng.choice([1, 7, 8, 9, qp.mtu, rng.randint(1, 3 * qp.mtu)])
        laddr = free + rng.randrange(0, 8)
        free = laddr + length
        assert free < BROKEN[0], "the test's messages outgrew its memory"
        if rng.random() < 0.1:
            laddr = BROKEN[0] + rng.randrange(0, BROKEN[1] - min(length, BROKEN[1] - 1))
        data = rng.randbytes(length)
        await mem.write_bytes(laddr, data) if laddr < BROKEN[0] else None
        imm = rng.getrandbits(32) if rng.random() < 0.4 else None
        va = rng.getrandbits(48)
        for k, (ev, pkt) in enumerate(segment(qp, WriteRequest(va, rng.getrandbits(32), data,
                                                               imm), profile.pick)):
            bth, reth = pkt[L.BTH], pkt[L.RETH]
            off = reth.va - va
            size = len(raw(reth.payload)) - (4 if pkt.haslayer(L.ImmDt) else 0)
            # (a message placed in the broken range may run past it, off the mapped memory:
            # those reads fail too)
            failed = BROKEN[0] < laddr + off + size
            wr_id = (n * 16 + k) & 0xFFFF
            plane = rng.randrange(2)
            expected.append((None if failed else pkt, wr_id, q, plane))
            await req.send(AxiStreamFrame(encode(build_request_layout(qps), {
                "pkt": {"wr_id": wr_id, "qp": q, "opcode": bth.opcode, "psn": bth.psn,
                        "msn": pkt[L.METH].msn, "va": reth.va, "laddr": laddr + off,
                        "length": size, "dma_length": reth.dma_length, "rkey": reth.rkey,
                        "imm": pkt[L.ImmDt].imm if pkt.haslayer(L.ImmDt) else 0,
                        "last": bth.ackreq},
                "ev": ev, "plane": plane})))

    last_ts = None
    cl = completion_layout(qps)
    for k, (pkt, wr_id, q, plane) in enumerate(expected):
        if pkt is None:
            got = decode(cl, (await cpl.recv()).tdata)
            assert (got["wr_id"], got["qp"], got["status"]) == (wr_id, q, WrStatus.MEMORY)
            continue
        got = await recv_packet(out)
        rec = decode(frame_layout(), (await frames.recv()).tdata)
        assert rec["length"] == len(raw(got)) + 4, f"packet {k}: frame record says " \
                                                   f"{rec['length']} bytes"
        assert rec["ev"] == (got[UDP].sport << 16 | got[IPv6].fl), f"packet {k}: frame EV"
        route = decode(peer_layout(), peers[q])
        assert rec["route"] == {**route_of(route), "plane": plane}, \
            f"packet {k}: the frame record's route is not QP {q}'s on plane {plane}"
        # The timestamp is the DUT's own clock: take it, then it must only move forward.
        ts = got[L.TSETH].tx_timestamp
        assert last_ts is None or (ts - last_ts) % 65536 < 32768, "TSETH went backwards"
        last_ts = ts
        want = pkt.copy()
        want[L.TSETH].tx_timestamp = ts
        want = Ether(raw(want))
        # The ICRC is the next block's: append it to what left so both dissect alike.
        frame = raw(got)
        frame += icrc_bytes(frame[14:])
        assert_frames_equal(raw(want), frame, f"packet {k} ({len(frame) - 4} bytes)")
        assert got[IPv6].plen == want[IPv6].plen
    await ClockCycles(dut.clk, 4)
    assert out.empty() and cpl.empty()
    fails = sum(p is None for p, *_ in expected)
    assert 0 < fails < len(expected)
    assert int(dut.mem_errors.value) == fails
    assert int(dut.frames.value) == len(expected) - fails
