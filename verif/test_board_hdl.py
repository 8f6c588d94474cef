"""Two board NICs at their RGMII pins under Verilator, driven by a Linux host (the kernel and
the project's host tools) through their management ports: one board on its own, then the two
cabled to each other running MRC."""

import sys

import pytest

from mrcnic.verif import builds, harness, linux_host


@pytest.fixture
def host():
    why = linux_host.unsupported()
    if why:
        pytest.skip(f"no Linux host namespace here: {why}")
    with linux_host.LinuxHost(ports=2) as h:
        yield h


def test_board_management(host):
    harness.run(builds.board_pair(), "mrcnic.verif.tb_board",
                {"netns": host.netns, "taps": host.taps,
                 "cli": [sys.executable, "-m", "mrcnic.cli"]}, tag="management")


def test_two_boards_run_mrc(host):
    harness.run(builds.board_pair(), "mrcnic.verif.tb_board_pair",
                {"netns": host.netns, "taps": host.taps}, tag="pair")


@pytest.mark.regress
def test_two_one_port_boards_run_mrc_through_the_switch(host):
    """The ECPIX-5's board NIC: one port, one plane, MRC and management over the same bridge
    (a configuration of the same blocks: make regress's)."""
    harness.run(builds.board_pair(planes=1), "mrcnic.verif.tb_board_pair",
                {"netns": host.netns, "taps": host.taps, "planes": 1}, tag="pair_p1")
