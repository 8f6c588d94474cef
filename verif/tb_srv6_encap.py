"""cocotb test of SRv6 encapsulation: each frame out equals the scapy packet the EV mapping of
mrcnic.evmap says the network must carry, in both carrier formats (F1616, F3216), addressed to
its plane's next hop where one is set."""

import random

import cocotb
from cocotb.triggers import ClockCycles
from cocotbext.axi import AxiStreamFrame
from scapy.compat import raw

from mrcnic.evmap import EvLayout, UsidTemplate
from mrcnic.hdl.qp_context import SrMode
from mrcnic.hdl.srv6_encap import route_layout, template_layout
from mrcnic.verif.layouts import encode
from mrcnic.verif.packets import assert_frames_equal, encapsulate, random_mrc
from mrcnic.verif.tbkit import PcapTap, params, setup, sink, source

SRC = (0xFC00 << 112) | 0x99
#: (block, bits) of each format: F1616, F3216
FORMATS = ((0xFCBB, 16), (0xFCBBBB00, 32))
#: plane 1's next hop (a router port); plane 0 has none: frames keep their own destination
NEXT_HOP = {1: 0x02_00_00_0E_00_01}


@cocotb.test()
async def frames_leave_source_routed(dut):
    p = params()
    rng = random.Random(p["seed"])
    T, U = p["templates"], p["max_usids"]
    layout = EvLayout(planes=2, spines=4)
    await setup(dut)
    dut.src_ip.value = SRC
    dut.next_hop.value = sum(mac << (48 * pl) for pl, mac in NEXT_HOP.items())
    tw = source(dut, "template_write")
    templates = {}
    for t in range(T):
        # (6, 7, 8 and 14 uSIDs fill a carrier of one format or the other exactly)
        hops = [3, 6, 7, 8, 9, 14, 1, 12][t % 8] if t < 8 else rng.randint(1, U)
        block, bits = FORMATS[t % 2]
        templates[t] = UsidTemplate(block, tuple(rng.randrange(0x20, 0x1000) & ~0xF
                                                 for _ in range(hops)),
                                    spine_index=rng.randrange(hops), block_bits=bits)
        await tw.send(AxiStreamFrame(encode(template_layout(T, U), {
            "index": t, "block": block, "wide": bits == 32, "count": hops,
            "spine_index": templates[t].spine_index,
            "usids": sum(u << (16 * i) for i, u in enumerate(templates[t].usids))})))
    await tw.wait()

    src, route = source(dut, "i", rng, p["gap"]), source(dut, "route", rng, p["gap"])
    out = sink(dut, "o", rng, p["backpressure"])
    tap = PcapTap(dut, "o", "encapsulated")
    expected = []
    for _ in range(p["count"]):
        ev = layout.make(rng.randrange(2), rng.randrange(4), rng.getrandbits(32))
        pkt = random_mrc(rng, max_payload=p["max_payload"], ev=ev)
        frame = raw(pkt)
        t = rng.randrange(T)
        mode = rng.choice(list(SrMode)[:3])
        if mode is SrMode.PLAIN:
            want = frame
        else:
            want = raw(encapsulate(pkt, templates[t], layout, ev, src="fc00::99",
                                   force_srh=mode is SrMode.USID_SRH))
        hop = NEXT_HOP.get(layout.plane(ev))
        if hop is not None:
            want = hop.to_bytes(6, "big") + want[6:]
        expected.append(want)
        await route.send(AxiStreamFrame(encode(route_layout(T), {
            "ev": ev, "template": t, "mode": mode, "tc": frame[14] << 4 & 0xF0 | frame[15] >> 4,
            "length": len(frame)})))
        await src.send(frame)
    for n, want in enumerate(expected):
        got = await out.recv()
        assert_frames_equal(want, bytes(got.tdata), f"frame {n}")
    await ClockCycles(dut.clk, 2)
    tap.close()


@cocotb.test()
async def reference_example_carriers(dut):
    """MRC-REFERENCE's 2-plane example (host0 -> host2), computed by the gateware."""
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import Ether
    table = {0x0000: "fcbb:20:10:22::", 0x0001: "fcbb:20:11:22::",
             0x0100: "fcbb:1020:1010:1022::", 0x0101: "fcbb:1020:1011:1022::"}
    p = params()
    T, U = p["templates"], p["max_usids"]
    rng = random.Random(1)
    await setup(dut)
    dut.src_ip.value = SRC
    tw = source(dut, "template_write")
    await tw.send(AxiStreamFrame(encode(template_layout(T, U), {
        "index": 0, "block": 0xFCBB, "count": 3, "spine_index": 1,
        "usids": 0x0020 | 0x0010 << 16 | 0x0022 << 32})))
    await tw.wait()
    src, route, out = source(dut, "i"), source(dut, "route"), sink(dut, "o")
    for ev in table:
        frame = raw(random_mrc(rng, max_payload=64, ev=ev))
        await route.send(AxiStreamFrame(encode(route_layout(T), {
            "ev": ev, "template": 0, "mode": SrMode.USID, "tc": 0, "length": len(frame)})))
        await src.send(frame)
    for ev, addr in table.items():
        got = Ether(bytes((await out.recv()).tdata))
        assert got[IPv6].dst == addr, f"EV {ev:#06x}: outer destination {got[IPv6].dst}, " \
                                      f"the reference table says {addr}"
