"""The register bank under Verilator, exercised through the driver's register client."""

from mrcnic.hdl.register_bank import RegisterBank
from mrcnic.verif import harness
from mrcnic.verif.toplevel import AxisTop


def test_register_bank():
    consts = {"global.data_width": 64, "global.planes": 2}
    b = harness.build(lambda **kw: AxisTop(RegisterBank(constants=kw)), consts, "register_bank")
    harness.run(b, "mrcnic.verif.tb_register_bank", {"data_width": 64, "planes": 2})
