"""cocotb test of the management port's server on a register bank: scapy-built UDP requests in
(IPv4 and IPv6), and each reply compared field by field with the frame scapy builds from the
reply the protocol (sw/mgmt.py) says it must be; scapy computes the IP and UDP checksums, the
oracle for ours."""

import ipaddress
import random
import struct

import cocotb
from cocotb.triggers import ClockCycles
from scapy.layers.inet import IP, UDP, IPOption_NOP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import ARP, Ether
from scapy.packet import Raw

from mrcnic import mgmt, wire
from mrcnic.mgmt import Opcode, Packet, Status
from mrcnic.regmap import MRCNIC_ID, by_name, by_offset
from mrcnic.verif.packets import assert_frames_equal
from mrcnic.verif.tbkit import params, setup, sink, source
from mrcnic.wire import ETHERNET

MAC, IPV4, IPV6 = "02:4d:52:43:00:01", "192.168.7.2", "fd00:7::2"
HOST_MAC, HOST_IPV4, HOST_IPV6 = "02:00:00:00:aa:01", "192.168.7.1", "fd00:7::1"
PORT = mgmt.DEFAULT_PORT
ETH_IP_CHECKSUM = ETHERNET.length + wire.IPV4.bit_offset("checksum") // 8


def raw_request(opcode, seq, addr=0, width=32, count=1, data=(), version=mgmt.VERSION,
                magic=mgmt.MAGIC, reply=0) -> bytes:
    """A datagram as a client might send it, rules broken or not."""
    return mgmt.HEADER.pack(magic=magic, version=version, reply=reply, opcode=opcode, seq=seq,
                            addr=addr, width=width, count=count) + b"".join(
        struct.pack(">I", w) for w in data)


class Client:
    """A host on the board's link: builds request frames, and the replies they must get."""

    def __init__(self, dut, src, snk, v6=False, sport=40000, mac=HOST_MAC):
        self.dut, self.src, self.snk = dut, src, snk
        self.v6, self.sport, self.mac = v6, sport, mac
        self.ip = HOST_IPV6 if v6 else HOST_IPV4
        self.seq = random.Random(sport).getrandbits(32)

    def frame(self, payload: bytes, **ip) -> bytes:
        net = (IPv6(src=self.ip, dst=IPV6, **ip) if self.v6
               else IP(src=self.ip, dst=IPV4, **ip))
        return bytes(Ether(src=self.mac, dst=MAC) / net / UDP(sport=self.sport, dport=PORT)
                     / Raw(payload))

    def reply_frame(self, payload: bytes) -> bytes:
        net = (IPv6(src=IPV6, dst=self.ip, hlim=64) if self.v6
               else IP(src=IPV4, dst=self.ip, ttl=64, flags="DF", id=0))
        return bytes(Ether(src=MAC, dst=self.mac) / net / UDP(sport=PORT, dport=self.sport)
                     / Raw(payload))

    def next(self, opcode, addr, width=32, count=1, data=()) -> Packet:
        self.seq = (self.seq + 1) & 0xFFFF_FFFF
        return Packet(opcode, self.seq, addr, width, count, data=tuple(data))

    async def send(self, payload: bytes, **ip):
        await self.src.send(self.frame(payload, **ip))

    async def reply(self, what) -> bytes:
        return bytes((await self.snk.recv()).tdata)

    async def expect(self, request: bytes, status=Status.OK, data=(), what="", resend=True):
        """Sends ``request`` and checks its reply: the request's header echoed with ``status``
        and ``data``."""
        if resend:
            await self.send(request)
        h = mgmt.HEADER.unpack(request)
        want = mgmt.HEADER.pack(magic=mgmt.MAGIC, version=mgmt.VERSION, reply=1,
                                opcode=h["opcode"], seq=h["seq"], addr=h["addr"],
                                width=h["width"], count=h["count"], status=status) + b"".join(
            struct.pack(">I", w) for w in data)
        got = await self.reply(what)
        assert_frames_equal(self.reply_frame(want), got, what or f"reply to {h}")
        return mgmt.decode(bytes(Ether(got)[UDP].payload))

    async def ask(self, pkt: Packet) -> Packet:
        """Sends ``pkt`` and returns its reply, which must be the reply to it with status OK, in
        a frame exactly as scapy builds it."""
        await self.send(pkt.encode())
        raw = await self.reply(pkt)
        reply = mgmt.decode(bytes(Ether(raw)[UDP].payload))
        assert (reply.status, reply.seq, reply.reply) == (Status.OK, pkt.seq, True), reply
        assert_frames_equal(self.reply_frame(reply.encode()), raw, f"reply to {pkt}")
        return reply

    async def read(self, path) -> int:
        r = by_name(path)
        return (await self.ask(self.next(Opcode.READ, r.offset, r.width, r.words))).value

    async def write(self, path, value, status=Status.OK):
        r = by_name(path)
        count = r.words
        pkt = self.next(Opcode.WRITE, r.offset, r.width, count,
                        [(value >> (32 * k)) & 0xFFFF_FFFF for k in range(count)])
        await self.expect(pkt.encode(), status, what=f"write {path} = {value:#x}")


