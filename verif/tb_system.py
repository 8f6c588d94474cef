"""cocotb end-to-end test: NICs (the whole gateware, each with its host memory) exchanging MRC
writes over the timed multi-plane network of verif/network.py, in a named scenario. Every
byte written must land, byte-exact, and every message complete exactly once on both sides;
the run's figures (goodput, retransmissions, EV states, traffic per path over time, failover
time) go to ``results.json`` in the run's output directory for the demo and the benches."""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import cocotb
from cocotb.triggers import ClockCycles, Timer
from cocotb.utils import get_sim_time
from cocotbext.axi import AxiStreamFrame

from mrcnic import driver, wire
from mrcnic.evmap import EvLayout
from mrcnic.hdl.rx_event import completion_layout as rx_completion_layout
from mrcnic.hdl.segmenter import WrOpcode, WrStatus, completion_layout, work_request_layout
from mrcnic.hdl.spray_scheduler import EvState
from mrcnic.regclient import AsyncRegisterClient
from mrcnic.regmap import RX_OUTCOMES
from mrcnic.simctl import RECV_BASE, REGION, SEND_BASE, profile_paths
from mrcnic.transports import transport
from mrcnic.verif.fabric import (
    FORMATS,
    frame_ev,
    host_usid,
    ip_offsets,
    nic_ip,
    nic_mac,
    port_mac,
    sid,
    template,
)
from mrcnic.verif.host_memory import HostMemory
from mrcnic.verif.layouts import decode, encode
from mrcnic.verif.network import Network, tc_of
from mrcnic.verif.scenarios import SCENARIOS, Scenario
from mrcnic.verif.tbkit import CLOCK_NS, CsrBus, params, run_dir, setup, sink, source

DATA_OPCODES = {int(op) for op in wire.DATA_OPCODES}


def frame_bth(frame: bytes) -> dict:
    """A frame's BTH fields, and ``inner``: where its inner IPv6 header starts."""
    _, inner = ip_offsets(frame)
    bth = wire.BTH.unpack(frame[inner + wire.IPV6.length + wire.UDP.length:])
    return {**bth, "inner": inner}


def frame_ts(frame: bytes, bth: dict) -> int | None:
    """A data frame's TSETH send time (the NIC's 16-bit timestamp counter), or None."""
    if bth["opcode"] not in wire.DATA_OPCODES or not bth["tsh"]:
        return None
    at = bth["inner"] + wire.IPV6.length + wire.UDP.length + wire.BTH.length
    for h in wire.headers_after_bth(bth["opcode"], True):
        if h is wire.TSETH:
            return wire.TSETH.unpack(frame[at:])["tx_timestamp"]
        at += h.length
    raise AssertionError("a data frame's headers name no TSETH")


@dataclass
class Message:
    src: int                 # host
    qp: int
    wr_id: int
    data: bytes
    laddr: int
    va: int
    dst: int
    posted_ns: float = 0.0
    done_ns: float | None = None


@dataclass
class Host:
    """One NIC and what its host does with it."""
    index: int
    regs: AsyncRegisterClient
    mem: HostMemory
    wr: object
    cpl: object
    rx_cpl: object
    completions: list = field(default_factory=list)       # (wr_id, status, time)
    received: list = field(default_factory=list)          # (qp, msn)
    sent: list = field(default_factory=list)     # (ns, plane, EV, opcode, dqp, rtx, TSETH time)
    sent_bytes: list = field(default_factory=list)   # the length of each frame in ``sent``
    arrived: list = field(default_factory=list)  # whole data frames in: (ns, dqp, rtx, bytes)
    delivered: list = field(default_factory=list)  # every frame: (opcode, its trim's DSCP or 0)
    rx: list = field(default_factory=list)       # its ports' sources, a plane each


