"""cocotb tests of the RGMII MAC against cocotbext-eth's RGMII source and sink.

The source and sink are the real models: they put frames on the pins (preamble, SFD, FCS, the
gap) and take them off, edge by edge, as a PHY would. The MAC's core-clock side is driven and
watched through cocotbext-axi's stream models. Parameters: ``seed``, ``core_ns`` (the core
clock's period: 4 is 250 MHz, 16 is 62.5 MHz, a board's least), ``count`` (how many random
frames), ``max_frame`` and ``tx_depth`` (the build's).
"""

import itertools
import random
import struct
import zlib

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge, Timer
from cocotb.utils import get_sim_time
from cocotbext.eth import GmiiFrame, RgmiiSink, RgmiiSource

from mrcnic.hdl.eth_mac import MAC_COUNTERS
from mrcnic.verif.tbkit import params, sink, source
from mrcnic.wire import ETH_FCS_BYTES, ETH_IFG_BYTES, ETH_MIN_FRAME, ETH_PREAMBLE, ETH_SFD

PHY_NS = 8                        # 125 MHz: RGMII at 1 Gb/s
# Simulated time no test needs (at its regress volume too): a hang fails instead of running on.
TIMEOUT_MS = 50
MIN_DATA = ETH_MIN_FRAME - ETH_FCS_BYTES


class Mac:
    """The MAC under test with its models: ``phy_in`` puts frames on its RX pins, ``phy_out``
    takes them off its TX pins, ``rx`` collects what it delivers, ``tx`` hands it frames."""

    def __init__(self, dut, rng=None, rx_backpressure=0.0, tx_gap=0.0):
        self.dut = dut
        self.phy_in = RgmiiSource(dut.rgmii_rxd, dut.rgmii_rx_ctl, dut.eth_rx_clk)
        self.phy_out = RgmiiSink(dut.rgmii_txd, dut.rgmii_tx_ctl, dut.phy_tx_clk)
        for model in (self.phy_in, self.phy_out):
            model.log.setLevel("WARNING")
        self.rx = sink(dut, "rx", rng, rx_backpressure)
        self.tx = source(dut, "tx", rng, tx_gap)

    def counters(self) -> dict:
        return {n: int(getattr(self.dut, n).value) for n in MAC_COUNTERS}

    async def idle(self, phy_cycles=200):
        """Until nothing is moving: the models have sent everything and the pins were quiet
        for ``phy_cycles``."""
        while not (self.phy_in.empty() and self.tx.empty()):
            await ClockCycles(self.dut.eth_rx_clk, 16)
        await ClockCycles(self.dut.eth_rx_clk, phy_cycles)


