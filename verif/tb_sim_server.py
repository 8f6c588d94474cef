"""cocotb side of ``mrcnic sim serve`` (verif/sim_server.py): the system testbench's NICs and
network (verif/tb_system.py), set up as its scenarios are, then each NIC's register window and
the simulation's control window (sw/simctl.py) served on a loopback UDP port with the management
protocol (sw/mgmt.py), while the simulation runs on freely.

Every :data:`POLL_CYCLES` clock cycles a coroutine carries out the accesses the ports' threads
have queued (verif/mgmt_bridge.py): register accesses on the NIC's CSR bus, control accesses on
the network. Once the ports listen it writes their numbers to the file ``ready`` names (a
parameter). The simulation ends when its standard input does (the command that started it
closes it, or dies): the ports close and the test passes.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import cocotb
from cocotb.triggers import ClockCycles
from cocotb.utils import get_sim_time

from mrcnic import regmap, simctl
from mrcnic.mgmt import AccessError, MgmtServer, Status, UdpEndpoint
from mrcnic.regmap import Access
from mrcnic.verif.mgmt_bridge import Bridge
from mrcnic.verif.scenarios import SCENARIOS
from mrcnic.verif.tb_system import System
from mrcnic.verif.tbkit import params, share_lock

#: cycles between looks at the queued accesses: 0.26 us of simulated time, about 1.5 ms of
#: wall time on the idle two-NIC system (some 44,000 cycles a second)
POLL_CYCLES = 64

_U32 = 0xFFFF_FFFF


def _word_bits(reg: regmap.Register, addr: int) -> int:
    """How many of the bits of the register's word at ``addr`` it has."""
    return min(32, reg.width - 32 * ((addr - reg.offset) // 4))


class NicRegisters:
    """A NIC's register window on its CSR bus (tbkit.CsrBus), refusing as the protocol says:
    BAD_ADDRESS where there is no register, BAD_LENGTH for a width that is neither one word nor
    the register's, DENIED for a write to a register that is not RW or CMD, of a plane the NIC
    does not have, or while its block's command is pending, BAD_VALUE for a value too wide or
    above a limit (the register map's, or one the NIC's build sets, which the NIC shows by
    counting the write in global.bus_errors)."""

    def __init__(self, csr):
        self.csr = csr
        self.bus_errors = regmap.by_name(regmap.BUS_ERRORS).offset
        self.planes = regmap.by_name("global.planes").offset

    @staticmethod
    def _register(addr: int, width: int) -> regmap.Register:
        reg = regmap.by_offset(addr)
        if reg is None or reg.block in regmap.BOARD_BLOCKS:    # a board's, not a NIC's
            raise KeyError(addr)
        if width != 32 and (addr, width) != (reg.offset, reg.width):
            raise AccessError(Status.BAD_LENGTH, f"{reg.path} is {reg.width} bits at "
                                                 f"{reg.offset:#x}")
        return reg

    async def read(self, addr: int, width: int) -> int:
        self._register(addr, width)
        value = 0
        for k in range(-(-width // 32)):
            value |= await self.csr.read(addr + 4 * k) << (32 * k)
        return value & ((1 << width) - 1)

    async def write(self, addr: int, width: int, value: int) -> None:
        reg = self._register(addr, width)
        if reg.access not in (Access.RW, Access.CMD, Access.MEM):
            raise AccessError(Status.DENIED, f"{reg.path} is {reg.access.value}")
        plane = regmap.plane_of(reg)
        if plane is not None and plane >= await self.csr.read(self.planes):
            raise AccessError(Status.DENIED, f"{reg.path}: the NIC has no plane {plane}")
        if width == reg.width:
            fits = value <= reg.max_value
        else:
            fits = not value >> _word_bits(reg, addr) and (reg.words > 1 or value <= reg.max_value)
        if not fits:
            raise AccessError(Status.BAD_VALUE, f"{value:#x} does not fit {reg.path}")
        for cmd in regmap.commands(reg.block):
            if await self.csr.read(cmd.offset):
                raise AccessError(Status.DENIED, f"{cmd.path} is pending")
        before = await self.csr.read(self.bus_errors)
        for k in range(-(-width // 32)):
            await self.csr.write(addr + 4 * k, (value >> (32 * k)) & _U32)
        if await self.csr.read(self.bus_errors) != before:
            raise AccessError(Status.BAD_VALUE, f"the NIC refused {value:#x} for {reg.path}")


class SimControl:
    """The control window (sw/simctl.py) of NIC ``nic`` of the system ``sysm``."""

    def __init__(self, sysm: System, nic: int):
        self.sysm, self.nic = sysm, nic
        self.const = {"id": simctl.SIM_ID, "nic": nic, "nics": len(sysm.hosts),
                      "planes": sysm.P, "spines": sysm.S}
        if sysm.S * len(sysm.hosts) > 32 or sysm.P > simctl.MAX_PLANES:
            raise ValueError(f"{sysm.P} planes x {sysm.S} spines x {len(sysm.hosts)} leaves do "
                             "not fit the control window's link bitmaps")
        self._time = 0            # the snapshot the high word of sim.time_ns reads
        self._host_addr = 0
        self.mem = sysm.hosts[nic].mem
        self._by_offset = {r.offset + 4 * k: (r, k) for r in simctl.REGISTERS
                           for k in range(r.words)}

    def _register(self, addr: int, width: int) -> tuple[regmap.Register, int]:
        if addr not in self._by_offset:
            raise KeyError(addr)
        reg, k = self._by_offset[addr]
        if width != 32 and (k, width) != (0, reg.width):
            raise AccessError(Status.BAD_LENGTH, f"sim.{reg.name} is {reg.width} bits")
        return reg, k

    def _down(self, plane: int) -> int:
        nics = len(self.sysm.hosts)
        return sum(1 << simctl.down_bit(s, leaf, nics)
                   for s in range(self.sysm.S) for leaf in range(nics)
                   if plane < self.sysm.P and self.sysm.net.spine_link(plane, s, leaf)[0].down)

    async def read(self, addr: int, width: int) -> int:
        reg, k = self._register(addr, width)
        if reg.name in self.const:
            return self.const[reg.name]
        if reg.name == "host_addr":
            return self._host_addr if width == 64 else (self._host_addr >> (32 * k)) & _U32
        if reg.name == "host_data":
            return int.from_bytes(await self._host(k), "little")
        if reg.name == "time_ns":
            if k == 0:
                self._time = int(get_sim_time("ns"))
            return self._time if width == 64 else (self._time >> (32 * k)) & _U32
        if reg.name.startswith("down_p"):
            return self._down(int(reg.name.removeprefix("down_p")))
        return 0                  # link_down, link_up: taken at once

    async def _host(self, k: int, data: bytes | None = None) -> bytes:
        """Word ``k`` of sim.host_data: read, or written with ``data``."""
        at = self._host_addr + 4 * k
        if self.mem.refuses(at, 4):
            raise AccessError(Status.BAD_ADDRESS, f"the host has no memory at {at:#x}")
        if data is None:
            return await self.mem.read_bytes(at, 4)
        await self.mem.write_bytes(at, data)
        return data

    async def write(self, addr: int, width: int, value: int) -> None:
        reg, k = self._register(addr, width)
        if reg.name == "host_addr":
            if width == 64:
                self._host_addr = value
            else:
                self._host_addr = (self._host_addr & ~(_U32 << (32 * k))) | value << (32 * k)
            return
        if reg.name == "host_data":
            await self._host(k, value.to_bytes(4, "little"))
            return
        if reg.access is not Access.CMD:
            raise AccessError(Status.DENIED, f"sim.{reg.name} is {reg.access.value}")
        plane, spine, leaf = value >> 16, value >> 8 & 0xFF, value & 0xFF
        if not (plane < self.sysm.P and spine < self.sysm.S and leaf < len(self.sysm.hosts)):
            raise AccessError(Status.BAD_VALUE, f"no spine link plane {plane} spine {spine} "
                                                f"leaf {leaf}")
        down = reg.name == "link_down"
        for link in self.sysm.net.spine_link(plane, spine, leaf):
            link.set_down(down)
        what = f"plane {plane} link spine {spine} - leaf {leaf}"
        self.sysm.log(event="failure", what=f"{what} {'dies' if down else 'comes back'}")
        cocotb.log.info("port of NIC %d: %s %s", self.nic, what, "down" if down else "up")


class Window:
    """What one NIC's port serves: its register window, and the simulation's control window."""

    def __init__(self, nic: NicRegisters, sim: SimControl):
        self.nic, self.sim = nic, sim

    def _for(self, addr: int):
        return self.sim if addr >= simctl.BASE else self.nic

    async def read(self, addr: int, width: int) -> int:
        return await self._for(addr).read(addr, width)

    async def write(self, addr: int, width: int, value: int) -> None:
        await self._for(addr).write(addr, width, value)


def _watch_stdin() -> threading.Event:
    """An event set when standard input ends: the command that started the simulation closed
    it, or is gone."""
    ended = threading.Event()

    def watch():
        while os.read(0, 4096):
            pass
        ended.set()
    threading.Thread(target=watch, daemon=True, name="stdin-watch").start()
    return ended


@cocotb.test()
async def serve(dut):
    p = params()
    share_lock()        # for the ports' threads: each access waits on it twice
    sc = SCENARIOS["clean"](planes=p["planes"], spines=p["spines"], width=p["width"])
    sysm = System(dut, p, sc, p["seed"])
    await sysm.start()
    base_rtt_us = await sysm.tune()          # as the system testbench's scenarios start
    bridges = [Bridge(Window(NicRegisters(h.regs.transport), SimControl(sysm, h.index)))
               for h in sysm.hosts]
    endpoints = []
    try:
        for bridge, port in zip(bridges, p["ports"], strict=True):
            endpoints.append(UdpEndpoint(MgmtServer(bridge), "127.0.0.1", port).start())
        ended = _watch_stdin()
        ready = {"ports": [e.address[1] for e in endpoints], "base_rtt_us": base_rtt_us,
                 "time_ns": get_sim_time("ns")}
        path = Path(p["ready"])      # written whole, then renamed: whoever waits reads it whole
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(ready))
        tmp.replace(path)
        cocotb.log.info("serving on ports %s", ready["ports"])
        while not ended.is_set():
            await ClockCycles(dut.clk, POLL_CYCLES)
            for bridge in bridges:
                await bridge.serve_queued()
    finally:
        for bridge in bridges:
            bridge.close()
        for e in endpoints:
            e.close()
        sysm.net.close()
        sysm.progress.close()
    cocotb.log.info("stopped at %.1f us; accesses served: %s", get_sim_time("ns") / 1000,
                    [b.served for b in bridges])
