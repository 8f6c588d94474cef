"""The memory window and the memory share under Verilator, at 64 and 512 bits."""

import pytest

from mrcnic.verif import harness
from mrcnic.verif.toplevel import AxisTop
from mrcnic.verif.window_probe import WindowProbe


@pytest.mark.parametrize("width", [64, 512])
def test_memory_window(width, seed_for, volume):
    b = harness.build(lambda width: AxisTop(WindowProbe(width)), {"width": width},
                      f"memory_window_w{width}")
    harness.run(b, "mrcnic.verif.tb_memory_window",
                {"seed": seed_for(width), "width": width, "count": 150 * volume})