async def start(dut, v6=False, backpressure=0.0, rng=None):
    await setup(dut)
    dut.mac.value = int(MAC.replace(":", ""), 16)
    dut.ipv4.value = int(ipaddress.IPv4Address(IPV4))
    dut.ipv6.value = int(ipaddress.IPv6Address(IPV6))
    for name in ("qp_write_tready",):
        getattr(dut, name).value = 0
    src = source(dut, "i")
    snk = sink(dut, "o", rng, backpressure)
    return Client(dut, src, snk, v6)


async def quiet(dut, snk, cycles=400):
    """Nothing comes out for a while."""
    await ClockCycles(dut.clk, cycles)
    assert snk.empty(), f"an unexpected reply: {Ether(bytes(snk.recv_nowait().tdata)).summary()}"


def counters(dut) -> dict:
    return {n: int(getattr(dut, n).value)
            for n in ("executed", "replayed", "refused", "dropped", "missed")}


@cocotb.test()
async def requests_are_carried_out_and_answered(dut):
    """Reads and writes of every kind, over IPv4 and over IPv6, each reply exact."""
    rng = random.Random(params().get("seed", 1))
    c4 = await start(dut, rng=rng, backpressure=0.3)
    c6 = Client(dut, c4.src, c4.snk, v6=True, sport=40006)
    for c in (c4, c6):
        assert await c.read("global.id") == MRCNIC_ID
        value = rng.getrandbits(32)
        await c.write("global.scratch", value)
        assert await c.read("global.scratch") == value
        assert int(dut.global_scratch.value) == value
        mac = rng.getrandbits(48)                       # two words, one access
        await c.write("tx.src_mac", mac)
        assert await c.read("tx.src_mac") == mac
        ip = rng.getrandbits(128)                       # four words
        await c.write("tx.src_ip", ip)
        assert await c.read("tx.src_ip") == ip
        assert int(dut.tx_src_ip.value) == ip
        entry = rng.getrandbits(96)                     # a wide register the gateware drives
        dut.cq_entry.value = entry
        await ClockCycles(dut.clk, 1)
        assert await c.read("cq.entry") == entry
        r = by_name("cq.entry")                         # one word of it at a time
        pkt = c.next(Opcode.READ, r.offset + 4)
        await c.expect(pkt.encode(), data=[entry >> 32 & 0xFFFF_FFFF], what="word 1 alone")
        # Bursts: the memory window's words, the most a burst may carry, and back.
        words = [rng.getrandbits(32) for _ in range(mgmt.MAX_BURST_WORDS)]
        base = by_name("store.data").offset
        at = base + 4 * rng.randrange(1024 - len(words))
        pkt = c.next(Opcode.WRITE_BURST, at, 32, len(words), words)
        await c.expect(pkt.encode(), what="a burst of 256 words")
        pkt = c.next(Opcode.READ_BURST, at, 32, len(words))
        await c.expect(pkt.encode(), data=words, what="reading them back")
        # A burst across registers reads each word as a one-word read would.
        burst = (await c.ask(c.next(Opcode.READ_BURST, 0, 32, 8))).data
        singles = [(await c.ask(c.next(Opcode.READ, 4 * k))).value for k in range(8)]
        assert burst == tuple(singles) and burst[0] == MRCNIC_ID and burst[4] == value, burst
    n = counters(dut)
    assert n == {"executed": n["executed"], "replayed": 0, "refused": 0, "dropped": 0,
                 "missed": 0}, n


