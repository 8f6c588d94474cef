"""cocotb module for ``make demo``: one write through the NIC's TX gateware.

Sets the NIC up through its registers with the driver (its address, the destination's uSID
template, the QP, its EV profile), puts the message in the host-memory model, posts one work
request and writes every packet each plane sends to ``<out>/tx_plane<p>.pcap``, stamped with
simulated time, and ``<out>/tx.json``."""

import json

import cocotb
from cocotb.triggers import ClockCycles
from cocotb.utils import get_sim_time
from cocotbext.axi import AxiStreamFrame
from scapy.layers.l2 import Ether
from scapy.utils import PcapWriter

from mrcnic import driver
from mrcnic.evmap import EvLayout, UsidTemplate
from mrcnic.hdl.qp_context import MTU_CODES, SrMode
from mrcnic.hdl.retransmit_tracker import RelMode
from mrcnic.hdl.segmenter import WrOpcode, work_request_layout
from mrcnic.regclient import AsyncRegisterClient
from mrcnic.verif.host_memory import HostMemory
from mrcnic.verif.layouts import encode
from mrcnic.verif.tbkit import CsrBus, params, setup, sink, source
from mrcnic.verif.tx_setup import SRC_IP, SRC_MAC


@cocotb.test()
async def demo_tx(dut):
    p = params()
    P = p["planes"]
    await setup(dut)
    t0 = get_sim_time("ns")
    dut.port_ready.value = (1 << P) - 1
    mem = HostMemory(dut, read="mem", write=None, latency=(8, 8))
    with open(p["message_file"], "rb") as f:
        message = f.read()
    mem.map(p["laddr"], len(message) + 64)
    await mem.write_bytes(p["laddr"], message)

    # The host's set-up, through the registers.
    regs = AsyncRegisterClient(CsrBus(dut))
    await regs.run(driver.identify())
    await regs.run(driver.set_addresses(SRC_MAC, SRC_IP))
    await regs.run(driver.write_template(0, UsidTemplate(p["block"], tuple(p["usids"]),
                                                         p["spine_index"])))
    q = p["qp"]
    await regs.run(driver.configure_qp(q, driver.QpConfig(
        dqp=p["dqp"], dst_mac=p["dst_mac"], dst_ip=p["dst_ip"], template=0,
        mtu=MTU_CODES[p["mtu_code"]], mode=SrMode.USID, next_psn=p["psn"])))
    await regs.run(driver.load_ev_profile(q, p["evs_list"], EvLayout(P, p["spines"])))
    # Nothing answers this NIC here (the fabric delivers to a receive-side parser), so its
    # reliability engine counts each packet acknowledged once sent, and no port status is
    # repeated to a peer that is not there.
    await regs.run(driver.set_reliability(RelMode.OFF, status_interval=0))
    await regs.run(driver.set_enabled(True))

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
