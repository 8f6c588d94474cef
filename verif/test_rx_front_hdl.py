"""The RX front end under Verilator, at 64 and 512 bits."""

import pytest

from mrcnic.verif import builds, harness


@pytest.mark.parametrize("width", [64, 512])
def test_rx_front(width, seed_for, volume):
    harness.run(builds.rx_front(width), "mrcnic.verif.tb_rx_front",
                {"width": width, **builds.RX_FRONT_CONFIG, "seed": seed_for(width), "count": 300 * volume,
                 "max_payload": 1200, "gap": 0.1, "backpressure": 0.2})
