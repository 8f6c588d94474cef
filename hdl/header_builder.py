"""Header builder: turns each packet descriptor into a framed MRC packet with its payload."""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from mrcnic import wire

from .bits import word_mux
from .headers import header_bytes
from .host_memory import MemReadPort
from .qp_context import SrMode, peer_layout
from .segmenter import WrStatus, completion_layout, packet_descriptor_layout
from .stream import PacketStream, check_width, keep_count, keep_mask
from .two_entry_fifo import buffered_fifo

__all__ = ["HeaderBuilder", "build_request_layout", "frame_layout", "HEADER_BYTES"]

_DATA_HEADERS = (wire.ETHERNET, wire.IPV6, wire.UDP, wire.BTH, wire.METH, wire.TSETH, wire.RETH)
#: Header bytes before the payload: without and with ImmDt.
HEADER_BYTES = (sum(h.length for h in _DATA_HEADERS),
                sum(h.length for h in _DATA_HEADERS) + wire.IMMDT.length)
_IMM = (wire.Opcode.WRITE_LAST_IMM, wire.Opcode.WRITE_ONLY_IMM)
_ECT0 = 0b10
_TC_DATA = (wire.DscpClass.DATA_TRIMMABLE << 2) | _ECT0
_TC_RTX = (wire.DscpClass.DATA_TRIMMABLE_RTX << 2) | _ECT0


def build_request_layout(qps):
    """A packet descriptor with what the spray scheduler adds to it: its EV and the plane that
    EV leaves on (which only travels on to ``frame``)."""
    return data.StructLayout({"pkt": packet_descriptor_layout(qps), "ev": 32,
                              "plane": frame_route_layout().members["plane"]})


def frame_route_layout():
    return data.StructLayout({"template": 8, "mode": SrMode, "plane": 4})


def frame_layout():
    """What leaves on ``frame`` for every packet sent: where it goes and how long it is."""
    return data.StructLayout({"ev": 32, "route": frame_route_layout(), "tc": 8, "length": 16})


