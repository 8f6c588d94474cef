"""Every pcap the project writes opens in tshark and in `mrcnic decode`, with no malformed frame.

What each tool may say about an MRC frame, and why that is accepted, is in verif/pcapcheck.py;
anything else fails. The short demo's pcaps are the NIC's own frames (the run is shared with
verif/test_demo.py: one simulation for both). A pcap built here adds what that run may not
carry: every opcode, with and without TSETH, plain RoCEv2 and SRv6-framed with and without an
SRH, trimmed packets, source ports tshark gives to other dissectors. A pcap of broken frames shows
that the checks catch what they must. tshark's part is skipped, saying so, only where tshark is
not installed (CI installs it)."""

import re

import pytest
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrSegmentRouting
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from mrcnic import layers as L
from mrcnic import wire
from mrcnic.verif.network import trim
from mrcnic.verif.pcap import Pcap
from mrcnic.verif.pcapcheck import TSHARK, ZERO_CHECKSUM, check_decode, check_tshark, short_demo

needs_tshark = pytest.mark.skipif(
    TSHARK is None, reason="tshark is not installed, so no pcap was opened in it "
                           "(apt-get install tshark; CI installs it)")

O = wire.Opcode
INNER = 14 + 40          # the inner IPv6 header of an SRv6 frame without an SRH


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    run = short_demo(tmp_path_factory)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    files = sorted((run.out / "pcap").glob("*.pcap"))
    assert len(files) == 40, "a pcap per link direction: 2 planes x (2 hosts + 4 spines) x 2"
    return files


def test_demo_pcaps_decode_in_mrcnic(demo):
    rep = check_decode(demo)
    assert not rep.problems, str(rep)
    assert sum(rep.frames.values()) == rep.accepted["icrc=ok"] + rep.accepted["icrc=trimmed"]


@needs_tshark
def test_demo_pcaps_open_clean_in_tshark(demo, tmp_path):
    rep = check_tshark(demo, tmp_path)
    assert not rep.problems, str(rep)
    # the zero UDP checksum, on every frame, and nothing else but the traceroute note
    assert rep.accepted[ZERO_CHECKSUM[0]] == sum(rep.frames.values()), str(rep)
    assert set(rep.accepted) <= {ZERO_CHECKSUM[0], "Possible traceroute (source port 33435..33464)"}


