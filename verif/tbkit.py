"""cocotb-side helpers shared by the testbenches: clock and reset, cocotbext-axi stream models
with random gaps and back-pressure, a pcap tap on any stream, and the CSR bus driver."""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, RisingEdge
from cocotb.utils import get_sim_time
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamMonitor, AxiStreamSink, AxiStreamSource

from mrcnic.verif.harness import tb_params
from mrcnic.verif.pcap import Pcap

__all__ = ["params", "setup", "pauses", "source", "sink", "StreamSource", "StreamSink", "PcapTap",
           "run_dir", "CsrBus", "last_user", "recv_packet", "share_lock", "CLOCK_NS"]

CLOCK_NS = 4   # 250 MHz: the figure timestamps in pcaps and benches are given in


def params() -> dict:
    return tb_params()


def share_lock() -> float:
    """Lets a thread beside the simulation (a host tool's requests, a port's server) have the
    interpreter's lock within 0.1 ms: the simulation lets go of it only between its callbacks,
    and at Python's default switch interval (5 ms) such a thread could wait seconds for it after
    each reply. Returns the interval it replaces."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    return old


def run_dir() -> Path:
    return Path(os.environ.get("MRCNIC_RUN_DIR", "."))


async def setup(dut):
    """Starts the clock and applies reset."""
    cocotb.start_soon(Clock(dut.clk, CLOCK_NS, unit="ns").start())
    dut.rst.value = 1
    await ClockCycles(dut.clk, 3)
    dut.rst.value = 0
    await RisingEdge(dut.clk)


def pauses(rng: random.Random, probability: float):
    """A pause generator for cocotbext-axi: True (pause) with the given probability each cycle."""
    while True:
        yield rng.random() < probability


def _present(bus) -> dict[str, bool]:
    """Which of the AXI-stream signals besides ``tdata`` a bus has."""
    return {n: hasattr(bus, n) for n in ("tready", "tvalid", "tlast", "tkeep", "tid", "tdest",
                                         "tuser")}


class StreamSource(AxiStreamSource):
    """cocotbext-axi's AXI-stream source, packing each beat with whole-word operations rather
    than a Python loop over its byte lanes, and writing a signal only when it changes: the same
    protocol (handshake, pause, reset) and the same beats on the wire."""

    async def _run(self):
        frame, at = None, 0
        self.active = False
        bus = self.bus
        has = _present(bus)
        lanes, size, mask = self.byte_lanes, self.byte_size, self.byte_mask
        # What this source drives, so that a signal is written only when it changes (reset
        # ends this loop and drives its own values; a new loop starts from unknown).
        driven = {}

        def drive(name, value):
            if has.get(name, True) and driven.get(name) != value:
                driven[name] = value
                getattr(bus, name).value = value

        edge = RisingEdge(self.clock)
        while True:
            await edge
            tready = (not has["tready"]) or bus.tready.value
            tvalid = (not has["tvalid"]) or bus.tvalid.value
            if not ((tready and tvalid) or not tvalid):
                continue
            if not frame and not self.queue.empty():
                frame = self.queue.get_nowait()
                self.dequeue_event.set()
                self.queue_occupancy_bytes -= len(frame)
                self.queue_occupancy_frames -= 1
                self.current_frame = frame
                frame.sim_time_start = get_sim_time()
                frame.sim_time_end = None
                self.log.info("TX frame: %s", frame)
                frame.normalize()
                self.active = True
                at = 0
            if frame and not self.pause:
                n = min(lanes, len(frame.tdata) - at)
                beat = frame.tdata[at:at + n]
                if size == 8:
                    data = int.from_bytes(bytes(beat), "little")
                else:
                    data = sum((b & mask) << (i * size) for i, b in enumerate(beat))
                keep = sum((k & 1) << i for i, k in enumerate(frame.tkeep[at:at + n]))
                last_lane = at + n - 1          # tid, tdest and tuser: the beat's last lane's
                sideband = {"tid": frame.tid[last_lane], "tdest": frame.tdest[last_lane],
                            "tuser": frame.tuser[last_lane]}
                at += n
                last = at >= len(frame.tdata)
                if last:
                    frame.sim_time_end = get_sim_time()
                    frame.handle_tx_complete()
                    frame = None
                    self.current_frame = None
                drive("tdata", data)
                drive("tvalid", 1)
                drive("tlast", int(last))
                drive("tkeep", keep)
                for name, value in sideband.items():
                    drive(name, value)
            else:
                drive("tvalid", 0)
                drive("tlast", 0)
                self.active = bool(frame)
                if not frame and self.queue.empty():
                    self.idle_event.set()
                    self.active_event.clear()
                    await self.active_event.wait()


def source(dut, prefix, rng=None, gap=0.0):
    src = StreamSource(AxiStreamBus.from_prefix(dut, prefix), dut.clk, dut.rst)
    src.log.setLevel("WARNING")
    if rng is not None and gap > 0:
        src.set_pause_generator(pauses(rng, gap))
    return src


class StreamSink(AxiStreamSink):
    """cocotbext-axi's AXI-stream sink, taking each beat with one read of each signal.

    The model it extends reads ``tdata``, ``tkeep`` and ``tuser`` again for every byte lane of
    every beat, and every such read builds a LogicArray: that was half the wall time of the
    system simulations. This loop keeps the model's protocol (handshake, pause, reset, queue
    limits) and the frames it makes, reads each signal once a beat, and writes ``tready`` only
    when it changes."""

    async def _run(self):
        frame = None
        self.active = False
        bus = self.bus
        has = _present(bus)
        lanes, size, mask = self.byte_lanes, self.byte_size, self.byte_mask
        all_kept = [1] * lanes
        edge = RisingEdge(self.clock)
        wake = self.wake_event.wait()
        # What this sink drives on tready, remembered rather than read back every cycle: unknown
        # when the loop starts (after reset, or with a write of the sink's set-up still on its
        # way), so sampled then, and written whatever it was.
        ready = None
        while True:
            pause_sample = bool(self.pause)
            await edge
            tready = (not has["tready"]) or (bus.tready.value if ready is None else ready)
            tvalid = (not has["tvalid"]) or bus.tvalid.value
            if tready and tvalid:
                if not frame:
                    frame = AxiStreamFrame(bytearray() if size == 8 else [], [], [], [], [])
                    frame.sim_time_start = get_sim_time()
                    self.active = True
                data = int(bus.tdata.value)
                if size == 8:
                    frame.tdata.extend(data.to_bytes(lanes, "little"))
                else:
                    frame.tdata.extend((data >> (i * size)) & mask for i in range(lanes))
                if has["tkeep"]:
                    keep = int(bus.tkeep.value)
                    frame.tkeep.extend(all_kept if keep == (1 << lanes) - 1
                                       else [(keep >> i) & 1 for i in range(lanes)])
                for name in ("tid", "tdest", "tuser"):
                    if has[name]:
                        getattr(frame, name).extend([int(getattr(bus, name).value)] * lanes)
                if not has["tlast"] or bus.tlast.value:
                    frame.sim_time_end = get_sim_time()
                    self.log.info("RX frame: %s", frame)
                    self.queue_occupancy_bytes += len(frame)
                    self.queue_occupancy_frames += 1
                    self.queue.put_nowait(frame)
                    self.active_event.set()
                    frame = None
            else:
                self.active = bool(frame)
            if has["tready"]:
                paused = self.full() or pause_sample
                if ready != (not paused):
                    ready = not paused
                    bus.tready.value = ready
                if (not tvalid or paused) and pause_sample == bool(self.pause):
                    self.wake_event.clear()
                    await wake
            elif not tvalid:
                self.wake_event.clear()
                await wake


def sink(dut, prefix, rng=None, backpressure=0.0):
    snk = StreamSink(AxiStreamBus.from_prefix(dut, prefix), dut.clk, dut.rst)
    snk.log.setLevel("WARNING")
    if rng is not None and backpressure > 0:
        snk.set_pause_generator(pauses(rng, backpressure))
    return snk


async def recv_packet(snk):
    """The next frame a sink collects, dissected by scapy (MRC layers bound)."""
    from scapy.layers.l2 import Ether

    from mrcnic import layers  # noqa: F401
    return Ether(bytes((await snk.recv()).tdata))


def last_user(frame) -> int:
    """The tuser value of a received frame's last byte (the verdict bits of a checked stream)."""
    u = frame.tuser
    return int(u[-1] if isinstance(u, list) else (u or 0))


