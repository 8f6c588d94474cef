"""The send window under Verilator."""

from mrcnic.hdl.send_window import SendWindow
from mrcnic.verif import harness
from mrcnic.verif.toplevel import AxisTop


def test_send_window(seed_for, volume):
    b = harness.build(lambda qps, window: AxisTop(SendWindow(qps, window)),
                      {"qps": 4, "window": 64}, "send_window")
    harness.run(b, "mrcnic.verif.tb_send_window",
                {"seed": seed_for("sendwin"), "qps": 4, "window": 64, "cycles": 4000 * volume})
