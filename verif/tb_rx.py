"""cocotb tests of the receive side (RX front end + transport) against the receiver's reference
model: scapy-built writes over several QPs, permuted, duplicated, ECN-marked, trimmed (and then
sent whole), SRv6-encapsulated or plain, over both planes, with probes, feedback packets and bad
packets among them. Host memory must end byte-exact, each message complete exactly once in MSN
order, every SACK and NACK equal the model's, and every counter equal the model's count."""

import random

import cocotb
from cocotb.triggers import ClockCycles, with_timeout
from scapy.compat import raw
from scapy.layers.l2 import Ether

from mrcnic import icrc, wire
from mrcnic import layers as L
from mrcnic.evmap import EvLayout
from mrcnic.hdl.qp_context import MTU_CODES, QpState, SrMode, context_write_layout
from mrcnic.hdl.rx_event import RxOutcome, ack_layout, completion_layout
from mrcnic.hdl.rx_pipeline import rx_counter_names
from mrcnic.hdl.rx_transport import init_layout
from mrcnic.hdl.transport_parser import transport_layout
from mrcnic.verif.host_memory import HostMemory
from mrcnic.verif.layouts import decode, encode
from mrcnic.verif.network import set_tc, tc_of, trim
from mrcnic.verif.packets import encapsulate, random_mrc
from mrcnic.verif.rx_model import HEAD, Receiver, RxQp
from mrcnic.verif.tb_header_parser import _diff, _template
from mrcnic.verif.tbkit import StreamRules, params, setup, sink, source
from mrcnic.verif.tx_model import QueuePair, WriteRequest, segment

LAYOUT = EvLayout(planes=2, spines=4)
REGION = 1 << 16
FOREVER = (1 << 32) - 1


def reseal(frame: bytes) -> bytes:
    """The frame with its lengths and ICRC made right again after an edit."""
    out = bytearray(frame)
    plen = len(out) - 54
    out[18:20] = plen.to_bytes(2, "big")
    out[58:60] = plen.to_bytes(2, "big")
    return bytes(out[:-4]) + icrc.icrc_bytes(bytes(out[14:-4]))


def spoil(rng, frame: bytes, c: RxQp, messages: int) -> bytes:
    """A well-formed copy of a data packet that the transport must refuse, one way or another:
    wrong R_Key, payload outside the region, to a QP not ready, an unknown opcode, too short for
    its headers, a PSN past the window, an MSN past the message window."""
    f = bytearray(frame)
    bth = wire.BTH.unpack(frame[62:])
    reth = HEAD + wire.METH.length + (wire.TSETH.length if bth["tsh"] else 0)
    how = rng.choice(["rkey", "bounds", "qp", "opcode", "short", "psn", "msn"])
    if how == "rkey":
        f[reth + 8:reth + 12] = ((c.rkey + 1) % (1 << 32)).to_bytes(4, "big")
    elif how == "bounds":
        va = c.mr_va + c.mr_length - rng.randint(0, 8)
        f[reth:reth + 8] = va.to_bytes(8, "big")
    elif how == "qp":
        f[62 + 5:62 + 8] = wire.PROBE_DQP.to_bytes(3, "big")
    elif how == "opcode":
        f[62] = rng.choice([0x00, 0x04, 0xC5, 0xCC, 0xDF, 0xFF])
    elif how == "short":
        f = f[:HEAD + rng.randint(0, wire.METH.length + wire.RETH.length - 1)] + bytes(4)
    elif how == "psn":
        psn = (bth["psn"] + 300 + rng.randint(0, 5000)) % (1 << 24)
        f[62 + 9:62 + 12] = psn.to_bytes(3, "big")
    else:
        meth = wire.METH.unpack(frame[HEAD:])
        msn = (meth["msn"] + messages + rng.randint(0, 1000)) % (1 << 16)
        f[HEAD + 2:HEAD + 4] = msn.to_bytes(2, "big")
    return reseal(bytes(f))