class PcapTap:
    """Watches a stream and writes every frame on it to ``<run dir>/<name>.pcap``, stamped with
    simulated time."""

    def __init__(self, dut, prefix, name=None):
        self.monitor = AxiStreamMonitor(AxiStreamBus.from_prefix(dut, prefix), dut.clk, dut.rst)
        self.monitor.log.setLevel("WARNING")
        self.path = run_dir() / f"{name or prefix}.pcap"
        self.writer = Pcap(self.path, sync=True)     # readable even if the test fails
        self.frames = 0
        cocotb.start_soon(self._run())

    async def _run(self):
        while True:
            frame = await self.monitor.recv()
            self.writer.write(frame.tdata, cocotb.utils.get_sim_time("ns"))
            self.frames += 1

    def close(self):
        self.writer.close()


class CsrBus:
    """Drives the register bank's CSR bus (see docs/registers.md for its timing)."""

    def __init__(self, dut, prefix="bus"):
        self.clk = dut.clk
        g = lambda n: getattr(dut, f"{prefix}__{n}")  # noqa: E731
        self.addr, self.r_stb, self.r_data = g("addr"), g("r_stb"), g("r_data")
        self.w_stb, self.w_data = g("w_stb"), g("w_data")
        self.r_stb.value = 0
        self.w_stb.value = 0

    async def read(self, offset: int) -> int:
        self.addr.value = offset
        self.r_stb.value = 1
        await RisingEdge(self.clk)
        self.r_stb.value = 0
        await RisingEdge(self.clk)
        return int(self.r_data.value)

    async def write(self, offset: int, value: int) -> None:
        self.addr.value = offset
        self.w_data.value = value
        self.w_stb.value = 1
        await RisingEdge(self.clk)
        self.w_stb.value = 0



