"""The receive side as the RX tests and bench see it: :class:`RxPipeline` with the QP context it
reads, whose write port (as management uses it) is brought out."""

from amaranth import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In

from mrcnic.hdl.qp_context import QpContext, context_write_layout
from mrcnic.hdl.rx_pipeline import RxPipeline

__all__ = ["RxDut"]


class RxDut(wiring.Component):
    """RxPipeline + QpContext. Members: the pipeline's, less its context read port, plus
    ``ctx_write`` (In(stream {qp, static, seq})), the context's management write."""

    def __init__(self, **params):
        self._rx = RxPipeline(**params)
        self._ctx = QpContext(params.get("qps", 16))
        members = {n: mem for n, mem in self._rx.signature.members.items()
                   if n not in ("ctx_addr", "ctx")}
        members["ctx_write"] = In(stream.Signature(context_write_layout(self._ctx.qps)))
        super().__init__(members)

    @property
    def events(self):
        return self._rx.events

    def elaborate(self, platform):
        m = Module()
        m.submodules.rx, m.submodules.ctx = rx, ctx = self._rx, self._ctx
        wiring.connect(m, wiring.flipped(self.ctx_write), ctx.write)
        m.d.comb += [ctx.rx_addr.eq(rx.ctx_addr), rx.ctx.eq(ctx.rx_static),
                     ctx.rd_addr.eq(0)]
        for name, member in self.signature.members.items():
            if name == "ctx_write":
                continue
            if member.is_port:
                if member.flow == wiring.Out:
                    m.d.comb += getattr(self, name).eq(getattr(rx, name))
                else:
                    m.d.comb += getattr(rx, name).eq(getattr(self, name))
            else:
                wiring.connect(m, wiring.flipped(getattr(self, name)), getattr(rx, name))
        return m
