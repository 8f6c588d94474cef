"""The pattern writer and checker under Verilator, at 64 and 512 bits."""

import pytest

from mrcnic.verif import harness
from mrcnic.verif.pattern_pair import PatternPair
from mrcnic.verif.toplevel import AxisTop


@pytest.mark.parametrize("width", [64, 512])
def test_pattern(width, seed_for, volume):
    b = harness.build(lambda width: AxisTop(PatternPair(width)), {"width": width},
                      f"pattern_w{width}")
    harness.run(b, "mrcnic.verif.tb_pattern",
                {"seed": seed_for(width), "width": width, "count": 30 * volume})
