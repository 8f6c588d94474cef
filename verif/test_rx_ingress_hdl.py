"""RX ingress (frame guards and the plane merge) under Verilator. Its logic does not depend on the
width; it runs at 512 bits inside the RX front end's test (verif/test_rx_front_hdl.py)."""

import pytest

from mrcnic.hdl.rx_ingress import RxIngress
from mrcnic.verif import harness
from mrcnic.verif.toplevel import AxisTop

CONFIG = {"planes": 3, "max_frame": 2048, "timeout": 40}


@pytest.mark.parametrize("width", [64])
def test_rx_ingress(width, seed_for, volume):
    b = harness.build(lambda **kw: AxisTop(RxIngress(**kw)), {"width": width, **CONFIG},
                      f"rx_ingress_w{width}")
    harness.run(b, "mrcnic.verif.tb_rx_ingress",
                {"width": width, **CONFIG, "seed": seed_for(width), "count": 150 * volume})
