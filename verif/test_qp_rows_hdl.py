"""The QP rows under Verilator."""

from amaranth.lib import data

from mrcnic.hdl.qp_rows import QpRows
from mrcnic.verif import harness
from mrcnic.verif.toplevel import AxisTop


def test_qp_rows(seed_for, volume):
    # a row of two fields, as wide as the tracker's rows are in their several parts
    layout = data.StructLayout({"a": 24, "b": 13})
    b = harness.build(lambda qps, readers: AxisTop(QpRows(qps, layout, readers)),
                      {"qps": 5, "readers": 2}, "qp_rows")
    harness.run(b, "mrcnic.verif.tb_qp_rows", {"seed": seed_for("rows"), "qps": 5,
                                               "width": layout.size, "readers": 2,
                                               "cycles": 4000 * volume})
