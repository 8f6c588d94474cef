"""The front drop under Verilator, at 64 and 512 bits."""

import pytest

from mrcnic.hdl.front_drop import FrontDrop
from mrcnic.verif import harness
from mrcnic.verif.toplevel import AxisTop

CONFIG = {"max_bytes": 160, "unit": 2}


@pytest.mark.parametrize("width", [64, 512])
def test_front_drop(width):
    b = harness.build(lambda **kw: AxisTop(FrontDrop(**kw)), {"width": width, **CONFIG},
                      f"front_drop_w{width}")
    harness.run(b, "mrcnic.verif.tb_front_drop",
                {"width": width, **CONFIG, "seed": width, "count": 150})