def mrc(op, *, tsh=False, payload=0, sport=0xC123, frame="srv6",
        dscp=wire.DscpClass.DATA_TRIMMABLE) -> bytes:
    """A whole MRC frame, ICRC included: ``frame`` is plain (RoCEv2 only), srv6 (an outer IPv6
    header) or srh (outer header and a two-segment SRH)."""
    pkt = L.BTH(opcode=int(op), pkey=0xFFFF, dqp=5, ackreq=1, tsh=int(tsh), psn=77)
    for hdr in wire.headers_after_bth(op, tsh):
        pkt = pkt / L.LAYERS[hdr]()
    if payload:
        pkt = pkt / Raw((bytes(range(256)) * (payload // 256 + 1))[:payload])
    tc = (dscp << 2) | 0b10
    inner = (IPv6(src="fd00::1", dst="fd00::2", tc=tc, fl=0x1234, hlim=64)
             / UDP(sport=sport, dport=wire.ROCE_UDP_PORT, chksum=0) / pkt)
    outer = IPv6(src="fd00::1", dst="fcbb:20:11:21::", tc=tc, fl=0x1234, hlim=64)
    body = {"plain": inner,
            "srv6": outer / inner,
            "srh": outer / IPv6ExtHdrSegmentRouting(
                addresses=["fcbb:21::", "fcbb:20:11:21::"], segleft=1, lastentry=1,
                nh=wire.IPPROTO_IPV6) / inner}[frame]
    if frame != "plain":
        body.nh = wire.IPPROTO_ROUTING if frame == "srh" else wire.IPPROTO_IPV6
    return bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / body)


def every_kind():
    frames = []
    for op in O:
        for tsh in (False, True) if op in wire.DATA_OPCODES else (False,):
            for frame, payload in (("plain", 1), ("srv6", 1024), ("srh", 1021)):
                frames.append(mrc(op, tsh=tsh, frame=frame,
                                  payload=payload if op in wire.DATA_OPCODES else 0,
                                  dscp=wire.DscpClass.DATA_TRIMMABLE if op in wire.DATA_OPCODES
                                  else wire.DscpClass.CONTROL))
    frames += [trim(mrc(O.WRITE_MIDDLE, tsh=True, payload=1024)),
               trim(mrc(O.WRITE_LAST_IMM, payload=512, frame="srh"))]
    # 0: "no source port"; 319 PTP, 1629 CNIP, 2313 IAPP: tshark tries these dissectors first;
    # 33447: "possible traceroute"; either side of 4791
    frames += [mrc(O.SACK, sport=p, dscp=wire.DscpClass.CONTROL)
               for p in (0, 319, 1629, 2313, 33447, 4790, 4791, 4792, 0xFFFF)]
    return frames


@pytest.fixture
def every_kind_pcap(tmp_path):
    w = Pcap(tmp_path / "every-kind.pcap")
    for n, f in enumerate(every_kind()):
        w.write(f, 1000 * n)
    w.close()
    return tmp_path / "every-kind.pcap"


def test_every_kind_of_mrc_frame_decodes_in_mrcnic(every_kind_pcap):
    rep = check_decode([every_kind_pcap])
    assert not rep.problems, str(rep)
    assert rep.accepted["icrc=trimmed"] == 2 and rep.accepted["icrc=ok"] == len(every_kind()) - 2


@needs_tshark
def test_every_kind_of_mrc_frame_opens_clean_in_tshark(every_kind_pcap, tmp_path):
    rep = check_tshark([every_kind_pcap], tmp_path / "tshark")
    assert not rep.problems, str(rep)
    assert rep.accepted[ZERO_CHECKSUM[0]] == len(every_kind())
    assert rep.accepted["Possible traceroute (source port 33435..33464)"] == 1
    assert rep.low_port >= 2, "PTP (319) and IAPP (2313) take their frames first"


def broken():
    """Frames that are wrong, each its own way; the ones tshark does not see as wrong are
    named in ``TSHARK_BLIND``."""
    good = mrc(O.WRITE_ONLY, tsh=True, payload=64)

    def put(frame, at, value: bytes):
        f = bytearray(frame)
        f[at:at + len(value)] = value
        return bytes(f)

    def field16(frame, at, delta):
        return put(frame, at, (int.from_bytes(frame[at:at + 2], "big") + delta).to_bytes(2, "big"))

    udp = INNER + 40
    cut = good[:udp + 8 + 6]      # a UDP datagram of 14 bytes: half a BTH, every length says so
    cut = field16(field16(field16(cut, 14 + 4, -(len(good) - len(cut))),
                          INNER + 4, -(len(good) - len(cut))), udp + 4, -(len(good) - len(cut)))
    return {
        "inner IPv6 payload length one too many": field16(good, INNER + 4, 1),
        "UDP length one short": field16(good, udp + 4, -1),
        "UDP length one too many": field16(good, udp + 4, 1),
        "SRH length past its segments": put(mrc(O.SACK, frame="srh"), 14 + 40 + 1, b"\x06"),
        "cut in the BTH": cut,
        "an InfiniBand opcode, not MRC's": put(good, udp + 8, b"\x0a"),
        "ICRC wrong": put(good, len(good) - 1, bytes([good[-1] ^ 1])),
        "outer IPv6 version 4": put(good, 14, bytes([0x40 | good[14] & 0x0F])),
        "bytes after the IPv6 payload": good + bytes(6),
        "UDP destination port 4792": put(good, udp + 2, (4792).to_bytes(2, "big")),
        "a 10-byte runt": good[:10],
    }


#: what tshark does not flag: a UDP length shorter than the IPv6 payload (it uses the shorter),
#: and the ICRC, which it does not check (mrcnic decode does both)
TSHARK_BLIND = {"UDP length one short", "ICRC wrong"}


@pytest.fixture
def broken_pcap(tmp_path):
    w = Pcap(tmp_path / "broken.pcap")
    for n, f in enumerate(broken().values()):
        w.write(f, n)
    w.close()
    return tmp_path / "broken.pcap"


def _flagged(rep):
    """The broken frames a report names (by their frame number)."""
    names = list(broken())
    return {names[int(m.group(1))] for p in rep.problems if (m := re.search(r"#(\d+)", p))}


def test_mrcnic_decode_flags_every_broken_frame(broken_pcap):
    rep = check_decode([broken_pcap])
    assert _flagged(rep) == set(broken()), str(rep)


@needs_tshark
def test_tshark_check_flags_every_broken_frame_it_can_see(broken_pcap, tmp_path):
    rep = check_tshark([broken_pcap], tmp_path / "tshark")
    assert _flagged(rep) == set(broken()) - TSHARK_BLIND, str(rep)
