"""`make demo`, the main job, run small as a user runs it: it must finish, check every byte
and say so, and refuse a bad option in one line. The short run is shared with
verif/test_pcaps.py, which opens the pcaps it leaves (one simulation for both)."""

import subprocess
import sys

import pytest

from mrcnic.verif.pcapcheck import short_demo


def demo(*args, tmp):
    return subprocess.run([sys.executable, "-m", "mrcnic.verif.demo", "--out", str(tmp), *args],
                          capture_output=True, text=True, timeout=1500)


@pytest.fixture(scope="module")
def short(tmp_path_factory):
    return short_demo(tmp_path_factory)


def test_demo_runs_and_checks_every_packet(short):
    r, out = short, short.out
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "all byte-exact, each completed once on both sides" in r.stdout, r.stdout[-3000:]
    assert "failover" in r.stdout and "seed               7" in r.stdout, r.stdout[-3000:]
    assert (out / "paths.png").stat().st_size > 0
    assert (out / "pcap" / "p0_host0-p0_leaf0.pcap").stat().st_size > 0


def test_demo_refuses_a_bad_option_in_one_line(tmp_path):
    r = demo("--size", "0", tmp=tmp_path)
    assert r.returncode == 2 and r.stdout == ""
    errors = [line for line in r.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "--size must be 1 .. 1048576 bytes, not 0" in errors[0], r.stderr
