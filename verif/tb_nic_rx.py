"""cocotb test of the whole NIC receiving: set up through its registers with the driver, it
takes a peer's writes (permuted, duplicated, ECN-marked, trimmed, probed, spoilt) on its ports,
places them, completes every message once, and sends each SACK and NACK the receiver's model
computes as a framed, ICRC-sealed, SRv6-encapsulated packet on an EV of the QP's own profile.
The RX counters read back through the driver equal the model's."""

import random

import cocotb
from cocotb.triggers import ClockCycles, with_timeout
from scapy.compat import raw
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from mrcnic import driver, wire
from mrcnic import layers as L
from mrcnic.evmap import ev_split, format_addr
from mrcnic.hdl.qp_context import QpState, SrMode
from mrcnic.hdl.rx_event import completion_layout
from mrcnic.regmap import RX_EVENTS, RX_OUTCOMES
from mrcnic.verif.layouts import decode
from mrcnic.verif.network import tc_of
from mrcnic.verif.packets import assert_frames_equal, encapsulate
from mrcnic.verif.rx_model import Receiver
from mrcnic.verif.tb_header_parser import _diff
from mrcnic.verif.tb_rx import arrivals, contexts, on_wire, plain
from mrcnic.verif.tbkit import params, sink, source
from mrcnic.verif.tx_setup import OUTER_SRC, SRC_IP, SRC_MAC, configure, sent_ev

CONTROL_TC = (wire.DscpClass.CONTROL << 2) | 0b10


def expected_ack(ack, qp, peer, ev, template, layout, mode, next_hops=None) -> bytes:
    """The frame the NIC must send for the model's acknowledgement ``ack`` on EV ``ev``."""
    sport, fl = ev_split(ev)
    if ack["kind"] == 0:
        ext = L.SETH(m=ack["m"], pr=ack["pr"], ack_psn_offset=(ack["psn"] - ack["cack"]) & 0xFFFF,
                     entropy=ack["ev"], spdcid=qp, dpdcid=peer.dqp & 0xFFFF,
                     cack_psn=ack["cack"], sack_offset=ack["sack_offset"],
                     sack_bitmap=ack["sack_bitmap"], tx_timestamp=ack["ts"],
                     ooo_count=ack["ooo_count"], rcvd_bytes=ack["rcvd_bytes"],
                     rcv_cwnd_pen=ack["rcv_cwnd_pen"])
        op = wire.Opcode.SACK
    else:
        ext = L.NETH(nack_reason=ack["nack_reason"], entropy=ack["ev"], spdcid=qp,
                     dpdcid=peer.dqp & 0xFFFF, nack_psn=ack["psn"], tx_timestamp=ack["ts"])
        op = wire.Opcode.NACK
    pkt = Ether(raw(Ether(src=SRC_MAC, dst=peer.dst_mac)
                    / IPv6(src=format_addr(SRC_IP), dst=format_addr(peer.dst_ip),
                           tc=CONTROL_TC, fl=fl, hlim=64)
                    / UDP(sport=sport, dport=wire.ROCE_UDP_PORT, chksum=0)
                    / L.BTH(opcode=int(op), pkey=0xFFFF, dqp=peer.dqp, psn=ack["psn"]) / ext))
    if mode is not SrMode.PLAIN:
        pkt = encapsulate(pkt, template, layout, ev, src=OUTER_SRC,
                          force_srh=mode is SrMode.USID_SRH)
    hop = (next_hops or {}).get(layout.plane(ev))
    if hop is not None:
        pkt[Ether].dst = hop
    return raw(pkt)


def inner_ack(frame: bytes) -> dict:
    """The acknowledgement a frame the NIC sent carries, in the model's terms."""
    pkt = Ether(frame)
    bth = pkt[L.BTH]
    if bth.opcode == wire.Opcode.SACK:
        s = pkt[L.SETH]
        return {"kind": 0, "qp": s.spdcid, "psn": bth.psn, "ev": s.entropy,
                "ts": s.tx_timestamp, "m": s.m, "pr": s.pr, "nack_reason": 0, "cack": s.cack_psn,
                "sack_offset": s.sack_offset, "sack_bitmap": s.sack_bitmap,
                "ooo_count": s.ooo_count, "rcvd_bytes": s.rcvd_bytes,
                "rcv_cwnd_pen": s.rcv_cwnd_pen}
    n = pkt[L.NETH]
    return {"kind": 1, "qp": n.spdcid, "psn": bth.psn, "ev": n.entropy, "ts": n.tx_timestamp,
            "m": 0, "pr": 0, "nack_reason": n.nack_reason, "cack": 0, "sack_offset": 0,
            "sack_bitmap": 0, "ooo_count": 0, "rcvd_bytes": 0, "rcv_cwnd_pen": 0}