class StreamRules:
    """Watches a stream for the one rule sinks cannot see: once a beat is offered (valid) and not
    taken, it stays offered, unchanged, until it is. ``violations`` lists the cycles it broke."""

    def __init__(self, dut, prefix):
        self.sigs = [getattr(dut, f"{prefix}_{n}") for n in ("tdata", "tkeep", "tlast", "tuser")
                     if hasattr(dut, f"{prefix}_{n}")]
        self.valid, self.ready = getattr(dut, f"{prefix}_tvalid"), getattr(dut, f"{prefix}_tready")
        self.clk, self.prefix = dut.clk, prefix
        self.violations = []
        self.waits = 0          # cycles a beat waited: a test with none did not exercise this
        self._task = cocotb.start_soon(self._watch())

    @staticmethod
    def _bit(sig) -> int:
        try:
            return int(sig.value)
        except ValueError:      # X or Z before reset ends: not a handshake
            return 0

    async def _watch(self):
        held, cycle = None, 0
        while True:
            # Mid-cycle everything is settled for the next rising edge, whose handshake it shows.
            await FallingEdge(self.clk)
            cycle += 1
            v, r = self._bit(self.valid), self._bit(self.ready)
            now = tuple(str(x.value) for x in self.sigs)
            if held is not None and (not v or now != held):
                self.violations.append(cycle)
            held = now if v and not r else None
            self.waits += held is not None

    def check(self):
        if self._task.done():
            self._task.result()     # the watcher itself failed: say so rather than pass
            raise AssertionError(f"{self.prefix}: the stream-rule watcher stopped")
        self._task.cancel()
        cocotb.log.info("%s: %d cycles a beat waited", self.prefix, self.waits)
        assert not self.violations, (f"{self.prefix}: a beat offered and not taken changed or "
                                     f"went away at cycles {self.violations[:5]}")


class StallCounter:
    """Counts the cycles a stream offers a beat that is not taken (the input held up)."""

    def __init__(self, dut, prefix):
        self.valid, self.ready = getattr(dut, f"{prefix}_tvalid"), getattr(dut, f"{prefix}_tready")
        self.clk, self.stalls = dut.clk, 0
        self._task = cocotb.start_soon(self._watch())

    async def _watch(self):
        while True:
            await RisingEdge(self.clk)
            self.stalls += int(self.valid.value) and not int(self.ready.value)

    def stop(self) -> int:
        self._task.cancel()
        return self.stalls
