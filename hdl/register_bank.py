"""Register bank: every register of :mod:`mrcnic.regmap`, on the CSR bus."""

from amaranth import C, Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from mrcnic.regmap import BUS_ERRORS, REGISTERS, Access, plane_of

from .counter_bank import CounterBank
from .csr_bus import CSRBus, Refusal

__all__ = ["RegisterBank"]


class RegisterBank(wiring.Component):
    """The register map in hardware, generated from the one table.

    Each ``RW`` register is storage driven out on a port named ``<block>_<name>``; each ``RO``
    register is a port of that name driven in by the gateware; each ``CMD`` register is an
    ``Out(stream.Signature(width))`` of that name whose payload is the value written, valid until
    the gateware takes it. ``CONST`` registers read the value given in ``constants``. Each
    ``MEM`` register is a block RAM of its words, which only the bus reaches. A counter (an RO
    register with ``counts``) is a port of that name taking an increment each cycle; the bank
    keeps the counts in a :class:`~.counter_bank.CounterBank`.

    Refused accesses change nothing and count in ``global.bus_errors`` (which the bank drives
    itself): an unmapped offset, a write to a register that is not RW or CMD, a value wider than
    the register or above its limit (the table's, or ``limits``), and while a command is pending,
    a write to it or to an RW register of its block. The bus's ``refused`` tells why
    (:class:`~.csr_bus.Refusal`).

    An RW register reads back from a block RAM copy written beside it, so the read multiplexer
    carries only what the gateware drives (RO registers, command states): a word not written
    since the last reset reads its reset value, as the register's own storage holds it then.

    The registers of planes the build does not have (``<name>_p<n>``, ``n >= planes``) have no
    port and no storage: they read 0 and refuse writes (ACCESS).

    Parameters
    ----------
    constants : {register path: value} for CONST registers fixed by build parameters.
    limits : {register path: largest value} for RW and CMD registers bounded by build parameters.
    registers : the table (defaults to the project's register map).
    planes : the planes the build has (default: every plane the map has registers for).
    late : RO registers (of one word, not counters) whose input follows the selectors that
        choose it a cycle late, as a block RAM's read port does: a read of one takes the value
        a cycle after the strobe, so a read just after a selector's write sees the entry chosen.
    """

    def __init__(self, constants=None, limits=None, registers=REGISTERS, planes=None, late=()):
        if planes is not None and (not isinstance(planes, int) or planes < 1):
            raise ValueError(f"planes must be a positive integer, not {planes!r}")
        self._registers = tuple(registers)
        self._absent = {r.path for r in self._registers
                        if planes is not None and (plane_of(r) or 0) >= planes}
        self._constants = dict(constants or {})
        paths = {r.path: r for r in self._registers}
        self._late = tuple(late)
        for path in self._late:
            r = paths.get(path)
            if r is None or r.access is not Access.RO or r.counts or r.words > 1:
                raise ValueError(f"{path!r} is not a one-word RO register other than a counter; "
                                 "only those can be read late")
        for path, value in self._constants.items():
            if path not in paths or paths[path].access is not Access.CONST:
                raise ValueError(f"{path!r} is not a CONST register; constants can only set those")
            if not 0 <= value < 1 << paths[path].width:
                raise ValueError(f"{path} = {value!r} does not fit in {paths[path].width} bits")
        self._limits = {r.path: r.max_value for r in self._registers}
        for path, value in (limits or {}).items():
            if (path not in paths or paths[path].access not in (Access.RW, Access.CMD)
                    or paths[path].words > 1):
                raise ValueError(f"{path!r} is not a one-word RW or CMD register; only those "
                                 "take limits")
            if not 0 <= value <= paths[path].max_value:
                raise ValueError(f"{path}: limit {value!r} is outside 0..{paths[path].max_value}")
            self._limits[path] = value
        members = {"bus": In(CSRBus())}
        for r in self._registers:
            if r.path in self._absent:
                continue
            if r.access is Access.RW:
                members[r.port] = Out(r.width, init=r.reset)
            elif r.access is Access.CMD:
                members[r.port] = Out(stream.Signature(r.width))
            elif r.access is Access.RO and r.counts:
                members[r.port] = In(r.counts)
            elif r.access is Access.RO and r.path != BUS_ERRORS:
                members[r.port] = In(r.width)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        bus = self.bus
        bus_errors = Signal(32)
        refused = Signal()
        why_read = Signal(2)
        regs = self._registers

        # A block is locked while one of its commands is pending.
        locked = {}
        for r in regs:
            if r.access is Access.CMD:
                pending = getattr(self, r.port).valid
                locked[r.block] = locked[r.block] | pending if r.block in locked else pending

        # A MEM register's words: its high address bits select it, its low ones the word. The
        # word read appears a cycle after the strobe, as every register's does.
        r_word = Signal(32)
        m.d.comb += bus.r_data.eq(r_word)
        mem_hits = []
        for r in regs:
            if r.access is not Access.MEM:
                continue
            low = (4 * r.words).bit_length() - 1
            hit = Signal(name=f"hit_{r.port}")
            m.d.comb += hit.eq((bus.addr[low:] == r.offset >> low) & (bus.addr[:2] == 0))
            mem_hits.append(hit)
            m.submodules[f"mem_{r.port}"] = mem = Memory(shape=32, depth=r.words, init=[])
            rd, wr = mem.read_port(), mem.write_port()
            m.d.comb += [rd.addr.eq(bus.addr[2:low]), rd.en.eq(bus.r_stb & hit),
                         wr.addr.eq(bus.addr[2:low]), wr.data.eq(bus.w_data),
                         wr.en.eq(bus.w_stb & hit)]
            selected = Signal(name=f"read_{r.port}")
            with m.If(bus.r_stb):
                m.d.sync += selected.eq(hit)
            with m.If(selected):
                m.d.comb += bus.r_data.eq(rd.data)

        in_mem = Signal()
        m.d.comb += in_mem.eq(Cat(*mem_hits, C(0, 1)).any())

        # RW registers read back from a copy in block RAM (their storage drives the gateware
        # and stays in flip-flops): a multiplexer over some 2,700 bits of them cost as many
        # LUTs. ``written`` says which words the copy holds since the last reset; the others
        # read their reset value.
        rw_words = [(r.offset + 4 * k, r, k) for r in regs
                    if r.access is Access.RW and r.path not in self._absent
                    for k in range(r.words)]
        rw_index = {addr: i for i, (addr, _, _) in enumerate(rw_words)}
        rw_hit = Signal()
        rw_fresh = Signal()
        written = Signal(max(1, len(rw_words)))
        if rw_words:
            base = min(addr for addr, _, _ in rw_words) >> 2
            span = (max(addr for addr, _, _ in rw_words) >> 2) - base + 1
            m.submodules.readback = copy = Memory(shape=32, depth=span, init=[])
            c_rd, c_wr = copy.read_port(), copy.write_port()
            c_addr = Signal(range(span))
            m.d.comb += [c_addr.eq(bus.addr[2:] - base), c_rd.addr.eq(c_addr),
                         c_rd.en.eq(bus.r_stb), c_wr.addr.eq(c_addr), c_wr.data.eq(bus.w_data)]
            with m.If(rw_hit & rw_fresh):
                m.d.comb += bus.r_data.eq(c_rd.data)
        with m.If(bus.r_stb):
            m.d.sync += rw_hit.eq(0)

        # Counters: a read of one's first word reads the counter bank; a second word reads
        # what the first read left (as a wide RO register's snapshot).
        counters = [r for r in regs if r.access is Access.RO and r.counts
                    and r.path not in self._absent]
        # One bank per counter width, so a few 64-bit counters do not widen every word.
        widths = sorted({r.width for r in counters})
        cnt_at = {}                       # path -> (its bank's number, its bank, its index)
        cnt_hit = Signal(len(widths))     # the bank the last read asked (one-hot)
        cnt_high = Signal(32)
        for j, w in enumerate(widths):
            group = [r for r in counters if r.width == w]
            bank = CounterBank([r.counts for r in group], w)
            m.submodules[f"counters_w{w}"] = bank
            for i, r in enumerate(group):
                m.d.comb += bank.inc[i].eq(getattr(self, r.port))
                cnt_at[r.path] = (j, bank, i)
            with m.If(cnt_hit[j]):
                m.d.comb += bus.r_data.eq(bank.rd_data[:32])
                if w > 32:
                    m.d.sync += cnt_high.eq(bank.rd_data[32:])
        with m.If(bus.r_stb):
            m.d.sync += cnt_hit.eq(0)
        # A counter's index follows the address alone, and only its read enable takes the
        # strobe: through the read decode below, the strobe reached the bank's pending-count
        # multiplexer and adder, the boards' core clock's longest path.
        with m.Switch(bus.addr):
            for r in counters:
                _, bank, i = cnt_at[r.path]
                with m.Case(r.offset):
                    m.d.comb += [bank.rd_addr.eq(i), bank.rd_en.eq(bus.r_stb)]

        # Late RO registers: the value is taken the cycle after the strobe, and kept (a read in
        # that cycle takes over r_word: its assignments come after these).
        late_hit = Signal(max(1, len(self._late)))
        with m.If(late_hit.any()):
            m.d.sync += late_hit.eq(0)
        for j, path in enumerate(self._late):
            value = getattr(self, next(r.port for r in regs if r.path == path))
            with m.If(late_hit[j]):
                m.d.comb += bus.r_data.eq(value)
                m.d.sync += r_word.eq(value)

        # Reads. The first word of a wide RO register snapshots the rest for the words after.
        with m.If(bus.r_stb):
            m.d.sync += late_hit.eq(0)
            with m.Switch(bus.addr):
                for r in regs:
                    if r.access is Access.MEM:
                        continue
                    if r.path in self._absent:
                        value = C(0, r.width)
                    elif r.access is Access.CONST:
                        value = self._constants.get(r.path, r.reset)
                    elif r.path == BUS_ERRORS:
                        value = bus_errors
                    elif r.access is Access.CMD:
                        value = getattr(self, r.port).valid
                    else:
                        value = getattr(self, r.port)
                    if r.path in cnt_at:
                        j, bank, i = cnt_at[r.path]
                        for k in range(r.words):
                            with m.Case(r.offset + 4 * k):
                                if k == 0:
                                    m.d.sync += cnt_hit[j].eq(1)
                                else:
                                    m.d.sync += r_word.eq(cnt_high)
                        continue
                    if r.path in self._late:
                        with m.Case(r.offset):
                            m.d.sync += late_hit[self._late.index(r.path)].eq(1)
                        continue
                    shadow = None
                    if r.access is Access.RO and r.words > 1 and r.path not in self._absent:
                        shadow = Signal(r.width - 32, name=f"snapshot_{r.port}")
                    if r.access is Access.RW and r.path not in self._absent:
                        for k in range(r.words):
                            with m.Case(r.offset + 4 * k):
                                i = rw_index[r.offset + 4 * k]
                                m.d.sync += [r_word.eq((r.reset >> 32 * k) & 0xFFFF_FFFF),
                                             rw_hit.eq(1), rw_fresh.eq(written[i])]
                        continue
                    for k in range(r.words):
                        with m.Case(r.offset + 4 * k):
                            if k == 0:
                                m.d.sync += r_word.eq(value[:32] if r.words > 1 else value)
                                if shadow is not None:
                                    m.d.sync += shadow.eq(value[32:])
                            elif shadow is not None:
                                m.d.sync += r_word.eq(shadow[32 * (k - 1):32 * k])
                            else:
                                m.d.sync += r_word.eq(value[32 * k:32 * (k + 1)])
                with m.Default():
                    m.d.sync += r_word.eq(0)
                    with m.If(~in_mem):
                        m.d.comb += [refused.eq(1), why_read.eq(Refusal.ADDRESS)]

        # Writes land only on RW and CMD registers, only when the value fits the width and limit
        # (limits exist only on registers of one word) and the block is not locked.
        why_write = Signal(2)       # the refusal of a write, when there is one
        with m.If(bus.w_stb):
            with m.Switch(bus.addr):
                for r in regs:
                    if r.access is Access.MEM:
                        continue
                    takes = r.access in (Access.RW, Access.CMD) and r.path not in self._absent
                    port = getattr(self, r.port) if takes else None
                    limit = self._limits[r.path]
                    for k in range(r.words):
                        with m.Case(r.offset + 4 * k):
                            if not takes:
                                m.d.comb += why_write.eq(Refusal.ACCESS)
                                continue
                            lo, hi = 32 * k, min(32 * (k + 1), r.width)
                            word = bus.w_data[:hi - lo]
                            fits = (bus.w_data[hi - lo:] == 0) if hi - lo < 32 else C(1, 1)
                            if limit < (1 << r.width) - 1:
                                fits = fits & (word <= limit)
                            lock = locked.get(r.block, C(0, 1))
                            with m.If(~fits):
                                m.d.comb += why_write.eq(Refusal.VALUE)
                            with m.Elif(lock):
                                m.d.comb += why_write.eq(Refusal.ACCESS)
                            with m.Else():
                                store = port.payload if r.access is Access.CMD else port
                                m.d.sync += store[lo:hi].eq(word)
                                if r.access is Access.CMD:
                                    m.d.sync += port.valid.eq(1)
                                else:
                                    i = rw_index[r.offset + 4 * k]
                                    m.d.comb += c_wr.en.eq(1)
                                    m.d.sync += written[i].eq(1)
                with m.Default():
                    with m.If(~in_mem):
                        m.d.comb += why_write.eq(Refusal.ADDRESS)
        for r in regs:
            if r.access is Access.CMD:
                port = getattr(self, r.port)
                with m.If(port.valid & port.ready):
                    m.d.sync += port.valid.eq(0)
        with m.If(why_write != Refusal.NONE):
            m.d.comb += refused.eq(1)

        # Why the last access was refused, held until the next, for an initiator that answers
        # for it (the management port).
        with m.If(bus.r_stb | bus.w_stb):
            m.d.sync += bus.refused.eq(Mux(bus.r_stb, why_read, why_write))
        with m.If(refused):
            m.d.sync += bus_errors.eq(bus_errors + 1)
        return m
