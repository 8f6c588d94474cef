"""The completion queue under Verilator."""

from mrcnic.hdl.completion_queue import CompletionQueue
from mrcnic.verif import harness
from mrcnic.verif.toplevel import AxisTop


def test_completion_queue(seed_for, volume):
    b = harness.build(lambda qps, depth: AxisTop(CompletionQueue(qps, depth)),
                      {"qps": 16, "depth": 16}, "completion_queue")
    harness.run(b, "mrcnic.verif.tb_completion_queue",
                {"seed": seed_for("cq"), "qps": 16, "depth": 16, "count": 40 * volume})
