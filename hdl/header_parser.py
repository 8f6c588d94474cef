"""Header parser: Ethernet / [outer IPv6 / [SRH]] / IPv6 / UDP / BTH fields of every frame."""



from functools import reduce
from operator import or_

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from mrcnic import wire

from .headers import field_value, header_layout, header_view
from .stream import PacketStream, check_width, keep_count

__all__ = ["ParseError", "HeaderParser", "parsed_layout", "window_bytes"]


class ParseError(enum.Enum, shape=4):
    """Why a frame is malformed; the first rule broken, in this order of checking."""
    NONE = 0
    OVERSIZE = 1       # longer than max_frame bytes
    TRUNCATED = 2      # ends before the headers it announces
    ETHERTYPE = 3      # not IPv6
    IP_VERSION = 4     # an IPv6 header whose version is not 6
    NOT_UDP = 5        # no UDP where it must be (or an unknown next header after Ethernet/IPv6)
    SRH_MALFORMED = 6  # routing type not 4, lengths inconsistent, segments_left > last_entry,
                       # next header not IPv6, or more segments than max_segments
    NOT_ROCE = 7       # UDP destination port is not 4791
    LENGTH = 8         # an IPv6 payload length or the UDP length disagrees with the frame


def window_bytes(max_segments):
    """Bytes of a frame the parser must see: the longest header stack it accepts."""
    return (wire.ETHERNET.length + wire.IPV6.length + wire.SRH.length + 16 * max_segments
            + wire.IPV6.length + wire.UDP.length + wire.BTH.length)


def parsed_layout():
    """What the parser reports for each frame."""
    return data.StructLayout({
        "error": ParseError,
        "outer_present": 1,
        "srh_present": 1,
        "frame_length": 16,
        "eth": header_layout(wire.ETHERNET),
        "outer": header_layout(wire.IPV6),
        "srh": header_layout(wire.SRH),
        "ip": header_layout(wire.IPV6),
        "udp": header_layout(wire.UDP),
        "bth": header_layout(wire.BTH),
    })


