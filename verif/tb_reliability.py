"""cocotb test of the NIC's reliability engine, with the TX side running: work requests go out,
scapy-built SACKs, NACKs and silence come back on the NIC's ports, and what the NIC sends again
(which PSNs, rtx set, on another EV, every byte as the reference sender's packet), which work
requests it completes, and every ``rel.*`` counter equal what the sender's reference model
(verif/rel_model.py) predicts."""

from __future__ import annotations

import dataclasses
import itertools
import random

import cocotb
from cocotb.triggers import ClockCycles, with_timeout
from cocotb.utils import get_sim_time
from cocotbext.axi import AxiStreamFrame
from scapy.compat import raw
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from mrcnic import driver, wire
from mrcnic import layers as L
from mrcnic.evmap import ev_split, format_addr
from mrcnic.hdl.congestion_window import receiver_share
from mrcnic.hdl.qp_context import QpState, SrMode
from mrcnic.hdl.retransmit_tracker import RelMode
from mrcnic.hdl.segmenter import WrOpcode, WrStatus, completion_layout, work_request_layout
from mrcnic.hdl.spray_scheduler import EvState
from mrcnic.regmap import MAX_PLANES
from mrcnic.verif.layouts import decode, encode
from mrcnic.verif.packets import assert_frames_equal, encapsulate
from mrcnic.verif.rel_model import PSN_MOD, Congestion, Sender
from mrcnic.verif.tbkit import CLOCK_NS, params, sink, source
from mrcnic.verif.tx_model import WriteRequest, segment
from mrcnic.verif.tx_setup import BASE, OUTER_SRC, SRC_IP, SRC_MAC, configure, reference_frame, sent_ev

CONTROL_TC = (wire.DscpClass.CONTROL << 2) | 0b10
RTX_TC = (wire.DscpClass.DATA_TRIMMABLE_RTX << 2) | 0b10
LONG_RTO = 48000      # cycles: no timeout fires while a test step runs
MTU = 256


