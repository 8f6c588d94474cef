"""cocotb bench: TX line utilisation.

Write requests back to back, every plane's output never back-pressured, memory answering after
a fixed latency. Utilisation = the cycles an ideal back-to-back stream of the packets that left
needs (each ceil(frame bytes / bytes per beat) beats) / the cycles from the first request taken
to the last beat out. That span includes the pipeline's fill (first request to first beat out)
once; it is reported on its own as ``latency`` so it can be told apart from gaps on the line.
Writes ``tx_rate.json`` into the run directory.
"""

import json
import random

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge
from cocotbext.axi import AxiStreamFrame

from mrcnic.hdl.qp_context import MTU_CODES, SrMode
from mrcnic.hdl.segmenter import WrOpcode, work_request_layout
from mrcnic.verif.layouts import encode
from mrcnic.verif.tbkit import params, run_dir, sink, source
from mrcnic.verif.tx_setup import BASE, configure


@cocotb.test()
async def tx_rate(dut):
    p = params()
    rng = random.Random(1)
    P, L = p["planes"], p["width"] // 8
    payload = p["payload"]
    code = {v: k for k, v in MTU_CODES.items()}.get(payload, 0)
    cfg = await configure(dut, p, rng, mtu_code=code, modes=(SrMode.USID,), latency=(4, 4),
                          gap=0.0)
    sinks = [sink(dut, f"plane{pl}") for pl in range(P)]
    wr = source(dut, "wr")
    # Messages of one MTU-sized packet each when the payload is not an MTU, else many.
    per_msg = payload * (16 if payload in MTU_CODES.values() else 1)
    count = p["packets"] * payload // per_msg
    for n in range(count):
        laddr = BASE + n * per_msg
        await cfg.mem.write_bytes(laddr, rng.randbytes(per_msg))
        wr.send_nowait(AxiStreamFrame(encode(work_request_layout(), {
            "wr_id": n, "qp": n % p["qps"], "opcode": WrOpcode.WRITE, "laddr": laddr,
            "va": 0x1000 + n * per_msg, "rkey": 7, "length": per_msg})))
    packets = count * per_msg // payload
    cycle, first, first_out, last, done, ideal = 0, None, None, None, 0, 0
    while done < packets:
        await RisingEdge(dut.clk)
        cycle += 1
        if first is None and dut.wr_tvalid.value and dut.wr_tready.value:
            first = cycle
        for pl in range(P):
            if getattr(dut, f"plane{pl}_tvalid").value and getattr(dut, f"plane{pl}_tready").value:
                first_out = first_out or cycle
                if getattr(dut, f"plane{pl}_tlast").value:
                    done += 1
                    last = cycle
    await ClockCycles(dut.clk, 4)   # the sinks see the last beat a cycle after the count does
    lengths = []
    for s in sinks:
        while not s.empty():
            lengths.append(len((s.recv_nowait()).tdata))
    ideal = sum(-(-n // L) for n in lengths)
    assert len(lengths) == packets
    (run_dir() / "tx_rate.json").write_text(json.dumps({
        "payload": payload, "packets": packets, "ideal_cycles": ideal,
        "latency": first_out - first,
        "cycles": last - first + 1, "utilisation": ideal / (last - first + 1)}))
