"""The seed sweep's arithmetic (verif/failover_sweep.py): the seeds it reads, the distribution it
reports. ``make regress`` runs the sweep itself (seeds 1-50 of three configurations)."""

import pytest

from mrcnic.verif import failover_sweep as fs


def test_seeds_read_as_ranges_and_lists():
    assert fs.parse_seeds("1-5") == [1, 2, 3, 4, 5]
    assert fs.parse_seeds("3,7,9") == [3, 7, 9]
    assert fs.parse_seeds("1-3,2,10") == [1, 2, 3, 10]


@pytest.mark.parametrize("text", ["", "a-b", "1-", "5,x"])
def test_bad_seeds_are_refused(text):
    with pytest.raises(ValueError, match="seeds must look like"):
        fs.parse_seeds(text)


def test_percentiles_by_nearest_rank():
    v = list(range(1, 11))
    assert fs.percentile(v, 50) == 5 and fs.percentile(v, 90) == 9
    assert fs.percentile(v, 100) == 10 and fs.percentile([4.0], 90) == 4.0


def test_summary_counts_failures_and_spreads():
    runs = [{"config": "demo", "seed": s, "scenario": "linkdown", "error": None,
             "fct_us": 110.0 + s, "failover_rtts": r}
            for s, r in ((1, 1.5), (2, 2.5), (3, 2.0))]
    runs += [{"config": "demo", "seed": 4, "scenario": "linkdown", "error": "AssertionError: x",
              "fct_us": 150.0, "failover_rtts": 4.0}]
    runs += [{"config": "demo", "seed": s, "scenario": "clean", "error": None, "fct_us": 100.0}
             for s in (1, 2, 3, 4)]
    s = fs.summarise(runs)["demo"]
    assert s["runs"] == 4 and s["passed"] == 3 and s["failed"] == {4: "AssertionError: x"}
    assert s["failover_rtts_worst"] == 4.0 and s["failover_rtts_worst_seed"] == 4
    assert s["failover_rtts_p50"] == 2.25 and s["failover_rtts_mean"] == 2.5
    assert s["fct_inflation_linkdown_worst"] == 1.5
    assert s["fct_inflation_linkdown_worst_seed"] == 4 and s["clean_failed"] == {}


def test_a_seed_over_a_goal_is_named():
    """A run whose failover or inflation misses its goal is listed with its seed and figure
    (a figure at the goal is not); only a failed check fails the sweep."""
    goal = fs.GOALS["failover_rtts"]
    runs = [{"config": "demo", "seed": s, "scenario": "linkdown", "error": None,
             "fct_us": f, "failover_rtts": r}
            for s, r, f in ((1, 1.0, 100.0), (2, goal, 105.0), (3, goal + 0.01, 100.0),
                            (4, 2.0, 120.0))]
    runs += [{"config": "demo", "seed": s, "scenario": "clean", "error": None, "fct_us": 100.0}
             for s in (1, 2, 3, 4)]
    summary = fs.summarise(runs)
    assert summary["demo"]["over_goal"] == {3: {"failover_rtts": round(goal + 0.01, 3)},
                                            4: {"fct_inflation_linkdown": 1.2}}
    assert fs.passed(summary)
    runs[0]["error"] = "AssertionError: x"
    assert not fs.passed(fs.summarise(runs))
    ok = fs.summarise([r for r in runs if r["seed"] == 2])
    assert ok["demo"]["over_goal"] == {}


def test_two_sweeps_compare_seed_by_seed():
    """Only the seeds both sweeps ran count; the mean difference comes with its standard
    error, so a reshuffle (seeds moving both ways) is told from a shift."""
    before = {"demo": {"failover_rtts": {"1": 1.0, "2": 2.0, "3": 3.0, "4": 1.0}},
              "demo_4x8": {"failover_rtts": {"1": 1.0}}}
    after = {"demo": {"failover_rtts": {"1": 2.0, "2": 1.5, "3": 3.5, "5": 9.0}},
             "demo_4x8": {"failover_rtts": {"1": 2.0}}}
    p = fs.paired(before, after)
    assert set(p) == {"demo"}          # one seed in common is no comparison
    d = p["demo"]
    assert d["seeds"] == 3 and d["up"] == 2 and d["down"] == 1 and d["largest_move"] == 1.0
    assert d["mean_diff"] == pytest.approx(1 / 3)
    assert d["stderr"] == pytest.approx(0.44096, abs=1e-4)
