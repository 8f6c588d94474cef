"""cocotb fuzz of the receive side (RX front end + transport, as the NIC holds it): valid data
packets broken every way a wire or a buggy peer can break them, interleaved with the good ones.

Each round takes the next good write of a ready QP (plain RoCEv2 or SRv6-encapsulated, with
or without an SRH), sends a few broken copies of it, then the packet itself. The broken ones:

* ``cut``: the frame cut short, the cut offset walking through the frame a byte a time;
* ``flip``: one bit flipped in one of its headers (Ethernet, outer IPv6, SRH, inner IPv6, UDP,
  BTH, METH, RETH), the header chosen in turn;
* ``length``: an IPv6 payload length, the UDP length or the SRH's length that lies, the ICRC
  made right again so that the lie is what must catch it;
* ``opcode``: an opcode MRC does not have, resealed;
* ``srh``: an SRH whose segments left or last entry points anywhere;
* ``garbage``: random bytes of random length, now and then behind a real Ethernet header.

What must hold: nothing hangs; after each round the receive side has judged (transport outcome)
or dropped (front-end counter, by reason) every frame sent; the host memory's only region is
the QP's registered one, and no write ever touches anything else (HostMemory answers any other
with an error, counted); and the good packet after the broken ones is placed: its bytes are in
memory, and every byte written is one a good packet carried.
"""

import random

import cocotb
from cocotb.triggers import ClockCycles
from scapy.compat import raw
from scapy.layers.l2 import Ether

from mrcnic import icrc, wire
from mrcnic.hdl.qp_context import QpState
from mrcnic.hdl.rx_event import RxOutcome
from mrcnic.hdl.rx_pipeline import rx_counter_names
from mrcnic.verif.packets import encapsulate
from mrcnic.verif.rx_model import RxQp
from mrcnic.verif.tb_header_parser import _template
from mrcnic.verif.tb_rx import LAYOUT, Rx
from mrcnic.verif.tbkit import params, setup
from mrcnic.verif.tx_model import QueuePair, WriteRequest, segment

KINDS = ("cut", "flip", "length", "opcode", "srh", "garbage")
MRC_OPCODES = {int(op) for op in wire.Opcode}


def headers(frame: bytes) -> list[tuple[str, int, int]]:
    """(name, offset, length) of each header of a good frame, outermost first."""
    out, at = [("ethernet", 0, 14)], 14
    nh = frame[at + 6]
    if nh in (41, 43):                        # SRv6: an outer IPv6 header (and an SRH)
        out.append(("outer_ipv6", at, 40))
        at += 40
        if nh == 43:
            n = 8 + 8 * frame[at + 1]
            out.append(("srh", at, n))
            at += n
    out += [("ipv6", at, 40), ("udp", at + 40, 8), ("bth", at + 48, 12)]
    at += 60
    out += [("meth", at, wire.METH.length), ("reth", at + wire.METH.length, wire.RETH.length)]
    return out


def reseal(frame: bytes, inner: int) -> bytes:
    """The ICRC made right for the bytes of the inner packet (at ``inner``, where it was before
    an edit that may have made the headers lie about it) as they now are."""
    return frame[:-4] + icrc.icrc_bytes(frame[inner:-4])