class HeaderParser(wiring.Component):
    """Parses the header stack of each frame while passing the frame on unchanged.

    Enters: frames as the MAC delivers them, plain RoCEv2 or SRv6-encapsulated (outer IPv6 with
    next header 41, or 43 with an SRH of up to ``max_segments`` segments). Leaves: the same beats
    on ``o``, and on ``meta`` one record per frame, the cycle after its last beat passes, with
    every field of the stack and the first rule the frame broke (:class:`ParseError`). Fields of
    headers the frame does not have are zero. One beat a cycle; a frame's last beat waits only
    while the previous record is still unread or is being judged.

    Parameters
    ----------
    width : data width in bits.
    max_segments : the longest SRH segment list accepted.
    max_frame : frames longer than this many bytes are OVERSIZE.

    Attributes
    ----------
    i : In(PacketStream(width))
    o : Out(PacketStream(width))
    meta : Out(stream.Signature(parsed_layout()))
    frames, errors : Out(1), events (:attr:`events`): a frame parsed, one found malformed.
    last_error : Out(ParseError), the reason of the latest malformed frame.
    """

    def __init__(self, width=64, max_segments=4, max_frame=9600):
        self._width = check_width(width)
        if not isinstance(max_segments, int) or not 1 <= max_segments <= 16:
            raise ValueError(f"max_segments must be an integer from 1 to 16, not {max_segments!r}")
        if not isinstance(max_frame, int) or not 64 <= max_frame < 1 << 16:
            raise ValueError(f"max_frame must be an integer from 64 to 65535, not {max_frame!r}")
        self._max_segments = max_segments
        self._max_frame = max_frame
        super().__init__({
            "i": In(PacketStream(width)), "o": Out(PacketStream(width)),
            "meta": Out(stream.Signature(parsed_layout())),
            "frames": Out(1), "errors": Out(1), "last_error": Out(ParseError),
        })

    @property
    def events(self):
        """The counters' event outputs, for the register bank to count."""
        return ("frames", "errors")

    def elaborate(self, platform):
        m = Module()
        L = self._width // 8
        K = self._max_segments
        N = window_bytes(K)
        win_beats = -(-N // L)

        ETH, IP, SRH, UDP, BTH = wire.ETHERNET, wire.IPV6, wire.SRH, wire.UDP, wire.BTH
        OUTER = ETH.length                      # the first IPv6 header
        SRH_AT = OUTER + IP.length
        STACK = IP.length + UDP.length + BTH.length   # inner IPv6 .. BTH

        # The headers at fixed places (Ethernet, the first IPv6 header, an SRH's own 8 bytes)
        # are kept in a window; the inner stack, which starts after the SRH's segments, is
        # captured from the beats as they pass, so the segments themselves are never stored.
        FIXED = SRH_AT + SRH.length
        fixed_beats = -(-FIXED // L)
        window = Signal(8 * FIXED)
        beat = Signal(range(win_beats + 1))
        length = Signal(16)                     # bytes before the current beat, saturating

        # The window as it stands with the current beat in it. Every rule below reads only
        # bytes the frame has (each checks the length first), so bytes past its end may hold
        # anything, except in the Ethernet header, which a malformed frame reports: there they
        # read as zero, never as a previous frame's.
        cur = Signal(8 * FIXED)
        d = self.i.payload
        for b in range(fixed_beats):
            lo, hi = b * L, min(FIXED, (b + 1) * L)
            eth_end = min(max(ETH.length - lo, 0), hi - lo)     # lanes of this beat in it
            for lane in range(eth_end):
                at = lo + lane
                with m.If(beat > b):
                    m.d.comb += cur.word_select(at, 8).eq(window.word_select(at, 8))
                with m.Elif((beat == b) & d.keep[lane]):
                    m.d.comb += cur.word_select(at, 8).eq(d.data.word_select(lane, 8))
            if eth_end < hi - lo:
                rest = slice(8 * (lo + eth_end), 8 * hi)
                m.d.comb += cur[rest].eq(Mux(beat == b, d.data[8 * eth_end:8 * (hi - lo)],
                                             window[rest]))

        total = Signal(17)
        m.d.comb += total.eq(length + keep_count(m, self.i.payload.keep))

        # Where the inner IPv6 header starts: case 0 plain, 1 outer IPv6, 2 + k outer + SRH of
        # k segments (the last case also takes any longer list, which the SRH rules refuse).
        bases = [OUTER, SRH_AT] + [FIXED + 16 * k for k in range(K + 1)]

        def stack_case(buf, name):
            """The outer next header, the SRH and the case (one-hot) of the headers in ``buf``."""
            nh0 = field_value(buf, IP, "next_header", OUTER)
            srh = header_view(buf, SRH, SRH_AT)
            case = Signal(len(bases), name=f"{name}_case")
            with m.If(nh0 == wire.IPPROTO_IPV6):
                m.d.comb += case.eq(1 << 1)
            with m.Elif(nh0 == wire.IPPROTO_ROUTING):
                with m.Switch(srh.hdr_ext_len >> 1):
                    for k in range(K + 1):
                        with m.Case(k):
                            m.d.comb += case.eq(1 << (2 + k))
                    with m.Default():
                        m.d.comb += case.eq(1 << (len(bases) - 1))
            with m.Else():
                m.d.comb += case.eq(1)
            return nh0, srh, case

        case = stack_case(cur, "beat")[2]

        # The inner stack as it stands: a byte inside the window comes from it; one past it is
        # taken at the beat and lane where it passes. The case is known by then (it rests on
        # bytes 20 and 55, both in the window); a byte taken earlier on a case read from bytes
        # not yet arrived is taken again, rightly, at its own beat.
        inner_q = Signal(8 * STACK)
        inner = Signal(8 * STACK)
        for j in range(STACK):
            byte = inner.word_select(j, 8)
            m.d.comb += byte.eq(inner_q.word_select(j, 8))
            passing = {}                        # (beat, lane) -> the cases that take it there
            for c, off in enumerate(bases):
                if off + j < FIXED:
                    with m.If(case[c]):
                        m.d.comb += byte.eq(cur.word_select(off + j, 8))
                else:
                    passing.setdefault(divmod(off + j, L), []).append(c)
            for (b, lane), cs in passing.items():
                with m.If((beat == b) & Cat(*(case[c] for c in cs)).any()):
                    m.d.comb += byte.eq(d.data.word_select(lane, 8))

        # A frame is judged the cycle after its last beat, from registers: the window and the
        # inner stack, both whole by then, and its length. (Judged from the beat as it passed,
        # through the window's and the stack's selection, the checks were the boards' core
        # clock's longest path.) The next frame's first beat may pass meanwhile: it changes
        # them only as the cycle ends.
        judging = Signal()
        total_q = Signal.like(total)
        nh0, srh, judged_case = stack_case(window, "judged")
        base = Signal(range(bases[-1] + 1))    # where the judged frame's inner stack starts
        # One case holds at a time: an OR of the masked offsets, not a chain of adders.
        m.d.comb += base.eq(reduce(or_, (Mux(judged_case[c], off, 0)
                                         for c, off in enumerate(bases))))
        eth = header_view(window, ETH, 0)
        outer = header_view(window, IP, OUTER)
        ip = header_view(inner_q, IP, 0)
        udp = header_view(inner_q, UDP, IP.length)
        bth = header_view(inner_q, BTH, IP.length + UDP.length)
        is_outer = nh0 == wire.IPPROTO_IPV6
        is_srh = nh0 == wire.IPPROTO_ROUTING

        error = Signal(ParseError)
        srh_bad = ((srh.routing_type != wire.SRH_ROUTING_TYPE) | srh.hdr_ext_len[0]
                   | ((srh.hdr_ext_len >> 1) > K) | (srh.last_entry + 1 != srh.hdr_ext_len >> 1)
                   | (srh.segments_left > srh.last_entry)
                   | (srh.next_header != wire.IPPROTO_IPV6))
        with m.If(total_q > self._max_frame):
            m.d.comb += error.eq(ParseError.OVERSIZE)
        with m.Elif(total_q < OUTER + IP.length):
            m.d.comb += error.eq(ParseError.TRUNCATED)
        with m.Elif(eth.ethertype != wire.ETHERTYPE_IPV6):
            m.d.comb += error.eq(ParseError.ETHERTYPE)
        with m.Elif(outer.version != 6):
            m.d.comb += error.eq(ParseError.IP_VERSION)
        with m.Elif((nh0 != wire.IPPROTO_UDP) & ~is_outer & ~is_srh):
            m.d.comb += error.eq(ParseError.NOT_UDP)
        with m.Elif(is_srh & (total_q < SRH_AT + SRH.length)):
            m.d.comb += error.eq(ParseError.TRUNCATED)
        with m.Elif(is_srh & srh_bad):
            m.d.comb += error.eq(ParseError.SRH_MALFORMED)
        with m.Elif(total_q < base + STACK):
            m.d.comb += error.eq(ParseError.TRUNCATED)
        with m.Elif(ip.version != 6):
            m.d.comb += error.eq(ParseError.IP_VERSION)
        with m.Elif(ip.next_header != wire.IPPROTO_UDP):
            m.d.comb += error.eq(ParseError.NOT_UDP)
        with m.Elif(udp.dport != wire.ROCE_UDP_PORT):
            m.d.comb += error.eq(ParseError.NOT_ROCE)
        with m.Elif((ip.payload_length != total_q - base - IP.length)
                    | (udp.length != ip.payload_length)
                    | ((is_outer | is_srh) & (outer.payload_length != total_q - SRH_AT))):
            m.d.comb += error.eq(ParseError.LENGTH)

        # The record. A malformed frame reports only its length, Ethernet header and reason; a
        # good one every header it has, absent ones zero.
        plain = ~is_outer & ~is_srh
        record = Signal(parsed_layout())
        m.d.comb += [
            record.error.eq(error),
            record.frame_length.eq(total_q),
            record.eth.eq(eth),
        ]
        with m.If(error == ParseError.NONE):
            m.d.comb += [
                record.outer_present.eq(~plain),
                record.srh_present.eq(is_srh),
                record.ip.eq(ip), record.udp.eq(udp), record.bth.eq(bth),
            ]
            with m.If(~plain):
                m.d.comb += record.outer.eq(outer)
            with m.If(is_srh):
                m.d.comb += record.srh.eq(srh)

        # Handshakes: data flows straight through; the last beat also needs room for the record
        # in the cycle after it, so none is being judged now.
        room = ~judging & (~self.meta.valid | self.meta.ready)
        m.d.comb += [
            self.o.payload.eq(self.i.payload),
            self.o.valid.eq(self.i.valid & (~self.i.payload.last | room)),
            self.i.ready.eq(self.o.ready & (~self.i.payload.last | room)),
        ]
        with m.If(self.meta.valid & self.meta.ready):
            m.d.sync += self.meta.valid.eq(0)

        m.d.sync += judging.eq(0)
        with m.If(judging):
            m.d.sync += [self.meta.payload.eq(record), self.meta.valid.eq(1)]
            m.d.comb += self.frames.eq(1)
            with m.If(error != ParseError.NONE):
                m.d.comb += self.errors.eq(1)
                m.d.sync += self.last_error.eq(error)

        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [window.eq(cur), inner_q.eq(inner)]
            with m.If(self.i.payload.last):
                m.d.sync += [total_q.eq(total), judging.eq(1), beat.eq(0), length.eq(0)]
            with m.Else():
                with m.If(beat != win_beats):
                    m.d.sync += beat.eq(beat + 1)
                with m.If(length < (1 << 16) - L):
                    m.d.sync += length.eq(length + L)
                with m.Else():
                    m.d.sync += length.eq((1 << 16) - 1)
        return m