class Rx:
    """The DUT with its environment: plane sources, host memory, sinks for what it gives."""

    def __init__(self, dut, rng, p):
        self.dut, self.rng, self.p = dut, rng, p
        self.qps = p["qps"]
        self.planes = [source(dut, f"plane{k}") for k in range(p["planes"])]
        self.ctx_write = source(dut, "ctx_write")
        self.init = source(dut, "init")
        bp = p.get("backpressure", 0.0)
        self.mem = HostMemory(dut, read=None, write="mem", rng=rng, backpressure=bp)
        self.cpl = sink(dut, "cpl", rng, bp)
        self.ack = sink(dut, "ack", rng, bp)
        self.feedback = sink(dut, "feedback", rng, bp)
        self.rules = [StreamRules(dut, n) for n in ("mem__wr", "cpl", "ack", "feedback")]
        self.sent, self.plane = 0, None
        dut.coalesce.value = p.get("coalesce", 4)
        dut.timeout.value = FOREVER

    async def configure(self, q, c: RxQp):
        static = {"state": c.state, "dqp": 0x100 + q, "mtu": 3, "mode": SrMode.USID,
                  "template": 0, "dst_mac": 0x020000000002, "dst_ip": 2, "rkey": c.rkey,
                  "mr_va": c.mr_va, "mr_length": c.mr_length}
        await self.ctx_write.send(encode(context_write_layout(self.qps),
                                         {"qp": q, "static": static, "seq": {}}))
        await self.init.send(encode(init_layout(self.qps),
                                    {"qp": q, "psn": c.rx_psn, "msn": c.rx_msn}))
        await self.ctx_write.wait()
        await self.init.wait()

    async def send(self, frame: bytes, plane: int):
        """One frame, wholly taken before the next is offered. Frames of one plane keep their
        order; before it changes planes the DUT has judged every frame sent (the merge serves
        planes in turn, so a frame waiting on one plane may otherwise be overtaken), so the DUT
        judges in the order sent."""
        if plane != self.plane and self.sent:
            await self.settle(self.sent, linger=0)
        self.plane = plane
        src = self.planes[plane]
        await src.send(frame)
        await with_timeout(src.wait(), 20 * len(frame) + 2000, "ns")
        self.sent += 1

    async def counters(self):
        await ClockCycles(self.dut.clk, 2)
        return {o: int(getattr(self.dut, f"outcome_{o.name.lower()}").value) for o in RxOutcome}

    async def handled(self):
        """Frames the front end dropped or the transport judged."""
        await ClockCycles(self.dut.clk, 2)
        return sum(int(getattr(self.dut, n).value) for n in rx_counter_names()
                   if n.startswith(("drop_", "outcome_")))

    async def settle(self, total, linger=200):
        """Waits until the DUT has dropped or judged ``total`` frames, then ``linger`` cycles
        more."""
        for _ in range(2000):
            if await self.handled() >= total:
                await ClockCycles(self.dut.clk, linger + 1)
                return
        raise AssertionError(f"the DUT handled {await self.handled()} of {total} frames")


async def take(snk, layout, what):
    """The next record on ``snk``; fails if none comes."""
    try:
        frame = await with_timeout(snk.recv(), 200, "us")
    except TimeoutError:
        raise AssertionError(f"no {what} came") from None
    return plain(decode(layout, frame.tdata))


def contexts(rng, qps):
    """QP 2 (the probe QP) is left in RESET; one QP's PSNs wrap, another's MSNs."""
    out = {}
    for q in range(qps):
        if q == wire.PROBE_DQP:
            out[q] = RxQp(state=QpState.RESET.value)
            continue
        out[q] = RxQp(state=rng.choice([QpState.RTS, QpState.RTR]).value,
                      rkey=rng.getrandbits(32), mr_va=(0x10 + q) << 32 | rng.getrandbits(12) << 12,
                      mr_length=REGION, rx_psn=rng.getrandbits(24), rx_msn=rng.getrandbits(16))
    first = [q for q in out if q != wire.PROBE_DQP]
    out[first[0]].rx_psn = (1 << 24) - 20
    out[first[-1]].rx_msn = (1 << 16) - 3
    return out