class Fuzzer:
    def __init__(self, rng):
        self.rng = rng
        self.turn = dict.fromkeys(KINDS, 0)     # walks the cut offsets and the headers

    def broken(self, kind: str, frame: bytes) -> bytes:
        rng, n = self.rng, self.turn[kind]
        self.turn[kind] += 1
        hs = headers(frame)
        inner = next(at for name, at, _ in hs if name == "ipv6")
        if kind == "cut":
            return frame[:1 + n % (len(frame) - 1)]
        if kind == "flip":
            _, at, length = hs[n % len(hs)]
            bit = rng.randrange(8 * length)
            out = bytearray(frame)
            out[at + bit // 8] ^= 0x80 >> bit % 8
            return bytes(out)
        if kind == "length":
            fields = [at + 4 for name, at, _ in hs if name in ("outer_ipv6", "ipv6")]
            fields += [at + 4 for name, at, _ in hs if name == "udp"]
            srh = [at + 1 for name, at, _ in hs if name == "srh"]
            out = bytearray(frame)
            if srh and rng.random() < 0.3:
                out[srh[0]] = rng.randrange(256)
            else:
                at = fields[n % len(fields)]
                true = int.from_bytes(frame[at:at + 2], "big")
                lie = rng.choice([0, 1, true - 1, true + 1, true + rng.randint(2, 64),
                                  rng.randrange(1 << 16)])
                if lie % (1 << 16) == true:
                    lie = true ^ 0x100
                out[at:at + 2] = (lie % (1 << 16)).to_bytes(2, "big")
            return reseal(bytes(out), inner)
        if kind == "opcode":
            bth = next(at for name, at, _ in hs if name == "bth")
            out = bytearray(frame)
            out[bth] = rng.choice([op for op in range(256) if op not in MRC_OPCODES])
            return reseal(bytes(out), inner)
        if kind == "srh":
            if not any(name == "srh" for name, _, _ in hs):
                frame = self.srv6(frame, srh=True)
                hs = headers(frame)
            srh = next(at for name, at, _ in hs if name == "srh")
            out = bytearray(frame)
            out[srh + 3 - rng.randrange(2)] = rng.randrange(256)   # segments left or last entry
            if out == bytearray(frame):
                out[srh + 3] ^= 0x80
            return bytes(out)
        junk = rng.randbytes(rng.randint(1, 300))
        return frame[:14] + junk if rng.random() < 0.5 else junk

    def srv6(self, frame: bytes, srh: bool) -> bytes:
        """The plain frame SRv6-encapsulated (8 or more uSIDs need an SRH)."""
        rng = self.rng
        ev = LAYOUT.make(rng.randrange(2), rng.randrange(4), rng.getrandbits(32))
        usids = rng.randint(8, 20) if srh else rng.randint(1, 6)
        return raw(encapsulate(Ether(frame), _template(rng, usids), LAYOUT, ev))


@cocotb.test()
async def broken_frames_are_counted_and_harmless(dut):
    p = params()
    rng = random.Random(p["seed"])
    rounds, per_round = p["rounds"], p["broken_per_round"]
    await setup(dut)
    rx = Rx(dut, rng, {**p, "backpressure": 0.0, "coalesce": 4})
    c = RxQp(state=QpState.RTS.value, rkey=rng.getrandbits(32), mr_va=0x7000_0000 + (1 << 20),
             mr_length=1 << 16, rx_psn=rng.getrandbits(24), rx_msn=rng.getrandbits(16))
    rx.mem.map(c.mr_va, c.mr_length)        # the registered region is all the memory there is
    await rx.configure(0, c)
    for q in range(1, p["qps"]):
        await rx.configure(q, RxQp(state=QpState.RESET.value))
    peer = QueuePair(dqp=0, mtu=1024, next_psn=c.rx_psn, msn=c.rx_msn)
    fuzz = Fuzzer(rng)
    shadow = bytearray(c.mr_length)         # what the region must hold: the good packets' bytes
    sent = kinds = 0
    counts = dict.fromkeys(KINDS, 0)

    async def counters():
        await ClockCycles(dut.clk, 2)
        return {n: int(getattr(dut, n).value) for n in rx_counter_names()}

    for r in range(rounds):
        size = rng.randint(1, 256)
        wr = WriteRequest(va=c.mr_va + rng.randrange(0, c.mr_length - size), rkey=c.rkey,
                          data=rng.randbytes(size))
        good = raw(segment(peer, wr, lambda: rng.getrandbits(32), rng.getrandbits(16))[0][1])
        style = rng.random()
        if style < 0.3:
            good = fuzz.srv6(good, srh=style < 0.1)
        plane = rng.randrange(p["planes"])
        for _ in range(per_round):
            kind = KINDS[kinds % len(KINDS)]
            kinds += 1
            counts[kind] += 1
            await rx.send(fuzz.broken(kind, good), plane)
            sent += 1
        await rx.send(good, plane)
        sent += 1
        shadow[wr.va - c.mr_va:wr.va - c.mr_va + size] = wr.data
        await rx.settle(sent, linger=0)
        # The good packet is in memory, and every byte there is a good packet's.
        got = bytes(await rx.mem.read_bytes(wr.va, size))
        wrong = sum(a != b for a, b in zip(got, wr.data, strict=True))
        assert got == wr.data, (f"round {r}: the good packet after the broken ones was not "
                                f"placed ({wrong} bytes wrong)")
        if r % 64 == 63 or r == rounds - 1:
            region = bytes(await rx.mem.read_bytes(c.mr_va, c.mr_length))
            wrong = [i for i, (a, b) in enumerate(zip(region, shadow, strict=True)) if a != b]
            assert not wrong, (f"round {r}: {len(wrong)} bytes of the region hold what no good "
                               f"packet carried, first at VA {c.mr_va + wrong[0]:#x}")
        assert rx.mem.errors == 0, f"round {r}: {rx.mem.errors} writes outside the region"
        if r % 500 == 0:
            dut._log.info("round %d of %d: %d frames", r, rounds, sent)

    await ClockCycles(dut.clk, 200)
    final = await counters()
    judged = sum(v for n, v in final.items() if n.startswith(("drop_", "outcome_")))
    assert judged == sent, f"{sent} frames sent, {judged} dropped or judged"
    assert final["outcome_placed"] >= rounds
    assert rx.mem.errors == 0
    drops = {n: v for n, v in final.items() if n.startswith("drop_") and v}
    outcomes = {n: v for n, v in final.items() if n.startswith("outcome_") and v}
    dut._log.info("%d frames (%d rounds; broken: %s); dropped %s; judged %s", sent, rounds,
                  counts, drops, outcomes)
    # Every class of breakage reached the counters it must: cut frames and bit flips the front
    # end, lying lengths its parser, unknown opcodes the transport.
    assert final["drop_truncated"] and final["drop_icrc"] and final["drop_length"], drops
    assert final[f"outcome_{RxOutcome.OPCODE.name.lower()}"] >= counts["opcode"] // 2, outcomes
    assert final["drop_srh_malformed"], drops
