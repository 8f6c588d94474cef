"""A stream from one clock domain to another, whose receiving side is flip-flops only."""

from amaranth import Cat, Module, ResetSignal, Shape, Signal
from amaranth.lib import cdc, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

__all__ = ["StreamCrossing"]


def _gray(value):
    return value ^ value[1:]


def _binary(gray):
    """The binary value of a Gray code: each bit is the XOR of the code's bits from it up."""
    bits = [gray[-1]]
    for k in reversed(range(len(gray) - 1)):
        bits.insert(0, bits[0] ^ gray[k])
    return Cat(*bits)


class StreamCrossing(wiring.Component):
    """Carries the stream ``i``, in ``i_domain``, to ``o`` in ``o_domain``: up to ``depth``
    payloads in distributed RAM and one more in an output register.

    It is :class:`amaranth.lib.fifo.AsyncFIFO`'s crossing (Gray-coded pointers through
    synchronizers, a write-domain reset that empties it) with the read side rebuilt for a fast
    clock. :class:`~amaranth.lib.fifo.AsyncFIFO` computes its next read pointer from its read
    enable through an adder and a Gray encoder, and that path was the 125 MHz transmit clock's
    critical path on a speed-6 ECP5. Here the next pointer and its Gray code are registers,
    computed a fetch ahead; taking a payload only chooses them, and ``o.valid`` and
    ``o.payload`` are flip-flops. A payload becomes valid on ``o`` one receiving cycle later
    than through :class:`~amaranth.lib.fifo.AsyncFIFO`.

    Attributes
    ----------
    i : In(stream.Signature(shape));  o : Out(stream.Signature(shape))
    """

    def __init__(self, shape, depth=8, i_domain="sync", o_domain="sync"):
        if not isinstance(depth, int) or depth < 2 or depth & (depth - 1):
            raise ValueError(f"depth must be a power of two of at least 2, not {depth!r}")
        self._depth, self._i_domain, self._o_domain = depth, i_domain, o_domain
        super().__init__({"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape))})

    def elaborate(self, platform):
        m = Module()
        bits = self._depth.bit_length()        # one more than the address: full vs empty
        wd, rd = m.d[self._i_domain], m.d[self._o_domain]
        i, o = self.i, self.o
        size = Shape.cast(i.payload.shape()).width
        m.submodules.storage = storage = Memory(shape=size, depth=self._depth, init=[])
        wp = storage.write_port(domain=self._i_domain)
        rp = storage.read_port(domain="comb")

        # ---- Write side.
        w_bin = Signal(bits)
        w_gry = Signal(bits)
        r_gry = Signal(bits, reset_less=True)
        r_gry_w = Signal(bits)                  # the read pointer, in the write domain
        m.submodules.r_gry_sync = cdc.FFSynchronizer(r_gry, r_gry_w, o_domain=self._i_domain)
        full = ((w_gry[-1] != r_gry_w[-1]) & (w_gry[-2] != r_gry_w[-2])
                & (w_gry[:-2] == r_gry_w[:-2]))
        do_write = i.valid & ~full
        m.d.comb += [i.ready.eq(~full),
                     wp.addr.eq(w_bin[:-1]), wp.data.eq(i.payload), wp.en.eq(do_write)]
        w_next = Signal(bits)
        m.d.comb += w_next.eq(w_bin + 1)
        with m.If(do_write):
            wd += [w_bin.eq(w_next), w_gry.eq(_gray(w_next))]

        # ---- Read side. Its state is reset by the write domain's reset alone (through
        # ``r_rst``), as AsyncFIFO's is: a crossing reset from one side only keeps its pointers
        # in agreement, and a read-side reset alone loses nothing.
        w_gry_r = Signal(bits)                  # the write pointer, in the read domain
        m.submodules.w_gry_sync = cdc.FFSynchronizer(w_gry, w_gry_r, o_domain=self._o_domain)
        r_bin = Signal(bits, reset_less=True)
        r_next = Signal(bits, reset_less=True, init=1)
        r_next_gry = Signal(bits, reset_less=True, init=1)     # 1 is 1 in Gray code too
        out = Signal(size, reset_less=True)
        out_valid = Signal(reset_less=True)
        empty = Signal()
        m.d.comb += [empty.eq(r_gry == w_gry_r), rp.addr.eq(r_bin[:-1]),
                     o.valid.eq(out_valid), o.payload.eq(out)]
        fetch = ~empty & (~out_valid | o.ready)
        r_rst = Signal()
        m.submodules.rst_sync = cdc.AsyncFFSynchronizer(
            ResetSignal(self._i_domain, allow_reset_less=True), r_rst, o_domain=self._o_domain)
        here, here_next, after = Signal(bits), Signal(bits), Signal(bits)
        m.d.comb += [here.eq(_binary(w_gry_r)), here_next.eq(here + 1), after.eq(r_next + 1)]
        with m.If(r_rst):
            # empty, with the read pointer where the write pointer is
            rd += [r_gry.eq(w_gry_r), r_bin.eq(here), r_next.eq(here_next),
                   r_next_gry.eq(_gray(here_next)), out_valid.eq(0)]
        with m.Elif(fetch):
            rd += [out.eq(rp.data), out_valid.eq(1),
                   r_bin.eq(r_next), r_gry.eq(r_next_gry),
                   r_next.eq(after), r_next_gry.eq(_gray(after))]
        with m.Elif(o.ready):
            rd += out_valid.eq(0)
        return m
