"""RX front end: every plane's frames in, only plain, well-formed, ICRC-correct RoCEv2 frames out."""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from mrcnic import wire

from .frame_filter import FrameFilter
from .header_parser import HeaderParser, ParseError
from .headers import assign_fields, header_bytes, header_layout
from .icrc_checker import IcrcChecker
from .rx_ingress import RxIngress
from .srv6_decap import Srv6Decapsulator, strip_layout
from .stream import check_width, packet_layout

__all__ = ["FRONT_EVENTS", "FRONT_STATS", "carried_layout", "rx_meta_layout", "drop_reasons", "arrival_tc",
           "is_trimmed", "trimmed_at_last_hop", "RxFront"]

#: the frame filter's reasons after the parser's own: a frame a guard cut short, and one for
#: another node
CUT = len(ParseError)
NOT_MINE = CUT + 1


#: the front end's own blocks' counts, by port name (the register map's icrc.* and parser.*):
#: the counters' events, then the parser's last error
FRONT_EVENTS = ("icrc_frames", "icrc_bad", "parser_frames", "parser_errors")
FRONT_STATS = (*FRONT_EVENTS, "parser_last_error")

def carried_layout():
    """The parser's fields the transport layer reads. Only these travel on: every bit of the
    record is stored per frame in three queues, and the whole record is ~1000 bits."""
    return data.StructLayout({
        "outer_present": 1,
        "outer": header_layout(wire.IPV6, only=("tc",)),
        "ip": header_layout(wire.IPV6, only=("tc", "flow_label")),
        "udp": header_layout(wire.UDP, only=("sport",)),
        "bth": header_layout(wire.BTH),
    })


def rx_meta_layout(planes):
    """What travels with every frame that passes: the parser's fields the transport layer
    reads and the plane it came on."""
    return data.StructLayout({"parsed": carried_layout(), "plane": range(planes)})


def arrival_tc(parsed):
    """The traffic class the network left on a frame: the outer header's when it came
    SRv6-encapsulated (switches mark and trim only the header they route on), else the inner's."""
    return Mux(parsed.outer_present, parsed.outer.tc, parsed.ip.tc)


def is_trimmed(parsed):
    """A data packet a switch cut to its headers (DSCP TRIMMED or TRIMMED_LASTHOP): its ICRC no
    longer holds. Only data packets are trimmed; any other packet marked so is judged by its
    ICRC."""
    data = parsed.bth.opcode.matches(*(int(o) for o in wire.DATA_OPCODES))
    return (arrival_tc(parsed) >> 2).matches(*(int(c) for c in wire.TRIMMED_CLASSES)) & data


def trimmed_at_last_hop(parsed):
    """Of a trimmed packet: the last hop, the queue to this port, cut it."""
    return (arrival_tc(parsed) >> 2) == wire.DscpClass.TRIMMED_LASTHOP


def drop_reasons():
    """The counters the front end keeps, by name: each parse error, a cut frame, a bad ICRC,
    a frame for another node."""
    return [e.name.lower() for e in ParseError if e is not ParseError.NONE] + [
        "cut", "icrc", "not_mine"]


