"""The frame filter under Verilator. Its logic does not depend on the width; it runs at 512 bits
inside the RX front end's test (verif/test_rx_front_hdl.py)."""

import pytest
from amaranth import unsigned

from mrcnic.hdl.frame_filter import FrameFilter
from mrcnic.verif import harness
from mrcnic.verif.tb_frame_filter import META_BITS
from mrcnic.verif.toplevel import AxisTop


@pytest.mark.parametrize("width", [64])
def test_frame_filter(width, seed_for, volume):
    depth = 512 if width == 64 else 128
    b = harness.build(lambda **kw: AxisTop(FrameFilter(kw["width"], unsigned(META_BITS),
                                                       kw["reasons"], kw["depth"])),
                      {"width": width, "reasons": 3, "depth": depth}, f"frame_filter_w{width}")
    harness.run(b, "mrcnic.verif.tb_frame_filter",
                {"width": width, "reasons": 3, "seed": seed_for(width), "count": 120 * volume})
