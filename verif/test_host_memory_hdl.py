"""The host-memory model, driven through the NIC's port signals under Verilator."""

import pytest

from mrcnic.verif import harness
from mrcnic.verif.memory_probe import MemoryPortProbe
from mrcnic.verif.toplevel import AxisTop


@pytest.mark.parametrize("width", [64, 512])
def test_host_memory_model(width, seed_for, volume):
    b = harness.build(lambda width: AxisTop(MemoryPortProbe(width)), {"width": width},
                      f"memory_probe_w{width}")
    harness.run(b, "mrcnic.verif.tb_host_memory",
                {"seed": seed_for(width), "width": width, "count": 150 * volume})
