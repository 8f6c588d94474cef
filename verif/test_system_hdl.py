"""Two whole NICs writing to each other across the simulated multi-plane network, one test per
scenario (verif/scenarios.py): every byte lands byte-exact and every message completes exactly
once on both sides (verif/tb_system.py), and what each scenario promises besides holds. Each run
logs its seed; a failure names it."""

import json

import pytest

from mrcnic.verif import builds, harness

KIB = 1024


@pytest.mark.parametrize("scenario, seed, options", [
    # 1 B to 1 MiB, every QP each way.
    ("clean", 11, {"sizes": [1, 7, 256, 1000, 4096, 10000, 64 * KIB, 1024 * KIB]}),
    ("lossy", 12, {}),
    # 512 KiB for the largest: the link is down long enough (its share of the transfer) for
    # its path to lose two packets early enough to be seen, and its entries to be checked.
    ("linkdown", 13, {"sizes": [1, 7, 256, 1000, 4096, 10000, 64 * KIB, 512 * KIB]}),
    ("planedown", 14, {}),
])
def test_scenario(scenario, seed, options, tmp_path):
    b = builds.nic_system(64, 2)
    harness.run(b, "mrcnic.verif.tb_system",
                builds.system_params(64, scenario, seed, options, out=str(tmp_path)),
                tag=f"system_{scenario}")
    results = json.loads((tmp_path / "results.json").read_text())
    if scenario == "linkdown":
        # The transfer reached the dead link: entries there were checked ASSUMED_BAD.
        assert results["dead_entries_checked"] >= 1, results["dead_entries_checked"]
    if scenario == "lossy":
        assert results["network"]["lost"] > 0 and results["network"]["duplicated"] > 0


def test_incast(tmp_path):
    """Seven NICs write to an eighth at once while one of them also writes elsewhere: every
    byte lands, every message completes once, and the victim finishes while the incast runs
    (its share of the bandwidth is a bench figure: make bench, incast_victim_share)."""
    harness.run(builds.incast_system(64), "mrcnic.verif.tb_system",
                builds.system_params(64, "incast", 15, out=str(tmp_path)), tag="system_incast")
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["victim"]["done_us"] < results["victim"]["incast_done_us"]
