"""cocotb test of the RTT estimator: random estimates and samples, near and far from each
other (the 16-bit times wrap), before and after a first sample; the new estimates checked
against the sender's reference model (``verif/rel_model.py``'s ``smoothed``)."""

import random

import cocotb
from cocotb.triggers import Timer

from mrcnic.verif.rel_model import TIME_MOD, smoothed
from mrcnic.verif.tbkit import params


@cocotb.test()
async def the_estimates_follow_each_sample(dut):
    p = params()
    rng = random.Random(p["seed"])
    for case in range(p["cases"]):
        srtt = rng.randrange(TIME_MOD)
        rttvar = rng.choice([0, rng.randrange(1 << 10), rng.randrange(TIME_MOD)])
        sample = rng.choice([srtt, (srtt + rng.randrange(-64, 64)) % TIME_MOD,
                             rng.randrange(TIME_MOD)])
        have = rng.random() < 0.8
        dut.srtt.value, dut.rttvar.value, dut.sample.value = srtt, rttvar, sample
        dut.have_rtt.value = int(have)
        await Timer(1, "ns")
        want = smoothed(srtt if have else None, rttvar, sample)
        got = (int(dut.srtt_next.value), int(dut.rttvar_next.value))
        assert got == want, (f"case {case}: srtt {srtt}, rttvar {rttvar}, sample {sample}"
                             f"{'' if have else ' (first)'}: (srtt, rttvar) {got}, not {want}")
