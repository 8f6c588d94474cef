"""CRC-32 (Ethernet polynomial, reflected) as XOR networks, for the ICRC blocks.

The register form is the raw shift register: start at all ones, no final inversion; the value
zlib reports is its complement.
"""

from functools import lru_cache, reduce
from operator import xor

from amaranth import Cat, Const, Mux, Signal

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


def crc32_python(reg, data: bytes):
    """Reference for tests: the register after ``data``."""
    for b in data:
        reg = _byte_step(reg, b)
    return reg


def _inverse_bit_step(reg):
    # The bit step shifts right and XORs the polynomial, whose bit 31 is set, if bit 0 was:
    # bit 31 after the step is bit 0 before it, so the step can be undone.
    low = reg >> 31
    return (((reg ^ (POLY_REFLECTED if low else 0)) << 1) & 0xFFFFFFFF) | low


def _zero_bytes(reg, n):
    """The register after ``n`` zero bytes (before them, for ``n`` negative)."""
    for _ in range(abs(n)):
        if n > 0:
            reg = _byte_step(reg, 0)
        else:
            for _ in range(8):
                reg = _inverse_bit_step(reg)
    return reg


def _xor_rows(columns, outputs=32):
    """For each output bit, the inputs whose column (the output of that input alone) has it."""
    return [[i for i, c in enumerate(columns) if c >> j & 1] for j in range(outputs)]


def _xors(rows, inputs):
    return Cat(*[reduce(xor, [inputs[i] for i in r]) if r else Const(0) for r in rows])


@lru_cache
def _beat_rows(lanes):
    state = [_zero_bytes(1 << i, lanes) for i in range(32)]
    fed = [crc32_python(0, bytes(1 << b if k == lane else 0 for k in range(lanes)))
           for lane in range(lanes) for b in range(8)]
    return _xor_rows(state + fed)


def crc32_beat(reg, data):
    """The register after every byte of ``data``, lane 0 first, as one XOR network: the step
    is linear in the register and the bytes, so a whole beat is one matrix, far shallower and
    smaller than a byte step per lane."""
    return _xors(_beat_rows(len(data) // 8), Cat(reg, data))


def crc32_unshift(m, reg, zeros, name="crc"):
    """``reg`` with its last ``zeros`` zero bytes taken back (each stage undoes a power of two
    of them): a beat fed whole, its unused lanes as zeros, and then unshifted by their count is
    the beat fed up to its last byte."""
    cur = reg
    for k in range(len(zeros)):
        rows = _xor_rows([_zero_bytes(1 << i, -(1 << k)) for i in range(32)])
        nxt = Signal(32, name=f"{name}_back{1 << k}")
        m.d.comb += nxt.eq(Mux(zeros[k], _xors(rows, cur), cur))
        cur = nxt
    return cur


def icrc_beat(m, reg, beat, payload, width, name="icrc"):
    """One beat of a plain RoCEv2 frame (Ethernet first, no SRv6 header) through the ICRC.

    The ICRC's masked fields are fed as ones (rules and byte positions from :mod:`mrcnic.icrc`).
    The Ethernet header's bytes, and the lanes past a last beat's end, are fed as zeros: the
    register starts at :data:`ICRC_START`, from which the header's zeros lead to the seed, and
    a last beat's trailing zeros are taken back by :func:`crc32_unshift` or allowed for by
    :func:`icrc_residue`. ``beat`` is the beat's index in its frame, saturating at
    :func:`icrc_beats` - 1. Returns the register after the whole beat, and whether any of its
    bytes is past the Ethernet header (a frame that ends before one has no ICRC).
    """
    lanes = width // 8
    start = wire.ETHERNET.length
    masks = {start + off: bits for off, bits in icrc.mask_fields().items()}
    enable = Signal(lanes, name=f"{name}_en")
    fed = Signal(width, name=f"{name}_fed")
    for lane in range(lanes):
        # Beats in which this lane still holds an Ethernet byte, or a masked byte.
        skip = [b for b in range(icrc_beats(width)) if b * lanes + lane < start]
        cond = payload.keep[lane]
        if skip:
            cond = cond & ~Cat(*[beat == b for b in skip]).any()
        m.d.comb += enable[lane].eq(cond)
        byte = payload.data.word_select(lane, 8)
        for b in range(icrc_beats(width)):
            pos = b * lanes + lane
            if pos in masks:
                byte = Mux(beat == b, byte | masks[pos], byte)
        m.d.comb += fed.word_select(lane, 8).eq(Mux(cond, byte, 0))
    after = Signal(32, name=f"{name}_beat")
    m.d.comb += after.eq(crc32_beat(reg, fed))
    return after, enable.any()


def icrc_beats(width):
    """Beats at the start of a frame that hold an Ethernet byte or a masked ICRC field."""
    return -(-(wire.ETHERNET.length + icrc.MASKED_SPAN) // (width // 8))


def icrc_residue(lanes, count):
    """What :func:`icrc_beat` returns for a frame's last beat of ``count`` bytes (of ``lanes``)
    when the frame's ICRC is right: the good residue, then the zeros of the unused lanes."""
    return _zero_bytes(CRC_GOOD_RESIDUE, lanes - count)


#: The register after the eight 0xFF bytes that stand for the LRH.
ICRC_SEED = crc32_python(0xFFFFFFFF, b"\xff" * 8)
#: The register at a frame's start: the Ethernet header's bytes, fed as zeros, lead to the seed.
ICRC_START = _zero_bytes(ICRC_SEED, -wire.ETHERNET.length)
#: The register after a message followed by its own correct CRC.
CRC_GOOD_RESIDUE = crc32_python(0xFFFFFFFF, b"\x00" * 4 + (0xFFFFFFFF ^ crc32_python(
    0xFFFFFFFF, b"\x00" * 4)).to_bytes(4, "little"))
