"""cocotb module that runs one gateware block as a stage of a larger simulation.

Reads frames from ``params['input']`` (a pcap), sends them back to back (or at the times the
pcap gives, when ``paced``), and writes what leaves: ``<output>.pcap`` stamped with simulated
time, and ``<output>.json`` with, per frame, its departure time and the block's verdict (tuser
of a checked stream, or the decoded record of a ``meta`` stream).
"""

import json

import cocotb
from cocotb.triggers import Timer
from cocotb.utils import get_sim_time
from scapy.utils import rdpcap

from mrcnic.hdl.header_parser import parsed_layout
from mrcnic.verif.layouts import decode
from mrcnic.verif.pcap import Pcap
from mrcnic.verif.tbkit import last_user, params, setup, sink, source


@cocotb.test()
async def stage(dut):
    p = params()
    frames = [(float(pkt.time), bytes(pkt)) for pkt in rdpcap(p["input"])]
    await setup(dut)
    t0 = get_sim_time("ns")
    src, snk = source(dut, "i"), sink(dut, "o")
    meta = sink(dut, "meta") if p.get("meta") else None

    async def feed():
        for t, f in frames:
            if p.get("paced"):
                wait = t * 1e9 - (get_sim_time("ns") - t0)
                if wait > 0:
                    await Timer(int(wait) + 1, unit="ns")
            await src.send(f)

    cocotb.start_soon(feed())
    writer = Pcap(p["output"] + ".pcap")
    records = []
    for _ in frames:
        got = await snk.recv()
        t = (get_sim_time("ns") - t0) / 1e9
        rec = {"time": t, "length": len(got.tdata), "user": last_user(got)}
        if meta is not None:
            m = await meta.recv()
            d = decode(parsed_layout(), m.tdata)
            rec["meta"] = {"error": d["error"].name, "bth": d["bth"], "ip": {
                "flow_label": d["ip"]["flow_label"]}, "udp": d["udp"],
                "srh_present": d["srh_present"], "outer_present": d["outer_present"]}
        writer.write(got.tdata, t * 1e9)
        records.append(rec)
    writer.close()
    with open(p["output"] + ".json", "w") as f:
        json.dump(records, f)
