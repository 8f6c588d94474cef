"""The TX pipeline: work requests in, sprayed and source-routed MRC packets out on every plane."""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from mrcnic.evmap import EvLayout
from mrcnic.regmap import TX_ERROR_REASONS

from .ack_builder import AckBuilder
from .ev_prober import probe_layout
from .header_builder import HeaderBuilder
from .host_memory import MemReadPort
from .icrc_inserter import IcrcInserter
from .packet_records import sent_layout
from .plane_demux import PlaneDemux, plane_events, plane_members
from .port_meter import PortMeter
from .port_status import status_layout
from .qp_context import QpState, context_write_layout, static_layout
from .retransmit_tracker import retransmit_layout
from .rx_event import AckKind, ack_layout
from .segmenter import Segmenter, WrStatus, completion_layout, packet_descriptor_layout, work_request_layout
from .spray_scheduler import EvState, SprayMode, SprayScheduler
from .srv6_encap import Srv6Encapsulator, route_layout, template_layout
from .stream import RegSlice, check_width, keep_count
from .two_entry_fifo import buffered_fifo

__all__ = ["TxPipeline"]


class _Fifo:
    """A ``SyncFIFOBuffered`` (:func:`buffered_fifo`) seen through a layout (``w_data`` and
    ``r_data``). A layout of no bits (the plane, with one plane) still queues its entries,
    in a bit wide memory: Yosys's Verilog backend fails on a memory of none."""

    def __init__(self, m, name, layout, depth):
        self.layout = layout
        self.f = buffered_fifo(max(1, layout.size), depth)
        m.submodules[name] = self.f
        self.w_data = layout(self.f.w_data[:layout.size])
        self.r_data = layout(self.f.r_data[:layout.size])


