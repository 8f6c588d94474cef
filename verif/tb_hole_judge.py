"""cocotb test of the hole judge: random packets, near and far from the count and time rules'
edges (the 16-bit times wrap), on paths marked, suspect or neither, sends trimmed or not; the
verdicts checked against the sender's reference model (``verif/rel_model.py``'s
``rack_timed`` and ``blame``)."""

import random

import cocotb
from cocotb.triggers import Timer

from mrcnic.enums import EvState
from mrcnic.verif.rel_model import PSN_MOD, TIME_MOD, blame, rack_timed
from mrcnic.verif.tbkit import params


def _near(rng, at, spread, mod):
    return (at + rng.randrange(-spread, spread + 1)) % mod


@cocotb.test()
async def a_hole_is_judged_as_the_model_judges_it(dut):
    p = params()
    rng = random.Random(p["seed"])
    paths = p["paths"]
    seen = {"counted": 0, "timed": 0, "kept": 0, "retire": 0, "suspect": 0, "unmark": 0,
            "trimmed": 0, "stale_rack": 0}
    for case in range(p["cases"]):
        reorder = rng.choice([0, 1, 3, 8, rng.randrange(1 << 16)])
        hd = rng.choice([0, rng.randrange(300), rng.randrange(PSN_MOD)])
        pd = rng.choice([_near(rng, hd - reorder, 3, PSN_MOD), rng.randrange(300),
                         rng.randrange(PSN_MOD)])
        reo_wnd = rng.choice([0, 16, rng.randrange(1 << 16)])
        rack_on = rng.random() < 0.8
        rack_ts, now = rng.randrange(TIME_MOD), rng.randrange(TIME_MOD)
        if rng.random() < 0.6:
            now = (rack_ts + rng.choice([rng.randrange(1 << 14), _near(rng, 1 << 14, 4,
                                                                       TIME_MOD)])) % TIME_MOD
        time = rng.choice([_near(rng, rack_ts - reo_wnd, 3, TIME_MOD),
                           _near(rng, rack_ts - TIME_MOD // 2, 3, TIME_MOD),
                           rng.randrange(TIME_MOD)])
        trim_time = time if rng.random() < 0.25 else rng.randrange(TIME_MOD)
        record = rng.random() < 0.85
        path = rng.randrange(paths)
        marked = {q for q in range(paths) if rng.random() < 0.3}
        suspect = {q for q in range(paths) if rng.random() < 0.3}
        for name, value in (("pd", pd), ("hd", hd), ("reorder", reorder), ("reo_wnd", reo_wnd),
                            ("rack_on", int(rack_on)), ("rack_ts", rack_ts), ("now", now),
                            ("time", time), ("trim_time", trim_time), ("record", int(record)),
                            ("lost_on", 1 << path), ("marked", sum(1 << q for q in marked)),
                            ("suspects", sum(1 << q for q in suspect))):
            getattr(dut, name).value = value
        await Timer(1, "ns")
        counted = pd + reorder < hd
        timed = record and rack_timed(reo_wnd, rack_ts if rack_on else None, time, now)
        state, retire, suspects, unmark = blame(path, trim_time == time, marked, suspect)
        want = {"counted": int(counted), "timed_on": int(bool(reo_wnd) and rack_on),
                "lost": int(counted or timed), "state": state.value, "retire": int(retire),
                "suspect": int(suspects), "unmark": int(unmark)}
        got = {name: int(getattr(dut, name).value) for name in want}
        diff = {k: (got[k], v) for k, v in want.items() if got[k] != v}
        assert not diff, (f"case {case}: pd {pd} hd {hd} reorder {reorder} reo_wnd {reo_wnd} "
                          f"rack {rack_ts if rack_on else None} now {now} time {time} "
                          f"trim {trim_time} path {path} marked {marked} suspect {suspect}: "
                          f"(got, want) {diff}")
        seen["counted"] += counted
        seen["timed"] += timed and not counted
        seen["kept"] += not (counted or timed)
        seen["retire"] += retire
        seen["suspect"] += suspects
        seen["unmark"] += unmark
        seen["trimmed"] += trim_time == time and state is EvState.SKIP
        seen["stale_rack"] += (rack_on and bool(reo_wnd) and (now - rack_ts) % TIME_MOD
                               >= 1 << 14 and not timed and record
                               and rack_timed(reo_wnd, rack_ts, time, None))
    assert all(seen.values()), f"cases never seen: {seen}"