@cocotb.test()
async def bad_requests_get_the_status_that_names_them(dut):
    """Each rule broken, in the order the protocol's decoder checks them; a burst stops at the
    first word refused."""
    c = await start(dut)
    scratch, mtu = by_name("global.scratch"), by_name("qp.mtu")
    s = c.seq
    cases = [
        (raw_request(Opcode.READ, s + 1, 0xFFC), Status.BAD_ADDRESS, "nothing there", True),
        (raw_request(Opcode.READ, s + 2, 0x2_0000), Status.BAD_ADDRESS, "past the CSR space", True),
        (raw_request(Opcode.READ, s + 3, scratch.offset + 2), Status.BAD_ADDRESS, "unaligned", False),
        (raw_request(Opcode.READ_BURST, s + 4, 0xFFFF_FFF8, 32, 3), Status.BAD_ADDRESS,
         "past 2^32", False),
        (raw_request(Opcode.READ, s + 5, scratch.offset, 16), Status.BAD_LENGTH,
         "16 bits of a 32-bit register", True),
        (raw_request(Opcode.READ, s + 6, by_name("tx.src_mac").offset + 4, 48, 2),
         Status.BAD_LENGTH, "a wide register from its second word", True),
        (raw_request(Opcode.READ, s + 7, scratch.offset, 64, 1), Status.BAD_LENGTH,
         "count disagrees with width", False),
        (raw_request(Opcode.READ, s + 8, scratch.offset, 257, 9), Status.BAD_LENGTH,
         "wider than the protocol", False),
        (raw_request(Opcode.READ_BURST, s + 9, scratch.offset, 16, 1), Status.BAD_LENGTH,
         "a burst of 16-bit words", False),
        (raw_request(Opcode.READ_BURST, s + 10, scratch.offset, 32, 0), Status.BAD_LENGTH,
         "an empty burst", False),
        (raw_request(Opcode.READ_BURST, s + 11, scratch.offset, 32, 257), Status.BAD_LENGTH,
         "a burst too long", False),
        (raw_request(Opcode.WRITE, s + 12, scratch.offset, 32, 1, [1, 2]), Status.BAD_LENGTH,
         "a data word too many", False),
        (raw_request(Opcode.WRITE, s + 13, scratch.offset, 32, 1), Status.BAD_LENGTH,
         "a write without its data", False),
        (raw_request(Opcode.READ, s + 14, scratch.offset, data=[0]), Status.BAD_LENGTH,
         "a read with data", False),
        (raw_request(9, s + 15, scratch.offset), Status.BAD_OPCODE, "opcode 9", False),
        (raw_request(Opcode.READ, s + 16, scratch.offset, version=2), Status.BAD_VERSION,
         "version 2", False),
        (raw_request(Opcode.WRITE, s + 17, by_name("global.id").offset, data=[1]),
         Status.DENIED, "a CONST register", True),
        (raw_request(Opcode.WRITE, s + 18, by_name("global.bus_errors").offset, data=[1]),
         Status.DENIED, "a RO register", True),
        (raw_request(Opcode.WRITE, s + 19, mtu.offset, 3, 1, [5]), Status.BAD_VALUE,
         "above the register's limit", True),
        (raw_request(Opcode.WRITE, s + 20, by_name("global.control").offset, 1, 1, [2]),
         Status.BAD_VALUE, "wider than its width", False),
        (raw_request(Opcode.WRITE, s + 21, by_name("tx.src_mac").offset, 48, 2,
                     [0, 0x1_0000]), Status.BAD_VALUE, "a wide value too wide", False),
        (raw_request(Opcode.WRITE, s + 22, by_name("qp.write").offset, 16, 1, [4]),
         Status.BAD_VALUE, "above the build's limit", True),
        (raw_request(Opcode.WRITE_BURST, s + 23, by_name("global.control").offset, 32, 1, [2]),
         Status.BAD_VALUE, "a burst word too wide for its register", True),
    ]
    # (request, the status it gets, what it is, whether it is carried out: the rules the
    # decoder checks refuse a request before it is)
    for request, status, what, _ in cases:
        await c.expect(request, status, what=what)
    # A burst stops at the first word refused, the words before it written.
    before = await c.read("global.control")
    burst = c.next(Opcode.WRITE_BURST, scratch.offset, 32, 3, [0x1234, 1, 7])
    await c.expect(burst.encode(), Status.DENIED, what="a burst into a RO register")
    assert await c.read("global.scratch") == 0x1234
    assert before == 0 and await c.read("global.control") == 1
    assert by_offset(0xFF8) is None
    burst = c.next(Opcode.READ_BURST, 0xFF0, 32, 4)
    await c.expect(burst.encode(), Status.BAD_ADDRESS, what="a read burst into nothing")
    n = counters(dut)
    assert n["refused"] == sum(not done for *_, done in cases), n
    assert n["executed"] == sum(done for *_, done in cases) + 5, n
    assert n["dropped"] == n["missed"] == n["replayed"] == 0, n


