"""The RTT estimator under Verilator."""

from mrcnic.hdl.rtt_estimator import RttEstimator
from mrcnic.verif import harness
from mrcnic.verif.toplevel import AxisTop


def test_rtt_estimator(seed_for, volume):
    b = harness.build(lambda: AxisTop(RttEstimator()), {}, "rtt_estimator")
    harness.run(b, "mrcnic.verif.tb_rtt_estimator",
                {"seed": seed_for("rtt"), "cases": 4000 * volume})
