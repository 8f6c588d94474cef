"""The spray scheduler under Verilator, in a small and a full-profile configuration."""

import pytest

from mrcnic.hdl.spray_scheduler import SprayScheduler
from mrcnic.verif import harness
from mrcnic.verif.toplevel import AxisTop

CONFIGS = {"small": dict(qps=4, evs=16, planes=2, backups=2, size=12),
           "wide": dict(qps=2, evs=256, planes=4, backups=2, size=256)}


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_spray_scheduler(config, seed_for):
    c = CONFIGS[config]
    hw = {k: c[k] for k in ("qps", "evs", "planes", "backups")}
    b = harness.build(lambda **kw: AxisTop(SprayScheduler(**kw)), hw, f"spray_scheduler_{config}")
    harness.run(b, "mrcnic.verif.tb_spray_scheduler", {**c, "seed": seed_for(5)})