def writes(rng, q, c: RxQp, count, max_len):
    """The packets of ``count`` writes into QP ``q``'s region, as its peer would send them."""
    mtu = rng.choice([m for m in MTU_CODES.values() if m <= 1024])
    peer = QueuePair(dqp=q, mtu=mtu, next_psn=c.rx_psn, msn=c.rx_msn)
    at, pkts = 0, []
    for _ in range(count):
        n = rng.randint(1, max_len)
        if at + n > c.mr_length:
            at = 0
        payload = rng.randbytes(n)
        imm = rng.getrandbits(32) if rng.random() < 0.5 else None
        wr = WriteRequest(va=c.mr_va + at, rkey=c.rkey, data=payload, imm=imm)
        pkts += [raw(p) for _, p in segment(peer, wr, lambda: rng.getrandbits(32),
                                            rng.getrandbits(16))]
        at += n
    return pkts


def control(rng, q, opcode):
    """A well-formed probe (to the probe QP, naming ``q``) or feedback packet for ``q``."""
    while True:
        pkt = random_mrc(rng)
        if pkt[L.BTH].opcode == opcode:
            break
    pkt[L.BTH].dqp = wire.PROBE_DQP if opcode == wire.Opcode.PROBE else q
    if opcode == wire.Opcode.PROBE:
        pkt[L.PETH].dpdcid = q
    pkt[L.BTH].icrc = None
    return raw(pkt)


def arrivals(rng, ctxs, p):
    """(frame, arrival traffic class) in the order they are sent."""
    streams = {}
    for q, c in ctxs.items():
        if c.state == QpState.RESET.value:
            continue
        pkts = writes(rng, q, c, p["writes"], p["max_len"])
        for i in range(len(pkts) - 1):                 # reordered within a short distance
            j = min(len(pkts) - 1, i + rng.randint(1, 12))
            if rng.random() < 0.3:
                pkts[i], pkts[j] = pkts[j], pkts[i]
        out = []
        for f in pkts:
            tc = (wire.DscpClass.DATA_TRIMMABLE << 2) | 0b10
            r = rng.random()
            if r < 0.05:
                out.append(trim(f, last_hop=rng.random() < 0.5))   # trimmed, then sent whole
            elif r < 0.08:
                pr = control(rng, q, wire.Opcode.PROBE)
                out.append(set_tc(pr, tc_of(pr) | 0b11) if rng.random() < 0.3 else pr)
            elif r < 0.12:
                out.append(control(rng, q, rng.choice([wire.Opcode.SACK, wire.Opcode.NACK])))
            elif r < 0.20:
                out.append(spoil(rng, f, c, p["messages"]))
            if rng.random() < 0.06:
                tc |= 0b11                              # ECN-CE on the way
            out.append(set_tc(f, tc))
            if rng.random() < 0.05:
                out.append(f)                           # a duplicate
        streams[q] = out
    order = [q for q in streams for _ in streams[q]]
    rng.shuffle(order)
    pos = dict.fromkeys(streams, 0)
    frames = []
    for q in order:
        frames.append(streams[q][pos[q]])
        pos[q] += 1
    return frames


def on_wire(rng, frame: bytes) -> bytes:
    """Plain, or SRv6-encapsulated with or without an SRH (the outer header copies the inner's
    traffic class, so the arrival class is the same)."""
    kind = rng.choice(["plain", "outer", "srh"])
    if kind == "plain":
        return frame
    ev = LAYOUT.make(rng.randrange(2), rng.randrange(4), rng.getrandbits(32))
    hops = rng.randint(1, 7) if kind == "outer" else rng.randint(8, 28)
    return raw(encapsulate(Ether(frame), _template(rng, hops), LAYOUT, ev))


def plain(record: dict) -> dict:
    """A decoded record with its enum fields as numbers, to compare with the model's."""
    return {k: getattr(v, "value", v) for k, v in record.items()}


