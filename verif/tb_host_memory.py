"""cocotb test of the host-memory model through the NIC's port signals."""

import random

import cocotb
from cocotb.triggers import ClockCycles
from cocotbext.axi import AxiStreamFrame

from mrcnic.hdl.host_memory import ADDR_BITS, TAG_BITS
from mrcnic.verif.host_memory import HostMemory
from mrcnic.verif.tbkit import params, setup, sink, source

BASE, SIZE = 0x7F00_0000_0000, 64 * 1024
BROKEN = (BASE + 0x8000, 0x100)


def _request(addr, length, tag):
    return (addr | length << ADDR_BITS | tag << (ADDR_BITS + 32)).to_bytes(13, "little")


@cocotb.test()
async def reads_and_writes_follow_the_port_rules(dut):
    p = params()
    rng = random.Random(p["seed"])
    lanes = p["width"] // 8
    await setup(dut)
    mem = HostMemory(dut, rng=rng, latency=(3, 20), gap=0.3, backpressure=0.3)
    mem.map(BASE, SIZE)
    mem.fail(*BROKEN)
    mirror = bytearray(rng.randbytes(SIZE))
    await mem.write_bytes(BASE, bytes(mirror))

    def expect_error(addr, length):
        return (length == 0 or addr < BASE or addr + length > BASE + SIZE
                or (addr < BROKEN[0] + BROKEN[1] and BROKEN[0] < addr + length))

    # Reads: in order, byte-exact, tagged, errors where the rules say.
    req, rsp = source(dut, "rd_req"), sink(dut, "rd_data")
    reads = []
    for n in range(p["count"]):
        addr = BASE + rng.randrange(-64, SIZE)
        length = rng.choice([0, 1, lanes - 1, lanes, lanes + 1, rng.randint(1, 3000)])
        reads.append((addr, length, n & 0xFF))
        await req.send(AxiStreamFrame(_request(addr, length, n & 0xFF)))
    for addr, length, tag in reads:
        got = await rsp.recv()
        beats = -(-max(length, 1) // lanes)
        user = got.tuser if isinstance(got.tuser, list) else [got.tuser] * len(got.tdata)
        assert all(u & 0xFF == tag for u in user), f"read {addr:#x}+{length}: tag mismatch"
        err = expect_error(addr, length)
        assert all((u >> TAG_BITS) == err for u in user), f"read {addr:#x}+{length}: error flag"
        assert -(-len(got.tdata) // lanes) == beats
        if not err:
            assert bytes(got.tdata) == mirror[addr - BASE:addr - BASE + length]
    lo = min(e["answered"] - e["asked"] for e in mem.log if e["op"] == "read")
    assert lo >= 3, f"a read was answered after {lo} cycles, under the minimum latency"

    # Writes: placed byte-exact where allowed, refused (memory untouched) where not.
    wr, ack = source(dut, "wr"), sink(dut, "wr_ack")
    writes = []
    for _ in range(p["count"] // 2):
        addr = BASE + rng.randrange(-64, SIZE)
        data = rng.randbytes(rng.randint(1, 700))
        writes.append((addr, data))
        await wr.send(AxiStreamFrame(data, tuser=addr))
    for addr, data in writes:
        got = await ack.recv()
        err = expect_error(addr, len(data))
        assert bytes(got.tdata)[0] == err, f"write {addr:#x}+{len(data)}: ack {got.tdata[0]}"
        if not err:
            mirror[addr - BASE:addr - BASE + len(data)] = data
    await ClockCycles(dut.clk, 2)
    assert await mem.read_bytes(BASE, SIZE) == bytes(mirror)
    assert mem.errors > 0 and mem.reads == len(reads) and mem.writes == len(writes)
