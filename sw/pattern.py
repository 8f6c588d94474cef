"""The test pattern a board's traffic generator writes and its checker expects: one definition
for the gateware (hdl/pattern.py), the host tools and the tests.

Byte ``i`` of a region filled with seed ``s`` is byte ``i % 4`` (least significant first) of the
32-bit word ``xorshift32`` applied twice to ``s ^ (i // 4) ^ 0x9E3779B9`` (two rounds, and the
constant, so that small seeds and indices still give dense, unrelated words). Each word depends
only on its index, so a checker can compute any part of the pattern without the rest, and a beat's
words come from parallel copies of the shift-and-xor steps. A region is the pattern from its own
first byte: the same seed gives the same bytes wherever the region lies.
"""

from __future__ import annotations

__all__ = ["SHIFTS", "ROUNDS", "OFFSET", "MASK", "xorshift32", "pattern_word", "pattern_bytes"]

#: xorshift32's steps (Marsaglia, 2003): left 13, right 17, left 5
SHIFTS = (("left", 13), ("right", 17), ("left", 5))
ROUNDS = 2
OFFSET = 0x9E37_79B9
MASK = 0xFFFF_FFFF


def xorshift32(x: int) -> int:
    for way, n in SHIFTS:
        x ^= (x << n) & MASK if way == "left" else x >> n
    return x


def pattern_word(seed: int, n: int) -> int:
    """Word ``n`` of the pattern of ``seed`` (bytes 4n .. 4n + 3)."""
    x = (seed ^ n ^ OFFSET) & MASK
    for _ in range(ROUNDS):
        x = xorshift32(x)
    return x


def pattern_bytes(seed: int, length: int, start: int = 0) -> bytes:
    """Bytes ``start`` .. ``start + length - 1`` of the pattern of ``seed``."""
    first, last = start // 4, (start + length + 3) // 4
    words = b"".join(pattern_word(seed, n).to_bytes(4, "little") for n in range(first, last))
    return words[start % 4:start % 4 + length]
