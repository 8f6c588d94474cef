"""The ICRC blocks under Verilator, at 64 and 512 bits, against 1000+ scapy packets each."""

import pytest
from mrcnic.hdl.icrc_checker import IcrcChecker
from mrcnic.hdl.icrc_inserter import IcrcInserter
from mrcnic.verif import harness
from mrcnic.verif.toplevel import AxisTop

COUNT = 1000


def _build(cls, width):
    return harness.build(lambda width: AxisTop(cls(width)), {"width": width},
                         f"{cls.__name__.lower()}_w{width}")


@pytest.mark.parametrize("width", [64, 512])
def test_icrc_inserter(width):
    b = _build(IcrcInserter, width)
    harness.run(b, "mrcnic.verif.tb_icrc", {"dut": "inserter", "seed": width, "count": COUNT,
                                            "gap": 0.2, "backpressure": 0.2},
                testcase="inserter_appends_the_icrc_scapy_computes")


@pytest.mark.parametrize("width", [64, 512])
def test_icrc_checker(width):
    b = _build(IcrcChecker, width)
    harness.run(b, "mrcnic.verif.tb_icrc", {"dut": "checker", "seed": width + 1, "count": COUNT,
                                            "gap": 0.2, "backpressure": 0.2},
                testcase="checker_flags_exactly_the_corrupted_frames")
