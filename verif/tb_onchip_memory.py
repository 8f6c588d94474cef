"""cocotb test of the on-chip memory through its two ports: every read and write, at any
alignment, against a byte array holding what the memory should hold."""

import random

import cocotb
from cocotb.triggers import ClockCycles
from cocotbext.axi import AxiStreamFrame

from mrcnic.hdl.host_memory import ADDR_BITS, TAG_BITS
from mrcnic.verif.tbkit import params, setup, sink, source


def _request(addr, length, tag):
    return (addr | length << ADDR_BITS | tag << (ADDR_BITS + 32)).to_bytes(13, "little")


def _users(frame):
    return frame.tuser if isinstance(frame.tuser, list) else [frame.tuser] * len(frame.tdata)


@cocotb.test()
async def reads_and_writes_at_any_alignment(dut):
    p = params()
    rng = random.Random(p["seed"])
    lanes, base, size = p["width"] // 8, p["base"], p["size"]
    await setup(dut)
    req = source(dut, "rd__req", rng, 0.2)
    rsp = sink(dut, "rd__data", rng, 0.3)
    wr = source(dut, "wr__wr", rng, 0.2)
    ack = sink(dut, "wr__ack", rng, 0.3)
    mirror = bytearray(size)        # block RAM starts zeroed in simulation as on an FPGA
    errors = 0

    def addr_and_length(most):
        """Mostly inside, some across either end, lengths around the beat."""
        length = rng.choice([0, 1, lanes - 1, lanes, lanes + 1, rng.randint(1, most)])
        addr = base + rng.choice([rng.randrange(0, size), rng.randrange(-2 * lanes, 0),
                                  size - rng.randrange(0, 2 * lanes) - length // 2])
        return max(addr, 0), length

    async def write(addr, data):
        nonlocal errors
        await wr.send(AxiStreamFrame(data, tuser=addr))
        got = (await ack.recv()).tdata[0]
        lo, hi = max(addr, base), min(addr + len(data), base + size)
        err = addr < base or addr + len(data) > base + size
        if addr >= base and lo < hi:
            mirror[lo - base:hi - base] = data[lo - addr:hi - addr]
        assert got == err, f"write {addr:#x}+{len(data)}: ack error {got}, expected {int(err)}"
        errors += err

    async def check_read(frame, addr, length, tag):
        err = length == 0 or addr < base or addr + length > base + size
        users = _users(frame)
        beats = -(-max(length, 1) // lanes)
        assert -(-len(frame.tdata) // lanes) == beats, \
            f"read {addr:#x}+{length}: {len(frame.tdata)} bytes, expected {beats} beats"
        assert all(u & 0xFF == tag for u in users), f"read {addr:#x}+{length}: tag"
        assert all(u >> TAG_BITS == err for u in users), f"read {addr:#x}+{length}: error flag"
        if not err:
            want = bytes(mirror[addr - base:addr - base + length])
            got = bytes(frame.tdata)
            at = next((k for k, (x, y) in enumerate(zip(got, want, strict=True)) if x != y), -1)
            assert got == want, (f"read {addr:#x}+{length}: byte {at} is {got[at]:#04x}, "
                                 f"expected {want[at]:#04x}")
        return err

    # One at a time, writes and reads mixed, each read seeing every write before it.
    for n in range(p["count"]):
        addr, length = addr_and_length(600)
        if rng.random() < 0.5 and length:
            await write(addr, rng.randbytes(length))
        else:
            await req.send(AxiStreamFrame(_request(addr, length, n & 0xFF)))
            errors += await check_read(await rsp.recv(), addr, length, n & 0xFF)

    # Reads back to back: answered in order, one beat a cycle while the sink takes them.
    reads = [(*addr_and_length(3000), n & 0xFF) for n in range(p["count"])]
    for addr, length, tag in reads:
        await req.send(AxiStreamFrame(_request(addr, length, tag)))
    for addr, length, tag in reads:
        errors += await check_read(await rsp.recv(), addr, length, tag)
    await ClockCycles(dut.clk, 4)
    assert int(dut.errors.value) == errors and errors > 0, \
        f"errors counted {int(dut.errors.value)}, expected {errors}"
    assert int(dut.reads.value) + int(dut.writes.value) == 2 * p["count"], \
        f"reads {int(dut.reads.value)} + writes {int(dut.writes.value)}"


@cocotb.test()
async def a_read_streams_at_one_beat_a_cycle(dut):
    """An unaligned 4 KiB read, the sink always ready, takes its beats plus a few cycles."""
    p = params()
    lanes, base = p["width"] // 8, p["base"]
    await setup(dut)
    req, rsp = source(dut, "rd__req"), sink(dut, "rd__data")
    length = 4096
    await req.send(AxiStreamFrame(_request(base + 3, length, 7)))
    start = cocotb.utils.get_sim_time("ns")
    frame = await rsp.recv()
    cycles = (cocotb.utils.get_sim_time("ns") - start) / 4
    assert len(frame.tdata) == length
    assert cycles <= length // lanes + 12, f"{length // lanes} beats took {cycles:.0f} cycles"
