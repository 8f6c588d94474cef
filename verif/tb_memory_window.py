"""cocotb test of the memory window beside a busy datapath on one pair of memory ports (the
memory share): every window access moves exactly its bytes, at any alignment and length
0 .. MEM_WINDOW_BYTES; a refused one says so and reads zero; and the datapath's reads and
writes, interleaved with the window's, each get their own answers, in order, unchanged."""

import random

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge, RisingEdge
from cocotbext.axi import AxiStreamFrame

from mrcnic.hdl.host_memory import ADDR_BITS, TAG_BITS
from mrcnic.regmap import MEM_WINDOW_BYTES
from mrcnic.verif.host_memory import HostMemory
from mrcnic.verif.tbkit import params, setup, sink, source

BASE, SIZE = 0x7F00_0000_0000, 16 * 1024
DATAPATH = (BASE, SIZE // 2)          # the datapath reads and writes here
WINDOW = (BASE + SIZE // 2, SIZE // 2)   # the window here, so neither depends on the other's timing
BROKEN = (WINDOW[0] + 0x400, 0x40)


def _request(addr, length, tag):
    return (addr | length << ADDR_BITS | tag << (ADDR_BITS + 32)).to_bytes(13, "little")


class Window:
    def __init__(self, dut):
        self.dut = dut

    async def access(self, write: bool, addr: int, length: int, data: bytes = b"") -> tuple:
        """One access as a driver makes it; (rdata bytes, error)."""
        d = self.dut
        await RisingEdge(d.clk)
        d.addr.value, d.length.value = addr, length
        d.wdata.value = int.from_bytes(data.ljust(MEM_WINDOW_BYTES, b"\0"), "little")
        d.access_tdata.value, d.access_tvalid.value = int(write), 1
        while True:                   # pending until taken, as the command register shows
            await RisingEdge(d.clk)
            if int(d.access_tready.value):
                break
        d.access_tvalid.value = 0
        await FallingEdge(d.clk)
        await FallingEdge(d.clk)
        return (int(d.rdata.value).to_bytes(MEM_WINDOW_BYTES, "little"), int(d.error.value))


@cocotb.test(timeout_time=2, timeout_unit="ms")   # a misrouted answer hangs the checks
async def window_and_datapath_share_the_memory(dut):
    p = params()
    rng = random.Random(p["seed"])
    lanes = p["width"] // 8
    await setup(dut)
    dut.access_tvalid.value = 0
    mem = HostMemory(dut, rng=rng, latency=(3, 20), gap=0.2, backpressure=0.2)
    mem.map(BASE, SIZE)
    mem.fail(*BROKEN)
    mirror = bytearray(rng.randbytes(SIZE))
    await mem.write_bytes(BASE, bytes(mirror))

    # The datapath: a stream of reads and writes in its half, checked as they come back.
    req, rsp = source(dut, "rd_req", rng, 0.2), sink(dut, "rd_data", rng, 0.2)
    wr, ack = source(dut, "wr", rng, 0.2), sink(dut, "wr_ack", rng, 0.2)
    dp_mirror = bytearray(mirror[:DATAPATH[1]])

    async def datapath():
        for n in range(p["count"]):
            addr = DATAPATH[0] + rng.randrange(DATAPATH[1] - 600)
            if rng.random() < 0.5:
                length = rng.randint(1, 600)
                want = bytes(dp_mirror[addr - BASE:addr - BASE + length])
                await req.send(AxiStreamFrame(_request(addr, length, n & 0xFF)))
                got = await rsp.recv()
                user = got.tuser if isinstance(got.tuser, list) else [got.tuser]
                assert all(u & 0xFF == n & 0xFF for u in user), f"datapath read {n}: wrong tag"
                assert not any(u >> TAG_BITS for u in user), f"datapath read {n}: an error"
                assert bytes(got.tdata)[:length] == want, f"datapath read {n}: wrong bytes"
            else:
                data = rng.randbytes(rng.randint(1, 600))
                await wr.send(AxiStreamFrame(data, tuser=addr))
                assert bytes((await ack.recv()).tdata)[0] == 0, f"datapath write {n} refused"
                dp_mirror[addr - BASE:addr - BASE + len(data)] = data

    busy = cocotb.start_soon(datapath())
    win = Window(dut)
    win_mirror = bytearray(mirror[WINDOW[0] - BASE:])
    accesses = errors = 0
    lengths = [n for n in (0, 1, lanes - 1, lanes, lanes + 1, MEM_WINDOW_BYTES - 1,
                           MEM_WINDOW_BYTES) if n <= MEM_WINDOW_BYTES]
    while not busy.done() or accesses < 40:
        length = rng.choice(lengths + [rng.randint(0, MEM_WINDOW_BYTES)])
        off = rng.randrange(WINDOW[1] - MEM_WINDOW_BYTES)
        addr = WINDOW[0] + off
        refused = length > 0 and addr < BROKEN[0] + BROKEN[1] and BROKEN[0] < addr + length
        if rng.random() < 0.5:
            data = rng.randbytes(length)
            _, err = await win.access(True, addr, length, data)
            assert err == refused, f"write {addr:#x}+{length}: error {err}"
            if not refused:
                win_mirror[off:off + length] = data
        else:
            got, err = await win.access(False, addr, length)
            assert err == refused, f"read {addr:#x}+{length}: error {err}"
            want = bytes(MEM_WINDOW_BYTES) if refused else \
                bytes(win_mirror[off:off + length]).ljust(MEM_WINDOW_BYTES, b"\0")
            assert got == want, f"read {addr:#x}+{length}: {got.hex()} not {want.hex()}"
        accesses += 1
        errors += refused
    await busy
    await ClockCycles(dut.clk, 4)
    assert int(dut.errors.value) == errors
    assert await mem.read_bytes(BASE, SIZE) == bytes(dp_mirror + win_mirror), \
        "memory differs from what the datapath and the window wrote"
    assert errors and mem.writes > 10, "the test did not exercise refusals or writes"