class HeaderBuilder(wiring.Component):
    """Enters: one build request per packet (descriptor, EV, plane). Leaves: the packet,
    Ethernet / IPv6 / UDP / BTH / METH / TSETH / RETH [/ ImmDt] and the payload read from host
    memory, without its ICRC (the ICRC inserter follows).

    The EV goes into the UDP source port (high half) and the flow label (low half); the traffic
    class is the trimmable data DSCP with ECT(0) (trimmable-retransmit, and the BTH rtx bit, for
    a retransmission); TSETH carries a free-running timestamp counter, read as the request is accepted.
    The destination (MAC, IP, QP) and the route come from the QP's context (``peer``), read
    for the packet being framed: the requests waiting carry its QP number only.
    The payload read is requested as soon as a request arrives (up to ``prefetch`` ahead), so
    header beats hide the memory latency. A read that fails sends nothing: the packet's beats are
    drained and an error completion (MEMORY) leaves instead.

    Each request taken has its EV already, so ``prefetch`` is as many packets committed to
    their paths before they leave: it should cover the memory latency and no more. Two cover
    a read latency up to one packet's beats; each more packet ahead adds its time on the wire
    to the time a dead path still gets packets after its loss is seen, and to every RTT.

    Attributes
    ----------
    req : In(stream build_request_layout)
    mem : Out(MemReadPort(width))
    o : Out(PacketStream(width))
    cpl : Out(stream completion_layout)
    frame : Out(stream frame_layout)
        One record per packet sent, as its first beat leaves: the stages after the ICRC take
        the route and plane from it.
    peer_qp : Out(range(qps)); peer : In(peer_layout()): the QP context's peer of ``peer_qp``,
        the QP of the packet at the head of the queue, read in the same cycle.
    src_mac : In(48), src_ip : In(128): this NIC's addresses.
    timestamp : Out(16): the free-running counter TSETH carries.
    frames, mem_errors : Out(32)

    Parameters
    ----------
    width, qps; prefetch : requests held, the one leaving included (at least 1; with 1 each
        payload is read only once the packet before has left).
    """

    def __init__(self, width=64, qps=16, prefetch=2):
        self._width = check_width(width)
        if not isinstance(prefetch, int) or prefetch < 1:
            raise ValueError(f"prefetch must be a positive integer, not {prefetch!r}")
        self._qps = qps
        self._prefetch = prefetch
        super().__init__({
            "req": In(stream.Signature(build_request_layout(qps))),
            "mem": Out(MemReadPort(width)),
            "o": Out(PacketStream(width)),
            "cpl": Out(stream.Signature(completion_layout(qps))),
            "frame": Out(stream.Signature(frame_layout())),
            "src_mac": In(48), "src_ip": In(128),
            "peer_qp": Out(range(qps)), "peer": In(peer_layout()),
            "timestamp": Out(16),
            "frames": Out(32), "mem_errors": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        L = self._width // 8
        layout = build_request_layout(self._qps)
        m.d.sync += self.timestamp.eq(self.timestamp + 1)

        # Issue the payload read at once; the request waits in order for its data. (A buffered
        # FIFO: at the default depth of 2 it is two registers, one feeding the next, where the
        # plain one is a distributed RAM as wide as the request, 450 LUT4 sites at the board's
        # size; the cycle it adds from request to head is within the payload read's.)
        # The timestamp is taken as the request is accepted, the cycle the reliability engine
        # records the packet as sent: the send time a SACK echoes and the one the engine keeps
        # for it are then one value, however long the payload read takes.
        m.submodules.pending = pending = buffered_fifo(layout.size + 16, self._prefetch)
        rq = self.req.payload
        m.d.comb += [
            self.mem.req.payload.addr.eq(rq.pkt.laddr),
            self.mem.req.payload.length.eq(rq.pkt.length),
            self.mem.req.payload.tag.eq(rq.pkt.psn[:8]),
            self.mem.req.valid.eq(self.req.valid & pending.w_rdy),
            self.req.ready.eq(self.mem.req.ready & pending.w_rdy),
            pending.w_en.eq(self.req.valid & self.req.ready),
            pending.w_data.eq(Cat(rq, self.timestamp)),
        ]
        cur = layout(pending.r_data[:layout.size])
        ts = pending.r_data[layout.size:]
        pkt = cur.pkt
        peer = self.peer
        m.d.comb += self.peer_qp.eq(pkt.qp)

        # The headers of the packet at the head of the queue, in wire order.
        imm, rtx = Signal(), Signal()
        m.d.comb += rtx.eq(pkt.tries != 0)
        m.d.comb += imm.eq((pkt.opcode == _IMM[0]) | (pkt.opcode == _IMM[1]))
        ip_payload = Signal(16)
        m.d.comb += ip_payload.eq(wire.UDP.length + wire.BTH.length + wire.METH.length
                                  + wire.TSETH.length + wire.RETH.length + wire.ICRC_BYTES
                                  + pkt.length + Mux(imm, wire.IMMDT.length, 0))
        hdr = Cat(
            header_bytes({"dst": peer.dst_mac, "src": self.src_mac,
                          "ethertype": wire.ETHERTYPE_IPV6}, wire.ETHERNET),
            header_bytes({"version": 6, "tc": Mux(rtx, _TC_RTX, _TC_DATA),
                          "flow_label": cur.ev[:16], "payload_length": ip_payload,
                          "next_header": wire.IPPROTO_UDP, "hop_limit": 64,
                          "src": self.src_ip, "dst": peer.dst_ip}, wire.IPV6),
            header_bytes({"sport": cur.ev[16:], "dport": wire.ROCE_UDP_PORT,
                          "length": ip_payload}, wire.UDP),
            header_bytes({"opcode": pkt.opcode, "pkey": 0xFFFF, "dqp": peer.dqp,
                          "ackreq": pkt.last, "rtx": rtx, "tsh": 1, "psn": pkt.psn},
                         wire.BTH),
            header_bytes({"msn": pkt.msn}, wire.METH),
            header_bytes({"tx_timestamp": ts}, wire.TSETH),
            header_bytes({"va": pkt.va, "rkey": pkt.rkey, "dma_length": pkt.dma_length},
                         wire.RETH),
            header_bytes({"imm": pkt.imm}, wire.IMMDT),
        )
        H0, H1 = HEADER_BYTES
        hdr_beats = H0 // L                       # whole header beats (the same for both)
        if hdr_beats < 1 or H1 // L != hdr_beats:
            raise ValueError(f"a {self._width}-bit datapath is too wide for the header builder")
        padded = Signal(8 * L * (hdr_beats + 1))
        m.d.comb += padded.eq(hdr)
        s0, s1 = H0 % L, H1 % L                   # header bytes in the mixed beat

        # Payload realignment: each output beat is the carry (header tail, then the top bytes of
        # the previous payload beat) followed by the bottom of the current payload beat.
        d = self.mem.data.payload
        carry = Signal(8 * L)
        shifted = Signal(8 * L)
        rest = Signal(8 * L)                      # what the current beat leaves for the next
        m.d.comb += [
            shifted.eq(Mux(imm, Cat(carry[:8 * s1], d.data[:8 * (L - s1)]),
                           Cat(carry[:8 * s0], d.data[:8 * (L - s0)]))),
            rest.eq(Mux(imm, d.data[8 * (L - s1):], d.data[8 * (L - s0):])),
        ]
        s = Mux(imm, s1, s0)
        n = keep_count(m, d.keep)
        total = Signal(range(2 * L + 1))
        m.d.comb += total.eq(s + n)

        beat = Signal(range(hdr_beats + 1))
        leftover = Signal(range(L + 1))
        tc = Mux(rtx, _TC_RTX, _TC_DATA)      # the outer header carries the same class
        m.d.comb += [
            self.frame.payload.ev.eq(cur.ev), self.frame.payload.route.template.eq(peer.template),
            self.frame.payload.route.mode.eq(peer.mode), self.frame.payload.route.plane.eq(cur.plane),
            self.frame.payload.tc.eq(tc),
            self.frame.payload.length.eq(wire.ETHERNET.length + wire.IPV6.length + ip_payload),
        ]
        failed_wr = Signal(16)
        failed_qp = Signal(range(self._qps))
        m.d.comb += [self.cpl.payload.wr_id.eq(failed_wr), self.cpl.payload.qp.eq(failed_qp),
                     self.cpl.payload.status.eq(WrStatus.MEMORY)]

        with m.FSM():
            with m.State("HEADER"):
                # Wait for the head request's data so a failed read sends nothing.
                with m.If(pending.r_rdy & self.mem.data.valid):
                    with m.If(d.error):
                        m.d.sync += [failed_wr.eq(pkt.wr_id), failed_qp.eq(pkt.qp),
                                     self.mem_errors.eq(self.mem_errors + 1)]
                        m.next = "DRAIN"
                    with m.Else():
                        # The first beat leaves together with the packet's frame record.
                        first = beat == 0
                        m.d.comb += [self.o.valid.eq(~first | self.frame.ready),
                                     self.frame.valid.eq(first & self.o.ready),
                                     self.o.payload.data.eq(word_mux(m, padded, beat, 8 * L, "out")),
                                     self.o.payload.keep.eq((1 << L) - 1)]
                        with m.If(self.o.ready & (~first | self.frame.ready)):
                            with m.If(beat == hdr_beats - 1):
                                m.d.sync += [beat.eq(0), carry.eq(padded.word_select(
                                    hdr_beats, 8 * L))]
                                m.next = "PAYLOAD"
                            with m.Else():
                                m.d.sync += beat.eq(beat + 1)
            with m.State("PAYLOAD"):
                m.d.comb += [self.o.valid.eq(self.mem.data.valid),
                             self.o.payload.data.eq(shifted),
                             self.mem.data.ready.eq(self.o.ready)]
                with m.If(d.last & (total <= L)):
                    m.d.comb += [self.o.payload.keep.eq(keep_mask(m, total, L)),
                                 self.o.payload.last.eq(1)]
                with m.Else():
                    m.d.comb += self.o.payload.keep.eq((1 << L) - 1)
                with m.If(self.mem.data.valid & self.o.ready):
                    m.d.sync += carry.eq(rest)
                    with m.If(d.last):
                        with m.If(total <= L):
                            m.d.comb += pending.r_en.eq(1)
                            m.d.sync += self.frames.eq(self.frames + 1)
                            m.next = "HEADER"
                        with m.Else():
                            m.d.sync += leftover.eq(total - L)
                            m.next = "TAIL"
            with m.State("TAIL"):
                m.d.comb += [self.o.valid.eq(1), self.o.payload.data.eq(carry),
                             self.o.payload.keep.eq(keep_mask(m, leftover, L)),
                             self.o.payload.last.eq(1)]
                with m.If(self.o.ready):
                    m.d.comb += pending.r_en.eq(1)
                    m.d.sync += self.frames.eq(self.frames + 1)
                    m.next = "HEADER"
            with m.State("DRAIN"):
                m.d.comb += self.mem.data.ready.eq(1)
                with m.If(self.mem.data.valid & d.last):
                    m.next = "ERROR"
            with m.State("ERROR"):
                m.d.comb += self.cpl.valid.eq(1)
                with m.If(self.cpl.ready):
                    m.d.comb += pending.r_en.eq(1)
                    m.next = "HEADER"
        return m
