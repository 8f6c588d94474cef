"""Transport parser: the MRC headers after BTH of every frame the RX front end passes."""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from mrcnic import wire

from .headers import header_view
from .rx_front import arrival_tc, is_trimmed, rx_meta_layout, trimmed_at_last_hop
from .stream import PacketStream, check_width, keep_count
from .two_entry_fifo import TwoEntryFIFO

__all__ = ["PacketKind", "TransportError", "transport_layout", "TransportParser",
           "HEAD_BYTES", "EXT_BYTES", "ext_length"]

#: the fixed stack in front of the MRC headers of a decapsulated frame: Ethernet, IPv6, UDP, BTH
HEAD_BYTES = wire.ETHERNET.length + wire.IPV6.length + wire.UDP.length + wire.BTH.length
#: the longest run of headers after BTH (SETH, EETH; a data packet's at most 28)
EXT_BYTES = max(wire.SETH.length, wire.EETH.length,
                sum(h.length for h in (wire.METH, wire.TSETH, wire.RETH, wire.IMMDT)))


#: the record's fields its queue does not keep: each is read again from ``ext`` as the record
#: leaves (with BTH's tsh bit, which the queue keeps instead), so the queue is 144 bits narrower
_FROM_EXT = ("msn", "ts", "va", "rkey", "imm")


def _queued_layout(planes):
    members = dict(transport_layout(planes).members)
    return data.StructLayout({**{k: v for k, v in members.items() if k not in _FROM_EXT},
                              "tsh": 1})


def _ext_views(ext):
    """The headers after BTH, at their places in ``ext``: METH, TSETH (there when tsh is set),
    RETH and ImmDt without and with TSETH, and PETH."""
    at = wire.METH.length + wire.TSETH.length
    return {"meth": header_view(ext, wire.METH, 0),
            "tseth": header_view(ext, wire.TSETH, wire.METH.length),
            "reth": [header_view(ext, wire.RETH, wire.METH.length), header_view(ext, wire.RETH, at)],
            "imm": [header_view(ext, wire.IMMDT, wire.METH.length + wire.RETH.length),
                    header_view(ext, wire.IMMDT, at + wire.RETH.length)],
            "peth": header_view(ext, wire.PETH, 0)}


class PacketKind(enum.Enum, shape=2):
    DATA = 0       # a write: placed in memory
    PROBE = 1      # a reliability probe (PETH): answered with a SACK
    FEEDBACK = 2   # SACK, NACK, ACK, endpoint request/response: for the sender's side


class TransportError(enum.Enum, shape=2):
    NONE = 0
    OPCODE = 1     # not an MRC opcode
    TRUNCATED = 2  # the frame ends before its opcode's headers and ICRC


def ext_length(opcode: int, tsh: bool) -> int:
    """Bytes of headers after BTH (the wire table's rule, for tests and models)."""
    return sum(h.length for h in wire.headers_after_bth(opcode, tsh))


def transport_layout(planes):
    """The record of one frame. Fields a kind does not have are zero."""
    return data.StructLayout({
        "error": TransportError, "kind": PacketKind, "opcode": 8,
        "qp": 24,          # BTH dqp; for a probe, the PETH's dpdcid (probes go to DQP 0x2)
        "psn": 24, "ackreq": 1,
        "ev": 32,          # the EV the packet came on: UDP source port | flow label's low half
        "ce": 1,           # arrived ECN-CE marked
        "trimmed": 1,      # a data packet a switch cut to its headers
        "last_hop": 1,     # ... and the switch was the last hop (TRIMMED_LASTHOP)
        "plane": range(planes),
        "msn": 16, "is_last": 1,
        "ts": 16,          # the sender's timestamp (TSETH, or the probe's), to echo
        "va": 64, "rkey": 32, "imm": 32, "has_imm": 1,
        "length": 16,      # payload bytes
        "head": 8,         # bytes before the payload
        "ext": 8 * EXT_BYTES,   # the bytes after BTH as they came, zero past the frame
    })


