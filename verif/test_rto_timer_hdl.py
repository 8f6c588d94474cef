"""The RTO timer under Verilator."""

from mrcnic.hdl.rto_timer import RtoTimer
from mrcnic.verif import harness
from mrcnic.verif.toplevel import AxisTop


def test_rto_timer(seed_for, volume):
    b = harness.build(lambda qps: AxisTop(RtoTimer(qps)), {"qps": 5}, "rto_timer")
    harness.run(b, "mrcnic.verif.tb_rto_timer",
                {"seed": seed_for("rto"), "qps": 5, "cycles": 4000 * volume})
