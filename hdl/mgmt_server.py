"""Management server: the board management protocol of :mod:`mrcnic.mgmt` in gateware, register
reads and writes over UDP on IPv4 or IPv6, carried out on the CSR bus."""

from amaranth import C, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from mrcnic import mgmt, regmap
from mrcnic.wire import ETHERNET, ETHERTYPE_IPV4, ETHERTYPE_IPV6, IPPROTO_UDP, IPV4, IPV6, UDP

from .bits import word_mux
from .crc32 import crc32_byte
from .csr_bus import CSRBus, Refusal
from .headers import header_bytes, header_view
from .stream import PacketStream, check_width, keep_count, keep_mask

__all__ = ["MgmtServer", "register_descriptors", "DESCRIPTOR_BITS"]

_U4 = ETHERNET.length + IPV4.length + UDP.length    # where an IPv4 datagram's payload starts
_U6 = ETHERNET.length + IPV6.length + UDP.length    # and an IPv6 one's
_HDR = mgmt.HEADER.length
_MAX_WORDS = max(mgmt.MAX_BURST_WORDS, mgmt.MAX_WIDTH // mgmt.WORD_BITS)
_TTL = 64
_DF = 0b010                                         # IPv4 flags: don't fragment

# A register descriptor, one per word of the CSR address space.
_EXISTS, _WRITABLE = 0, 1
_K = slice(2, 5)            # which word of its register
_WIDTH = slice(5, 14)       # the register's width; 0: words only (a MEM register)
DESCRIPTOR_BITS = 14


def register_descriptors(registers=regmap.REGISTERS, addr_width=regmap.ADDR_WIDTH):
    """For each word of the CSR address space, what the management server checks a request
    against, packed as the server's ROM holds it: whether a register has that word, whether
    it takes writes, which of its words it is, and its width."""
    table = [0] * (1 << (addr_width - 2))
    for r in registers:
        writable = r.access in (regmap.Access.RW, regmap.Access.CMD, regmap.Access.MEM)
        for k in range(r.words):
            if r.access is regmap.Access.MEM:
                k_field, width = 0, 0
            else:
                if r.words > 8 or r.width > mgmt.MAX_WIDTH:
                    raise ValueError(f"{r.path}: {r.width} bits is wider than the management "
                                     f"protocol's {mgmt.MAX_WIDTH}")
                k_field, width = k, r.width
            table[(r.offset >> 2) + k] = (1 << _EXISTS | writable << _WRITABLE | k_field << 2
                                          | width << 5)
    return table


class MgmtServer(wiring.Component):
    """Serves :mod:`mrcnic.mgmt`'s protocol to the frames on ``i`` (all are taken at once) that
    are UDP to ``port`` at ``ipv4`` or ``ipv6`` and ``mac``: the same replies, statuses and
    duplicate rule as :class:`mrcnic.mgmt.MgmtServer` over the register window that
    ``verif/tb_sim_server.NicRegisters`` describes, on the CSR bus ``bus``.

    * A request is checked in the order the protocol's decoder checks it, then carried out one
      word at a time (the bank's ``refused`` says why a word was not), and answered on ``o`` to
      the MAC, address and port it came from.
    * For each of the ``clients`` most recent clients (address and port) the server keeps its
      last request's sequence number and a CRC-32 of the request, and the reply: the same
      request again is answered from that reply and not carried out again.
    * Dropped and counted in ``dropped``: a frame for us that is not a well-formed request (bad
      IPv4 header or checksum, IPv4 options or fragments, lengths that disagree, a wrong UDP
      checksum, a datagram shorter than the header or with another magic, a reply, a frame
      longer than the largest request). Counted in ``missed``: a request that arrives while
      another is being served, or whose first beat comes in the two cycles after a frame for
      us ends, while that one is being judged (the client retransmits it).

    Attributes
    ----------
    i : In(PacketStream(width));  o : Out(PacketStream(width))
    bus : Out(CSRBus(addr_width))
    mac : In(48);  ipv4 : In(32) (0: none);  ipv6 : In(128) (0: none), first byte highest
    executed, replayed, refused, dropped, missed : Out(1), events (:attr:`events`)
    """

    def __init__(self, width=64, clients=mgmt.BOARD_CLIENTS, port=mgmt.DEFAULT_PORT,
                 registers=regmap.REGISTERS, addr_width=regmap.ADDR_WIDTH):
        self._width = check_width(width)
        if not isinstance(clients, int) or not 1 <= clients <= 64:
            raise ValueError(f"clients must be 1 .. 64, not {clients!r}")
        if not isinstance(port, int) or not 0 < port < 1 << 16:
            raise ValueError(f"port must be a UDP port 1 .. 65535, not {port!r}")
        self._clients, self._port = clients, port
        self._addr_width = addr_width
        self._rom = register_descriptors(registers, addr_width)
        super().__init__({"i": In(PacketStream(width)), "o": Out(PacketStream(width)),
                          "bus": Out(CSRBus(addr_width)),
                          "mac": In(48), "ipv4": In(32), "ipv6": In(128),
                          "executed": Out(1), "replayed": Out(1), "refused": Out(1),
                          "dropped": Out(1), "missed": Out(1)})

    @property
    def events(self):
        """The counters' event outputs, for the register bank to count."""
        return ("executed", "replayed", "refused", "dropped", "missed")

    def elaborate(self, platform):
        m = Module()
        L = self._width // 8
        NC = self._clients
        max_frame = _U6 + mgmt.MAX_PACKET
        depth = -(-max_frame // L)
        cap_beats = -(-(_U6 + _HDR) // L)
        cap = cap_beats * L
        i, o, bus = self.i, self.o, self.bus

        busy = Signal()          # a request is being served
        accept = Signal()        # the frame judged this cycle is a request to serve
        ours = Signal()          # the frame that ended last cycle is addressed to us

        # ---- Receive: every frame's first bytes into flip-flops, the frame into block RAM
        # (unless a request is being served), and two ones' complement sums of its 16-bit words,
        # a beat's words at a time: the IPv4 header's, and everything from the IPv4 source
        # address on (an IPv4 datagram's UDP pseudo-header and UDP; an IPv6 one's lacks only its
        # source address's first four bytes, which are in the flip-flops).
        m.submodules.frame = frame = Memory(shape=self._width, depth=depth, init=[])
        fw, fr = frame.write_port(), frame.read_port()
        buf = Signal(8 * cap)
        beat = Signal(range(depth + 2))
        length = Signal(range((depth + 1) * L + 1))
        storing = Signal()
        store_now = Signal()
        acc = Signal(32)
        acc_ip = Signal(20)
        ended = Signal()
        judging = Signal()       # the frame that ``ended`` last cycle is ours: its sums are folded
        # Each beat is taken into flip-flops before anything looks at it: the MAC's block RAM is
        # slow to its output, and with the sums behind it that was the slower boards' core
        # clock's critical path.
        m.d.comb += i.ready.eq(1)
        got = Signal.like(i.payload)
        got_valid = Signal()
        m.d.sync += [got.eq(i.payload), got_valid.eq(i.valid)]
        m.d.sync += ended.eq(0)
        first = beat == 0
        # (a frame that starts while an earlier one of ours waits for its judgement is not
        # stored: the store may be that one's)
        m.d.comb += store_now.eq(Mux(first, ~busy & ~accept & ~(ended & ours) & ~judging,
                                     storing))
        offsets = [Signal(range((depth + 2) * L), name=f"offset{lane}") for lane in range(L)]
        for lane, off in enumerate(offsets):
            m.d.comb += off.eq(beat * L + lane)
        ip_first = ETHERNET.length
        ip_end = ip_first + IPV4.length
        src4 = ip_first + IPV4.bit_offset("src") // 8
        words, ip_words = [], []
        for lane in range(0, L, 2):
            hi = Mux(got.keep[lane], got.data.word_select(lane, 8), 0)
            lo = Mux(got.keep[lane + 1], got.data.word_select(lane + 1, 8), 0)
            off = offsets[lane]
            words.append(Mux(off >= src4, Cat(lo, hi), 0))
            ip_words.append(Mux((off >= ip_first) & (off < ip_end), Cat(lo, hi), 0))
        m.d.comb += [fw.addr.eq(beat), fw.data.eq(got.data)]
        with m.If(got_valid):
            m.d.sync += [acc.eq(Mux(first, 0, acc) + sum(words)),
                         acc_ip.eq(Mux(first, 0, acc_ip) + sum(ip_words))]
            with m.If(store_now & (beat < depth)):
                m.d.comb += [fw.en.eq(1)]
            with m.If(first):
                m.d.sync += storing.eq(store_now)
            with m.If(beat < cap_beats):
                m.d.sync += buf.word_select(beat, 8 * L).eq(got.data)
            with m.If(beat <= depth):    # past the buffer the length is too long already
                m.d.sync += [beat.eq(beat + 1),
                             length.eq(Mux(first, 0, length) + keep_count(m, got.keep))]
            with m.If(got.last):
                m.d.sync += [beat.eq(0), ended.eq(1)]

        # ---- Judge the frame that ended last cycle, over three cycles (below). Sums, folds and
        # the decision in one cycle, or in two, were too deep for the slower ECP5s' core clock;
        # and the next frame may start overwriting the bytes the cycle after it ends.
        eth = header_view(buf, ETHERNET, 0)
        ip4 = header_view(buf, IPV4, ETHERNET.length)
        ip6 = header_view(buf, IPV6, ETHERNET.length)
        udp4 = header_view(buf, UDP, ETHERNET.length + IPV4.length)
        udp6 = header_view(buf, UDP, ETHERNET.length + IPV6.length)
        is6 = eth.ethertype == ETHERTYPE_IPV6
        # UDP to our IPv4 address with options or in fragments, where the port cannot be
        # found, is taken for ours: the board serves nothing else over UDP.
        unparsed4 = (ip4.ihl != 5) | ip4.flags[0] | (ip4.frag_offset != 0)
        ours4 = ((eth.ethertype == ETHERTYPE_IPV4) & (self.ipv4 != 0) & (ip4.dst == self.ipv4)
                 & (ip4.protocol == IPPROTO_UDP) & ((udp4.dport == self._port) | unparsed4))
        ours6 = (is6 & (self.ipv6 != 0) & (ip6.dst == self.ipv6)
                 & (ip6.next_header == IPPROTO_UDP) & (udp6.dport == self._port))
        m.d.comb += ours.eq((eth.dst == self.mac) & (ours4 | ours6))

        def be16(k):
            return Cat(buf.word_select(k + 1, 8), buf.word_select(k, 8))

        def fold(value, name):
            """The ones' complement sum ``value`` folded to 16 bits."""
            once = Signal(20, name=f"{name}_once")
            m.d.comb += once.eq(value[:16] + value[16:])
            twice = Signal(17, name=f"{name}_twice")
            m.d.comb += twice.eq(once[:16] + once[16:])
            folded = Signal(16, name=name)
            m.d.comb += folded.eq(twice[:16] + twice[16])
            return folded

        # Stage 1, the cycle after the frame's last beat (``ended``): its checks but the
        # checksums', the sums the checksums are folded from, whether it was stored, and a
        # copy of what serving it needs go into flip-flops. Stage 2 (``judging``) folds and
        # compares the sums; stage 3 (``judged``) decides.
        src6 = ip_first + IPV6.bit_offset("src") // 8
        fields = data.StructLayout({
            "v6": 1, "mac": 48, "ip": 128, "port": 16,
            "len": 16,                    # the datagram's payload, in bytes
            "hdr": 8 * _HDR})             # the request's management header, as bytes
        copy = Signal(fields)
        v6, rest4, rest6, zero4, stored = Signal(), Signal(), Signal(), Signal(), Signal()
        raw_ip4, raw4, raw6 = Signal(20), Signal(34), Signal(34)
        m.d.sync += judging.eq(ended & ours)
        with m.If(ended):
            m.d.sync += [
                v6.eq(is6),
                rest4.eq((ip4.version == 4) & ~unparsed4
                         & (ip4.total_length == length - ETHERNET.length)
                         & (udp4.length == ip4.total_length - IPV4.length)
                         & (udp4.length >= UDP.length) & (length <= depth * L)),
                rest6.eq((ip6.version == 6)
                         & (ip6.payload_length == length - ETHERNET.length - IPV6.length)
                         & (udp6.length == ip6.payload_length) & (udp6.length >= UDP.length)
                         & (udp6.checksum != 0) & (length <= depth * L)),
                zero4.eq(udp4.checksum == 0),
                raw_ip4.eq(acc_ip),
                raw4.eq(acc + IPPROTO_UDP + udp4.length),
                raw6.eq(acc + be16(src6) + be16(src6 + 2) + IPPROTO_UDP + udp6.length),
                stored.eq(storing)]
            # (where a frame fits in a beat, the next may end while this one is judged: the
            # copy stays for this one's decision; the next is not stored, so never served)
            with m.If(~judging):
                m.d.sync += [
                    copy.v6.eq(is6), copy.mac.eq(eth.src),
                    copy.ip.eq(Mux(is6, ip6.src, ip4.src)),
                    copy.port.eq(Mux(is6, udp6.sport, udp4.sport)),
                    copy.len.eq(Mux(is6, udp6.length, udp4.length) - UDP.length),
                    copy.hdr.eq(Mux(is6, buf[8 * _U6:8 * (_U6 + _HDR)],
                                    buf[8 * _U4:8 * (_U4 + _HDR)]))]
        good = Signal()
        m.d.comb += good.eq(Mux(v6, rest6 & (fold(raw6, "udp_sum6") == 0xFFFF),
                                rest4 & (fold(raw_ip4, "ip4_sum") == 0xFFFF)
                                & (zero4 | (fold(raw4, "udp_sum4") == 0xFFFF))))
        judged, judged_good, judged_storing = Signal(), Signal(), Signal()
        m.d.sync += [judged.eq(judging), judged_good.eq(good), judged_storing.eq(stored)]
        with m.If(judged & ~judged_good):
            m.d.comb += self.dropped.eq(1)
        with m.If(judged & judged_good & (busy | ~judged_storing)):
            m.d.comb += self.missed.eq(1)
        m.d.comb += accept.eq(judged & judged_good & ~busy & judged_storing)

        kept = Signal(fields)
        with m.If(accept):
            m.d.sync += kept.eq(copy)
        r6, r_mac, r_ip, r_port, r_len, r_hdr = (kept.v6, kept.mac, kept.ip, kept.port,
                                                 kept.len, kept.hdr)
        r_crc = Signal(32)
        req = header_view(r_hdr, mgmt.HEADER, 0, reserved=True)

        # ---- Decode: the protocol's checks, in its decoder's order.
        Op, St = mgmt.Opcode, mgmt.Status
        single = (req.opcode == Op.READ) | (req.opcode == Op.WRITE)
        burst = (req.opcode == Op.READ_BURST) | (req.opcode == Op.WRITE_BURST)
        writes = (req.opcode == Op.WRITE) | (req.opcode == Op.WRITE_BURST)
        need = Signal(9)
        m.d.comb += need.eq((req.width + 31) >> 5)
        data_words = Mux(writes, req.count, 0)
        end = Cat(req.addr, C(0, 2)) + Cat(C(0, 2), req.count)
        drop = Signal()
        status = Signal(3)
        m.d.comb += drop.eq((r_len < _HDR) | (req.magic != mgmt.MAGIC) | req.reply)
        with m.If(req.version != mgmt.VERSION):
            m.d.comb += status.eq(St.BAD_VERSION)
        with m.Elif(~single & ~burst):
            m.d.comb += status.eq(St.BAD_OPCODE)
        with m.Elif(single & ((req.width == 0) | (req.width > mgmt.MAX_WIDTH)
                              | (req.count != need))):
            m.d.comb += status.eq(St.BAD_LENGTH)
        with m.Elif(burst & ((req.width != mgmt.WORD_BITS) | (req.count == 0)
                             | (req.count > mgmt.MAX_BURST_WORDS))):
            m.d.comb += status.eq(St.BAD_LENGTH)
        with m.Elif((req.addr[:2] != 0) | (end > (1 << 32))):
            m.d.comb += status.eq(St.BAD_ADDRESS)
        with m.Elif(r_len != _HDR + 4 * data_words):
            m.d.comb += status.eq(St.BAD_LENGTH)

        # ---- Reading the request from the frame in block RAM, a byte a cycle (a byte arrives
        # the cycle after it is asked for): data word ``fk``, or (``fingerprinting``) byte ``fn``
        # of the datagram for its CRC-32.
        base = Mux(r6, _U6 + _HDR, _U4 + _HDR)
        fk = Signal(9)                 # the word
        fb = Signal(3)                 # bytes asked for so far
        fword = Signal(32)
        fingerprinting = Signal()
        fn = Signal(range(mgmt.MAX_PACKET + 2))
        lane = Signal(range(L))
        at = Signal(range(depth * L + 4 * _MAX_WORDS + _U6))
        m.d.comb += [at.eq(Mux(fingerprinting, Mux(r6, _U6, _U4) + fn, base + Cat(fb[:2], fk))),
                     fr.addr.eq(at // L)]
        m.d.sync += lane.eq(at % L)
        byte_in = fr.data.word_select(lane, 8)

        # ---- Clients: for each, a block of words in block RAM: its address, port and IP
        # version (the key), its last request's sequence number and CRC, when it was last served
        # (the one served longest ago makes way), the reply's status and its data's sum. Their
        # words are compared with the request's one a cycle (SCAN), where a comparator per
        # client in flip-flops was the server's largest part.
        K_WORDS, W_SEQ, W_CRC, W_USED, W_STATUS, W_SUM = 5, 5, 6, 7, 8, 9
        C_WORDS = 10
        BLOCK_BITS = 4                 # a client's block: 1 << BLOCK_BITS words, C_WORDS used
        m.submodules.clients = clients = Memory(shape=32, depth=NC << BLOCK_BITS, init=[])
        cw, cr = clients.write_port(), clients.read_port()
        cvalid = Signal(NC)            # the slot holds a client (the RAM has no reset)
        clock = Signal(32)             # requests carried out
        key_words = [r_ip[32 * j:32 * (j + 1)] for j in range(4)] + [Cat(r_port, r6)]
        record_word = Signal(range(C_WORDS))
        client_word = Signal(32)       # word record_word of this request's client block
        scan, scan_w = Signal(range(NC)), Signal(BLOCK_BITS)   # the word read this cycle...
        got_c, got_w = Signal(range(NC)), Signal(BLOCK_BITS)   # ...and the one read last cycle
        got_valid = Signal()
        m.d.comb += cr.addr.eq(Cat(scan_w, scan))
        m.d.sync += [got_c.eq(scan), got_w.eq(scan_w)]
        differs = Signal()             # a key word of client got_c differs from the request's
        key_hit = Signal()
        found = Signal()               # the client has a slot...
        slot = Signal(range(NC))       # ...this one
        same = Signal()                # ...holding this very request
        found_status = Signal(3)       # ...answered with this status
        found_sum = Signal(32)         # ...and data of this sum
        victim = Signal(range(NC))     # a free slot, else the least recently used
        victim_used = Signal(32)
        record_at = Signal(BLOCK_BITS)  # the word RECORD writes

        # Reply data, a block of words per client.
        m.submodules.replies = replies = Memory(shape=32, depth=NC * _MAX_WORDS, init=[])
        rw, rr = replies.write_port(), replies.read_port()
        # Register descriptors.
        m.submodules.rom = rom = Memory(shape=DESCRIPTOR_BITS, depth=len(self._rom),
                                        init=self._rom)
        dr = rom.read_port()

        # ---- Serving.
        k = Signal(9)                  # the word being carried out
        cur = Signal(range(NC))        # the client's slot
        out_status = Signal(3)
        out_data = Signal()            # the reply carries data words
        dsum = Signal(32)              # their 16-bit words' sum
        with m.Switch(record_word):
            for w, value in enumerate([*key_words, req.seq, r_crc, clock + 1, out_status,
                                       dsum]):
                with m.Case(w):
                    m.d.comb += client_word.eq(value)
        waddr = Signal(32)
        m.d.comb += waddr.eq(req.addr + Cat(C(0, 2), k))
        in_range = waddr[self._addr_width:] == 0
        bus_addr = Signal(self._addr_width)   # waddr, as the access takes it
        # On the bus in every state, not only the access's: the bank's address decode then
        # starts from this register alone, and the FSM's state reaches only the strobes.
        m.d.comb += bus.addr.eq(bus_addr)
        desc = dr.data
        m.d.comb += dr.addr.eq(waddr[2:self._addr_width])
        last_bits = Signal(6)          # bits of the last word of a single access
        m.d.comb += last_bits.eq(req.width - 32 * (need - 1))
        reading = (req.opcode == Op.READ) | (req.opcode == Op.READ_BURST)
        fetching = Signal()
        with m.If(fetching & (fb != 5)):
            m.d.sync += fb.eq(fb + 1)
            with m.If(fb != 0):
                m.d.sync += fword.eq(Cat(byte_in, fword[:24]))

        # The reply's headers; the checksums are taken a cycle before the first byte goes out.
        udp_len = Signal(16)
        m.d.comb += udp_len.eq(UDP.length + _HDR + Mux(out_data, Cat(C(0, 2), req.count), 0))
        ip_check = Signal(16)
        udp_check = Signal(16)
        eth_b = header_bytes({"dst": r_mac, "src": self.mac,
                              "ethertype": Mux(r6, ETHERTYPE_IPV6, ETHERTYPE_IPV4)}, ETHERNET)
        mg_b = header_bytes({"magic": mgmt.MAGIC, "version": mgmt.VERSION, "reply": 1,
                             "opcode": req.opcode, "seq": req.seq, "addr": req.addr,
                             "width": req.width, "count": req.count, "status": out_status},
                            mgmt.HEADER)
        ip4_fields = {"version": 4, "ihl": 5, "total_length": IPV4.length + udp_len,
                      "flags": _DF, "ttl": _TTL, "protocol": IPPROTO_UDP, "src": self.ipv4,
                      "dst": r_ip[:32]}
        ip4_b = header_bytes({**ip4_fields, "checksum": ip_check}, IPV4)
        ip6_b = header_bytes({"version": 6, "payload_length": udp_len,
                              "next_header": IPPROTO_UDP, "hop_limit": _TTL, "src": self.ipv6,
                              "dst": r_ip}, IPV6)
        udp_b = header_bytes({"sport": self._port, "dport": r_port, "length": udp_len,
                              "checksum": udp_check}, UDP)
        v4 = Cat(eth_b, ip4_b, udp_b, mg_b)
        v6 = Cat(eth_b, ip6_b, udp_b, mg_b)

        # Their sums, and (with the pseudo-header's protocol and length, and the data) the sums
        # the checksums are made of.
        ip_acc = Signal(20)
        udp_acc = Signal(24)
        reply_ip = fold(ip_acc, "reply_ip")
        udp_total = Signal(33)         # udp_acc with the rest, a cycle before it is folded
        reply_udp = fold(udp_total, "reply_udp")

        # The reply goes out a byte a cycle into beats.
        hlen = Mux(r6, _U6 + _HDR, _U4 + _HDR)
        n = Signal(range(_U6 + _HDR + 4 * _MAX_WORDS + 1))
        total = Signal.like(n)
        adv = Signal()
        ob = Signal(8 * L)
        olane = Signal(range(L))
        ocount = Signal(range(L + 1))
        ovalid = Signal()
        olast = Signal()
        n_next = n + adv
        j_next = Signal(16)
        m.d.comb += [j_next.eq(n_next - hlen), rr.addr.eq(Cat(j_next[2:10], cur))]
        j = Signal(2)
        m.d.comb += j.eq(n - hlen)
        byte = Signal(8)
        hbyte = Signal(8)              # the headers' byte n
        m.d.comb += hbyte.eq(Mux(r6, word_mux(m, v6, n, 8, "v6_byte"), word_mux(m, v4, n, 8, "v4_byte")))
        with m.If(n < hlen):
            m.d.comb += byte.eq(hbyte)
        with m.Else():
            m.d.comb += byte.eq(rr.data.word_select(~j, 8))    # big-endian words
        m.d.comb += [o.valid.eq(ovalid), o.payload.data.eq(ob), o.payload.last.eq(olast),
                     o.payload.keep.eq(keep_mask(m, ocount, L))]
        with m.If(ovalid & o.ready):
            m.d.sync += ovalid.eq(0)
        is_last = n == total - 1
        with m.If(adv):
            with m.If(olane == 0):
                m.d.sync += ob.eq(byte)
            with m.Else():
                m.d.sync += ob.word_select(olane, 8).eq(byte)
            with m.If((olane == L - 1) | is_last):
                m.d.sync += [ovalid.eq(1), olast.eq(is_last), ocount.eq(olane + 1), olane.eq(0)]
            with m.Else():
                m.d.sync += olane.eq(olane + 1)
            m.d.sync += n.eq(n + 1)

        def done(st, data):
            return [out_status.eq(st), out_data.eq(data)]

        half = Signal(16)              # a byte of the headers in its half of a 16-bit word
        half_ip, half_udp = Signal(), Signal()    # ...to be added to ip_acc, udp_acc
        with m.If(half_ip):
            m.d.sync += ip_acc.eq(ip_acc + half)
        with m.If(half_udp):
            m.d.sync += udp_acc.eq(udp_acc + half)
        with m.FSM():
            with m.State("IDLE"):
                with m.If(accept):
                    m.d.sync += busy.eq(1)
                    m.next = "DECODE"
            with m.State("DECODE"):
                m.d.sync += [k.eq(0), fk.eq(need - 1), fb.eq(0)]
                with m.If(drop):
                    m.d.sync += busy.eq(0)
                    m.d.comb += self.dropped.eq(1)
                    m.next = "IDLE"
                with m.Elif(status != St.OK):
                    m.d.sync += done(status, 0)
                    m.d.comb += self.refused.eq(1)
                    m.next = "PREP"
                with m.Else():
                    m.d.sync += [fn.eq(0), r_crc.eq(0xFFFF_FFFF)]
                    m.next = "FINGERPRINT"
            with m.State("FINGERPRINT"):
                # A CRC-32 of the datagram, by which a retransmission is known.
                m.d.comb += fingerprinting.eq(1)
                m.d.sync += fn.eq(fn + 1)
                with m.If(fn != 0):
                    m.d.sync += r_crc.eq(crc32_byte(r_crc, byte_in))
                with m.If(fn == r_len):
                    m.next = "FINGERPRINTED"
            with m.State("FINGERPRINTED"):
                m.d.sync += [scan.eq(0), scan_w.eq(0), got_valid.eq(0), found.eq(0)]
                with m.If(req.opcode == Op.WRITE):
                    m.next = "CHECK_VALUE"
                with m.Else():
                    m.next = "SCAN"
            with m.State("CHECK_VALUE"):
                # A WRITE's value must fit its width: only its last word can have bits above.
                m.d.comb += fetching.eq(1)
                with m.If(fb == 5):
                    with m.If((fword >> last_bits) != 0):
                        m.d.sync += done(St.BAD_VALUE, 0)
                        m.d.comb += self.refused.eq(1)
                        m.next = "PREP"
                    with m.Else():
                        m.next = "SCAN"
            with m.State("SCAN"):
                # Words 0 .. C_WORDS - 1 of each client in turn; each is judged the cycle after
                # it is read, against the request's word of that place.
                with m.If(scan_w == C_WORDS - 1):
                    m.d.sync += [scan_w.eq(0), scan.eq(scan + 1)]
                with m.Else():
                    m.d.sync += scan_w.eq(scan_w + 1)
                m.d.sync += got_valid.eq(1)
                m.d.comb += record_word.eq(got_w)
                word = cr.data
                held = cvalid.bit_select(got_c, 1)   # client got_c's slot holds a client
                with m.If(got_valid):
                    with m.If(got_w == 0):
                        m.d.sync += differs.eq(word != client_word)
                    with m.Elif(got_w < K_WORDS):
                        m.d.sync += differs.eq(differs | (word != client_word))
                    with m.If(got_w == K_WORDS - 1):
                        hit = held & ~differs & (word == client_word)
                        m.d.sync += key_hit.eq(hit)
                        with m.If(hit):
                            m.d.sync += [found.eq(1), slot.eq(got_c), same.eq(1)]
                    with m.If(key_hit & ((got_w == W_SEQ) | (got_w == W_CRC))
                              & (word != client_word)):
                        m.d.sync += same.eq(0)
                    with m.If(key_hit & (got_w == W_STATUS)):
                        m.d.sync += found_status.eq(word)
                    with m.If(key_hit & (got_w == W_SUM)):
                        m.d.sync += found_sum.eq(word)
                    with m.If(got_w == W_USED):
                        used = Mux(held, word, 0)   # a free slot: at 0
                        with m.If((got_c == 0) | (used < victim_used)):
                            m.d.sync += [victim.eq(got_c), victim_used.eq(used)]
                    with m.If((got_c == NC - 1) & (got_w == C_WORDS - 1)):
                        m.next = "LOOKUP"
            with m.State("LOOKUP"):
                m.d.sync += [cur.eq(Mux(found, slot, victim)), k.eq(0), fk.eq(0), fb.eq(0)]
                with m.If(found & same):
                    # answered again: the client is the most recent one now
                    m.d.sync += [*done(found_status, reading & (found_status == St.OK)),
                                 clock.eq(clock + 1), dsum.eq(found_sum)]
                    m.d.comb += [cw.addr.eq(Cat(C(W_USED, BLOCK_BITS), slot)), cw.data.eq(clock + 1),
                                 cw.en.eq(1), self.replayed.eq(1)]
                    m.next = "PREP"
                with m.Else():
                    m.d.sync += [dsum.eq(0), out_status.eq(St.OK), record_at.eq(0)]
                    m.next = "LOOK"
            with m.State("LOOK"):
                # Word k's descriptor arrives next cycle; a write's data word is fetched meanwhile.
                m.d.comb += fetching.eq(writes)
                with m.If(~writes | (fb == 5)):
                    m.next = "CHECK"
            with m.State("CHECK"):
                m.d.sync += bus_addr.eq(waddr)
                exists = in_range & desc[_EXISTS]
                shape_ok = (req.width == 32) | (desc[_K] == 0) & (desc[_WIDTH] == req.width)
                with m.If(~exists):
                    m.d.sync += out_status.eq(St.BAD_ADDRESS)
                    m.next = "RECORD"
                with m.Elif(single & (k == 0) & ~shape_ok):
                    m.d.sync += out_status.eq(St.BAD_LENGTH)
                    m.next = "RECORD"
                with m.Elif(writes & ~desc[_WRITABLE]):
                    m.d.sync += out_status.eq(St.DENIED)
                    m.next = "RECORD"
                with m.Else():
                    m.next = "ACCESS"
            with m.State("ACCESS"):
                # The access a cycle after the checks that allow it, to an address held in a
                # register: from the descriptor ROM's output, or from the word count through
                # the address's adder, into the register bank in one cycle was the boards'
                # core clock's critical path.
                m.d.comb += [bus.w_data.eq(fword), bus.r_stb.eq(reading), bus.w_stb.eq(writes)]
                m.next = "RESULT"
            with m.State("RESULT"):
                word = Signal(32)
                m.d.comb += word.eq(bus.r_data)
                with m.If(single & (k == need - 1)):
                    m.d.comb += word.eq(bus.r_data & ~(Const(0xFFFF_FFFF, 32) << last_bits))
                with m.If(bus.refused == Refusal.ADDRESS):
                    m.d.sync += out_status.eq(St.BAD_ADDRESS)
                    m.next = "RECORD"
                with m.Elif(bus.refused == Refusal.ACCESS):
                    m.d.sync += out_status.eq(St.DENIED)
                    m.next = "RECORD"
                with m.Elif(bus.refused == Refusal.VALUE):
                    m.d.sync += out_status.eq(St.BAD_VALUE)
                    m.next = "RECORD"
                with m.Else():
                    with m.If(reading):
                        m.d.comb += [rw.addr.eq(Cat(k[:8], cur)), rw.data.eq(word),
                                     rw.en.eq(1)]
                        m.d.sync += dsum.eq(dsum + word[:16] + word[16:])
                    m.d.sync += [k.eq(k + 1), fk.eq(k + 1), fb.eq(0)]
                    with m.If(k + 1 == req.count):
                        m.next = "RECORD"
                    with m.Else():
                        m.next = "LOOK"
            with m.State("RECORD"):
                # The client's words, one a cycle.
                m.d.comb += [record_word.eq(record_at), cw.addr.eq(Cat(record_at, cur)),
                             cw.data.eq(client_word), cw.en.eq(1)]
                m.d.sync += record_at.eq(record_at + 1)
                with m.If(record_at == C_WORDS - 1):
                    m.d.sync += [cvalid.bit_select(cur, 1).eq(1), clock.eq(clock + 1),
                                 out_data.eq(reading & (out_status == St.OK))]
                    m.d.comb += self.executed.eq(1)
                    m.next = "PREP"
            with m.State("PREP"):
                m.d.sync += [ip_check.eq(0), udp_check.eq(0), ip_acc.eq(0), udp_acc.eq(0),
                             n.eq(0), total.eq(hlen + Mux(out_data, Cat(C(0, 2), req.count), 0))]
                m.next = "SUM"
            with m.State("SUM"):
                # The checksums: the headers' bytes, their checksums still zero, a byte a cycle,
                # each added the cycle after it is taken (from the header's multiplexer through
                # the adders in one cycle was too deep for the slower boards).
                m.d.sync += [half.eq(Mux(n[0], hbyte, Cat(C(0, 8), hbyte))),
                             half_ip.eq(~r6 & (n >= ip_first) & (n < ip_end)),
                             half_udp.eq(n >= Mux(r6, src6, src4)), n.eq(n + 1)]
                with m.If(n == hlen - 1):
                    m.next = "SUMMED"
            with m.State("SUMMED"):
                m.d.sync += [half_ip.eq(0), half_udp.eq(0)]    # the last byte is added
                m.next = "TOTAL"
            with m.State("TOTAL"):
                # (the sums and the fold in one cycle were the slower boards' critical path)
                m.d.sync += udp_total.eq(udp_acc + IPPROTO_UDP + udp_len + Mux(out_data, dsum, 0))
                m.next = "CHECKSUMS"
            with m.State("CHECKSUMS"):
                check = ~reply_udp
                m.d.sync += [ip_check.eq(~reply_ip),
                             udp_check.eq(Mux(check == 0, 0xFFFF, check)), n.eq(0)]
                m.next = "SEND"
            with m.State("SEND"):
                m.d.comb += adv.eq(~ovalid | o.ready)
                with m.If(adv & is_last):
                    m.d.sync += busy.eq(0)
                    m.next = "IDLE"
        return m
