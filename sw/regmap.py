"""The register map: the one table every register comes from.

The HDL register bank (:class:`mrcnic.hdl.register_bank.RegisterBank`), the driver's register
client (:mod:`mrcnic.regclient`), the CLI's ``mrcnic regs`` and ``docs/registers.md`` are all
generated from :data:`REGISTERS`.

Registers are 32-bit words at byte offsets that are multiples of 4. Access kinds:

* ``RW``: storage in the register bank, driven out to the gateware; the host reads back what it
  wrote. Writes with bits set above the register's width are refused (ignored and counted in
  ``global.bus_errors``), never truncated.
* ``RO``: driven by the gateware (status, counters); writes are refused and counted.
* ``CONST``: a value fixed when the bank is built (identification, build parameters).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["Access", "Register", "REGISTERS", "MRCNIC_ID", "MRCNIC_VERSION", "by_name",
           "by_offset", "ADDR_WIDTH", "BUS_ERRORS"]

MRCNIC_ID = 0x4D52_4331       # "MRC1"
MRCNIC_VERSION = 0x0001_0000  # major.minor in the two halves
ADDR_WIDTH = 12               # byte-address bits of the CSR bus: a 4 KiB window
BUS_ERRORS = "global.bus_errors"   # the one RO register the bank drives itself


class Access(enum.Enum):
    RW = "RW"
    RO = "RO"
    CONST = "CONST"


@dataclass(frozen=True)
class Register:
    block: str
    name: str
    offset: int
    width: int
    access: Access
    reset: int
    doc: str

    @property
    def path(self) -> str:
        """The register's name as the driver and CLI spell it: ``block.name``."""
        return f"{self.block}.{self.name}"

    @property
    def port(self) -> str:
        """The register bank's port for it: ``block_name``."""
        return f"{self.block}_{self.name}"


def _r(block, name, offset, width, access, reset, doc):
    return Register(block, name, offset, width, Access(access), reset, doc)


REGISTERS: tuple[Register, ...] = (
    _r("global", "id", 0x000, 32, "CONST", MRCNIC_ID, "Identification: 0x4D524331 ('MRC1')."),
    _r("global", "version", 0x004, 32, "CONST", MRCNIC_VERSION, "Register-map version, major.minor."),
    _r("global", "data_width", 0x008, 32, "CONST", 0, "Datapath width in bits (a build parameter)."),
    _r("global", "planes", 0x00C, 32, "CONST", 0, "Network planes (ports) the NIC was built with."),
    _r("global", "scratch", 0x010, 32, "RW", 0, "Scratch register: reads back what was written."),
    _r("global", "control", 0x014, 1, "RW", 0, "Bit 0: enable the datapath."),
    _r("global", "bus_errors", 0x018, 32, "RO", 0,
       "CSR accesses refused: unmapped offset, write to a read-only register, value too wide."),
    _r("icrc", "frames", 0x100, 32, "RO", 0, "Frames the ICRC checker has seen."),
    _r("icrc", "bad", 0x104, 32, "RO", 0, "Frames whose ICRC was wrong."),
    _r("parser", "frames", 0x200, 32, "RO", 0, "Frames the header parser has seen."),
    _r("parser", "errors", 0x204, 32, "RO", 0, "Frames the header parser found malformed."),
    _r("parser", "last_error", 0x208, 4, "RO", 0, "Reason code of the last malformed frame."),
)


def _check(regs):
    seen: dict[int, Register] = {}
    names = set()
    for r in regs:
        if r.offset % 4 or not 0 <= r.offset < 1 << ADDR_WIDTH:
            raise ValueError(f"{r.path}: offset {r.offset:#x} is not a word inside the CSR window")
        if not 1 <= r.width <= 32:
            raise ValueError(f"{r.path}: width {r.width} is not 1..32")
        if r.offset in seen:
            raise ValueError(f"{r.path} and {seen[r.offset].path} share offset {r.offset:#x}")
        if r.path in names:
            raise ValueError(f"{r.path} is declared twice")
        seen[r.offset] = r
        names.add(r.path)


_check(REGISTERS)
_BY_NAME = {r.path: r for r in REGISTERS}
_BY_OFFSET = {r.offset: r for r in REGISTERS}


def by_name(path: str) -> Register:
    try:
        return _BY_NAME[path]
    except KeyError:
        raise KeyError(f"no register named {path!r}; registers are named block.name, "
                       f"e.g. {REGISTERS[0].path}") from None


def by_offset(offset: int) -> Register | None:
    return _BY_OFFSET.get(offset)
