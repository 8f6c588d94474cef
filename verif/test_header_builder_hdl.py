"""The header builder under Verilator, at 64 and 512 bits, with the host-memory model."""

import pytest

from mrcnic.hdl.header_builder import HeaderBuilder
from mrcnic.verif import harness
from mrcnic.verif.toplevel import AxisTop


@pytest.mark.parametrize("width", [64, 512])
def test_header_builder(width, seed_for, volume):
    b = harness.build(lambda width, qps: AxisTop(HeaderBuilder(width, qps)),
                      {"width": width, "qps": 4}, f"header_builder_w{width}")
    harness.run(b, "mrcnic.verif.tb_header_builder",
                {"qps": 4, "seed": seed_for(width), "count": 60 * volume, "gap": 0.2, "backpressure": 0.2})


@pytest.mark.parametrize("prefetch", [0, -1, 2.0, None])
def test_prefetch_must_be_a_positive_integer(prefetch):
    with pytest.raises(ValueError, match="prefetch must be a positive integer"):
        HeaderBuilder(64, 4, prefetch)
