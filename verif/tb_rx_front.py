"""cocotb test of the RX front end: scapy-built frames, plain and SRv6, good, malformed, cut,
with a bad ICRC, and for another node, arrive on every plane; out come exactly the good ones,
decapsulated to plain RoCEv2, each with the fields of the reference model's parser record that
the transport layer reads, and its plane, in each plane's order; every other frame is counted
under the reason the model gives.
Plane 1 has an SRv6 address of its own (``sid``): there an SRv6 frame for another address, or
with SRH segments left, is for another node; plane 0's is 0 and takes any."""

import random

import cocotb
from cocotb.triggers import ClockCycles

from mrcnic.hdl.header_parser import ParseError
from mrcnic.hdl.rx_front import drop_reasons, rx_meta_layout
from mrcnic.verif.layouts import decode
from mrcnic.verif.parser_model import parse
from mrcnic.verif.tb_header_parser import _diff, _good, _malformed, _set
from mrcnic.verif.tbkit import PcapTap, StreamRules, last_user, params, setup, sink, source


def strip_bytes(frame: bytes, kind: str) -> int:
    """Bytes of outer IPv6 header and SRH after the Ethernet header."""
    return {"plain": 0, "outer": 40}.get(kind, 48 + 8 * frame[55] if kind == "srh" else 0)


#: plane 1's SRv6 address (F3216: block fcbb:bb00, uSID 0x1031)
SID = {1: 0xFCBB_BB00_1031 << 80}


def _carried(record, got):
    """The model's record cut to the fields the front end passes on (those in ``got``)."""
    return {k: _carried(record[k], v) if isinstance(v, dict) else record[k]
            for k, v in got.items()}


def case(rng, p, sid=0):
    """(frame, reason or None if it must pass, what must leave if it passes), for a plane whose
    SRv6 address is ``sid`` (0: any)."""
    K, MAX = p["max_segments"], p["max_frame"]
    r = rng.random()
    if r < 0.5:
        f, kind = _good(rng, p["max_payload"])
        if kind != "plain" and rng.random() < 0.5:
            f = _set(f, 14 + 7, bytes([f[21] ^ 0x3F]))   # outer hop limit: not in the ICRC
        s = strip_bytes(f, kind)
        if kind != "plain" and sid:
            # (the outer destination is not in the ICRC either)
            mine = rng.random() < 0.6
            f = _set(f, 14 + 24, (sid if mine else rng.getrandbits(128)).to_bytes(16, "big"))
            if not mine or (kind == "srh" and f[14 + 40 + 3] != 0):
                return f, "not_mine", None
        return f, None, f[:14] + f[14 + s:]
    if r < 0.65:
        f, kind = _good(rng, p["max_payload"])
        if kind != "plain" and sid:                      # (for this NIC: its ICRC is judged)
            f = _set(f, 14 + 24, sid.to_bytes(16, "big"))
            if kind == "srh" and f[14 + 40 + 3] != 0:
                return f, "not_mine", None
        at = rng.randrange(len(f) - 4, len(f))           # the ICRC itself
        return _set(f, at, bytes([f[at] ^ (1 << rng.randrange(8))])), "icrc", None
    f, why = _malformed(rng, p["max_payload"], MAX)
    if not f:
        f = b"\x00"
    if len(f) > MAX:
        return f, "cut", None                            # the guard cuts it before the parser
    err = parse(f, K, MAX)["error"]
    assert err is not ParseError.NONE, f"a {why} frame parses clean"
    return f, err.name.lower(), None


@cocotb.test()
async def rx_front_passes_only_good_frames(dut):
    p = params()
    rng = random.Random(p["seed"])
    P = p["planes"]
    cases = {pl: [case(rng, p, SID.get(pl, 0)) for _ in range(p["count"] // P)]
             for pl in range(P)}
    await setup(dut)
    dut.sid.value = sum(s << (128 * pl) for pl, s in SID.items() if pl < P)
    srcs = [source(dut, f"plane{pl}", rng, p["gap"]) for pl in range(P)]
    out = sink(dut, "o", rng, p["backpressure"])
    rules = StreamRules(dut, "o")
    taps = [PcapTap(dut, f"plane{pl}", f"rx_plane{pl}") for pl in range(P)] + \
        [PcapTap(dut, "o", "rx_out")]
    for pl in range(P):
        for f, _, _ in cases[pl]:
            srcs[pl].send_nowait(f)

    layout = rx_meta_layout(P)
    want = {pl: [(f, out_f) for f, why, out_f in cases[pl] if why is None] for pl in range(P)}
    got = {pl: [] for pl in range(P)}
    for _ in range(sum(len(w) for w in want.values())):
        g = await out.recv()
        meta = decode(layout, last_user(g))
        pl = meta["plane"]
        assert pl < P and len(got[pl]) < len(want[pl]), f"an unexpected frame left on plane {pl}"
        sent, expect = want[pl][len(got[pl])]
        k = len(got[pl])
        assert bytes(g.tdata) == expect, (f"plane {pl} good frame {k}: {len(g.tdata)} bytes out, "
                                          f"{len(expect)} expected (decapsulated)")
        d = _diff(_carried(parse(sent, p["max_segments"], p["max_frame"]), meta["parsed"]),
                  meta["parsed"])
        assert not d, f"plane {pl} good frame {k}: record differs:\n" + "\n".join(d)
        got[pl].append(g)
    # The dropped frames behind the last good one are still on their way: wait until every
    # frame sent is accounted for (passed or dropped), then a little longer for strays.
    total = sum(len(c) for c in cases.values())

    def accounted():
        return int(dut.frames.value) + sum(int(getattr(dut, f"drop_{w}").value)
                                           for w in drop_reasons())

    for _ in range(1000):
        if accounted() >= total:
            break
        await ClockCycles(dut.clk, 20)
    await ClockCycles(dut.clk, 100)
    assert accounted() == total, f"{accounted()} of {total} frames accounted for"
    assert out.empty(), "a frame that should have been dropped left"
    for why in drop_reasons():
        n = sum(1 for pl in range(P) for _, w, _ in cases[pl] if w == why)
        assert int(getattr(dut, f"drop_{why}").value) == n, \
            f"drop_{why}: {int(getattr(dut, f'drop_{why}').value)}, expected {n}"
    assert int(dut.frames.value) == sum(len(w) for w in want.values())
    for t in taps:
        t.close()
    rules.check()
