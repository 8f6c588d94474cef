"""The feedback check under Verilator."""

from mrcnic.hdl.feedback_check import FeedbackCheck
from mrcnic.verif import harness
from mrcnic.verif.toplevel import AxisTop


def test_feedback_check(seed_for, volume):
    b = harness.build(lambda: AxisTop(FeedbackCheck()), {}, "feedback_check")
    harness.run(b, "mrcnic.verif.tb_feedback_check",
                {"seed": seed_for("feedback"), "cases": 4000 * volume})
