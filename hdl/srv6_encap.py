"""SRv6 encapsulation: the outer IPv6 header (and SRH) that source-routes a packet on its EV."""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from mrcnic import wire
from mrcnic.evmap import USID_BITS, EvLayout

from .ev_fields import ev_plane, ev_spine
from .head_splitter import HeadSplitter
from .headers import header_bytes
from .prefix_inserter import PrefixInserter
from .qp_context import SrMode
from .stream import PacketFIFO, PacketStream, check_width
from .two_entry_fifo import TwoEntryFIFO

__all__ = ["Srv6Encapsulator", "route_layout", "template_layout"]


def route_layout(templates):
    """Per frame: its EV, the destination's template, the QP's mode, its traffic class and the
    frame's length in bytes (before encapsulation)."""
    return data.StructLayout({"ev": 32, "template": range(templates), "mode": SrMode,
                              "tc": 8, "length": 16})


def template_layout(templates, max_usids):
    """A template: its locator ``block`` (the low 16 bits used unless ``wide``: F3216's 32-bit
    block, six uSIDs a carrier, against F1616's seven), its uSIDs in hop order and which is
    the spine's."""
    return data.StructLayout({
        "index": range(templates), "block": 32, "wide": 1, "count": range(max_usids + 1),
        "spine_index": range(max_usids), "usids": data.ArrayLayout(USID_BITS, max_usids)})


