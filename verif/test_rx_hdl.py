"""The receive side under Verilator, against the receiver's reference model, at 64 bits (the
whole NIC's receive test, verif/test_nic_rx_hdl.py, runs the same pipeline at 64 and 512)."""

import pytest

from mrcnic.verif import builds, harness


@pytest.mark.parametrize("width", [64])
def test_rx(width):
    harness.run(builds.rx(width), "mrcnic.verif.tb_rx",
                {"width": width, **builds.RX_CONFIG, "seed": width,
                 "writes": 24, "max_len": 2500,
                 "coalesce": 4, "backpressure": 0.2},
                testcase="receiver_does_what_the_model_says")


def test_rx_malformed_inputs():
    harness.run(builds.rx(64), "mrcnic.verif.tb_rx",
                {"width": 64, **builds.RX_CONFIG, "seed": 1},
                test_filter="malformed_input_is_counted_and_harmless", tag="malformed")


def test_sacks_count_the_busy_qps():
    harness.run(builds.rx(64), "mrcnic.verif.tb_rx",
                {"width": 64, **builds.RX_CONFIG, "seed": 3},
                testcase="every_sack_counts_the_busy_qps", tag="share")
