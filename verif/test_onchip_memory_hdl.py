"""The on-chip memory under Verilator, at 64 and 512 bits."""

import pytest

from mrcnic.hdl.onchip_memory import OnChipMemory
from mrcnic.verif import harness
from mrcnic.verif.toplevel import AxisTop


@pytest.mark.parametrize("width", [64, 512])
def test_onchip_memory(width, seed_for, volume):
    build = {"width": width, "size": 8192, "base": 0x10000}
    b = harness.build(lambda **kw: AxisTop(OnChipMemory(**kw)), build, f"onchip_memory_w{width}")
    harness.run(b, "mrcnic.verif.tb_onchip_memory",
                {"seed": seed_for(width), "count": 150 * volume, **build})