class System:
    def __init__(self, dut, p, sc: Scenario, seed: int):
        self.dut, self.p, self.sc, self.seed = dut, p, sc, seed
        self.rng = random.Random(seed)
        self.P, self.S, self.Q, self.E = p["planes"], p["spines"], p["qps"], p["evs"]
        # QP q of host h talks to QP q of host peers[h][q]
        self.peers = [sc.peers(h) for h in range(sc.hosts)]
        for h, qps in enumerate(self.peers):
            assert wire.PROBE_DQP not in qps and max(qps) < self.Q, (h, qps)
            assert all(self.peers[d].get(q) == h for q, d in qps.items()), (h, qps)
        assert p["templates"] >= sc.hosts, "a template per destination host"
        self.layout = EvLayout(self.P, self.S)
        self.out = Path(p.get("out") or run_dir())
        self.out.mkdir(parents=True, exist_ok=True)
        pcaps = self.out / "pcap" if p.get("pcaps", True) else None
        # The route format (verif/fabric.py's FORMATS); the network: the model, or Linux's.
        self.block, self.block_bits = FORMATS[p.get("format", "F3216")]
        if p.get("linux"):
            from mrcnic.verif.linux_net import LinuxNetwork
            self.net = LinuxNetwork(p["linux"])
            assert (self.net.block, self.net.block_bits) == (self.block, self.block_bits)
        else:
            self.net = Network(self.P, self.S, sc.hosts, link_cfg=sc.link, seed=seed,
                               pcap_dir=pcaps, ev_of=frame_ev, block=self.block,
                               block_bits=self.block_bits)
        self.hosts: list[Host] = []
        self.messages: dict[tuple, Message] = {}
        self.profiles: dict[tuple, list[int]] = {}     # (host, QP) -> its EVs, as loaded
        self.transport = transport(sc.transport)
        self.single_paths: dict[tuple, int] = {}       # (host, QP) -> its path, single-path
        self.progress = open(self.out / "progress.jsonl", "w", buffering=1)
        self.landed = 0                           # payload bytes arrived, each PSN once
        self.seen: set = set()
        self.t0 = 0.0
        self.read_ns = {}                         # label: (host, QP): (first, last read) ns
        self.ts_origin_ns = 0
        self.free_send: dict[int, int] = {}       # the next free address of each send buffer
        self.free_recv: dict[tuple, int] = {}     # ...and of each (host, QP) receive region

    def log(self, **kw):
        """A line of progress for whoever follows the run, its time from the first post."""
        kw["t_us"] = round((get_sim_time("ns") - self.t0) / 1000, 3)
        self.progress.write(json.dumps(kw) + "\n")

    async def start(self):
        dut, P = self.dut, self.P
        await setup(dut)
        # The NICs' 16-bit cycle counts (the TSETH stamps) read 0 a cycle before reset ended.
        self.ts_origin_ns = round(get_sim_time("ns")) - CLOCK_NS
        for h in range(self.sc.hosts):
            pre = f"nic{h}__"
            getattr(dut, f"{pre}port_ready").value = (1 << P) - 1
            mem = HostMemory(dut, read=f"{pre}mem", write=f"{pre}rx_mem", rng=self.rng,
                             latency=(8, 16))
            mem.map(SEND_BASE, 1 << 24)
            for q in range(self.Q):
                mem.map(RECV_BASE + q * REGION, REGION)
            host = Host(h, AsyncRegisterClient(CsrBus(dut, f"{pre}bus")), mem,
                        source(dut, f"{pre}wr"), sink(dut, f"{pre}cpl"), sink(dut, f"{pre}rx_cpl"))
            self.hosts.append(host)
            for pl in range(P):
                rx = source(dut, f"{pre}rx_plane{pl}")
                host.rx.append(rx)
                self.net.attach(h, pl, lambda f, rx=rx, host=host: self._arrive(host, rx, f),
                                mac=driver.mac_int(nic_mac(h)))
                cocotb.start_soon(self._transmit(host, pl, sink(dut, f"{pre}plane{pl}")))
            cocotb.start_soon(self._completions(host))
            cocotb.start_soon(self._receptions(host))
        for host in self.hosts:
            await self._configure(host)
        for host in self.hosts:
            await host.regs.run(driver.set_enabled(True))

    def _arrive(self, host, rx, frame):
        bth = frame_bth(frame)
        op, dqp, inner = bth["opcode"], bth["dqp"], bth["inner"]
        dscp = tc_of(frame) >> 2
        trimmed = dscp if dscp in wire.TRIMMED_CLASSES else 0    # which trim, if one
        host.delivered.append((op, trimmed))
        if op in DATA_OPCODES and not trimmed:
            host.arrived.append((get_sim_time("ns"), dqp, bth["rtx"], len(frame)))
            # Payload bytes as they land: each PSN's first whole arrival.
            key = (host.index, dqp, bth["psn"])
            if key not in self.seen:
                self.seen.add(key)
                udp_len = int.from_bytes(frame[inner + 44:inner + 46], "big")
                ext = sum(h.length for h in wire.headers_after_bth(op, bool(bth["tsh"])))
                self.landed += (udp_len - wire.UDP.length - wire.BTH.length - ext
                                - wire.ICRC_BYTES)
        rx.send_nowait(AxiStreamFrame(frame))

    async def _transmit(self, host, pl, snk):
        while True:
            frame = bytes((await snk.recv()).tdata)
            bth = frame_bth(frame)
            host.sent_bytes.append(len(frame))
            host.sent.append((get_sim_time("ns"), pl, frame_ev(frame), bth["opcode"],
                              bth["dqp"], bth["rtx"], frame_ts(frame, bth)))
            self.net.inject(host.index, pl, frame)

    async def _completions(self, host):
        while True:
            c = decode(completion_layout(self.Q), (await host.cpl.recv()).tdata)
            now = get_sim_time("ns")
            host.completions.append((c["wr_id"], WrStatus(c["status"]), now))
            m = self.messages.get((host.index, c["wr_id"]))
            if m is not None and m.done_ns is None:
                m.done_ns = now
            self.log(event="completion", host=host.index, wr_id=c["wr_id"],
                     status=WrStatus(c["status"]).name)

    async def _receptions(self, host):
        while True:
            c = decode(rx_completion_layout(self.Q), (await host.rx_cpl.recv()).tdata)
            host.received.append((c["qp"], c["msn"]))

    def peer_of(self, h, q):
        """QP ``q`` of host ``h`` talks to QP ``q`` of this host."""
        return self.peers[h][q]

    async def _configure(self, host):
        h, regs = host.index, host.regs
        await regs.run(driver.identify())
        await regs.run(driver.set_addresses(nic_mac(h), nic_ip(h)))
        # Each plane: frames go to the leaf's port; the routes end at this NIC's own uSID.
        for pl in range(self.P):
            leaf = ("leaf", pl, h)
            next_hop = (self.net.leaf_mac(h, pl) if hasattr(self.net, "leaf_mac")
                        else port_mac(leaf, ("host", pl, h)))
            await regs.run(driver.set_plane_addresses(
                pl, next_hop=next_hop, sid=sid(host_usid(pl, h), self.block, self.block_bits)))
        for d in range(self.sc.hosts):
            await regs.run(driver.write_template(d, template(h, d, self.block, self.block_bits)))
        for q, peer in self.peers[h].items():
            await regs.run(driver.configure_qp(q, driver.QpConfig(
                dqp=q, dst_mac=nic_mac(peer), dst_ip=nic_ip(peer), template=peer,
                mtu=self.sc.mtu, next_psn=self._psn(h, peer, q), msn=self._msn(h, peer, q),
                rkey=0x100 + q, mr_va=RECV_BASE + q * REGION, mr_length=REGION,
                rx_psn=self._psn(peer, h, q), rx_msn=self._msn(peer, h, q))))
            paths = profile_paths(nic_ip(h), nic_ip(peer), q, self.E, self.P, self.S,
                                  self.transport.single_path)
            evs = [self.layout.make(pl, sp, self._entropy(h, q, i))
                   for i, (pl, sp) in enumerate(paths)]
            if self.transport.single_path:
                # One EV, on the path a hash of the flow gives, at the first entry of its plane.
                plane, spine = paths[0]
                self.single_paths[(h, q)] = spine * self.P + plane
                await regs.run(driver.clear_ev_profile(q))
                await regs.run(driver.replace_ev(q, plane, evs[0], self.layout))
                self.profiles[(h, q)] = [0] * plane + evs
            else:
                # Entry i on plane i % planes, spines in turn: every path, the same share.
                self.profiles[(h, q)] = await regs.run(driver.load_ev_profile(q, evs,
                                                                                self.layout))
            # the NIC's table, read back, is the profile as the driver ordered it
            table = await regs.run(driver.ev_table(q))
            assert table == self.profiles[(h, q)], (
                f"NIC {h} QP {q}: table read back {[hex(v) for v in table]}, loaded "
                f"{[hex(v) for v in self.profiles[(h, q)]]}")
        t = self.transport
        await regs.run(driver.set_reliability(t.rel_mode, ev_health=t.ev_health,
                                              **self.sc.reliability))
        await regs.run(driver.set_spray(t.spray))
        await regs.run(driver.set_ack_policy(*self.sc.ack_policy))
        # the model network takes every frame at once: the NIC meters its ports itself, as
        # a board's MAC would by holding frames back
        await regs.run(driver.set_port_rate(self.sc.port_gbps(), 1000 / CLOCK_NS,
                                              self.sc.port_limit))

    def _psn(self, a, b, q):
        return random.Random(f"{self.seed}-psn-{a}-{b}-{q}").getrandbits(24)

    def _msn(self, a, b, q):
        return random.Random(f"{self.seed}-msn-{a}-{b}-{q}").getrandbits(16)

    def _entropy(self, h, q, i):
        return random.Random(f"{self.seed}-ev-{h}-{q}-{i}").getrandbits(32)

    async def _message(self, h, q, size) -> Message:
        """A write of ``size`` random bytes from host ``h`` on QP ``q``, to a fresh VA."""
        dst = self.peer_of(h, q)
        data = self.rng.randbytes(size)
        laddr = self.free_send.get(h, SEND_BASE)
        self.free_send[h] = laddr + size + 64 - size % 64
        va = self.free_recv.get((dst, q), RECV_BASE + q * REGION)
        self.free_recv[(dst, q)] = va + size + 64 - size % 64
        assert va + size <= RECV_BASE + (q + 1) * REGION, "the scenario writes too much"
        await self.hosts[h].mem.write_bytes(laddr, data)
        m = Message(h, q, len(self.messages) + 1, data, laddr, va, dst)
        self.messages[(h, m.wr_id)] = m
        return m

    async def _post(self, m: Message):
        m.posted_ns = get_sim_time("ns")
        await self.hosts[m.src].wr.send(AxiStreamFrame(encode(work_request_layout(), {
            "wr_id": m.wr_id, "qp": m.qp, "opcode": WrOpcode.WRITE, "laddr": m.laddr,
            "va": m.va, "rkey": 0x100 + m.qp, "length": len(m.data)})))
        self.log(event="posted", host=m.src, qp=m.qp, wr_id=m.wr_id, bytes=len(m.data))

    async def tune(self) -> float:
        """As every scenario starts: the idle RTT one full packet measures (:meth:`ping`), and
        each NIC's NSCC and receivers' share period set for it; that RTT, in microseconds."""
        base_rtt_us = await self.ping()
        for host in self.hosts:
            await host.regs.run(driver.set_congestion(**self.sc.congestion(base_rtt_us)))
            await host.regs.run(driver.set_ack_policy(
                *self.sc.ack_policy, share_period=self.sc.target_cycles(base_rtt_us)))
        return base_rtt_us

    async def ping(self) -> float:
        """The base RTT, in microseconds: one full packet written on an idle system, and the
        RTT its sender measured from its SACK (NICs and network together, no queue)."""
        h, q = 0, min(self.peers[0])
        m = await self._message(h, q, self.sc.mtu)
        await self._post(m)
        while m.done_ns is None:
            await ClockCycles(self.dut.clk, 64)
        cg = await self.hosts[h].regs.run(driver.congestion(q))
        assert cg["rtt"] > 0, f"no RTT sample after a whole write: {cg}"
        return cg["rtt"] * CLOCK_NS / 1000

    async def post_all(self) -> list[Message]:
        """Every host writes its messages on every QP, each to a fresh VA: all at once, or
        one every ``post_gap_us`` in the scenario's order (the rest posted while the caller
        goes on). The scenario's messages."""
        new = [await self._message(h, q, size) for h, q, size in self.sc.writes()]
        gap_ns = self.sc.post_gap_us * 1000
        if not gap_ns:
            for m in new:
                await self._post(m)
            return new

        async def in_turn(start_ns):
            for i, m in enumerate(new):
                wait = start_ns + i * gap_ns - get_sim_time("ns")
                if wait > 0:
                    await Timer(round(wait), "ns")
                await self._post(m)
        for m in new:
            m.posted_ns = float("inf")          # (not posted yet)
        cocotb.start_soon(in_turn(get_sim_time("ns")))
        return new

    async def ev_states(self, label=None):
        """Every QP's entry states; with ``label``, when each QP's were read is kept in
        ``read_ns[label]`` (a snapshot's reads take microseconds, QP after QP)."""
        out = {}
        for host in self.hosts:
            for q in self.peers[host.index]:
                start = get_sim_time("ns")
                out[(host.index, q)] = await host.regs.run(driver.ev_states(q))
                if label is not None:
                    self.read_ns.setdefault(label, {})[(host.index, q)] = (
                        start, get_sim_time("ns"))
        return out