@cocotb.test()
async def receiver_does_what_the_model_says(dut):
    p = params()
    rng = random.Random(p["seed"])
    await setup(dut)
    rx = Rx(dut, rng, p)
    ctxs = contexts(rng, rx.qps)
    for q, c in ctxs.items():
        if c.mr_length:
            rx.mem.map(c.mr_va, c.mr_length)
        await rx.configure(q, c)
    dut._log.info("QPs set up")
    model = Receiver(rx.qps, ctxs, window=p["window"], messages=p["messages"],
                     coalesce=p.get("coalesce", 4))

    frames = arrivals(rng, ctxs, p)
    dut._log.info("sending %d frames", len(frames))
    for k, f in enumerate(frames):
        model.receive(f, tc_of(f))
        dut._log.debug("frame %d", k)
        await rx.send(on_wire(rng, f), rng.randrange(len(rx.planes)))
    await rx.settle(len(frames))

    counts = await rx.counters()
    dut._log.info("judged: %s", {o.name: n for o, n in counts.items() if n})
    got_acks = [await take(rx.ack, ack_layout(rx.qps), f"SACK/NACK {k} of {len(model.acks)}")
                for k in range(len(model.acks))]
    for k, (want, got) in enumerate(zip(model.acks, got_acks, strict=True)):
        d = _diff(want, got)
        assert not d, f"ack {k} of {len(model.acks)}:\n" + "\n".join(d)
    assert rx.ack.empty(), "the DUT sent more acknowledgements than the model"

    # Then the timeout: each QP with arrivals not yet acknowledged gets one SACK.
    owed = model.flush()
    dut.timeout.value = 100
    late = {}
    for _ in range(len(owed)):
        a = await take(rx.ack, ack_layout(rx.qps), "timeout SACK")
        late[a["qp"]] = a
    for q, want in owed.items():
        assert q in late, f"QP {q} got no timeout SACK"
        d = _diff(want, late[q])
        assert not d, f"timeout SACK of QP {q}:\n" + "\n".join(d)
    await ClockCycles(dut.clk, 500)
    assert rx.ack.empty(), "a QP was acknowledged twice after its timeout"

    cpls = []
    for k in range(len(model.completions)):
        try:
            cpls.append(await take(rx.cpl, completion_layout(rx.qps), f"completion {k}"))
        except AssertionError:
            raise AssertionError(f"completions: expected {model.completions}, got {cpls}") \
                from None
    for k, (want, got) in enumerate(zip(model.completions, cpls, strict=True)):
        d = _diff(want, got)
        assert not d, f"completion {k}:\n" + "\n".join(d)
    assert rx.cpl.empty(), "the DUT completed more messages than the model"
    assert len(model.completions) == p["writes"] * sum(
        1 for c in ctxs.values() if c.state != QpState.RESET.value), "a message never completed"

    fb = [await take(rx.feedback, transport_layout(len(rx.planes)), "feedback record")
          for _ in range(len(model.feedback))]
    for got, frame in zip(fb, model.feedback, strict=True):
        bth = wire.BTH.unpack(frame[62:])
        want = {"opcode": bth["opcode"], "qp": bth["dqp"], "psn": bth["psn"],
                "ext": int.from_bytes(frame[HEAD:HEAD + 36].ljust(36, b"\0"), "little")}
        d = _diff(want, got)
        assert not d, "feedback record:\n" + "\n".join(d)
    assert rx.feedback.empty()

    # Memory: exactly the model's writes, nothing else.
    for q, (va, want) in model.regions().items():
        got = await rx.mem.read_bytes(va, len(want))
        bad = [i for i in range(len(want)) if want[i] != got[i]]
        assert not bad, f"QP {q} region differs at {len(bad)} bytes, first at {bad[0]:#x}"

    counts = await rx.counters()
    for o in RxOutcome:
        assert counts[o] == model.counts[o], f"outcome_{o.name.lower()}: {counts[o]} != " \
                                             f"{model.counts[o]}"
    assert int(dut.ooo.value) == model.ooo
    assert int(dut.completions.value) == len(model.completions)
    assert int(dut.sacks.value) == sum(a["kind"] == 0 for a in model.acks) + len(owed)
    assert int(dut.nacks.value) == sum(a["kind"] == 1 for a in model.acks)
    assert int(dut.place_errors.value) == 0
    for r in rx.rules:
        r.check()
    dut._log.info("%d frames: %s; %d SACK/NACK, %d completions", len(frames),
                  {o.name: n for o, n in model.counts.items() if n}, len(model.acks),
                  len(model.completions))


