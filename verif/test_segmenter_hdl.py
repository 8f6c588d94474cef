"""The segmenter and its QP context under Verilator."""

from mrcnic.hdl.segmenter import Segmenter
from mrcnic.verif import harness
from mrcnic.verif.toplevel import AxisTop


def test_segmenter(seed_for, volume):
    b = harness.build(lambda qps: AxisTop(Segmenter(qps)), {"qps": 4}, "segmenter_q4")
    harness.run(b, "mrcnic.verif.tb_segmenter", {"qps": 4, "seed": seed_for(3), "count": 120 * volume})
