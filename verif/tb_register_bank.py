"""cocotb test of the register bank, driven through the driver's register client."""

import cocotb
import pytest
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from mrcnic.hdl.csr_bus import Refusal
from mrcnic.regclient import AsyncRegisterClient, RegisterError, read_words, write_words
from mrcnic.regmap import MRCNIC_ID, MRCNIC_VERSION, REGISTERS, Access, by_name, plane_of
from mrcnic.verif.tbkit import CsrBus, params, setup


def _port(dut, r):
    return getattr(dut, r.port)


def _pattern(r):
    """A value that uses every word of the register and fits its width and limit."""
    v = sum(((0xA5A5_5A5A ^ r.offset ^ k) << (32 * k)) for k in range(r.words))
    v &= (1 << r.width) - 1
    return min(v, r.max_value) or 1


@cocotb.test()
async def registers_behave_as_the_map_says(dut):
    p = params()
    consts, limits = p["constants"], p["limits"]
    # The registers of planes the build lacks are not in it: they have no port.
    present = [r for r in REGISTERS if (plane_of(r) or 0) < p["planes"]]
    absent = [r for r in REGISTERS if r not in present]
    assert absent, "the build has every plane: nothing checks the absent planes' registers"
    await setup(dut)
    bus = CsrBus(dut)
    regs = AsyncRegisterClient(bus)
    for r in REGISTERS:
        if r.access is Access.CMD:
            getattr(dut, f"{r.port}_tready").value = 0

    # Identification and build parameters.
    assert await regs.read("global.id") == MRCNIC_ID
    assert await regs.read("global.version") == MRCNIC_VERSION
    for path, value in consts.items():
        assert await regs.read(path) == value, path

    # RW registers come up at their reset value, read back what is written, drive their port;
    # wide ones take every word.
    for r in present:
        if r.access is Access.RW:
            assert await regs.read(r.path) == r.reset, r.path
            value = min(_pattern(r), limits.get(r.path, r.max_value))
            await regs.write(r.path, value)
            assert await regs.read(r.path) == value, r.path
            assert int(_port(dut, r).value) == value, r.port

    # RO registers read what the gateware drives; a wide one reads as it was when its first
    # word was read, even if it moves in between.
    for r in present:
        if r.access is Access.RO and r.counts:
            # a counter's port is an increment: held for a few cycles, it counts that often
            step = (1 << r.counts) - 1 - (r.offset >> 2) % (1 << r.counts) // 2
            cycles = 3 + (r.offset >> 2) % 5
            _port(dut, r).value = step
            await ClockCycles(dut.clk, cycles)
            _port(dut, r).value = 0
            assert await regs.read(r.path) == step * cycles, r.path
        elif r.access is Access.RO and r.path != "global.bus_errors":
            value = _pattern(r)
            _port(dut, r).value = value
            await ClockCycles(dut.clk, 1)
            assert await regs.read(r.path) == value, r.path
    wide = next(r for r in present if r.access is Access.RO and r.words >= 2 and not r.counts)
    _port(dut, wide).value = 0x0000_0001_FFFF_FFFF
    await ClockCycles(dut.clk, 1)
    low = await bus.read(wide.offset)
    _port(dut, wide).value = 0x0000_0002_0000_0000       # the counter carries
    await ClockCycles(dut.clk, 1)
    high = await bus.read(wide.offset + 4)
    assert (high << 32 | low) == 0x0000_0001_FFFF_FFFF, f"{wide.path} read torn: {high:#x} {low:#x}"

    # The client refuses bad writes before they reach the bus...
    assert await regs.read("global.bus_errors") == 0
    for path, value in (("global.control", 2), ("global.id", 1), ("icrc.frames", 0),
                        ("qp.mtu", 5), ("ev.load", 3)):
        with pytest.raises(RegisterError):
            await regs.write(path, value)
    assert await regs.read("global.bus_errors") == 0

    # ...and the bank refuses them when they arrive anyway: nothing changes, each is counted.
    control = await regs.read("global.control")
    mtu = await regs.read("qp.mtu")
    refused = [
        (by_name("global.control").offset, 0xFFFF_FFFE),   # one bit wide
        (by_name("global.id").offset, 0),                   # CONST
        (by_name("icrc.frames").offset, 7),                 # RO
        (0xFFC, 7),                                         # nothing there
        (by_name("qp.mtu").offset, 5),                      # above the table's limit
        (by_name("qp.write").offset, limits["qp.write"] + 1),   # above the build's limit
        (by_name("ev.index").offset, limits["ev.index"] + 1),
        (by_name("tx.src_mac").offset + 4, 0x1_0000),       # the top word of a 48-bit register
    ]
    why = [Refusal.VALUE, Refusal.ACCESS, Refusal.ACCESS, Refusal.ADDRESS, Refusal.VALUE,
           Refusal.VALUE, Refusal.VALUE, Refusal.VALUE]
    for (offset, value), want in zip(refused, why, strict=True):
        await bus.write(offset, value)
        await RisingEdge(dut.clk)
        assert Refusal(int(dut.bus__refused.value)) is want, f"write {value:#x} at {offset:#x}"
    assert await bus.read(0xFFC) == 0                       # an unmapped read is refused too
    assert Refusal(int(dut.bus__refused.value)) is Refusal.ADDRESS
    assert await regs.read("global.control") == control
    assert await regs.read("global.id") == MRCNIC_ID
    assert await regs.read("qp.mtu") == mtu
    assert await regs.read("qp.write") == 0, "a refused command went out"
    errors = len(refused) + 1
    assert await regs.read("global.bus_errors") == errors

    # An absent plane's registers read 0 and refuse every write, counted.
    for r in absent:
        assert await regs.read(r.path) == 0, r.path
        if r.access is Access.RW:
            await bus.write(r.offset, 1)
            await RisingEdge(dut.clk)
            assert Refusal(int(dut.bus__refused.value)) is Refusal.ACCESS, r.path
            assert await regs.read(r.path) == 0, f"{r.path} took a write"
            errors += 1
    assert await regs.read("global.bus_errors") == errors

    # A command hands its value to the gateware and stays pending until taken; meanwhile it and
    # its block's registers refuse writes, so the staged fields cannot change under it.
    cmd = by_name("qp.write")
    await regs.write("qp.write", 2)
    await ClockCycles(dut.clk, 1)
    assert int(dut.qp_write_tvalid.value) == 1 and int(dut.qp_write_tdata.value) == 2
    assert await regs.read("qp.write") == 1
    staged = await regs.read("qp.dqp")
    await bus.write(by_name("qp.dqp").offset, staged ^ 1)
    await RisingEdge(dut.clk)
    assert Refusal(int(dut.bus__refused.value)) is Refusal.ACCESS, "a locked block's register"
    await bus.write(cmd.offset, 1)
    assert await regs.read("qp.dqp") == staged
    assert int(dut.qp_write_tdata.value) == 2
    errors += 2
    assert await regs.read("global.bus_errors") == errors
    await regs.write("tpl.block", 0x1234)                     # another block is not locked
    assert Refusal(int(dut.bus__refused.value)) is Refusal.NONE
    await ClockCycles(dut.clk, 3)
    dut.qp_write_tready.value = 1
    await ClockCycles(dut.clk, 1)
    dut.qp_write_tready.value = 0
    await ClockCycles(dut.clk, 1)
    assert int(dut.qp_write_tvalid.value) == 0
    assert await regs.read("qp.write") == 0
    await regs.write("qp.dqp", staged ^ 1)                    # unlocked again
    assert await regs.read("qp.dqp") == staged ^ 1

    # The client's command() waits until the gateware takes it.
    dut.qp_write_tready.value = 1
    await regs.command("qp.write", 3)
    assert await regs.read("global.bus_errors") == errors


