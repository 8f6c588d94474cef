"""Plane merge: the frames of every plane's port onto one stream, a whole frame at a time."""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .bits import first_from
from .frame_guard import guarded_layout
from .stream import check_width

__all__ = ["PlaneMerge"]


class PlaneMerge(wiring.Component):
    """Enters: guarded frames on ``i0 .. i<N-1>``. Leaves: each frame whole on ``o``, tagged with
    its plane. Planes take turns frame by frame (round robin from the plane after the last one
    served), so with every plane busy none waits more than N - 1 frames; a waiting frame starts
    in the cycle the previous one ends, so the output never idles while a plane has a frame.

    Attributes
    ----------
    i<p> : In(stream guarded_layout(width));  o : Out(stream guarded_layout(width) + plane)
    """

    def __init__(self, width=64, planes=2):
        self._width = check_width(width)
        if not isinstance(planes, int) or not 1 <= planes <= 16:
            raise ValueError(f"planes must be 1 .. 16, not {planes!r}")
        self._planes = planes
        members = {f"i{p}": In(stream.Signature(guarded_layout(width))) for p in range(planes)}
        members["o"] = Out(stream.Signature(guarded_layout(width, plane=range(planes))))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        P = self._planes
        ins = [getattr(self, f"i{p}") for p in range(P)]
        nxt = Signal(range(P))       # the plane whose turn it is first
        cur = Signal(range(P))       # the plane holding the output mid-frame
        busy = Signal()

        # Not mid-frame: the first plane with a frame waiting, from nxt on.
        valid = Signal(P)
        m.d.comb += valid.eq(Cat(*[s.valid for s in ins]))
        pick = first_from(m, valid, nxt, "pick")
        sel = Signal(range(P))
        m.d.comb += sel.eq(Mux(busy, cur, pick))

        for p, s in enumerate(ins):
            with m.If(sel == p):
                m.d.comb += [self.o.payload.data.eq(s.payload.data),
                             self.o.payload.keep.eq(s.payload.keep),
                             self.o.payload.last.eq(s.payload.last),
                             self.o.payload.cut.eq(s.payload.cut),
                             self.o.valid.eq(s.valid), s.ready.eq(self.o.ready)]
        m.d.comb += self.o.payload.plane.eq(sel)
        with m.If(self.o.valid & self.o.ready):
            with m.If(self.o.payload.last):
                m.d.sync += [busy.eq(0), nxt.eq(Mux(sel == P - 1, 0, sel + 1))]
            with m.Else():
                m.d.sync += [busy.eq(1), cur.eq(sel)]
        with m.Elif(self.o.valid):
            # A beat offered and not taken stays offered: the choice holds until it is.
            m.d.sync += [busy.eq(1), cur.eq(sel)]
        return m

