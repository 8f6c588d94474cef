"""cocotb module for ``make demo``: one write through the TX pipeline gateware.

Loads the demo's QP (its destination's uSID template, its EV profile), puts the message in the
host-memory model, posts one work request and writes every packet each plane sends to
``<out>/tx_plane<p>.pcap``, stamped with simulated time, and ``<out>/tx.json``."""

import json

import cocotb
from cocotb.triggers import ClockCycles
from cocotb.utils import get_sim_time
from cocotbext.axi import AxiStreamFrame
from scapy.layers.l2 import Ether
from scapy.utils import PcapWriter

from mrcnic.hdl.qp_context import QpState, SrMode, context_write_layout
from mrcnic.hdl.segmenter import WrOpcode, work_request_layout
from mrcnic.hdl.spray_scheduler import SprayScheduler
from mrcnic.hdl.srv6_encap import template_layout
from mrcnic.verif.host_memory import HostMemory
from mrcnic.verif.layouts import encode
from mrcnic.verif.tbkit import params, setup, sink, source
from mrcnic.verif.tx_setup import SRC_IP, SRC_MAC


@cocotb.test()
async def demo_tx(dut):
    p = params()
    Q, E, P, T, U = p["qps"], p["evs"], p["planes"], p["templates"], p["max_usids"]
    await setup(dut)
    t0 = get_sim_time("ns")
    dut.src_mac.value = int(SRC_MAC.replace(":", ""), 16)
    dut.src_ip.value = SRC_IP
    dut.port_ready.value = (1 << P) - 1
    mem = HostMemory(dut, read="mem", write=None, latency=(8, 8))
    with open(p["message_file"], "rb") as f:
        message = f.read()
    mem.map(p["laddr"], len(message) + 64)
    await mem.write_bytes(p["laddr"], message)

    tw, cw, ld = source(dut, "template_write"), source(dut, "ctx_write"), source(dut, "ev_load")
    await tw.send(AxiStreamFrame(encode(template_layout(T, U), {
        "index": 0, "block": p["block"], "count": len(p["usids"]),
        "spine_index": p["spine_index"],
        "usids": sum(u << (16 * i) for i, u in enumerate(p["usids"]))})))
    q = p["qp"]
    await cw.send(AxiStreamFrame(encode(context_write_layout(Q), {
        "qp": q, "static": {"state": QpState.RTS, "dqp": p["dqp"], "mtu": p["mtu_code"],
                            "mode": SrMode.USID, "template": 0,
                            "dst_mac": int(p["dst_mac"].replace(":", ""), 16),
                            "dst_ip": p["dst_ip"]},
        "seq": {"next_psn": p["psn"], "msn": 0}})))
    load = SprayScheduler(Q, E, P, 2).signature.members["load"].signature.members["payload"]
    for i, ev in enumerate(p["evs_list"]):
        await ld.send(AxiStreamFrame(encode(load.shape, {"qp": q, "index": i, "ev": ev})))
    for s in (tw, cw, ld):
        await s.wait()

    sinks = [sink(dut, f"plane{pl}") for pl in range(P)]
    writers = [PcapWriter(f"{p['out']}/tx_plane{pl}.pcap", linktype=1) for pl in range(P)]
    for w in writers:
        w.write_header(None)
    sent = []

    async def collect(pl):
        while True:
            f = await sinks[pl].recv()
            t = (get_sim_time("ns") - t0) / 1e9
            sent.append({"plane": pl, "time": t, "frame": bytes(f.tdata).hex()})
            writers[pl].write_packet(bytes(f.tdata), sec=int(t), usec=int((t % 1) * 1e6))

    for pl in range(P):
        cocotb.start_soon(collect(pl))
    wr = source(dut, "wr")
    start = get_sim_time("ns")
    await wr.send(AxiStreamFrame(encode(work_request_layout(), {
        "wr_id": 1, "qp": q, "opcode": WrOpcode.WRITE, "laddr": p["laddr"], "va": p["va"],
        "rkey": p["rkey"], "length": len(message)})))
    while len(sent) < p["packets"]:
        await ClockCycles(dut.clk, 16)
    await ClockCycles(dut.clk, 4)
    for w in writers:
        w.close()
    assert Ether(bytes.fromhex(sent[0]["frame"]))   # dissectable
    with open(f"{p['out']}/tx.json", "w") as f:
        json.dump({"start": (start - t0) / 1e9, "packets": sent}, f)
