"""The whole TX pipeline under Verilator at 64 and 512 bits."""

import pytest

from mrcnic.verif import builds, harness


@pytest.mark.parametrize("width", [64, 512])
def test_tx_pipeline(width, seed_for, volume):
    harness.run(builds.nic(width), "mrcnic.verif.tb_tx_pipeline",
                {**builds.NIC_CONFIG, "width": width, "seed": seed_for(width),
                 "count": 40 * volume, "max_length": 6000, "backpressure": 0.2})