@cocotb.test()
async def scenario(dut):
    p = params()
    sc = SCENARIOS[p["scenario"]](planes=p["planes"], spines=p["spines"], width=p["width"],
                                  **p.get("options", {}))
    seed = p["seed"]
    wall0 = time.monotonic()
    dut._log.info(f"scenario {sc.name}, seed {seed}")
    sysm = System(dut, p, sc, seed)
    await sysm.start()
    base_rtt_us = await sysm.tune()
    t0 = sysm.t0 = get_sim_time("ns")
    failures = sc.failures(sysm.net, t0)
    cocotb.start_soon(sysm.net.schedule(failures, 0.0,
                                        lambda text: sysm.log(event="failure", what=text)))
    for f in failures:
        if f.ports:
            cocotb.start_soon(_ports(sysm, f))
    sysm.landed = 0                 # (the RTT warm-up write is not the scenario's)
    work = await sysm.post_all()
    total = len(work)
    deadline = t0 + sc.timeout_us * 1000
    last_report = 0.0
    states_seen = {}
    while True:
        done = sum(m.done_ns is not None for m in work)
        now = get_sim_time("ns")
        if now - last_report >= sc.report_us * 1000:
            last_report = now
            sysm.log(event="progress", done=done, total=total, landed=sysm.landed,
                     bytes=sum(len(m.data) for m in work))
        for at_ns, label in sc.snapshots(t0):
            if label not in states_seen and now >= at_ns:
                states_seen[label] = await sysm.ev_states(label)
        if done == total and len(states_seen) == len(sc.snapshots(t0)):
            break
        if now >= deadline:
            await _stuck(sysm, seed, total - done, total)
        await ClockCycles(dut.clk, 64)
    end = max(m.done_ns for m in sysm.messages.values())
    await ClockCycles(dut.clk, 2000)      # late duplicates and acknowledgements drain
    states_end = await sysm.ev_states()
    # EVs a failure retired come back as their probes are answered: wait for it (bounded).
    # (SKIP is no failure: it ends with the QP's next rotation, which an idle QP never has.)
    # (from the failures' end, if the transfer finished before it)
    settle_from = max([end] + [f.until_ns for f in failures if f.until_ns is not None])
    while sc.recovers() and sc.mrc() and get_sim_time("ns") < settle_from + sc.settle_us * 1000 \
            and any(s == EvState.ASSUMED_BAD for st in states_end.values() for s in st[:sysm.E]):
        await ClockCycles(dut.clk, 1000)
        states_end = await sysm.ev_states()
    recovered_ns = get_sim_time("ns")

    # Every byte landed, every message completed once on each side.
    for m in sysm.messages.values():
        got = await sysm.hosts[m.dst].mem.read_bytes(m.va, len(m.data))
        wrong = sum(a != b for a, b in zip(got, m.data, strict=True))
        assert got == m.data, (f"seed {seed}: host {m.src} QP {m.qp} wr {m.wr_id}: {wrong} "
                               f"bytes wrong at host {m.dst} VA {m.va:#x}")
    for host in sysm.hosts:
        mine = sorted(m.wr_id for m in sysm.messages.values() if m.src == host.index)
        got = sorted(w for w, _, _ in host.completions)
        assert got == mine, f"seed {seed}: host {host.index} completions {got}, posted {mine}"
        bad = [(w, s.name) for w, s, _ in host.completions if s is not WrStatus.OK]
        assert not bad, f"seed {seed}: host {host.index}: failed completions {bad}"
        for q, peer in sysm.peers[host.index].items():
            want = sum(1 for m in sysm.messages.values() if m.src == peer and m.qp == q)
            msns = [msn for qq, msn in host.received if qq == q]
            first = sysm._msn(peer, host.index, q)
            assert msns == [(first + i) % (1 << 16) for i in range(want)], (
                f"seed {seed}: host {host.index} QP {q} received messages {msns}, expected "
                f"{want} from MSN {first}")

    await _counters_agree(sysm, seed)

    # The figures.
    counters = [await h.regs.run(driver.rel_counters()) for h in sysm.hosts]
    rx = [await h.regs.run(driver.rx_counters()) for h in sysm.hosts]
    payload = sum(len(m.data) for m in work)
    results = {
        "scenario": sc.name, "seed": seed, "options": p.get("options", {}),
        "transport": sc.transport,
        "single_paths": {f"{h}.{q}": path for (h, q), path in sysm.single_paths.items()},
        "hosts": sc.hosts, "planes": sysm.P, "spines": sysm.S, "qps": sysm.Q, "evs": sysm.E,
        "messages": len(work), "bytes": payload,
        "fct_us": (end - t0) / 1000, "goodput_gbps": payload * 8 / (end - t0),
        "base_rtt_us": base_rtt_us, "wire_rtt_us": sc.wire_rtt_us(),
        "rel": counters, "rx": rx, "network": dict(sysm.net.totals()),
        "drops": dict(sysm.net.count),
        "failures": [{"what": f.what, "at_us": (f.at_ns) / 1000,
                      "until_us": None if f.until_ns is None else f.until_ns / 1000,
                      "paths": f.paths} for f in failures],
        "ev_states": {label: _states(sysm, st) for label, st in
                      [*states_seen.items(), ("end", states_end)]},
        "flows": [{"src": m.src, "qp": m.qp, "dst": m.dst, "bytes": len(m.data),
                   "posted_us": (m.posted_ns - t0) / 1000, "done_us": (m.done_ns - t0) / 1000}
                  for m in sysm.messages.values()],
        "arrived": {str(h.index): [(round((t - t0) / 1000, 4), dqp, rtx, n)
                              for t, dqp, rtx, n in h.arrived if t >= t0] for h in sysm.hosts},
        "sent": {str(h.index): [(round((t - t0) / 1000, 4), pl, ev, op, dqp, rtx, ts)
                           for t, pl, ev, op, dqp, rtx, ts in h.sent if t >= t0]
                 for h in sysm.hosts},
        "reo_wnd": await sysm.hosts[0].regs.read("rel.reo_wnd"),
        "wall_s": time.monotonic() - wall0, "t0_us": t0 / 1000,
        "ts_origin_ns": sysm.ts_origin_ns,
        "profiles": {f"{h}.{q}": evs for (h, q), evs in sysm.profiles.items()},
        "snapshot_us": {label: at / 1000 for at, label in sc.snapshots(t0)},
        # (from t0: when each QP's states were read, first and last register read)
        "snapshot_read_us": {label: {f"{h}.{q}": [(a - t0) / 1000, (b - t0) / 1000]
                                     for (h, q), (a, b) in reads.items()}
                             for label, reads in sysm.read_ns.items()},
        "all_good_us": (recovered_ns - t0) / 1000 if sc.recovers() else None,
    }
    results["failover"] = _failover(sysm, failures, t0)
    sysm.net.close()
    sysm.log(event="done")
    sysm.progress.close()
    (sysm.out / "results.json").write_text(json.dumps(results))   # for a failed check too
    sc.check(results)
    (sysm.out / "results.json").write_text(json.dumps(results))   # with what the check adds


