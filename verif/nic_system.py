"""Several NICs side by side in one simulation: each keeps its own ports, under ``nic<i>``.

The NICs are one Verilog module instantiated ``nics`` times (verif/prebuilt.py), so Verilator
compiles the NIC once whatever the number of NICs, and the single-NIC testbenches' build
(builds.nic) shares its compiled objects."""

from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from mrcnic.hdl.nic import Nic
from mrcnic.verif.prebuilt import Prebuilt

__all__ = ["NicSystem"]


class NicSystem(wiring.Component):
    """``nics`` instances of :class:`Nic` built with the same ``config``; NIC ``i``'s interface
    is member ``nic<i>`` (so, under :class:`~mrcnic.verif.toplevel.AxisTop`, its ports are named
    ``nic<i>__<port>``). Nothing joins them: the testbench's network does."""

    def __init__(self, nics=2, **config):
        if not isinstance(nics, int) or nics < 1:
            raise ValueError(f"nics must be a positive integer, not {nics!r}")
        self._nics = [Prebuilt(Nic, config, "mrc_nic") for _ in range(nics)]
        super().__init__({f"nic{i}": Out(n.signature) for i, n in enumerate(self._nics)})

    def elaborate(self, platform):
        m = Module()
        for i, nic in enumerate(self._nics):
            m.submodules[f"nic{i}"] = nic
            wiring.connect(m, wiring.flipped(getattr(self, f"nic{i}")), nic)
        return m
