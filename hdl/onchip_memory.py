"""On-chip memory: block RAM that answers the NIC's memory ports as host memory would, for a board
with no host (hdl/host_memory.py has the ports' rules)."""

from amaranth import Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .front_drop import FrontDrop
from .host_memory import ADDR_BITS, LENGTH_BITS, MemReadPort, MemWritePort
from .prefix_inserter import PrefixInserter
from .stream import RegSlice, check_width, keep_mask

__all__ = ["OnChipMemory"]


class OnChipMemory(wiring.Component):
    """``size`` bytes of block RAM at addresses ``base`` .. ``base + size - 1``, behind a read
    port and a write port that follow the host-memory rules, at any byte alignment: a read's
    first byte leaves in lane 0, a write's first byte lands at its address.

    A read that is empty or reaches outside the memory is answered with its beats marked
    ``error`` (data zero) and counted in ``errors``. A write is taken word by word as it comes,
    so one that runs past the end stores what lies inside and is answered with ``error``; one
    that starts below ``base`` stores nothing. One access of each kind at a time: a read's
    answer, or a write's acknowledgement, ends before the next one starts.

    Parameters
    ----------
    width : data width in bits;  size : bytes, a power of two of at least two beats;
    base : the address of the first byte, a multiple of ``size``.

    Attributes
    ----------
    rd : In(MemReadPort(width));  wr : In(MemWritePort(width))
    reads, writes, errors : Out(32), accesses served and refused (wrapping)
    """

    def __init__(self, width=64, size=1 << 16, base=0):
        self._width = check_width(width)
        lanes = width // 8
        if not isinstance(size, int) or size < 2 * lanes or size & (size - 1):
            raise ValueError(f"size must be a power of two of at least {2 * lanes} bytes, "
                             f"not {size!r}")
        if not isinstance(base, int) or base < 0 or base % size or base + size > 1 << ADDR_BITS:
            raise ValueError(f"base must be a multiple of size ({size}) within the address "
                             f"space, not {base!r}")
        self._size, self._base = size, base
        super().__init__({"rd": In(MemReadPort(width)), "wr": In(MemWritePort(width)),
                          "reads": Out(32), "writes": Out(32), "errors": Out(32)})

    def elaborate(self, platform):
        m = Module()
        L = self._width // 8
        lb = (L - 1).bit_length()
        depth = self._size // L
        m.submodules.mem = mem = Memory(shape=self._width, depth=depth, init=[])
        rport = mem.read_port(transparent_for=())
        wport = mem.write_port(granularity=8)
        self._reads(m, L, lb, depth, rport)
        self._writes(m, L, lb, depth, wport)
        return m

    def _below(self, addr):
        """Whether ``addr`` is below the memory (never, when it starts at 0)."""
        return addr < self._base if self._base else Const(0)

    def _count(self, m, name, when):
        with m.If(when):
            m.d.sync += getattr(self, name).eq(getattr(self, name) + 1)

    def _reads(self, m, L, lb, depth, rport):
        """Read: fetch the words the bytes span, then drop the bytes before the first."""
        m.submodules.drop = drop = FrontDrop(self._width, max_bytes=L - 1, unit=1)
        # The answer leaves through a register (both ways): from the word read through the
        # drop into the reader's payload path (on a board, the TX pipeline's builder and ICRC)
        # was one path, the core clock's longest.
        m.submodules.rd_out = out = RegSlice(self.rd.data.payload.shape())
        wiring.connect(m, out.o, wiring.flipped(self.rd.data))
        req, rsp = self.rd.req, out.i
        tag = Signal.like(req.payload.tag)
        off = Signal(lb)                       # the first byte's lane in its word
        word = Signal(range(depth))            # the next word to fetch
        left = Signal(LENGTH_BITS - lb + 1)    # words still to fetch
        beats = Signal(LENGTH_BITS - lb + 1)   # an error answer's beats still to send
        tail = Signal(L)                       # keep of the last word fetched, or error beat
        drop_owed = Signal()                   # the drop record waits for the first word

        a = req.payload
        rel = Signal(ADDR_BITS + 1)
        m.d.comb += rel.eq(a.addr - self._base)
        end = Signal(ADDR_BITS + 2)            # one past the last byte, from base
        m.d.comb += end.eq(rel + a.length)
        bad = Signal()
        m.d.comb += bad.eq((a.length == 0) | self._below(a.addr) | (end > self._size))
        first_lane = rel[:lb]
        span = Signal(LENGTH_BITS + 1)         # bytes of the words fetched, from the first's lane 0
        m.d.comb += span.eq(a.length + first_lane)
        length1 = Mux(a.length == 0, 1, a.length)

        # The word reader: a registered read feeding the drop, held while it waits. It fetches
        # while words are left, which is never so outside DATA (DATA ends on the last beat).
        iv, ilast, ikeep = Signal(), Signal(), Signal(L)
        advance = Signal()
        m.d.comb += [advance.eq(~iv | drop.i.ready), rport.en.eq(advance), rport.addr.eq(word),
                     drop.i.valid.eq(iv), drop.i.payload.data.eq(rport.data),
                     drop.i.payload.keep.eq(ikeep), drop.i.payload.last.eq(ilast),
                     drop.drop.valid.eq(drop_owed), drop.drop.payload.bytes.eq(off)]
        with m.If(drop.drop.valid & drop.drop.ready):
            m.d.sync += drop_owed.eq(0)
        with m.If(advance):
            m.d.sync += iv.eq(left != 0)
            with m.If(left != 0):
                m.d.sync += [word.eq(word + 1), left.eq(left - 1), ilast.eq(left == 1),
                             ikeep.eq(Mux(left == 1, tail, (1 << L) - 1))]

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += req.ready.eq(1)
                with m.If(req.valid):
                    m.d.sync += tag.eq(a.tag)
                    self._count(m, "reads", 1)
                    with m.If(bad):
                        m.d.sync += [beats.eq((length1 + L - 1) >> lb),
                                     tail.eq(keep_mask(m, (length1 - 1)[:lb] + 1, L))]
                        self._count(m, "errors", 1)
                        m.next = "ERROR"
                    with m.Else():
                        m.d.sync += [off.eq(first_lane), word.eq(rel[lb:]),
                                     left.eq((span + L - 1) >> lb),
                                     tail.eq(keep_mask(m, (span - 1)[:lb] + 1, L)),
                                     drop_owed.eq(1)]
                        m.next = "DATA"
            with m.State("DATA"):
                m.d.comb += [rsp.valid.eq(drop.o.valid), drop.o.ready.eq(rsp.ready),
                             rsp.payload.data.eq(drop.o.payload.data),
                             rsp.payload.keep.eq(drop.o.payload.keep),
                             rsp.payload.last.eq(drop.o.payload.last), rsp.payload.tag.eq(tag)]
                with m.If(rsp.valid & rsp.ready & rsp.payload.last):
                    m.next = "IDLE"
            with m.State("ERROR"):
                m.d.comb += [rsp.valid.eq(1), rsp.payload.error.eq(1), rsp.payload.tag.eq(tag),
                             rsp.payload.last.eq(beats == 1),
                             rsp.payload.keep.eq(Mux(beats == 1, tail, (1 << L) - 1))]
                with m.If(rsp.ready):
                    m.d.sync += beats.eq(beats - 1)
                    with m.If(beats == 1):
                        m.next = "IDLE"

    def _writes(self, m, L, lb, depth, wport):
        """Write: put the first byte's lane's worth of empty bytes before the data, then write
        word by word with byte enables."""
        m.submodules.shift = shift = PrefixInserter(self._width, lengths=tuple(range(1, L + 1)))
        beat, ack = self.wr.wr, self.wr.ack
        a = beat.payload
        rel = Signal(ADDR_BITS + 1)
        m.d.comb += rel.eq(a.addr - self._base)
        below = Signal()
        word = Signal(ADDR_BITS + 1 - lb + 1)   # where the next word goes (may be past the end)
        first = Signal()                        # the next word is the first: mask the prefix
        pre = Signal(range(L + 1))
        body_in = Signal()                      # the body's last beat has gone in
        failed = Signal()
        ack_full = Signal()
        m.d.comb += [ack.valid.eq(ack_full), ack.payload.error.eq(failed)]
        with m.If(ack.ready):
            m.d.sync += ack_full.eq(0)

        with m.FSM():
            with m.State("IDLE"):
                # The first beat's address sets the shift; the beat itself goes in BODY.
                lane = rel[:lb]
                p = Mux(lane == 0, L, lane)
                m.d.comb += [shift.prefix.valid.eq(beat.valid & ~ack_full),
                             shift.prefix.payload.length.eq(p),
                             shift.prefix.payload.data.eq(0)]
                with m.If(shift.prefix.valid & shift.prefix.ready):
                    below_now = self._below(a.addr)
                    m.d.sync += [pre.eq(p), first.eq(1), body_in.eq(0), below.eq(below_now),
                                 failed.eq(below_now),
                                 word.eq(Mux(lane == 0, rel[lb:] - 1, rel[lb:]))]
                    self._count(m, "writes", 1)
                    m.next = "BODY"
            with m.State("BODY"):
                m.d.comb += [shift.i.valid.eq(beat.valid & ~body_in), beat.ready.eq(shift.i.ready
                                                                                 & ~body_in),
                             shift.i.payload.data.eq(a.data), shift.i.payload.keep.eq(a.keep),
                             shift.i.payload.last.eq(a.last)]
                with m.If(beat.valid & beat.ready & a.last):
                    m.d.sync += body_in.eq(1)
                o = shift.o
                m.d.comb += o.ready.eq(1)
                enables = Signal(L)
                m.d.comb += enables.eq(Mux(first, o.payload.keep & ~keep_mask(m, pre, L),
                                           o.payload.keep))
                inside = Signal()
                m.d.comb += inside.eq(~below & (word < depth))
                m.d.comb += [wport.addr.eq(word[:len(wport.addr)]), wport.data.eq(o.payload.data)]
                with m.If(o.valid):
                    m.d.sync += [word.eq(word + 1), first.eq(0)]
                    with m.If(inside):
                        m.d.comb += wport.en.eq(enables)
                    with m.Elif(enables != 0):
                        m.d.sync += failed.eq(1)
                    with m.If(o.payload.last):
                        m.d.sync += ack_full.eq(1)
                        fail_now = failed | (~inside & (enables != 0))
                        self._count(m, "errors", fail_now)
                        m.next = "IDLE"
