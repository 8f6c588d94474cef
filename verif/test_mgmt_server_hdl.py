"""The management port's server on a register bank under Verilator, at the boards' 64 bits."""

from mrcnic.verif import builds, harness


def test_mgmt_server():
    harness.run(builds.mgmt_bank(), "mrcnic.verif.tb_mgmt_server")
