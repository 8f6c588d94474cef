"""SRv6 encapsulation under Verilator at 64 and 512 bits."""

import pytest

from mrcnic.hdl.srv6_encap import Srv6Encapsulator
from mrcnic.verif import harness
from mrcnic.verif.toplevel import AxisTop


@pytest.mark.parametrize("width", [64, 512])
def test_srv6_encap(width, seed_for, volume):
    b = harness.build(lambda width: AxisTop(Srv6Encapsulator(width)), {"width": width},
                      f"srv6_encap_w{width}")
    harness.run(b, "mrcnic.verif.tb_srv6_encap",
                {"seed": seed_for(width), "count": 300 * volume, "templates": 16, "max_usids": 14,
                 "max_payload": 700, "gap": 0.2, "backpressure": 0.2})
