"""CRC-32 (Ethernet polynomial, reflected) as XOR networks, for the ICRC blocks.

The register form is the raw shift register: start at all ones, no final inversion; the value
zlib reports is its complement.
"""

from functools import reduce
from operator import xor

from amaranth import Cat, Const, Signal

from mrcnic import icrc, wire

POLY_REFLECTED = 0xEDB88320


def _step_bit(reg):
    return (reg >> 1) ^ (POLY_REFLECTED if reg & 1 else 0)


def _byte_step(reg, byte):
    reg ^= byte
    for _ in range(8):
        reg = _step_bit(reg)
    return reg


def _matrix():
    """For each output bit, the state bits and data bits it is the XOR of (the step is linear)."""
    cols = [_byte_step(1 << i, 0) for i in range(32)] + [_byte_step(0, 1 << i) for i in range(8)]
    rows = []
    for j in range(32):
        rows.append(([i for i in range(32) if cols[i] >> j & 1],
                     [i for i in range(8) if cols[32 + i] >> j & 1]))
    return rows


_ROWS = _matrix()


def crc32_byte(reg, byte):
    """The register after one byte, as an Amaranth value."""
    bits = []
    for state_bits, data_bits in _ROWS:
        terms = [reg[i] for i in state_bits] + [byte[i] for i in data_bits]
        bits.append(reduce(xor, terms) if terms else Const(0))
    return Cat(*bits)


def crc32_lanes(m, reg, data, enable, name="crc"):
    """Feeds the bytes of ``data`` whose ``enable`` bit is set, lane 0 first, through the CRC.

    Returns the register after the beat. Each lane is its own signal so the netlist stays linear
    in the width.
    """
    cur = reg
    for lane in range(len(enable)):
        nxt = Signal(32, name=f"{name}_l{lane}")
        m.d.comb += nxt.eq(cur)
        with m.If(enable[lane]):
            m.d.comb += nxt.eq(crc32_byte(cur, data.word_select(lane, 8)))
        cur = nxt
    return cur


def crc32_python(reg, data: bytes):
    """Reference for tests: the register after ``data``."""
    for b in data:
        reg = _byte_step(reg, b)
    return reg


def icrc_beat(m, reg, beat, payload, width, name="icrc"):
    """One beat of a plain RoCEv2 frame (Ethernet first, no SRv6 header) through the ICRC.

    The Ethernet header is skipped and the ICRC's masked fields are fed as ones (rules and byte
    positions from :mod:`mrcnic.icrc`). ``beat`` is the beat's index in its frame, saturating at
    :func:`icrc_beats` - 1. Returns the register after the beat.
    """
    lanes = width // 8
    start = wire.ETHERNET.length
    masks = {start + off: bits for off, bits in icrc.mask_fields().items()}
    enable = Signal(lanes, name=f"{name}_en")
    fed = Signal(width, name=f"{name}_fed")
    m.d.comb += fed.eq(payload.data)
    for lane in range(lanes):
        # Beats in which this lane still holds an Ethernet byte, or a masked byte.
        skip = [b for b in range(icrc_beats(width)) if b * lanes + lane < start]
        cond = payload.keep[lane]
        if skip:
            cond = cond & ~Cat(*[beat == b for b in skip]).any()
        m.d.comb += enable[lane].eq(cond)
        for b in range(icrc_beats(width)):
            pos = b * lanes + lane
            if pos in masks:
                with m.If(beat == b):
                    m.d.comb += fed.word_select(lane, 8).eq(payload.data.word_select(lane, 8)
                                                          | masks[pos])
    return crc32_lanes(m, reg, fed, enable, name=name)


def icrc_beats(width):
    """Beats at the start of a frame that hold an Ethernet byte or a masked ICRC field."""
    return -(-(wire.ETHERNET.length + icrc.MASKED_SPAN) // (width // 8))


#: The register after the eight 0xFF bytes that stand for the LRH.
ICRC_SEED = crc32_python(0xFFFFFFFF, b"\xff" * 8)
#: The register after a message followed by its own correct CRC.
CRC_GOOD_RESIDUE = crc32_python(0xFFFFFFFF, b"\x00" * 4 + (0xFFFFFFFF ^ crc32_python(
    0xFFFFFFFF, b"\x00" * 4)).to_bytes(4, "little"))
