"""Segmenter: cuts each write request into MTU-sized packets with their PSNs and opcodes."""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from mrcnic import wire

from .qp_context import READ_PORTS, QpContext, QpState, context_write_layout, seq_layout, static_layout

__all__ = ["WrOpcode", "WrStatus", "work_request_layout", "packet_descriptor_layout",
           "completion_layout", "Segmenter", "MAX_MESSAGE", "MAX_TRIES"]

MAX_MESSAGE = 1 << 31     # 2 GiB
MAX_TRIES = 7             # a packet's try count saturates here (it is 3 bits)


class WrOpcode(enum.Enum, shape=1):
    WRITE = 0
    WRITE_IMM = 1


class WrStatus(enum.Enum, shape=3):
    """Why a work request failed (the completion of a good one comes with its acknowledgement)."""
    OK = 0
    ZERO_LENGTH = 1
    TOO_LONG = 2      # over 2 GiB
    BAD_QP = 3        # no such QP
    QP_NOT_RTS = 4    # the QP is not ready to send
    MEMORY = 5        # the host memory read failed (reported by the header builder)


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
    """Enters: work requests. Leaves: one packet descriptor a cycle per MTU of each message,
    with consecutive 24-bit PSNs (wrapping), FIRST / MIDDLE / LAST / ONLY opcodes (_IMM when the
    request carries an immediate), the QP's MSN, and the VA of each packet's own payload; or, for
    a request that cannot be sent, an error completion, after which the next request is taken.

    The QP context (its own :class:`QpContext`) is set through ``ctx_write``; the segmenter
    advances each QP's next PSN and MSN after its last packet.

    Attributes
    ----------
    wr : In(stream work_request_layout)
    pkt : Out(stream packet_descriptor_layout)
    cpl : Out(stream completion_layout): error completions.
    ctx_write : In(stream {qp, static, seq}): management writes of a QP's context.
    pkt_static : Out(static_layout()): the context of the QP of ``pkt``, valid with it.
    rx_addr, ack_addr, rtx_addr : In(range(qps)); rx_static, ack_static, rtx_static :
        Out(static_layout()), the context's other read ports (a cycle of latency), for the
        receive side, the acknowledgements and the retransmissions.
    requests, errors : Out(32): work requests taken, and refused.
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
            "pkt_static": Out(static_layout()),
            **{f"{name}_{kind}": port for name in READ_PORTS
               for kind, port in (("addr", In(range(qps))), ("static", Out(static_layout())))},
            "requests": Out(32),
            "errors": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.ctx = ctx = self._ctx
        wiring.connect(m, wiring.flipped(self.ctx_write), ctx.write)
        for name in READ_PORTS:
            m.d.comb += [getattr(ctx, f"{name}_addr").eq(getattr(self, f"{name}_addr")),
                         getattr(self, f"{name}_static").eq(getattr(ctx, f"{name}_static"))]

        req = Signal(work_request_layout(self._qps))
        static = Signal(static_layout())
        seq = Signal(seq_layout())
        remaining = Signal(32)
        offset = Signal(32)
        psn = Signal(24)
        first = Signal()
        status = Signal(WrStatus)
        mtu = Signal(13)
        m.d.comb += mtu.eq(256 << static.mtu)

        m.d.comb += ctx.rd_addr.eq(Mux(self.wr.valid & self.wr.ready, self.wr.payload.qp, req.qp))

        last = Signal()
        m.d.comb += last.eq(remaining <= mtu)
        imm = req.opcode == WrOpcode.WRITE_IMM
        opcode = Signal(8)
        with m.If(first & last):
            m.d.comb += opcode.eq(Mux(imm, wire.Opcode.WRITE_ONLY_IMM, wire.Opcode.WRITE_ONLY))
        with m.Elif(first):
            m.d.comb += opcode.eq(wire.Opcode.WRITE_FIRST)
        with m.Elif(last):
            m.d.comb += opcode.eq(Mux(imm, wire.Opcode.WRITE_LAST_IMM, wire.Opcode.WRITE_LAST))
        with m.Else():
            m.d.comb += opcode.eq(wire.Opcode.WRITE_MIDDLE)

        p = self.pkt.payload
        m.d.comb += [
            p.wr_id.eq(req.wr_id), p.qp.eq(req.qp), p.opcode.eq(opcode), p.psn.eq(psn),
            p.msn.eq(seq.msn), p.va.eq(req.va + offset), p.laddr.eq(req.laddr + offset),
            p.length.eq(Mux(last, remaining, mtu)), p.dma_length.eq(req.length),
            p.rkey.eq(req.rkey), p.imm.eq(req.imm), p.last.eq(last),
            self.pkt_static.eq(static),
            self.cpl.payload.wr_id.eq(req.wr_id), self.cpl.payload.qp.eq(req.qp),
            self.cpl.payload.status.eq(status),
        ]

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.wr.ready.eq(1)
                with m.If(self.wr.valid):
                    m.d.sync += [req.eq(self.wr.payload), self.requests.eq(self.requests + 1)]
                    m.next = "LOOKUP"
            with m.State("LOOKUP"):
                m.d.sync += [static.eq(ctx.rd_static), seq.eq(ctx.rd_seq),
                             psn.eq(ctx.rd_seq.next_psn), remaining.eq(req.length),
                             offset.eq(0), first.eq(1)]
                with m.If(req.qp >= self._qps):
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
                with m.Else():
                    m.next = "EMIT"
            with m.State("EMIT"):
                m.d.comb += self.pkt.valid.eq(1)
                with m.If(self.pkt.ready):
                    m.d.sync += [psn.eq(psn + 1), remaining.eq(remaining - mtu),
                                 offset.eq(offset + mtu), first.eq(0)]
                    with m.If(last):
                        m.d.comb += [ctx.wb.valid.eq(1), ctx.wb.payload.qp.eq(req.qp),
                                     ctx.wb.payload.seq.next_psn.eq(psn + 1),
                                     ctx.wb.payload.seq.msn.eq(seq.msn + 1)]
                        m.next = "IDLE"
            with m.State("ERROR"):
                m.d.comb += self.cpl.valid.eq(1)
                with m.If(self.cpl.ready):
                    m.d.sync += self.errors.eq(self.errors + 1)
                    m.next = "IDLE"
        return m
