"""cocotb tests of the pattern writer and checker against the host-memory model: the bytes the
writer leaves are sw/pattern.py's, and the checker counts exactly the bytes that are not."""

import random

import cocotb
from cocotbext.axi import AxiStreamFrame

from mrcnic.hdl.pattern_checker import check_result_layout
from mrcnic.hdl.pattern_writer import pattern_job_layout
from mrcnic.pattern import pattern_bytes
from mrcnic.verif.host_memory import HostMemory
from mrcnic.verif.layouts import decode, encode
from mrcnic.verif.tbkit import params, setup, sink, source

BASE, SIZE = 0x4000_0000, 64 * 1024


async def _start(dut, rng):
    await setup(dut)
    mem = HostMemory(dut, read="chk_mem", write="gen_mem", rng=rng, latency=(2, 12), gap=0.2,
                     backpressure=0.2)
    mem.map(BASE, SIZE)
    units = {u: (source(dut, f"{u}_start", rng, 0.3), sink(dut, f"{u}_done", rng, 0.3))
             for u in ("gen", "chk")}
    return mem, units


async def _job(units, unit, addr, length, seed):
    start, done = units[unit]
    await start.send(AxiStreamFrame(encode(pattern_job_layout(),
                                           {"addr": addr, "length": length, "seed": seed})))
    frame = await done.recv()
    return decode(check_result_layout(), frame.tdata) if unit == "chk" else frame.tdata[0] & 1


@cocotb.test()
async def the_writer_leaves_the_pattern_and_nothing_else(dut):
    p = params()
    rng = random.Random(p["seed"])
    mem, units = await _start(dut, rng)
    lanes = p["width"] // 8
    mirror = bytearray(SIZE)
    for _ in range(p["count"]):
        addr = BASE + rng.randrange(0, SIZE - 4096)
        length = rng.choice([1, 3, lanes - 1, lanes, lanes + 5, rng.randint(1, 4000)])
        seed = rng.getrandbits(32)
        error = await _job(units, "gen", addr, length, seed)
        assert error == 0, f"write {addr:#x}+{length}: refused"
        mirror[addr - BASE:addr - BASE + length] = pattern_bytes(seed, length)
    got = await mem.read_bytes(BASE, SIZE)
    at = next((k for k in range(SIZE) if got[k] != mirror[k]), None)
    assert at is None, (f"memory at {BASE + at:#x}: {got[at:at + 8].hex()}, expected "
                        f"{bytes(mirror[at:at + 8]).hex()}")
    # A region of no bytes writes nothing; one past the memory is refused.
    assert await _job(units, "gen", BASE, 0, 1) == 0
    assert await _job(units, "gen", BASE + SIZE - 8, 64, 1) == 1
    assert mem.writes == p["count"] + 1


@cocotb.test()
async def the_checker_counts_every_byte_that_differs(dut):
    p = params()
    rng = random.Random(p["seed"] + 1)
    mem, units = await _start(dut, rng)
    for _ in range(p["count"]):
        addr = BASE + rng.randrange(0, SIZE - 4096)
        length = rng.randint(1, 4000)
        seed = rng.getrandbits(32)
        region = bytearray(pattern_bytes(seed, length))
        for _ in range(rng.choice([0, 0, 1, 5, 50])):     # some bytes made wrong
            region[rng.randrange(length)] ^= rng.randrange(1, 256)
        await mem.write_bytes(addr, bytes(region))
        bad = sum(a != b for a, b in zip(region, pattern_bytes(seed, length), strict=True))
        got = await _job(units, "chk", addr, length, seed)
        assert got == {"bad": bad, "error": 0}, f"check {addr:#x}+{length}: {got}, {bad} bad"
    # The writer's region checks clean with its seed, and with another seed almost all bad.
    await _job(units, "gen", BASE + 3, 1000, 77)
    assert await _job(units, "chk", BASE + 3, 1000, 77) == {"bad": 0, "error": 0}
    other = await _job(units, "chk", BASE + 3, 1000, 78)
    assert other["bad"] == sum(a != b for a, b in zip(pattern_bytes(77, 1000),
                                                      pattern_bytes(78, 1000), strict=True))
    assert await _job(units, "chk", BASE, 0, 1) == {"bad": 0, "error": 0}
    assert (await _job(units, "chk", BASE + SIZE - 8, 64, 1))["error"] == 1
