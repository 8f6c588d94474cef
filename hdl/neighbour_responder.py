"""Neighbour responder: answers ARP and IPv6 neighbour solicitations for a board's management
address, so that a host can reach the board by IP alone."""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from mrcnic.wire import ETHERNET, ETHERTYPE_ARP, ETHERTYPE_IPV4, ETHERTYPE_IPV6, IPV6

from .bits import word_mux
from .stream import PacketStream, check_width, keep_count, keep_mask

__all__ = ["NeighbourResponder", "ARP_REPLY_BYTES", "NA_REPLY_BYTES"]

ICMPV6, NS, NA = 58, 135, 136
ARP_REPLY_BYTES = 42        # Ethernet and ARP; the MAC pads it
NA_REPLY_BYTES = 86         # Ethernet, IPv6, the advertisement and its target link-layer option
_IP6 = ETHERNET.length      # where the IPv6 header starts
_ICMP = _IP6 + IPV6.length  # where the ICMPv6 message starts
_NS_MIN = 24                # an NS without options
_CAPTURE = 96               # the bytes of a frame looked at: an NS with two 8-byte options


class NeighbourResponder(wiring.Component):
    """Watches every frame on ``i`` (all are taken at once) and answers on ``o``:

    * an ARP request (Ethernet, IPv4, hardware and protocol lengths 6 and 4) whose target is
      ``ipv4`` (not 0) with a reply from ``mac``;
    * an ICMPv6 neighbour solicitation (hop limit 255, code 0, a correct checksum, a source
      address other than the unspecified one) whose target is ``ipv6`` with a solicited,
      overriding neighbour advertisement carrying ``mac`` as its target link-layer address, sent
      to the soliciting address and MAC.

    Anything else is ignored. A solicitation that fails its checksum, or is longer than this
    block looks at (96 bytes of frame), is counted in ``bad``. One request waits while a reply is
    being sent; a request that finds one already waiting is counted in ``missed`` and not
    answered (the asker retries).

    Attributes
    ----------
    i : In(PacketStream(width));  o : Out(PacketStream(width))
    mac : In(48);  ipv4 : In(32);  ipv6 : In(128)   (as on the wire: the first byte the highest)
    arp_replies, nd_replies, bad, missed : Out(1), events (:attr:`events`)
    """

    def __init__(self, width=64):
        self._width = check_width(width)
        super().__init__({"i": In(PacketStream(width)), "o": Out(PacketStream(width)),
                          "mac": In(48), "ipv4": In(32), "ipv6": In(128),
                          "arp_replies": Out(1), "nd_replies": Out(1), "bad": Out(1),
                          "missed": Out(1)})

    @property
    def events(self):
        """The counters' event outputs, for the register bank to count."""
        return ("arp_replies", "nd_replies", "bad", "missed")

    def elaborate(self, platform):
        m = Module()
        L = self._width // 8
        cap = -(-_CAPTURE // L) * L
        beats = cap // L

        # Capture the frame's first bytes and its length.
        buf = Signal(8 * cap)
        length = Signal(range(cap + L + 1))     # bytes, saturating past the capture
        beat = Signal(range(beats + 1))
        ended = Signal()                        # a frame ended last cycle: judge it
        i = self.i
        m.d.comb += i.ready.eq(1)
        m.d.sync += ended.eq(0)

        # A solicitation's checksum, summed a beat's 16-bit words at a time as the frame comes:
        # the pseudo-header's addresses and the message (its length is in the frame's bytes 18
        # and 19, which arrive before any byte of the message).
        # The message's end needs the length only from the beat after the one it arrives in:
        # that beat ends before the message starts, so its bytes are in the sum whatever the
        # length says, and the length is read from the captured bytes alone (from the beat
        # as it arrives, it put an adder and a compare before the sum: the core clock's
        # critical path on the boards).
        acc = Signal(16 + (cap // 2).bit_length())
        assert ((_IP6 + 4) // L + 1) * L <= _ICMP
        plen_seen = Cat(buf.word_select(_IP6 + 5, 8), buf.word_select(_IP6 + 4, 8))
        terms = []
        for lane in range(0, L, 2):
            off = Signal(range(cap + L + 1), name=f"offset{lane}")
            m.d.comb += off.eq(beat * L + lane)
            hi = Mux(i.payload.keep[lane], i.payload.data.word_select(lane, 8), 0)
            lo = Mux(i.payload.keep[lane + 1], i.payload.data.word_select(lane + 1, 8), 0)
            terms.append(Mux((off >= _IP6 + 8) & (off < _ICMP + plen_seen) & (beat < beats),
                             Cat(lo, hi), 0))
        with m.If(i.valid):
            m.d.sync += acc.eq(Mux(beat == 0, 0, acc) + sum(terms))
        with m.If(i.valid):
            with m.If(beat < beats):
                # A frame's first beat starts its count afresh: the next frame may begin in the
                # cycle this one is judged, which still sees this one's bytes and length.
                m.d.sync += [buf.word_select(beat, 8 * L).eq(i.payload.data), beat.eq(beat + 1),
                             length.eq(Mux(beat == 0, 0, length)
                                       + keep_count(m, i.payload.keep))]
            with m.Else():
                m.d.sync += length.eq(cap + L)
            with m.If(i.payload.last):
                m.d.sync += [beat.eq(0), ended.eq(1)]

        def byte(k):
            return buf.word_select(k, 8)

        def be(k, n):
            """``n`` bytes from byte ``k``, big-endian."""
            return Cat(*[byte(k + n - 1 - j) for j in range(n)])

        # ARP request for us.
        arp = Signal()
        m.d.comb += arp.eq((length >= ARP_REPLY_BYTES) & (be(12, 2) == ETHERTYPE_ARP)
                           & (be(14, 2) == 1) & (be(16, 2) == ETHERTYPE_IPV4)
                           & (byte(18) == 6) & (byte(19) == 4) & (be(20, 2) == 1)
                           & (be(38, 4) == self.ipv4) & (self.ipv4 != 0))

        # Neighbour solicitation: its checksum over the pseudo-header and the message.
        plen = be(_IP6 + 4, 2)
        is_ns = Signal()
        m.d.comb += is_ns.eq((length >= _ICMP + _NS_MIN) & (be(12, 2) == ETHERTYPE_IPV6)
                             & (byte(_IP6)[4:] == 6) & (byte(_IP6 + 6) == ICMPV6)
                             & (byte(_ICMP) == NS))
        fits = Signal()
        m.d.comb += fits.eq((plen >= _NS_MIN) & (plen <= cap - _ICMP) & (plen[:3] == 0)
                            & (_ICMP + plen <= length))
        total = Signal(len(acc) + 1)
        m.d.comb += total.eq(acc + plen + ICMPV6)
        folded = Signal(17)
        m.d.comb += folded.eq(total[:16] + total[16:])
        check_ok = Signal()
        m.d.comb += check_ok.eq((folded[:16] + folded[16]) == 0xFFFF)
        ns = Signal()
        m.d.comb += ns.eq(is_ns & fits & check_ok & (byte(_IP6 + 7) == 255)
                          & (byte(_ICMP + 1) == 0) & (be(_IP6 + 8, 16) != 0)
                          & (be(_ICMP + 8, 16) == self.ipv6) & (self.ipv6 != 0))

        # What a reply needs of its request is kept, so that the request's bytes may be
        # overwritten by the frames after it: one request waits while a reply is being sent.
        waiting = Signal()
        w_ns = Signal()                    # 0: ARP, 1: NS
        w_mac = Signal(48)
        w_ipv4 = Signal(32)
        w_ipv6 = Signal(128)
        with m.If(ended & is_ns & ~(fits & check_ok)):
            m.d.comb += self.bad.eq(1)

        # The reply, built whole, then sent a beat a cycle.
        rep = Signal(8 * cap)
        rep_len = Signal(range(cap + 1))
        sending = Signal()
        out = Signal(range(beats + 1))

        def put(k, value, n):
            """``value`` as ``n`` bytes from byte ``k`` of the reply, big-endian."""
            v = Const(value, 8 * n) if isinstance(value, int) else value
            return [rep.word_select(k + n - 1 - j, 8).eq(v.word_select(j, 8)) for j in range(n)]

        # The advertisement's checksum: pseudo-header (our address, the asker's, length 32,
        # ICMPv6) and the message (type, flags S and O, our address, our MAC as an option).
        ours = [self.ipv6.word_select(7 - k, 16) for k in range(8)]
        theirs = [w_ipv6.word_select(7 - k, 16) for k in range(8)]
        macw = [self.mac.word_select(2 - k, 16) for k in range(3)]
        na_words = ours + theirs + [Const(32, 16), Const(ICMPV6, 16), Const(NA << 8, 16),
                                    Const(0x6000, 16), *ours, Const(0x0201, 16), *macw]
        na_total = Signal(16 + len(na_words).bit_length())
        m.d.comb += na_total.eq(sum(na_words))
        na_fold = Signal(17)
        m.d.comb += na_fold.eq(na_total[:16] + na_total[16:])
        na_sum = Signal(16)
        m.d.comb += na_sum.eq(~(na_fold[:16] + na_fold[16]))

        with m.If(waiting & ~sending):
            m.d.sync += [waiting.eq(0), sending.eq(1), out.eq(0), rep.eq(0)]
            with m.If(~w_ns):
                m.d.sync += [*put(0, w_mac, 6), *put(6, self.mac, 6),
                             *put(12, ETHERTYPE_ARP, 2), *put(14, 1, 2),
                             *put(16, ETHERTYPE_IPV4, 2), *put(18, 0x0604, 2), *put(20, 2, 2),
                             *put(22, self.mac, 6), *put(28, self.ipv4, 4), *put(32, w_mac, 6),
                             *put(38, w_ipv4, 4), rep_len.eq(ARP_REPLY_BYTES)]
                m.d.comb += self.arp_replies.eq(1)
            with m.Else():
                m.d.sync += [*put(0, w_mac, 6), *put(6, self.mac, 6),
                             *put(12, ETHERTYPE_IPV6, 2), *put(_IP6, 0x6000_0000, 4),
                             *put(_IP6 + 4, 32, 2), *put(_IP6 + 6, (ICMPV6 << 8) | 255, 2),
                             *put(_IP6 + 8, self.ipv6, 16), *put(_IP6 + 24, w_ipv6, 16),
                             *put(_ICMP, NA << 8, 2), *put(_ICMP + 2, na_sum, 2),
                             *put(_ICMP + 4, 0x6000_0000, 4), *put(_ICMP + 8, self.ipv6, 16),
                             *put(_ICMP + 24, 0x0201, 2), *put(_ICMP + 26, self.mac, 6),
                             rep_len.eq(NA_REPLY_BYTES)]
                m.d.comb += self.nd_replies.eq(1)

        # After the build above: a request may take the slot in the cycle the build empties it.
        with m.If(ended & (arp | ns)):
            with m.If(waiting & sending):
                m.d.comb += self.missed.eq(1)
            with m.Else():
                m.d.sync += [waiting.eq(1), w_ns.eq(ns),
                             w_mac.eq(Mux(ns, be(6, 6), be(22, 6))), w_ipv4.eq(be(28, 4)),
                             w_ipv6.eq(be(_IP6 + 8, 16))]

        o = self.o
        left = Signal(range(cap + 1))
        m.d.comb += left.eq(rep_len - out * L)
        m.d.comb += [o.valid.eq(sending), o.payload.data.eq(word_mux(m, rep, out, 8 * L, "out")),
                     o.payload.last.eq(left <= L),
                     o.payload.keep.eq(keep_mask(m, Mux(left <= L, left, L), L))]
        with m.If(o.valid & o.ready):
            m.d.sync += out.eq(out + 1)
            with m.If(o.payload.last):
                m.d.sync += sending.eq(0)
        return m