@cocotb.test()
async def nic_receives_and_acknowledges(dut):
    p = params()
    rng = random.Random(p["seed"])
    Q, P = p["qps"], p["planes"]
    ctxs = contexts(rng, Q)
    cfg = await configure(dut, p, rng, receive=ctxs,
                          states={q: QpState(c.state) for q, c in ctxs.items()})
    regs = cfg.regs
    await regs.run(driver.set_ack_policy(p["coalesce"], (1 << 32) - 1))
    model = Receiver(Q, ctxs, window=p["window"], messages=p["messages"], coalesce=p["coalesce"])
    ports = [source(dut, f"rx_plane{k}") for k in range(P)]
    outs = [sink(dut, f"plane{k}") for k in range(P)]
    cpl = sink(dut, "rx_cpl")

    async def judged():
        c = await regs.run(driver.rx_counters())
        return sum(v for n, v in c.items() if n.startswith(("drop_", "outcome_")))

    # Frames of one port keep their order; before switching ports every frame sent has been
    # judged (the merge serves ports in turn), so the NIC judges them in the order sent.
    frames = arrivals(rng, ctxs, {"writes": p["writes"], "max_len": p["max_len"],
                                  "messages": p["messages"]})
    port = None
    for k, f in enumerate(frames):
        model.receive(f, tc_of(f))
        plane = rng.randrange(P)
        if plane != port and k:
            for _ in range(1000):
                if await judged() >= k:
                    break
            else:
                raise AssertionError(f"the NIC judged {await judged()} of {k} frames")
        port, src = plane, ports[plane]
        await src.send(on_wire(rng, f))
        await with_timeout(src.wait(), 40 * len(f) + 4000, "ns")

    # Every acknowledgement, from whichever plane its EV chose, in the model's order per plane.
    got = {k: [] for k in range(P)}
    for _ in range(len(model.acks)):
        try:
            await with_timeout(_any(outs, got), 400, "us")
        except TimeoutError:
            raise AssertionError(f"{sum(map(len, got.values()))} of {len(model.acks)} "
                                 "acknowledgements came") from None
    await ClockCycles(dut.clk, 500)
    assert all(o.empty() for o in outs), "the NIC sent more than the model's acknowledgements"
    seen = {k: [inner_ack(f) for f in fs] for k, fs in got.items()}
    for k in seen:
        for n, have in enumerate(seen[k]):
            if have not in model.acks:
                near = [a for a in model.acks if (a["kind"], a["qp"], a["psn"]) ==
                        (have["kind"], have["qp"], have["psn"])]
                diff = "\n".join(_diff(near[0], have)) if near else f"  {have}"
                raise AssertionError(f"plane {k}, acknowledgement {n} is none of the model's:\n"
                                     f"{diff}")
    if interleaving(model.acks, [seen[k] for k in range(P)]) is None:
        flat = [a for k in seen for a in seen[k]]
        extra = [a for a in flat if flat.count(a) > model.acks.count(a)]
        short = [a for a in model.acks if flat.count(a) < model.acks.count(a)]
        raise AssertionError("each plane has acknowledgements of the model's, but not the "
                             f"model's in its order: sent more than the model {extra[:3]}, "
                             f"fewer {short[:3]}; per plane {[len(x) for x in seen.values()]}, "
                             f"model {len(model.acks)}")
    for k, frames_k in got.items():
        for frame, have in zip(frames_k, seen[k], strict=True):
            q = have["qp"]
            ev = sent_ev(frame)
            assert ev in cfg.profiles[q], f"QP {q}'s acknowledgement went on EV {ev:#x}, " \
                                          "not one of its profile"
            assert cfg.layout.plane(ev) == k, f"EV {ev:#x} is not on plane {k}"
            want = expected_ack(have, q, cfg.qps[q], ev, cfg.templates[q % p["templates"]],
                                cfg.layout, cfg.modes[q], cfg.next_hops)
            assert_frames_equal(want, frame, f"QP {q} acknowledgement")

    cpls = [plain(decode(completion_layout(Q), (await cpl.recv()).tdata))
            for _ in model.completions]
    assert cpls == model.completions
    for q, (va, want) in model.regions().items():
        assert bytes(await cfg.mem.read_bytes(va, len(want))) == want, \
            f"QP {q}'s memory region differs"

    counters = await regs.run(driver.rx_counters())
    for o, name in zip(model.counts, RX_OUTCOMES, strict=True):
        assert counters[f"outcome_{name}"] == model.counts[o], \
            f"rx.outcome_{name} {counters[f'outcome_{name}']} != {model.counts[o]}"
    assert counters["completions"] == len(model.completions)
    assert counters["sacks"] == sum(a["kind"] == 0 for a in model.acks)
    assert counters["nacks"] == sum(a["kind"] == 1 for a in model.acks)
    assert counters["ooo"] == model.ooo
    assert set(RX_EVENTS) <= set(counters)
    dut._log.info("%d frames in, %d acknowledgements out, %d completions", len(frames),
                  len(model.acks), len(model.completions))


def interleaving(model: list, planes: list[list]):
    """Which plane took each of the model's items, such that every plane holds its items in
    the model's order (None if there is no such assignment). Equal items make the choice
    ambiguous, so the search backtracks."""
    stack, seen = [(0, (0,) * len(planes), ())], set()
    while stack:
        i, ptrs, path = stack.pop()
        if i == len(model):
            if all(p == len(pl) for p, pl in zip(ptrs, planes, strict=True)):
                return path
            continue
        if (i, ptrs) in seen:
            continue
        seen.add((i, ptrs))
        for k, pl in enumerate(planes):
            if ptrs[k] < len(pl) and pl[ptrs[k]] == model[i]:
                nxt = ptrs[:k] + (ptrs[k] + 1,) + ptrs[k + 1:]
                stack.append((i + 1, nxt, path + (k,)))
    return None


async def _any(outs, got):
    """The next frame from whichever sink has one."""
    while True:
        for k, o in enumerate(outs):
            if not o.empty():
                got[k].append(bytes((await o.recv()).tdata))
                return
        await ClockCycles(outs[0].clock, 1)
