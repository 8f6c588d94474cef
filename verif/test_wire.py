"""Each header's bytes written by hand from the spec table; the scapy layer must parse them to
the right fields and build them back byte-exact, and the HDL extractor must agree."""

import pytest
from amaranth import Const, Module
from amaranth.sim import Simulator
from scapy.compat import raw

from mrcnic import layers as L
from mrcnic import wire
from mrcnic.hdl.headers import field_value, header_bytes

# Bytes written from MRC-REFERENCE's tables, every field a distinct non-zero value.
HAND = {
    "BTH": (bytes([0xCA, 0b1_0_11_0101, 0xAB, 0xCD, 0b1_1_000011, 0x12, 0x34, 0x56,
                   0b1_0_1_1_0000, 0x65, 0x43, 0x21]),
            dict(opcode=0xCA, se=1, migreq=0, pad=3, tver=5, pkey=0xABCD, fecn=1, becn=1,
                 resv6=3, dqp=0x123456, ackreq=1, resv1=0, rtx=1, tsh=1, resv4=0, psn=0x654321)),
    "METH": (bytes([0x11, 0x22, 0x33, 0x44]), dict(rqmsn=0x1122, msn=0x3344)),
    "TSETH": (bytes([0xBE, 0xEF, 0x00, 0x00]), dict(tx_timestamp=0xBEEF, reserved=0)),
    "RETH": (bytes(range(1, 17)), dict(va=0x0102030405060708, rkey=0x090A0B0C,
                                       dma_length=0x0D0E0F10)),
    "IMMDT": (bytes([0xDE, 0xAD, 0xBE, 0xEF]), dict(imm=0xDEADBEEF)),
    "AETH": (bytes([0x1F, 0x0A, 0x0B, 0x0C]), dict(syndrome=0x1F, msn=0x0A0B0C)),
    "SETH": (bytes([0x35, 0b10_1_00000, 0x01, 0x02, 0x11, 0x12, 0x13, 0x14, 0x21, 0x22,
                    0x31, 0x32, 0x00, 0x41, 0x42, 0x43, 0x5A, 0x66, 0x71, 0x72,
                    0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x91, 0x92,
                    0x7A, 0xBC, 0b1_0001111, 0xC1, 0xC2, 0xC3]),
            dict(type=3, nh=5, m=2, pr=1, resv5=0, ack_psn_offset=0x0102, entropy=0x11121314,
                 spdcid=0x2122, dpdcid=0x3132, resv8=0, cack_psn=0x414243, cc_type=5,
                 cc_flags=0xA, mpr=0x66, sack_offset=0x7172, sack_bitmap=0x8182838485868788,
                 tx_timestamp=0x9192, resv1=0, ooo_count=0x7ABC, restore_cwnd=1,
                 rcv_cwnd_pen=0x0F, rcvd_bytes=0xC1C2C3)),
    "NETH": (bytes([0x24, 0x00, 0x05, 0x77, 0x11, 0x12, 0x13, 0x14, 0x21, 0x22, 0x31, 0x32,
                    0x00, 0x41, 0x42, 0x43, 0x69, 0x00, 0x91, 0x92]),
             dict(type=2, nh=4, resv8a=0, nack_reason=5, vendor=0x77, entropy=0x11121314,
                  spdcid=0x2122, dpdcid=0x3132, resv8b=0, nack_psn=0x414243, cc_type=6,
                  cc_flags=9, resv8c=0, tx_timestamp=0x9192)),
    "PETH": (bytes([0x01, 0x02, 0x03, 0x04, 0x21, 0x22, 0x31, 0x32, 0x91, 0x92, 0xA1, 0xA2,
                    0x07, 0, 0, 0]),
             dict(probe_id=0x01020304, spdcid=0x2122, dpdcid=0x3132, tx_timestamp=0x9192,
                  tsr=0xA1A2, ftype=7, reserved=0)),
    "ERTH": (bytes([0x03, 0, 0, 0, 0x00, 0x00, 0x00, 0xFD, 0x91, 0x92, 0, 0, 0, 0, 0, 0]),
             dict(op=3, resv24=0, port_status_mask=0xFD, tx_timestamp=0x9192, resv48=0)),
    "EETH": (bytes([0x04, 0, 0, 0, 0x00, 0x00, 0x00, 0x0F, 0x91, 0x92, 0xA1, 0xA2]) + bytes(24),
             dict(op=4, resv24=0, port_status_mask=0x0F, tx_timestamp=0x9192,
                  echo_timestamp=0xA1A2, resv192=0)),
}


def test_every_mrc_header_has_a_hand_written_case():
    assert set(HAND) == {h.name for h in wire.MRC_HEADERS}


