"""cocotb test of the packet records: every cycle, a random send (new, stale, or a
retransmission in flight or not), a random slot read (or the read held), and now and then the
slot read kept as trimmed; what is recorded, read and kept checked against a model of the
rules (a new packet is its QP's next PSN on its first try; a retransmission is recorded only in
flight; the read is transparent for a send in its cycle, the trimmed times' read is not)."""

import random

import cocotb
from amaranth.lib.data import ArrayLayout
from cocotb.triggers import FallingEdge, RisingEdge, Timer

from mrcnic.hdl.packet_records import record_layout, sent_layout
from mrcnic.hdl.reorder_tracker import PSN_BITS
from mrcnic.verif.layouts import as_int, decode
from mrcnic.verif.tbkit import params, setup

PSN_MOD = 1 << PSN_BITS


def _diff(got: dict, want: dict, at: str = "") -> dict:
    """The fields where two records differ, by dotted name: (got, want)."""
    out = {}
    for k, v in want.items():
        if isinstance(v, dict):
            out.update(_diff(got[k], v, f"{at}{k}."))
        elif got[k] != v:
            out[at + k] = (got[k], v)
    return out


@cocotb.test()
async def each_packet_sent_is_recorded_in_its_slot(dut):
    p = params()
    rng = random.Random(p["seed"])
    qps, evs, window = p["qps"], p["evs"], p["window"]
    rows = 1 << max(1, (qps - 1).bit_length())
    psns, sents, recs = ArrayLayout(PSN_BITS, qps), sent_layout(qps, evs), record_layout(qps, evs)
    empty = decode(recs, 0)
    await setup(dut)
    records = {}                       # slot -> record
    trims = [0] * (rows * window)
    una = [rng.randrange(PSN_MOD) for _ in range(qps)]
    nxt = [(u + rng.randrange(window)) % PSN_MOD for u in una]
    want_rec, want_trim = empty, 0     # what the read ports give now
    seen = {"new": 0, "first": 0, "stale_new": 0, "rtx_live": 0, "rtx_dead": 0, "held": 0,
            "transparent": 0, "trimmed": 0, "trim_of_record": 0}
    for cycle in range(p["cycles"]):
        await FallingEdge(dut.clk)
        q = rng.randrange(qps)
        if rng.random() < 0.15:                    # una moves on, or the QP starts afresh
            una[q] = (una[q] + rng.randrange((nxt[q] - una[q]) % PSN_MOD + 1)) % PSN_MOD
        if rng.random() < 0.02:
            una[q] = nxt[q] = rng.randrange(PSN_MOD)
        valid = rng.random() < 0.6
        sq = rng.randrange(qps)
        tries = 0 if rng.random() < 0.7 else rng.randrange(1, 8)
        off = rng.choice([(nxt[sq] - una[sq]) % PSN_MOD, rng.randrange(window + 3)])
        psn = (una[sq] + off) % PSN_MOD if rng.random() < 0.95 else rng.randrange(PSN_MOD)
        pkt = {"wr_id": rng.getrandbits(16), "qp": sq, "opcode": rng.getrandbits(8), "psn": psn,
               "msn": rng.getrandbits(16), "va": rng.getrandbits(64), "laddr": rng.getrandbits(64),
               "length": rng.getrandbits(13), "dma_length": rng.getrandbits(32),
               "rkey": rng.getrandbits(32), "imm": rng.getrandbits(32),
               "last": rng.getrandbits(1), "tries": tries}
        sent = {"pkt": pkt, "index": rng.randrange(evs), "ev": rng.getrandbits(32)}
        now = rng.getrandbits(16)
        aq = rng.randrange(qps)
        apsn = (una[aq] + rng.randrange(window)) % PSN_MOD
        if rng.random() < 0.3:                     # read the slot being written
            aq, apsn = sq, psn
        read, trimmed = rng.random() < 0.8, rng.random() < 0.1
        for name, value in (("sent_tvalid", int(valid)), ("sent_tdata", as_int(sents, sent)),
                            ("now", now), ("una", as_int(psns, una)), ("nxt", as_int(psns, nxt)),
                            ("addr_qp", aq), ("addr_psn", apsn), ("read", int(read)),
                            ("trimmed", int(trimmed))):
            getattr(dut, name).value = value
        await Timer(1, "ns")
        new = valid and tries == 0 and psn == nxt[sq]
        live = (psn - una[sq]) % PSN_MOD < (nxt[sq] - una[sq]) % PSN_MOD
        first = una[sq] == nxt[sq]
        got = (int(dut.new.value), int(dut.first.value))
        assert got == (int(new), int(first)), f"cycle {cycle}: (new, first) {got}"
        got_rec, got_trim = decode(recs, int(dut.record.value)), int(dut.trim_time.value)
        assert got_rec == want_rec, f"cycle {cycle}: record (got, want) {_diff(got_rec, want_rec)}"
        assert got_trim == want_trim, f"cycle {cycle}: trimmed time {got_trim}, not {want_trim}"
        await RisingEdge(dut.clk)
        a_slot = aq * window + apsn % window
        want_trim = trims[a_slot]                  # (read before this cycle's keeping)
        if trimmed:
            trims[a_slot] = want_rec["time"]
            seen["trimmed"] += 1
            seen["trim_of_record"] += want_rec != empty
        s_slot = sq * window + psn % window
        if new or (valid and tries and live):
            records[s_slot] = {**sent, "time": now}
            seen["rtx_live" if tries else "new"] += 1
            seen["first"] += new and first
            seen["transparent"] += read and s_slot == a_slot
        elif valid:
            seen["rtx_dead" if tries else "stale_new"] += 1
        if new:
            nxt[sq] = (psn + 1) % PSN_MOD
        if read:
            want_rec = records.get(a_slot, empty)
        else:
            seen["held"] += 1
    assert all(seen.values()), f"cases never seen: {seen}"
