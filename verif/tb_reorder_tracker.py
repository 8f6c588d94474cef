"""cocotb test of the reorder tracker against the receiver's reference model: in order, permuted
within the window, duplicated, past the window, behind the cumulative PSN, across the 2^24
wrap, over several QPs at once."""

import random

import cocotb
from cocotbext.axi import AxiStreamFrame

from mrcnic.hdl.reorder_tracker import ReorderTracker, result_layout
from mrcnic.verif.layouts import decode, encode
from mrcnic.verif.rx_model import PSN_MOD, ReorderModel
from mrcnic.verif.tbkit import params, setup, sink, source


def _diff(want, got):
    return [f"  {k}: expected {want[k]!r}, got {got[k]!r}" for k in want if want[k] != got[k]]


@cocotb.test()
async def tracker_agrees_with_the_model(dut):
    p = params()
    rng = random.Random(p["seed"])
    Q, W = p["qps"], p["window"]
    req = ReorderTracker(Q, W).signature.members["arrive"].signature.members["payload"].shape
    await setup(dut)
    init, arrive = source(dut, "init"), source(dut, "arrive", rng, 0.2)
    res = sink(dut, "result", rng, 0.2)
    model = ReorderModel(W)
    layout = result_layout(Q)

    starts = {q: rng.choice([0, PSN_MOD - 40, rng.randrange(PSN_MOD)]) for q in range(Q)}
    for q, s in starts.items():
        model.init(q, s)
        await init.send(AxiStreamFrame(encode(req, {"qp": q, "psn": s})))
    await init.wait()

    # Each QP's arrivals: its next PSNs, shuffled a little (within the window), some twice,
    # some far ahead, some long gone; the QPs interleaved.
    streams = {}
    for q, s in starts.items():
        psns = [(s + i) % PSN_MOD for i in range(p["count"])]
        moved = set()               # each PSN moves once, so none is displaced beyond W // 4
        for i in range(0, len(psns) - 1):
            j = min(len(psns) - 1, i + rng.randint(1, W // 4))
            if rng.random() < 0.3 and not {i, j} & moved:
                psns[i], psns[j] = psns[j], psns[i]
                moved |= {i, j}
        out = []
        for x in psns:
            out.append(x)
            r = rng.random()
            if r < 0.05:
                out.append(x)                                    # duplicate
            elif r < 0.07:
                out.append((x + W + rng.randint(0, 1000)) % PSN_MOD)   # past the window
            elif r < 0.09:
                out.append((x - rng.randint(1, 5000)) % PSN_MOD)       # long gone
        streams[q] = out
    order = [q for q in streams for _ in streams[q]]
    rng.shuffle(order)
    pos = {q: 0 for q in streams}
    sent = []
    for q in order:
        psn = streams[q][pos[q]]
        pos[q] += 1
        if rng.random() < 0.05:     # a look that records nothing, with a PSN that would be new
            sent.append((q, psn, 1))
            await arrive.send(AxiStreamFrame(encode(req, {"qp": q, "psn": psn, "peek": 1})))
        sent.append((q, psn, 0))
        await arrive.send(AxiStreamFrame(encode(req, {"qp": q, "psn": psn})))
    cack = {}
    for k, (q, psn, peek) in enumerate(sent):
        want = model.arrive(q, psn, peek=bool(peek))
        got = decode(layout, (await res.recv()).tdata)
        d = _diff(want, got)
        assert not d, f"arrival {k} (QP {q} PSN {psn:#x}):\n" + "\n".join(d)
        cack[q] = got["cack"]
    # Every QP got through its whole run: the tracker's cumulative PSN is past it.
    for q, s in starts.items():
        assert cack[q] == (s + p["count"]) % PSN_MOD, f"QP {q} stopped at {cack[q]:#x}"
