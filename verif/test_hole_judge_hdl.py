"""The hole judge under Verilator."""

from mrcnic.hdl.hole_judge import HoleJudge
from mrcnic.verif import harness
from mrcnic.verif.toplevel import AxisTop


def test_hole_judge(seed_for, volume):
    b = harness.build(lambda paths: AxisTop(HoleJudge(paths)), {"paths": 8}, "hole_judge")
    harness.run(b, "mrcnic.verif.tb_hole_judge",
                {"seed": seed_for("holes"), "paths": 8, "cases": 4000 * volume})
