"""The NIC: the register bank and the datapath (TX and RX) it configures and observes."""

from amaranth import Cat, Module, Mux, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from mrcnic.regmap import (
    CC_PARAMS,
    MAX_PLANES,
    NIC_REGISTERS,
    REL_COUNTERS,
    TX_ERROR_REASONS,
    Access,
    by_name,
)

from .cc_profile_table import CcProfileTable
from .completion_queue import CompletionQueue
from .csr_bus import CSRBus
from .ev_event_queue import EvEventQueue
from .ev_prober import EvProber, probe_layout
from .host_memory import MemReadPort, MemWritePort
from .memory_share import MemoryShare
from .memory_window import MemoryWindow
from .path_stats import PathStats
from .plane_demux import plane_members
from .port_gate import PortGate
from .port_status import PortStatusReporter
from .qp_context import QpState, SrMode
from .register_bank import RegisterBank
from .retransmit_tracker import RelMode, RetransmitTracker
from .rx_event import completion_layout as rx_completion_layout
from .rx_front import FRONT_STATS
from .rx_pipeline import RxPipeline, rx_counter_names
from .segmenter import completion_layout, work_request_layout
from .spray_scheduler import EvState, LoadOp
from .stream import PacketStream, RecordMerge, RegSlice
from .tx_pipeline import TxPipeline

__all__ = ["Nic"]


def _staged(m, bank, block, target, rename=None):
    """Drives every field of ``target`` (a layout view) from the RW register of the same name
    in ``block`` (or the name ``rename`` gives), refusing to elaborate when the register map and
    the layout disagree on a width: the two must describe the same field."""
    rename = rename or {}
    for name, field in target.shape():
        path = rename.get(name, f"{block}.{name}")
        reg = by_name(path)
        if reg.width != field.width:
            raise ValueError(f"register {path} is {reg.width} bits, the layout's {name} is "
                             f"{field.width}")
        m.d.comb += Value.cast(getattr(target, name)).eq(getattr(bank, reg.port))


