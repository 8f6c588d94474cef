"""The header parser under Verilator at 64 and 512 bits, 1000+ frames each."""

import pytest
from mrcnic.hdl.header_parser import HeaderParser
from mrcnic.verif import harness
from mrcnic.verif.toplevel import AxisTop

MAX_FRAME = 2048


@pytest.mark.parametrize("width", [64, 512])
def test_header_parser(width):
    b = harness.build(lambda **kw: AxisTop(HeaderParser(**kw)),
                      {"width": width, "max_segments": 4, "max_frame": MAX_FRAME},
                      f"header_parser_w{width}")
    harness.run(b, "mrcnic.verif.tb_header_parser",
                {"seed": 7 * width, "count": 1200, "max_segments": 4, "max_frame": MAX_FRAME,
                 "max_payload": 600, "gap": 0.2, "backpressure": 0.2})