# --- One malformed input at a time -----------------------------------------------------------------

def _srh(rng, frame):
    """The frame SRv6-encapsulated with an SRH (8 or more uSIDs need one)."""
    ev = LAYOUT.make(rng.randrange(2), rng.randrange(4), rng.getrandbits(32))
    return raw(encapsulate(Ether(frame), _template(rng, rng.randint(8, 28)), LAYOUT, ev))


def _put(frame, off, value: bytes):
    return frame[:off] + value + frame[off + len(value):]


#: case -> (what becomes of a good data packet, the counter that must move). ``None`` as the
#: frame means the case sends it in its own way (see the test).
MALFORMED = {
    "ethertype": (lambda rng, f, c: _put(f, 12, b"\x08\x00"), "drop_ethertype"),
    "ip_version": (lambda rng, f, c: _put(f, 14, bytes([0x40 | f[14] & 0xF])), "drop_ip_version"),
    "ip_length": (lambda rng, f, c: _put(f, 18, (len(f) - 53).to_bytes(2, "big")), "drop_length"),
    "udp_length": (lambda rng, f, c: _put(f, 58, (len(f) - 55).to_bytes(2, "big")), "drop_length"),
    "trailing_bytes": (lambda rng, f, c: f + b"\x00\x01", "drop_length"),
    "not_udp": (lambda rng, f, c: _put(f, 20, b"\x06"), "drop_not_udp"),
    "udp_port": (lambda rng, f, c: _put(f, 56, (4792).to_bytes(2, "big")), "drop_not_roce"),
    "srh_segments_left": (lambda rng, f, c: (lambda s: _put(s, 57, bytes([s[58] + 1])))(
        _srh(rng, f)), "drop_srh_malformed"),
    "srh_length": (lambda rng, f, c: (lambda s: _put(s, 55, bytes([s[55] + 2])))(
        _srh(rng, f)), "drop_srh_malformed"),
    "srh_routing_type": (lambda rng, f, c: _put(_srh(rng, f), 56, b"\x03"), "drop_srh_malformed"),
    "cut_mid_header": (lambda rng, f, c: f[:rng.randint(20, 60)], "drop_truncated"),
    "icrc": (lambda rng, f, c: f[:-1] + bytes([f[-1] ^ 0x5A]), "drop_icrc"),
    # Only data packets are trimmed: a control packet marked so is still judged by its ICRC.
    "trimmed_sack_bad_icrc": (lambda rng, f, c: (lambda x: x[:-1] + bytes([x[-1] ^ 1]))(
        set_tc(control(rng, 0, wire.Opcode.SACK), wire.DscpClass.TRIMMED << 2)), "drop_icrc"),
    "trimmed_lasthop_sack_bad_icrc": (lambda rng, f, c: (lambda x: x[:-1] + bytes([x[-1] ^ 1]))(
        set_tc(control(rng, 0, wire.Opcode.SACK), wire.DscpClass.TRIMMED_LASTHOP << 2)),
        "drop_icrc"),
    "oversize": (lambda rng, f, c: reseal(f[:-4] + bytes(4400) + f[-4:]), "drop_cut"),
    "last_never_comes": (None, "drop_cut"),
    "opcode": (lambda rng, f, c: reseal(_put(f, 62, b"\xCC")), "outcome_opcode"),
    "headers_cut_short": (lambda rng, f, c: reseal(f[:HEAD + 10] + bytes(4)), "outcome_truncated"),
    "qp_not_ready": (lambda rng, f, c: reseal(_put(f, 67, (2).to_bytes(3, "big"))), "outcome_qp"),
    "qp_missing": (lambda rng, f, c: reseal(_put(f, 67, (9).to_bytes(3, "big"))), "outcome_qp"),
    "rkey": (lambda rng, f, c: reseal(_put(f, HEAD + 8 + 8, (c.rkey ^ 1).to_bytes(4, "big"))),
             "outcome_rkey"),
    "va_outside": (lambda rng, f, c: reseal(_put(f, HEAD + 8, (c.mr_va + c.mr_length - 3)
                                                 .to_bytes(8, "big"))), "outcome_bounds"),
    "va_below": (lambda rng, f, c: reseal(_put(f, HEAD + 8, (c.mr_va - 1).to_bytes(8, "big"))),
                 "outcome_bounds"),
    "psn_outside_window": (lambda rng, f, c: reseal(_put(f, 71, ((c.rx_psn + 256) % (1 << 24))
                                                          .to_bytes(3, "big"))), "outcome_beyond"),
}
#: the transport NACKs these (the ack generator's rules), for these reasons
NACKED = {"outcome_rkey": wire.NackReason.UNEXP_EVENT, "outcome_bounds": wire.NackReason.UNEXP_EVENT,
          "outcome_beyond": wire.NackReason.PSN_OOR_WINDOW}


