"""Whole NICs writing to each other across the simulated multi-plane network, one test per
scenario (verif/scenarios.py): every byte lands byte-exact and every message completes exactly
once on every side (verif/tb_system.py), and what each scenario promises besides holds. Each run
logs its seed; a failure names it. ``make regress`` adds the full-size variants and draws fresh
seeds."""

import json

import pytest

from mrcnic import wire
from mrcnic.verif import builds, harness
from mrcnic.verif.failover_trace import Trace, summed_counters
from mrcnic.verif.scenarios import retransmissions

KIB = 1024


def run_scenario(scenario, seed, options, out, width=64, build=None):
    b = build or builds.nic_system(width, 2)
    harness.run(b, "mrcnic.verif.tb_system",
                builds.system_params(width, scenario, seed, options, out=str(out)),
                tag=f"system_{scenario}_w{width}")
    results = json.loads((out / "results.json").read_text())
    if options.get("transport", "mrc") != "mrc":
        _baseline_holds(results)
    elif scenario == "linkdown":
        # The transfer reached the dead link, and the NICs acted on it: an entry there that lost
        # two packets in time was checked ASSUMED_BAD, or one went ASSUMED_BAD on less (a QP
        # whose hold ends with nothing arrived on the path retires it after one loss).
        dead = {tuple(p) for f in results["failures"] for p in f["paths"]}
        retired = sum(1 for entries in results["ev_states"]["link down"].values()
                      for plane, spine, state in entries
                      if (plane, spine) in dead and state == "ASSUMED_BAD")
        assert results["network"]["dropped_down"] >= 1, results["network"]
        assert results["dead_entries_checked"] >= 1 or retired >= 1, \
            (results["dead_entries_checked"], results["ev_states"]["link down"])
        _model_agrees(out, results)
    if scenario == "lossy":
        assert results["network"]["lost"] > 0 and results["network"]["duplicated"] > 0
    if scenario == "incast":
        assert results["victim"]["done_us"] < results["victim"]["incast_done_us"]
    if scenario == "linerate":
        lr = results["line_rate"]
        assert lr["frames"] == -(-results["bytes"] // 1024) and 0 < lr["fraction"] <= 1, lr
    return results


def _baseline_holds(results):
    """Single-path RoCE and blind spraying (mrcnic.transports): no loss moves an EV, so every
    loaded entry is GOOD at every look, the reliability engine set none SKIP or ASSUMED_BAD
    and sent no probe; a dead link dropped what reached it; single-path QPs keep to their one
    entry."""
    for c in results["rel"]:
        assert c["ev_bad"] == 0 and c["ev_skip"] == 0 and c["probes_sent"] == 0, c
    for label, states in results["ev_states"].items():
        for key, entries in states.items():
            loaded = [i for i, ev in enumerate(results["profiles"][key]) if ev]
            moved = [(i, entries[i]) for i in loaded if entries[i][2] != "GOOD"]
            assert not moved, f"{label}: QP {key}'s EVs moved: {moved}"
    if results["transport"] == "roce":
        data = {int(op) for op in wire.DATA_OPCODES}
        for h, sent in results["sent"].items():
            for _, _, ev, op, dqp, _, _ in sent:
                if op in data:
                    own = results["profiles"][f"{h}.{dqp}"][-1]
                    assert ev == own, f"host {h} QP {dqp} sent on EV {ev:#x}, not {own:#x}"
    if results["failures"]:
        assert results["network"]["dropped_down"] >= 1, results["network"]


def _model_agrees(out, results):
    """The reliability engine's reference model, fed what each NIC's ports carried at the
    times the engine met it (verif/failover_trace.py), retires what the gateware retired
    while the link was down: an entry the NIC read ASSUMED_BAD was so in the model at some
    time while that QP's states were being read, and one the model had ASSUMED_BAD all that
    time the NIC read so. A QP whose replay fell out of step before then (the NIC resent a
    packet the model had not ordered: its timer fired first, its RTT estimate taken where
    SACKs had queued behind data) is held to that on the dead path's entries only, whose
    every packet is lost whatever the model got wrong elsewhere. Over the whole run, a NIC's
    reliability counters are its replays' (:func:`_counters_agree`)."""
    reads = results["snapshot_read_us"]["link down"]
    down = results["ev_states"]["link down"]
    dead = {tuple(p) for f in results["failures"] for p in f["paths"]}
    compared = 0
    traces = {}
    for key, entries in down.items():
        h, q = (int(x) for x in key.split("."))
        a, b = reads[key]
        trace = traces[h, q] = Trace(out, h, q, quiet=True).run_trace()
        in_step = trace.desync_us is None or trace.desync_us > b
        for i, (plane, spine, nic) in enumerate(entries):
            if not in_step and (plane, spine) not in dead:
                continue
            seen = trace.states_between(i, a, b)
            if nic == "ASSUMED_BAD" or seen == {"ASSUMED_BAD"}:
                assert nic == "ASSUMED_BAD" and "ASSUMED_BAD" in seen, (
                    f"host {h} QP {q} entry {i}: {nic} in the NIC, read from {a:.3f} to "
                    f"{b:.3f} us, {sorted(seen)} in the model then"
                    f"{'' if in_step else f' (out of step from {trace.desync_us} us)'}; "
                    f"its events: {[e for e in trace.events if e[1] == i]}")
                compared += 1
    assert compared, "no entry was ASSUMED_BAD while the link was down"
    _counters_agree(results, traces)


#: The reliability counters a replay feeds (it passes over port statuses), and how far the
#: model's may be from the NIC's. Which of two SACKs that came on both planes at once the
#: engine took first, whether a SACK that came within nanoseconds of a grant found the
#: retransmission's record or the packet's, and so whether it was stale, whose ECN mark it
#: renewed and a hole's verdict, are the replay's timing (47 NICs' runs of the link-down
#: scenarios in step: at most 3 apart in ``stale``, 2 in ``ev_skip``, 1 in ``ev_bad``, none
#: in the others; the slack about twice that); what was acknowledged and completed is not.
REPLAYED_COUNTERS = {"rtx_sack": 2, "rtx_trim": 2, "rtx_timeout": 2, "ev_skip": 5, "ev_bad": 2,
                     "probes_sent": 2, "probes_answered": 2, "acked": 0, "completions": 0,
                     "stale": 6, "invalid": 0}


def _counters_agree(results, traces):
    """Over the whole run, each NIC's reliability counters are the model's, summed over the
    NIC's QPs, where every one of its QPs' replays stayed in step (the rare run where no
    NIC's did has its snapshot checked alone)."""
    for h, nic in enumerate(results["rel"]):
        mine = [t for (hh, _), t in traces.items() if hh == h]
        if not mine or any(t.desync_us is not None for t in mine):
            continue
        model = summed_counters(mine)
        for name, slack in REPLAYED_COUNTERS.items():
            assert abs(nic[name] - model[name]) <= slack, (
                f"host {h}: rel.{name} {nic[name]} in the NIC, {model[name]} in the model "
                f"(within {slack})")


@pytest.mark.parametrize("scenario, seed, options", [
    # 1 B to 1 MiB, every QP each way.
    ("clean", 11, {"sizes": [1, 7, 256, 1000, 4096, 10000, 64 * KIB, 1024 * KIB]}),
    ("lossy", 12, {}),
    # 512 KiB for the largest: the link is down long enough (its share of the transfer) for
    # its path to lose two packets early enough to be seen, and its entries to be checked.
    ("linkdown", 13, {"sizes": [1, 7, 256, 1000, 4096, 10000, 64 * KIB, 512 * KIB]}),
    ("planedown", 14, {}),
    # One write alone (its rate against the ports' is make bench's figure, block linerate).
    ("linerate", 20, {"sizes": [128 * KIB]}),
])
def test_scenario(scenario, seed, options, tmp_path, seed_for):
    run_scenario(scenario, seed_for(seed), options, tmp_path)


#: make test's incast: three NICs write to a fourth at once while one of them also writes to
#: another (the victim); the same checks as the full-size 7:1 incast of make regress.
SMALL_INCAST = {"hosts": 4, "sizes": [64 * KIB]}


def test_incast(tmp_path, seed_for):
    """Every byte lands, every message completes once, and the victim finishes while the
    incast runs (its share of the bandwidth is a bench figure: make bench, incast_victim_share)."""
    run_scenario("incast", seed_for(15), SMALL_INCAST, tmp_path,
                 build=builds.incast_system(64, SMALL_INCAST["hosts"]))


@pytest.mark.parametrize("transport", ["roce", "spray"])
def test_a_baseline_rides_out_a_dead_link(transport, tmp_path, seed_for):
    """What MRC is measured against (make bench, block compare): single-path RoCE (one EV per
    QP by hash, go-back-N) and blind spraying (random EVs, selective retransmit), each set
    through the registers alone. Every byte lands across the link's death, and no EV moves."""
    # (the 256 KiB write is NIC 0's QP 0, which the hash puts on the dead link's path; the
    # writes are posted 20 us apart, as the comparison posts its link-down case's)
    r = run_scenario("linkdown", seed_for(18), {"transport": transport, "post_gap_us": 20.0,
                                                "sizes": [256 * KIB, 1, 4096, 64 * KIB]},
                     tmp_path)
    assert retransmissions(r), r["rel"]
    posted = sorted(f["posted_us"] for f in r["flows"] if f["posted_us"] >= 0)
    assert all(b - a >= 20.0 for a, b in zip(posted, posted[1:], strict=False)), posted


@pytest.mark.parametrize("scenario, transport", [("permutation", "roce"),
                                                 ("alltoall", "spray")])
def test_four_nics(scenario, transport, tmp_path, seed_for):
    """A permutation whose single-path flows a hash puts on shared paths, and all-to-all, on
    four NICs: every byte lands, every message completes once."""
    results = run_scenario(scenario, seed_for(19), {"transport": transport,
                                                    "sizes": [32 * KIB]},
                           tmp_path, build=builds.nic_system(64, 4))
    assert results["messages"] == 12


@pytest.mark.regress
def test_incast_7_to_1(tmp_path, seed_for):
    run_scenario("incast", seed_for(15), {}, tmp_path, build=builds.incast_system(64))


@pytest.mark.regress
@pytest.mark.parametrize("scenario", ["lossy", "linkdown", "planedown"])
def test_scenario_1mib(scenario, tmp_path, seed_for):
    """The failure scenarios with writes up to 1 MiB."""
    run_scenario(scenario, seed_for(16), {"sizes": [1, 4096, 64 * KIB, 1024 * KIB]}, tmp_path)


@pytest.mark.regress
@pytest.mark.parametrize("scenario", ["clean", "linkdown"])
def test_scenario_w512(scenario, tmp_path, seed_for):
    """Two 512-bit NICs (128 Gb/s ports) end to end."""
    run_scenario(scenario, seed_for(17), {"sizes": [1, 1000, 64 * KIB, 512 * KIB]}, tmp_path,
                 width=512)