class Nic(wiring.Component):
    """The NIC's register bank joined to its TX and RX pipelines and the reliability engine
    between them.

    Management reaches the datapath only through the CSR bus (docs/registers.md): the enable
    (``global.control``), QP contexts
    (``qp.*``), EV profiles and their states (``ev.*``), uSID templates (``tpl.*``), this NIC's
    addresses and the planes it may use (``tx.*``), the acknowledgement policy (``rx.*``), the
    recovery mode and timers (``rel.*``); the counters read back there too. The receive side's
    SACKs and NACKs leave through the TX pipeline; the SACKs and NACKs it receives go to the
    retransmit tracker, which completes work requests, sends packets again and sets EV states.

    Parameters
    ----------
    width, qps, evs, planes, spines, templates, max_usids, backups, prefetch : as
        :class:`TxPipeline`.
    window, messages, max_frame, rx_timeout, max_segments : as :class:`RxPipeline` (its
        ``timeout`` is ``rx_timeout``); ``window`` is the send window too.
    cq_depth : entries of the register completion queue (cq.*);  evq_depth : of the EV event
        queue (evq.*).
    cc_profiles : CC profiles (global.cc_profiles): 0, the rel.* registers, and those cc.write
        stores; each QP's window follows the one its qp.cc_profile names.

    Attributes
    ----------
    bus : In(CSRBus())
    wr : In(work requests), beside those posted through wq.post;  mem : Out(MemReadPort(width)),
        shared by the TX side and the memory window (mem.*), as is ``rx_mem``
    cpl : Out(completions): OK once a request's last packet is acknowledged (or, with rel.mode
        OFF, sent), or the error that stopped it; unless cq.route sends them to the register
        completion queue (cq.*), as it may ``rx_cpl``.
    port_ready : In(planes), each plane's port has its link (net.port_admin may hold one down)
    plane0 .. plane<N-1> : Out(PacketStream(width))
    rx_plane0 .. rx_plane<N-1> : In(PacketStream(width)), what each port receives
    rx_mem : Out(MemWritePort(width)), where data is placed
    rx_cpl : Out(stream {qp, msn, imm, has_imm}), messages received whole, in MSN order
    """

    def __init__(self, width=64, qps=16, evs=64, planes=2, spines=4, templates=16, max_usids=14,
                 backups=4, prefetch=2, window=256, messages=512, max_frame=9600,
                 rx_timeout=1024, max_segments=4, cq_depth=64, evq_depth=64, cc_profiles=4):
        if not 1 <= planes <= MAX_PLANES:
            raise ValueError(f"planes must be 1 .. {MAX_PLANES}, not {planes!r}")
        if max_usids > by_name("tpl.count").max_value:
            raise ValueError(f"max_usids must be at most {by_name('tpl.count').max_value}")
        # The register map states these limits in its own words: they must be the enums'.
        for path, enum in (("qp.state", QpState), ("qp.mode", SrMode), ("ev.load", LoadOp),
                           ("ev.set_state", EvState), ("rel.mode", RelMode)):
            top = max(e.value for e in enum)
            if by_name(path).max_value != top:
                raise ValueError(f"register {path} accepts up to {by_name(path).max_value}, "
                                 f"{enum.__name__} goes up to {top}")
        self._params = dict(width=width, qps=qps, evs=evs, planes=planes, spines=spines,
                            templates=templates, max_usids=max_usids, backups=backups,
                            prefetch=prefetch)
        self._tx = TxPipeline(**self._params)
        self._rx = RxPipeline(width, planes, qps, window, messages, max_frame, rx_timeout,
                              max_segments)
        self._rel = RetransmitTracker(qps, evs, planes, window, spines)
        self._prober = EvProber(qps, evs)
        self._status = PortStatusReporter(qps, planes)
        self._cq = CompletionQueue(qps, cq_depth)
        self._evq = EvEventQueue(qps, evs, evq_depth)
        self._cc = CcProfileTable(qps, cc_profiles)
        self._paths = PathStats(qps, evs)
        self._window = MemoryWindow(width)
        self._share = MemoryShare(width)
        self._bank = RegisterBank(
            constants={"global.data_width": width, "global.planes": planes, "global.qps": qps,
                       "global.evs": evs, "global.templates": templates,
                       "global.max_usids": max_usids, "global.spines": spines,
                       "global.spares": backups, "cq.depth": cq_depth,
                       "evq.depth": evq_depth, "global.cc_profiles": cc_profiles},
            limits={"qp.write": qps - 1, "ev.qp": qps - 1, "rel.view_qp": qps - 1,
                    "ev.index": evs - 1, "tpl.write": templates - 1, "qp.template": templates - 1,
                    "tpl.count": max_usids, "tpl.spine_index": max_usids - 1,
                    "ep.qp": qps - 1, "ep.entry": evs - 1, "qp.cc_profile": cc_profiles - 1,
                    "cc.write": cc_profiles - 1, "path.qp": qps - 1, "path.entry": evs - 1},
            registers=NIC_REGISTERS, planes=planes,
            # block RAM read ports behind selectors (ev.qp/ev.index, path.qp/path.entry)
            late=("ev.entry", *(r.path for r in NIC_REGISTERS
                                if r.block == "path" and r.access is Access.RO)))
        members = {
            "bus": In(CSRBus()),
            "wr": In(stream.Signature(work_request_layout())),
            "cpl": Out(stream.Signature(completion_layout(qps))),
            "mem": Out(MemReadPort(width)),
            "port_ready": In(planes),
            **{f"rx_plane{p}": In(PacketStream(width)) for p in range(planes)},
            "rx_mem": Out(MemWritePort(width)),
            "rx_cpl": Out(stream.Signature(rx_completion_layout(qps))),
        }
        members.update({k: v for k, v in plane_members(width, planes).items()
                        if k.startswith("plane")})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.bank = bank = self._bank
        m.submodules.tx = tx = self._tx
        m.submodules.rx = rx = self._rx
        m.submodules.rel = rel = self._rel
        m.submodules.prober = prober = self._prober
        m.submodules.status = status = self._status
        planes = self._params["planes"]
        flip = wiring.flipped

        wiring.connect(m, flip(self.bus), bank.bus)
        # A port is up while its link is and management lets it (net.port_admin); one held
        # down is down to everything, as if its link had failed.
        up = Signal(planes)
        m.d.comb += [up.eq(self.port_ready & bank.net_port_admin[:planes]),
                     bank.net_port_up.eq(up)]
        # global.control bit 0 gates the work requests; the addresses are taken up only while
        # it is clear, so a packet never carries half of an old and half of a new one.
        enabled = bank.global_control[0]
        # Work requests: the host's stream, and the one wq.post stages in registers.
        m.submodules.wr_merge = wrs = RecordMerge(self.wr.payload.shape(), 2)
        wiring.connect(m, flip(self.wr), wrs.i0)
        posted = wrs.i1.payload
        for name, _ in posted.shape():
            if name != "wr_id":
                m.d.comb += getattr(posted, name).eq(getattr(bank, f"wq_{name}"))
        m.d.comb += [posted.wr_id.eq(bank.wq_post.payload), wrs.i1.valid.eq(bank.wq_post.valid),
                     bank.wq_post.ready.eq(wrs.i1.ready)]
        with m.If(bank.wq_post.valid & bank.wq_post.ready):
            m.d.comb += bank.wq_posted.eq(1)
        m.d.comb += [tx.wr.payload.eq(wrs.o.payload), tx.wr.valid.eq(wrs.o.valid & enabled),
                     wrs.o.ready.eq(tx.wr.ready & enabled)]
        src_mac, src_ip = Signal(48), Signal(128)
        with m.If(~enabled):
            m.d.sync += [src_mac.eq(bank.tx_src_mac), src_ip.eq(bank.tx_src_ip)]
        # Completions: the tracker's (OK) and the TX side's errors share one stream; it and the
        # receive side's go out, or to the register completion queue.
        m.submodules.cpl_merge = cpls = RecordMerge(self.cpl.payload.shape(), 2)
        m.submodules.cq = cq = self._cq
        # (the tracker's through a register: the merge's ready answers its valid, and the
        # tracker's record RAM reads on whether its offer was taken)
        m.submodules.rel_cpl_slice = rel_cpl = RegSlice(rel.cpl.payload.shape())
        wiring.connect(m, rel.cpl, rel_cpl.i)
        wiring.connect(m, rel_cpl.o, cpls.i0)
        wiring.connect(m, tx.cpl, cpls.i1)
        wiring.connect(m, cpls.o, cq.send)
        wiring.connect(m, cq.send_out, flip(self.cpl))
        wiring.connect(m, rx.cpl, cq.recv)
        wiring.connect(m, cq.recv_out, flip(self.rx_cpl))
        m.d.comb += [cq.route.eq(bank.cq_route), bank.cq_count.eq(cq.count),
                     bank.cq_entry.eq(cq.entry), bank.cq_overflows.eq(cq.overflows)]
        wiring.connect(m, bank.cq_pop, cq.pop)
        # The memory ports: the datapath's, and the register window's (mem.*).
        m.submodules.window = window = self._window
        m.submodules.share = share = self._share
        m.d.comb += [window.addr.eq(bank.mem_addr), window.length.eq(bank.mem_length),
                     window.wdata.eq(bank.mem_wdata), bank.mem_rdata.eq(window.rdata),
                     bank.mem_error.eq(window.error), bank.mem_errors.eq(window.errors)]
        wiring.connect(m, bank.mem_access, window.access)
        wiring.connect(m, tx.mem, share.rd0)
        wiring.connect(m, window.rd, share.rd1)
        wiring.connect(m, share.rd, flip(self.mem))
        wiring.connect(m, rx.mem, share.wr0)
        wiring.connect(m, window.wr, share.wr1)
        wiring.connect(m, share.wr, flip(self.rx_mem))
        for p in range(planes):
            wiring.connect(m, getattr(tx, f"plane{p}"), flip(getattr(self, f"plane{p}")))
        m.d.comb += [
            tx.src_mac.eq(src_mac), tx.src_ip.eq(src_ip),
            *[tx.next_hop[p].eq(getattr(bank, f"net_next_hop_p{p}")) for p in range(planes)],
            *[rx.sid[p].eq(getattr(bank, f"net_sid_p{p}")) for p in range(planes)],
            tx.port_ready.eq(up & bank.tx_plane_enable[:planes]),
            tx.spray_mode.eq(bank.tx_spray), tx.trim_rounds.eq(bank.tx_trim_rounds),
            tx.port_rate.eq(bank.tx_port_rate), tx.port_limit.eq(bank.tx_port_limit),
        ]

        # qp.write: the staged qp.* fields become that QP's context.
        ctx = tx.ctx_write.payload
        _staged(m, bank, "qp", ctx.static)
        _staged(m, bank, "qp", ctx.seq)
        # ...its receive side starts again from qp.rx_psn / qp.rx_msn, and its sender's
        # tracker from qp.next_psn with nothing in flight: each takes it when it is ready, and
        # the write is done when all have.
        init = rx.init.payload
        m.d.comb += [
            ctx.qp.eq(bank.qp_write.payload), init.qp.eq(bank.qp_write.payload),
            init.psn.eq(bank.qp_rx_psn), init.msn.eq(bank.qp_rx_msn),
            rel.init.payload.qp.eq(bank.qp_write.payload),
            rel.init.payload.psn.eq(ctx.seq.next_psn),
        ]
        # ...and its window follows the CC profile qp.cc_profile names
        m.submodules.cc = cc = self._cc
        m.d.comb += [cc.assign.payload.qp.eq(bank.qp_write.payload),
                     cc.assign.payload.profile.eq(bank.qp_cc_profile)]
        # Each taker's valid is the write's and whether it has taken it, never another taker's
        # ready: offered only when all were ready at once, the reliability engine's start of
        # the QP (its window from the CC profile, through a multiplier) waited on the QP
        # context's ready, which a packet leaving the segmenter takes in the same cycle, and
        # that was the core clock's longest path (27 MHz on the ECPIX-5). The bank holds the
        # write until every taker has it.
        takers = (tx.ctx_write, rx.init, rel.init, cc.assign)
        taken = Signal(len(takers))
        for k, t in enumerate(takers):
            m.d.comb += t.valid.eq(bank.qp_write.valid & ~taken[k])
        m.d.comb += bank.qp_write.ready.eq(Cat(*[taken[k] | t.ready
                                                 for k, t in enumerate(takers)]).all())
        with m.If(bank.qp_write.valid & bank.qp_write.ready):
            m.d.sync += taken.eq(0)
        with m.Else():
            m.d.sync += taken.eq(taken | Cat(*[t.valid & t.ready for t in takers]))

        # The receive side: each port's frames in, data to host memory, completions out, its
        # QP context read from the TX side's, its acknowledgements out through the TX side.
        # SACK, NACK and endpoint packets go to the retransmit tracker.
        drops = []
        for p in range(planes):
            m.submodules[f"gate{p}"] = gate = PortGate(self._params["width"])
            wiring.connect(m, flip(getattr(self, f"rx_plane{p}")), gate.i)
            wiring.connect(m, gate.o, getattr(rx, f"plane{p}"))
            m.d.comb += gate.enable.eq(bank.net_port_admin[p])
            drops.append(gate.dropped)
        m.d.comb += bank.net_disabled_drops.eq(sum(drops))
        # The receive side's acknowledgements, the prober's probes and the port status leave
        # through the TX side's acknowledgement path.
        wiring.connect(m, rx.ack, tx.ack)
        # The controller's probes (ep.probe) beside the prober's: one on a plane whose port is
        # down would wait for it, and every acknowledgement behind it, so it is refused.
        m.submodules.probe_merge = probes = RecordMerge(probe_layout(self._params["qps"]), 2)
        mine = probes.i0.payload
        ep_ts = Signal(16)                    # the send time, held while the probe is offered
        with m.If(~bank.ep_probe.valid):
            m.d.sync += ep_ts.eq(tx.timestamp)
        plane_up = bank.net_port_up.bit_select(bank.ep_entry % planes, 1)
        m.d.comb += [mine.qp.eq(bank.ep_qp), mine.entry.eq(bank.ep_entry), mine.ts.eq(ep_ts),
                     probes.i0.valid.eq(bank.ep_probe.valid & plane_up),
                     bank.ep_probe.ready.eq(Mux(plane_up, probes.i0.ready, 1))]
        with m.If(bank.ep_probe.valid & ~plane_up):
            m.d.comb += bank.ep_refused.eq(1)
        wiring.connect(m, prober.probe, probes.i1)
        wiring.connect(m, probes.o, tx.probe)
        answer = rel.probe_answer.payload
        with m.If(rel.probe_answer.valid & (answer.qp == bank.ep_qp)
                  & (answer.index == bank.ep_entry)):
            m.d.sync += [bank.ep_answers.eq(bank.ep_answers + 1), bank.ep_rtt.eq(answer.rtt)]
        wiring.connect(m, bank.ep_status, status.kick)
        wiring.connect(m, status.status, tx.status)
        m.d.comb += [prober.bad.eq(tx.bad), tx.bad_qp.eq(prober.bad_qp),
                     prober.now.eq(tx.timestamp), prober.interval.eq(bank.rel_probe_interval),
                     # the peers hear of the ports themselves: a plane disabled for sending
                     # (tx.plane_enable) still receives, one held down (net.port_admin) not
                     status.port_ready.eq(up), status.enable.eq(enabled),
                     status.now.eq(tx.timestamp), status.interval.eq(bank.rel_status_interval)]
        m.d.comb += [tx.rx_ctx_addr.eq(rx.ctx_addr), rx.ctx.eq(tx.rx_ctx),
                     rx.coalesce.eq(bank.rx_coalesce), rx.timeout.eq(bank.rx_ack_timeout),
                     rx.share_period.eq(bank.rx_share_period)]
        for name in rx_counter_names():
            m.d.comb += getattr(bank, f"rx_{name}").eq(getattr(rx, name))
        for name in FRONT_STATS:                 # icrc.* and parser.*: the same port names
            m.d.comb += getattr(bank, name).eq(getattr(rx, name))

        # The reliability engine: it records what the TX side sends, hears the feedback, sends
        # packets again and opens each QP's window.
        wiring.connect(m, rx.feedback, rel.feedback)
        wiring.connect(m, rel.retransmit, tx.rtx)
        wiring.connect(m, tx.sent, rel.sent)
        wiring.connect(m, tx.probed, rel.probed)
        wiring.connect(m, rel.peer, tx.peer)
        # rel.ev_health 0: losses move no EV (the baselines MRC is measured against).
        health = bank.rel_ev_health
        m.d.comb += [tx.hold.eq(Mux(health, rel.hold, 0)), rel.ev_health.eq(health)]
        m.d.comb += [rel.now.eq(tx.timestamp), tx.gate_open.eq(rel.gate_open),
                     tx.gate_ready.eq(rel.gate_ready),
                     rel.mode.as_value().eq(bank.rel_mode)]
        for name in ("qp", "psn", "length", "take"):
            m.d.comb += getattr(rel, f"gate_{name}").eq(getattr(tx, f"gate_{name}"))
        for name in ("reorder", "reo_wnd", "rto_min", "rto_max", "rcv_wnd", "view_qp"):
            m.d.comb += getattr(rel, name).eq(getattr(bank, f"rel_{name}"))
        # The congestion parameters: those of the profile the QP being served follows (rel.*
        # is profile 0; cc.write stores the others from the staged cc.*).
        _staged(m, bank, "rel", cc.base)
        _staged(m, bank, "cc", cc.write.payload.params)
        m.d.comb += [cc.write.payload.profile.eq(bank.cc_write.payload),
                     cc.write.valid.eq(bank.cc_write.valid), bank.cc_write.ready.eq(cc.write.ready),
                     cc.qp.eq(rel.cc_qp), cc.view_qp.eq(bank.rel_view_qp),
                     bank.cc_view.eq(cc.view_profile)]
        # (registered: the tracker names the QP a cycle ahead)
        for name in CC_PARAMS:
            m.d.sync += getattr(rel, name).eq(getattr(cc.params, name))

        # path.*: what each profile entry's path did, from the reliability engine's events
        m.submodules.paths = paths = self._paths
        wiring.connect(m, rel.path_event, paths.event)
        m.d.comb += [paths.view_qp.eq(bank.path_qp), paths.view_index.eq(bank.path_entry)]
        for name, _ in paths.view.shape():
            m.d.comb += getattr(bank, f"path_{name}").eq(getattr(paths.view, name))
        for name in ("cwnd", "inflight", "rtt", "srtt"):
            m.d.comb += getattr(bank, f"rel_{name}").eq(getattr(rel, f"view_{name}"))
        for name in REL_COUNTERS:
            event = getattr(tx if name == "status_sent" else rel, name)
            if name in ("ev_skip", "ev_bad"):
                event = event & health      # (what rel.ev_health 0 drops was never set)
            m.d.comb += getattr(bank, f"rel_{name}").eq(event)

        # ev.load: an entry, a spare or a clear of the staged QP's profile.
        ld = tx.ev_load.payload
        m.d.comb += [ld.qp.eq(bank.ev_qp), ld.index.eq(bank.ev_index), ld.ev.eq(bank.ev_value),
                     ld.op.eq(bank.ev_load.payload), tx.ev_load.valid.eq(bank.ev_load.valid),
                     bank.ev_load.ready.eq(tx.ev_load.ready)]

        m.d.comb += [tx.ev_view_qp.eq(bank.ev_qp), tx.ev_view_index.eq(bank.ev_index),
                     bank.ev_state.eq(tx.ev_view_state), bank.ev_entry.eq(tx.ev_view_ev),
                     bank.ev_size.eq(tx.ev_view_size)]

        # ev.set_state (management, so DENIED can be set and left) or the reliability engine,
        # whose updates leave it through a register: its decision, in the cycle it reads a
        # QP's row, and the spray scheduler's taking of an update were one path.
        m.submodules.ev_update_slice = ev_up = RegSlice(rel.ev_update.payload.shape())
        wiring.connect(m, rel.ev_update, ev_up.i)
        up = tx.ev_update.payload
        with m.If(bank.ev_set_state.valid):
            m.d.comb += [up.qp.eq(bank.ev_qp), up.index.eq(bank.ev_index),
                         up.state.eq(bank.ev_set_state.payload), up.management.eq(1),
                         tx.ev_update.valid.eq(1), bank.ev_set_state.ready.eq(tx.ev_update.ready)]
        with m.Else():
            r = ev_up.o.payload
            m.d.comb += [up.qp.eq(r.qp), up.index.eq(r.index), up.state.eq(r.state),
                         up.path.eq(r.path), up.trim.eq(r.trim), up.management.eq(0),
                         tx.ev_update.valid.eq(ev_up.o.valid & health),
                         ev_up.o.ready.eq(tx.ev_update.ready | ~health)]

        # EV events: the spray scheduler's changes a controller subscribed to.
        m.submodules.evq = evq = self._evq
        m.d.comb += [evq.changed.payload.eq(tx.ev_changed.payload),
                     evq.changed.valid.eq(tx.ev_changed.valid), evq.mask.eq(bank.evq_mask),
                     bank.evq_count.eq(evq.count), bank.evq_entry.eq(evq.entry),
                     bank.evq_overflows.eq(evq.overflows)]
        wiring.connect(m, bank.evq_pop, evq.pop)

        # tpl.write: the staged tpl.* fields become that template.
        tpl = tx.template_write.payload
        usids = tpl.usids.as_value()
        m.d.comb += [tpl.index.eq(bank.tpl_write.payload), tpl.block.eq(bank.tpl_block),
                     tpl.wide.eq(bank.tpl_format),
                     tpl.count.eq(bank.tpl_count), tpl.spine_index.eq(bank.tpl_spine_index),
                     usids.eq(bank.tpl_usids[:len(usids)]),
                     tx.template_write.valid.eq(bank.tpl_write.valid),
                     bank.tpl_write.ready.eq(tx.template_write.ready)]

        # Counters.
        m.d.comb += [bank.tx_requests.eq(tx.requests), bank.tx_ev_refused.eq(tx.ev_refused),
                     bank.tx_ev_replaced.eq(tx.ev_replaced)]
        for why in TX_ERROR_REASONS:
            m.d.comb += getattr(bank, f"tx_err_{why}").eq(getattr(tx, f"err_{why}"))
        for p in range(planes):
            m.d.comb += [getattr(bank, f"tx_frames_p{p}").eq(getattr(tx, f"frames{p}")),
                         getattr(bank, f"tx_bytes_p{p}").eq(getattr(tx, f"bytes{p}"))]
        return m