@cocotb.parametrize(case=[cocotb.Param(c, name=c) for c in MALFORMED])
@cocotb.test()
async def malformed_input_is_counted_and_harmless(dut, case):
    """The bad packet moves its counter and nothing else, writes nothing, and the good packet
    after it is placed, acknowledged and completed as usual."""
    p = params()
    rng = random.Random(f"{p['seed']}-{case}")
    await setup(dut)
    rx = Rx(dut, rng, {**p, "backpressure": 0.0, "coalesce": 1})
    c = RxQp(state=QpState.RTS.value, rkey=0x12345678, mr_va=0x7000_0000, mr_length=4096,
             rx_psn=rng.getrandbits(24), rx_msn=rng.getrandbits(16))
    rx.mem.map(c.mr_va, c.mr_length)
    await rx.configure(0, c)
    await rx.configure(2, RxQp(state=QpState.RESET.value))
    peer = QueuePair(dqp=0, mtu=1024, next_psn=c.rx_psn, msn=c.rx_msn)

    def good(n):
        wr = WriteRequest(va=c.mr_va + rng.randrange(0, 2048), rkey=c.rkey, data=rng.randbytes(n))
        return raw(segment(peer, wr, lambda: rng.getrandbits(32), 7)[0][1]), wr

    async def counts():
        await ClockCycles(dut.clk, 2)
        return {n: int(getattr(dut, n).value) for n in rx_counter_names()}

    make, counter = MALFORMED[case]
    bad_src, _ = good(rng.randint(600, 1000))
    peer.next_psn, peer.msn = c.rx_psn, c.rx_msn        # the bad one does not use up a PSN
    before = await counts()
    if make is None:
        # The frame stops mid-way for longer than the guard waits, then finishes.
        src = rx.planes[0]
        await src.send(bad_src)
        await ClockCycles(dut.clk, 4)
        src.pause = True
        await ClockCycles(dut.clk, 3 * p["timeout"])
        src.pause = False
        await src.wait()
    else:
        await rx.send(make(rng, bad_src, c), 0)
    expect = {counter: 1}
    if counter.startswith("outcome_"):
        expect["frames"] = 1
    if counter in NACKED:
        expect["nacks"] = 1
    for _ in range(1000):       # until what must move has moved (or never), then a while more
        after_bad = await counts()
        moved = {n: after_bad[n] - before[n] for n in before if after_bad[n] != before[n]}
        if set(expect) <= set(moved):
            break
    await ClockCycles(dut.clk, 200)
    after_bad = await counts()
    moved = {n: after_bad[n] - before[n] for n in before if after_bad[n] != before[n]}
    assert moved == expect, f"{case}: counters moved {moved}, expected {expect}"
    assert bytes(await rx.mem.read_bytes(c.mr_va, c.mr_length)) == bytes(c.mr_length), \
        f"{case}: memory was written"
    if counter in NACKED:
        nack = await take(rx.ack, ack_layout(rx.qps), "NACK")
        bad_psn = wire.BTH.unpack(make(random.Random(0), bad_src, c)[62:])["psn"] \
            if counter == "outcome_beyond" else c.rx_psn
        assert (nack["kind"], nack["nack_reason"], nack["psn"]) == \
            (1, NACKED[counter], bad_psn), f"{case}: expected a NACK {NACKED[counter].name} " \
                                           f"for PSN {bad_psn:#x}, got {nack}"

    # The next good packet goes through as if nothing had happened.
    frame, wr = good(rng.randint(1, 1024))
    await rx.send(frame, 1)
    sack = await take(rx.ack, ack_layout(rx.qps), "SACK for the good packet")
    assert sack["kind"] == 0 and sack["cack"] == (c.rx_psn + 1) % (1 << 24), \
        f"{case}: the good packet's SACK is {sack}"
    cpl = await take(rx.cpl, completion_layout(rx.qps), "completion of the good packet")
    assert cpl["qp"] == 0 and cpl["msn"] == c.rx_msn, f"{case}: completion {cpl}"
    mem = bytes(await rx.mem.read_bytes(c.mr_va, c.mr_length))
    want = bytearray(c.mr_length)
    want[wr.va - c.mr_va:wr.va - c.mr_va + len(wr.data)] = wr.data
    assert mem == bytes(want), f"{case}: memory after the good packet is not just its payload"
    after = await counts()
    assert after["outcome_placed"] == before["outcome_placed"] + 1


