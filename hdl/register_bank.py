"""Register bank: every register of :mod:`mrcnic.regmap`, on the CSR bus."""

from amaranth import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from mrcnic.regmap import BUS_ERRORS, REGISTERS, Access

from .csr_bus import CSRBus

__all__ = ["RegisterBank"]


class RegisterBank(wiring.Component):
    """The register map in hardware, generated from the one table.

    Each ``RW`` register is storage driven out on a port named ``<block>_<name>``; each ``RO``
    register is a port of that name driven in by the gateware; ``CONST`` registers read the
    value given in ``constants`` (or their reset value). Refused accesses (unmapped offset, write
    to a register that is not RW, a value wider than the register) change nothing and count in
    ``global.bus_errors``, which the bank drives itself.

    Parameters
    ----------
    constants : {register path: value} for CONST registers fixed by build parameters.
    registers : the table (defaults to the project's register map).

    Attributes
    ----------
    bus : In(CSRBus())
    <block>_<name> : Out(width) for RW registers, In(width) for RO registers.
    """

    def __init__(self, constants=None, registers=REGISTERS):
        self._registers = tuple(registers)
        self._constants = dict(constants or {})
        paths = {r.path: r for r in self._registers}
        for path, value in self._constants.items():
            if path not in paths or paths[path].access is not Access.CONST:
                raise ValueError(f"{path!r} is not a CONST register; constants can only set those")
            if not 0 <= value < 1 << paths[path].width:
                raise ValueError(f"{path} = {value!r} does not fit in {paths[path].width} bits")
        members = {"bus": In(CSRBus())}
        for r in self._registers:
            if r.access is Access.RW:
                members[r.port] = Out(r.width, init=r.reset)
            elif r.access is Access.RO and r.path != BUS_ERRORS:
                members[r.port] = In(r.width)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        bus = self.bus
        bus_errors = Signal(32)
        refused = Signal()

        with m.If(bus.r_stb):
            with m.Switch(bus.addr):
                for r in self._registers:
                    with m.Case(r.offset):
                        if r.access is Access.CONST:
                            value = self._constants.get(r.path, r.reset)
                        elif r.path == BUS_ERRORS:
                            value = bus_errors
                        else:
                            value = getattr(self, r.port)
                        m.d.sync += bus.r_data.eq(value)
                with m.Default():
                    m.d.sync += bus.r_data.eq(0)
                    m.d.comb += refused.eq(1)

        # A write lands only on an RW register and only when the value fits its width.
        written = []
        for r in self._registers:
            if r.access is Access.RW:
                fits = (bus.w_data[r.width:] == 0) if r.width < 32 else 1
                hit = Signal(name=f"write_{r.port}")
                m.d.comb += hit.eq(bus.w_stb & (bus.addr == r.offset) & fits)
                with m.If(hit):
                    m.d.sync += getattr(self, r.port).eq(bus.w_data[:r.width])
                written.append(hit)
        with m.If(bus.w_stb & ~Cat(*written).any()):
            m.d.comb += refused.eq(1)

        with m.If(refused):
            m.d.sync += bus_errors.eq(bus_errors + 1)
        return m
