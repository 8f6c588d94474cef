"""The PSN bounds under Verilator."""

from mrcnic.hdl.psn_bounds import PsnBounds
from mrcnic.verif import harness
from mrcnic.verif.toplevel import AxisTop


def test_psn_bounds(seed_for, volume):
    b = harness.build(lambda qps: AxisTop(PsnBounds(qps)), {"qps": 3}, "psn_bounds")
    harness.run(b, "mrcnic.verif.tb_psn_bounds",
                {"seed": seed_for("bounds"), "qps": 3, "cycles": 4000 * volume})
