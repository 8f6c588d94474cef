"""A cocotb model of host memory behind the NIC's read and write ports (``hdl/host_memory.py``).

Storage is cocotbext-axi's address space: only regions mapped with :meth:`HostMemory.map` exist;
a request that touches anything else, or a range marked with :meth:`HostMemory.fail`, gets an
error response. Each read is answered after a latency drawn from ``latency`` (cycles), responses
in request order and pipelined (a new request does not wait for the previous answer); ``gap``
inserts random idle cycles in the read data, ``backpressure`` holds off requests and write beats.
"""

from __future__ import annotations

import random
from collections import deque

import cocotb
from cocotb.triggers import Event, RisingEdge
from cocotb.utils import get_sim_time
from cocotbext.axi import AddressSpace, AxiStreamFrame, SparseMemoryRegion

from mrcnic.hdl.host_memory import TAG_BITS, read_request_layout
from mrcnic.verif.layouts import decode
from mrcnic.verif.tbkit import CLOCK_NS, sink, source

__all__ = ["HostMemory"]


def _first_user(frame) -> int:
    u = frame.tuser
    return int(u[0] if isinstance(u, list) else (u or 0))


class HostMemory:
    def __init__(self, dut, *, read="mem_rd", write="mem_wr", rng=None, latency=(4, 4),
                 gap=0.0, backpressure=0.0):
        self.dut = dut
        self.rng = rng or random.Random(0)
        self.latency = latency
        self.space = AddressSpace(2 ** 64)
        self.failing: list[tuple[int, int]] = []
        self.reads = self.writes = self.errors = 0
        self._t0 = get_sim_time("ns")
        self.log: list[dict] = []      # every request served: for tests to check against
        if read:
            self.req = sink(dut, f"{read}__req", self.rng, backpressure)
            self.rsp = source(dut, f"{read}__data", self.rng, gap)
            self.lanes = self.rsp.byte_lanes
            self._due: deque = deque()
            self._ready = Event()
            cocotb.start_soon(self._take_reads())
            cocotb.start_soon(self._answer_reads())
        if write:
            self.wr = sink(dut, f"{write}__wr", self.rng, backpressure)
            self.ack = source(dut, f"{write}__ack")
            cocotb.start_soon(self._serve_writes())

    def map(self, base: int, size: int) -> SparseMemoryRegion:
        """Makes [base, base + size) host memory, zero-filled."""
        region = SparseMemoryRegion(size)
        self.space.register_region(region, base)
        return region

    def fail(self, base: int, size: int) -> None:
        """Accesses touching [base, base + size) get an error response."""
        self.failing.append((base, size))

    def refuses(self, addr, length) -> bool:
        """Whether an access of ``length`` bytes at ``addr`` gets an error response."""
        if length == 0:
            return True
        if any(addr < b + s and b < addr + length for b, s in self.failing):
            return True
        try:
            self.space.find_regions(addr, length)
            return not self._covered(addr, length)
        except ValueError:
            return True

    def _covered(self, addr, length):
        covered = 0
        for base, size, *_ in self.space.find_regions(addr, length):
            covered += min(addr + length, base + size) - max(addr, base)
        return covered == length

    async def read_bytes(self, addr: int, length: int) -> bytes:
        return bytes(await self.space.read(addr, length))

    async def write_bytes(self, addr: int, data: bytes) -> None:
        await self.space.write(addr, data)

    @property
    def cycle(self) -> int:
        """Clock cycles since this model was made (from simulated time: a coroutine counting
        edges cost a wake-up every cycle)."""
        return round((get_sim_time("ns") - self._t0) / CLOCK_NS)

    async def _take_reads(self):
        layout = read_request_layout()
        while True:
            frame = await self.req.recv()
            req = decode(layout, frame.tdata)
            lo, hi = self.latency
            self._due.append((self.cycle + self.rng.randint(lo, hi), req, self.cycle))
            self._ready.set()

    async def _answer_reads(self):
        while True:
            if not self._due:
                self._ready.clear()
                await self._ready.wait()
            due, req, asked = self._due.popleft()
            while self.cycle < due:
                await RisingEdge(self.dut.clk)
            addr, length, tag = req["addr"], req["length"], req["tag"]
            bad = self.refuses(addr, length)
            data = bytes(max(length, 1)) if bad else await self.read_bytes(addr, length)
            self.reads += 1
            self.errors += bad
            self.log.append({"op": "read", "addr": addr, "length": length, "tag": tag,
                             "error": bad, "asked": asked, "answered": self.cycle})
            await self.rsp.send(AxiStreamFrame(data, tuser=tag | (int(bad) << TAG_BITS)))

    async def _serve_writes(self):
        while True:
            frame = await self.wr.recv()
            addr, data = _first_user(frame), bytes(frame.tdata)
            bad = self.refuses(addr, len(data))
            if not bad:
                await self.write_bytes(addr, data)
            self.writes += 1
            self.errors += bad
            self.log.append({"op": "write", "addr": addr, "length": len(data), "error": bad,
                             "answered": self.cycle})
            await self.ack.send(AxiStreamFrame(bytes([int(bad)])))


