"""cocotb test of the header parser: scapy-built frames, good and malformed, in; for each frame
the record the reference model computes, and the frame itself unchanged, out."""

import random

import cocotb
from cocotb.triggers import ClockCycles
from scapy.compat import raw

from mrcnic.evmap import EvLayout, UsidTemplate
from mrcnic.hdl.header_parser import ParseError, parsed_layout
from mrcnic.verif.layouts import decode
from mrcnic.verif.packets import encapsulate, random_mrc
from mrcnic.verif.parser_model import parse
from mrcnic.verif.tbkit import PcapTap, params, setup, sink, source

LAYOUT = EvLayout(planes=2, spines=4)


def _template(rng, hops):
    return UsidTemplate(0xFCBB, tuple(rng.randrange(1, 0x1000) & ~0xF | 0x10 for _ in range(hops)),
                        spine_index=rng.randrange(hops))


def _good(rng, max_payload):
    pkt = random_mrc(rng, max_payload=max_payload)
    kind = rng.choice(["plain", "outer", "srh"])
    if kind == "plain":
        return raw(pkt), kind
    ev = LAYOUT.make(rng.randrange(2), rng.randrange(4), rng.getrandbits(32))
    # 1..7 uSIDs fit one carrier (no SRH); more need an SRH of ceil(n / 7) segments.
    hops = rng.randint(1, 7) if kind == "outer" else rng.randint(8, 28)
    return raw(encapsulate(pkt, _template(rng, hops), LAYOUT, ev)), kind


def _set(frame, off, value: bytes):
    f = bytearray(frame)
    f[off:off + len(value)] = value
    return bytes(f)


def _malformed(rng, max_payload, max_frame):
    """A frame that breaks one rule, and the reason the parser must give."""
    frame, kind = _good(rng, max_payload)
    inner = {"plain": 14, "outer": 54}.get(kind, 62 + 16 * (frame[55] // 2) if kind == "srh" else 0)
    cases = ["truncated", "ethertype", "version", "not_udp", "not_roce", "length", "oversize",
             "ip_len", "udp_len"]
    if kind != "plain":
        cases += ["outer_len"]
    if kind == "srh":
        cases += ["srh_type", "srh_left", "srh_len", "srh_nh"]

    def bump(off):   # a 16-bit length field, one more
        return _set(frame, off, ((int.from_bytes(frame[off:off + 2], "big") + 1) & 0xFFFF)
                    .to_bytes(2, "big"))
    case = rng.choice(cases)
    if case == "truncated":
        return frame[:rng.randrange(0, inner + 60)], ParseError.TRUNCATED
    if case == "ethertype":
        return _set(frame, 12, b"\x08\x00"), ParseError.ETHERTYPE
    if case == "version":
        at = rng.choice([14, inner])
        return _set(frame, at, bytes([0x40 | frame[at] & 0xF])), ParseError.IP_VERSION
    if case == "not_udp":
        return _set(frame, inner + 6, b"\x06"), ParseError.NOT_UDP
    if case == "not_roce":
        return _set(frame, inner + 42, (4792).to_bytes(2, "big")), ParseError.NOT_ROCE
    if case == "length":
        return frame + rng.randbytes(rng.randint(1, 8)), ParseError.LENGTH
    if case == "ip_len":
        return bump(inner + 4), ParseError.LENGTH
    if case == "udp_len":
        return bump(inner + 44), ParseError.LENGTH
    if case == "outer_len":
        return bump(14 + 4), ParseError.LENGTH
    if case == "oversize":
        return frame + bytes(max_frame + 1 - len(frame) + rng.randint(0, 64)), ParseError.OVERSIZE
    if case == "srh_type":
        return _set(frame, 56, b"\x03"), ParseError.SRH_MALFORMED
    if case == "srh_left":
        return _set(frame, 57, bytes([frame[58] + 1])), ParseError.SRH_MALFORMED
    if case == "srh_len":
        return _set(frame, 55, bytes([frame[55] + 1])), ParseError.SRH_MALFORMED
    return _set(frame, 54, b"\x11"), ParseError.SRH_MALFORMED


def _diff(expected, got, path=""):
    out = []
    for k, v in expected.items():
        if isinstance(v, dict):
            out += _diff(v, got[k], f"{path}{k}.")
        elif v != got[k]:
            out.append(f"  {path}{k}: expected {v!r}, got {got[k]!r}")
    return out


@cocotb.test()
async def parser_reports_what_the_model_says(dut):
    p = params()
    rng = random.Random(p["seed"])
    K, max_frame = p["max_segments"], p["max_frame"]
    frames = []
    for _ in range(p["count"]):
        if rng.random() < 0.6:
            f, _kind = _good(rng, p["max_payload"])
            want = ParseError.NONE
        else:
            f, want = _malformed(rng, p["max_payload"], max_frame)
        rec = parse(f, K, max_frame)
        # The model must itself call each constructed case what it was built to be.
        assert rec["error"] == want, f"model says {rec['error']} for a {want} frame"
        frames.append((f, rec))
    assert sum(r["error"] is ParseError.NONE for _, r in frames) > len(frames) // 2

    await setup(dut)
    src = source(dut, "i", rng, p["gap"])
    out = sink(dut, "o", rng, p["backpressure"])
    meta = sink(dut, "meta", rng, p["backpressure"])
    tap = PcapTap(dut, "i", "parser_in")
    layout = parsed_layout()
    for f, _ in frames:
        if f:   # an empty frame cannot be sent on a stream: nothing to parse
            await src.send(f)
    sent = [(f, r) for f, r in frames if f]
    for n, (f, rec) in enumerate(sent):
        got_frame = await out.recv()
        assert bytes(got_frame.tdata) == f, f"frame {n} was changed on its way through"
        m = await meta.recv()
        got = decode(layout, m.tdata)
        d = _diff(rec, got)
        assert not d, f"frame {n} ({len(f)} bytes, {rec['error'].name}):\n" + "\n".join(d)
    await ClockCycles(dut.clk, 2)
    assert int(dut.frames.value) == len(sent)
    assert int(dut.errors.value) == sum(r["error"] is not ParseError.NONE for _, r in sent)
    tap.close()
