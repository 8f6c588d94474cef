"""Acknowledgement builder: frames each SACK or NACK the receive side asks for, and the
sender's probes and port-status updates."""

from amaranth import Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from mrcnic import wire

from .bits import word_mux
from .header_builder import frame_layout, frame_route_layout
from .headers import header_bytes
from .rx_event import AckKind, ack_layout
from .stream import PacketStream, check_width, keep_mask

__all__ = ["AckBuilder", "ack_request_layout", "ACK_BYTES"]

_STACK = (wire.ETHERNET, wire.IPV6, wire.UDP, wire.BTH)
#: Frame bytes before the ICRC, per kind.
_EXT = {AckKind.SACK: wire.SETH, AckKind.NACK: wire.NETH, AckKind.PROBE: wire.PETH,
        AckKind.STATUS: wire.ERTH}
ACK_BYTES = {k: sum(h.length for h in _STACK) + h.length for k, h in _EXT.items()}
_OPCODE = {AckKind.SACK: wire.Opcode.SACK, AckKind.NACK: wire.Opcode.NACK,
           AckKind.PROBE: wire.Opcode.PROBE, AckKind.STATUS: wire.Opcode.ENDPOINT_REQUEST}


def ack_request_layout(qps):
    """An acknowledgement, probe or port-status update with the EV the spray scheduler chose
    for it and the QP's peer; ``arg`` is a probe's profile entry, a status's port mask."""
    return data.StructLayout({"ack": ack_layout(qps), "arg": 16, "ev": 32, "dqp": 24,
                              "dst_mac": 48, "dst_ip": 128, "route": frame_route_layout()})


class AckBuilder(wiring.Component):
    """Enters: one request per SACK, NACK, probe or port-status update. Leaves: the frame,
    Ethernet / IPv6 / UDP / BTH / SETH (or NETH, or PETH to the probe QP, or ERTH), without its
    ICRC (the ICRC inserter follows), and its ``frame`` record with the first beat, as the
    header builder gives them for data packets.

    The EV goes where a data packet's does (UDP source port, flow label); the traffic class is
    CONTROL with ECT(0); BTH carries the PSN the acknowledgement is about. In SETH and NETH the
    PDC ids are QP numbers: spdcid this QP, dpdcid the peer's; ``entropy`` echoes the EV of the
    packet that triggered it. A probe's PETH names this QP (spdcid) and the peer's (dpdcid) and
    carries the timestamp ``ack.ts``. A port-status update is an ERTH, op PORT_STATUS, to the
    peer's QP, with this NIC's port mask (``arg``) and ``ack.ts``. One beat a cycle.

    Attributes
    ----------
    req : In(stream ack_request_layout(qps))
    o : Out(PacketStream(width));  frame : Out(stream frame_layout())
    src_mac : In(48), src_ip : In(128)
    """

    def __init__(self, width=64, qps=16):
        self._width = check_width(width)
        self._qps = qps
        super().__init__({
            "req": In(stream.Signature(ack_request_layout(qps))),
            "o": Out(PacketStream(width)),
            "frame": Out(stream.Signature(frame_layout())),
            "src_mac": In(48), "src_ip": In(128),
        })

    def elaborate(self, platform):
        m = Module()
        L = self._width // 8
        r = self.req.payload
        a = r.ack
        n_max = max(ACK_BYTES.values())
        tc = (wire.DscpClass.CONTROL << 2) | 0b10

        def stack(kind, ext):
            n = ACK_BYTES[kind]
            ip_payload = n - wire.ETHERNET.length - wire.IPV6.length + wire.ICRC_BYTES
            dqp = wire.PROBE_DQP if kind == AckKind.PROBE else r.dqp
            return Cat(
                header_bytes({"dst": r.dst_mac, "src": self.src_mac,
                              "ethertype": wire.ETHERTYPE_IPV6}, wire.ETHERNET),
                header_bytes({"version": 6, "tc": tc, "flow_label": r.ev[:16],
                              "payload_length": ip_payload, "next_header": wire.IPPROTO_UDP,
                              "hop_limit": 64, "src": self.src_ip, "dst": r.dst_ip}, wire.IPV6),
                header_bytes({"sport": r.ev[16:], "dport": wire.ROCE_UDP_PORT,
                              "length": ip_payload}, wire.UDP),
                header_bytes({"opcode": _OPCODE[kind], "pkey": 0xFFFF, "dqp": dqp,
                              "psn": a.psn}, wire.BTH),
                ext)

        ext = {
            AckKind.SACK: header_bytes({
                "m": a.m, "pr": a.pr, "ack_psn_offset": (a.psn - a.cack)[:16], "entropy": a.ev,
                "spdcid": a.qp, "dpdcid": r.dqp[:16], "cack_psn": a.cack,
                "sack_offset": a.sack_offset, "sack_bitmap": a.sack_bitmap,
                "tx_timestamp": a.ts, "ooo_count": a.ooo_count, "rcvd_bytes": a.rcvd_bytes,
                "rcv_cwnd_pen": a.rcv_cwnd_pen},
                wire.SETH),
            AckKind.NACK: header_bytes({
                "nack_reason": a.nack_reason, "entropy": a.ev, "spdcid": a.qp,
                "dpdcid": r.dqp[:16], "nack_psn": a.psn, "tx_timestamp": a.ts}, wire.NETH),
            AckKind.PROBE: header_bytes({"probe_id": r.arg, "spdcid": a.qp,
                                         "dpdcid": r.dqp[:16], "tx_timestamp": a.ts}, wire.PETH),
            AckKind.STATUS: header_bytes({"op": wire.EndpointOp.PORT_STATUS,
                                          "port_status_mask": r.arg, "tx_timestamp": a.ts},
                                         wire.ERTH),
        }
        beats = -(-n_max // L)
        frame = Signal(8 * L * beats)
        total = Signal(range(n_max + 1))
        with m.Switch(a.kind):
            for kind in AckKind:
                with m.Case(kind):
                    m.d.comb += [frame.eq(stack(kind, ext[kind])), total.eq(ACK_BYTES[kind])]

        beat = Signal(range(beats))
        left = Signal(range(n_max + 1))
        m.d.comb += left.eq(total - beat * L)
        f = self.frame.payload
        m.d.comb += [f.ev.eq(r.ev), f.route.eq(r.route), f.tc.eq(tc),
                     f.length.eq(total + wire.ICRC_BYTES),
                     self.o.payload.data.eq(word_mux(m, frame, beat, 8 * L, "out"))]
        # The first beat leaves together with the frame record; the request is held until the
        # last beat is taken.
        first = beat == 0
        m.d.comb += [self.o.valid.eq(self.req.valid & (~first | self.frame.ready)),
                     self.frame.valid.eq(self.req.valid & first & self.o.ready)]
        with m.If(left <= L):
            m.d.comb += [self.o.payload.keep.eq(keep_mask(m, left, L)),
                         self.o.payload.last.eq(1)]
        with m.Else():
            m.d.comb += self.o.payload.keep.eq((1 << L) - 1)
        with m.If(self.o.valid & self.o.ready):
            with m.If(left <= L):
                m.d.comb += self.req.ready.eq(1)
                m.d.sync += beat.eq(0)
            with m.Else():
                m.d.sync += beat.eq(beat + 1)
        return m