@cocotb.test()
async def every_sack_counts_the_busy_qps(dut):
    """With rx.share_period P, each SACK's rcv_cwnd_pen is the number of QPs that took new data
    in this period of P cycles or the last, its own included; with P = 0 it is 0."""
    p = params()
    rng = random.Random(f"{p['seed']}-share")
    await setup(dut)
    rx = Rx(dut, rng, {**p, "backpressure": 0.0, "coalesce": 1})
    period = 20000
    dut.share_period.value = period
    qps = [q for q in range(min(rx.qps, 5)) if q != wire.PROBE_DQP]
    peers = {}
    for q in qps:
        c = RxQp(state=QpState.RTS.value, rkey=0x1000 + q, mr_va=(0x10 + q) << 32,
                 mr_length=4096, rx_psn=rng.getrandbits(24), rx_msn=rng.getrandbits(16))
        rx.mem.map(c.mr_va, c.mr_length)
        await rx.configure(q, c)
        peers[q] = (c, QueuePair(dqp=q, mtu=1024, next_psn=c.rx_psn, msn=c.rx_msn))

    async def write(q, want, what):
        c, peer = peers[q]
        wr = WriteRequest(va=c.mr_va, rkey=c.rkey, data=rng.randbytes(rng.randint(1, 1024)))
        await rx.send(raw(segment(peer, wr, lambda: rng.getrandbits(32), 7)[0][1]), 0)
        sack = await take(rx.ack, ack_layout(rx.qps), f"SACK ({what})")
        await take(rx.cpl, completion_layout(rx.qps), f"completion ({what})")
        assert (sack["kind"], sack["qp"], sack["rcv_cwnd_pen"]) == (0, q, want), \
            f"{what}: a SACK for QP {q} with rcv_cwnd_pen {want} expected, got {sack}"

    for n, q in enumerate(qps, 1):
        await write(q, n, f"QP {q}, busy QP number {n}")
    await write(qps[0], len(qps), "a QP already counted")
    await ClockCycles(dut.clk, 2 * period + 10)
    await write(qps[1], 1, "after two quiet periods")
    dut.share_period.value = 0
    await write(qps[2], 0, "share_period 0")
