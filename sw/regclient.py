"""The driver's register client: registers by name, over any 32-bit read/write transport.

A transport has ``read(offset) -> int`` and ``write(offset, value)``. :class:`RegisterClient`
calls them directly; :class:`AsyncRegisterClient` awaits them (the cocotb CSR bus driver is one).
Both check names and values against :mod:`mrcnic.regmap` before anything reaches the bus.

Every access is written once, as a *program*: a generator that yields ``("r", offset)`` (and is
sent the word read) or ``("w", offset, value)``, and returns its result. A program may also
yield ``("rb", offset, count)`` (sent the list of words read) or ``("wb", offset, words)``: words
at consecutive offsets, which a transport with ``read_burst``/``write_burst`` (the management
client) moves in one request, and any other a word at a time. The two clients only
differ in how they run a program, so the driver's sequences (:mod:`mrcnic.driver`) serve a real
device and a simulation alike: ``client.run(program)`` or ``await client.run(program)``.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from .mgmt import MAX_BURST_WORDS
from .regmap import NIC_REGISTERS, Access, Register, by_name

__all__ = ["RegisterError", "RegisterClient", "AsyncRegisterClient", "Program", "read", "write",
           "command", "dump", "check_write", "read_words", "write_words"]

Program = Generator[tuple, Any, Any]

#: how many times a command is read back before it is declared stuck
COMMAND_POLLS = 1000


class RegisterError(ValueError):
    pass


def check_write(path: str, value: int) -> Register:
    """The register ``path`` names, if ``value`` may be written to it; raises KeyError (no such
    register) or :class:`RegisterError` (not writable, or the value does not fit) otherwise."""
    reg = by_name(path)
    if reg.access is Access.MEM:
        raise RegisterError(f"{path} is MEM: its words are written alone (write_words)")
    if reg.access not in (Access.RW, Access.CMD):
        raise RegisterError(f"{path} is {reg.access.value}: it cannot be written")
    if not isinstance(value, int) or not 0 <= value < 1 << reg.width:
        raise RegisterError(f"{path} is {reg.width} bits wide: {value!r} does not fit "
                            f"(0 .. {(1 << reg.width) - 1:#x})")
    if value > reg.max_value:
        raise RegisterError(f"{path} accepts 0 .. {reg.max_value}, not {value}")
    return reg


def read(path: str) -> Program:
    """A register's value; a wide one low word first (the first read snapshots RO registers)."""
    reg = by_name(path)
    value = 0
    for k in range(reg.words):
        value |= (yield ("r", reg.offset + 4 * k)) << (32 * k)
    return value


def write(path: str, value: int) -> Program:
    reg = check_write(path, value)
    for k in range(reg.words):
        yield ("w", reg.offset + 4 * k, (value >> (32 * k)) & 0xFFFF_FFFF)


def command(path: str, value: int) -> Program:
    """Issues a command and waits until the gateware has taken it."""
    reg = check_write(path, value)
    if reg.access is not Access.CMD:
        raise RegisterError(f"{path} is {reg.access.value}, not a command")
    yield from write(path, value)
    for _ in range(COMMAND_POLLS):
        if not (yield ("r", reg.offset)):
            return
    raise RegisterError(f"{path} still pending after {COMMAND_POLLS} reads: the gateware is not "
                        "taking commands (is it held in reset?)")


def _span(path: str, first: int, count: int) -> Register:
    reg = by_name(path)
    if reg.access is not Access.MEM:
        raise RegisterError(f"{path} is {reg.access.value}, not MEM")
    if not (isinstance(first, int) and isinstance(count, int) and 0 <= first
            and 0 <= count <= reg.words - first):
        raise RegisterError(f"{path} has words 0 .. {reg.words - 1}: {count} from word "
                            f"{first} is not in it")
    return reg


def read_words(path: str, first: int, count: int) -> Program:
    """``count`` words of MEM register ``path`` from its word ``first`` on."""
    reg = _span(path, first, count)
    return list((yield ("rb", reg.offset + 4 * first, count))) if count else []


def write_words(path: str, first: int, words) -> Program:
    """Writes ``words`` (32-bit each) to MEM register ``path`` from its word ``first`` on."""
    words = list(words)
    reg = _span(path, first, len(words))
    if not all(isinstance(w, int) and 0 <= w <= 0xFFFF_FFFF for w in words):
        raise RegisterError(f"{path} takes 32-bit words")
    if words:
        yield ("wb", reg.offset + 4 * first, words)


def dump(registers=NIC_REGISTERS) -> Program:
    """Every register but the commands and the MEM ones: the NIC's, by default (a board adds
    regmap.BOARD_REGISTERS around it)."""
    out = {}
    for r in registers:
        if r.access not in (Access.CMD, Access.MEM):
            out[r.path] = yield from read(r.path)
    return out


def _read_burst(t, offset: int, count: int) -> list[int]:
    burst = getattr(t, "read_burst", None)
    if burst is None:
        return [t.read(offset + 4 * k) for k in range(count)]
    out = []
    for at in range(0, count, MAX_BURST_WORDS):
        out += burst(offset + 4 * at, min(MAX_BURST_WORDS, count - at))
    return out


def _write_burst(t, offset: int, words: list[int]) -> None:
    burst = getattr(t, "write_burst", None)
    for at in range(0, len(words), MAX_BURST_WORDS if burst else 1):
        if burst is None:
            t.write(offset + 4 * at, words[at])
        else:
            burst(offset + 4 * at, words[at:at + MAX_BURST_WORDS])


class RegisterClient:
    def __init__(self, transport):
        self.transport = transport

    def run(self, program: Program):
        t = self.transport
        try:
            op = next(program)
            while True:
                if op[0] == "r":
                    op = program.send(t.read(op[1]))
                elif op[0] == "rb":
                    op = program.send(_read_burst(t, op[1], op[2]))
                elif op[0] == "wb":
                    _write_burst(t, op[1], op[2])
                    op = program.send(None)
                else:
                    t.write(op[1], op[2])
                    op = program.send(None)
        except StopIteration as done:
            return done.value

    def read(self, path: str) -> int:
        return self.run(read(path))

    def write(self, path: str, value: int) -> None:
        self.run(write(path, value))

    def command(self, path: str, value: int) -> None:
        self.run(command(path, value))

    def dump(self) -> dict[str, int]:
        return self.run(dump())


class AsyncRegisterClient:
    def __init__(self, transport):
        self.transport = transport

    async def run(self, program: Program):
        t = self.transport
        try:
            op = next(program)
            while True:
                if op[0] == "r":
                    op = program.send(await t.read(op[1]))
                elif op[0] == "rb":
                    op = program.send([await t.read(op[1] + 4 * k) for k in range(op[2])])
                elif op[0] == "wb":
                    for k, word in enumerate(op[2]):
                        await t.write(op[1] + 4 * k, word)
                    op = program.send(None)
                else:
                    await t.write(op[1], op[2])
                    op = program.send(None)
        except StopIteration as done:
            return done.value

    async def read(self, path: str) -> int:
        return await self.run(read(path))

    async def write(self, path: str, value: int) -> None:
        await self.run(write(path, value))

    async def command(self, path: str, value: int) -> None:
        await self.run(command(path, value))

    async def dump(self) -> dict[str, int]:
        return await self.run(dump())
