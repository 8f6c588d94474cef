"""The suspect paths under Verilator."""

from mrcnic.hdl.suspect_paths import SuspectPaths
from mrcnic.verif import harness
from mrcnic.verif.toplevel import AxisTop


def test_suspect_paths(seed_for, volume):
    b = harness.build(lambda qps, paths: AxisTop(SuspectPaths(qps, paths)),
                      {"qps": 3, "paths": 8}, "suspect_paths")
    harness.run(b, "mrcnic.verif.tb_suspect_paths",
                {"seed": seed_for("suspects"), "qps": 3, "paths": 8, "cycles": 4000 * volume})
