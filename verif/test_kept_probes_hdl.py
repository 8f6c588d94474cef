"""The kept probes under Verilator."""

from mrcnic.hdl.kept_probes import KeptProbes
from mrcnic.verif import harness
from mrcnic.verif.toplevel import AxisTop


def test_kept_probes(seed_for, volume):
    cfg = {"qps": 3, "evs": 8, "kept": 4}
    b = harness.build(lambda **kw: AxisTop(KeptProbes(**kw)), cfg, "kept_probes")
    harness.run(b, "mrcnic.verif.tb_kept_probes",
                {"seed": seed_for("probes"), **cfg, "cycles": 4000 * volume})
