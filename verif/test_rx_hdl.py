"""The receive side under Verilator, against the receiver's reference model, at 64 bits (the
whole NIC's receive test, verif/test_nic_rx_hdl.py, runs the same pipeline at 64 and 512)."""

import pytest

from mrcnic.verif import builds, harness


@pytest.mark.parametrize("width", [64])
def test_rx(width, seed_for, volume):
    harness.run(builds.rx(width), "mrcnic.verif.tb_rx",
                {"width": width, **builds.RX_CONFIG, "seed": seed_for(width),
                 "writes": 24 * volume, "max_len": 2500,
                 "coalesce": 4, "backpressure": 0.2},
                testcase="receiver_does_what_the_model_says")


def test_rx_malformed_inputs(seed_for):
    harness.run(builds.rx(64), "mrcnic.verif.tb_rx",
                {"width": 64, **builds.RX_CONFIG, "seed": seed_for(1)},
                test_filter="malformed_input_is_counted_and_harmless", tag="malformed")


def test_sacks_count_the_busy_qps(seed_for):
    harness.run(builds.rx(64), "mrcnic.verif.tb_rx",
                {"width": 64, **builds.RX_CONFIG, "seed": seed_for(3)},
                testcase="every_sack_counts_the_busy_qps", tag="share")


#: make test's fuzz: every kind of breakage on every header; make regress's: 100,000 broken frames
FUZZ_ROUNDS = {"test": 400, "regress": 25_000}
FUZZ_BROKEN_PER_ROUND = 4


def test_rx_fuzz(seed_for):
    """Broken frames of every kind (verif/tb_rx_fuzz.py) between good ones: each dropped by
    reason or judged, nothing written outside the registered region, every good one placed."""
    _fuzz(seed_for(11), FUZZ_ROUNDS["test"])


@pytest.mark.regress
def test_rx_fuzz_100k(seed_for):
    _fuzz(seed_for(12), FUZZ_ROUNDS["regress"])


def _fuzz(seed, rounds):
    harness.run(builds.rx(64), "mrcnic.verif.tb_rx_fuzz",
                {"width": 64, **builds.RX_CONFIG, "seed": seed, "rounds": rounds,
                 "broken_per_round": FUZZ_BROKEN_PER_ROUND}, tag=f"fuzz_{rounds}")
