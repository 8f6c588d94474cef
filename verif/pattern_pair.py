"""A pattern writer and a pattern checker side by side, for simulation: the writer's memory
port and the checker's are the two ports of one host memory (verif/host_memory.py)."""

from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from mrcnic.hdl.host_memory import MemReadPort, MemWritePort
from mrcnic.hdl.pattern_checker import PatternChecker
from mrcnic.hdl.pattern_writer import PatternWriter

__all__ = ["PatternPair"]


class PatternPair(wiring.Component):
    """``gen_*``: the writer's start, memory write port and done; ``chk_*``: the checker's."""

    def __init__(self, width=64):
        self._gen, self._chk = PatternWriter(width), PatternChecker(width)
        gen, chk = self._gen.signature.members, self._chk.signature.members
        super().__init__({"gen_start": gen["start"], "gen_mem": Out(MemWritePort(width)),
                          "gen_done": gen["done"], "chk_start": chk["start"],
                          "chk_mem": Out(MemReadPort(width)), "chk_done": chk["done"]})

    def elaborate(self, platform):
        m = Module()
        m.submodules.gen, m.submodules.chk = self._gen, self._chk
        for unit, prefix in ((self._gen, "gen"), (self._chk, "chk")):
            wiring.connect(m, wiring.flipped(getattr(self, f"{prefix}_start")), unit.start)
            wiring.connect(m, unit.mem, wiring.flipped(getattr(self, f"{prefix}_mem")))
            wiring.connect(m, unit.done, wiring.flipped(getattr(self, f"{prefix}_done")))
        return m
