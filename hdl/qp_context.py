"""QP context: what the NIC knows about each queue pair, in block RAM."""

from amaranth import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from mrcnic.enums import MTU_CODES, QpState, SrMode

__all__ = ["QpState", "SrMode", "MTU_CODES", "READ_PORTS", "PEER_PORTS", "PEER_FIELDS",
           "SHARED_PORTS", "static_layout", "peer_layout", "shared_port_members", "seq_layout",
           "context_write_layout", "QpContext"]

#: the static part's read ports besides the segmenter's: the receive side and the
#: acknowledgements (for the QP's state) each read their QP's context here
READ_PORTS = ("rx", "ack")
#: the peer's read ports, each read in the same cycle: the header builder and the
#: acknowledgement builder read the peer of the frame they build. Carried with every
#: packet through the TX queues instead, the peer (210 bits) was most of their width.
PEER_PORTS = ("build", "reply")
#: the static fields a frame's headers and route take from its QP
PEER_FIELDS = ("dqp", "dst_mac", "dst_ip", "template", "mode")
#: every read port above, with what it returns: the segmenter, which holds the context, passes
#: each through as its own
SHARED_PORTS = (*((name, "static") for name in READ_PORTS), *((name, "peer") for name in PEER_PORTS))

def static_layout():
    """Fields management sets and the datapath only reads: the peer and the route to it, and
    the memory region the peer may write (R_Key, start, length)."""
    return data.StructLayout({
        "state": QpState, "dqp": 24, "mtu": 3, "mode": SrMode, "template": 8,
        "dst_mac": 48, "dst_ip": 128, "rkey": 32, "mr_va": 64, "mr_length": 64,
    })


def peer_layout():
    """The part of :func:`static_layout` a frame is built from: the peer and the route to it."""
    members = dict(static_layout().members)
    return data.StructLayout({name: members[name] for name in PEER_FIELDS})


def shared_port_members(qps):
    """The signature members of :data:`SHARED_PORTS`: ``<name>_addr`` in, ``<name>_<kind>`` out."""
    shapes = {"static": static_layout(), "peer": peer_layout()}
    return {f"{name}_{k}": port for name, kind in SHARED_PORTS
            for k, port in (("addr", In(range(qps))), (kind, Out(shapes[kind])))}


def seq_layout():
    """Fields the sender advances with every message."""
    return data.StructLayout({"next_psn": 24, "msn": 16})


def context_write_layout(qps):
    return data.StructLayout({"qp": range(qps), "static": static_layout(), "seq": seq_layout()})


class QpContext(wiring.Component):
    """The context of ``qps`` queue pairs: a static part written by management and a sequence
    part (next PSN, MSN) that management initialises and the segmenter advances.

    Reads have one cycle of latency (``*_addr`` in, ``*_data`` the next cycle); a read of the
    sequence part sees a write in the same cycle. A sequence
    write-back from the datapath wins over a management write in the same cycle; the management
    write then waits (``write.ready`` low), so nothing is lost.

    Attributes
    ----------
    write : In(stream {qp, static, seq})
        Management: set a QP's whole context.
    rd_addr : In(range(qps)); rd_static, rd_seq : Out, the context of ``rd_addr`` a cycle later.
    emit_addr : In(range(qps)); emit_static : Out, the segmenter's read of the static part for
        the packets it sends.
    rx_addr : In(range(qps)); rx_static : Out, the receive side's read of the static part.
    ack_addr : In(range(qps)); ack_static : Out, the acknowledgements' read of it.
    build_addr, reply_addr : In(range(qps)); build_peer, reply_peer : Out(peer_layout()), the
        peer of that QP in the same cycle, for the header and acknowledgement builders.
        (A context written while one of them frames a packet of the QP changes the rest of
        that frame's headers: management changes a QP's peer only while it sends nothing.)
    wb : In(stream {qp, seq}), always ready
        The segmenter's write-back of the sequence part.
    """

    def __init__(self, qps=16):
        if not isinstance(qps, int) or qps < 1:
            raise ValueError(f"qps must be a positive integer, not {qps!r}")
        self._qps = qps
        super().__init__({
            "write": In(stream.Signature(context_write_layout(qps))),
            "rd_addr": In(range(qps)),
            "rd_static": Out(static_layout()),
            "rd_seq": Out(seq_layout()),
            "emit_addr": In(range(qps)), "emit_static": Out(static_layout()),
            **shared_port_members(qps),
            "wb": In(stream.Signature(data.StructLayout({"qp": range(qps), "seq": seq_layout()}),
                                      always_ready=True)),
        })

    @property
    def qps(self):
        return self._qps

    def elaborate(self, platform):
        m = Module()
        # Six read ports: Yosys builds a shallow memory (a board's few QPs) from flip-flops
        # and a multiplexer per port, 8k LUT4s at 4 QPs; as distributed RAM, a copy per port
        # of the bits that port reads, it is a quarter of that, and no bigger at 16 QPs.
        m.submodules.static = static = Memory(shape=static_layout(), depth=self._qps, init=[],
                                              attrs={"ram_style": "distributed"})
        m.submodules.seq = seq = Memory(shape=seq_layout(), depth=self._qps, init=[])
        s_wr, q_wr = static.write_port(), seq.write_port()
        # (a request taken as its QP's last message ends must see that message's write-back)
        s_rd, q_rd = static.read_port(), seq.read_port(transparent_for=(q_wr,))
        for name in ("emit", *READ_PORTS):
            port = static.read_port()
            m.d.comb += [port.addr.eq(getattr(self, f"{name}_addr")),
                         getattr(self, f"{name}_static").eq(port.data)]
        for name in PEER_PORTS:
            port = static.read_port(domain="comb")
            m.d.comb += port.addr.eq(getattr(self, f"{name}_addr"))
            m.d.comb += [getattr(self, f"{name}_peer")[field].eq(port.data[field])
                         for field in PEER_FIELDS]
        m.d.comb += [
            s_rd.addr.eq(self.rd_addr), q_rd.addr.eq(self.rd_addr),
            self.rd_static.eq(s_rd.data), self.rd_seq.eq(q_rd.data),
        ]
        busy = Signal()
        m.d.comb += [busy.eq(self.wb.valid), self.write.ready.eq(~busy)]
        with m.If(self.wb.valid):
            m.d.comb += [q_wr.en.eq(1), q_wr.addr.eq(self.wb.payload.qp),
                         q_wr.data.eq(self.wb.payload.seq)]
        with m.Elif(self.write.valid):
            m.d.comb += [q_wr.en.eq(1), q_wr.addr.eq(self.write.payload.qp),
                         q_wr.data.eq(self.write.payload.seq)]
        with m.If(self.write.valid & self.write.ready):
            m.d.comb += [s_wr.en.eq(1), s_wr.addr.eq(self.write.payload.qp),
                         s_wr.data.eq(self.write.payload.static)]
        return m
