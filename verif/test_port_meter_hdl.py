"""The port meter under Verilator, at the 64- and 512-bit datapaths' beats."""

import pytest

from mrcnic.hdl.port_meter import PortMeter
from mrcnic.verif import harness


@pytest.mark.parametrize("width", [64, 512])
def test_port_meter(width, seed_for, volume):
    b = harness.build(lambda beat: PortMeter(beat), {"beat": width // 8}, f"port_meter_w{width}")
    harness.run(b, "mrcnic.verif.tb_port_meter",
                {"seed": seed_for(width), "beat": width // 8, "count": 20 * volume})