class Rig:
    """One NIC, configured through its registers, with every plane watched and the sender's
    model beside it."""

    @classmethod
    async def start(cls, dut, mode=RelMode.SELECTIVE, reorder=4, rto=LONG_RTO, cc=None,
                    probe_interval=0, states=None, reo_wnd=0):
        """(``reo_wnd`` 0: the time rule off, as these tests send bursts whose packets are
        a few cycles apart, and the NIC records a send time a few cycles before the TSETH's;
        the tests of the rule space their packets far wider than that.)"""
        self = cls()
        p = self.p = params()
        self.dut = dut
        self.rng = random.Random(p["seed"] * 7 + mode.value)
        self.Q, self.P = p["qps"], p["planes"]
        self.cfg = await configure(dut, p, self.rng, mtu_code=0,
                                   modes=(SrMode.USID, SrMode.PLAIN, SrMode.USID_SRH),
                                   reliability={"mode": mode, "reorder": reorder,
                                                "rto_min": rto, "rto_max": rto,
                                                "probe_interval": probe_interval,
                                                "reo_wnd": reo_wnd},
                                   congestion=dataclasses.asdict(cc) if cc else None,
                                   states=states)
        self.model = Sender(self.Q, p["window"], reorder, mode, cc, self.P,
                            self.cfg.layout.spines, reo_wnd)
        for q in range(self.Q):
            self.model.init(q, self.cfg.qps[q].next_psn)
        self.frames = []
        self.probes = []        # probe frames, apart from the data frames
        self.statuses = []      # port-status (ERTH) frames
        self.arrival = {}       # frame -> the cycle it arrived
        self.sinks = [sink(dut, f"plane{pl}") for pl in range(self.P)]
        for pl in range(self.P):
            cocotb.start_soon(self._collect(pl))
        self.feed = [source(dut, f"rx_plane{pl}") for pl in range(self.P)]
        self.wr = source(dut, "wr")
        self.cpl = sink(dut, "cpl")
        self.want = {}          # (qp, psn) -> (reference packet, wr_id, last)
        self.ev_of = {}         # (qp, psn) -> (EV, TSETH timestamp) of its latest try
        self.free = BASE
        self.wr_id = 0
        return self

    async def _collect(self, pl):
        while True:
            frame = bytes((await self.sinks[pl].recv()).tdata)
            self.arrival[frame] = int(get_sim_time("ns")) // CLOCK_NS
            op = Ether(frame)[L.BTH].opcode
            # the list take() left, not the one it took
            {wire.Opcode.PROBE: self.probes, wire.Opcode.ENDPOINT_REQUEST: self.statuses}.get(
                op, self.frames).append((pl, frame))

    async def post(self, q, packets):
        """A WRITE of ``packets`` MTUs of random bytes on QP ``q``; returns its PSNs."""
        data = self.rng.randbytes(packets * MTU)
        laddr, self.free = self.free, self.free + len(data) + 64
        await self.cfg.mem.write_bytes(laddr, data)
        self.wr_id += 1
        va = 0x7000_0000 + laddr - BASE
        await self.wr.send(AxiStreamFrame(encode(work_request_layout(), {
            "wr_id": self.wr_id, "qp": q, "opcode": WrOpcode.WRITE, "laddr": laddr, "va": va,
            "rkey": 0x55, "length": len(data)})))
        psns = []
        pkts = segment(self.cfg.qps[q], WriteRequest(va, 0x55, data), lambda: 0)
        for i, (_, pkt) in enumerate(pkts):
            psn = pkt[L.BTH].psn
            self.want[(q, psn)] = (pkt, self.wr_id, i == len(pkts) - 1,
                                   len(data[i * MTU:(i + 1) * MTU]))
            psns.append(psn)
        return psns

    async def take(self, n, what):
        """The next ``n`` frames the NIC sends, then a quiet spell in which it sends none."""
        for _ in range(4000):
            if len(self.frames) >= n:
                break
            await ClockCycles(self.dut.clk, 10)
        await ClockCycles(self.dut.clk, 400)
        got, self.frames = self.frames, []
        assert len(got) == n, f"{what}: {len(got)} frames, {n} expected: " + ", ".join(
            f"QP {self._key(f)[0]} PSN {self._key(f)[1]:#x} rtx {Ether(f)[L.BTH].rtx}"
            for _, f in got)
        return got

    def _key(self, frame):
        bth = Ether(frame)[L.BTH]
        return bth.dqp - 0x200, bth.psn

    def _check(self, pl, frame, rtx, what):
        q, psn = self._key(frame)
        assert (q, psn) in self.want, f"{what}: QP {q} PSN {psn:#x} was never asked for"
        want, wr_id, last, length = self.want[(q, psn)]
        ev = sent_ev(frame)
        profile = self.cfg.profiles[q]
        assert ev in profile, f"{what}: EV {ev:#x} is not in QP {q}'s profile"
        assert pl == self.cfg.layout.plane(ev), f"{what}: EV {ev:#x} left on plane {pl}"
        w = want.copy()
        if rtx:
            w[L.BTH].rtx = 1
            w[IPv6].tc = RTX_TC
        assert_frames_equal(reference_frame(w, frame, self.cfg.templates[q % self.p["templates"]],
                                            self.cfg.layout, self.cfg.modes[q],
                                            self.cfg.next_hops),
                            frame, f"{what} (QP {q} PSN {psn:#x})")
        ts = Ether(frame)[L.TSETH].tx_timestamp
        self.model.sent(q, psn, ev, profile.index(ev), last, wr_id, int(rtx), length, ts)
        self.ev_of[(q, psn)] = (ev, ts, self.arrival[frame])
        return q, psn, ev

    async def send_new(self, n, what="new packets"):
        for pl, f in await self.take(n, what):
            self._check(pl, f, False, what)

    async def expect(self, outcome, what):
        """The retransmissions ``outcome`` names, and nothing else, each on an EV other than
        the one it avoids (the test profiles always leave another)."""
        got = await self.take(len(outcome.retransmits), what)
        keys = sorted(self._key(f) for _, f in got)
        assert keys == sorted((q, psn) for q, psn, _ in outcome.retransmits), \
            f"{what}: sent again {keys}, the model says {outcome.retransmits}"
        avoid = {(q, psn): i for q, psn, i in outcome.retransmits}
        for pl, f in got:
            q, psn, ev = self._check(pl, f, True, what)
            assert ev != self.cfg.profiles[q][avoid[(q, psn)]], \
                f"{what}: PSN {psn:#x} went again on the EV that lost it ({ev:#x})"
        await self.completions(outcome, what)

    async def inject(self, ext, op, q, plane=0):
        pkt = (Ether(src="02:00:00:00:02:00", dst=SRC_MAC)
               / IPv6(src="fd00::99", dst=format_addr(SRC_IP), tc=CONTROL_TC, hlim=64)
               / UDP(sport=0xC000, dport=wire.ROCE_UDP_PORT, chksum=0)
               / L.BTH(opcode=int(op), pkey=0xFFFF, dqp=q, psn=0) / ext)
        await self.feed[plane].send(AxiStreamFrame(raw(Ether(raw(pkt)))))
        await ClockCycles(self.dut.clk, 200)

    async def sack(self, q, cack, bitmap=0, offset=0, trig=None, m=0, entropy=None, qp_field=None,
                   echo=None, rtt=None, pr=0, pen=0):
        """A SACK for QP ``q`` (BTH dqp ``qp_field`` if given; rcv_cwnd_pen ``pen``); the
        model's outcome."""
        cack %= PSN_MOD
        trig = cack if trig is None else trig % PSN_MOD
        ev, ts, _ = self.ev_of.get((q, trig), (0, 0, 0))
        entropy = ev if entropy is None else entropy
        ts = ts if echo is None else echo
        await self.inject(L.SETH(m=m, pr=pr, ack_psn_offset=(trig - cack) & 0xFFFF, entropy=entropy,
                                 spdcid=1, dpdcid=q, cack_psn=cack & 0xFFFFFF,
                                 sack_offset=offset, sack_bitmap=bitmap, tx_timestamp=ts,
                                 rcv_cwnd_pen=pen),
                          wire.Opcode.SACK, q if qp_field is None else qp_field)
        return self.model.sack(q if qp_field is None else qp_field, cack & 0xFFFFFF, offset,
                               bitmap, trig & 0xFFFFFF, entropy, m, rtt, pr, pen, ts,
                               self.now())

    def now(self):
        """The NIC's TX timestamp counter now, from any packet's stamp and arrival, or None."""
        if not self.ev_of:
            return None
        _, ts, cycle = next(iter(self.ev_of.values()))
        return (ts - cycle + int(get_sim_time("ns")) // CLOCK_NS) % (1 << 16)

    async def next_probe(self, interval):
        """The next probe frame (plane, frame), waiting up to three probe intervals."""
        for _ in range(3 * interval // 10):
            if self.probes:
                break
            await ClockCycles(self.dut.clk, 10)
        assert self.probes, f"no probe within {3 * interval} cycles"
        return self.probes.pop(0)

    async def nack(self, q, psn, reason, entropy=None):
        psn %= PSN_MOD
        ev, ts, _ = self.ev_of.get((q, psn), (0, 0, 0))
        entropy = ev if entropy is None else entropy
        await self.inject(L.NETH(nack_reason=reason, entropy=entropy, spdcid=1, dpdcid=q,
                                 nack_psn=psn & 0xFFFFFF, tx_timestamp=ts), wire.Opcode.NACK, q)
        return self.model.nack(q, psn & 0xFFFFFF, reason, entropy)

    async def completions(self, outcome, what):
        """The completions the NIC gives equal the model's."""
        got = []
        for _ in outcome.completions:
            c = decode(completion_layout(self.Q),
                       (await with_timeout(self.cpl.recv(), 20, "us")).tdata)
            got.append((c["wr_id"], c["status"]))
        assert got == [(w, WrStatus.OK) for w in outcome.completions], \
            f"{what}: completions {got}, the model says {outcome.completions}"
        assert self.cpl.empty(), f"{what}: a completion the model does not give"

    async def counters(self):
        got = await self.cfg.regs.run(driver.rel_counters())
        assert got == self.model.counters, _diff(got, self.model.counters)


def _diff(got, want):
    return "rel counters differ: " + ", ".join(
        f"{k}: NIC {got[k]} model {want[k]}" for k in want if got.get(k) != want[k])


def bits(offsets):
    return sum(1 << i for i in offsets)


@cocotb.test()
async def sack_holes_are_retransmitted_selectively(dut):
    rig = await Rig.start(dut)
    psns = await rig.post(0, 20)
    await rig.send_new(20)
    p0 = psns[0]
    # 0 and 1 arrived; 4..15 too but 7 and 12. With reorder 4, 2, 3, 7 are missing; 12 may
    # still be on its way (15 is only 3 past it).
    arrived = [i for i in range(2, 16) if i not in (2, 3, 7, 12)]
    out = await rig.sack(0, p0 + 2, bits(i - 2 for i in arrived), trig=p0 + 15)
    assert [(psn - p0) % PSN_MOD for _, psn, _ in out.retransmits] == [2, 3, 7]
    await rig.expect(out, "SACK holes")

    # The same SACK again, and an older one: nothing more goes.
    out = await rig.sack(0, p0 + 2, bits(i - 2 for i in arrived), trig=p0 + 15)
    await rig.expect(out, "a duplicate SACK")
    out = await rig.sack(0, p0 + 1, trig=p0)
    await rig.expect(out, "a stale SACK")

    # 2, 3 and 7 arrive, and a later packet shows 12 missing for good.
    out = await rig.sack(0, p0 + 12, bits(range(1, 8)), trig=p0 + 13)
    await rig.expect(out, "12 past the reorder threshold")
    assert [(psn - p0) % PSN_MOD for _, psn, _ in out.retransmits] == [12]

    # Everything: the message completes once, and nothing is sent again.
    out = await rig.sack(0, p0 + 20, trig=p0 + 19)
    await rig.expect(out, "everything acknowledged")
    await rig.counters()
    assert rig.model.counters["rtx_sack"] == 4 and rig.model.counters["stale"] == 1


@cocotb.test()
async def trims_retransmit_at_once(dut):
    rig = await Rig.start(dut)
    psns = await rig.post(1, 8)
    await rig.send_new(8)
    p0 = psns[0]
    ev_skip = 0
    trimmed = {rig.ev_of[(1, (p0 + 3) % PSN_MOD)][0]}
    # TRIMMED: sent again at once, its EV skipped.
    out = await rig.nack(1, p0 + 3, wire.NackReason.TRIMMED)
    assert [u[2] for u in out.ev_updates] == [EvState.SKIP]
    await rig.expect(out, "NACK TRIMMED")
    ev_skip += 1
    # TRIMMED_LASTHOP: sent again, but the path is not blamed.
    out = await rig.nack(1, p0 + 5, wire.NackReason.TRIMMED_LASTHOP)
    assert out.ev_updates == [] and len(out.retransmits) == 1
    await rig.expect(out, "NACK TRIMMED_LASTHOP")
    # A trim of the retransmission goes again too, on yet another EV.
    trimmed.add(rig.ev_of[(1, (p0 + 3) % PSN_MOD)][0])
    out = await rig.nack(1, p0 + 3, wire.NackReason.TRIMMED)
    await rig.expect(out, "a trimmed retransmission")
    ev_skip += 1
    # Other reasons send nothing.
    out = await rig.nack(1, p0 + 4, wire.NackReason.PSN_OOR_WINDOW)
    await rig.expect(out, "NACK PSN_OOR_WINDOW")
    out = await rig.sack(1, p0 + 8, trig=p0 + 7)
    await rig.expect(out, "everything acknowledged")
    # A trimmed EV sits out tx.trim_rounds rotations (4 from reset), where an ECN mark's SKIP
    # lasts one: three profiles' worth of packets more leave both trimmed EVs out.
    E = rig.p["evs"]
    await rig.post(1, 3 * E)
    await rig.send_new(3 * E, "the rotations after the trims")
    used = {rig.ev_of[(1, (p0 + 8 + i) % PSN_MOD)][0] for i in range(3 * E)}
    assert not trimmed & used, (f"trimmed EVs {sorted(map(hex, trimmed & used))} used within "
                                "tx.trim_rounds rotations")
    out = await rig.sack(1, p0 + 8 + 3 * E, trig=p0 + 7 + 3 * E)
    await rig.expect(out, "everything acknowledged again")
    await rig.counters()
    assert rig.model.counters["ev_skip"] == ev_skip and rig.model.counters["rtx_trim"] == 3


@cocotb.test()
async def a_trimmed_retransmission_is_a_hole_again(dut):
    """A retransmission trimmed while the window is full waits, as a trimmed first send does,
    to be a SACK hole, and the next SACK that shows it missing sends it again: it is not left
    for a timeout because it went once already."""
    n, q = 40, 0
    # (the receiver, shared by 2 QPs, holds the window to 28 packets once SACKs say so)
    rig = await Rig.start(dut, cc=Congestion(cwnd_init=n * MTU, cwnd_min=MTU, rcv_wnd=56 * MTU))
    psns = await rig.post(q, n)
    await rig.send_new(n)
    p0 = psns[0]
    # 3..10 arrived: 2 is a hole (reorder 4), and goes again.
    out = await rig.sack(q, p0 + 2, bits(i - 2 for i in range(3, 11)), trig=p0 + 10, pen=2)
    assert [(psn - p0) % PSN_MOD for _, psn, _ in out.retransmits] == [2]
    await rig.expect(out, "a SACK hole")
    # (the model's window follows the RTT sample the NIC took)
    got = await rig.cfg.regs.run(driver.congestion(q))
    rig.model.sample(q, p0 + 10, False, got["rtt"], 2)
    assert got["cwnd"] == rig.model.q[q].cwnd <= 28 * MTU, (got, rig.model.q[q].cwnd)
    # That retransmission is trimmed: the window, a packet less, is still full (30 packets
    # out, 27 allowed), and 37 packets follow it, so it waits to show as a hole.
    out = await rig.nack(q, p0 + 2, wire.NackReason.TRIMMED)
    assert out.retransmits == [], f"a trim with the window full went again: {out.retransmits}"
    await rig.expect(out, "a trimmed retransmission with the window full")
    got = await rig.cfg.regs.run(driver.congestion(q))
    assert got["cwnd"] == rig.model.q[q].cwnd, (got, rig.model.q[q].cwnd)
    # The next SACK shows it missing still: it goes again.
    out = await rig.sack(q, p0 + 2, bits(i - 2 for i in range(3, 15)), trig=p0 + 14, pen=2)
    assert [(psn - p0) % PSN_MOD for _, psn, _ in out.retransmits] == [2], \
        f"the trimmed retransmission's hole was passed over: {out.retransmits}"
    await rig.expect(out, "the trimmed retransmission's hole")
    out = await rig.sack(q, p0 + n, trig=p0 + n - 1)
    await rig.expect(out, "everything acknowledged")
    await rig.counters()
    assert rig.model.counters["rtx_sack"] == 2 and rig.model.counters["rtx_trim"] == 0


@cocotb.test()
async def ev_marks_set_the_ev_state(dut):
    """SACK m = SKIP_ONCE skips the EV for a rotation; m = ALWAYS_SKIP retires it; a SACK for
    another QP, or naming an EV its packet did not use, changes nothing."""
    rig = await Rig.start(dut)
    E = rig.p["evs"]
    psns = await rig.post(2, 4)
    await rig.send_new(4)
    p0 = psns[0]
    skipped = rig.ev_of[(2, (p0 + 1) % PSN_MOD)][0]
    out = await rig.sack(2, p0 + 2, trig=p0 + 1, m=wire.SackMark.SKIP_ONCE)
    assert [u[2] for u in out.ev_updates] == [EvState.SKIP]
    await rig.expect(out, "SKIP_ONCE")
    # The next rotation of QP 2 (a profile's worth of packets) leaves it out.
    await rig.post(2, E)
    await rig.send_new(E, "the rotation after SKIP_ONCE")
    recent = [rig.ev_of[(2, psn)][0] for psn in ((p0 + 4 + i) % PSN_MOD for i in range(E))]
    assert skipped not in recent, f"EV {skipped:#x} was used in the rotation it was skipped for"

    bad = rig.ev_of[(2, (p0 + 3) % PSN_MOD)][0]
    out = await rig.sack(2, p0 + 4, trig=p0 + 3, m=wire.SackMark.ALWAYS_SKIP)
    assert [u[2] for u in out.ev_updates] == [EvState.ASSUMED_BAD]
    await rig.expect(out, "ALWAYS_SKIP")
    # Marks that must not count: the QP's own packet named with an EV it did not use, and a
    # SACK for another QP naming this QP's PSN and EV.
    other = rig.ev_of[(2, (p0 + 5) % PSN_MOD)][0]
    out = await rig.sack(2, p0 + 4, trig=p0 + 5, m=wire.SackMark.ALWAYS_SKIP, entropy=other ^ 1)
    assert out.ev_updates == []
    await rig.sack(3, rig.cfg.qps[3].next_psn, trig=p0 + 5, m=wire.SackMark.ALWAYS_SKIP,
                   entropy=other)
    out = await rig.sack(2, p0 + 4 + E, trig=p0 + 3 + E)
    await rig.expect(out, "everything acknowledged")
    # Two profiles' worth more: the retired EV is never used, the one marked wrongly is.
    await rig.post(2, 2 * E)
    await rig.send_new(2 * E, "after ALWAYS_SKIP")
    used = {rig.ev_of[(2, psn)][0] for psn in ((p0 + 4 + E + i) % PSN_MOD for i in range(2 * E))}
    assert bad not in used, f"EV {bad:#x} was used after ALWAYS_SKIP"
    assert other in used, f"EV {other:#x} was retired by a mark that named another EV"
    await rig.counters()
    assert rig.model.counters["ev_skip"] == 1 and rig.model.counters["ev_bad"] == 1


@cocotb.test()
async def silence_retransmits_the_oldest(dut):
    rig = await Rig.start(dut, rto=3000)
    psns = await rig.post(0, 4)
    await rig.send_new(4)
    p0 = psns[0]
    # 1..3 arrive, 0 does not, and then nothing: after the RTO, 0 goes again and its EV is
    # assumed bad.
    out = await rig.sack(0, p0, bits([1, 2, 3]), trig=p0 + 3)
    await rig.expect(out, "a SACK below the reorder threshold")
    first = rig.ev_of[(0, p0)][2]
    await ClockCycles(dut.clk, 3000)
    out = rig.model.timeout(0)
    assert [psn for _, psn, _ in out.retransmits] == [p0 % PSN_MOD]
    assert [u[2] for u in out.ev_updates] == [EvState.ASSUMED_BAD]
    await rig.expect(out, "the RTO")
    # ...one RTO after it first left (give or take the pipeline's few cycles).
    assert 2950 <= rig.ev_of[(0, p0)][2] - first <= 3300, rig.ev_of[(0, p0)][2] - first
    out = await rig.sack(0, p0 + 4, trig=p0)
    await rig.expect(out, "everything acknowledged")
    await ClockCycles(dut.clk, 4000)
    assert rig.frames == [], "something went again with nothing outstanding"
    # Idle for longer than its RTO, the QP sends again: its clock starts at that send, not at
    # its last acknowledgement, so nothing goes again until an RTO after it.
    p1 = (await rig.post(0, 4))[0]
    await rig.send_new(4, "after an idle spell longer than the RTO")
    first = rig.ev_of[(0, p1)][2]
    await ClockCycles(dut.clk, 1500)
    assert rig.frames == [], "the first packets after an idle spell timed out at once"
    await ClockCycles(dut.clk, 1000)
    out = rig.model.timeout(0)
    await rig.expect(out, "the RTO after the idle spell")
    assert 2950 <= rig.ev_of[(0, p1)][2] - first <= 3300, rig.ev_of[(0, p1)][2] - first
    out = await rig.sack(0, p1 + 4, trig=p1)
    await rig.expect(out, "everything acknowledged again")
    await rig.counters()
    assert rig.model.counters["rtx_timeout"] == 2


@cocotb.test()
async def impossible_feedback_is_counted_and_ignored(dut):
    rig = await Rig.start(dut)
    Q = rig.Q
    psns = await rig.post(0, 10)
    await rig.send_new(10)
    p0 = psns[0]
    for what, coro in (
            ("a SACK for a QP the NIC lacks", rig.sack(0, p0 + 3, qp_field=Q + 5)),
            ("a NACK for a QP the NIC lacks", rig.nack(Q, p0, wire.NackReason.TRIMMED)),
            ("a cumulative PSN past what was sent", rig.sack(0, p0 + 11)),
            ("a bitmap claiming unsent PSNs", rig.sack(0, p0 + 2, bits([1, 8]))),
            ("a SACK offset outside the window", rig.sack(0, p0 + 2, bits([0]), offset=0x8000)),
            ("a NACK for a PSN never sent", rig.nack(0, p0 + 10, wire.NackReason.TRIMMED)),
            ("a NACK for an acknowledged PSN", rig.nack(0, p0 - 1, wire.NackReason.TRIMMED))):
        out = await coro
        await rig.expect(out, what)
        assert not out.completions, what
    assert rig.model.counters["invalid"] == 6 and rig.model.counters["stale"] == 1
    # The state is whole: a real SACK does what the model says.
    out = await rig.sack(0, p0 + 3, bits(range(2, 7)), trig=p0 + 9)
    assert [(psn - p0) % PSN_MOD for _, psn, _ in out.retransmits] == [3, 4]
    await rig.expect(out, "the first good SACK")
    out = await rig.sack(0, p0 + 10, trig=p0 + 9)
    await rig.expect(out, "everything acknowledged")
    await rig.counters()


@cocotb.test()
async def go_back_n_resends_everything_after_a_loss(dut):
    rig = await Rig.start(dut, mode=RelMode.GO_BACK_N)
    psns = await rig.post(1, 10)
    await rig.send_new(10)
    p0 = psns[0]
    out = await rig.sack(1, p0 + 2, bits(range(1, 8)), trig=p0 + 9)
    assert [(psn - p0) % PSN_MOD for _, psn, _ in out.retransmits] == list(range(2, 10))
    await rig.expect(out, "go-back-N after a hole")
    out = await rig.sack(1, p0 + 10, trig=p0 + 9)
    await rig.expect(out, "everything acknowledged")
    await rig.counters()


@cocotb.test()
async def a_go_back_n_sweep_yields_to_feedback(dut):
    """A go-back-N sweep resends the window from the loss, but feedback comes first: a SACK
    acknowledging everything, arriving while the sweep runs, ends it. (Run whole, a sweep held
    the RX side up for as long as the port took to send the window; after a long outage two
    NICs did so by turns and crawled at a packet a timeout.)"""
    N, q = 128, 1
    rig, psns, loss = await _go_back_n_loss(dut, q, N)
    assert len(loss.retransmits) == N, loss.retransmits
    done = await rig.sack(q, psns[0] + N, trig=psns[-1])
    await ClockCycles(dut.clk, 4000)
    resent, rig.frames = [f for _, f in rig.frames if Ether(f)[L.BTH].rtx], []
    assert 0 < len(resent) < N // 4, (
        f"{len(resent)} of the {N} packets sent again, the SACK acknowledging them all "
        "notwithstanding")
    await rig.completions(done, "everything acknowledged")


async def _go_back_n_loss(dut, q, n):
    """A go-back-N NIC with ``n`` packets of QP ``q`` out and a SACK showing the first lost:
    the rig, the PSNs, and the model's outcome of the SACK (every packet sent again)."""
    rig = await Rig.start(dut, mode=RelMode.GO_BACK_N)
    psns = await rig.post(q, n)
    await rig.send_new(n)
    p0 = psns[0]
    return rig, psns, await rig.sack(q, p0, bits(range(8)), offset=1, trig=p0 + 8)


@cocotb.test()
async def a_go_back_n_sweep_goes_on_after_feedback(dut):
    """A sweep that yielded to a SACK still showing the loss goes on from where it stopped:
    every packet from the loss to nxt goes again once, and none twice."""
    N, q = 128, 1
    rig, psns, loss = await _go_back_n_loss(dut, q, N)
    p0 = psns[0]
    again = await rig.sack(q, p0, bits(range(8)), offset=1, trig=p0 + 8)   # (a duplicate's)
    want = sorted(psn for _, psn, _ in loss.retransmits + again.retransmits)
    assert want == sorted(psns), want
    for _ in range(100):
        await ClockCycles(dut.clk, 400)
        if sum(Ether(f)[L.BTH].rtx for _, f in rig.frames) >= N:
            break
    await ClockCycles(dut.clk, 2000)
    got, rig.frames = sorted(rig._key(f)[1] for _, f in rig.frames), []
    assert got == want, f"sent again {len(got)}: {[hex(p) for p in got if got.count(p) > 1]} twice"
    await rig.completions(await rig.sack(q, p0 + N, trig=psns[-1]), "everything acknowledged")
    await rig.counters()


@cocotb.test()
async def the_window_holds_new_packets(dut):
    """A QP never has more than the window in flight: the rest waits for acknowledgements."""
    rig = await Rig.start(dut)
    W = rig.p["window"]
    psns = await rig.post(3, W + 6)
    await rig.send_new(W, "a window's worth")
    out = await rig.sack(3, psns[0] + 6, trig=psns[5])
    assert not out.retransmits
    await rig.send_new(6, "the packets the SACK let go")
    out = await rig.sack(3, psns[-1] + 1, trig=psns[-1])
    await rig.expect(out, "everything acknowledged")
    await rig.counters()


@cocotb.test()
async def a_slot_used_again_starts_outstanding(dut):
    """A packet SACKed above a hole leaves its mark in its slot only until una passes it: the
    PSN a window later in the same slot is outstanding, and when it is lost it is a SACK hole
    that goes again at once, not one taken for SACKed and left to a timeout."""
    rig = await Rig.start(dut)
    W, q = rig.p["window"], 2
    p0 = (await rig.post(q, 16))[0]
    await rig.send_new(16, "the first sixteen")
    # 5..15 arrive, 0..4 do not: with reorder 4, all five are holes.
    out = await rig.sack(q, p0, bits(range(5, 16)), trig=p0 + 15)
    assert [(psn - p0) % PSN_MOD for _, psn, _ in out.retransmits] == [0, 1, 2, 3, 4]
    await rig.expect(out, "the holes below what was SACKed")
    out = await rig.sack(q, p0 + 16, trig=p0 + 4)
    await rig.expect(out, "the first sixteen acknowledged")
    # A window's worth more: PSNs p0 + W + 5 .. p0 + W + 15 take the slots SACKed before.
    await rig.post(q, W)
    await rig.send_new(W, "a window's worth in the same slots")
    # Below p0 + W + 5 everything arrived, and p0 + W + 11 .. p0 + W + 15: 5 .. 10 are holes.
    out = await rig.sack(q, p0 + W + 5, bits(range(6, 11)), trig=p0 + W + 15)
    assert [(psn - p0 - W) % PSN_MOD for _, psn, _ in out.retransmits] == list(range(5, 11)), \
        f"the holes in reused slots: {out.retransmits}"
    await rig.expect(out, "the holes in slots SACKed a window before")
    out = await rig.sack(q, p0 + W + 16, trig=p0 + W + 10)
    await rig.expect(out, "everything acknowledged")
    await rig.counters()


@cocotb.test()
async def the_window_follows_nscc(dut):
    """A scripted run of SACKs, ECN-marked or not, with RTTs below and above the target, some
    saying how many QPs the receiver is busy with (rcv_cwnd_pen), and trims: after each, the
    window equals the model's NSCC window, and the QP has exactly as many new packets out as
    that window allows."""
    cc = Congestion(target_rtt=3000, cwnd_init=4096, cwnd_min=2048, cwnd_max=12000, fair=700,
                    gain=16, md_shift=2, rcv_wnd=9000)
    rig = await Rig.start(dut, cc=cc)
    q = 1
    psns = await rig.post(q, 200)
    sent = 0

    async def release():
        nonlocal sent
        n, flight = 0, rig.model.q[q].flight
        while sent + n < len(psns) and rig.model.can_send(q, psns[sent + n]) \
                and flight < rig.model.q[q].cwnd:
            flight += MTU
            n += 1
        await rig.send_new(n, f"what a window of {rig.model.q[q].cwnd} bytes lets out")
        sent += n
        got = await rig.cfg.regs.run(driver.congestion(q))
        assert got["inflight"] == rig.model.q[q].flight, (got, rig.model.q[q].flight)

    await release()
    assert sent == cc.cwnd_init // MTU
    acked = 0
    moves = []

    async def step(ecn, rtt=None, pen=0):
        """SACKs what is out but three (all, at the end), ECN-marked or not, echoing a
        timestamp that makes the RTT about ``rtt`` (the real one if None), with rcv_cwnd_pen
        ``pen``."""
        nonlocal acked
        acked = sent if sent == len(psns) or rtt is None else acked + 3
        trig = psns[acked - 1]
        _, ts, seen = rig.ev_of[(q, trig)]
        now = ts + int(get_sim_time("ns")) // CLOCK_NS - seen
        out = await rig.sack(q, trig + 1, trig=trig, m=wire.SackMark.SKIP_ONCE if ecn else 0,
                             echo=None if rtt is None else (now + 120 - rtt) & 0xFFFF, pen=pen)
        got = await rig.cfg.regs.run(driver.congestion(q))
        if rtt is not None:
            assert (got["rtt"] < cc.target_rtt) == (rtt < cc.target_rtt), \
                f"the test meant an RTT near {rtt}, the NIC measured {got['rtt']}"
        # The model follows with the sample the NIC took.
        before = rig.model.q[q].cwnd
        rig.model.sample(q, trig, ecn, got["rtt"], pen)
        assert got["srtt"] == rig.model.q[q].srtt, (got, rig.model.q[q].srtt)
        if pen >= 2:
            share = max(receiver_share(cc.rcv_wnd, pen), cc.cwnd_min)
            assert got["cwnd"] <= share, \
                f"rcv_cwnd_pen {pen}: window {got['cwnd']}, above the receiver's share {share}"
        assert got["cwnd"] == rig.model.q[q].cwnd, \
            f"ECN {ecn}, RTT {got['rtt']}: window {before} -> {got['cwnd']}, NSCC says " \
            f"{rig.model.q[q].cwnd}"
        moves.append((ecn, got["rtt"] < cc.target_rtt, before, got["cwnd"]))
        return out

    script = [(False, 500), (False, 1500), (False, 6000), (False, 6000), (True, 6000),
              (True, 800), (True, 7000), (True, 7000), (True, 7000), (False, 200), (False, 9000)]
    # The receiver busy with this QP alone (it is not held, and grows past rcv_wnd), then with
    # 5 QPs, 2, 127 (the window falls to cwnd_min), then saying nothing.
    script = [(e, r, 0) for e, r in script] + [(False, 200, 1), (False, 200, 1), (False, 500, 5),
                                               (False, 500, 2), (False, 500, 127), (False, 200, 0)]
    alone = []
    for ecn, rtt, pen in script:
        out = await step(ecn, rtt, pen)
        if pen == 1:
            alone.append(rig.model.q[q].cwnd)
        assert not out.retransmits and not out.completions
        await release()      # exactly what the new window lets out, and nothing sent again
    # A trim: a queue was full, and at the last hop nothing else says so: the window gives up
    # the trimmed packet's bytes.
    # It was full, and `reorder` packets follow the trimmed one (enough for a SACK hole to
    # show it), so it does not go again at once: the hole will resend it.
    reorder = rig.model.reorder
    early = sent - 1 - reorder
    assert early >= acked, f"the script should end with more than {reorder} packets out"
    before = rig.model.q[q].cwnd
    out = await rig.nack(q, psns[early], wire.NackReason.TRIMMED_LASTHOP)
    assert out.retransmits == [], f"a trim with the window full went again: {out.retransmits}"
    await rig.expect(out, "a trim with the window full")
    got = await rig.cfg.regs.run(driver.congestion(q))
    assert before > cc.cwnd_min, f"the script left no window to cut before the trim: {before}"
    assert got["cwnd"] == rig.model.q[q].cwnd == max(before - MTU, cc.cwnd_min), \
        f"a trim: window {before} -> {got['cwnd']}, NSCC says {rig.model.q[q].cwnd}"
    # A trim inside the fabric is news of one path, which its EV's SKIP answers: the window
    # stays as it is (and, still full, the packet waits to be a hole).
    assert early - 1 >= acked, "the script should leave two early packets out"
    before = rig.model.q[q].cwnd
    out = await rig.nack(q, psns[early - 1], wire.NackReason.TRIMMED)
    assert out.retransmits == [], f"a trim with the window full went again: {out.retransmits}"
    assert [u[2] for u in out.ev_updates] == [EvState.SKIP], out.ev_updates
    await rig.expect(out, "a trim inside the fabric with the window full")
    got = await rig.cfg.regs.run(driver.congestion(q))
    assert got["cwnd"] == rig.model.q[q].cwnd == before, \
        f"a trim inside the fabric: window {before} -> {got['cwnd']}, NSCC keeps it"
    # Without EV health (single-path RoCE, blind spraying) nothing skips that path: the same
    # trim is all the news there is, and the window gives up the packet's bytes.
    assert early - 2 >= acked, "the script should leave three early packets out"
    await rig.cfg.regs.run(driver.set_reliability(RelMode.SELECTIVE, ev_health=False))
    rig.model.ev_health = False
    before = rig.model.q[q].cwnd
    out = await rig.nack(q, psns[early - 2], wire.NackReason.TRIMMED)
    assert out.retransmits == [], f"a trim with the window full went again: {out.retransmits}"
    await rig.expect(out, "a trim inside the fabric without EV health")
    got = await rig.cfg.regs.run(driver.congestion(q))
    assert got["cwnd"] == rig.model.q[q].cwnd == max(before - MTU, cc.cwnd_min), \
        f"a trim without EV health: window {before} -> {got['cwnd']}, NSCC cuts it"
    await rig.cfg.regs.run(driver.set_reliability(RelMode.SELECTIVE, ev_health=True))
    rig.model.ev_health = True
    # The last packet out has too few after it for a hole to show it: trimmed, it goes again
    # at once, window full or not, rather than wait for a timeout.
    out = await rig.nack(q, psns[sent - 1], wire.NackReason.TRIMMED_LASTHOP)
    assert [psn for _, psn, _ in out.retransmits] == [psns[sent - 1]], \
        f"a trimmed last packet did not go again at once: {out.retransmits}"
    await rig.expect(out, "a trim of the last packet out")
    await release()
    while True:
        out = await step(False)
        if sent == len(psns):
            break
        await release()
    await rig.expect(out, "the whole write acknowledged")
    assert max(alone) > cc.rcv_wnd, f"the script never took a QP alone past rcv_wnd: {alone}"
    assert rig.model.counters["completions"] == 1
    # The script met each case where it moves the window.
    moved = {(ecn, below): any(b != a for e, lo, b, a in moves if (e, lo) == (ecn, below))
             for ecn in (False, True) for below in (False, True)}
    assert moved == {(False, True): True, (False, False): True, (True, False): True,
                     (True, True): False}, moves
    # ... and a mark with the RTT above the target, on a packet sent before the last cut,
    # that left the window as it was: one cut a round trip.
    assert any(e and not lo and b == a > cc.cwnd_min for e, lo, b, a in moves), moves


@cocotb.test()
async def a_dead_peer_keeps_its_last_ev(dut):
    """Nothing ever answers: each RTO retires the EV the packet last took (and, its path
    already suspect from an earlier RTO, the path's other entries), until one is left, which
    the spray scheduler keeps (the update is refused), so the QP keeps trying and the NIC keeps
    serving its other QPs."""
    rig = await Rig.start(dut, rto=1000)
    E = rig.p["evs"]
    psns = await rig.post(0, 1)
    await rig.send_new(1)
    used = [rig.ev_of[(0, psns[0])][0]]
    timeouts = E + 2
    for k in range(timeouts):
        (pl, frame), = await rig.take(1, f"timeout {k + 1}")
        out = rig.model.timeout(0)
        assert [psn for _, psn, _ in out.retransmits] == psns
        used.append(rig._check(pl, frame, True, f"timeout {k + 1}")[2])
    k = next(i for i, ev in enumerate(used) if ev in used[:i])      # the first used again
    assert len(set(used[:k])) == k, "a retired EV was used again while others were left"
    assert used[k - 1:] == [used[k - 1]] * (len(used) - k + 1), "the last EV was not kept"
    states = await rig.cfg.regs.run(driver.ev_states(0))
    good = [i for i, st in enumerate(states[:E]) if st is not EvState.ASSUMED_BAD]
    assert good == [rig.cfg.profiles[0].index(used[-1])], f"left GOOD: {good}, {states}"
    tx = await rig.cfg.regs.run(driver.tx_counters())
    assert tx["ev_refused"] == len(used) - k
    out = await rig.sack(0, psns[0] + 1, trig=psns[0])
    await rig.expect(out, "the peer answers at last")
    await rig.post(1, 4)
    await rig.send_new(4, "another QP")
    await rig.counters()


@cocotb.test()
async def probes_bring_a_bad_ev_back(dut):
    """An EV retired by ALWAYS_SKIP is probed every rel.probe_interval on exactly that EV; an
    answer naming another EV changes nothing, the right answer makes it GOOD (it carries
    packets again), and probing stops."""
    interval = 3000
    rig = await Rig.start(dut, probe_interval=interval)
    E = rig.p["evs"]
    q = 2
    psns = await rig.post(q, 4)
    await rig.send_new(4)
    p0 = psns[0]
    bad = rig.ev_of[(q, (p0 + 1) % PSN_MOD)][0]
    index = rig.cfg.profiles[q].index(bad)
    await ClockCycles(dut.clk, interval)
    assert rig.probes == [], "a probe before any EV was bad"
    out = await rig.sack(q, p0 + 4, trig=p0 + 1, m=wire.SackMark.ALWAYS_SKIP)
    await rig.expect(out, "ALWAYS_SKIP")

    async def next_probe():
        pl, frame = await rig.next_probe(interval)
        pkt = Ether(frame)
        peer = rig.cfg.qps[q]
        assert pkt[L.BTH].dqp == wire.PROBE_DQP and pkt[L.PETH].spdcid == q
        assert pkt[L.PETH].dpdcid == peer.dqp & 0xFFFF and pkt[L.PETH].probe_id == index
        assert sent_ev(frame) == bad and pl == rig.cfg.layout.plane(bad), \
            f"probe on EV {sent_ev(frame):#x} plane {pl}, the bad EV is {bad:#x}"
        # Byte for byte (ICRC included) the probe scapy builds, on that EV and route.
        sport, fl = ev_split(bad)
        want = Ether(raw(Ether(src=SRC_MAC, dst=peer.dst_mac)
                         / IPv6(src=format_addr(SRC_IP), dst=format_addr(peer.dst_ip),
                                tc=CONTROL_TC, fl=fl, hlim=64)
                         / UDP(sport=sport, dport=wire.ROCE_UDP_PORT, chksum=0)
                         / L.BTH(opcode=int(wire.Opcode.PROBE), pkey=0xFFFF,
                                 dqp=wire.PROBE_DQP, psn=0)
                         / L.PETH(probe_id=index, spdcid=q, dpdcid=peer.dqp & 0xFFFF,
                                  tx_timestamp=pkt[L.PETH].tx_timestamp)))
        mode = rig.cfg.modes[q]
        if mode is not SrMode.PLAIN:
            want = encapsulate(want, rig.cfg.templates[q % rig.p["templates"]], rig.cfg.layout,
                               bad, src=OUTER_SRC, force_srh=mode is SrMode.USID_SRH)
        assert_frames_equal(raw(to_next_hop(rig, want, bad)), frame, "probe")
        rig.model.probed(q, index, bad)
        return pkt

    # While the bad EV's plane is down it is not probed (a probe would wait for the port).
    P = rig.P
    down = ((1 << P) - 1) & ~(1 << rig.cfg.layout.plane(bad))
    dut.port_ready.value = down
    await ClockCycles(dut.clk, 2 * interval)
    await statuses(rig, range(rig.Q), down, down, "the bad EV's plane down")
    while rig.probes:                        # any that left before the port went down
        await next_probe()
    await ClockCycles(dut.clk, 2 * interval)
    assert rig.probes == [], "a probe went to a plane whose port is down"
    dut.port_ready.value = (1 << P) - 1
    await next_probe()
    await next_probe()                       # unanswered: it goes again
    await statuses(rig, range(rig.Q), (1 << P) - 1, (1 << P) - 1, "the bad EV's plane back")
    una = (p0 + 4) % PSN_MOD
    out = await rig.sack(q, una, pr=1, entropy=bad ^ 0x10)
    assert out.ev_updates == []
    await next_probe()                       # a wrong answer: still bad, still probed
    out = await rig.sack(q, una, pr=1, entropy=bad)
    assert out.ev_updates == [(q, index, EvState.GOOD)]
    await rig.expect(out, "the probe answered")
    # GOOD again: two profiles' worth of packets use it; no more probes.
    start = len(rig.probes)
    await rig.post(q, 2 * E)
    await rig.send_new(2 * E, "after the probe's answer")
    used = {rig.ev_of[(q, (p0 + 4 + i) % PSN_MOD)][0] for i in range(2 * E)}
    assert bad in used, f"EV {bad:#x} was not used after its probe was answered"
    await ClockCycles(dut.clk, 2 * interval)
    assert len(rig.probes) == start == 0, "probes went on with no EV bad"
    await rig.counters()
    assert rig.model.counters["probes_sent"] >= 3 and rig.model.counters["probes_answered"] == 1


@cocotb.test()
async def a_late_probe_answer_still_counts(dut):
    """With two EVs retired their probes take turns; the answer to the first, arriving after
    the second probe left, still brings its EV back: a QP keeps its last PROBES_KEPT probes."""
    interval = 2000
    rig = await Rig.start(dut, probe_interval=interval)
    q = 2
    psns = await rig.post(q, 8)
    await rig.send_new(8)
    ix = _uses(rig, q, psns)
    i = 1
    j = next(k for k in range(2, 8) if ix[k] != ix[i])
    for k in (i, j):
        out = await rig.sack(q, psns[k] + 1, trig=psns[k], m=wire.SackMark.ALWAYS_SKIP)
        assert (q, ix[k], EvState.ASSUMED_BAD) in out.ev_updates, out.ev_updates
        await rig.expect(out, "ALWAYS_SKIP")
    out = await rig.sack(q, psns[-1] + 1)
    await rig.expect(out, "all acknowledged")

    async def take_probe():
        _, frame = await rig.next_probe(interval)
        index, ev = Ether(frame)[L.PETH].probe_id, sent_ev(frame)
        assert rig.cfg.profiles[q][index] == ev and index in (ix[i], ix[j]), (index, ev)
        rig.model.probed(q, index, ev)
        return index, ev

    first = await take_probe()
    second = await take_probe()
    assert first[0] != second[0], f"the probes did not take turns: {first}, {second}"
    out = await rig.sack(q, psns[-1] + 1, pr=1, entropy=first[1])
    assert out.ev_updates == [(q, first[0], EvState.GOOD)], out.ev_updates
    await rig.expect(out, "the first probe answered after the second left")
    states = await rig.cfg.regs.run(driver.ev_states(q))
    assert states[first[0]] is EvState.GOOD and states[second[0]] is EvState.ASSUMED_BAD, states
    await rig.counters()


def control_frame(rig, q, ev, ext, opcode, dqp):
    """What the NIC sends QP ``q``'s peer on EV ``ev``: a control frame carrying ``ext``, built
    by scapy (ICRC included) and routed as the QP's data is."""
    peer = rig.cfg.qps[q]
    sport, fl = ev_split(ev)
    want = Ether(raw(Ether(src=SRC_MAC, dst=peer.dst_mac)
                     / IPv6(src=format_addr(SRC_IP), dst=format_addr(peer.dst_ip),
                            tc=CONTROL_TC, fl=fl, hlim=64)
                     / UDP(sport=sport, dport=wire.ROCE_UDP_PORT, chksum=0)
                     / L.BTH(opcode=int(opcode), pkey=0xFFFF, dqp=dqp, psn=0) / ext))
    mode = rig.cfg.modes[q]
    if mode is not SrMode.PLAIN:
        want = encapsulate(want, rig.cfg.templates[q % rig.p["templates"]], rig.cfg.layout, ev,
                           src=OUTER_SRC, force_srh=mode is SrMode.USID_SRH)
    return raw(to_next_hop(rig, want, ev))


def to_next_hop(rig, pkt, ev):
    """``pkt`` addressed to the next hop of its EV's plane, where the NIC has one."""
    hop = rig.cfg.next_hops.get(rig.cfg.layout.plane(ev))
    if hop is not None:
        pkt[Ether].dst = hop
    return pkt


async def statuses(rig, qps, mask, ready, what):
    """Exactly one port-status update per QP of ``qps``, each with ``mask``, each byte for byte
    the ERTH scapy builds, on an EV of the QP's profile on a plane of ``ready``."""
    for _ in range(300):
        if len(rig.statuses) >= len(qps):
            break
        await ClockCycles(rig.dut.clk, 10)
    await ClockCycles(rig.dut.clk, 400)
    got, rig.statuses = rig.statuses, []
    qps = list(qps)
    to = sorted(Ether(f)[L.BTH].dqp - 0x200 for _, f in got)
    assert to == sorted(qps), f"{what}: port status to QPs {to}, expected {sorted(qps)}"
    for pl, frame in got:
        q = Ether(frame)[L.BTH].dqp - 0x200
        ev = sent_ev(frame)
        assert ev in rig.cfg.profiles[q] and pl == rig.cfg.layout.plane(ev), \
            f"{what}: QP {q}'s status on EV {ev:#x}, plane {pl}"
        assert ready >> pl & 1, f"{what}: QP {q}'s status left on plane {pl}, which is down"
        ts = Ether(frame)[L.ERTH].tx_timestamp
        erth = L.ERTH(op=wire.EndpointOp.PORT_STATUS, port_status_mask=mask, tx_timestamp=ts)
        assert_frames_equal(control_frame(rig, q, ev, erth, wire.Opcode.ENDPOINT_REQUEST,
                                          rig.cfg.qps[q].dqp), frame, f"{what} (QP {q})")
        rig.model.status_sent()


@cocotb.test()
async def the_peers_hear_of_port_changes(dut):
    """A port going down, and coming back, is told at once to the peer of every RTR or RTS QP
    (an ERTH on a plane still up); with rel.status_interval set it is repeated; a QP in INIT
    hears nothing, and nothing is sent while the NIC is disabled."""
    P = params()["planes"]
    idle = P - 1 if P > 1 else 0
    rig = await Rig.start(dut, states={idle: QpState.INIT})
    talking = [q for q in range(rig.Q) if q != idle]
    every = (1 << P) - 1
    await ClockCycles(dut.clk, 500)
    assert rig.statuses == [], "a port status with no port changed"
    down = every & ~0b10
    dut.port_ready.value = down
    await statuses(rig, talking, down, down, "plane 1 down")
    # Packets meanwhile keep to the planes that are up.
    psns = await rig.post(0, 8)
    await rig.send_new(8, "while plane 1 is down")
    assert all(rig.cfg.layout.plane(rig.ev_of[(0, p)][0]) != 1 for p in psns)
    await rig.completions(await rig.sack(0, psns[-1] + 1), "while plane 1 is down")
    dut.port_ready.value = every
    await statuses(rig, talking, every, every, "plane 1 back")
    # Repeats: each QP hears again every interval.
    interval = 3000
    await rig.cfg.regs.run(driver.set_reliability(RelMode.SELECTIVE, status_interval=interval))
    await ClockCycles(dut.clk, interval - 400)
    await statuses(rig, talking, every, every, "the first repeat")
    await ClockCycles(dut.clk, interval - 1200)
    await statuses(rig, talking, every, every, "the second repeat")
    await rig.cfg.regs.run(driver.set_reliability(RelMode.SELECTIVE, status_interval=0))
    # Disabled, the NIC tells nobody; enabled again, a port it finds down is told.
    await rig.cfg.regs.run(driver.set_enabled(False))
    await ClockCycles(dut.clk, 500)
    rig.statuses.clear()
    dut.port_ready.value = down
    await ClockCycles(dut.clk, 1000)
    assert rig.statuses == [], "a port status while the NIC was disabled"
    await rig.cfg.regs.run(driver.set_enabled(True))
    await statuses(rig, talking, down, down, "enabled with plane 1 down")
    dut.port_ready.value = every
    await statuses(rig, talking, every, every, "plane 1 back again")
    await rig.counters()
    assert rig.model.counters["status_sent"] == 6 * len(talking)


@cocotb.test()
async def a_port_held_down_is_down_to_everything(dut):
    """net.port_admin holding a port down: the peers hear it down as if its link had failed,
    nothing is sent on it, and what arrives on it is discarded whole and counted
    (net.disabled_drops); let up again, it is up again, and the peers hear so."""
    rig = await Rig.start(dut)
    P, regs = rig.P, rig.cfg.regs
    every = (1 << P) - 1
    down = every & ~0b10
    assert await regs.read("net.port_up") == every
    await regs.write("net.port_admin", down)
    await statuses(rig, range(rig.Q), down, down, "plane 1 held down")
    assert await regs.read("net.port_up") == down
    psns = await rig.post(0, 8)
    await rig.send_new(8, "while plane 1 is held down")
    assert all(rig.cfg.layout.plane(rig.ev_of[(0, p)][0]) != 1 for p in psns)
    # A peer's port status on the port held down is discarded: it changes nothing.
    before = await regs.run(driver.rel_counters())
    await rig.inject(L.ERTH(op=wire.EndpointOp.PORT_STATUS, port_status_mask=0b01,
                            tx_timestamp=0x1234), wire.Opcode.ENDPOINT_REQUEST, 0, plane=1)
    assert await regs.read("net.disabled_drops") == 1
    assert (await regs.run(driver.rel_counters()))["status_received"] == \
        before["status_received"], "a frame on a port held down reached the NIC"
    await rig.completions(await rig.sack(0, psns[-1] + 1), "while plane 1 is held down")
    await regs.write("net.port_admin", (1 << MAX_PLANES) - 1)
    await statuses(rig, range(rig.Q), every, every, "plane 1 let up")
    assert await regs.read("net.port_up") == every
    await rig.counters()


@cocotb.test()
async def a_peer_port_status_steers_the_spray(dut):
    """An ERTH port status from a QP's peer limits that QP (and no other) to the planes the
    peer can receive on, at once, until the next status says otherwise; a status with no
    plane up, or for a QP the NIC lacks, is counted invalid and changes nothing; an EV_PROBE
    request is counted as other. A peer's word never leaves a QP without a plane: with its
    only plane down here, the QP uses the ones that are up."""
    rig = await Rig.start(dut)
    P, E = rig.P, rig.p["evs"]
    every = (1 << P) - 1
    q, other = 1, 2

    async def status(qp, mask, op=wire.EndpointOp.PORT_STATUS):
        await rig.inject(L.ERTH(op=op, port_status_mask=mask, tx_timestamp=0x1234),
                         wire.Opcode.ENDPOINT_REQUEST, qp)
        rig.model.endpoint(qp, op, mask)

    async def planes_used(qp, ready, what):
        psns = await rig.post(qp, 2 * E)
        await rig.send_new(2 * E, what)
        used = {rig.cfg.layout.plane(rig.ev_of[(qp, p)][0]) for p in psns}
        allowed = rig.model.planes_for(qp, ready)
        assert used == {p for p in range(P) if allowed >> p & 1}, \
            f"{what}: QP {qp} used planes {sorted(used)}, may use {allowed:#b}"
        out = await rig.sack(qp, psns[-1] + 1)
        await rig.completions(out, what)

    await planes_used(q, every, "before any status")
    await status(q, 0b01)
    await planes_used(q, every, "its peer's plane 1 down")
    await planes_used(other, every, "another QP, its peer's planes up")
    await status(q, 0b10)
    await planes_used(q, every, "its peer's plane 0 down")
    await status(q, 0)                                   # nothing up: impossible
    await status(rig.Q + 3, 0b01)                        # no such QP
    await status(q, 0b01, wire.EndpointOp.EV_PROBE)      # not a port status
    await rig.inject(L.EETH(op=wire.EndpointOp.PORT_STATUS, port_status_mask=0b01),
                     wire.Opcode.ENDPOINT_RESPONSE, q)
    rig.model.counters["other"] += 1                     # a response asks nothing of us
    await planes_used(q, every, "after statuses that must change nothing")
    # Its peer's only plane is down here: the QP uses what is up rather than stop.
    dut.port_ready.value = every & ~0b10
    await statuses(rig, range(rig.Q), every & ~0b10, every & ~0b10, "plane 1 down here")
    await planes_used(q, every & ~0b10, "its peer's only plane down here")
    dut.port_ready.value = every
    await statuses(rig, range(rig.Q), every, every, "plane 1 back here")
    await status(q, every)
    await planes_used(q, every, "its peer's planes all up again")
    await rig.counters()
    assert rig.model.counters["status_received"] == 3


@cocotb.test()
async def a_path_that_keeps_losing_is_retired(dut):
    """A SACK hole sets the EV that lost it SKIP and its path (the plane and spine the EV
    names) suspect, and holds the path: new packets keep off it. A second hole on the same
    path, on any of the QP's entries there, with no packet arriving on the path in between,
    sets every entry on the path ASSUMED_BAD, and they carry nothing after. An arrival on the
    path between two holes forgives the first: the second is only SKIP."""
    rig = await Rig.start(dut)
    N, E = 64, rig.p["evs"]

    def uses(q, psns):
        return _uses(rig, q, psns)

    def hole_at(q, psns, px, i, what):
        return _hole_at(rig, q, psns, px, i, what)

    # QP 0: a hole -> SKIP and the path held; a second on the path -> all of it ASSUMED_BAD.
    q = 0
    profile = rig.cfg.profiles[q]
    psns = await rig.post(q, N)
    await rig.send_new(N)
    ix = uses(q, psns)
    px = _paths(rig, q, ix)
    a, b = _path_uses(px, N, 2)
    on_path = {i for i, ev in enumerate(profile) if rig.cfg.layout.path(ev) == px[a]}
    assert {ix[a], ix[b]} <= on_path, on_path
    out = await hole_at(q, psns, px, a, "first hole")
    assert (q, ix[a], EvState.SKIP) in out.ev_updates and not out.paths, out
    await rig.expect(out, "the first hole")
    assert rig.model.held(q) == {px[a]}, rig.model.held(q)
    # Held: a profile's worth of new packets all keep off the path.
    held = await rig.post(q, E)
    await rig.send_new(E, "while the path is held")
    on_it = [p for p in held if rig.cfg.layout.path(rig.ev_of[(q, p)][0]) == px[a]]
    assert not on_it, f"PSNs {on_it} went on held path {px[a]}"
    out = await hole_at(q, psns, px, b, "second hole")
    assert (q, ix[b], EvState.ASSUMED_BAD) in out.ev_updates, out.ev_updates
    assert out.paths == [(q, ix[b])], out.paths
    await rig.expect(out, "the second hole on the same path")
    retired = on_path
    out = await rig.sack(q, held[-1] + 1)
    await rig.expect(out, "all acknowledged")
    assert rig.model.held(q) == set(), "the hold outlived the packets sent before it"
    dead = {profile[i] for i in retired}
    more = await rig.post(q, 2 * E)
    await rig.send_new(2 * E, "after the entry was retired")
    assert all(rig.ev_of[(q, p)][0] not in dead for p in more), "a retired EV carried a packet"
    states = await rig.cfg.regs.run(driver.ev_states(q))     # as ev.state reads them
    assert {i for i, st in enumerate(states) if st is EvState.ASSUMED_BAD} == retired, states
    await rig.completions(await rig.sack(q, more[-1] + 1), "after the entry was retired")

    # QP 1: a hole, an arrival on the same path, another hole there -> SKIP both times. The
    # spray's order decides whether a batch has such a path; one that has none is acknowledged
    # whole and another sent.
    q = 1
    for _ in range(4):
        psns = await rig.post(q, N)
        await rig.send_new(N)
        ix = uses(q, psns)
        px = _paths(rig, q, ix)
        if (found := _path_uses(px, N, 3, need=False)) is not None:
            break
        await rig.completions(await rig.sack(q, psns[-1] + 1), "a batch without three uses")
    else:
        raise AssertionError(f"four batches and no path has 3 uses with room around them: {px}")
    c, d, e = found                        # c and e lost, d between them arrives
    out = await hole_at(q, psns, px, c, "first hole")
    assert (q, ix[c], EvState.SKIP) in out.ev_updates, out.ev_updates
    await rig.expect(out, "the first hole")
    out = await rig.sack(q, psns[d] + 1, trig=psns[d])       # d arrived, on the same path
    await rig.expect(out, "an arrival on the path")
    out = await hole_at(q, psns, px, e, "second hole")
    assert (q, ix[e], EvState.SKIP) in out.ev_updates, out.ev_updates
    await rig.expect(out, "a hole after an arrival on the path")
    states = await rig.cfg.regs.run(driver.ev_states(q))
    assert states[ix[c]] is EvState.SKIP and EvState.ASSUMED_BAD not in states, states
    await rig.completions(await rig.sack(q, psns[-1] + 1), "all acknowledged")
    await rig.counters()


@cocotb.test()
async def a_path_silent_through_its_hold_is_retired(dut):
    """A QP that sends too little to lose a second packet on a path must not take it up again
    on no evidence: when the hold that its first hole started ends (every packet sent by then
    accounted for) and nothing arrived on the path meanwhile, every entry on it goes
    ASSUMED_BAD, to come back by probe. An arrival on the path during the hold clears it: the
    hold then ends with the path in use."""
    rig = await Rig.start(dut)
    N, E = 64, rig.p["evs"]
    for q, arrival in ((0, False), (1, True)):
        profile = rig.cfg.profiles[q]
        psns = await rig.post(q, N)
        await rig.send_new(N)
        ix = _uses(rig, q, psns)
        px = _paths(rig, q, ix)
        a, b = _path_uses(px, N, 2)
        on_path = {i for i, ev in enumerate(profile) if rig.cfg.layout.path(ev) == px[a]}
        out = await _hole_at(rig, q, psns, px, a, "the hole")
        assert (q, ix[a], EvState.SKIP) in out.ev_updates and not out.paths, out
        await rig.expect(out, "the hole")
        if arrival:
            out = await rig.sack(q, psns[a], bitmap=(1 << (b - a)) - 1, offset=1, trig=psns[b])
            await rig.expect(out, "an arrival on the path")
        # The QP's next packets keep off the path (unless it was cleared); they all arrive,
        # the last of them a ``reorder`` and more past the hold: the hold ends.
        later = await rig.post(q, E)
        await rig.send_new(E, "while the path is held")
        on_it = [p for p in later if rig.cfg.layout.path(rig.ev_of[(q, p)][0]) == px[a]]
        assert arrival or not on_it, f"PSNs {on_it} went on held path {px[a]}"
        trig = next(p for p in reversed(later) if p not in on_it)    # not on the path
        out = await rig.sack(q, later[-1] + 1, trig=trig)
        await rig.expect(out, "the hold's end")
        assert rig.model.held(q) == set(), rig.model.held(q)
        states = await rig.cfg.regs.run(driver.ev_states(q))
        bad = {i for i, st in enumerate(states) if st is EvState.ASSUMED_BAD}
        if arrival:
            assert not out.paths and not bad, (out, states)
        else:
            assert out.paths == [(q, ix[a])], out.paths
            assert bad == on_path, states
    await rig.counters()


def _uses(rig, q, psns):
    """Each PSN's profile entry."""
    return [rig.cfg.profiles[q].index(rig.ev_of[(q, p)][0]) for p in psns]


def _paths(rig, q, ix):
    """The path (plane and spine) of each of those entries."""
    return [rig.cfg.layout.path(rig.cfg.profiles[q][i]) for i in ix]


def _next_use(px, i, n):
    """The next relative PSN below n on i's path, or None."""
    return next((j for j in range(i + 1, n) if px[j] == px[i]), None)


def _alone(px, i):
    """None of the five packets after i shares its path."""
    return px[i] not in px[i + 1:i + 6]


def _hole_at(rig, q, psns, px, i, what):
    """A SACK: everything before i arrived, i did not, i+1 .. i+5 did (none on i's path, so
    the arrival that triggers it says nothing for that path)."""
    assert _alone(px, i), f"{what}: the arrivals share the lost path"
    return rig.sack(q, psns[i], bitmap=0b11111, offset=1, trig=psns[i + 5])


def _path_uses(px, n, count, need=True):
    """The first run of count uses a < ... of one path below n, each with five arrivals after
    it on other paths and more than six PSNs after the one before (None if there is none and
    not ``need``)."""
    for a in range(1, n):
        run = [a]
        while len(run) < count and (j := _next_use(px, run[-1], n)) is not None:
            run.append(j)
        if (len(run) == count and all(_alone(px, j) for j in run) and run[-1] + 6 < n
                and all(j > i + 6 for i, j in itertools.pairwise(run))):
            return tuple(run)
    if not need:
        return None
    raise AssertionError(f"no path has {count} uses with room around them: {px}")


@cocotb.test()
async def a_trimmed_packets_hole_is_not_its_paths(dut):
    """A packet NACKed as trimmed, left to be a SACK hole (no room in the window just cut),
    was lost to a full queue: its hole sets its entry SKIP and blames nothing. A trim excuses
    that send alone, not its QP: two holes of untrimmed packets on one path after it still
    retire the path, as under a load that never lets up a link may die all the same."""
    N, q = 64, 0
    # (the window lets all N out; a packet less after the trim, it keeps the trimmed one
    # waiting)
    cc = Congestion(cwnd_init=N * MTU, cwnd_min=4096, cwnd_max=N * MTU)
    rig = await Rig.start(dut, cc=cc)
    psns = await rig.post(q, N)
    await rig.send_new(N)
    ix = _uses(rig, q, psns)
    px = _paths(rig, q, ix)
    a, b, c = _path_uses(px, N, 3)
    out = await rig.nack(q, psns[a], wire.NackReason.TRIMMED_LASTHOP)
    assert not out.retransmits, out
    await rig.expect(out, "a last-hop trim, left to be a hole")
    await _excused_then_retired(rig, q, psns, ix, px, (a, b, c), "the trimmed packet's hole")


async def _excused_then_retired(rig, q, psns, ix, px, holes, why):
    """SACK holes at the three ``holes`` on one path: the first (``why``) excused, its entry
    SKIP and nothing held; the second makes the path suspect, and held; the third retires
    every entry of the QP on it."""
    a, b, c = holes
    out = await _hole_at(rig, q, psns, px, a, why)
    assert out.ev_updates == [(q, ix[a], EvState.SKIP)] and len(out.retransmits) == 1, out
    await rig.expect(out, why)
    assert rig.model.held(q) == set(), rig.model.held(q)
    out = await _hole_at(rig, q, psns, px, b, "the next hole there")
    assert out.ev_updates == [(q, ix[b], EvState.SKIP)] and not out.paths, out
    await rig.expect(out, "the next hole there: the path suspect")
    assert rig.model.held(q) == {px[a]}, rig.model.held(q)
    out = await _hole_at(rig, q, psns, px, c, "a third hole")
    assert (q, ix[c], EvState.ASSUMED_BAD) in out.ev_updates and out.paths, out
    await rig.expect(out, "a third hole: the path retired")
    states = await rig.cfg.regs.run(driver.ev_states(q))
    on_path = [i for i, ev in enumerate(rig.cfg.profiles[q]) if rig.cfg.layout.path(ev) == px[a]]
    assert all(states[i] == EvState.ASSUMED_BAD for i in on_path), (on_path, states)
    await rig.completions(await rig.sack(q, psns[-1] + 1), "all acknowledged")
    await rig.counters()


@cocotb.test()
async def a_marked_path_is_excused_one_hole(dut):
    """A SACK hole on a path whose latest arrival carried ECN sets its entry SKIP and blames
    nothing (a packet held in a long queue is overtaken as a lost one is), but only once: a
    link that dies under load has its last arrival marked and none after it, so the next
    holes there make the path suspect and then retire it."""
    N, q = 128, 0
    rig = await Rig.start(dut)
    psns = await rig.post(q, N)
    await rig.send_new(N)
    ix = _uses(rig, q, psns)
    px = _paths(rig, q, ix)
    x, a, b, c = _path_uses(px, N, 4)
    out = await rig.sack(q, psns[x] + 1, trig=psns[x], m=wire.SackMark.SKIP_ONCE)
    assert out.ev_updates == [(q, ix[x], EvState.SKIP)], out
    await rig.expect(out, "an arrival on the path with ECN")
    await _excused_then_retired(rig, q, psns, ix, px, (a, b, c), "a hole on the marked path")


async def _sparse(rig, q, n, gap):
    """``n`` single-packet writes on QP ``q``, each ``gap`` cycles after the last has gone (and
    the quiet spell that shows it went alone); their PSNs."""
    psns = []
    for _ in range(n):
        psns += await rig.post(q, 1)
        await rig.send_new(1)
        await ClockCycles(rig.dut.clk, gap)
    return psns


@cocotb.test()
async def a_sparse_qp_finds_losses_by_time(dut):
    """RACK's rule (rel.reo_wnd): a QP with few packets out never has rel.reorder more behind a
    loss, so a count alone leaves every loss to a timeout. A packet is lost once one sent more
    than reo_wnd cycles after it has arrived: its entry SKIP and its path suspect; a second
    loss on the path so found retires the path. A packet sent less than reo_wnd before the
    arrival is not lost yet."""
    # (the whole run within RACK_FRESH: the SACKs come after every packet has gone)
    W = 400
    rig = await Rig.start(dut, reorder=16, reo_wnd=W)
    q, N = 0, 16
    psns = await _sparse(rig, q, N, 300)
    sent = [rig.ev_of[(q, p)][2] for p in psns]
    assert min(b - a for a, b in zip(sent[:-1], sent[1:], strict=True)) > W, f"sent at {sent}"
    ix = _uses(rig, q, psns)
    px = _paths(rig, q, ix)
    a = next(i for i in range(N - 2) if px[i + 1] != px[i] and _next_use(px, i, N - 1))
    b = _next_use(px, a, N - 1)
    assert px[b + 1] != px[b], px
    bits_ab = bits(range(b - a - 1))       # a+1 .. b-1, from offset 1
    out = await rig.sack(q, psns[a], bitmap=bits_ab, offset=1, trig=psns[a + 1])
    assert psns[a] in [p for _, p, _ in out.retransmits], out
    assert (q, ix[a], EvState.SKIP) in out.ev_updates and not out.paths, out
    await rig.expect(out, "a loss only time shows (one packet behind it)")
    out = await rig.sack(q, psns[a], bitmap=bits_ab | 1 << (b - a), offset=1,
                         trig=psns[b + 1])
    assert psns[b] in [p for _, p, _ in out.retransmits], out
    assert (q, ix[b]) in out.paths, out
    await rig.expect(out, "a second loss on the path, by time")
    states = await rig.cfg.regs.run(driver.ev_states(q))
    on_path = {i for i, ev in enumerate(rig.cfg.profiles[q])
               if rig.cfg.layout.path(ev) == px[a]}
    assert {i for i, st in enumerate(states) if st is EvState.ASSUMED_BAD} == on_path, states
    # (a real arrival's echo: a made-up send time would be taken as the latest)
    await rig.completions(await rig.sack(q, psns[-1] + 1, trig=psns[-1]), "all acknowledged")
    # A burst: its packets a few dozen cycles apart; the last arrives, the others are not lost.
    burst = await rig.post(q, 3)
    await rig.send_new(3)
    out = await rig.sack(q, burst[0], bitmap=0b10, offset=1, trig=burst[2])
    assert not out.retransmits, out
    await rig.expect(out, "packets sent less than reo_wnd before the arrival")
    await rig.completions(await rig.sack(q, burst[-1] + 1), "all acknowledged")
    await rig.counters()


@cocotb.test()
async def a_lost_tail_is_found_by_time(dut):
    """A message's last packet lost: no count ever finds it (nothing above it arrives), but
    the time rule does once a packet sent later than reo_wnd after it arrives: here the
    retransmission of an earlier hole. Above the highest PSN arrived the scan stops at the
    first packet sent too late to be lost."""
    W = 400
    rig = await Rig.start(dut, reorder=16, reo_wnd=W)
    q, N = 0, 6
    psns = await _sparse(rig, q, N, 300)
    # psns[1] and the tail psns[-1] lost; psns[2] .. psns[-2] arrived
    out = await rig.sack(q, psns[1], bitmap=bits(range(N - 3)), offset=1, trig=psns[-2])
    assert [p for _, p, _ in out.retransmits] == [psns[1]], out
    await rig.expect(out, "the hole below the highest; the tail sent after it is not lost yet")
    late = (rig.ev_of[(q, psns[1])][1] - rig.ev_of[(q, psns[-1])][1]) % (1 << 16)
    assert late > W, f"the retransmission left {late} cycles after the tail"
    out = await rig.sack(q, psns[-1], trig=psns[1])
    assert [p for _, p, _ in out.retransmits] == [psns[-1]], out
    assert any(e[:2] == (q, _uses(rig, q, psns)[-1]) for e in out.ev_updates), out
    await rig.expect(out, "the tail, by the retransmission's arrival")
    await rig.completions(await rig.sack(q, psns[-1] + 1, trig=psns[-1]), "all acknowledged")
    await rig.counters()
