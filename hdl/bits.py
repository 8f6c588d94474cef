"""Bit-vector helpers the blocks share."""

from amaranth import Cat, Mux, Signal

__all__ = ["first_from"]


def first_from(m, bits, start, name="first"):
    """The index of the first set bit of ``bits`` at or after ``start``, wrapping round (a
    round-robin or randomised pick); ``start`` itself when none is set. Combinational."""
    n = len(bits)
    rotated = Signal(n, name=f"{name}_rotated")
    k = Signal(range(n), name=f"{name}_offset")
    m.d.comb += rotated.eq(Cat(bits, bits).bit_select(start, n))
    for i in reversed(range(n)):          # the lowest offset, assigned last, wins
        with m.If(rotated[i]):
            m.d.comb += k.eq(i)
    at = Signal(range(n), name=name)
    m.d.comb += at.eq(Mux(start + k >= n, start + k - n, start + k))
    return at