class TransportParser(wiring.Component):
    """Passes every frame on unchanged and gives one record per frame, when its last beat
    passes: what the packet is (data, probe, feedback), its transport fields, and whether it is
    malformed at this layer (an unknown opcode, or too short for its headers and ICRC).

    Enters: the RX front end's frames (plain RoCEv2, the parser record on every beat).
    One beat a cycle; a last beat waits only while the record queue is full.

    Attributes
    ----------
    i : In(stream {data, keep, last, meta: rx_meta_layout(planes)})
    o : Out(PacketStream(width))
    rec : Out(stream transport_layout(planes))
    """

    def __init__(self, width=64, planes=2):
        self._width = check_width(width)
        self._planes = planes
        pkt = data.StructLayout({"data": width, "keep": width // 8, "last": 1,
                                 "meta": rx_meta_layout(planes)})
        super().__init__({
            "i": In(stream.Signature(pkt)),
            "o": Out(PacketStream(width)),
            "rec": Out(stream.Signature(transport_layout(planes))),
        })

    def elaborate(self, platform):
        m = Module()
        L = self._width // 8
        N, B = EXT_BYTES, HEAD_BYTES
        d = self.i.payload
        parsed = d.meta.parsed
        layout = transport_layout(self._planes)
        queued = _queued_layout(self._planes)
        # (Two deep, two registers: the judge takes a record in a few cycles, a frame takes
        # more beats than that; four deep it was a distributed RAM, 570 LUT4 sites at the
        # board's size.)
        m.submodules.recs = recs = TwoEntryFIFO(queued.size)

        # The bytes after BTH, gathered beat by beat at their fixed lanes.
        window = Signal(8 * N)
        beat = Signal(range((B + N) // L + 2))
        count = Signal(16)                  # bytes before this beat (all earlier beats are full)
        cur = Signal(8 * N)
        m.d.comb += cur.eq(window)
        for j in range(N):
            b, lane = divmod(B + j, L)
            with m.If((beat == b) & d.keep[lane]):
                m.d.comb += cur.word_select(j, 8).eq(d.data.word_select(lane, 8))
        total = Signal(17)
        m.d.comb += total.eq(count + keep_count(m, d.keep))

        take = self.i.valid & self.i.ready
        last_ok = ~d.last | recs.w_rdy
        m.d.comb += [
            self.o.payload.data.eq(d.data), self.o.payload.keep.eq(d.keep),
            self.o.payload.last.eq(d.last),
            self.o.valid.eq(self.i.valid & last_ok), self.i.ready.eq(self.o.ready & last_ok),
            recs.w_en.eq(take & d.last),
        ]
        with m.If(take):
            with m.If(d.last):
                m.d.sync += [window.eq(0), beat.eq(0), count.eq(0)]
            with m.Else():
                m.d.sync += [window.eq(cur), count.eq(count + L)]
                with m.If(beat <= (B + N) // L):     # past the window it need not count
                    m.d.sync += beat.eq(beat + 1)

        # The record, from the parser's fields and the window.
        bth, ip, udp = parsed.bth, parsed.ip, parsed.udp
        op = bth.opcode
        peth = _ext_views(cur)["peth"]

        O = wire.Opcode
        is_data = Signal()
        has_imm = Signal()
        ext = Signal(range(N + 1))
        known = Signal(init=1)
        error = Signal(TransportError)
        kind = Signal(PacketKind)
        m.d.comb += [
            is_data.eq(op.matches(*(int(o) for o in wire.DATA_OPCODES))),
            has_imm.eq(op.matches(*(int(o) for o in wire.IMM_OPCODES))),
        ]
        with m.Switch(op):
            for o in O:
                with m.Case(int(o)):
                    if o in wire.DATA_OPCODES:
                        m.d.comb += ext.eq(ext_length(o, False) + Mux(bth.tsh, 4, 0))
                        m.d.comb += kind.eq(PacketKind.DATA)
                    elif o is O.PROBE:
                        m.d.comb += [ext.eq(ext_length(o, False)), kind.eq(PacketKind.PROBE)]
                    else:
                        m.d.comb += [ext.eq(ext_length(o, False)), kind.eq(PacketKind.FEEDBACK)]
            with m.Default():
                m.d.comb += known.eq(0)
        need = Signal(range(B + N + wire.ICRC_BYTES + 1))
        m.d.comb += need.eq(B + ext + wire.ICRC_BYTES)
        with m.If(~known):
            m.d.comb += error.eq(TransportError.OPCODE)
        with m.Elif(total < need):
            m.d.comb += error.eq(TransportError.TRUNCATED)

        r = queued(recs.w_data)
        ok = error == TransportError.NONE
        tc = arrival_tc(parsed)
        m.d.comb += [
            r.error.eq(error), r.kind.eq(kind), r.opcode.eq(op), r.psn.eq(bth.psn),
            r.ackreq.eq(bth.ackreq), r.ev.eq((udp.sport << 16) | ip.flow_label[:16]),
            r.ce.eq(tc[:2] == 0b11), r.plane.eq(d.meta.plane), r.ext.eq(cur),
            r.qp.eq(Mux(kind == PacketKind.PROBE, peth[wire.PROBE_QP_FIELD], bth.dqp)),
            r.head.eq(B + ext), r.tsh.eq(bth.tsh),
        ]
        with m.If(ok & is_data):
            m.d.comb += [
                r.trimmed.eq(is_trimmed(parsed)),
                r.last_hop.eq(is_trimmed(parsed) & trimmed_at_last_hop(parsed)),
                r.is_last.eq(op.matches(int(O.WRITE_LAST), int(O.WRITE_LAST_IMM),
                                        int(O.WRITE_ONLY), int(O.WRITE_ONLY_IMM))),
                r.has_imm.eq(has_imm),
                r.length.eq(Mux(is_trimmed(parsed), 0, total - need)),
            ]

        # The record as it leaves: what the queue kept, and the fields read from ``ext``.
        q = queued(recs.r_data)
        out = self.rec.payload
        m.d.comb += [out[name].eq(q[name]) for name, _ in layout if name not in _FROM_EXT]
        views = _ext_views(q.ext)
        q_ok = q.error == TransportError.NONE
        with m.If(q_ok & (q.kind == PacketKind.DATA)):
            reth, imm = views["reth"], views["imm"]
            m.d.comb += [
                out.msn.eq(views["meth"].msn),
                out.ts.eq(Mux(q.tsh, views["tseth"].tx_timestamp, 0)),
                out.va.eq(Mux(q.tsh, reth[1].va, reth[0].va)),
                out.rkey.eq(Mux(q.tsh, reth[1].rkey, reth[0].rkey)),
            ]
            with m.If(q.has_imm):
                m.d.comb += out.imm.eq(Mux(q.tsh, imm[1].imm, imm[0].imm))
        with m.If(q_ok & (q.kind == PacketKind.PROBE)):
            m.d.comb += out.ts.eq(views["peth"].tx_timestamp)
        m.d.comb += [self.rec.valid.eq(recs.r_rdy), recs.r_en.eq(self.rec.ready)]
        return m
