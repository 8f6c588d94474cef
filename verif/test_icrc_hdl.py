"""The ICRC blocks under Verilator, at 64 and 512 bits, against 1000 scapy packets each."""

import pytest

from mrcnic.verif import builds, harness

COUNT = 1000


@pytest.mark.parametrize("width", [64, 512])
def test_icrc_inserter(width, seed_for, volume):
    harness.run(builds.icrc_inserter(width), "mrcnic.verif.tb_icrc",
                {"seed": seed_for(width), "count": COUNT * volume, "gap": 0.2, "backpressure": 0.2},
                testcase="inserter_appends_the_icrc_scapy_computes")


@pytest.mark.parametrize("width", [64, 512])
def test_icrc_checker(width, seed_for, volume):
    harness.run(builds.icrc_checker(width), "mrcnic.verif.tb_icrc",
                {"seed": seed_for(width + 1), "count": COUNT * volume, "gap": 0.2, "backpressure": 0.2},
                testcase="checker_flags_exactly_the_corrupted_frames")
