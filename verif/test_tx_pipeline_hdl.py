"""The whole TX pipeline under Verilator at 64 and 512 bits."""

import pytest

from mrcnic.hdl.tx_pipeline import TxPipeline
from mrcnic.verif import harness
from mrcnic.verif.toplevel import AxisTop

CONFIG = dict(qps=4, evs=16, planes=2, spines=4, templates=4, max_usids=14)


@pytest.mark.parametrize("width", [64, 512])
def test_tx_pipeline(width):
    hw = {"width": width, **CONFIG}
    b = harness.build(lambda **kw: AxisTop(TxPipeline(**kw, backups=2)), hw,
                      f"tx_pipeline_w{width}")
    harness.run(b, "mrcnic.verif.tb_tx_pipeline",
                {**CONFIG, "seed": width, "count": 40, "max_length": 6000, "backpressure": 0.2})