def _between(seed, host, what, got, low, high):
    assert low <= got <= high + 1, (f"seed {seed}: host {host} {what}: the NIC counts {got}, "
                                    f"the testbench saw {low} .. {high}")


async def _quiet(sysm, cycles: int = 2000, tries: int = 50):
    """Waits until no frame has been handed to a NIC for ``cycles`` and each port has taken
    all it was given. The testbench counts a frame as handed in when it queues it, the NIC once
    its front end has passed it, a frame's length and the pipeline's depth later: a count read
    sooner could miss a frame the testbench already counted (2 of 50 seeds at MTU 4096 did).
    A NIC at rest still answers the odd late duplicate: ``tries`` bounds the wait."""
    for _ in range(tries):
        before = sum(len(h.delivered) for h in sysm.hosts)
        await ClockCycles(sysm.dut.clk, cycles)
        if (sum(len(h.delivered) for h in sysm.hosts) == before
                and all(rx.idle() for h in sysm.hosts for rx in h.rx)):
            return


async def _counters_agree(sysm, seed):
    """Each NIC's own counts against what this testbench saw it send: frames and bytes per
    plane, retransmissions (the data frames with the BTH rtx bit), and per profile entry
    (path.*) the packets sent again and those that arrived. The NIC is at rest, but probes and
    acknowledgements still leave while its registers are read: what the testbench counted is
    taken before and after, and a count must lie between (one frame may be counted at its first
    beat and seen at its last)."""
    await _quiet(sysm)
    for h in sysm.hosts:
        n0, m0, r0 = len(h.sent), len(h.delivered), len(h.received)
        tx = await h.regs.run(driver.tx_counters())
        rel = await h.regs.run(driver.rel_counters())
        paths = [await h.regs.run(driver.path_stats(q)) for q in range(sysm.Q)]
        rel_after = await h.regs.run(driver.rel_counters())
        rx = await h.regs.run(driver.rx_counters())
        rest = {path: await h.regs.read(path) for path in (
            "icrc.frames", "icrc.bad", "parser.frames", "parser.errors", "net.disabled_drops",
            "wq.posted", "mem.errors", "ep.refused", "global.bus_errors")}
        n1, m1, r1 = len(h.sent), len(h.delivered), len(h.received)
        _rx_counters_agree(seed, h, rx, rest, m0, m1, r0, r1)
        sent = list(zip(h.sent[:n1], h.sent_bytes[:n1], strict=True))
        for pl, c in enumerate(tx["planes"]):
            on = [(n <= n0, b) for n, (x, b) in enumerate(sent, 1) if x[1] == pl]
            _between(seed, h.index, f"tx.frames_p{pl}", c["frames"],
                     sum(1 for early, _ in on if early), len(on))
            _between(seed, h.index, f"tx.bytes_p{pl}", c["bytes"],
                     sum(b for early, b in on if early), sum(b for _, b in on))
        rtx = [sum(r[f"rtx_{c}"] for c in ("sack", "trim", "timeout")) for r in (rel, rel_after)]
        again = [n <= n0 for n, (x, _) in enumerate(sent, 1) if x[3] in DATA_OPCODES and x[5]]
        _between(seed, h.index, "rel.rtx_*", rtx[0], sum(again), len(again))
        lost = sum(e["lost"] for per_qp in paths for e in per_qp.values())
        assert rtx[0] <= lost <= rtx[1], (f"seed {seed}: host {h.index}: path.lost sums to "
                                          f"{lost}, rel.rtx_* to {rtx[0]} .. {rtx[1]}")
        # every data packet was acknowledged once (the messages are complete): as often as a
        # new one left, an entry counted one arrival
        acked = sum(e["acked"] for per_qp in paths for e in per_qp.values())
        new_data = sum(1 for x, _ in sent if x[3] in DATA_OPCODES and not x[5])
        assert acked == new_data, (f"seed {seed}: host {h.index}: path.acked sums to {acked}, "
                                   f"{new_data} new data packets were sent")
        # the reliability engine and the TX side against the wire and the host
        assert rel["acked"] == new_data, (f"seed {seed}: host {h.index}: rel.acked "
                                          f"{rel['acked']}, {new_data} new data packets sent")
        assert rel["completions"] == len(h.completions), (
            f"seed {seed}: host {h.index}: rel.completions {rel['completions']}, "
            f"{len(h.completions)} completions came out")
        assert rel["invalid"] == 0, f"seed {seed}: host {h.index}: rel.invalid {rel['invalid']}"
        probes = [n <= n0 for n, (x, _) in enumerate(sent, 1) if x[3] == wire.Opcode.PROBE]
        _between(seed, h.index, "rel.probes_sent", rel["probes_sent"], sum(probes), len(probes))
        for kind in ("sack", "nack"):
            op = wire.Opcode[kind.upper()]
            out = [n <= n0 for n, (x, _) in enumerate(sent, 1) if x[3] == op]
            _between(seed, h.index, f"rx.{kind}s", rx[f"{kind}s"], sum(out), len(out))
        posted = sum(1 for m in sysm.messages.values() if m.src == h.index)
        assert tx["requests"] == posted, (f"seed {seed}: host {h.index}: tx.requests "
                                          f"{tx['requests']}, {posted} work requests posted")
        assert not any(tx["errors"].values()), f"seed {seed}: host {h.index}: {tx['errors']}"


