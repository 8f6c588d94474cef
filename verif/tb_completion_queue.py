"""cocotb test of the completion queue: with a stream's route clear its records pass out
untouched; with it set each record becomes an entry laid out as ``regmap.CQ_ENTRY`` says, in
the order taken, popped one at a time; a full queue loses entries and counts each, and nothing
that waits on it ever stalls."""

import random

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge, RisingEdge
from cocotbext.axi import AxiStreamFrame

from mrcnic.enums import WrStatus
from mrcnic.hdl.rx_event import completion_layout as recv_layout
from mrcnic.hdl.segmenter import completion_layout as send_layout
from mrcnic.regmap import CQ_ENTRY, unpack
from mrcnic.verif.layouts import decode, encode
from mrcnic.verif.tbkit import params, setup, sink, source


def entry_fields(value: int) -> dict:
    """An entry's fields by the register map's layout (the driver's reading of cq.entry)."""
    return unpack(CQ_ENTRY, value)


def expected_entry(kind: str, rec: dict) -> dict:
    want = dict.fromkeys(CQ_ENTRY, 0)
    if kind == "send":
        want.update(wr_id=rec["wr_id"], qp=rec["qp"], status=rec["status"])
    else:
        want.update(qp=rec["qp"], msn=rec["msn"], imm=rec["imm"], has_imm=rec["has_imm"],
                    recv=1)
    return want


def random_record(rng, kind, qps):
    if kind == "send":
        return {"wr_id": rng.randrange(1 << 16), "qp": rng.randrange(qps),
                "status": rng.choice(list(WrStatus)).value}
    has_imm = rng.random() < 0.5
    return {"qp": rng.randrange(qps), "msn": rng.randrange(1 << 16),
            "imm": rng.randrange(1 << 32) if has_imm else 0, "has_imm": int(has_imm)}


class Queue:
    def __init__(self, dut):
        self.dut = dut

    async def entries(self) -> list[dict]:
        """Every entry waiting, popped in order, as the registers show them."""
        out = []
        while True:
            await FallingEdge(self.dut.clk)
            count = int(self.dut.count.value)
            if not count:
                assert int(self.dut.entry.value) == 0, "an empty queue shows a nonzero entry"
                return out
            out.append(entry_fields(int(self.dut.entry.value)))
            await RisingEdge(self.dut.clk)
            self.dut.pop_tvalid.value = 1
            await RisingEdge(self.dut.clk)
            self.dut.pop_tvalid.value = 0
            await FallingEdge(self.dut.clk)
            assert int(self.dut.count.value) == count - 1, "a pop did not take one entry"


@cocotb.test()
async def completions_pass_or_queue(dut):
    p = params()
    rng = random.Random(p["seed"])
    qps, depth = p["qps"], p["depth"]
    layouts = {"send": send_layout(qps), "recv": recv_layout(qps)}
    await setup(dut)
    dut.pop_tvalid.value = 0
    dut.pop_tdata.value = 1
    src = {k: source(dut, k, rng, 0.3) for k in layouts}
    out = {k: sink(dut, f"{k}_out", rng, 0.3) for k in layouts}
    q = Queue(dut)

    async def feed(records):
        """Sends {kind: [record]} on both streams at once, and waits until all are taken."""
        for k, recs in records.items():
            for rec in recs:
                await src[k].send(AxiStreamFrame(encode(layouts[k], rec)))
        for k in records:
            await src[k].wait()
        await ClockCycles(dut.clk, 4)

    # Route clear: both streams pass through untouched, and nothing is queued.
    dut.route.value = 0
    records = {k: [random_record(rng, k, qps) for _ in range(p["count"])] for k in layouts}
    await feed(records)
    for k in layouts:
        for n, want in enumerate(records[k]):
            got = decode(layouts[k], (await out[k].recv()).tdata)
            got = {f: getattr(v, "value", v) for f, v in got.items()}
            assert got == want, f"{k} record {n} passed out as {got}, not {want}"
    assert int(dut.count.value) == 0, "records passing through were queued too"

    # Each route on its own, then both: the entries in the order the streams gave them.
    for route in (1, 2, 3):
        dut.route.value = route
        await ClockCycles(dut.clk, 2)
        kinds = [k for i, k in enumerate(layouts) if route >> i & 1]
        records = {k: [random_record(rng, k, qps) for _ in range(depth // 2 - 1)]
                   for k in layouts}
        await feed(records)
        got = await q.entries()
        for k in kinds:
            mine = [e for e in got if e["recv"] == (k == "recv")]
            want = [expected_entry(k, r) for r in records[k]]
            assert len(mine) == len(want), f"route {route}: {len(mine)} {k} entries, not {len(want)}"
            for n, (a, b) in enumerate(zip(mine, want, strict=True)):
                diff = {f: (a[f], b[f]) for f in b if a[f] != b[f]}
                assert not diff, f"route {route}: {k} entry {n}, (got, want) by field: {diff}"
        for k in layouts:
            if k not in kinds:       # the other stream passed through
                for n, want in enumerate(records[k]):
                    got_rec = decode(layouts[k], (await out[k].recv()).tdata)
                    got_rec = {f: getattr(v, "value", v) for f, v in got_rec.items()}
                    assert got_rec == want, f"route {route}: {k} record {n} changed passing out"
        assert int(dut.overflows.value) == 0

    # A full queue: the entries beyond its depth are lost and counted, the streams never wait.
    dut.route.value = 3
    extra = 5
    records = {"send": [random_record(rng, "send", qps) for _ in range(depth + extra)]}
    src["send"].set_pause_generator(iter(lambda: False, True))
    await feed(records)
    assert int(dut.overflows.value) == extra, f"{int(dut.overflows.value)} overflows, not {extra}"
    got = await q.entries()
    assert got == [expected_entry("send", r) for r in records["send"][:depth]], \
        "a full queue did not keep its first entries"
    # A pop of an empty queue does nothing.
    dut.pop_tvalid.value = 1
    await ClockCycles(dut.clk, 3)
    dut.pop_tvalid.value = 0
    await FallingEdge(dut.clk)
    assert int(dut.count.value) == 0 and int(dut.entry.value) == 0