@cocotb.test()
async def a_retransmission_is_answered_from_the_reply_it_had(dut):
    """The same request again is not carried out again: a command written twice would be
    refused while pending, and a read would see the register's new value."""
    c = await start(dut)
    write = c.next(Opcode.WRITE, by_name("qp.write").offset, 16, 1, [2]).encode()
    await c.expect(write, what="a command")
    await c.expect(write, what="its retransmission, answered OK from the first reply")
    assert int(dut.qp_write_tvalid.value) == 1
    again = c.next(Opcode.WRITE, by_name("qp.write").offset, 16, 1, [2]).encode()
    await c.expect(again, Status.DENIED, what="a new request: carried out, and refused")
    n = counters(dut)
    assert (n["executed"], n["replayed"]) == (2, 1), n

    # A read: the retransmission gets the value the first reply had.
    dut.rel_inflight.value = 11
    await ClockCycles(dut.clk, 1)
    r = by_name("rel.inflight")
    read = c.next(Opcode.READ, r.offset).encode()
    await c.expect(read, data=[11], what="a read")
    dut.rel_inflight.value = 12
    await ClockCycles(dut.clk, 1)
    await c.expect(read, data=[11], what="its retransmission")
    # The same sequence number with other bytes is another request.
    h = mgmt.HEADER.unpack(read)
    other = raw_request(Opcode.READ, h["seq"], by_name("ep.answers").offset)
    dut.ep_answers.value = 5
    await c.expect(other, data=[5], what="same sequence number, another address")

    # Clients are told apart by address and port; the one served longest ago makes way, and a
    # retransmission answered counts as served.
    others = [Client(dut, c.src, c.snk, v6=k % 2 == 1, sport=41000 + k) for k in range(4)]
    dut.qp_write_tready.value = 1
    await ClockCycles(dut.clk, 2)
    dut.qp_write_tready.value = 0
    first = c.next(Opcode.WRITE, by_name("qp.write").offset, 16, 1, [1]).encode()

    async def read_by(o, what):
        await o.expect(o.next(Opcode.READ, r.offset).encode(), data=[12], what=what)
    await c.expect(first, what="a command from the first client")
    for o in others[:3]:
        await read_by(o, "three more clients")
    await c.expect(first, what="the first client's retransmission, still remembered")
    await read_by(others[3], "a fifth client: the second makes way, not the first")
    await c.expect(first, what="the first client's retransmission, remembered still")
    for o in others:
        await read_by(o, "four new requests from the others")
    await c.expect(first, Status.DENIED, what="forgotten: carried out again, and refused")
    n = counters(dut)
    assert n["replayed"] == 4 and n["refused"] == n["dropped"] == n["missed"] == 0, n