FEEDBACK_OPCODES = {int(op) for op in (wire.Opcode.ACKNOWLEDGE, wire.Opcode.SACK, wire.Opcode.NACK,
                                       wire.Opcode.ENDPOINT_REQUEST,
                                       wire.Opcode.ENDPOINT_RESPONSE)}


def _rx_counters_agree(seed, h, rx, rest, m0, m1, r0, r1):
    """The receive side's counters against the frames the network handed the NIC (the first
    ``m0`` before its registers were read, ``m1`` after) and the messages its host saw complete:
    every frame passes the front end, each ends in the outcome its opcode and its trimming say,
    and nothing in a well-behaved run is counted as malformed, refused or dropped."""
    def seen(what, got, keep):
        on = [n <= m0 for n, (op, trimmed) in enumerate(h.delivered[:m1], 1) if keep(op, trimmed)]
        _between(seed, h.index, what, got, sum(on), len(on))

    for what, got in (("rx.frames", rx["frames"]), ("icrc.frames", rest["icrc.frames"]),
                      ("parser.frames", rest["parser.frames"])):
        seen(what, got, lambda op, t: True)
    seen("rx.outcome_*", sum(rx[f"outcome_{o}"] for o in RX_OUTCOMES), lambda op, t: True)
    seen("rx.outcome_feedback", rx["outcome_feedback"], lambda op, t: op in FEEDBACK_OPCODES)
    seen("rx.outcome_probe", rx["outcome_probe"], lambda op, t: op == wire.Opcode.PROBE)
    seen("rx.outcome_trimmed", rx["outcome_trimmed"],
         lambda op, t: op in DATA_OPCODES and t == wire.DscpClass.TRIMMED)
    seen("rx.outcome_trimmed_lasthop", rx["outcome_trimmed_lasthop"],
         lambda op, t: op in DATA_OPCODES and t == wire.DscpClass.TRIMMED_LASTHOP)
    seen("rx.outcome_placed + empty + duplicate + beyond",
         sum(rx[f"outcome_{o}"] for o in ("placed", "empty", "duplicate", "beyond")),
         lambda op, t: op in DATA_OPCODES and not t)
    _between(seed, h.index, "rx.completions", rx["completions"], r0, r1)
    assert rx["ooo"] <= rx["outcome_placed"] + rx["outcome_empty"], (
        f"seed {seed}: host {h.index}: rx.ooo {rx['ooo']} exceeds the new data packets")
    # A trimmed frame's ICRC may be wrong (its payload is cut); it is not checked.
    trimmed = sum(1 for _, t in h.delivered[:m1] if t)
    assert rest["icrc.bad"] <= trimmed, (f"seed {seed}: host {h.index}: icrc.bad "
                                         f"{rest['icrc.bad']}, {trimmed} frames were trimmed")
    zero = {f"rx.{k}": v for k, v in rx.items() if k.startswith("drop_")}
    zero |= {f"rx.outcome_{o}": rx[f"outcome_{o}"]
             for o in ("qp", "rkey", "bounds", "opcode", "truncated")}
    zero |= {"rx.place_errors": rx["place_errors"]}
    zero |= {k: v for k, v in rest.items() if k not in (
        "icrc.frames", "icrc.bad", "parser.frames")}
    moved = {k: v for k, v in zero.items() if v}
    assert not moved, f"seed {seed}: host {h.index}: counted what a clean run never has: {moved}"


