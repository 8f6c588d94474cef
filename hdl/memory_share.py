"""Memory share: two initiators on one pair of memory ports."""

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from .host_memory import MemReadPort, MemWritePort
from .stream import check_width

__all__ = ["MemoryShare"]


class MemoryShare(wiring.Component):
    """Initiator 0 (the datapath) and initiator 1 (the memory window) share one read port and
    one write port. The memory answers in request order, so a queue per port remembers whose
    each outstanding request is, and each answer goes back to it. Initiator 1 wins a request
    both offer at once; a write, once begun, keeps the port until its last beat.

    Parameters
    ----------
    width : data width;  outstanding : requests a port may have unanswered (a full queue holds
        new ones back, so it must cover the memory's latency for the datapath's full rate).

    Attributes
    ----------
    rd0, rd1 : In(MemReadPort(width));  wr0, wr1 : In(MemWritePort(width)), the initiators
    rd : Out(MemReadPort(width));  wr : Out(MemWritePort(width)), the memory
    """

    def __init__(self, width=64, outstanding=32):
        check_width(width)
        self._outstanding = outstanding
        super().__init__({"rd0": In(MemReadPort(width)), "rd1": In(MemReadPort(width)),
                          "wr0": In(MemWritePort(width)), "wr1": In(MemWritePort(width)),
                          "rd": Out(MemReadPort(width)), "wr": Out(MemWritePort(width))})

    def elaborate(self, platform):
        m = Module()
        # The owners' queues answer from a register: an answer's owner read from a distributed
        # RAM began the boards' core clock's longest path (through the answer's valid into the
        # TX pipeline). An owner is at the head two cycles after its request is taken (or a
        # write's last beat); the on-chip memory's read answers come no sooner, the test
        # benches' host memory's four cycles on, so for reads the extra cycle does not show.
        # An answer that came sooner would wait for its owner (a write's acknowledgement at
        # most a cycle, once a write).
        m.submodules.rd_owner = rd_owner = SyncFIFOBuffered(width=1, depth=self._outstanding)
        m.submodules.wr_owner = wr_owner = SyncFIFOBuffered(width=1, depth=self._outstanding)

        # Reads: a request goes out with its owner queued; the answer's beats go back to the
        # owner at the queue's head, which leaves with the last beat.
        # A request offered and not yet taken stays the one offered.
        pick, hold, held_pick = Signal(), Signal(), Signal()
        m.d.comb += pick.eq(Mux(hold, held_pick, self.rd1.req.valid))
        m.d.sync += [hold.eq(self.rd.req.valid & ~self.rd.req.ready), held_pick.eq(pick)]
        src = [self.rd0.req, self.rd1.req]
        m.d.comb += [self.rd.req.payload.eq(Mux(pick, src[1].payload, src[0].payload)),
                     self.rd.req.valid.eq((src[0].valid | src[1].valid) & rd_owner.w_rdy),
                     rd_owner.w_data.eq(pick),
                     rd_owner.w_en.eq(self.rd.req.valid & self.rd.req.ready)]
        for k, s in enumerate(src):
            m.d.comb += s.ready.eq(self.rd.req.ready & rd_owner.w_rdy & (pick == k))
        owner = rd_owner.r_data
        for k, dst in enumerate((self.rd0.data, self.rd1.data)):
            m.d.comb += [dst.payload.eq(self.rd.data.payload),
                         dst.valid.eq(self.rd.data.valid & rd_owner.r_rdy & (owner == k))]
        m.d.comb += [self.rd.data.ready.eq(rd_owner.r_rdy & Mux(owner, self.rd1.data.ready,
                                                                 self.rd0.data.ready)),
                     rd_owner.r_en.eq(self.rd.data.valid & self.rd.data.ready
                                      & self.rd.data.payload.last)]

        # Writes: the owner is chosen at a write's first beat and kept to its last; it is
        # queued with the last beat, and its acknowledgement goes back to it.
        mid = Signal()                  # a write's first beat has gone, or was offered
        held = Signal()                 # ...whose owner this is
        wpick = Signal()
        m.d.comb += wpick.eq(Mux(mid, held, self.wr1.wr.valid))
        wsrc = [self.wr0.wr, self.wr1.wr]
        m.d.comb += [self.wr.wr.payload.eq(Mux(wpick, wsrc[1].payload, wsrc[0].payload)),
                     self.wr.wr.valid.eq(Mux(wpick, wsrc[1].valid, wsrc[0].valid)
                                         & wr_owner.w_rdy),
                     wr_owner.w_data.eq(wpick)]
        for k, s in enumerate(wsrc):
            m.d.comb += s.ready.eq(self.wr.wr.ready & wr_owner.w_rdy & (wpick == k))
        beat = self.wr.wr.valid & self.wr.wr.ready
        with m.If(beat):
            m.d.sync += [mid.eq(~self.wr.wr.payload.last), held.eq(wpick)]
        with m.Elif(self.wr.wr.valid):
            m.d.sync += [mid.eq(1), held.eq(wpick)]
        m.d.comb += wr_owner.w_en.eq(beat & self.wr.wr.payload.last)
        wowner = wr_owner.r_data
        for k, dst in enumerate((self.wr0.ack, self.wr1.ack)):
            m.d.comb += [dst.payload.eq(self.wr.ack.payload),
                         dst.valid.eq(self.wr.ack.valid & wr_owner.r_rdy & (wowner == k))]
        m.d.comb += [self.wr.ack.ready.eq(wr_owner.r_rdy & Mux(wowner, self.wr1.ack.ready,
                                                                self.wr0.ack.ready)),
                     wr_owner.r_en.eq(self.wr.ack.valid & self.wr.ack.ready)]
        return m
