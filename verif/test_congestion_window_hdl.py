"""The congestion window under Verilator."""

from mrcnic.hdl.congestion_window import CongestionWindow
from mrcnic.verif import harness
from mrcnic.verif.toplevel import AxisTop


def test_congestion_window(seed_for, volume):
    b = harness.build(lambda qps: AxisTop(CongestionWindow(qps)), {"qps": 4},
                      "congestion_window")
    harness.run(b, "mrcnic.verif.tb_congestion_window",
                {"seed": seed_for("cwnd"), "qps": 4, "cycles": 4000 * volume})
