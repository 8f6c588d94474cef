"""Kept probes: each QP's latest probes, for the SACK that answers one to be matched against."""

from amaranth import Array, Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .bits import decode

__all__ = ["KeptProbes", "probed_layout"]


def probed_layout(qps, evs):
    """A probe as it is granted its EV: its QP, the entry it went on, and that entry's EV."""
    return data.StructLayout({"qp": range(qps), "index": range(evs), "ev": 32})


class KeptProbes(wiring.Component):
    """The latest ``kept`` probes of each of ``qps`` QPs (an answer may come after the next probe
    has left, more so under load), as they are granted their EVs (``probed``), each live until
    it is answered (``forget``) or a later probe of its QP takes its place.

    The user looks at one kept probe at a time: probe ``k`` of QP ``qp``, whether it is live and
    went on EV ``ev`` (``hit``), and its entry (``index``), in the same cycle. (EV and entry in a
    distributed RAM, a row a QP's kept probe, looked at one a cycle: in flip-flops with a
    comparator each they took 470 LUT4 sites more at the board's size.)

    Attributes
    ----------
    probed : In(stream probed_layout(qps, evs)), always ready.
    qp : In(range(qps));  k : In(range(kept));  ev : In(32)
    hit : Out(1);  index : Out(range(evs))
    forget : In(1), probe ``k`` of QP ``qp`` is answered: not live from the next cycle.
    """

    def __init__(self, qps=16, evs=64, kept=4):
        for name, value in (("qps", qps), ("evs", evs), ("kept", kept)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, not {value!r}")
        if kept & (kept - 1):
            raise ValueError(f"kept must be a power of two, not {kept}")
        self._qps, self._evs, self._kept = qps, evs, kept
        super().__init__({
            "probed": In(stream.Signature(probed_layout(qps, evs), always_ready=True)),
            "qp": In(range(qps)), "k": In(range(kept)), "ev": In(32),
            "hit": Out(1), "index": Out(range(evs)), "forget": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        Q, K = self._qps, self._kept
        qb = max(1, (Q - 1).bit_length())
        m.submodules.kept = mem = Memory(
            shape=data.StructLayout({"ev": 32, "index": range(self._evs)}), depth=(1 << qb) * K,
            init=[])
        wr, rd = mem.write_port(), mem.read_port(domain="comb")
        live = [Signal(K, name=f"live_q{q}") for q in range(Q)]
        nxt = [Signal(range(K), name=f"next_q{q}") for q in range(Q)]    # the slot a probe takes

        pb = self.probed.payload
        at = Array(nxt)[pb.qp]
        m.d.comb += [wr.addr.eq(Cat(at, pb.qp)), wr.data.ev.eq(pb.ev),
                     wr.data.index.eq(pb.index), wr.en.eq(self.probed.valid)]
        for q in range(Q):
            probed = self.probed.valid & (pb.qp == q)
            with m.If(probed):
                m.d.sync += nxt[q].eq(Mux(nxt[q] == K - 1, 0, nxt[q] + 1))
            m.d.sync += live[q].eq(
                (live[q] & ~Mux(self.forget & (self.qp == q), decode(self.k, K), 0))
                | Mux(probed, decode(at, K), 0))

        m.d.comb += [rd.addr.eq(Cat(self.k, self.qp)),
                     self.hit.eq(Array(live)[self.qp].bit_select(self.k, 1)
                                 & (rd.data.ev == self.ev)),
                     self.index.eq(rd.data.index)]
        return m
