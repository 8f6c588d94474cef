"""Verilator --lint-only over the Verilog of every gateware block, at both widths."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from amaranth.back import verilog

from mrcnic.boards.synth import BOARD_NIC
from mrcnic.hdl.board_nic import BoardNic
from mrcnic.hdl.eth_mac import EthMac
from mrcnic.hdl.frame_merge import FrameMerge
from mrcnic.hdl.header_builder import HeaderBuilder
from mrcnic.hdl.header_parser import HeaderParser
from mrcnic.hdl.icrc_checker import IcrcChecker
from mrcnic.hdl.icrc_inserter import IcrcInserter
from mrcnic.hdl.management_port import ManagementPort
from mrcnic.hdl.neighbour_responder import NeighbourResponder
from mrcnic.hdl.nic import Nic
from mrcnic.hdl.onchip_memory import OnChipMemory
from mrcnic.hdl.register_bank import RegisterBank
from mrcnic.hdl.reorder_tracker import ReorderTracker
from mrcnic.hdl.rx_front import RxFront
from mrcnic.hdl.rx_ingress import RxIngress
from mrcnic.hdl.segmenter import Segmenter
from mrcnic.hdl.spray_scheduler import SprayScheduler
from mrcnic.hdl.srv6_encap import Srv6Encapsulator
from mrcnic.hdl.stream import PacketFIFO, PacketRegSlice
from mrcnic.verif.harness import verilator_env
from mrcnic.verif.toplevel import AxisTop

BLOCKS = {
    **{f"icrc_inserter_w{w}": (lambda w=w: IcrcInserter(w)) for w in (64, 512)},
    **{f"icrc_checker_w{w}": (lambda w=w: IcrcChecker(w)) for w in (64, 512)},
    **{f"header_parser_w{w}": (lambda w=w: HeaderParser(w)) for w in (64, 512)},
    **{f"packet_reg_slice_w{w}": (lambda w=w: PacketRegSlice(w)) for w in (64, 512)},
    "packet_fifo_w64": lambda: PacketFIFO(64, 64),
    "register_bank": lambda: RegisterBank({"global.data_width": 64, "global.planes": 2}),
    "segmenter": lambda: Segmenter(16),
    **{f"nic_w{w}": (lambda w=w: Nic(w)) for w in (64, 512)},
    **{f"srv6_encap_w{w}": (lambda w=w: Srv6Encapsulator(w)) for w in (64, 512)},
    **{f"header_builder_w{w}": (lambda w=w: HeaderBuilder(w, 16)) for w in (64, 512)},
    **{f"rx_ingress_w{w}": (lambda w=w: RxIngress(w, planes=3)) for w in (64, 512)},
    **{f"rx_front_w{w}": (lambda w=w: RxFront(w, planes=2, max_frame=2048)) for w in (64, 512)},
    "reorder_tracker": lambda: ReorderTracker(qps=16, window=256),
    "eth_mac": lambda: EthMac(64, max_frame=2000),
    "onchip_memory": lambda: OnChipMemory(64),
    "neighbour_responder": lambda: NeighbourResponder(64),
    "management_port": lambda: ManagementPort(64),
    "frame_merge": lambda: FrameMerge(64),
    "board_nic": lambda: BoardNic(64, nic=BOARD_NIC, ipv4=0xC0A8_0702),
    # An always-ready input stream's ready is a constant, which cannot be a port of its own:
    # the simulation top-level gives it one, as the testbenches see it.
    "spray_scheduler": lambda: AxisTop(SprayScheduler(qps=4, evs=64, planes=2, backups=2)),
}

# Amaranth's Verilog is machine-written: it declares every intermediate net, slices wide values
# freely, gives registers initial values (FPGA power-up state) as well as resets, and writes each
# FSM signal as a case over only the states that assign it, after a default assignment (so no
# latch can arise). Verilator's style warnings for those (not its correctness checks) are off.
# A board's core reset also resets its PHY clock domains through AsyncFIFO's reset synchronizers,
# which take it asynchronously by design (SYNCASYNCNET).
FLAGS = ["--lint-only", "-Wall", "-Wno-DECLFILENAME", "-Wno-UNUSEDSIGNAL", "-Wno-UNUSEDPARAM",
         "-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC", "-Wno-PROCASSINIT", "-Wno-CASEINCOMPLETE",
         "-Wno-SYNCASYNCNET"]


def lint(name: str) -> tuple[str, str]:
    """(name, Verilator's complaints: empty when clean) of one block."""
    verilator_env()
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / f"{name}.v"
        block = BLOCKS[name]()
        src.write_text(verilog.convert(block, name=name, ports=getattr(block, "ports", None),
                                       emit_src=False))
        r = subprocess.run(["verilator", *FLAGS, "--top-module", name, str(src)],
                           capture_output=True, text=True)
    out = "\n".join(ln for ln in (r.stdout + r.stderr).splitlines() if ln.startswith("%"))
    if r.returncode and not out:
        out = f"verilator exited {r.returncode}:\n{r.stderr[-2000:]}"
    return name, out


def main() -> int:
    # One block per core, the whole NICs (the slowest to convert) first.
    names = sorted(BLOCKS, key=lambda n: not n.startswith(("nic_", "board_")))
    failed = []
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for name, out in pool.map(lint, names):
            print(f"verilator lint {name}: {'WARNINGS' if out else 'clean'}", flush=True)
            if out:
                print(out)
                failed.append(name)
    if failed:
        print(f"lint failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
