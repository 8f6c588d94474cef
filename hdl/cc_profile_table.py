"""Congestion-control profiles, and which one each QP's window follows."""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from mrcnic.regmap import CC_PARAMS, by_name

__all__ = ["CC_PARAMS", "cc_params_layout", "CcProfileTable"]


def cc_params_layout():
    """What a profile sets: the reliability engine's inputs of these names, as wide as the
    rel.* registers that are profile 0."""
    return data.StructLayout({name: by_name(f"rel.{name}").width for name in CC_PARAMS})


class CcProfileTable(wiring.Component):
    """``profiles`` sets of congestion parameters, and for each of ``qps`` QPs the set its
    window follows.

    Profile 0 is ``base`` (the rel.* registers), so a NIC that never writes a profile behaves
    as one with a single set; profiles 1 .. profiles-1 are kept in a small memory. Which profile
    each QP follows is kept in a memory of ``qps`` entries, 0 after reset. Both are read
    without a cycle of latency (distributed RAM); the NIC registers the answer, for which the
    reliability engine names the QP it will serve a cycle ahead.

    Attributes
    ----------
    base : In(cc_params_layout()), profile 0.
    write : In(stream {profile, params}), always ready: profile ``profile`` takes ``params``; a
        write to profile 0, which is ``base``, is taken and changes nothing.
    assign : In(stream {qp, profile}), always ready: QP ``qp`` follows profile ``profile`` from
        now on. In the cycle it is given, ``params`` for that QP already answers with it.
    qp : In(range(qps));  params : Out(cc_params_layout()), the parameters QP ``qp`` follows.
    view_qp : In(range(qps));  view_profile : Out(range(profiles)), the profile it follows.
    """

    def __init__(self, qps=16, profiles=4):
        if not isinstance(qps, int) or qps < 1:
            raise ValueError(f"qps must be a positive integer, not {qps!r}")
        if not isinstance(profiles, int) or not 1 <= profiles <= 256:
            raise ValueError(f"profiles must be 1 .. 256, not {profiles!r}")
        self._qps, self._profiles = qps, profiles
        super().__init__({
            "base": In(cc_params_layout()),
            "write": In(stream.Signature(data.StructLayout({
                "profile": range(profiles), "params": cc_params_layout()}))),
            "assign": In(stream.Signature(data.StructLayout({
                "qp": range(qps), "profile": range(profiles)}))),
            "qp": In(range(qps)), "params": Out(cc_params_layout()),
            "view_qp": In(range(qps)), "view_profile": Out(range(profiles)),
        })

    def elaborate(self, platform):
        m = Module()
        m.d.comb += [self.write.ready.eq(1), self.assign.ready.eq(1)]
        if self._profiles == 1:          # every QP follows profile 0: nothing to keep
            m.d.comb += self.params.eq(self.base)
            return m

        m.submodules.chosen = chosen = Memory(shape=range(self._profiles), depth=self._qps,
                                              init=[])
        set_ = chosen.write_port()
        rd, view = chosen.read_port(domain="comb"), chosen.read_port(domain="comb")
        a = self.assign.payload
        m.d.comb += [set_.addr.eq(a.qp), set_.data.eq(a.profile), set_.en.eq(self.assign.valid),
                     rd.addr.eq(self.qp), view.addr.eq(self.view_qp),
                     self.view_profile.eq(view.data)]
        # the QP being assigned answers with its new profile at once: the reliability engine
        # starts its window (cwnd_init) in that very cycle
        profile = Signal(range(self._profiles))
        m.d.comb += profile.eq(Mux(self.assign.valid & (a.qp == self.qp), a.profile, rd.data))

        # (two entries at least: a memory of one would have a zero-width address)
        m.submodules.sets = sets = Memory(shape=cc_params_layout(),
                                          depth=max(self._profiles - 1, 2), init=[])
        put, get = sets.write_port(), sets.read_port(domain="comb")
        w = self.write.payload
        m.d.comb += [put.addr.eq(w.profile - 1), put.data.eq(w.params),
                     put.en.eq(self.write.valid & (w.profile != 0)),
                     get.addr.eq(profile - 1),
                     self.params.eq(Mux(profile == 0, self.base, get.data))]
        return m
