"""cocotb test of the segmenter: each work request's packet descriptors equal, field by field,
the packets the reference sender builds with scapy, in order within each QP; bad requests get
error completions; a QP whose window is shut holds up no other, and open QPs take turns."""

import random
from collections import Counter

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge
from cocotbext.axi import AxiStreamFrame

from mrcnic import layers as L
from mrcnic.hdl.qp_context import MTU_CODES, QpState, context_write_layout
from mrcnic.hdl.segmenter import (
    WrOpcode,
    WrStatus,
    completion_layout,
    packet_descriptor_layout,
    work_request_layout,
)
from mrcnic.verif.layouts import decode, encode
from mrcnic.verif.tbkit import params, setup, sink, source
from mrcnic.verif.tx_model import QueuePair, WriteRequest, segment


@cocotb.test()
async def descriptors_match_the_reference_sender(dut):
    p = params()
    rng = random.Random(p["seed"])
    qps = p["qps"]
    await setup(dut)
    ctx_src = source(dut, "ctx_write")
    wr_src = source(dut, "wr")
    pkts = sink(dut, "pkt", rng, 0.3)
    cpls = sink(dut, "cpl", rng, 0.3)

    model = {}
    states = {}
    for q in range(qps):
        code = rng.choice(sorted(MTU_CODES))
        psn = (1 << 24) - 3 if q == 0 else rng.getrandbits(24)   # QP 0 wraps at once
        states[q] = QpState.RTS if q != qps - 1 else QpState.RTR  # the last QP may not send
        model[q] = QueuePair(dqp=0x100 + q, mtu=MTU_CODES[code], next_psn=psn,
                             msn=rng.getrandbits(16))
        await ctx_src.send(AxiStreamFrame(encode(context_write_layout(qps), {
            "qp": q, "static": {"state": states[q], "dqp": 0x100 + q, "mtu": code},
            "seq": {"next_psn": psn, "msn": model[q].msn}})))
    await ctx_src.wait()

    expected_pkts, expected_cpls = [], []
    wrs = []
    for n in range(p["count"]):
        q = rng.randrange(qps + 1)            # qps itself is no QP
        kind = rng.random()
        length = rng.choice([1, 255, 256, 257, 4096, rng.randint(1, 64 * 1024)])
        if n == 0:
            q, kind, length = 0, 1.0, 16 * 1024    # held by a shut window at first (below)
        elif n == 1:
            # another QP's write right behind it, which must not wait for it (a QP's queue of
            # requests is finite: enough of them for QP 0 alone would hold the intake)
            q, kind, length = 1, 1.0, 256
        if kind < 0.05:
            length = 0
        elif kind < 0.08:
            length = (1 << 31) + rng.randint(1, 1000)
        imm = rng.getrandbits(32) if rng.random() < 0.5 else None
        wr = {"wr_id": n, "qp": q, "opcode": WrOpcode.WRITE_IMM if imm is not None else
              WrOpcode.WRITE, "laddr": rng.getrandbits(48), "va": rng.getrandbits(48),
              "rkey": rng.getrandbits(32), "length": length, "imm": imm or 0}
        wrs.append(wr)
        if q >= qps:
            expected_cpls.append((n, WrStatus.BAD_QP))
        elif length == 0:
            expected_cpls.append((n, WrStatus.ZERO_LENGTH))
        elif length > 1 << 31:
            expected_cpls.append((n, WrStatus.TOO_LONG))
        elif states[q] is not QpState.RTS:
            expected_cpls.append((n, WrStatus.QP_NOT_RTS))
        else:
            data = rng.randbytes(length)
            for _, pkt in segment(model[q], WriteRequest(wr["va"], wr["rkey"], data, imm),
                                  lambda: 0):
                expected_pkts.append((n, q, wr["laddr"], pkt))

    # The window: QP 0's shut for the first stretch, then each QP's open or shut at random.
    lay = packet_descriptor_layout(qps)
    qp_field = lay["qp"]
    opened = {"mask": (1 << qps) - 2, "shut_seen": 0}
    dut.open.value = opened["mask"]

    async def windows():
        await ClockCycles(dut.clk, 3000)
        while True:
            opened["mask"] = rng.getrandbits(qps) | (1 << rng.randrange(qps))
            dut.open.value = opened["mask"]
            await ClockCycles(dut.clk, rng.randint(1, 80))

    async def watch():
        # A descriptor is offered only while its QP's window is open.
        while True:
            await FallingEdge(dut.clk)
            if dut.pkt_tvalid.value:
                q = int(dut.pkt_tdata.value) >> qp_field.offset & ((1 << qp_field.width) - 1)
                assert opened["mask"] >> q & 1, f"QP {q} offered a packet with its window shut"

    cocotb.start_soon(windows())
    cocotb.start_soon(watch())
    for wr in wrs:
        await wr_src.send(AxiStreamFrame(encode(work_request_layout(), wr)))

    assert any(pkt[L.BTH].psn == 0 for *_, pkt in expected_pkts), "no PSN wrapped"
    want_by_qp = {}
    for k, (n, q, laddr, pkt) in enumerate(expected_pkts):
        want_by_qp.setdefault(q, []).append((k, n, laddr, pkt))
    got_qps = []
    for _ in expected_pkts:
        got = decode(lay, (await pkts.recv()).tdata)
        q = got["qp"]
        assert want_by_qp.get(q), f"descriptor {len(got_qps)}: QP {q} had nothing more to send"
        k, n, laddr, pkt = want_by_qp[q].pop(0)
        got_qps.append((q, got["last"]))
        bth, reth = pkt[L.BTH], pkt[L.RETH]
        payload = len(bytes(reth.payload)) - (4 if pkt.haslayer(L.ImmDt) else 0)
        want = {"wr_id": n, "qp": q, "opcode": bth.opcode, "psn": bth.psn,
                "msn": pkt[L.METH].msn, "va": reth.va, "laddr": laddr + (reth.va - wrs[n]["va"]),
                "length": payload, "dma_length": reth.dma_length, "rkey": reth.rkey,
                "imm": pkt[L.ImmDt].imm if pkt.haslayer(L.ImmDt) else wrs[n]["imm"],
                "last": int(bth.opcode in (0xC8, 0xC9, 0xCA, 0xCB))}
        diff = [f"  {f}: expected {v:#x}, got {got[f]:#x}" for f, v in want.items() if got[f] != v]
        assert not diff, (f"QP {q}'s descriptor {k} (work request {n}), arriving "
                          f"{len(got_qps) - 1}th:\n" + "\n".join(diff))
    # QP 0's write came first but its window was shut: the others went ahead of it.
    assert got_qps[0][0] != 0, "the first descriptor was QP 0's, whose window was shut"
    # While several QPs have messages their packets take turns: count a change of QP in the
    # middle of a message. Only a message of several packets has a middle, and how many there
    # are depends on the seed's MTUs and lengths: a quarter of them must see another QP's turn.
    turns = sum(a[0] != b[0] and not a[1] for a, b in zip(got_qps, got_qps[1:], strict=False))
    long_messages = sum(c > 1 for c in Counter(n for n, *_ in expected_pkts).values())
    assert turns >= long_messages // 4, (f"only {turns} turns mid-message in {len(got_qps)} "
                                         f"descriptors, {long_messages} messages of several packets")
    clay = completion_layout(qps)
    for n, status in expected_cpls:
        got = decode(clay, (await cpls.recv()).tdata)
        assert (got["wr_id"], got["status"]) == (n, status), (
            f"completion {got}, expected work request {n} {status.name}")
    assert pkts.empty() and cpls.empty()
    await ClockCycles(dut.clk, 2)
    assert int(dut.requests.value) == len(wrs)
    assert int(dut.errors.value) == len(expected_cpls)
