"""The register bank under Verilator, exercised through the driver's register client."""

from mrcnic.verif import builds, harness


def test_register_bank():
    harness.run(builds.register_bank(data_width=64, planes=2), "mrcnic.verif.tb_register_bank",
                {"data_width": 64, "planes": 2})
