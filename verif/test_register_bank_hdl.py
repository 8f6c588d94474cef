"""The register bank under Verilator, exercised through the driver's register client."""

from mrcnic.verif import builds, harness


def test_register_bank():
    harness.run(builds.register_bank(), "mrcnic.verif.tb_register_bank",
                {"constants": builds.BANK_CONSTANTS, "limits": builds.BANK_LIMITS,
                 "planes": builds.BANK_PLANES, "late": builds.BANK_LATE})
