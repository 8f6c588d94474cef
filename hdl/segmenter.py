"""Segmenter: cuts each write request into MTU-sized packets with their PSNs and opcodes."""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from mrcnic import wire
from mrcnic.enums import WrOpcode, WrStatus

from .bits import decode, first_from
from .qp_context import SHARED_PORTS, QpContext, QpState, context_write_layout, shared_port_members

__all__ = ["WrOpcode", "WrStatus", "work_request_layout", "packet_descriptor_layout",
           "completion_layout", "Segmenter", "MAX_MESSAGE", "MAX_TRIES"]

MAX_MESSAGE = 1 << 31     # 2 GiB
MAX_TRIES = 7             # a packet's try count saturates here (it is 3 bits)


def work_request_layout(qps=None):
    return data.StructLayout({
        # qp is as wide as the host may say, so that an unknown QP can be refused
        "wr_id": 16, "qp": 16, "opcode": WrOpcode, "laddr": 64, "va": 64, "rkey": 32,
        "length": 32, "imm": 32,
    })


def packet_descriptor_layout(qps):
    """One packet to build: everything the header builder needs besides the QP's addresses."""
    return data.StructLayout({
        "wr_id": 16, "qp": range(qps), "opcode": 8, "psn": 24, "msn": 16, "va": 64,
        "laddr": 64, "length": 13, "dma_length": 32, "rkey": 32, "imm": 32, "last": 1,
        "tries": range(MAX_TRIES + 1),   # 0 the first time; a retransmission counts its try
    })


def completion_layout(qps):
    return data.StructLayout({"wr_id": 16, "qp": range(qps), "status": WrStatus})