async def _stuck(sysm, seed, left, total):
    """Fails the run with what the NICs and the network counted, so a hang can be read."""
    rel = [await h.regs.run(driver.rel_counters()) for h in sysm.hosts]
    rx = [await h.regs.run(driver.rx_counters()) for h in sysm.hosts]
    tx = [await h.regs.run(driver.tx_counters()) for h in sysm.hosts]
    waiting = [(m.src, m.qp, m.wr_id, len(m.data)) for m in sysm.messages.values()
               if m.done_ns is None]
    detail = {"waiting (host, qp, wr_id, bytes)": waiting, "rel": rel, "rx": rx, "tx": tx,
              "network": dict(sysm.net.totals()), "drops": dict(sysm.net.count)}
    (sysm.out / "stuck.json").write_text(json.dumps(detail, indent=1, default=str))
    raise AssertionError(f"seed {seed}: {left} of {total} messages not complete after "
                         f"{sysm.sc.timeout_us} us: {json.dumps(detail, default=str)}")


async def _ports(sysm, f):
    """A failure that takes hosts' ports down (a whole plane): their port_ready follows."""
    for at, down in ((f.at_ns, True), (f.until_ns, False)):
        if at is None:
            return
        now = get_sim_time("ns")
        if at > now:
            await Timer(round((at - now) * 1000), "ps")
        for h, pl in f.ports:
            sig = getattr(sysm.dut, f"nic{h}__port_ready")
            v = int(sig.value)
            sig.value = (v & ~(1 << pl)) if down else (v | (1 << pl))


def _states(sysm, states):
    """Per host and QP: each profile entry's (plane, spine, state)."""
    out = {}
    for (h, q), st in states.items():
        out[f"{h}.{q}"] = [[i % sysm.P, (i // sysm.P) % sysm.S, EvState(s).name]
                           for i, s in enumerate(st)]
    return out




def _failover(sysm, failures, t0):
    """For each failure: the last data packet (new or retransmitted) any NIC sprayed onto a
    path it killed, after it died, in simulated microseconds."""
    out = []
    for f in failures:
        last = None
        for h in sysm.hosts:
            for t, _, ev, op, *_ in h.sent:
                if op not in DATA_OPCODES or t < f.at_ns or (f.until_ns is not None
                                                         and t >= f.until_ns):
                    continue
                path = (sysm.layout.plane(ev), sysm.layout.spine(ev))
                if f.hit(h.index, path):
                    last = t if last is None else max(last, t)
        out.append({"what": f.what, "last_after_us": None if last is None
                    else (last - f.at_ns) / 1000})
    return out

