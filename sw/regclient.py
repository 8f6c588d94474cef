"""The driver's register client: registers by name, over any 32-bit read/write transport.

A transport has ``read(offset) -> int`` and ``write(offset, value)``. :class:`RegisterClient`
calls them directly; :class:`AsyncRegisterClient` awaits them (the cocotb CSR bus driver is one).
Both check names and values against :mod:`mrcnic.regmap` before anything reaches the bus.
"""

from __future__ import annotations

from .regmap import REGISTERS, Access, Register, by_name

__all__ = ["RegisterError", "RegisterClient", "AsyncRegisterClient"]


class RegisterError(ValueError):
    pass


def _writable(path: str, value: int) -> Register:
    reg = by_name(path)
    if reg.access is not Access.RW:
        raise RegisterError(f"{path} is {reg.access.value}: it cannot be written")
    if not isinstance(value, int) or not 0 <= value < 1 << reg.width:
        raise RegisterError(f"{path} is {reg.width} bits wide: {value!r} does not fit "
                            f"(0 .. {(1 << reg.width) - 1:#x})")
    return reg


class RegisterClient:
    def __init__(self, transport):
        self.transport = transport

    def read(self, path: str) -> int:
        return self.transport.read(by_name(path).offset)

    def write(self, path: str, value: int) -> None:
        self.transport.write(_writable(path, value).offset, value)

    def dump(self) -> dict[str, int]:
        return {r.path: self.transport.read(r.offset) for r in REGISTERS}


class AsyncRegisterClient:
    def __init__(self, transport):
        self.transport = transport

    async def read(self, path: str) -> int:
        return await self.transport.read(by_name(path).offset)

    async def write(self, path: str, value: int) -> None:
        await self.transport.write(_writable(path, value).offset, value)

    async def dump(self) -> dict[str, int]:
        return {r.path: await self.transport.read(r.offset) for r in REGISTERS}
