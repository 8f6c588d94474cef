"""The test pattern (sw/pattern.py) as gateware: a beat's words of it, computed in parallel."""

from amaranth import Cat, Const, Signal

from mrcnic.pattern import MASK, OFFSET, ROUNDS, SHIFTS

__all__ = ["pattern_word", "pattern_beat"]


def pattern_word(m, seed, n, name="pattern"):
    """Word ``n`` of the pattern of ``seed`` (both values): shifts and xors only. Each step is a
    signal of its own: as one expression, every step would repeat the whole one before it."""
    assert MASK == (1 << 32) - 1
    x = Signal(32, name=f"{name}_in")
    m.d.comb += x.eq(seed ^ n ^ Const(OFFSET, 32))
    for r in range(ROUNDS):
        for step, (way, k) in enumerate(SHIFTS):
            y = Signal(32, name=f"{name}_r{r}s{step}")
            m.d.comb += y.eq(x ^ ((x << k) if way == "left" else (x >> k)))
            x = y
    return x


def pattern_beat(m, seed, first, words, name="pattern"):
    """``words`` consecutive words of the pattern from word ``first``, the first in the low bits."""
    return Cat(*[pattern_word(m, seed, (first + k)[:32], name=f"{name}{k}") for k in range(words)])