@cocotb.test()
async def a_mem_register_is_words_of_block_ram(dut):
    await setup(dut)
    bus = CsrBus(dut)
    regs = AsyncRegisterClient(bus)
    mem = next(r for r in REGISTERS if r.access is Access.MEM)
    # zero after reset; each word read back as written, its neighbours untouched
    picks = (0, 1, mem.words // 2, mem.words - 2, mem.words - 1)
    assert await regs.run(read_words(mem.path, 0, 4)) == [0] * 4
    for k in picks:
        await bus.write(mem.offset + 4 * k, 0xC0DE_0000 | k)
    for k in picks:
        assert await bus.read(mem.offset + 4 * k) == 0xC0DE_0000 | k, k
    assert await bus.read(mem.offset + 8) == 0 and await bus.read(mem.offset + 4 * (mem.words - 3)) == 0
    # a whole span, as the store writes one, reads back word for word
    words = [(0x9E37_79B9 * (k + 1)) & 0xFFFF_FFFF for k in range(40)]
    await regs.run(write_words(mem.path, 100, words))
    assert await regs.run(read_words(mem.path, 100, 40)) == words
    # registers around it read as before, and no access was refused
    assert await regs.read("global.id") == MRCNIC_ID
    assert await regs.read("global.bus_errors") == 0
    # a word off its alignment is nothing: refused and counted, the RAM unchanged
    await bus.write(mem.offset + 2, 0xFFFF_FFFF)
    assert await bus.read(mem.offset + 2) == 0
    assert await bus.read(mem.offset) == 0xC0DE_0000
    assert await regs.read("global.bus_errors") == 2


@cocotb.test()
async def a_reset_returns_every_rw_register_to_its_reset_value(dut):
    # The RW registers read back from a copy in block RAM, which a reset does not clear: the
    # words written before it must read their reset values after it, as the storage does.
    p = params()
    await setup(dut)
    regs = AsyncRegisterClient(CsrBus(dut))
    rw = [r for r in REGISTERS if r.access is Access.RW and (plane_of(r) or 0) < p["planes"]]
    for r in rw:
        await regs.write(r.path, min(_pattern(r), p["limits"].get(r.path, r.max_value)))
    dut.rst.value = 1
    await ClockCycles(dut.clk, 2)
    dut.rst.value = 0
    await RisingEdge(dut.clk)
    for r in rw:
        assert await regs.read(r.path) == r.reset, r.path
        assert int(_port(dut, r).value) == r.reset, r.port
    # and written again, they read what was written
    r = by_name("tx.src_ip")
    await regs.write(r.path, 0x2001_0db8 << 96 | 7)
    assert await regs.read(r.path) == 0x2001_0db8 << 96 | 7


@cocotb.test()
async def a_late_register_reads_the_entry_its_selector_chose(dut):
    """ev.entry is read late: its input follows ev.index a cycle behind, as a block RAM read
    port addressed by it does, and a read right after the selector's write still sees the
    entry chosen, on every read of it and every word around it."""
    p = params()
    assert "ev.entry" in p["late"]
    await setup(dut)
    bus = CsrBus(dut)
    regs = AsyncRegisterClient(bus)

    def entry(index):
        return 0x5EED_0000 | index << 4

    async def read_port():
        while True:
            await ReadOnly()
            index = int(dut.ev_index.value)
            await RisingEdge(dut.clk)
            dut.ev_entry.value = entry(index)
    cocotb.start_soon(read_port())
    for index in (3, 7, 0, 15, 8, 8, 1):
        await regs.write("ev.index", index)
        assert await regs.read("ev.entry") == entry(index), index
        assert await regs.read("ev.entry") == entry(index), index
        assert await regs.read("ev.index") == index        # the word after it: its own
    # a read of it, then at once one of another register: each its own value
    await regs.write("ev.index", 5)
    got = [await bus.read(by_name("ev.entry").offset), await bus.read(by_name("ev.qp").offset)]
    assert got == [entry(5), 0]
    assert await regs.read("global.bus_errors") == 0
