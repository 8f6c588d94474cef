"""The whole NIC receiving and acknowledging under Verilator, at 64 and 512 bits."""

import pytest

from mrcnic.verif import builds, harness


@pytest.mark.parametrize("width", [64, 512])
def test_nic_rx(width, seed_for, volume):
    harness.run(builds.nic(width), "mrcnic.verif.tb_nic_rx",
                {"width": width, **builds.NIC_CONFIG, "seed": seed_for(width + 1), "window": 256,
                 "messages": 512, "coalesce": 3, "writes": 12 * volume, "max_len": 3000}, tag="rx")
