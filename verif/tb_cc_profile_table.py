"""cocotb test of the CC profile table: every cycle, random profile writes, QP assignments and
lookups at once, each lookup checked against a model of the table (profile 0 is the base, a QP
assigned in the very cycle of its lookup already answers with its new profile, a write to
profile 0 changes nothing)."""

import random

import cocotb
from cocotb.triggers import FallingEdge, RisingEdge, Timer

from mrcnic.hdl.cc_profile_table import cc_params_layout
from mrcnic.verif.layouts import as_int, decode
from mrcnic.verif.tbkit import params, setup

LAYOUT = cc_params_layout()


def random_params(rng) -> dict:
    return {name: rng.randrange(1 << f.width) for name, f in LAYOUT}


@cocotb.test()
async def each_qp_follows_the_profile_it_was_given(dut):
    p = params()
    rng = random.Random(p["seed"])
    qps, profiles = p["qps"], p["profiles"]
    qp_bits = max(1, (qps - 1).bit_length())
    prof_bits = max(1, (profiles - 1).bit_length())
    await setup(dut)
    base = random_params(rng)
    dut.base.value = as_int(LAYOUT, base)
    stored = {k: None for k in range(1, profiles)}      # None: never written (not looked at)
    chosen = [0] * qps                                  # every QP on profile 0 after reset
    looked = {k: 0 for k in range(profiles)}
    for cycle in range(p["cycles"]):
        await FallingEdge(dut.clk)
        # this cycle's inputs
        write = rng.random() < 0.3
        w_prof = rng.randrange(profiles)
        w_params = random_params(rng)
        assign = rng.random() < 0.3
        a_qp, a_prof = rng.randrange(qps), rng.randrange(profiles)
        if rng.random() < 0.05:
            base = random_params(rng)
        # ask for a QP just assigned in half the cycles that assign one
        qp = a_qp if assign and rng.random() < 0.5 else rng.randrange(qps)
        view_qp = rng.randrange(qps)
        dut.base.value = as_int(LAYOUT, base)
        dut.write_tvalid.value = int(write)
        dut.write_tdata.value = w_prof | as_int(LAYOUT, w_params) << prof_bits
        dut.assign_tvalid.value = int(assign)
        dut.assign_tdata.value = a_qp | a_prof << qp_bits
        dut.qp.value, dut.view_qp.value = qp, view_qp
        await Timer(1, "ns")               # the outputs settle, well before the next edge
        assert int(dut.write_tready.value) == 1 and int(dut.assign_tready.value) == 1
        prof = a_prof if assign and a_qp == qp else chosen[qp]
        want = base if prof == 0 else stored[prof]
        if want is not None:
            got = decode(LAYOUT, int(dut.params.value))
            diff = {k: (got[k], v) for k, v in want.items() if got[k] != v}
            assert not diff, f"cycle {cycle}: QP {qp} on profile {prof}: (got, want) {diff}"
            looked[prof] += 1
        assert int(dut.view_profile.value) == chosen[view_qp], f"cycle {cycle}: QP {view_qp}"
        await RisingEdge(dut.clk)          # what the edge stores
        if write and w_prof != 0:
            stored[w_prof] = w_params
        if assign:
            chosen[a_qp] = a_prof
    assert all(looked[k] > 0 for k in range(profiles)), f"profiles never looked at: {looked}"
