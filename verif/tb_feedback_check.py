"""cocotb test of the feedback check: random SACKs and NACKs about PSNs behind, inside and past
a QP's window (the 24-bit PSNs wrap), bitmaps reaching to nxt and past it; the verdicts checked
against the sender's reference model (``verif/rel_model.py``'s ``sack_verdict`` and
``nack_verdict``)."""

import random

import cocotb
from cocotb.triggers import Timer

from mrcnic.hdl.feedback_check import Verdict
from mrcnic.verif.rel_model import PSN_MOD, nack_verdict, sack_verdict
from mrcnic.verif.tbkit import params

_VERDICT = {None: Verdict.OK, "stale": Verdict.STALE, "invalid": Verdict.INVALID}


def _psn(rng, una, nxt):
    """A PSN behind una, in flight, at nxt or past it, often at an edge."""
    return rng.choice([(una + rng.randrange(-3, 1)) % PSN_MOD, (nxt + rng.randrange(-2, 3)) % PSN_MOD,
                       (una + rng.randrange((nxt - una) % PSN_MOD + 1)) % PSN_MOD,
                       (una - rng.randrange(1, PSN_MOD // 2)) % PSN_MOD,
                       rng.randrange(PSN_MOD)])


@cocotb.test()
async def feedback_is_checked_as_the_model_checks_it(dut):
    p = params()
    rng = random.Random(p["seed"])
    seen = {(kind, v): 0 for kind in ("sack", "nack") for v in Verdict}
    for case in range(p["cases"]):
        una = rng.choice([0, PSN_MOD - 5, rng.randrange(PSN_MOD)])
        nxt = (una + rng.choice([0, 1, rng.randrange(80), rng.randrange(1 << 12)])) % PSN_MOD
        cack = _psn(rng, una, nxt)
        offset = rng.choice([0, 0, 1, rng.randrange(8), rng.randrange(1 << 16)])
        span = (nxt - cack) % PSN_MOD
        width = rng.choice([0, rng.randrange(1, 65), max(0, min(64, span - offset + 1))])
        bitmap = (rng.getrandbits(64) | 1 << (width - 1)) & ((1 << width) - 1) if width else 0
        if rng.random() < 0.2:
            bitmap |= 1
        psn, outstanding = _psn(rng, una, nxt), rng.random() < 0.8
        for name, value in (("una", una), ("nxt", nxt), ("inflight", (nxt - una) % PSN_MOD),
                            ("cack", cack), ("offset", offset), ("bit0", bitmap & 1),
                            ("any", int(bitmap != 0)), ("top", max(0, bitmap.bit_length() - 1)),
                            ("psn", psn), ("outstanding", int(outstanding))):
            getattr(dut, name).value = value
        await Timer(1, "ns")
        want_sack = _VERDICT[sack_verdict(una, nxt, cack, offset, bitmap)]
        want_nack = _VERDICT[nack_verdict(una, nxt, psn, outstanding)]
        got_sack, got_nack = Verdict(int(dut.sack.value)), Verdict(int(dut.nack.value))
        assert got_sack == want_sack, (f"case {case}: una {una} nxt {nxt}, SACK cack {cack} "
                                       f"offset {offset} bitmap {bitmap:#x}: {got_sack.name}, "
                                       f"not {want_sack.name}")
        assert got_nack == want_nack, (f"case {case}: una {una} nxt {nxt}, NACK psn {psn}"
                                       f"{'' if outstanding else ' (SACKed)'}: "
                                       f"{got_nack.name}, not {want_nack.name}")
        if want_sack is Verdict.OK:
            base = (cack + offset) % PSN_MOD
            high = (base + bitmap.bit_length()) % PSN_MOD if bitmap else cack
            got = (int(dut.base.value), int(dut.high.value))
            assert got == (base, high), f"case {case}: (base, high) {got}, not {(base, high)}"
        seen["sack", want_sack] += 1
        seen["nack", want_nack] += 1
    assert all(seen.values()), f"cases never seen: {seen}"
