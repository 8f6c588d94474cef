"""RX ingress (frame guards and the plane merge) under Verilator, at 64 and 512 bits."""

import pytest

from mrcnic.hdl.rx_ingress import RxIngress
from mrcnic.verif import harness
from mrcnic.verif.toplevel import AxisTop

CONFIG = {"planes": 3, "max_frame": 2048, "timeout": 40}


@pytest.mark.parametrize("width", [64, 512])
def test_rx_ingress(width):
    b = harness.build(lambda **kw: AxisTop(RxIngress(**kw)), {"width": width, **CONFIG},
                      f"rx_ingress_w{width}")
    harness.run(b, "mrcnic.verif.tb_rx_ingress",
                {"width": width, **CONFIG, "seed": width, "count": 150})
