"""Plane demultiplexer: sends each frame to the port of the plane its EV belongs to."""

from amaranth import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .stream import PacketStream, check_width, keep_count

__all__ = ["PlaneDemux", "plane_events", "plane_members"]


def plane_members(width, planes):
    """The per-plane ports a block that feeds the planes offers: a packet stream and its frame
    and byte events for each plane (a frame's last beat sent; a beat's bytes sent)."""
    members = {}
    for p in range(planes):
        members[f"plane{p}"] = Out(PacketStream(width))
        members[f"frames{p}"] = Out(1)
        members[f"bytes{p}"] = Out(range(width // 8 + 1))
    return members


def plane_events(planes):
    """The names of :func:`plane_members`' events."""
    return tuple(f"{kind}{p}" for p in range(planes) for kind in ("frames", "bytes"))


class PlaneDemux(wiring.Component):
    """Enters: frames on ``i`` and, per frame, its plane on ``plane``. Leaves: each frame whole on
    ``plane<p>``. Counts frames and bytes per plane.

    Attributes
    ----------
    i : In(PacketStream(width)); plane : In(stream {plane})
    plane0 .. plane<N-1> : Out(PacketStream(width))
    frames<p>, bytes<p> : events (:attr:`events`): a frame sent on plane p (at its last beat),
        the bytes of a beat sent on it
    """

    def __init__(self, width=64, planes=2):
        self._width = check_width(width)
        if not isinstance(planes, int) or not 1 <= planes <= 16:
            raise ValueError(f"planes must be 1 .. 16, not {planes!r}")
        self._planes = planes
        super().__init__({
            "i": In(PacketStream(width)),
            "plane": In(stream.Signature(data.StructLayout({"plane": range(planes)}))),
            **plane_members(width, planes)})

    @property
    def events(self):
        """The counters' event outputs, for the register bank to count."""
        return plane_events(self._planes)

    def elaborate(self, platform):
        m = Module()
        sel = Signal(range(self._planes))
        busy = Signal()                  # a frame is on its way out; sel is its plane
        n = keep_count(m, self.i.payload.keep)
        end = Signal()                   # the frame's last beat leaves now
        m.d.comb += [end.eq(busy & self.i.valid & self.i.ready & self.i.payload.last),
                     self.plane.ready.eq(~busy | end)]   # the next plane without a gap
        with m.If(self.plane.valid & self.plane.ready):
            m.d.sync += [sel.eq(self.plane.payload.plane), busy.eq(1)]
        with m.Elif(end):
            m.d.sync += busy.eq(0)
        for p in range(self._planes):
            out = getattr(self, f"plane{p}")
            here = busy & (sel == p)
            m.d.comb += [out.payload.eq(self.i.payload), out.valid.eq(self.i.valid & here)]
            with m.If(here):
                m.d.comb += self.i.ready.eq(out.ready)
            with m.If(here & self.i.valid & out.ready):
                m.d.comb += [getattr(self, f"bytes{p}").eq(n),
                             getattr(self, f"frames{p}").eq(self.i.payload.last)]
        return m