class TxPipeline(wiring.Component):
    """segmenter -> spray scheduler -> header builder (payload from host memory) -> ICRC
    inserter -> SRv6 encapsulator -> the plane of the packet's EV.

    The receive side's SACKs and NACKs (``ack``) join ahead of the data: each asks the spray
    scheduler for an EV of its QP's profile (so it goes out on a GOOD path to the peer, planes
    kept even), is framed by the acknowledgement builder and then takes the data's way through
    the ICRC inserter and the encapsulator. At each frame boundary a framed acknowledgement
    goes before the next data frame: data descriptors are granted ahead (to hide the payload
    read), and an acknowledgement queued behind them would add their time to the peer's RTT.

    Retransmissions (``rtx``) come next, ahead of new packets: each asks for an EV other than
    the one that lost it, and is built again from host memory. A new packet waits until the
    reliability engine opens its QP's window (``gate_*``). Every data packet granted an EV is
    reported on ``sent``. The queues between these stages carry QP numbers, not the QPs'
    peers: each builder reads the peer of the frame it builds from the QP context.

    Parameters
    ----------
    width, qps, evs (largest EV profile), planes, spines, templates, max_usids, backups;
    prefetch : as :class:`HeaderBuilder` (data packets granted their EV ahead of the wire).

    Attributes
    ----------
    wr : In(work requests);  cpl : Out(error completions: bad request, failed memory read)
    mem : Out(MemReadPort(width))
    ctx_write, ev_load, ev_update, template_write : management and reliability-engine ports
    ack : In(stream ack_layout(qps)), from the receive side
    probe : In(stream probe_layout(qps)), probes of ASSUMED_BAD entries (after acks)
    status : In(stream status_layout(qps)), this NIC's port mask for a QP's peer (after
        probes); sent as an ERTH when the QP is RTR or RTS, dropped otherwise
    rtx : In(stream retransmit_layout(qps, evs)), packets to send again
    sent : Out(stream sent_layout(qps, evs)), always ready: each data packet as granted its EV
    probed : Out(stream {qp, index, ev}), always ready: each probe (an ``ack`` of kind PROBE,
        which takes exactly its entry) as granted
    gate_qp, gate_psn, gate_length : Out, the next new packet's QP, PSN and payload length;
        gate_open : In, it may go; gate_take : Out, it goes (its bytes are in flight from now);
        gate_ready : In(qps), the QPs whose window is open: the segmenter offers only these
    timestamp : Out(16), the counter TSETH carries
    rx_ctx_addr : In(range(qps));  rx_ctx : Out(static_layout()), the QP context's read port
        for the receive side (a cycle of latency)
    src_mac, src_ip : In, this NIC's addresses;  port_ready : In(planes)
    port_rate, port_limit : In(16), each port's line rate and the backlog it may hold before
        the spray passes it over (:class:`PortMeter`; rate 0: only a stalled output is busy)
    spray_mode : In(SprayMode), how the spray scheduler picks EVs (tx.spray)
    trim_rounds : In(4), the rotations a trimmed EV is skipped (tx.trim_rounds)
    next_hop : In(ArrayLayout(48, planes)), each plane's Ethernet destination (0: the QP's)
    plane0 .. plane<N-1> : Out(PacketStream(width))
    Events (:attr:`events`, each cycle's increment of a counter the register bank keeps):
    requests, a work request taken;  err_<reason>, a failed work request by status (the register
    map's ``TX_ERROR_REASONS``);  frames<p>, bytes<p>, a frame and a beat's bytes sent on plane p;
    ev_refused, ev_replaced, the spray scheduler's ``ignored`` and ``replaced``;
    status_sent, a port-status update sent
    ev_view_qp, ev_view_index : In; ev_view_state : Out(EvState), that profile entry's state;
    ev_view_ev : Out(32), its EV (a cycle later); ev_view_size : Out, the QP's profile size
    ev_changed : Out(stream), always ready: the spray scheduler's ``changed``, each EV state
        change
    peer : In(stream {qp, planes}), always ready: the planes a QP's peer can receive on (the
        spray scheduler's)
    hold : In, each QP's paths the spray scheduler should pass over (the reliability engine's)
    """

    def __init__(self, width=64, qps=16, evs=64, planes=2, spines=4, templates=16, max_usids=14,
                 backups=4, prefetch=2):
        self._width = check_width(width)
        self._qps, self._planes = qps, planes
        self._seg = Segmenter(qps)
        self._spray = SprayScheduler(qps, evs, planes, backups, spines)
        self._build = HeaderBuilder(width, qps, prefetch)
        self._acks = AckBuilder(width, qps)
        self._icrc = IcrcInserter(width)
        self._srv6 = Srv6Encapsulator(width, templates, max_usids, EvLayout(planes, spines))
        self._demux = PlaneDemux(width, planes)
        self._meters = [PortMeter(width // 8) for _ in range(planes)]
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
            "ack": In(stream.Signature(ack_layout(qps))),
            "probe": In(stream.Signature(probe_layout(qps))),
            "status": In(stream.Signature(status_layout(qps))),
            "peer": In(stream.Signature(spray_sig["peer"].signature.members["payload"].shape,
                                        always_ready=True)),
            "rtx": In(stream.Signature(retransmit_layout(qps, evs))),
            "sent": Out(stream.Signature(sent_layout(qps, evs), always_ready=True)),
            "probed": Out(stream.Signature(data.StructLayout({
                "qp": range(qps), "index": range(evs), "ev": 32}), always_ready=True)),
            "bad_qp": In(range(qps)), "bad": Out(evs),
            "hold": In(spray_sig["hold"].shape),
            "gate_qp": Out(range(qps)), "gate_psn": Out(24), "gate_length": Out(13),
            "gate_open": In(1), "gate_take": Out(1), "gate_ready": In(qps),
            "timestamp": Out(16),
            "rx_ctx_addr": In(range(qps)), "rx_ctx": Out(static_layout()),
            "src_mac": In(48), "src_ip": In(128), "port_ready": In(planes),
            "port_rate": In(16), "port_limit": In(16), "spray_mode": In(SprayMode),
            "trim_rounds": In(4),
            "next_hop": In(data.ArrayLayout(48, planes)),
            "requests": Out(1), "ev_refused": Out(1), "ev_replaced": Out(1),
            "status_sent": Out(1),
            "ev_view_qp": In(range(qps)), "ev_view_index": In(range(evs)),
            "ev_view_state": Out(EvState), "ev_view_ev": Out(32),
            "ev_view_size": Out(range(evs + 1)),
            "ev_changed": Out(stream.Signature(
                spray_sig["changed"].signature.members["payload"].shape, always_ready=True)),
            **{f"err_{r}": Out(1) for r in TX_ERROR_REASONS},
            **plane_members(width, planes),
        }
        super().__init__(members)

    @property
    def events(self):
        """The counters' event outputs, for the register bank to count."""
        return ("requests", "ev_refused", "ev_replaced", "status_sent",
                *(f"err_{r}" for r in TX_ERROR_REASONS), *plane_events(self._planes))

    def elaborate(self, platform):
        m = Module()
        seg, spray, build, icrc, srv6, demux = (self._seg, self._spray, self._build, self._icrc,
                                                self._srv6, self._demux)
        ackb = self._acks
        for name, sub in (("segmenter", seg), ("spray", spray), ("builder", build),
                          ("acks", ackb), ("icrc", icrc), ("srv6", srv6), ("demux", demux)):
            m.submodules[name] = sub
        flip = wiring.flipped
        wiring.connect(m, flip(self.wr), seg.wr)
        wiring.connect(m, flip(self.ctx_write), seg.ctx_write)
        wiring.connect(m, flip(self.ev_load), spray.load)
        wiring.connect(m, flip(self.ev_update), spray.update)
        wiring.connect(m, flip(self.peer), spray.peer)
        wiring.connect(m, flip(self.template_write), srv6.template_write)
        wiring.connect(m, build.mem, flip(self.mem))
        wiring.connect(m, icrc.o, srv6.i)
        wiring.connect(m, srv6.o, demux.i)
        m.d.comb += [
            build.src_mac.eq(self.src_mac), build.src_ip.eq(self.src_ip),
            ackb.src_mac.eq(self.src_mac), ackb.src_ip.eq(self.src_ip),
            seg.rx_addr.eq(self.rx_ctx_addr), self.rx_ctx.eq(seg.rx_static),
            srv6.src_ip.eq(self.src_ip), srv6.next_hop.eq(self.next_hop),
            spray.port_ready.eq(self.port_ready), spray.mode.eq(self.spray_mode),
            spray.trim_rounds.eq(self.trim_rounds),
            # a port is busy while its output stalls (a MAC holding frames back) or while
            # more waits at it than its meter allows
            spray.port_busy.eq(Cat((getattr(self, f"plane{p}").valid
                                    & ~getattr(self, f"plane{p}").ready) | meter.busy
                                   for p, meter in enumerate(self._meters))),
            self.requests.eq(seg.requests), self.ev_refused.eq(spray.ignored),
            self.ev_replaced.eq(spray.replaced), self.timestamp.eq(build.timestamp),
            spray.bad_qp.eq(self.bad_qp), self.bad.eq(spray.bad), spray.hold.eq(self.hold),
            self.ev_changed.payload.eq(spray.changed.payload),
            self.ev_changed.valid.eq(spray.changed.valid),
            spray.view_qp.eq(self.ev_view_qp), spray.view_index.eq(self.ev_view_index),
            self.ev_view_state.eq(spray.view_state), self.ev_view_ev.eq(spray.view_ev),
            self.ev_view_size.eq(spray.view_size),
        ]
        for p, meter in enumerate(self._meters):
            m.submodules[f"meter{p}"] = meter
            out = getattr(self, f"plane{p}")
            taken = out.valid & out.ready
            m.d.comb += [meter.taken.eq(Mux(taken, keep_count(m, out.payload.keep), 0)),
                         meter.last.eq(taken & out.payload.last), meter.rate.eq(self.port_rate),
                         meter.limit.eq(self.port_limit)]
        for p in range(self._planes):
            wiring.connect(m, getattr(demux, f"plane{p}"), flip(getattr(self, f"plane{p}")))
            m.d.comb += [getattr(self, f"frames{p}").eq(getattr(demux, f"frames{p}")),
                         getattr(self, f"bytes{p}").eq(getattr(demux, f"bytes{p}"))]

        # An acknowledgement (or, when none waits, a probe, then a port-status update) first has
        # its QP's context read (a cycle), then asks for an EV.
        Q = self._qps
        ack = Signal(ack_layout(Q))
        arg = Signal(16)                  # a probe's profile entry, a status's port mask
        ack_state = Signal(2)             # 0 empty, 1 context being read, 2 ready to ask
        m.d.comb += [self.ack.ready.eq(ack_state == 0),
                     self.probe.ready.eq((ack_state == 0) & ~self.ack.valid),
                     self.status.ready.eq((ack_state == 0) & ~self.ack.valid
                                          & ~self.probe.valid),
                     seg.ack_addr.eq(Mux(ack_state != 0, ack.qp,
                                         Mux(self.ack.valid, self.ack.payload.qp,
                                             Mux(self.probe.valid, self.probe.payload.qp,
                                                 self.status.payload.qp))))]
        with m.If(self.ack.valid & self.ack.ready):
            m.d.sync += [ack.eq(self.ack.payload), arg.eq(0), ack_state.eq(1)]
        with m.Elif(self.probe.valid & self.probe.ready):
            pr = self.probe.payload
            m.d.sync += [ack.eq(0), ack.kind.eq(AckKind.PROBE), ack.qp.eq(pr.qp),
                         ack.ts.eq(pr.ts), arg.eq(pr.entry), ack_state.eq(1)]
        with m.Elif(self.status.valid & self.status.ready):
            st = self.status.payload
            m.d.sync += [ack.eq(0), ack.kind.eq(AckKind.STATUS), ack.qp.eq(st.qp),
                         ack.ts.eq(st.ts), arg.eq(st.mask), ack_state.eq(1)]
        with m.If(ack_state == 1):
            m.d.sync += ack_state.eq(2)
        # A port-status update is only for a peer the QP talks to.
        peer_state = seg.ack_static.state
        status_dropped = Signal()
        offered = Signal()                # a request was offered last cycle and not taken...
        m.d.comb += status_dropped.eq((ack_state == 2) & ~offered & (ack.kind == AckKind.STATUS)
                                      & (peer_state != QpState.RTR) & (peer_state != QpState.RTS))
        with m.If(status_dropped):
            m.d.sync += ack_state.eq(0)
        ack_ready = (ack_state == 2) & ~status_dropped

        # A retransmission is held here until it asks.
        rtx = Signal(self.rtx.payload.shape())
        rtx_full = Signal()
        m.d.comb += self.rtx.ready.eq(~rtx_full)
        with m.If(self.rtx.valid & self.rtx.ready):
            m.d.sync += [rtx.eq(self.rtx.payload), rtx_full.eq(1)]
        # So is a new packet, once its window let it go. Taking it from the segmenter does not
        # wait for the spray scheduler's pick in the same cycle: with it, the pick, the
        # segmenter's progress, the window's check and the tracker's accounting of the send
        # were one path, the core clock's longest (21 MHz on the ECPIX-5). A packet at most
        # every other cycle is more than frames of eight beats or more need.
        new = Signal(packet_descriptor_layout(Q))
        new_full = Signal()

        # Each descriptor or acknowledgement asks the spray scheduler for an EV and waits for
        # it, in order; ``asked`` remembers which kind each request was. An acknowledgement
        # goes first, then a retransmission, then a new packet whose window is open; a request
        # offered and not yet taken stays offered. Neither queue carries the QP's peer: the
        # builders read it from the context by QP number.
        # The queues of descriptors and acknowledgements are two deep: the spray scheduler takes
        # no request while its grant waits, so one waits granted and the next is written as it
        # leaves; and the acknowledgement builder frames one while the next is granted. Two
        # deep, a queue is two registers, one feeding the next; deeper, it is a distributed RAM
        # as wide as what it carries (four and eight deep, these took 980 LUT4 sites at the
        # board's size).
        waiting = _Fifo(m, "waiting", data.StructLayout({"pkt": packet_descriptor_layout(Q)}), 2)
        # An acknowledgement waits in ``ack_queue`` from its request until it is framed; its EV,
        # once granted, waits beside it in ``ack_routes``. (One queue of both kinds, where two
        # carried the acknowledgement each, before its grant and after.)
        ack_queue = _Fifo(m, "ack_queue", data.StructLayout({"ack": ack_layout(Q), "arg": 16}), 2)
        asked = _Fifo(m, "asked", data.StructLayout({"ack": 1, "probe": 1, "qp": range(Q)}), 8)
        offered_ack = Signal()            # ...and it was an acknowledgement's
        offered_rtx = Signal()            # ...or a retransmission's
        ack_asks, rtx_asks = Signal(), Signal()
        m.d.comb += [
            ack_asks.eq(Mux(offered, offered_ack, ack_ready)),
            rtx_asks.eq(Mux(offered, offered_rtx, ~ack_ready & rtx_full)),
            self.gate_qp.eq(seg.pkt.payload.qp), self.gate_psn.eq(seg.pkt.payload.psn),
            self.gate_length.eq(seg.pkt.payload.length),
            self.gate_take.eq(seg.pkt.valid & seg.pkt.ready), seg.open.eq(self.gate_ready),
            seg.pkt.ready.eq(~new_full & self.gate_open),
        ]
        with m.If(self.gate_take):
            m.d.sync += [new.eq(seg.pkt.payload), new_full.eq(1)]
        new_asks = ~ack_asks & ~rtx_asks
        room = asked.f.w_rdy & Mux(ack_asks, ack_queue.f.w_rdy, waiting.f.w_rdy)
        req_valid = Mux(new_asks, new_full, 1) & room
        # The request reaches the scheduler through a register: its choice here and the
        # scheduler's lookups for its QP, whose outcome is its ready, were one path (the core
        # clock's longest after the tracker's were cut).
        m.submodules.request_slice = req = RegSlice(spray.request.payload.shape())
        wiring.connect(m, req.o, spray.request)
        took = req_valid & req.i.ready
        m.d.comb += [
            req.i.payload.qp.eq(Mux(ack_asks, ack.qp, Mux(rtx_asks, rtx.pkt.qp, new.qp))),
            req.i.payload.retry.eq(rtx_asks), req.i.payload.avoid.eq(rtx.avoid),
            req.i.payload.probe.eq(ack_asks & (ack.kind == AckKind.PROBE)),
            req.i.payload.entry.eq(arg),
            req.i.valid.eq(req_valid),
            asked.f.w_en.eq(took), waiting.f.w_en.eq(took & ~ack_asks),
            ack_queue.f.w_en.eq(took & ack_asks),
        ]
        m.d.sync += [offered.eq(req_valid & ~req.i.ready), offered_ack.eq(ack_asks),
                     offered_rtx.eq(rtx_asks)]
        with m.If(took & ack_asks):
            m.d.sync += ack_state.eq(0)
            with m.If(ack.kind == AckKind.STATUS):
                m.d.comb += self.status_sent.eq(1)
        with m.If(took & rtx_asks):
            m.d.sync += rtx_full.eq(0)
        with m.If(took & new_asks):
            m.d.sync += new_full.eq(0)
        w = waiting.w_data
        m.d.comb += w.pkt.eq(Mux(rtx_asks, rtx.pkt, new))
        aw = ack_queue.w_data
        ask = asked.w_data
        m.d.comb += [aw.ack.eq(ack), aw.arg.eq(arg), ask.ack.eq(ack_asks),
                     ask.probe.eq(ack_asks & (ack.kind == AckKind.PROBE)), ask.qp.eq(ack.qp)]

        # The EV joins its descriptor on the way to the header builder, or its acknowledgement
        # on the way to the acknowledgement builder (waiting in ``ack_routes``, as that builder
        # holds its request until the frame is out).
        grant = spray.grant.payload
        for_ack = asked.r_data.ack
        head = waiting.r_data
        req = build.req.payload
        m.d.comb += [
            req.pkt.eq(head.pkt), req.ev.eq(grant.ev), req.plane.eq(grant.plane),
            seg.build_addr.eq(build.peer_qp), build.peer.eq(seg.build_peer),
        ]
        ack_routes = _Fifo(m, "ack_routes", data.StructLayout({
            "ev": 32, "plane": ackb.req.payload.route.plane.shape()}), 2)
        ar = ack_routes.w_data
        m.d.comb += [ar.ev.eq(grant.ev), ar.plane.eq(grant.plane)]
        # The acknowledgement builder's request: the acknowledgement, its route, and its peer
        # read for it here.
        ahead, route = ack_queue.r_data, ack_routes.r_data
        to_ackb = ackb.req.payload
        m.d.comb += [
            seg.reply_addr.eq(ahead.ack.qp),
            to_ackb.ack.eq(ahead.ack), to_ackb.arg.eq(ahead.arg),
            to_ackb.ev.eq(route.ev), to_ackb.route.plane.eq(route.plane),
            to_ackb.dqp.eq(seg.reply_peer.dqp), to_ackb.dst_mac.eq(seg.reply_peer.dst_mac),
            to_ackb.dst_ip.eq(seg.reply_peer.dst_ip),
            to_ackb.route.template.eq(seg.reply_peer.template),
            to_ackb.route.mode.eq(seg.reply_peer.mode),
        ]
        g_ok = spray.grant.valid & asked.f.r_rdy
        ack_granted = g_ok & for_ack & ack_routes.f.w_rdy
        m.d.comb += [
            build.req.valid.eq(g_ok & ~for_ack & waiting.f.r_rdy),
            ack_routes.f.w_en.eq(ack_granted),
            self.probed.valid.eq(ack_granted & asked.r_data.probe),
            self.probed.payload.qp.eq(asked.r_data.qp), self.probed.payload.index.eq(grant.index),
            self.probed.payload.ev.eq(grant.ev),
            # (an acknowledgement is in ``ack_queue`` from before it asked)
            ackb.req.valid.eq(ack_routes.f.r_rdy & ack_queue.f.r_rdy),
            ack_routes.f.r_en.eq(ackb.req.valid & ackb.req.ready),
            ack_queue.f.r_en.eq(ackb.req.valid & ackb.req.ready),
        ]
        m.d.comb += [self.sent.valid.eq(build.req.valid & build.req.ready),
                     self.sent.payload.pkt.eq(head.pkt), self.sent.payload.index.eq(grant.index),
                     self.sent.payload.ev.eq(grant.ev)]
        granted = Signal()
        m.d.comb += [
            granted.eq((build.req.valid & build.req.ready) | ack_granted),
            spray.grant.ready.eq(granted), asked.f.r_en.eq(granted),
            waiting.f.r_en.eq(build.req.valid & build.req.ready),
        ]

        # Frames to the ICRC inserter, whole, an acknowledgement first when one is ready at a
        # frame boundary; each leaves its route for the encapsulator and its plane for the
        # demultiplexer. A data packet whose read failed sends nothing: its error completion
        # takes its turn instead (below).
        routes = _Fifo(m, "routes", route_layout(srv6._templates), 8)
        planes = _Fifo(m, "planes", data.StructLayout({"plane": range(self._planes)}), 8)
        turn = Signal(2)                  # 0 between frames, 1 an acknowledgement's, 2 data's
        ack_ready_frame = ackb.req.valid   # (the builder's outputs wait on their readies)
        ack_turn = (turn == 1) | ((turn == 0) & ack_ready_frame)
        data_turn = (turn == 2) | ((turn == 0) & ~ack_ready_frame)
        src_o = Mux(ack_turn, ackb.o.payload.as_value(), build.o.payload.as_value())
        src_fr = Mux(ack_turn, ackb.frame.payload.as_value(), build.frame.payload.as_value())
        fr = build.frame.payload.shape()(src_fr)
        frame_rdy = routes.f.w_rdy & planes.f.w_rdy
        rt = routes.w_data
        pl = planes.w_data
        o_valid = Mux(ack_turn, ackb.o.valid, data_turn & build.o.valid)
        f_valid = Mux(ack_turn, ackb.frame.valid, data_turn & build.frame.valid)
        m.d.comb += [
            icrc.i.payload.eq(src_o), icrc.i.valid.eq(o_valid),
            build.o.ready.eq(data_turn & icrc.i.ready), ackb.o.ready.eq(ack_turn & icrc.i.ready),
            build.frame.ready.eq(data_turn & frame_rdy), ackb.frame.ready.eq(ack_turn & frame_rdy),
            routes.f.w_en.eq(f_valid & frame_rdy),
            planes.f.w_en.eq(f_valid & frame_rdy),
            rt.ev.eq(fr.ev), rt.template.eq(fr.route.template), rt.mode.eq(fr.route.mode),
            rt.tc.eq(fr.tc), rt.length.eq(fr.length), pl.plane.eq(fr.route.plane),
            srv6.route.payload.eq(routes.r_data), srv6.route.valid.eq(routes.f.r_rdy),
            routes.f.r_en.eq(srv6.route.ready),
            demux.plane.payload.eq(planes.r_data), demux.plane.valid.eq(planes.f.r_rdy),
            planes.f.r_en.eq(demux.plane.ready),
        ]
        frame_done = o_valid & icrc.i.ready & icrc.i.payload.last
        build_failed = build.cpl.valid & build.cpl.ready
        started = (o_valid & icrc.i.ready) | (f_valid & frame_rdy)
        with m.If(frame_done | build_failed):
            m.d.sync += turn.eq(0)
        with m.Elif(started & (turn == 0)):
            m.d.sync += turn.eq(Mux(ack_turn, 1, 2))

        # Error completions from the segmenter and the builder share one stream; a completion
        # offered and not yet taken keeps the stream until it is (stream rules: no change under
        # valid).
        from_build = Signal()        # the builder's completion has the stream this cycle
        held = Signal()              # a completion was offered last cycle and not taken...
        held_build = Signal()        # ...and it was the builder's
        m.d.comb += from_build.eq(Mux(held, held_build, ~seg.cpl.valid))
        m.d.sync += [held.eq(self.cpl.valid & ~self.cpl.ready), held_build.eq(from_build)]
        with m.If(from_build):
            # A failed read's completion waits for its packet's turn in the frame order.
            m.d.comb += [self.cpl.payload.eq(build.cpl.payload),
                         self.cpl.valid.eq(build.cpl.valid & data_turn),
                         build.cpl.ready.eq(self.cpl.ready & data_turn)]
        with m.Else():
            m.d.comb += [self.cpl.payload.eq(seg.cpl.payload), self.cpl.valid.eq(seg.cpl.valid),
                         seg.cpl.ready.eq(self.cpl.ready)]
        with m.If(self.cpl.valid & self.cpl.ready):
            for status in WrStatus:
                if status is not WrStatus.OK:
                    with m.If(self.cpl.payload.status == status):
                        m.d.comb += getattr(self, f"err_{status.name.lower()}").eq(1)
        return m