class Segmenter(wiring.Component):
    """Enters: work requests. Leaves: packet descriptors, one per MTU of each message, with
    consecutive 24-bit PSNs (wrapping), FIRST / MIDDLE / LAST / ONLY opcodes (_IMM when the
    request carries an immediate), the QP's MSN, and the VA of each packet's own payload; or, for
    a request that cannot be sent, an error completion, after which the next request is taken.

    Every QP has a slot for one message. A request goes to its QP's slot as soon as that is free
    (a second request for a busy QP waits there, and holds the requests behind it). The QPs with
    a message whose window is open (``open``) take turns, a packet each, so that a QP whose
    window is shut holds up no other: packets of one QP leave in order, those of different QPs
    interleave.

    The QP context (its own :class:`QpContext`) is set through ``ctx_write``; the segmenter
    advances each QP's next PSN and MSN after its last packet.

    Attributes
    ----------
    wr : In(stream work_request_layout)
    pkt : Out(stream packet_descriptor_layout); ``valid`` only while ``open`` has its QP
    cpl : Out(stream completion_layout): error completions, in request order.
    ctx_write : In(stream {qp, static, seq}): management writes of a QP's context.
    open : In(qps): the QPs that may send a new packet now (the reliability engine's window).
    rx_addr, ack_addr : In(range(qps)); rx_static, ack_static : Out(static_layout()), the
        context's other read ports (a cycle of latency), for the receive side and the
        acknowledgements.
    build_addr, reply_addr : In(range(qps)); build_peer, reply_peer : Out(peer_layout()), the
        context's peer read ports (the same cycle), for the header and acknowledgement builders.
    requests, errors : Out(1), events (:attr:`events`): a work request taken, one refused.
    """

    def __init__(self, qps=16):
        if not isinstance(qps, int) or qps < 1:
            raise ValueError(f"qps must be a positive integer, not {qps!r}")
        self._qps = qps
        self._ctx = QpContext(qps)
        super().__init__({
            "wr": In(stream.Signature(work_request_layout(qps))),
            "pkt": Out(stream.Signature(packet_descriptor_layout(qps))),
            "cpl": Out(stream.Signature(completion_layout(qps))),
            "ctx_write": In(stream.Signature(context_write_layout(qps))),
            "open": In(qps),
            **shared_port_members(qps),
            "requests": Out(1),
            "errors": Out(1),
        })

    @property
    def events(self):
        """The counters' event outputs, for the register bank to count."""
        return ("requests", "errors")

    def elaborate(self, platform):
        m = Module()
        Q = self._qps
        m.submodules.ctx = ctx = self._ctx
        wiring.connect(m, wiring.flipped(self.ctx_write), ctx.write)
        for name, kind in SHARED_PORTS:
            m.d.comb += [getattr(ctx, f"{name}_addr").eq(getattr(self, f"{name}_addr")),
                         getattr(self, f"{name}_{kind}").eq(getattr(ctx, f"{name}_{kind}"))]

        # Each QP has a slot for the message it is sending: the request and its MSN (written
        # when the request is taken, read while its packets go out), and its progress, which
        # changes with every packet: bytes remaining, offset and next PSN. Both are RAMs read
        # for the QP picked (the progress in flip-flops, with a selector each, took about 500
        # LUT4 sites more in the NIC at 4 QPs); one write port takes a packet's progress, or,
        # when none is sent that cycle, a new message's start.
        slot_shape = data.StructLayout({"req": work_request_layout(Q), "msn": 16})
        m.submodules.slots = slots = Memory(shape=slot_shape, depth=Q, init=[])
        s_wr, s_rd = slots.write_port(), slots.read_port()
        progress = data.StructLayout({"remaining": 32, "offset": 32, "psn": 24})
        m.submodules.progress = prog = Memory(shape=progress, depth=Q, init=[])
        g_wr = prog.write_port()
        g_rd = prog.read_port(transparent_for=(g_wr,))      # a QP sending packet after packet
        advancing = Signal()                                 # a packet's progress is written
        active = Signal(Q)                                   # the QP's slot holds a message
        first = Signal(Q)

        # ---- taking requests: one at a time, each to its QP's slot once that is free ----------
        req = Signal(work_request_layout(Q))
        status = Signal(WrStatus)
        m.d.comb += [self.cpl.payload.wr_id.eq(req.wr_id), self.cpl.payload.qp.eq(req.qp),
                     self.cpl.payload.status.eq(status)]
        m.d.comb += ctx.rd_addr.eq(Mux(self.wr.valid & self.wr.ready, self.wr.payload.qp, req.qp))
        with m.FSM(name="take"):
            with m.State("IDLE"):
                m.d.comb += self.wr.ready.eq(1)
                with m.If(self.wr.valid):
                    m.d.sync += req.eq(self.wr.payload)
                    m.d.comb += self.requests.eq(1)
                    m.next = "LOOKUP"
            with m.State("LOOKUP"):
                with m.If(req.qp >= Q):
                    m.d.sync += status.eq(WrStatus.BAD_QP)
                    m.next = "ERROR"
                with m.Elif(req.length == 0):
                    m.d.sync += status.eq(WrStatus.ZERO_LENGTH)
                    m.next = "ERROR"
                with m.Elif(req.length > MAX_MESSAGE):
                    m.d.sync += status.eq(WrStatus.TOO_LONG)
                    m.next = "ERROR"
                with m.Elif(ctx.rd_static.state != QpState.RTS):
                    m.d.sync += status.eq(WrStatus.QP_NOT_RTS)
                    m.next = "ERROR"
                with m.Elif(active.bit_select(req.qp, 1)):
                    # The QP is still sending its last message; its sequence is written back
                    # with that message's last packet, so look again once it is done.
                    m.next = "WAIT"
                with m.Elif(~advancing):       # (else the progress port is busy: next cycle)
                    m.d.comb += [s_wr.en.eq(1), s_wr.addr.eq(req.qp),
                                 s_wr.data.req.eq(req), s_wr.data.msn.eq(ctx.rd_seq.msn),
                                 g_wr.en.eq(1), g_wr.addr.eq(req.qp),
                                 g_wr.data.remaining.eq(req.length), g_wr.data.offset.eq(0),
                                 g_wr.data.psn.eq(ctx.rd_seq.next_psn)]
                    for q in range(Q):
                        with m.If(req.qp == q):
                            m.d.sync += [first[q].eq(1), active[q].eq(1)]
                    m.next = "IDLE"
            with m.State("WAIT"):
                with m.If(~active.bit_select(req.qp, 1)):
                    m.next = "LOOKUP"
            with m.State("ERROR"):
                m.d.comb += self.cpl.valid.eq(1)
                with m.If(self.cpl.ready):
                    m.d.comb += self.errors.eq(1)
                    m.next = "IDLE"

        # ---- sending: the QPs with a message and an open window take turns, a packet each ----
        cur = Signal(range(Q))
        elig = Signal(Q)
        m.d.comb += elig.eq(active & self.open)
        # The next eligible QP after ``cur`` (``cur`` itself last).
        nxt = first_from(m, elig, Mux(cur == Q - 1, 0, cur + 1), "nxt")
        others = (elig & ~decode(cur, Q)).any()

        slot = s_rd.data
        picking = Signal()
        serving = Signal(range(Q))          # the QP whose slot, progress and context are read
        m.d.comb += [serving.eq(Mux(picking, nxt, cur)), s_rd.addr.eq(serving),
                     g_rd.addr.eq(serving), ctx.emit_addr.eq(serving)]
        c_remaining, c_offset = g_rd.data.remaining, g_rd.data.offset
        c_psn, c_first = g_rd.data.psn, first.bit_select(cur, 1)
        mtu = Signal(13)
        m.d.comb += mtu.eq(256 << ctx.emit_static.mtu)
        last = Signal()
        m.d.comb += last.eq(c_remaining <= mtu)
        imm = slot.req.opcode == WrOpcode.WRITE_IMM
        opcode = Signal(8)
        with m.If(c_first & last):
            m.d.comb += opcode.eq(Mux(imm, wire.Opcode.WRITE_ONLY_IMM, wire.Opcode.WRITE_ONLY))
        with m.Elif(c_first):
            m.d.comb += opcode.eq(wire.Opcode.WRITE_FIRST)
        with m.Elif(last):
            m.d.comb += opcode.eq(Mux(imm, wire.Opcode.WRITE_LAST_IMM, wire.Opcode.WRITE_LAST))
        with m.Else():
            m.d.comb += opcode.eq(wire.Opcode.WRITE_MIDDLE)
        p = self.pkt.payload
        m.d.comb += [
            p.wr_id.eq(slot.req.wr_id), p.qp.eq(cur), p.opcode.eq(opcode), p.psn.eq(c_psn),
            p.msn.eq(slot.msn), p.va.eq(slot.req.va + c_offset),
            p.laddr.eq(slot.req.laddr + c_offset), p.length.eq(Mux(last, c_remaining, mtu)),
            p.dma_length.eq(slot.req.length), p.rkey.eq(slot.req.rkey), p.imm.eq(slot.req.imm),
            p.last.eq(last),
        ]
        with m.FSM(name="send"):
            with m.State("PICK"):
                # (the slot and the context of the QP picked are read for the next cycle)
                m.d.comb += picking.eq(1)
                with m.If(elig.any()):
                    m.d.sync += cur.eq(nxt)
                    m.next = "OFFER"
            with m.State("OFFER"):
                m.d.comb += self.pkt.valid.eq(self.open.bit_select(cur, 1))
                with m.If(self.pkt.valid & self.pkt.ready):
                    m.d.comb += [advancing.eq(1), g_wr.en.eq(1), g_wr.addr.eq(cur),
                                 g_wr.data.psn.eq(c_psn + 1),
                                 g_wr.data.remaining.eq(c_remaining - mtu),
                                 g_wr.data.offset.eq(c_offset + mtu)]
                    for q in range(Q):
                        with m.If(cur == q):
                            m.d.sync += first[q].eq(0)
                            with m.If(last):
                                m.d.sync += active[q].eq(0)
                    with m.If(last):
                        m.d.comb += [ctx.wb.valid.eq(1), ctx.wb.payload.qp.eq(cur),
                                     ctx.wb.payload.seq.next_psn.eq(c_psn + 1),
                                     ctx.wb.payload.seq.msn.eq(slot.msn + 1)]
                    with m.If(last | others):
                        m.next = "PICK"
                with m.Elif(~self.open.bit_select(cur, 1) & others):
                    m.next = "PICK"
        return m
