"""cocotb test of the neighbour responder: scapy-built ARP requests and neighbour solicitations
in, and the replies out compared byte for byte with the ones scapy builds (scapy computes the
ICMPv6 checksum: the oracle for ours)."""

import ipaddress

import cocotb
from cocotb.triggers import ClockCycles
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import (
    ICMPv6ND_NA,
    ICMPv6ND_NS,
    ICMPv6NDOptDstLLAddr,
    ICMPv6NDOptSrcLLAddr,
    IPv6,
)
from scapy.layers.l2 import ARP, Ether

from mrcnic.verif.tbkit import setup, sink, source

MAC, IPV4, IPV6 = "02:4d:52:43:00:01", "192.168.7.2", "fd00:7::2"
HOST_MAC, HOST_IPV4, HOST_IPV6 = "02:00:00:00:aa:01", "192.168.7.1", "fd00:7::1"


def _ns(target=IPV6, src=HOST_IPV6, hlim=255, **ns):
    dst = str(ipaddress.IPv6Address(int(ipaddress.IPv6Address("ff02::1:ff00:0"))
                                    | int(ipaddress.IPv6Address(target)) & 0xFFFFFF))
    return (Ether(src=HOST_MAC, dst="33:33:ff:00:00:02") / IPv6(src=src, dst=dst, hlim=hlim)
            / ICMPv6ND_NS(tgt=target, **ns) / ICMPv6NDOptSrcLLAddr(lladdr=HOST_MAC))


def _na():
    return (Ether(src=MAC, dst=HOST_MAC) / IPv6(src=IPV6, dst=HOST_IPV6, hlim=255)
            / ICMPv6ND_NA(R=0, S=1, O=1, tgt=IPV6) / ICMPv6NDOptDstLLAddr(lladdr=MAC))


def _arp(pdst=IPV4):
    return (Ether(src=HOST_MAC, dst="ff:ff:ff:ff:ff:ff")
            / ARP(op=1, hwsrc=HOST_MAC, psrc=HOST_IPV4, pdst=pdst))


def _arp_reply():
    return (Ether(src=MAC, dst=HOST_MAC)
            / ARP(op=2, hwsrc=MAC, psrc=IPV4, hwdst=HOST_MAC, pdst=HOST_IPV4))


def _diff(got: bytes, want) -> str:
    """Field by field, where the reply differs from scapy's."""
    g, lines = Ether(got), []
    for layer_want in want.iterpayloads():
        layer_got = g.getlayer(type(layer_want))
        if layer_got is None:
            lines.append(f"{type(layer_want).__name__}: missing")
            continue
        for f in layer_want.fields_desc:
            a, b = layer_got.getfieldval(f.name), layer_want.getfieldval(f.name)
            if a != b and not isinstance(b, type(want)):
                lines.append(f"{type(layer_want).__name__}.{f.name}: {a!r}, expected {b!r}")
    return "; ".join(lines) or f"bytes {got.hex()} vs {bytes(want).hex()}"


async def _start(dut, backpressure=0.0):
    await setup(dut)
    dut.mac.value = int(MAC.replace(":", ""), 16)
    dut.ipv4.value = int(ipaddress.IPv4Address(IPV4))
    dut.ipv6.value = int(ipaddress.IPv6Address(IPV6))
    src, snk = source(dut, "i"), sink(dut, "o")
    if backpressure:
        snk.pause = True
    return src, snk


async def _expect(snk, want, what):
    got = bytes((await snk.recv()).tdata)
    want_bytes = bytes(Ether(bytes(want)))
    assert got == want_bytes, f"{what}: {_diff(got, Ether(want_bytes))}"


async def _quiet(dut, snk, what):
    await ClockCycles(dut.clk, 60)
    assert snk.empty(), f"{what}: answered: {Ether(bytes(snk.recv_nowait().tdata)).summary()}"


@cocotb.test(timeout_time=100, timeout_unit="us")
async def arp_and_neighbour_solicitations_for_us_are_answered(dut):
    src, snk = await _start(dut)
    await src.send(bytes(_arp()))
    await _expect(snk, _arp_reply(), "ARP request for us")
    await src.send(bytes(_ns()))
    await _expect(snk, _na(), "neighbour solicitation for us")
    # Back to back: each is answered.
    for frame in (_ns(), _arp(), _ns()):
        await src.send(bytes(frame))
    for want in (_na(), _arp_reply(), _na()):
        await _expect(snk, want, "back to back")
    await _quiet(dut, snk, "after the replies")
    assert (int(dut.arp_replies.value), int(dut.nd_replies.value)) == (2, 3)
    assert (int(dut.bad.value), int(dut.missed.value)) == (0, 0)


@cocotb.test(timeout_time=100, timeout_unit="us")
async def everything_else_is_left_alone(dut):
    src, snk = await _start(dut)
    bad_sum = _ns()
    bad_sum[ICMPv6ND_NS].cksum = 0x1234
    others = [
        ("ARP request for another address", _arp(pdst="192.168.7.9")),
        ("ARP reply", _arp_reply()),
        ("solicitation for another address", _ns(target="fd00:7::9")),
        ("solicitation with hop limit 64", _ns(hlim=64)),
        ("duplicate address detection (source ::)", _ns(src="::")),
        ("solicitation with a wrong checksum", bad_sum),
        ("solicitation with code 1", _ns(code=1)),
        ("UDP over IPv4", Ether(src=HOST_MAC, dst=MAC) / IP(src=HOST_IPV4, dst=IPV4)
         / UDP(dport=19783) / (b"x" * 24)),
        ("UDP over IPv6", Ether(src=HOST_MAC, dst=MAC) / IPv6(src=HOST_IPV6, dst=IPV6)
         / UDP(dport=4791) / (b"y" * 200)),
        ("a runt", Ether(src=HOST_MAC, dst=MAC, type=0x0806) / b"\x00\x01"),
    ]
    for what, frame in others:
        await src.send(bytes(frame))
        await _quiet(dut, snk, what)
    assert (int(dut.arp_replies.value), int(dut.nd_replies.value)) == (0, 0)
    assert int(dut.bad.value) == 1, "the wrong checksum is counted, and only it"


@cocotb.test(timeout_time=100, timeout_unit="us")
async def a_request_while_one_waits_is_counted_missed(dut):
    """With the reply's reader stalled: the first request's reply waits to be sent, the second
    request waits to be answered, and the third finds no room."""
    src, snk = await _start(dut, backpressure=True)
    snk.pause = True
    for frame in (_arp(), _ns(), _arp()):
        await src.send(bytes(frame))
    await ClockCycles(dut.clk, 60)
    snk.pause = False
    await _expect(snk, _arp_reply(), "the first request")
    await _expect(snk, _na(), "the request that waited")
    await _quiet(dut, snk, "the one that found no room")
    assert int(dut.missed.value) == 1 and int(dut.arp_replies.value) == 1
