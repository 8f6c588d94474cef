"""The whole TX pipeline under Verilator at 64 and 512 bits."""

import pytest

from mrcnic.verif import builds, harness


# with the ports never stalled, the planes take turns exactly; stalled at random, a stalled one
# is passed over (tb_tx_pipeline's balance check for each)
@pytest.mark.parametrize("width,backpressure", [(64, 0.2), (512, 0.2), (64, 0.0)])
def test_tx_pipeline(width, backpressure, seed_for, volume):
    harness.run(builds.nic(width), "mrcnic.verif.tb_tx_pipeline",
                {**builds.NIC_CONFIG, "width": width, "seed": seed_for(width),
                 "count": 40 * volume, "max_length": 6000, "backpressure": backpressure},
                tag=f"run_{backpressure}")