class RxFront(wiring.Component):
    """plane ports -> frame guards and merge -> header parser -> frame filter (drops what the
    parser rejects, cut frames, and frames for another node) -> SRv6 decapsulator -> ICRC
    checker -> frame filter (drops a bad ICRC, except on a trimmed frame, which the transport
    layer answers) -> ``o``.

    Every frame that leaves is plain RoCEv2 (Ethernet, the inner IPv6 packet, ICRC), with the
    parser's fields the transport layer reads (:func:`carried_layout`) and its plane on every
    beat. Nothing else leaves: each frame dropped is counted by its reason.

    An SRv6 frame is for this node when its outer destination is ``sid`` of the plane it came
    on and no SRH segments are left (this NIC is the route's last SR node: RFC 8986 4.1 leaves
    a packet to its upper layer only there); a ``sid`` of 0 takes any. Others are dropped.

    Parameters
    ----------
    width, planes, max_frame (bytes), timeout (cycles a frame may stall), max_segments (SRH).

    Attributes
    ----------
    plane0 .. plane<N-1> : In(PacketStream(width))
    sid : In(ArrayLayout(128, planes)): this NIC's SRv6 address on each plane
    o : Out(stream {data, keep, last, meta: rx_meta_layout(planes)})
    frames : Out(1), a frame passed;  drop_<reason> : Out(1) for each of :func:`drop_reasons`
    icrc_frames, icrc_bad, parser_frames, parser_errors : Out(1): events (:attr:`events`);
    parser_last_error :
        Out(ParseError): the ICRC checker's and the header parser's own counts (the register
        map's ``icrc.*`` and ``parser.*``)
    """

    def __init__(self, width=64, planes=2, max_frame=9600, timeout=1024, max_segments=4):
        self._width = check_width(width)
        self._planes, self._segs = planes, max_segments
        L = width // 8
        # Room for two of the largest frames (the guard lets one beat past max_frame) and more.
        depth = 1 << (2 * (-(-max_frame // L) + 1)).bit_length()
        meta = rx_meta_layout(planes)
        self._ingress = RxIngress(width, planes, max_frame, timeout)
        self._parser = HeaderParser(width, max_segments, max_frame)
        # The first filter also carries what the decapsulator strips, worked out from the
        # record while it is at hand.
        self._wellformed = FrameFilter(width, self._staged_layout(), NOT_MINE + 1, depth)
        self._decap = Srv6Decapsulator(width, max_segments)
        self._icrc = IcrcChecker(width)
        self._checked = FrameFilter(width, meta, 1, depth)
        members = {f"plane{p}": In(stream.Signature(packet_layout(width))) for p in range(planes)}
        members["o"] = Out(stream.Signature(data.StructLayout({
            **{n: f.shape for n, f in packet_layout(width)}, "meta": meta})))
        members["sid"] = In(data.ArrayLayout(128, planes))
        members["frames"] = Out(1)
        members.update({f"drop_{r}": Out(1) for r in drop_reasons()})
        members.update({name: Out(1) for name in FRONT_EVENTS})
        members["parser_last_error"] = Out(ParseError)
        super().__init__(members)

    def _staged_layout(self):
        return data.StructLayout({"strip": strip_layout(self._segs),
                                  "meta": rx_meta_layout(self._planes)})

    @property
    def events(self):
        """The counters' event outputs, for the register bank to count."""
        return ("frames", *(f"drop_{r}" for r in drop_reasons()), *FRONT_EVENTS)

    def elaborate(self, platform):
        m = Module()
        ing, parser, wf, decap, icrc, ck = (self._ingress, self._parser, self._wellformed,
                                           self._decap, self._icrc, self._checked)
        for name, sub in (("ingress", ing), ("parser", parser), ("wellformed", wf),
                          ("decap", decap), ("icrc", icrc), ("checked", ck)):
            m.submodules[name] = sub
        meta = rx_meta_layout(self._planes)
        for p in range(self._planes):
            wiring.connect(m, wiring.flipped(getattr(self, f"plane{p}")), getattr(ing, f"plane{p}"))

        # Ingress -> parser; the frame goes on to the first filter, and whether a guard cut it
        # (and its plane) waits for the parser's record, which comes after its last beat.
        side = data.StructLayout({"cut": 1, "plane": range(self._planes)})
        m.submodules.sides = sides = fifo.SyncFIFOBuffered(width=side.size, depth=8)
        g = ing.o.payload
        take_last = ing.o.valid & g.last
        m.d.comb += [
            parser.i.payload.data.eq(g.data), parser.i.payload.keep.eq(g.keep),
            parser.i.payload.last.eq(g.last),
            parser.i.valid.eq(ing.o.valid & (~g.last | sides.w_rdy)),
            ing.o.ready.eq(parser.i.ready & (~g.last | sides.w_rdy)),
            sides.w_en.eq(take_last & parser.i.ready & sides.w_rdy),
        ]
        sw = side(sides.w_data)
        m.d.comb += [sw.cut.eq(g.cut), sw.plane.eq(g.plane)]
        wiring.connect(m, parser.o, wf.i)
        sd = side(sides.r_data)
        rec = parser.meta.payload
        v = wf.verdict.payload
        sid = self.sid[sd.plane]
        not_mine = Signal()
        m.d.comb += not_mine.eq(
            rec.outer_present & (sid != 0)
            & ((rec.outer.dst != sid) | (rec.srh_present & (rec.srh.segments_left != 0))))
        parsed_ok = rec.error == ParseError.NONE
        m.d.comb += [
            v.drop.eq(~parsed_ok | sd.cut | not_mine),
            v.reason.eq(Mux(sd.cut, CUT, Mux(parsed_ok, NOT_MINE, rec.error.as_value()))),
            *assign_fields(v.meta.meta.parsed, rec), v.meta.meta.plane.eq(sd.plane),
            wf.verdict.valid.eq(parser.meta.valid & sides.r_rdy),
            parser.meta.ready.eq(wf.verdict.ready & sides.r_rdy),
            sides.r_en.eq(parser.meta.valid & wf.verdict.ready & sides.r_rdy),
        ]

        outer = Mux(rec.outer_present, wire.IPV6.length, 0)
        srh = Mux(rec.srh_present, wire.SRH.length + 8 * rec.srh.hdr_ext_len, 0)
        m.d.comb += [
            v.meta.strip.eth.eq(header_bytes(
                {f.name: rec.eth[f.name] for f in wire.ETHERNET.fields}, wire.ETHERNET)),
            v.meta.strip.bytes.eq(outer + srh),
        ]

        # First filter -> decapsulator. At a frame's first beat its strip record goes to the
        # decapsulator and its record to the second filter, which judges it after the ICRC.
        w = wf.o.payload
        m.submodules.metas = metas = fifo.SyncFIFOBuffered(width=meta.size, depth=16)
        first = Signal(init=1)
        sent = Signal()
        room = decap.strip.ready & metas.w_rdy
        go = ~first | sent | room
        m.d.comb += [
            decap.strip.payload.eq(w.meta.strip),
            decap.strip.valid.eq(wf.o.valid & first & ~sent & metas.w_rdy),
            metas.w_en.eq(wf.o.valid & first & ~sent & room), metas.w_data.eq(w.meta.meta),
            decap.i.payload.data.eq(w.data), decap.i.payload.keep.eq(w.keep),
            decap.i.payload.last.eq(w.last),
            decap.i.valid.eq(wf.o.valid & go), wf.o.ready.eq(decap.i.ready & go),
        ]
        with m.If(wf.o.valid & first & ~sent & room):
            m.d.sync += sent.eq(1)
        with m.If(wf.o.valid & wf.o.ready):
            m.d.sync += [first.eq(w.last), sent.eq(0)]

        # Decapsulator -> ICRC checker -> second filter, judged by the ICRC at the last beat.
        wiring.connect(m, decap.o, icrc.i)
        c = icrc.o.payload
        verdict_ok = ~c.last | ck.verdict.ready
        m.d.comb += [
            ck.i.payload.data.eq(c.data), ck.i.payload.keep.eq(c.keep),
            ck.i.payload.last.eq(c.last),
            ck.i.valid.eq(icrc.o.valid & verdict_ok & metas.r_rdy),
            icrc.o.ready.eq(ck.i.ready & verdict_ok & metas.r_rdy),
            # A trimmed frame lost the bytes its ICRC covered; the transport layer NACKs it.
            ck.verdict.payload.drop.eq(~c.icrc_ok & ~is_trimmed(meta(metas.r_data).parsed)),
            ck.verdict.payload.reason.eq(0),
            ck.verdict.payload.meta.eq(meta(metas.r_data)),
            ck.verdict.valid.eq(icrc.o.valid & c.last & ck.i.ready & metas.r_rdy),
            metas.r_en.eq(icrc.o.valid & c.last & ck.i.ready & ck.verdict.ready),
        ]
        wiring.connect(m, ck.o, wiring.flipped(self.o))

        m.d.comb += self.frames.eq(ck.passed)
        for e in ParseError:
            if e is not ParseError.NONE:
                m.d.comb += getattr(self, f"drop_{e.name.lower()}").eq(
                    getattr(wf, f"dropped{e.value}"))
        m.d.comb += [self.drop_cut.eq(getattr(wf, f"dropped{CUT}")),
                     self.drop_not_mine.eq(getattr(wf, f"dropped{NOT_MINE}")),
                     self.drop_icrc.eq(ck.dropped0),
                     self.icrc_frames.eq(icrc.frames), self.icrc_bad.eq(icrc.bad),
                     self.parser_frames.eq(parser.frames), self.parser_errors.eq(parser.errors),
                     self.parser_last_error.eq(parser.last_error)]
        return m
