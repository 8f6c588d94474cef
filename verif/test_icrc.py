"""The ICRC against an independent computation: scapy's own RoCEv2 BTH (scapy.contrib.roce)."""

import random

import pytest
from scapy.compat import raw
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from mrcnic import icrc
from mrcnic import layers as L
from mrcnic.evmap import EvLayout, UsidTemplate
from mrcnic.hdl.crc32 import CRC_GOOD_RESIDUE, ICRC_SEED, crc32_python
from mrcnic.verif.packets import encapsulate, random_mrc


def test_matches_scapy_contrib_roce_on_plain_rocev2():
    roce = pytest.importorskip("scapy.contrib.roce")
    rng = random.Random(11)
    for _ in range(300):
        pkt = (Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
               / IPv6(src="fd00::1", dst="fd00::2", tc=rng.getrandbits(8),
                      fl=rng.getrandbits(20), hlim=rng.randint(1, 255))
               / UDP(sport=rng.getrandbits(16), dport=4791)
               / roce.BTH(opcode=rng.choice([0x0A, 0x06, 0x11]), dqpn=rng.getrandbits(24),
                          psn=rng.getrandbits(24), fecn=rng.getrandbits(1))
               / rng.randbytes(rng.randint(0, 300)))
        frame = raw(pkt)
        assert icrc.icrc_bytes(frame[14:-4]) == frame[-4:]


def test_masked_fields_do_not_change_the_icrc():
    rng = random.Random(5)
    frame = bytearray(raw(random_mrc(rng)))
    before = icrc.icrc(bytes(frame[14:-4]))
    frame[14 + 1] ^= 0xFF      # traffic class / flow label
    frame[14 + 7] ^= 0xFF      # hop limit
    frame[14 + 46] ^= 0xFF     # UDP checksum
    frame[14 + 52] ^= 0xFF     # BTH byte 4
    assert icrc.icrc(bytes(frame[14:-4])) == before
    frame[14 + 60] ^= 1        # BTH PSN: covered
    assert icrc.icrc(bytes(frame[14:-4])) != before


def test_srv6_outer_header_is_not_covered():
    rng = random.Random(6)
    p = random_mrc(rng)
    e = encapsulate(p, UsidTemplate(0xFCBB, tuple(range(1, 10)), 1), EvLayout(), 0x100)
    assert raw(e)[-4:] == raw(p)[-4:]
    assert icrc.frame_icrc_ok(raw(e)) and icrc.frame_icrc_ok(raw(p))
    assert icrc.roce_offset(raw(e)) == 14 + 40 + 8 + 32


def test_scapy_layer_computes_the_same_icrc():
    rng = random.Random(7)
    for _ in range(50):
        frame = raw(random_mrc(rng))
        assert Ether(frame)[L.BTH].icrc == int.from_bytes(icrc.icrc_bytes(frame[14:-4]), "little")


def test_hardware_constants():
    assert ICRC_SEED == 0xFFFFFFFF ^ 0x2144DF1C == 0xDEBB20E3   # the LRH seed Linux rxe uses
    data = b"any message"
    crc = crc32_python(0xFFFFFFFF, data) ^ 0xFFFFFFFF
    assert crc32_python(0xFFFFFFFF, data + crc.to_bytes(4, "little")) == CRC_GOOD_RESIDUE


def test_too_short_is_an_error():
    with pytest.raises(ValueError, match="at least"):
        icrc.icrc(b"\x60" * 20)
