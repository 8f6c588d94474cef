"""The simulated network's rules, on scapy-built frames: uSID shift-and-forward (with an SRH
when the route needs more than one carrier), and what a trimming switch leaves of a packet."""

import random

from scapy.compat import raw
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrSegmentRouting
from scapy.layers.l2 import Ether

from mrcnic import layers as L
from mrcnic import wire
from mrcnic.evmap import EvLayout, UsidTemplate
from mrcnic.verif.fabric import BLOCK, ip_offsets, leaf_usid, spine_usid, template, usid_step
from mrcnic.verif.network import trim
from mrcnic.verif.packets import encapsulate, random_mrc

LAYOUT = EvLayout(planes=2, spines=4)


def walk(frame):
    """The uSIDs a frame visits, switch by switch, until its route ends."""
    seen = []
    while True:
        st = usid_step(frame)
        assert not st.error, st.error
        seen.append(st.own)
        frame = st.frame
        if st.next_usid is None:
            return seen, frame


def test_the_source_route_decides_the_path():
    rng = random.Random(3)
    for plane in range(2):
        for spine in range(4):
            ev = LAYOUT.make(plane, spine, rng.getrandbits(32))
            pkt = Ether(raw(random_mrc(rng, ev=ev, max_payload=200)))
            for srh in (False, True):
                frame = raw(encapsulate(pkt, template(0, 3), LAYOUT, ev, src="fd00::9",
                                        force_srh=srh))
                seen, out = walk(frame)
                assert seen == [leaf_usid(plane, 0), spine_usid(plane, spine),
                                leaf_usid(plane, 3)]
                # Only the outer header changed: the inner packet is intact.
                assert out[ip_offsets(out)[1]:] == frame[ip_offsets(frame)[1]:]
                assert Ether(out)[IPv6].hlim == Ether(frame)[IPv6].hlim - 3


def test_a_route_longer_than_a_carrier_continues_in_the_srh():
    usids = tuple(0x100 + i for i in range(9))          # 7 fit a carrier with a 16-bit block
    tpl = UsidTemplate(BLOCK, usids, spine_index=4)
    ev = LAYOUT.make(1, 2, 5)
    pkt = Ether(raw(random_mrc(random.Random(1), ev=ev, max_payload=64)))
    frame = raw(encapsulate(pkt, tpl, LAYOUT, ev, src="fd00::9"))
    assert Ether(frame).haslayer(IPv6ExtHdrSegmentRouting)
    seen, _ = walk(frame)
    assert seen == tpl.usids_for(1, 2)


def test_a_frame_that_cannot_be_routed_says_why():
    plain = raw(Ether() / IPv6() / UDP(dport=wire.ROCE_UDP_PORT) / L.BTH())
    assert "not SRv6" in usid_step(plain).error
    ev = LAYOUT.make(0, 0, 1)
    pkt = Ether(raw(random_mrc(random.Random(2), ev=ev, max_payload=64)))
    frame = Ether(raw(encapsulate(pkt, template(0, 1), LAYOUT, ev, src="fd00::9")))
    frame[IPv6].dst = "fd00::1"
    assert "not in block" in usid_step(raw(frame)).error


def test_a_trimmed_packet_keeps_its_headers_at_control_priority():
    rng = random.Random(4)
    for srh in (False, True):
        ev = LAYOUT.make(0, 1, 9)
        pkt = Ether(raw(random_mrc(rng, ev=ev, max_payload=1000)))
        frame = raw(encapsulate(pkt, template(0, 2), LAYOUT, ev, src="fd00::9", force_srh=srh))
        cut = Ether(trim(frame))
        outer, inner = cut[IPv6], cut.getlayer(IPv6, nb=2)
        assert outer.tc >> 2 == wire.DscpClass.TRIMMED
        assert outer.tc & 3 == Ether(frame)[IPv6].tc & 3          # ECN bits kept
        bth = cut[L.BTH]
        ext = sum(h.length for h in wire.headers_after_bth(bth.opcode, bool(bth.tsh)))
        # BTH, its extension headers, then the 4 bytes where the ICRC was: no payload.
        assert len(raw(cut[UDP].payload)) == wire.BTH.length + ext + wire.ICRC_BYTES
        assert raw(cut)[-4:] == frame[-4:]
        assert inner.plen == len(raw(inner.payload)) and cut[UDP].len == len(raw(cut[UDP]))
        assert outer.plen == len(raw(outer.payload))
