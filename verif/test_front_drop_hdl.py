"""The front drop under Verilator. At 512 bits it runs inside the RX front end's decapsulator
(verif/test_rx_front_hdl.py), and `make bench` measures it there at line rate."""

import pytest

from mrcnic.hdl.front_drop import FrontDrop
from mrcnic.verif import harness
from mrcnic.verif.toplevel import AxisTop

CONFIG = {"max_bytes": 160, "unit": 2}


@pytest.mark.parametrize("width", [64])
def test_front_drop(width, seed_for, volume):
    b = harness.build(lambda **kw: AxisTop(FrontDrop(**kw)), {"width": width, **CONFIG},
                      f"front_drop_w{width}")
    harness.run(b, "mrcnic.verif.tb_front_drop",
                {"width": width, **CONFIG, "seed": seed_for(width), "count": 150 * volume})
