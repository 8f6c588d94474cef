"""The NIC's reliability engine under Verilator: SACK holes, trims, timeouts, EV marks, bad
feedback, go-back-N and the send window, each against the sender's reference model."""

from mrcnic.verif import builds, harness


def test_reliability(seed_for):
    harness.run(builds.nic(64), "mrcnic.verif.tb_reliability",
                {"width": 64, **builds.NIC_CONFIG, "seed": seed_for(5), "window": 256}, tag="rel")
