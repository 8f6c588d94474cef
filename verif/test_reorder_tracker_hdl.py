"""The reorder tracker under Verilator, against the receiver's reference model."""

from mrcnic.hdl.reorder_tracker import ReorderTracker
from mrcnic.verif import harness
from mrcnic.verif.toplevel import AxisTop

CONFIG = {"qps": 4, "window": 256}


def test_reorder_tracker(seed_for, volume):
    b = harness.build(lambda **kw: AxisTop(ReorderTracker(**kw)), CONFIG, "reorder_tracker")
    harness.run(b, "mrcnic.verif.tb_reorder_tracker", {**CONFIG, "seed": seed_for(7), "count": 600 * volume})