@cocotb.test()
async def frames_that_are_not_requests_are_dropped_or_ignored(dut):
    """Frames for the server that are not well-formed requests are dropped and counted; frames
    for others are not its business; a request that comes while one is served is missed, and
    its retransmission answered."""
    c = await start(dut)
    scratch = by_name("global.scratch").offset
    good = c.next(Opcode.READ, scratch).encode()

    def udp_frame(payload, **udp):
        return bytes(Ether(src=HOST_MAC, dst=MAC) / IP(src=HOST_IPV4, dst=IPV4)
                     / UDP(sport=40000, dport=PORT, **udp) / Raw(payload))

    bad_sum = bytearray(udp_frame(good))
    bad_sum[-1] ^= 1                                   # the UDP checksum no longer holds
    bad_ip = bytearray(udp_frame(good))
    bad_ip[ETH_IP_CHECKSUM] ^= 0x40
    bad6 = bytearray(bytes(Ether(src=HOST_MAC, dst=MAC) / IPv6(src=HOST_IPV6, dst=IPV6)
                           / UDP(sport=40000, dport=PORT) / Raw(good)))
    bad6[-2] ^= 0x10
    dropped = [
        (bytes(bad_sum), "a bad UDP checksum"),
        (bytes(bad_ip), "a bad IPv4 header checksum"),
        (bytes(bad6), "a bad UDP checksum over IPv6"),
        (c.frame(good, options=[IPOption_NOP()] * 4), "IPv4 options"),
        (c.frame(good, flags="MF"), "a fragment"),
        (udp_frame(good[:19]), "shorter than the header"),
        (c.frame(raw_request(Opcode.READ, 1, scratch, magic=0x4D48)), "another magic"),
        (c.frame(raw_request(Opcode.READ, 2, scratch, reply=1)), "a reply"),
        (c.frame(raw_request(Opcode.READ, 3, scratch, reply=1, version=2)),
         "a reply of another version"),
        (udp_frame(b"\x00" * 1100), "longer than the largest request"),
    ]
    for k, (frame, what) in enumerate(dropped):
        await c.src.send(frame)
        await quiet(dut, c.snk, 200)
        assert counters(dut)["dropped"] == k + 1, f"{what}: not dropped"
    ignored = [
        bytes(Ether(src=HOST_MAC, dst="02:4d:52:43:00:02") / IP(src=HOST_IPV4, dst=IPV4)
              / UDP(sport=40000, dport=PORT) / Raw(good)),
        bytes(Ether(src=HOST_MAC, dst=MAC) / IP(src=HOST_IPV4, dst="192.168.7.3")
              / UDP(sport=40000, dport=PORT) / Raw(good)),
        bytes(Ether(src=HOST_MAC, dst=MAC) / IP(src=HOST_IPV4, dst=IPV4)
              / UDP(sport=40000, dport=PORT + 1) / Raw(good)),
        bytes(Ether(src=HOST_MAC, dst=MAC) / IPv6(src=HOST_IPV6, dst="fd00:7::3")
              / UDP(sport=40000, dport=PORT) / Raw(good)),
        bytes(Ether(src=HOST_MAC, dst="ff:ff:ff:ff:ff:ff")
              / ARP(op=1, hwsrc=HOST_MAC, psrc=HOST_IPV4, pdst="192.168.7.9")),
    ]
    for frame in ignored:
        await c.src.send(frame)
    await quiet(dut, c.snk)
    n = counters(dut)
    assert n == {"executed": 0, "replayed": 0, "refused": 0, "dropped": len(dropped),
                 "missed": 0}, n

    # Two requests back to back: the second comes while the first is served.
    second = c.next(Opcode.READ, by_name("global.id").offset).encode()
    await c.send(good)
    await c.send(second)
    await c.expect(good, data=[0], what="the first", resend=False)
    await quiet(dut, c.snk)
    assert counters(dut)["missed"] == 1
    await c.expect(second, data=[MRCNIC_ID], what="the second, sent again")
