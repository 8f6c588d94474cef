"""The path statistics under Verilator."""

from mrcnic.hdl.path_stats import PathStats
from mrcnic.verif import harness
from mrcnic.verif.toplevel import AxisTop


def test_path_stats(seed_for, volume):
    b = harness.build(lambda qps, evs: AxisTop(PathStats(qps, evs)),
                      {"qps": 4, "evs": 16}, "path_stats")
    harness.run(b, "mrcnic.verif.tb_path_stats",
                {"seed": seed_for("path"), "qps": 4, "evs": 16, "events": 600 * volume})
