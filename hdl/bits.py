"""Bit-vector helpers the blocks share."""

from amaranth import Cat, Mux, Signal

__all__ = ["decode", "first_set", "last_set", "first_from", "word_mux"]


def first_set(m, bits, name="first"):
    """(any bit set, the index of the lowest set bit: 0 when none) of ``bits``, as a balanced
    tree of log2(n) levels. A chain of n priority multiplexers is as small, but its depth is n:
    at 256 bits that is too slow for an FPGA clock, and deep enough to exhaust Yosys's stack."""
    n = 1 << (len(bits) - 1).bit_length()
    padded = Signal(n, name=f"{name}_bits")
    m.d.comb += padded.eq(bits)

    def tree(lo, size):
        """(any set in padded[lo:lo + size], the lowest one's offset: None for one bit, so that
        no value is zero bits wide)."""
        if size == 1:
            return padded[lo], None
        low, low_at = tree(lo, size // 2)
        high, high_at = tree(lo + size // 2, size // 2)
        at = ~low if low_at is None else Cat(Mux(low, low_at, high_at), ~low)
        return low | high, at

    found, at = tree(0, n)
    index = Signal(range(max(n, 2)), name=f"{name}_index")
    if at is not None:
        m.d.comb += index.eq(Mux(found, at, 0))
    return found, index


def last_set(m, bits, name="last"):
    """(any bit set, the index of the highest set bit: 0 when none) of ``bits``, as
    :func:`first_set`'s tree over the bits reversed, not a chain of ``len(bits)`` priority
    multiplexers."""
    found, k = first_set(m, Cat(*(bits[i] for i in reversed(range(len(bits))))),
                         name=f"{name}_reversed")
    at = Signal(range(max(len(bits), 2)), name=name)
    m.d.comb += at.eq(Mux(found, len(bits) - 1 - k, 0))
    return found, at


def first_from(m, bits, start, name="first"):
    """The index of the first set bit of ``bits`` at or after ``start``, wrapping round (a
    round-robin or randomised pick); ``start`` itself when none is set. Combinational."""
    n = len(bits)
    rotated = Signal(n, name=f"{name}_rotated")
    m.d.comb += rotated.eq(Cat(bits, bits).bit_select(start, n))
    _, k = first_set(m, rotated, name=f"{name}_offset")
    at = Signal(range(n), name=name)
    m.d.comb += at.eq(Mux(start + k >= n, start + k - n, start + k))
    return at


def decode(index, width):
    """``(1 << index)[:width]`` as a decoder, each output bit one comparison. A shift by a
    variable amount is as wide as its largest shift and each of its output bits depends on
    every input bit: Amaranth's netlist and Verilator's C++ both pay for that, width squared."""
    return Cat(*[index == i for i in range(width)])


def word_mux(m, value, index, width, name="word"):
    """Word ``index`` (``width`` bits) of ``value``, as a multiplexer over the words there are;
    0 past the last. ``value.word_select(index, width)`` by a signal becomes a shifter across
    the whole of ``value``: at a frame's worth of header bytes, several times larger."""
    if not isinstance(value, Signal):
        # (each case slices a signal, not a copy of the whole expression: over a reply's
        # headers, built from fields, converting the design took a minute otherwise)
        whole = Signal(len(value), name=f"{name}_all")
        m.d.comb += whole.eq(value)
        value = whole
    out = Signal(width, name=name)
    with m.Switch(index):
        for k in range(-(-len(value) // width)):
            with m.Case(k):
                m.d.comb += out.eq(value[k * width:(k + 1) * width])
    return out