async def start(dut, **models) -> Mac:
    p = params()
    cocotb.start_soon(Clock(dut.clk, int(p["core_ns"]), unit="ns").start())
    cocotb.start_soon(Clock(dut.eth_rx_clk, PHY_NS, unit="ns").start())
    cocotb.start_soon(Clock(dut.eth_tx_clk, PHY_NS, unit="ns").start())

    async def phy_clock():
        await Timer(PHY_NS // 4, unit="ns")      # the TX clock a quarter period late at the PHY
        await Clock(dut.phy_tx_clk, PHY_NS, unit="ns").start()
    cocotb.start_soon(phy_clock())
    dut.rgmii_rxd.value, dut.rgmii_rx_ctl.value = 0, 0
    for rst in (dut.rst, dut.eth_rx_rst, dut.eth_tx_rst):
        rst.value = 1
    await ClockCycles(dut.eth_rx_clk, 4)
    for rst in (dut.rst, dut.eth_rx_rst, dut.eth_tx_rst):
        rst.value = 0
    await ClockCycles(dut.eth_rx_clk, 4)
    return Mac(dut, **models)


def _bytes(rng, n) -> bytes:
    return rng.randbytes(n)


def _sizes(rng, count, max_frame, first=1):
    """Every size from ``first`` to ``first + count - 1`` bytes, then ``count`` more at random up
    to ``max_frame`` (and the largest itself)."""
    return list(range(first, first + count)) \
        + [rng.randint(first + count, max_frame) for _ in range(count)] + [max_frame]


def _wire(payload: bytes) -> GmiiFrame:
    """A frame as a sender puts it on the wire: padded to the least frame, with its FCS."""
    return GmiiFrame.from_payload(payload, min_len=MIN_DATA)


def _diff(got: bytes, want: bytes) -> str:
    pairs = enumerate(zip(got, want, strict=False))
    at = next((k for k, (a, b) in pairs if a != b), min(len(got), len(want)))
    return (f"{len(got)} bytes, expected {len(want)}; first difference at byte {at}: "
            f"got {got[at:at + 8].hex()} expected {want[at:at + 8].hex()}")


async def _received(mac: Mac, expected: list[bytes], what: str):
    for k, want in enumerate(expected):
        got = bytes((await mac.rx.recv()).tdata)
        assert got == want, f"{what}: frame {k}: {_diff(got, want)}"
    assert mac.rx.empty(), f"{what}: more frames delivered than the {len(expected)} good ones"


@cocotb.test(timeout_time=TIMEOUT_MS, timeout_unit="ms")
async def frames_of_every_size_arrive_whole(dut):
    """Received frames from 1 byte (padded by the sender) to the largest arrive without their FCS,
    byte for byte, and are counted with their bytes."""
    p = params()
    rng = random.Random(p["seed"])
    mac = await start(dut)
    sent = []
    # Frames shorter than the least arrive padded by their sender: two of them, then every
    # length from the least up.
    for n in [1, MIN_DATA - 1] + _sizes(rng, int(p["count"]), int(p["max_frame"]), MIN_DATA):
        payload = _bytes(rng, n)
        mac.phy_in.send_nowait(_wire(payload))
        sent.append(payload.ljust(MIN_DATA, b"\0"))
    await _received(mac, sent, "every size")
    await mac.idle()
    c = mac.counters()
    assert (c["rx_frames"], c["rx_bytes"]) == (len(sent), sum(map(len, sent))), c
    assert not any(v for k, v in c.items() if k.startswith("rx_") and k not in
                   ("rx_frames", "rx_bytes")), c


@cocotb.test(timeout_time=TIMEOUT_MS, timeout_unit="ms")
async def bad_frames_are_dropped_whole_and_counted(dut):
    """Between good frames: a bad FCS, a runt (a correct FCS over 40 bytes), RX_ER in mid-frame,
    a frame with no SFD, a frame one byte too long, a bare preamble, and a frame of two bytes
    after its SFD. Only the good frames arrive, and each bad one is counted by its reason."""
    p = params()
    rng = random.Random(p["seed"] + 1)
    max_frame = int(p["max_frame"])
    mac = await start(dut)
    good = []

    def send_good():
        payload = _bytes(rng, rng.randint(MIN_DATA, 300))
        mac.phy_in.send_nowait(_wire(payload))
        good.append(payload)

    def fcs_bad():
        f = _wire(_bytes(rng, 100))
        f.data[8 + rng.randrange(100)] ^= 1 << rng.randrange(8)
        return f

    def runt():
        payload = _bytes(rng, 40)
        return GmiiFrame.from_raw_payload(payload + struct.pack("<L", zlib.crc32(payload)))

    def rx_er():
        f = _wire(_bytes(rng, 100))
        f.error = [0] * len(f.data)
        f.error[8 + rng.randrange(100)] = 1
        return f

    def no_sfd():
        f = _wire(_bytes(rng, 100))
        f.data[7] = ETH_PREAMBLE           # the SFD becomes one more preamble byte
        f.data[8] = 0x12                   # and then something that is neither
        return f

    def bare_preamble():
        return GmiiFrame(bytes([ETH_PREAMBLE] * 7))

    def two_bytes():
        return GmiiFrame(bytes([ETH_PREAMBLE] * 7 + [ETH_SFD, 1, 2]))

    bad = [(fcs_bad, "rx_fcs_errors"), (runt, "rx_runts"), (rx_er, "rx_phy_errors"),
           (no_sfd, "rx_phy_errors"), (lambda: _wire(_bytes(rng, max_frame + 1)), "rx_oversize"),
           (bare_preamble, "rx_phy_errors"), (two_bytes, "rx_runts")]
    want = {n: 0 for n in MAC_COUNTERS}
    send_good()
    for make, counter in bad * 2:
        mac.phy_in.send_nowait(make())
        want[counter] += 1
        send_good()
    await _received(mac, good, "good frames among bad ones")
    await mac.idle()
    want["rx_frames"], want["rx_bytes"] = len(good), sum(map(len, good))
    got = mac.counters()
    assert got == want, "counters: " + ", ".join(f"{n} {got[n]} (expected {want[n]})"
                                                 for n in MAC_COUNTERS if got[n] != want[n])


@cocotb.test(timeout_time=TIMEOUT_MS, timeout_unit="ms")
async def sent_frames_are_framed_padded_and_checked(dut):
    """Frames of every size from 1 byte handed to the MAC leave with seven preamble bytes and the
    SFD, padded with zeros to 60 bytes, and with their FCS; none with RX_ER; counted."""
    p = params()
    rng = random.Random(p["seed"] + 2)
    mac = await start(dut)
    sizes = _sizes(rng, int(p["count"]), int(p["max_frame"]))
    payloads = [_bytes(rng, n) for n in sizes]
    for payload in payloads:
        await mac.tx.send(payload)
    for k, payload in enumerate(payloads):
        f = await mac.phy_out.recv()
        assert bytes(f.get_preamble()) == bytes([ETH_PREAMBLE] * 7 + [ETH_SFD]), \
            f"frame {k}: preamble {bytes(f.get_preamble()).hex()}"
        assert f.error is None, f"frame {k}: TX_ER during the frame"
        want = payload.ljust(MIN_DATA, b"\0")
        got = bytes(f.get_payload())
        assert got == want, f"frame {k} ({len(payload)} bytes): {_diff(got, want)}"
        assert f.check_fcs(), f"frame {k}: FCS {bytes(f.get_fcs()).hex()} is wrong"
    await mac.idle()
    c = mac.counters()
    assert (c["tx_frames"], c["tx_bytes"], c["tx_underruns"]) == \
        (len(payloads), sum(sizes), 0), c


@cocotb.test(timeout_time=TIMEOUT_MS, timeout_unit="ms")
async def back_to_back_at_line_rate_both_ways(dut):
    """Minimum and full-size frames back to back with the least gap, both ways at once: none
    lost, and the MAC sends with exactly the 12-byte gap, so at line rate, but where a frame
    cannot yet be in its send buffer whole: at the start, with a slow core clock, a long frame
    after a short one is still coming in when the short one has gone (the MAC stores a frame
    before sending it). Such a frame must start no later after it was handed over whole than
    the first frame did."""
    p = params()
    rng = random.Random(p["seed"] + 3)
    mac = await start(dut)
    n = 4 * int(p["count"])
    sizes = [rng.choice((MIN_DATA, MIN_DATA, 1500, rng.randint(MIN_DATA, 1500))) for _ in range(n)]
    payloads = [_bytes(rng, s) for s in sizes]
    for payload in payloads:
        mac.phy_in.send_nowait(_wire(payload))
    mac.phy_in.ifg = ETH_IFG_BYTES
    fed_ns = get_sim_time("ns")
    for payload in payloads:
        await mac.tx.send(payload)
    await _received(mac, payloads, "line rate in")
    out = [await mac.phy_out.recv() for _ in payloads]
    for k, (f, payload) in enumerate(zip(out, payloads, strict=True)):
        assert bytes(f.get_payload()) == payload and f.check_fcs(), f"frame {k} sent wrong"
    gaps = [(b.sim_time_start - a.sim_time_end) / 1000 for a, b in zip(out, out[1:], strict=False)]
    # When each frame was handed to the MAC whole, at the earliest: the core side takes a beat
    # a cycle (a cycle more a frame, for the source's turn between frames).
    lanes, core_ns = mac.tx.byte_lanes, p["core_ns"]
    handed = list(itertools.accumulate((-(-s // lanes) + 1) * core_ns for s in sizes))
    first = out[0].sim_time_start / 1000 - (fed_ns + handed[0])      # the MAC's own delay
    late = [(k, g, sizes[k], sizes[k + 1], out[k + 1].sim_time_start / 1000 - fed_ns
             - handed[k + 1]) for k, g in enumerate(gaps) if g != ETH_IFG_BYTES * PHY_NS]
    late = [x for x in late if x[1] < ETH_IFG_BYTES * PHY_NS or x[4] > first]
    assert not late, (
        f"gaps between frames sent other than {ETH_IFG_BYTES * PHY_NS} ns, with the next "
        f"frame in hand (after frame, ns, its bytes, the next's, the next's delay from being "
        f"handed over whole; the first's {first:.0f} ns): {late[:8]}")
    await mac.idle()
    c = mac.counters()
    assert (c["rx_frames"], c["rx_overflows"], c["tx_frames"], c["tx_underruns"]) == \
        (n, 0, n, 0), c


@cocotb.test(timeout_time=TIMEOUT_MS, timeout_unit="ms")
async def a_reader_that_stalls_loses_whole_frames_only(dut):
    """The core side takes a beat one cycle in ten: the buffer fills, and frames that find no
    room are dropped whole and counted as overflows; every frame delivered is one sent, in
    order, intact."""
    p = params()
    rng = random.Random(p["seed"] + 4)
    mac = await start(dut, rng=rng, rx_backpressure=0.97)   # about half the line's rate
    n = 3 * int(p["count"])
    payloads = [_bytes(rng, rng.randint(MIN_DATA, 1500)) for _ in range(n)]
    for payload in payloads:
        mac.phy_in.send_nowait(_wire(payload))
    await mac.idle()
    for _ in range(1000):                 # every frame decided; then the slow reader finishes
        c = mac.counters()
        if c["rx_frames"] + c["rx_overflows"] >= n and mac.rx.count() >= c["rx_frames"]:
            break
        await ClockCycles(dut.clk, 500)
    got = []
    while not mac.rx.empty():
        got.append(bytes(mac.rx.recv_nowait().tdata))
    c = mac.counters()
    at = 0
    for k, frame in enumerate(got):
        while at < n and payloads[at] != frame:
            at += 1
        assert at < n, f"delivered frame {k} ({len(frame)} bytes) is none of those sent, in order"
        at += 1
    assert c["rx_frames"] == len(got) and c["rx_frames"] + c["rx_overflows"] == n, c
    assert c["rx_overflows"] > 0, f"the reader never fell behind: {c}"


@cocotb.test(timeout_time=TIMEOUT_MS, timeout_unit="ms")
async def a_frame_that_outruns_its_sender_ends_with_tx_er(dut):
    """A frame longer than the send buffer goes cut-through; when its beats then come slower than
    the line, it ends with TX_ER (so the receiver drops it) and ``tx_underruns`` counts it; the
    frames after it go out whole."""
    p = params()
    rng = random.Random(p["seed"] + 5)
    mac = await start(dut, rng=rng, tx_gap=0.99)   # a beat every 100 core cycles at most
    big = _bytes(rng, 8 * int(p["tx_depth"]) + 200)
    await mac.tx.send(big)
    await mac.tx.wait()
    mac.tx.clear_pause_generator()
    mac.tx.pause = False                 # clearing the generator leaves its last value
    after = [_bytes(rng, 100), _bytes(rng, 1000)]
    for payload in after:
        await mac.tx.send(payload)
    f = await mac.phy_out.recv()
    assert f.error is not None and any(f.error), "the underrun frame left without TX_ER"
    assert len(f.get_payload()) < len(big), "the underrun frame left whole"
    for payload in after:
        f = await mac.phy_out.recv()
        assert f.error is None and bytes(f.get_payload()) == payload and f.check_fcs()
    await mac.idle()
    assert mac.counters()["tx_underruns"] == 1, mac.counters()
    await RisingEdge(dut.clk)
