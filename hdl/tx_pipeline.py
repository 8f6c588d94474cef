"""The TX pipeline: work requests in, sprayed and source-routed MRC packets out on every plane."""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from mrcnic.evmap import EvLayout
from mrcnic.regmap import TX_ERROR_REASONS

from .header_builder import HeaderBuilder
from .host_memory import MemReadPort
from .icrc_inserter import IcrcInserter
from .plane_demux import PlaneDemux, plane_members
from .qp_context import context_write_layout, static_layout
from .segmenter import Segmenter, WrStatus, completion_layout, packet_descriptor_layout, work_request_layout
from .spray_scheduler import SprayScheduler
from .srv6_encap import Srv6Encapsulator, route_layout, template_layout
from .stream import check_width

__all__ = ["TxPipeline"]


class _Fifo:
    """A ``SyncFIFOBuffered`` seen through a layout."""

    def __init__(self, m, name, layout, depth):
        self.layout = layout
        self.f = fifo.SyncFIFOBuffered(width=layout.size, depth=depth)
        m.submodules[name] = self.f
        self.r_data = layout(self.f.r_data)


class TxPipeline(wiring.Component):
    """segmenter -> spray scheduler -> header builder (payload from host memory) -> ICRC
    inserter -> SRv6 encapsulator -> the plane of the packet's EV.

    Parameters
    ----------
    width, qps, evs (largest EV profile), planes, spines, templates, max_usids, backups.

    Attributes
    ----------
    wr : In(work requests);  cpl : Out(error completions: bad request, failed memory read)
    mem : Out(MemReadPort(width))
    ctx_write, ev_load, ev_update, template_write : management and reliability-engine ports
    src_mac, src_ip : In, this NIC's addresses;  port_ready : In(planes)
    plane0 .. plane<N-1> : Out(PacketStream(width))
    requests : Out(32), work requests taken;  err_<reason> : Out(32), failed work requests by
    status (the register map's ``TX_ERROR_REASONS``);  frames<p>, bytes<p> : Out(64)
    ev_refused, ev_replaced : Out(32), the spray scheduler's ``ignored`` and ``replaced``
    """

    def __init__(self, width=64, qps=16, evs=64, planes=2, spines=4, templates=16, max_usids=14,
                 backups=4):
        self._width = check_width(width)
        self._qps, self._planes = qps, planes
        self._seg = Segmenter(qps)
        self._spray = SprayScheduler(qps, evs, planes, backups)
        self._build = HeaderBuilder(width, qps)
        self._icrc = IcrcInserter(width)
        self._srv6 = Srv6Encapsulator(width, templates, max_usids, EvLayout(planes, spines))
        self._demux = PlaneDemux(width, planes)
        reasons = [s.name.lower() for s in WrStatus if s is not WrStatus.OK]
        if reasons != list(TX_ERROR_REASONS):
            raise ValueError(f"WrStatus {reasons} and the register map's TX_ERROR_REASONS "
                             f"{list(TX_ERROR_REASONS)} disagree")
        spray_sig = self._spray.signature.members
        members = {
            "wr": In(stream.Signature(work_request_layout())),
            "cpl": Out(stream.Signature(completion_layout(qps))),
            "mem": Out(MemReadPort(width)),
            "ctx_write": In(stream.Signature(context_write_layout(qps))),
            "ev_load": In(stream.Signature(spray_sig["load"].signature.members["payload"].shape)),
            "ev_update": In(stream.Signature(
                spray_sig["update"].signature.members["payload"].shape)),
            "template_write": In(stream.Signature(template_layout(templates, max_usids))),
            "src_mac": In(48), "src_ip": In(128), "port_ready": In(planes),
            "requests": Out(32), "ev_refused": Out(32), "ev_replaced": Out(32),
            **{f"err_{r}": Out(32) for r in TX_ERROR_REASONS},
            **plane_members(width, planes),
        }
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        seg, spray, build, icrc, srv6, demux = (self._seg, self._spray, self._build, self._icrc,
                                                self._srv6, self._demux)
        for name, sub in (("segmenter", seg), ("spray", spray), ("builder", build),
                          ("icrc", icrc), ("srv6", srv6), ("demux", demux)):
            m.submodules[name] = sub
        flip = wiring.flipped
        wiring.connect(m, flip(self.wr), seg.wr)
        wiring.connect(m, flip(self.ctx_write), seg.ctx_write)
        wiring.connect(m, flip(self.ev_load), spray.load)
        wiring.connect(m, flip(self.ev_update), spray.update)
        wiring.connect(m, flip(self.template_write), srv6.template_write)
        wiring.connect(m, build.mem, flip(self.mem))
        wiring.connect(m, build.o, icrc.i)
        wiring.connect(m, icrc.o, srv6.i)
        wiring.connect(m, srv6.o, demux.i)
        m.d.comb += [
            build.src_mac.eq(self.src_mac), build.src_ip.eq(self.src_ip),
            srv6.src_ip.eq(self.src_ip), spray.port_ready.eq(self.port_ready),
            self.requests.eq(seg.requests), self.ev_refused.eq(spray.ignored),
            self.ev_replaced.eq(spray.replaced),
        ]
        for p in range(self._planes):
            wiring.connect(m, getattr(demux, f"plane{p}"), flip(getattr(self, f"plane{p}")))
            m.d.comb += [getattr(self, f"frames{p}").eq(getattr(demux, f"frames{p}")),
                         getattr(self, f"bytes{p}").eq(getattr(demux, f"bytes{p}"))]

        # Each descriptor asks the spray scheduler for an EV and waits for it, in order.
        waiting = _Fifo(m, "waiting", data.StructLayout({
            "pkt": packet_descriptor_layout(self._qps), "static": static_layout()}), 4)
        m.d.comb += [
            spray.request.payload.qp.eq(seg.pkt.payload.qp),
            spray.request.valid.eq(seg.pkt.valid & waiting.f.w_rdy),
            seg.pkt.ready.eq(spray.request.ready & waiting.f.w_rdy),
            waiting.f.w_en.eq(seg.pkt.valid & seg.pkt.ready),
        ]
        w = waiting.layout(waiting.f.w_data)
        m.d.comb += [w.pkt.eq(seg.pkt.payload), w.static.eq(seg.pkt_static)]

        # The EV joins its descriptor on the way to the header builder.
        head = waiting.r_data
        req = build.req.payload
        m.d.comb += [
            req.pkt.eq(head.pkt), req.ev.eq(spray.grant.payload.ev), req.dqp.eq(head.static.dqp),
            req.dst_mac.eq(head.static.dst_mac), req.dst_ip.eq(head.static.dst_ip),
            req.route.template.eq(head.static.template), req.route.mode.eq(head.static.mode),
            req.route.plane.eq(spray.grant.payload.plane),
            build.req.valid.eq(spray.grant.valid & waiting.f.r_rdy),
            spray.grant.ready.eq(build.req.ready & waiting.f.r_rdy),
            waiting.f.r_en.eq(spray.grant.valid & spray.grant.ready),
        ]

        # Every packet the builder sends leaves its route for the encapsulator and its plane for
        # the demultiplexer (a packet whose read failed sends nothing, so leaves nothing either).
        routes = _Fifo(m, "routes", route_layout(srv6._templates), 8)
        planes = _Fifo(m, "planes", data.StructLayout({"plane": range(self._planes)}), 8)
        fr = build.frame.payload
        frame_rdy = routes.f.w_rdy & planes.f.w_rdy
        rt = routes.layout(routes.f.w_data)
        pl = planes.layout(planes.f.w_data)
        m.d.comb += [
            build.frame.ready.eq(frame_rdy),
            routes.f.w_en.eq(build.frame.valid & frame_rdy),
            planes.f.w_en.eq(build.frame.valid & frame_rdy),
            rt.ev.eq(fr.ev), rt.template.eq(fr.route.template), rt.mode.eq(fr.route.mode),
            rt.tc.eq(fr.tc), rt.length.eq(fr.length), pl.plane.eq(fr.route.plane),
            srv6.route.payload.eq(routes.r_data), srv6.route.valid.eq(routes.f.r_rdy),
            routes.f.r_en.eq(srv6.route.ready),
            demux.plane.payload.eq(planes.r_data), demux.plane.valid.eq(planes.f.r_rdy),
            planes.f.r_en.eq(demux.plane.ready),
        ]

        # Error completions from the segmenter and the builder share one stream; a completion
        # offered and not yet taken keeps the stream until it is (stream rules: no change under
        # valid).
        from_build = Signal()        # the builder's completion has the stream this cycle
        held = Signal()              # a completion was offered last cycle and not taken...
        held_build = Signal()        # ...and it was the builder's
        m.d.comb += from_build.eq(Mux(held, held_build, ~seg.cpl.valid))
        m.d.sync += [held.eq(self.cpl.valid & ~self.cpl.ready), held_build.eq(from_build)]
        with m.If(from_build):
            m.d.comb += [self.cpl.payload.eq(build.cpl.payload),
                         self.cpl.valid.eq(build.cpl.valid), build.cpl.ready.eq(self.cpl.ready)]
        with m.Else():
            m.d.comb += [self.cpl.payload.eq(seg.cpl.payload), self.cpl.valid.eq(seg.cpl.valid),
                         seg.cpl.ready.eq(self.cpl.ready)]
        with m.If(self.cpl.valid & self.cpl.ready):
            for status in WrStatus:
                if status is not WrStatus.OK:
                    with m.If(self.cpl.payload.status == status):
                        count = getattr(self, f"err_{status.name.lower()}")
                        m.d.sync += count.eq(count + 1)
        return m
