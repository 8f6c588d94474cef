"""RX ingress: every plane's port guarded, then merged onto the one RX stream."""

from amaranth import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .frame_guard import FrameGuard, guarded_layout
from .plane_merge import PlaneMerge
from .stream import PacketStream, check_width

__all__ = ["RxIngress"]


class RxIngress(wiring.Component):
    """Enters: frames as each plane's MAC delivers them. Leaves: every frame on ``o`` with its
    plane, the planes served in turn; a frame that overran ``max_frame`` or stalled for
    ``timeout`` cycles arrives cut short and marked ``cut`` (see :class:`FrameGuard`).

    Attributes
    ----------
    plane0 .. plane<N-1> : In(PacketStream(width))
    o : Out(stream guarded_layout(width) + plane)
    oversize<p>, stalled<p> : Out(32), frames each plane's guard cut
    """

    def __init__(self, width=64, planes=2, max_frame=9600, timeout=1024):
        self._width = check_width(width)
        self._planes = planes
        self._guards = [FrameGuard(width, max_frame, timeout) for _ in range(planes)]
        self._merge = PlaneMerge(width, planes)
        members = {f"plane{p}": In(PacketStream(width)) for p in range(planes)}
        members["o"] = Out(stream.Signature(guarded_layout(width, plane=range(planes))))
        for p in range(planes):
            members[f"oversize{p}"] = Out(32)
            members[f"stalled{p}"] = Out(32)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.merge = merge = self._merge
        for p, g in enumerate(self._guards):
            m.submodules[f"guard{p}"] = g
            wiring.connect(m, wiring.flipped(getattr(self, f"plane{p}")), g.i)
            wiring.connect(m, g.o, getattr(merge, f"i{p}"))
            m.d.comb += [getattr(self, f"oversize{p}").eq(g.oversize),
                         getattr(self, f"stalled{p}").eq(g.stalled)]
        wiring.connect(m, merge.o, wiring.flipped(self.o))
        return m
