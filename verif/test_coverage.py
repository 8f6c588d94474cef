"""verif/coverage.py on handwritten coverage.dat files: no Verilator build needed."""

import json
import os
import time

import pytest

from mrcnic.verif import coverage

TOP = "sys_w64.dut"


def point(kind, module, line, count, comment="block", column=1, source="sys_w64.v"):
    keys = {"t": kind, "page": f"v_{kind}/{module}", "f": source, "l": line, "n": column,
            "o": comment, "h": f"TOP.{module}"}
    text = "".join(f"\x01{k}\x02{v}" for k, v in keys.items())
    return f"C '{text}' {count}"


def dat(*records):
    return "# SystemC::Coverage-3\n" + "\n".join(records) + "\n"


# Two NICs. tx.spray's module text starts at line 100 in nic0 and at line 500 in nic1: nic0 hit
# its first branch, nic1 its second, so together they cover both. rx.acks has two line points and
# only the first is hit, in either NIC: 50%. The wrapper above the NICs is no block.
RUN_A = dat(
    point("line", f"{TOP}.nic0.tx.spray", 100, 3, "if"),
    point("line", f"{TOP}.nic0.tx.spray", 104, 0, "else"),
    point("toggle", f"{TOP}.nic0.tx.spray", 101, 1, "grant:0->1", 5),
    point("toggle", f"{TOP}.nic0.tx.spray", 101, 0, "grant:1->0", 5),
    point("line", f"{TOP}.nic1.tx.spray", 500, 0, "if"),
    point("line", f"{TOP}.nic1.tx.spray", 504, 2, "else"),
    point("toggle", f"{TOP}.nic1.tx.spray", 501, 0, "grant:0->1", 5),
    point("toggle", f"{TOP}.nic1.tx.spray", 501, 0, "grant:1->0", 5),
    point("line", f"{TOP}.nic0.rx.acks", 300, 1),
    point("line", f"{TOP}.nic0.rx.acks", 310, 0),
    point("line", f"{TOP}.nic1.rx.acks", 700, 0),
    point("line", f"{TOP}.nic1.rx.acks", 710, 0),
    point("line", TOP, 20, 0),
)
# A second run of the same build: nic1 now toggles grant back down.
RUN_B = dat(point("toggle", f"{TOP}.nic1.tx.spray", 501, 4, "grant:1->0", 5))


def blocks_of(*runs):
    return coverage.aggregate({"sys_w64-0": coverage.parse_dat(*runs)})


def test_instances_merge_and_low_blocks_are_flagged():
    blocks = blocks_of(RUN_A)
    assert set(blocks) == {"tx.spray", "rx.acks"}
    spray, acks = blocks["tx.spray"], blocks["rx.acks"]
    assert spray.instances == 2 and spray.variants == 1
    assert spray.line == [2, 2]          # each NIC hit one branch
    assert spray.toggle == [1, 2]        # grant rose (nic0), never fell
    assert acks.line == [1, 2] and coverage.Block.pct(acks.line) == 50.0
    rows = coverage.table(blocks, 90.0)
    acks_row = next(r for r in rows if "`rx.acks`" in r)
    spray_row = next(r for r in rows if "`tx.spray`" in r)
    assert "< 90%" in acks_row and "< 90%" not in spray_row
    assert rows.index(acks_row) < rows.index(spray_row)    # lowest first


def test_runs_add_up():
    assert blocks_of(RUN_A, RUN_B)["tx.spray"].toggle == [2, 2]
    assert coverage.totals(blocks_of(RUN_A, RUN_B)) == ([3, 4], [2, 2])


def test_other_configurations_are_counted_side_by_side():
    # A second build whose spray has one more branch: its instance is a variant of its own
    # (three points, one hit) beside the first build's two, which still pair up (two of two).
    other = dat(point("line", f"{TOP}.nic0.tx.spray", 40, 0, "if"),
                point("line", f"{TOP}.nic0.tx.spray", 44, 0, "else"),
                point("branch", f"{TOP}.nic0.tx.spray", 48, 1, "cond_then"))
    blocks = coverage.aggregate({"sys_w64-0": coverage.parse_dat(RUN_A),
                                 "sys8_w64-0": coverage.parse_dat(other)})
    spray = blocks["tx.spray"]
    assert spray.instances == 3 and spray.variants == 2 and spray.line == [3, 5]
    assert "2 variants" in next(r for r in coverage.table(blocks, 90.0) if "`tx.spray`" in r)


def test_yosys_trigger_is_left_out_and_its_numbering_does_not_split_instances(tmp_path):
    # Every always block opens with Yosys's `if (<reg held at 0>) begin end`; the reg is $41 in
    # one instance and $101 in the next, which shifts the column of the block's point too.
    verilog = ["// filler"] * 40
    for n, line in ((11, 41), (31, 101)):
        verilog[n - 1] = f"    if (\\$auto$verilog_backend.cc:2355:dump_module${line} ) begin end"
    source = tmp_path / "sys_w64.v"
    source.write_text("\n".join(verilog) + "\n")
    reg = "__024auto__024verilog_backend__02ecc__03a2355__03adump_module__024{}:0->1"
    acks = f"{TOP}.nic{{}}.tx.acks"
    run = dat(point("toggle", acks.format(0), 5, 0, reg.format(41), 7, source),
              point("line", acks.format(0), 10, 1, "block", 56, source),
              point("branch", acks.format(0), 11, 0, "if", 5, source),
              point("toggle", acks.format(1), 25, 0, reg.format(101), 7, source),
              point("line", acks.format(1), 30, 0, "block", 57, source),
              point("branch", acks.format(1), 31, 0, "if", 5, source))
    block = blocks_of(run)["tx.acks"]
    assert block.variants == 1 and block.line == [1, 1] and block.toggle == [0, 0]
    assert block.triggers == 2


def test_bad_record():
    with pytest.raises(coverage.CoverageError, match="x.dat:2"):
        coverage.Coverage().add(["# SystemC::Coverage-3", "C 'oops"], "x.dat")


def test_report_from_a_build_directory(tmp_path, monkeypatch, capsys):
    build = tmp_path / "sim" / "toy-0123456789ab"
    for run, text in (("system_a", RUN_A), ("system_b", RUN_B), ("demo", RUN_B)):
        (build / "runs" / run).mkdir(parents=True)
        (build / "runs" / run / "coverage.dat").write_text(text)
    (build / "built.json").write_text(json.dumps({"params": {}, "coverage": True}))
    # A newer build of the same name that has not run yet: the report keeps to the data.
    newer = tmp_path / "sim" / "toy-ba9876543210"
    newer.mkdir()
    (newer / "built.json").write_text(json.dumps({"params": {}, "coverage": True}))
    os.utime(newer / "built.json", (time.time() + 60, time.time() + 60))
    monkeypatch.setattr(coverage, "BUILD", tmp_path)
    out = tmp_path / "coverage.md"
    assert coverage.main(["--no-run", "--builds", "toy*", "--out", str(out)]) == 0
    text = out.read_text()
    assert "toy-0123456789ab/runs/{system_a,system_b}" in text   # the suite's runs, not demo
    assert "Total: line 75.0% (3/4), toggle 100.0% (2/2)" in text
    assert "under 90% line coverage: `rx.acks`." in text
    assert coverage.main(["--no-run", "--builds", "none*", "--out", "-"]) == 1
    assert "no coverage data" in capsys.readouterr().err