class Srv6Encapsulator(wiring.Component):
    """Enters: plain RoCEv2 frames (ICRC included) and, per frame, its route. Leaves: the frame
    as the network must carry it, the EV-to-path mapping of :mod:`mrcnic.evmap` in hardware.

    Modes (per QP): PLAIN leaves the frame as it is; USID puts an outer IPv6 header (next header
    41) in front of the inner one, its destination the first uSID carrier of the template with the
    EV's plane in every uSID and its spine in the template's spine uSID, and adds an SRH (routing
    type 4, every carrier, segments_left = last_entry = carriers - 1) only when the path needs
    more than one carrier; USID_SRH always adds the SRH. The outer header copies the traffic class
    and the EV's flow label, and takes its source address from ``src_ip``.

    Templates (block, uSIDs in hop order, which uSID is the spine's) are written through
    ``template_write``; the block is 16 bits (F1616: seven uSIDs a carrier) or 32 (F3216: six).

    Every frame's Ethernet destination becomes ``next_hop`` of the plane its EV names, unless
    that is 0: on a routed fabric the next hop is the leaf's router port, whatever the peer.

    Attributes
    ----------
    i : In(PacketStream(width));  route : In(stream route_layout)
    template_write : In(stream template_layout)
    src_ip : In(128);  next_hop : In(ArrayLayout(48, planes))
    o : Out(PacketStream(width))
    """

    def __init__(self, width=64, templates=16, max_usids=14, ev_layout=None):
        self._width = check_width(width)
        ev_layout = EvLayout(planes=2, spines=4) if ev_layout is None else ev_layout
        if not isinstance(ev_layout, EvLayout):
            raise TypeError(f"ev_layout must be an mrcnic.evmap.EvLayout, not {ev_layout!r}")
        if not isinstance(templates, int) or templates < 1:
            raise ValueError(f"templates must be a positive integer, not {templates!r}")
        if not isinstance(max_usids, int) or not 1 <= max_usids <= 28:
            raise ValueError(f"max_usids must be 1 .. 28, not {max_usids!r}")
        self._templates, self._max_usids, self._ev = templates, max_usids, ev_layout
        # (F3216 holds the fewer a carrier: the carriers are counted for it)
        self._per_carrier = {False: (128 - 16) // USID_BITS, True: (128 - 32) // USID_BITS}
        self._carriers = -(-max_usids // self._per_carrier[True])
        super().__init__({
            "i": In(PacketStream(width)),
            "route": In(stream.Signature(route_layout(templates))),
            "template_write": In(stream.Signature(template_layout(templates, max_usids))),
            "src_ip": In(128),
            "next_hop": In(data.ArrayLayout(48, ev_layout.planes)),
            "o": Out(PacketStream(width)),
        })

    def prefix_lengths(self):
        eth, ip, srh = wire.ETHERNET.length, wire.IPV6.length, wire.SRH.length
        return (eth, eth + ip) + tuple(eth + ip + srh + 16 * c
                                       for c in range(1, self._carriers + 1))

    def elaborate(self, platform):
        m = Module()
        T, U, C, PC = self._templates, self._max_usids, self._carriers, self._per_carrier
        ev_l = self._ev
        m.submodules.split = split = HeadSplitter(self._width, wire.ETHERNET.length)
        m.submodules.insert = insert = PrefixInserter(self._width, self.prefix_lengths())
        wiring.connect(m, wiring.flipped(self.i), split.i)
        # A few beats of slack let the splitter take the next frame's Ethernet header while the
        # inserter still sends this frame's body, so the next prefix is ready when it ends.
        m.submodules.body = body = PacketFIFO(self._width, 8)
        wiring.connect(m, split.o, body.i)
        wiring.connect(m, body.o, insert.i)
        # Heads queue too, so the splitter goes on with the next frame's body before the
        # inserter has taken that frame's prefix. (Two: a frame is longer than the body's
        # slack, so no more are ever between them; two deep the queue is two registers, where
        # four deep it was a distributed RAM.)
        m.submodules.heads = heads = TwoEntryFIFO(8 * wire.ETHERNET.length)
        m.d.comb += [heads.w_data.eq(split.head.payload.data), heads.w_en.eq(split.head.valid),
                     split.head.ready.eq(heads.w_rdy)]
        wiring.connect(m, insert.o, wiring.flipped(self.o))

        tl = template_layout(T, U)
        entry = data.StructLayout({k: v.shape for k, v in tl if k != "index"})
        m.submodules.table = table = Memory(shape=entry, depth=T, init=[])
        wr = table.write_port()
        tw = self.template_write.payload
        m.d.comb += [self.template_write.ready.eq(1), wr.en.eq(self.template_write.valid),
                     wr.addr.eq(tw.index),
                     wr.data.eq(Cat(*[tw[k] for k, _ in entry]))]
        rd = table.read_port()

        # Take a route, read its template (one cycle), then build the prefix when the frame's
        # Ethernet header has arrived.
        route = Signal(route_layout(T))
        tpl = entry(rd.data)
        m.d.comb += rd.addr.eq(Mux(self.route.valid & self.route.ready, self.route.payload.template,
                                   route.template))

        plane = Signal(16)
        spine = Signal(16)
        m.d.comb += [
            plane.eq(ev_plane(ev_l, route.ev)),
            spine.eq(ev_spine(ev_l, route.ev)),
        ]
        usids = [Signal(USID_BITS, name=f"usid{i}") for i in range(C * PC[False])]
        for i, u in enumerate(usids):
            if i < U:
                with m.If(i < tpl.count):
                    m.d.comb += u.eq(tpl.usids[i] | (plane << 12)
                                     | Mux(tpl.spine_index == i, spine, 0))
        carriers = [Signal(128, name=f"carrier{c}") for c in range(C)]
        for c, carrier in enumerate(carriers):
            narrow = Cat(*reversed(usids[c * PC[False]:(c + 1) * PC[False]]), tpl.block[:16])
            wide = Cat(*reversed(usids[c * PC[True]:(c + 1) * PC[True]]), tpl.block)
            m.d.comb += carrier.eq(Mux(tpl.wide, wide, narrow))
        ncar = Signal(range(C + 1))
        for c in reversed(range(1, C + 1)):
            with m.If(tpl.count <= c * Mux(tpl.wide, PC[True], PC[False])):
                m.d.comb += ncar.eq(c)
        use_srh = Signal()
        # (with a single carrier only USID_SRH adds an SRH)
        m.d.comb += use_srh.eq((route.mode == SrMode.USID_SRH) | ((ncar > 1) if C > 1 else 0))
        srh_len = Signal(16)
        m.d.comb += srh_len.eq(Mux(use_srh, wire.SRH.length + 16 * ncar, 0))

        outer = header_bytes({
            "version": 6, "tc": route.tc, "flow_label": route.ev[:16],
            "payload_length": route.length - wire.ETHERNET.length + srh_len,
            "next_header": Mux(use_srh, wire.IPPROTO_ROUTING, wire.IPPROTO_IPV6),
            "hop_limit": 64, "src": self.src_ip, "dst": carriers[0]}, wire.IPV6)
        srh = header_bytes({
            "next_header": wire.IPPROTO_IPV6, "hdr_ext_len": 2 * ncar,
            "routing_type": wire.SRH_ROUTING_TYPE, "segments_left": ncar - 1,
            "last_entry": ncar - 1}, wire.SRH)
        segments = []
        for k in range(C):             # segment[k] = carrier[ncar - 1 - k]
            seg = Signal(128, name=f"segment{k}")
            for c in range(C):
                with m.If(ncar - 1 - k == c):
                    m.d.comb += seg.eq(carriers[c])
            segments.append(header_bytes({"dst": seg}, wire.IPV6)[8 * 24:8 * 40])

        with m.FSM():
            with m.State("ROUTE"):
                m.d.comb += self.route.ready.eq(1)
                with m.If(self.route.valid):
                    m.d.sync += route.eq(self.route.payload)
                    m.next = "PREFIX"
            with m.State("PREFIX"):
                # (the Ethernet destination is the header's first six bytes, first in the low bits)
                hop = self.next_hop[ev_plane(ev_l, route.ev)]
                eth = Cat(Mux(hop != 0, header_bytes({"dst": hop}, wire.ETHERNET)[:48],
                              heads.r_data[:48]), heads.r_data[48:])
                plain = route.mode == SrMode.PLAIN
                m.d.comb += [
                    insert.prefix.valid.eq(heads.r_rdy),
                    insert.prefix.payload.data.eq(Cat(eth, outer, srh, *segments)),
                    insert.prefix.payload.length.eq(
                        Mux(plain, wire.ETHERNET.length,
                            wire.ETHERNET.length + wire.IPV6.length + srh_len)),
                    heads.r_en.eq(insert.prefix.ready),
                ]
                with m.If(heads.r_rdy & insert.prefix.ready):
                    m.next = "ROUTE"
        return m
