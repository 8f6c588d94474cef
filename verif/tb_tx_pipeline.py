"""cocotb test of the whole TX pipeline inside the NIC, set up through its registers by the
driver: work requests in; on each plane, packets that equal, byte for byte (ICRC included), what
the reference sender and the EV mapping say for the EV the spray scheduler chose; payload read
from the host-memory model; the counters and management read and written as a host does."""

import random

import cocotb
import pytest
from cocotb.triggers import ClockCycles, with_timeout
from cocotbext.axi import AxiStreamFrame
from scapy.layers.l2 import Ether

from mrcnic import driver
from mrcnic import layers as L
from mrcnic.hdl.qp_context import SrMode
from mrcnic.hdl.segmenter import WrOpcode, WrStatus, completion_layout, work_request_layout
from mrcnic.hdl.spray_scheduler import EvState
from mrcnic.regclient import RegisterError
from mrcnic.regmap import by_name
from mrcnic.verif.layouts import decode, encode
from mrcnic.verif.packets import assert_frames_equal
from mrcnic.verif.tbkit import CsrBus, PcapTap, params, sink, source
from mrcnic.verif.tx_model import WriteRequest, segment
from mrcnic.verif.tx_setup import BASE, SRC_IP, configure, reference_frame, sent_ev


@cocotb.test()
async def tx_sends_what_the_reference_says(dut):
    p = params()
    rng = random.Random(p["seed"])
    Q, P, T = p["qps"], p["planes"], p["templates"]
    cfg = await configure(dut, p, rng, not_ready=(Q - 1,))
    layout, mem, templates, qps, modes, profiles = (cfg.layout, cfg.mem, cfg.templates, cfg.qps,
                                                    cfg.modes, cfg.profiles)

    # Work requests and what they must become.
    expected, errors = {}, []
    wr_src = source(dut, "wr")
    free = BASE
    for n in range(p["count"]):
        q = rng.randrange(Q)
        length = rng.choice([1, 100, qps[q].mtu, rng.randint(1, p["max_length"])])
        if rng.random() < 0.05:
            length = 0
        data = rng.randbytes(length)
        laddr, free = free, free + length + 64
        await mem.write_bytes(laddr, data) if length else None
        imm = rng.getrandbits(32) if rng.random() < 0.3 else None
        va, rkey = rng.getrandbits(48), rng.getrandbits(32)
        await wr_src.send(AxiStreamFrame(encode(work_request_layout(), {
            "wr_id": n, "qp": q, "opcode": WrOpcode.WRITE_IMM if imm is not None else
            WrOpcode.WRITE, "laddr": laddr, "va": va, "rkey": rkey, "length": length,
            "imm": imm or 0})))
        if length == 0:
            errors.append((n, WrStatus.ZERO_LENGTH))
        elif q == Q - 1:
            errors.append((n, WrStatus.QP_NOT_RTS))
        else:
            for _, pkt in segment(qps[q], WriteRequest(va, rkey, data, imm), lambda: 0):
                expected[(pkt[L.BTH].dqp, pkt[L.BTH].psn)] = (q, pkt)

    # Collect every plane.
    taps = [PcapTap(dut, f"plane{pl}", f"tx_plane{pl}") for pl in range(P)]
    sinks = [sink(dut, f"plane{pl}", rng, p["backpressure"]) for pl in range(P)]
    got = []

    async def collect(pl):
        while True:
            f = await sinks[pl].recv()
            got.append((pl, bytes(f.tdata)))

    for pl in range(P):
        cocotb.start_soon(collect(pl))
    # Every request completes once: with its error in request order, or (the reliability
    # engine being OFF, as no peer answers) OK once its last packet is sent.
    cl = completion_layout(Q)
    csink = sink(dut, "cpl")
    failed = {n for n, _ in errors}
    got_errors, got_ok = [], []
    for _ in range(p["count"]):
        c = decode(cl, (await with_timeout(csink.recv(), 200, "us")).tdata)
        if c["status"] == WrStatus.OK:
            got_ok.append(c["wr_id"])
        else:
            got_errors.append((c["wr_id"], c["status"]))
    assert got_errors == errors, f"error completions {got_errors}, expected {errors}"
    assert sorted(got_ok) == sorted(set(range(p["count"])) - failed), \
        f"OK completions {sorted(got_ok)}"
    for _ in range(200000):
        if len(got) >= len(expected):
            break
        await ClockCycles(dut.clk, 10)
    await ClockCycles(dut.clk, 20)
    assert len(got) == len(expected), f"{len(got)} packets left, {len(expected)} expected"

    seen = set()
    per_plane = {q: [0] * P for q in range(Q)}
    for k, (pl, frame) in enumerate(got):
        pkt = Ether(frame)
        key = (pkt[L.BTH].dqp, pkt[L.BTH].psn)
        assert key in expected, f"packet {k}: DQP {key[0]:#x} PSN {key[1]:#x} was never asked for"
        assert key not in seen, f"packet {k}: DQP {key[0]:#x} PSN {key[1]:#x} sent twice"
        seen.add(key)
        q, want = expected[key]
        ev = sent_ev(frame)
        assert ev in profiles[q], f"packet {k}: EV {ev:#x} is not in QP {q}'s profile"
        assert pl == layout.plane(ev), f"packet {k}: EV {ev:#x} is on plane " \
                                       f"{layout.plane(ev)}, left on plane {pl}"
        per_plane[q][pl] += 1
        assert_frames_equal(reference_frame(want, frame, templates[q % T], layout, modes[q],
                                            cfg.next_hops),
                            frame, f"packet {k} (QP {q}, plane {pl})")
    for q, counts in per_plane.items():
        if sum(counts) <= 1:
            continue
        if p["backpressure"]:
            # a port whose output stalls is passed over while another is free (the spray
            # scheduler's port_busy), so stalls at random unbalance the planes; none starves
            assert min(counts) >= sum(counts) // (2 * P), f"QP {q} planes unbalanced: {counts}"
        else:
            assert max(counts) - min(counts) <= 1 + sum(counts) // 8, \
                f"QP {q} planes unbalanced: {counts}"
    for t in taps:
        t.close()

    # The counters, read the way the host reads them.
    c = await cfg.regs.run(driver.tx_counters())
    assert c["requests"] == p["count"], c
    for status in (WrStatus.ZERO_LENGTH, WrStatus.QP_NOT_RTS):
        want = sum(1 for _, st in errors if st is status)
        assert c["errors"][status.name.lower()] == want, (status, c)
    for pl in range(P):
        frames = [f for q, f in got if q == pl]
        assert c["planes"][pl] == {"frames": len(frames), "bytes": sum(map(len, frames))}, \
            (pl, c["planes"][pl])


