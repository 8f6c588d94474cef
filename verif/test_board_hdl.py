"""A board NIC at its RGMII pins under Verilator, driven by a Linux host (the kernel and the
project's host tools) through its management port on port 0."""

import sys

import pytest

from mrcnic.verif import builds, harness, linux_host


def test_board_management():
    why = linux_host.unsupported()
    if why:
        pytest.skip(f"no Linux host namespace here: {why}")
    b = builds.board()
    with linux_host.LinuxHost() as host:
        harness.run(b, "mrcnic.verif.tb_board",
                    {"netns": host.netns, "cli": [sys.executable, "-m", "mrcnic.cli"]})


def test_two_boards_run_mrc():
    why = linux_host.unsupported()
    if why:
        pytest.skip(f"no Linux host namespace here: {why}")
    b = builds.board_pair()
    with linux_host.LinuxHost(ports=2) as host:
        harness.run(b, "mrcnic.verif.tb_board_pair", {"netns": host.netns, "taps": host.taps})
