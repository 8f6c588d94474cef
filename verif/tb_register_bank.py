"""cocotb test of the register bank, driven through the driver's own register client."""

import cocotb
import pytest
from cocotb.triggers import ClockCycles

from mrcnic.regclient import AsyncRegisterClient, RegisterError
from mrcnic.regmap import MRCNIC_ID, MRCNIC_VERSION, REGISTERS, Access
from mrcnic.verif.tbkit import CsrBus, params, setup


@cocotb.test()
async def registers_behave_as_the_map_says(dut):
    p = params()
    await setup(dut)
    bus = CsrBus(dut)
    regs = AsyncRegisterClient(bus)

    # Identification and build parameters.
    assert await regs.read("global.id") == MRCNIC_ID
    assert await regs.read("global.version") == MRCNIC_VERSION
    assert await regs.read("global.data_width") == p["data_width"]
    assert await regs.read("global.planes") == p["planes"]

    # RW registers come up at their reset value, read back what is written, drive their port.
    for r in REGISTERS:
        if r.access is Access.RW:
            assert await regs.read(r.path) == r.reset, r.path
            value = (0xA5A5_5A5A ^ r.offset) & ((1 << r.width) - 1) or 1
            await regs.write(r.path, value)
            assert await regs.read(r.path) == value, r.path
            assert int(getattr(dut, r.port).value) == value, r.port

    # RO registers read what the gateware drives.
    for r in REGISTERS:
        if r.access is Access.RO and r.path != "global.bus_errors":
            value = (0x1234_5678 + r.offset) & ((1 << r.width) - 1)
            getattr(dut, r.port).value = value
            await ClockCycles(dut.clk, 1)
            assert await regs.read(r.path) == value, r.path

    # The client refuses bad writes before they reach the bus...
    assert await regs.read("global.bus_errors") == 0
    for path, value in (("global.control", 2), ("global.id", 1), ("icrc.frames", 0)):
        with pytest.raises(RegisterError):
            await regs.write(path, value)
    assert await regs.read("global.bus_errors") == 0

    # ...and the bank refuses them when they arrive anyway: nothing changes, each is counted.
    control = await regs.read("global.control")
    await bus.write(0x014, 0xFFFF_FFFE)          # global.control is one bit wide
    await bus.write(0x000, 0)                   # global.id is CONST
    await bus.write(0x100, 7)                   # icrc.frames is RO
    await bus.write(0xFFC, 7)                   # nothing there
    assert await bus.read(0xFFC) == 0           # an unmapped read is refused too
    assert await regs.read("global.control") == control
    assert await regs.read("global.id") == MRCNIC_ID
    assert await regs.read("global.bus_errors") == 5
