"""The simulated network's rules, on scapy-built frames: uSID shift-and-forward (with an SRH
when the route needs more than one carrier), switch by switch to the NIC that owns the last
uSID, what a switch drops and why, and what a trimming switch leaves of a packet.
(verif/test_linux_fabric.py holds the same rules against the Linux kernel.)"""

import random

from scapy.compat import raw
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrSegmentRouting
from scapy.layers.l2 import Ether

from mrcnic import layers as L
from mrcnic import wire
from mrcnic.evmap import EvLayout, UsidTemplate
from mrcnic.verif.fabric import (
    BLOCK,
    BLOCK_BITS,
    FORMATS,
    forward,
    host_usid,
    ip_offsets,
    port_mac,
    sid,
    template,
    usid_step,
)
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


def travel(frame, plane, src, fmt="F3216", hosts=4, spines=4):
    """The nodes a frame from host ``src`` crosses, the frame as it arrives, and why it stopped
    (None: it reached a host)."""
    block, bits = FORMATS[fmt]
    node, seen = ("leaf", plane, src), []
    while node[0] != "host":
        seen.append(node)
        hop = forward(node, frame, hosts, spines, block, bits)
        if hop.to is None:
            return seen, frame, hop.why
        node, frame = hop.to, hop.frame
    return seen + [node], frame, None


def test_the_source_route_decides_the_path():
    rng = random.Random(3)
    for fmt, (block, bits) in FORMATS.items():
        for plane in range(2):
            for spine in range(4):
                ev = LAYOUT.make(plane, spine, rng.getrandbits(32))
                pkt = Ether(raw(random_mrc(rng, ev=ev, max_payload=200)))
                for srh in (False, True):
                    frame = raw(encapsulate(pkt, template(0, 3, block, bits), LAYOUT, ev,
                                            src="fd00::9", force_srh=srh))
                    seen, out, why = travel(frame, plane, 0, fmt)
                    assert why is None, why
                    assert seen == [("leaf", plane, 0), ("spine", plane, spine),
                                    ("leaf", plane, 3), ("host", plane, 3)]
                    # The outer destination is the NIC's own address; only the outer header
                    # and Ethernet changed: the inner packet is intact.
                    assert Ether(out)[IPv6].dst == hex_addr(sid(host_usid(plane, 3), block, bits))
                    assert out[ip_offsets(out)[1]:] == frame[ip_offsets(frame)[1]:]
                    assert Ether(out)[IPv6].hlim == Ether(frame)[IPv6].hlim - 3
                    assert Ether(out).src == mac(port_mac(("leaf", plane, 3),
                                                          ("host", plane, 3)))


def hex_addr(a):
    import ipaddress
    return str(ipaddress.IPv6Address(a))


def mac(m):
    return ":".join(f"{b:02x}" for b in m.to_bytes(6, "big"))


def test_switches_drop_what_the_kernel_drops():
    rng = random.Random(5)
    ev = LAYOUT.make(0, 2, 7)
    pkt = Ether(raw(random_mrc(rng, ev=ev, max_payload=64)))

    def route(usids, spine_index=1, **kw):
        tpl = UsidTemplate(BLOCK, usids, spine_index=spine_index, block_bits=BLOCK_BITS)
        return raw(encapsulate(pkt, tpl, LAYOUT, ev, src="fd00::9", **kw))
    # The carrier used up at the spine: End with nothing after it and no SRH drops it.
    seen, _, why = travel(route((0x20, 0x10)), 0, 0)
    assert seen[-1] == ("spine", 0, 2) and "nothing after its own uSID" in why
    # A uSID nobody owns.
    seen, _, why = travel(route((0x20, 0x10, 0x7FF)), 0, 0)
    assert seen[-1] == ("spine", 0, 2) and "no route" in why
    # A leaf the spine is cabled to, but the host of another leaf after it.
    seen, _, why = travel(route((0x20, 0x10, 0x21, 0x32)), 0, 0)
    assert seen[-1] == ("leaf", 0, 1) and "no route" in why
    # The hop limit runs out on the way.
    f = Ether(route((0x20, 0x10, 0x21, 0x31)))
    f[IPv6].hlim = 2
    seen, _, why = travel(raw(f), 0, 0)
    assert seen[-1] == ("spine", 0, 2) and "hop limit" in why
    # Not in the block.
    f = Ether(route((0x20, 0x10, 0x21, 0x31)))
    f[IPv6].dst = "fd00::1"
    assert "not in block" in travel(raw(f), 0, 0)[2]
    # A neighbour's uSID first is plain forwarding: the leaf sends it to spine 2 unchanged.
    seen, out, why = travel(route((0x10, 0x21, 0x31), spine_index=0), 0, 0)
    assert why is None and seen[1] == ("spine", 0, 2) and seen[-1] == ("host", 0, 1)
    assert Ether(out)[IPv6].hlim == 64 - 3


def test_a_route_longer_than_a_carrier_continues_in_the_srh():
    usids = tuple(0x100 + i for i in range(9))          # 6 fit a carrier with a 32-bit block
    tpl = UsidTemplate(BLOCK, usids, spine_index=4, block_bits=BLOCK_BITS)
    ev = LAYOUT.make(1, 2, 5)
    pkt = Ether(raw(random_mrc(random.Random(1), ev=ev, max_payload=64)))
    frame = raw(encapsulate(pkt, tpl, LAYOUT, ev, src="fd00::9"))
    assert Ether(frame).haslayer(IPv6ExtHdrSegmentRouting)
    seen, _ = walk(frame)
    assert seen == tpl.usids_for(1, 2)


def test_a_frame_that_cannot_be_routed_says_why():
    plain = raw(Ether() / IPv6() / UDP(dport=wire.ROCE_UDP_PORT) / L.BTH())
    assert "not in block" in usid_step(plain).error
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
        # the last hop says the queue was the receiver's own: all else the same
        last = Ether(trim(frame, last_hop=True))
        assert last[IPv6].tc >> 2 == wire.DscpClass.TRIMMED_LASTHOP
        last[IPv6].tc = outer.tc
        assert raw(last) == raw(cut)
        assert outer.tc & 3 == Ether(frame)[IPv6].tc & 3          # ECN bits kept
        bth = cut[L.BTH]
        ext = sum(h.length for h in wire.headers_after_bth(bth.opcode, bool(bth.tsh)))
        # BTH, its extension headers, then the 4 bytes where the ICRC was: no payload.
        assert len(raw(cut[UDP].payload)) == wire.BTH.length + ext + wire.ICRC_BYTES
        assert raw(cut)[-4:] == frame[-4:]
        assert inner.plen == len(raw(inner.payload)) and cut[UDP].len == len(raw(cut[UDP]))
        assert outer.plen == len(raw(outer.payload))