async def _send(wr, cfg, rng, q, length, wr_id=0):
    """Posts one WRITE of ``length`` random bytes on QP ``q`` to the source ``wr``."""
    data = rng.randbytes(length)
    await cfg.mem.write_bytes(BASE, data)
    await wr.send(AxiStreamFrame(encode(work_request_layout(), {
        "wr_id": wr_id, "qp": q, "opcode": WrOpcode.WRITE, "laddr": BASE,
        "va": 0x7000_0000, "rkey": 1, "length": length})))
    return data


async def _collect(dut, sinks, n, frames=False):
    """The planes and EVs (or with ``frames`` the frames) of the next ``n`` packets."""
    got = []

    async def one(pl):
        while True:
            f = bytes((await sinks[pl].recv()).tdata)
            got.append(f if frames else (pl, sent_ev(f)))

    tasks = [cocotb.start_soon(one(pl)) for pl in range(len(sinks))]
    for _ in range(100000):
        if len(got) >= n:
            break
        await ClockCycles(dut.clk, 10)
    for t in tasks:
        t.cancel()
    assert len(got) == n, f"{len(got)} packets, {n} expected"
    return got


@cocotb.test()
async def management_through_the_registers(dut):
    """DENIED, the plane enables and refused values, all through the register map."""
    p = params()
    rng = random.Random(p["seed"] + 1)
    Q, P = p["qps"], p["planes"]
    cfg = await configure(dut, p, rng, mtu_code=0, modes=(SrMode.USID,))
    regs, profile = cfg.regs, cfg.profiles[1]
    sinks = [sink(dut, f"plane{pl}") for pl in range(P)]
    wr = source(dut, "wr")

    # Deny all but two EVs of each plane: a long message uses exactly the others.
    keep = {i for i in range(len(profile)) if i // P < 2}
    for i in range(len(profile)):
        if i not in keep:
            await regs.run(driver.set_ev_state(1, i, EvState.DENIED))
    await _send(wr, cfg, rng, 1, 256 * 40)
    used = {ev for _, ev in await _collect(dut, sinks, 40)}
    assert used == {profile[i] for i in keep}, "DENIED EVs were used, or allowed ones were not"

    # Management lifts DENIED (the reliability engine cannot: see tb_reliability).
    await regs.run(driver.set_ev_state(1, P * 3, EvState.GOOD))
    await _send(wr, cfg, rng, 1, 256 * 40)
    used = {ev for _, ev in await _collect(dut, sinks, 40)}
    assert profile[P * 3] in used, "an EV management set GOOD again was not used"

    # A plane disabled in tx.plane_enable gets nothing.
    await regs.write("tx.plane_enable", 1)
    await _send(wr, cfg, rng, 0, 256 * 20)
    got = await _collect(dut, sinks, 20)
    assert {pl for pl, _ in got} == {0}, "a packet left on a disabled plane"
    await regs.write("tx.plane_enable", (1 << P) - 1)

    # Disabled, the NIC takes no work request; a new MAC address is taken up then, and only
    # then (a change while enabled waits for the next disable).
    await regs.run(driver.set_enabled(False))
    await regs.run(driver.set_addresses("02:00:00:00:00:aa", SRC_IP))
    pending = cocotb.start_soon(_send(wr, cfg, rng, 0, 256 * 4))
    await ClockCycles(dut.clk, 20)
    assert not int(dut.wr_tready.value), "a disabled NIC took a work request"
    await regs.run(driver.set_enabled(True))
    await pending
    await regs.run(driver.set_addresses("02:00:00:00:00:bb", SRC_IP))
    await _send(wr, cfg, rng, 0, 256 * 4)
    macs = {Ether(f).src for f in await _collect(dut, sinks, 8, frames=True)}
    assert macs == {"02:00:00:00:00:aa"}, f"source MACs {macs}"

    # Values the NIC does not have are refused: by the driver, and by the bank when they come
    # anyway; nothing changes.
    for program, match in ((driver.set_ev_state(Q, 0, EvState.GOOD), f"QP {Q} does not"),
                           (driver.configure_qp(0, driver.QpConfig(1, 0, 0, template=99)),
                            "template")):
        with pytest.raises(RegisterError, match=match):
            await regs.run(program)
    errors = await regs.read("global.bus_errors")
    bus = CsrBus(dut)
    await bus.write(by_name("qp.write").offset, Q)
    await bus.write(by_name("qp.template").offset, p["templates"])
    assert await regs.read("qp.write") == 0
    assert await regs.read("global.bus_errors") == errors + 2


@cocotb.test()
async def metered_ports_share_bytes_not_packets(dut):
    """Planes take packets in turn, so writes of one MTU and one byte put every full packet on
    one plane; with the ports metered (tx.port_rate), a port still sending its last full
    packet is passed over, and the bytes even out."""
    p = params()
    rng = random.Random(p["seed"] + 2)
    P, width = p["planes"], p["width"]
    cfg = await configure(dut, p, rng, mtu_code=0, modes=(SrMode.USID,))
    sinks = [sink(dut, f"plane{pl}") for pl in range(P)]
    wr = source(dut, "wr")
    mtu, writes = 256, 32

    async def plane_bytes():
        for _ in range(writes):
            await _send(wr, cfg, rng, 1, mtu + 1)
        per = [0] * P
        for f in await _collect(dut, sinks, 2 * writes, frames=True):
            per[cfg.layout.plane(sent_ev(f))] += len(f)
        return per

    unmetered = await plane_bytes()
    assert max(unmetered) > 2 * min(unmetered), \
        f"unmetered, writes of MTU + 1 bytes should load one plane: bytes per plane {unmetered}"
    # (each port at its share of the datapath's width / 8 bytes a cycle at 250 MHz; one
    # short frame may wait, so only the port the full ones overload is ever busy)
    await cfg.regs.run(driver.set_port_rate(width / 4 / P, 250, limit=mtu))
    metered = await plane_bytes()
    assert max(metered) < 1.5 * min(metered), \
        f"metered ports, bytes per plane {metered} (unmetered {unmetered})"
    await cfg.regs.run(driver.set_port_rate(0))
