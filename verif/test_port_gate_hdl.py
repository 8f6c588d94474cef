"""The port gate under Verilator, at 64 and 512 bits."""

import pytest

from mrcnic.hdl.port_gate import PortGate
from mrcnic.verif import harness
from mrcnic.verif.toplevel import AxisTop


@pytest.mark.parametrize("width", [64, 512])
def test_port_gate(width, seed_for, volume):
    b = harness.build(lambda width: AxisTop(PortGate(width)), {"width": width},
                      f"port_gate_w{width}")
    harness.run(b, "mrcnic.verif.tb_port_gate",
                {"seed": seed_for(width), "width": width, "count": 200 * volume})
