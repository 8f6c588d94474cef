"""Completion queue: the NIC's completions, kept for a host that reads them through registers."""

from amaranth import Const, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from mrcnic.regmap import CQ_ENTRY, by_name

from .register_queue import RegisterQueue, packed
from .rx_event import completion_layout as recv_layout
from .segmenter import completion_layout as send_layout

__all__ = ["CompletionQueue"]

ENTRY_BITS = by_name("cq.entry").width


class CompletionQueue(wiring.Component):
    """Between the NIC's completion streams and the host. A stream whose ``route`` bit is clear
    passes through untouched; one whose bit is set is taken at once, each record packed into
    an entry as ``regmap.CQ_ENTRY`` lays it out and queued for the registers. An entry that
    finds the queue full is lost and counted: the reliability engine and the receive side
    never wait on a host that does not poll.

    A stream's route is taken up only while it offers nothing, so a record offered on the
    output stays offered until taken.

    Parameters
    ----------
    qps : QPs (the records' QP field);  depth : entries the queue holds.

    Attributes
    ----------
    send : In(send completions {wr_id, qp, status});  send_out : Out(the same)
    recv : In(messages received whole {qp, msn, imm, has_imm});  recv_out : Out(the same)
    route : In(2), bit 0 send, bit 1 recv: to the queue rather than out
    count : Out(16), entries waiting;  entry : Out(96), the oldest (0 when none)
    pop : In(stream.Signature(1)), the oldest entry leaves (nothing happens when none)
    overflows : Out(1), an event (:attr:`events`): an entry lost to a full queue
    """

    def __init__(self, qps=16, depth=64):
        self._queue = RegisterQueue(ENTRY_BITS, depth, by_name("cq.count").width)
        super().__init__({
            "send": In(stream.Signature(send_layout(qps))),
            "recv": In(stream.Signature(recv_layout(qps))),
            "send_out": Out(stream.Signature(send_layout(qps))),
            "recv_out": Out(stream.Signature(recv_layout(qps))),
            "route": In(2),
            "count": Out(by_name("cq.count").width),
            "entry": Out(ENTRY_BITS),
            "pop": In(stream.Signature(1)),
            "overflows": Out(1),
        })

    @property
    def events(self):
        """The counters' event outputs, for the register bank to count."""
        return ("overflows",)

    def elaborate(self, platform):
        m = Module()
        m.submodules.queue = queue = self._queue

        queued = []
        for k, (src, out) in enumerate(((self.send, self.send_out), (self.recv, self.recv_out))):
            to_queue = Signal(name=f"{'send' if k == 0 else 'recv'}_to_queue")
            with m.If(~src.valid):
                m.d.sync += to_queue.eq(self.route[k])
            m.d.comb += [out.payload.eq(src.payload), out.valid.eq(src.valid & ~to_queue)]
            with m.If(~to_queue):
                m.d.comb += src.ready.eq(out.ready)
            queued.append(src.valid & to_queue)

        s, r = self.send.payload, self.recv.payload
        send_entry = packed(m, CQ_ENTRY, ENTRY_BITS,
                            {"wr_id": s.wr_id, "qp": s.qp, "status": s.status})
        recv_entry = packed(m, CQ_ENTRY, ENTRY_BITS, {"qp": r.qp, "msn": r.msn, "imm": r.imm,
                                                      "has_imm": r.has_imm, "recv": Const(1)})
        # One entry a cycle: a send completion first, a receive one the cycle after.
        with m.If(queued[0]):
            m.d.comb += [queue.i.valid.eq(1), self.send.ready.eq(1),
                         queue.i.payload.eq(send_entry)]
        with m.Elif(queued[1]):
            m.d.comb += [queue.i.valid.eq(1), self.recv.ready.eq(1),
                         queue.i.payload.eq(recv_entry)]
        m.d.comb += [self.count.eq(queue.count), self.entry.eq(queue.entry),
                     self.overflows.eq(queue.overflows)]
        wiring.connect(m, wiring.flipped(self.pop), queue.pop)
        return m