@pytest.mark.parametrize("name", sorted(HAND))
def test_hand_written_bytes(name):
    hdr = next(h for h in wire.MRC_HEADERS if h.name == name)
    data, fields = HAND[name]
    assert len(data) == hdr.length
    assert hdr.unpack(data) == fields
    assert hdr.pack(**fields) == data
    layer_cls = L.LAYERS[hdr]
    if layer_cls is L.BTH:   # BTH carries the ICRC as a trailer
        pkt = L.BTH(data + b"\x01\x02\x03\x04")
        assert pkt.icrc == 0x04030201
        built = raw(L.BTH(icrc=0x04030201, **fields))
        assert built == data + b"\x01\x02\x03\x04"
    else:
        pkt = layer_cls(data)
        assert raw(layer_cls(**fields)) == data
    for k, v in fields.items():
        assert pkt.getfieldval(k) == v, f"{name}.{k}: scapy read {pkt.getfieldval(k):#x}, spec {v:#x}"


@pytest.mark.parametrize("name", sorted(HAND))
def test_hdl_extracts_and_builds_the_same_fields(name):
    """The gateware's field extractor and builder, simulated, against the hand-written bytes."""
    hdr = next(h for h in wire.MRC_HEADERS if h.name == name)
    data, fields = HAND[name]
    window = Const(int.from_bytes(data, "little"), 8 * len(data))
    built = header_bytes(fields, hdr)
    got = {}

    async def bench(ctx):
        for f in hdr.fields:
            got[f.name] = ctx.get(field_value(window, hdr, f.name, 0))
        got["__bytes__"] = ctx.get(built)

    sim = Simulator(Module())
    sim.add_testbench(bench)
    sim.run()
    assert got.pop("__bytes__").to_bytes(hdr.length, "little") == data
    assert got == fields


def test_standard_headers_agree_with_scapy():
    """Our offsets for Ethernet / IPv6 / SRH / UDP match scapy's own layers."""
    from scapy.layers.inet import UDP
    from scapy.layers.inet6 import IPv6, IPv6ExtHdrSegmentRouting
    from scapy.layers.l2 import Ether
    p = raw(Ether(dst="02:01:02:03:04:05", src="02:0a:0b:0c:0d:0e")
            / IPv6(tc=0xB8, fl=0x12345, hlim=7, src="fd00::1", dst="fd00::2")
            / IPv6ExtHdrSegmentRouting(addresses=["fcbb::1", "fcbb::2"], segleft=1, nh=41, tag=9)
            / IPv6(src="fd00::3", dst="fd00::4") / UDP(sport=0x1234, dport=4791, chksum=0))
    eth = wire.ETHERNET.unpack(p)
    assert (eth["dst"], eth["src"], eth["ethertype"]) == (0x020102030405, 0x020A0B0C0D0E, 0x86DD)
    ip = wire.IPV6.unpack(p[14:])
    assert (ip["version"], ip["tc"], ip["flow_label"], ip["hop_limit"], ip["next_header"]) == (
        6, 0xB8, 0x12345, 7, 43)
    srh = wire.SRH.unpack(p[54:])
    assert (srh["next_header"], srh["hdr_ext_len"], srh["routing_type"], srh["segments_left"],
            srh["last_entry"], srh["tag"]) == (41, 4, 4, 1, 1, 9)
    udp = wire.UDP.unpack(p[54 + 40 + 40:])
    assert (udp["sport"], udp["dport"]) == (0x1234, 4791)


def test_whole_packet_dissects_from_ether():
    import random

    from scapy.layers.l2 import Ether

    from mrcnic.evmap import EvLayout, UsidTemplate
    from mrcnic.verif.packets import encapsulate, random_mrc
    rng = random.Random(3)
    seen = set()
    for _ in range(200):
        p = random_mrc(rng)
        e = encapsulate(p, UsidTemplate(0xFCBB, tuple(range(1, 10)), 1), EvLayout(), 0x101)
        for frame in (raw(p), raw(e)):
            q = Ether(frame)
            assert q.haslayer(L.BTH)
            op = wire.Opcode(q[L.BTH].opcode)
            for hdr in wire.headers_after_bth(op, bool(q[L.BTH].tsh)):
                assert q.haslayer(L.LAYERS[hdr]), f"{op.name}: no {hdr.name} in {q.summary()}"
            assert raw(q) == frame
            seen.add(op)
    assert seen == set(wire.Opcode)


def test_bad_values_are_refused():
    with pytest.raises(ValueError, match="does not fit"):
        wire.BTH.pack(psn=1 << 24)
    with pytest.raises(KeyError, match="no field"):
        wire.BTH.pack(nosuch=1)
    with pytest.raises(ValueError, match="needs 12 bytes"):
        wire.BTH.unpack(b"\x00" * 5)
