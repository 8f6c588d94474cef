"""The window bits under Verilator."""

from mrcnic.hdl.window_bits import WindowBits
from mrcnic.verif import harness
from mrcnic.verif.toplevel import AxisTop


def test_window_bits(seed_for, volume):
    b = harness.build(lambda qps, window: AxisTop(WindowBits(qps, window)),
                      {"qps": 3, "window": 64}, "window_bits")
    harness.run(b, "mrcnic.verif.tb_window_bits",
                {"seed": seed_for("wbits"), "qps": 3, "window": 64, "cycles": 4000 * volume})
