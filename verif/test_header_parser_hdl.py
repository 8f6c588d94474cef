"""The header parser under Verilator at 64 and 512 bits, 1200 frames each."""

import pytest

from mrcnic.verif import builds, harness


@pytest.mark.parametrize("width", [64, 512])
def test_header_parser(width, seed_for, volume):
    harness.run(builds.header_parser(width), "mrcnic.verif.tb_header_parser",
                {"seed": seed_for(7 * width), "count": 1200 * volume,
                 "max_segments": builds.PARSER_MAX_SEGMENTS,
                 "max_frame": builds.PARSER_MAX_FRAME, "max_payload": 600, "gap": 0.2,
                 "backpressure": 0.2})
