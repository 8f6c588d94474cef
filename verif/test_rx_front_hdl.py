"""The RX front end under Verilator, at 64 and 512 bits."""

import pytest

from mrcnic.hdl.rx_front import RxFront
from mrcnic.verif import harness
from mrcnic.verif.toplevel import AxisTop

CONFIG = {"planes": 2, "max_frame": 2048, "timeout": 64, "max_segments": 4}


@pytest.mark.parametrize("width", [64, 512])
def test_rx_front(width):
    b = harness.build(lambda **kw: AxisTop(RxFront(**kw)), {"width": width, **CONFIG},
                      f"rx_front_w{width}")
    harness.run(b, "mrcnic.verif.tb_rx_front",
                {"width": width, **CONFIG, "seed": width, "count": 300, "max_payload": 1200,
                 "gap": 0.1, "backpressure": 0.2})
