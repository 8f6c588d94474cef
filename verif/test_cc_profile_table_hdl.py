"""The CC profile table under Verilator."""

from mrcnic.hdl.cc_profile_table import CcProfileTable
from mrcnic.verif import harness
from mrcnic.verif.toplevel import AxisTop


def test_cc_profile_table(seed_for, volume):
    b = harness.build(lambda qps, profiles: AxisTop(CcProfileTable(qps, profiles)),
                      {"qps": 16, "profiles": 4}, "cc_profile_table")
    harness.run(b, "mrcnic.verif.tb_cc_profile_table",
                {"seed": seed_for("cc"), "qps": 16, "profiles": 4, "cycles": 2000 * volume})
