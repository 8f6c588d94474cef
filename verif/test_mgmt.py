"""The board management protocol (mrcnic.mgmt): packets, the server's logic, and a client and a
server talking over loopback UDP, replies lost and duplicated on the way."""

import logging
import select
import socket
import subprocess
import sys
import threading
import time

import pytest
from scapy.layers.inet import IP, UDP

from mrcnic import layers, mgmt, regmap
from mrcnic.mgmt import (
    HEADER,
    AccessError,
    MalformedPacket,
    MgmtClient,
    MgmtServer,
    Opcode,
    Packet,
    Status,
    StatusError,
    UdpEndpoint,
    Unreachable,
    decode,
)
from mrcnic.regclient import RegisterClient


class Bus:
    """A backend like the NIC's CSR bus: the registers of sw/regmap.py in 32-bit words, any
    word readable alone, a whole register at its own width; and a memory window of plain
    words. Counts what it executes."""

    MEMORY = range(0x1_0000, 0x1_0000 + 4 * 64, 4)

    def __init__(self):
        self.words = {}
        for r in regmap.REGISTERS:
            for k in range(r.words):
                self.words[r.offset + 4 * k] = (r.reset >> (32 * k)) & 0xFFFF_FFFF
        self.words.update(dict.fromkeys(self.MEMORY, 0))
        self.reads, self.writes = [], []

    def _register(self, addr, width):
        if addr in self.MEMORY:
            if width != 32:
                raise AccessError(Status.BAD_LENGTH, "memory is 32-bit words")
            return None
        reg = regmap.by_offset(addr)
        if reg is None:
            raise KeyError(addr)
        if width != 32 and (addr, width) != (reg.offset, reg.width):
            raise AccessError(Status.BAD_LENGTH, f"{reg.path} is {reg.width} bits")
        return reg

    def read(self, addr, width):
        self.reads.append((addr, width))
        self._register(addr, width)
        return sum(self.words[addr + 4 * k] << (32 * k) for k in range(-(-width // 32)))

    def write(self, addr, width, value):
        self.writes.append((addr, width, value))
        reg = self._register(addr, width)
        if reg is not None and reg.access not in (regmap.Access.RW, regmap.Access.CMD):
            raise AccessError(Status.DENIED, f"{reg.path} is {reg.access.value}")
        if reg is not None and width == reg.width and value > reg.max_value:
            raise AccessError(Status.BAD_VALUE)
        for k in range(-(-width // 32)):
            self.words[addr + 4 * k] = (value >> (32 * k)) & 0xFFFF_FFFF


def raw(data=(), **fields):
    """A datagram from header fields (magic and version right unless given) and data words."""
    fields = {"magic": mgmt.MAGIC, "version": mgmt.VERSION, **fields}
    return HEADER.pack(**fields) + b"".join(w.to_bytes(4, "big") for w in data)


SCRATCH = regmap.by_name("global.scratch").offset
SRC_IP = regmap.by_name("tx.src_ip")
MR_VA = regmap.by_name("qp.mr_va")


# --- packets -----------------------------------------------------------------------------------

def test_the_header_is_20_bytes_big_endian():
    pkt = Packet(Opcode.WRITE, 0x0102_0304, 0x308, 48, 2, data=(0xAABB_CCDD, 0x1122))
    assert pkt.encode() == bytes.fromhex("4d47 01 02 01020304 00000308 0030 0002 00 000000"
                                         "aabbccdd 00001122")
    reply = Packet(Opcode.READ, 7, 0x10, reply=True, status=Status.BAD_ADDRESS)
    assert reply.encode() == bytes.fromhex("4d47 01 81 00000007 00000010 0020 0001 01 000000")
    assert HEADER.length == 20 and mgmt.MAX_PACKET == 20 + 4 * 256


@pytest.mark.parametrize("pkt", [
    Packet(Opcode.READ, 0, 0x000),
    Packet(Opcode.READ, 0xFFFF_FFFF, SRC_IP.offset, 128, 4, reply=True, data=(1, 2, 3, 0xFFFF_FFFF)),
    Packet(Opcode.WRITE, 5, MR_VA.offset, 64, 2, data=(0x8000_0000, 0x1)),
    Packet(Opcode.WRITE, 6, 0x510, 256, 8, data=tuple(range(8))),
    Packet(Opcode.WRITE, 6, 0x510, 256, 8, reply=True),
    Packet(Opcode.READ_BURST, 9, 0x1_0000, 32, 256, reply=True, data=tuple(range(256))),
    Packet(Opcode.WRITE_BURST, 10, 0xFFFF_FFF8, 32, 2, data=(7, 8)),
    Packet(0x7F, 11, 3, 0, 0, reply=True, status=Status.BAD_OPCODE),
    Packet(Opcode.READ, 12, 0x0, 0, 9, reply=True, status=Status.BAD_LENGTH),
    Packet(Opcode.READ, 13, 0x4, reply=True, status=Status.FAILED),
], ids=lambda p: f"{getattr(p.opcode, 'name', p.opcode)}-{'reply' if p.reply else 'request'}"
                 f"-{p.status.name}")
def test_encode_decode_round_trip(pkt):
    data = pkt.encode()
    assert len(data) == HEADER.length + 4 * len(pkt.data)
    assert decode(data) == pkt


# (datagram, the status a server answers with (None: dropped), what the error says)
MALFORMED = [
    (b"MG\x01", None, "3 bytes, shorter than the 20-byte header"),
    (raw(magic=0x4D48, opcode=1), None, "magic 0x4d48, not 0x4d47"),
    (raw(version=2, opcode=1, width=32, count=1), Status.BAD_VERSION, "version 2"),
    (raw(opcode=9, width=32, count=1), Status.BAD_OPCODE, "opcode 9 is none of 1 READ"),
    (raw(opcode=0, width=32, count=1), Status.BAD_OPCODE, "opcode 0"),
    (raw(opcode=1, width=32, count=1) + b"\0" * 4, Status.BAD_LENGTH,
     "24 bytes, but a request READ of 1 words is 20"),
    (raw(opcode=2, width=32, count=1), Status.BAD_LENGTH, "20 bytes, but a request WRITE"),
    (raw(opcode=2, width=32, count=1, data=(1,))[:-1], Status.BAD_LENGTH, "23 bytes"),
    (raw(opcode=1, width=0, count=0), Status.BAD_LENGTH, "READ width 0, not 1..256 bits"),
    (raw(opcode=1, width=257, count=9), Status.BAD_LENGTH, "READ width 257"),
    (raw(opcode=1, width=48, count=1), Status.BAD_LENGTH, "READ of 48 bits has count 1, not 2"),
    (raw(opcode=3, width=16, count=1), Status.BAD_LENGTH, "READ_BURST width 16, not 32"),
    (raw(opcode=3, width=32, count=0), Status.BAD_LENGTH, "READ_BURST of 0 words, not 1..256"),
    (raw(opcode=4, width=32, count=257, data=(0,) * 257), Status.BAD_LENGTH, "WRITE_BURST of 257"),
    (raw(opcode=1, width=32, count=1, addr=0x12), Status.BAD_ADDRESS,
     "address 0x12 is not a multiple of 4"),
    (raw(opcode=3, width=32, count=3, addr=0xFFFF_FFF8), Status.BAD_ADDRESS,
     "3 words from 0xfffffff8 run past the end"),
    (raw(opcode=2, width=8, count=1, data=(0x100,)), Status.BAD_VALUE,
     "value 0x100 has bits set above its 8-bit width"),
    (raw(opcode=1, reply=1, status=99, width=32, count=1), None, "reply status 99 is not one of"),
    (raw(opcode=1, reply=1, width=32, count=1), Status.BAD_LENGTH,
     "20 bytes, but a reply READ of 1 words is 24"),
]


@pytest.mark.parametrize("datagram,status,fragment", MALFORMED,
                         ids=[f"{i}-{m[1].name if m[1] else 'drop'}" for i, m in enumerate(MALFORMED)])
def test_malformed_packets_are_refused_with_a_sentence(datagram, status, fragment):
    with pytest.raises(MalformedPacket) as info:
        decode(datagram)
    assert info.value.status is status and fragment in str(info.value), str(info.value)


@pytest.mark.parametrize("pkt,fragment", [
    (Packet(Opcode.READ, 1, 0x2), "not a multiple of 4"),
    (Packet(Opcode.WRITE, 1, 0x0, 16, 1, data=(0x1_0000,)), "above its 16-bit width"),
    (Packet(Opcode.WRITE, 1, 0x0, 32, 1), "0 data words, but it needs 1"),
    (Packet(Opcode.WRITE, 1, 0x0, 32, 1, data=(1 << 32,)), "is not 32 bits"),
    (Packet(Opcode.READ, 1 << 32, 0x0), "seq"),
    (Packet(9, 1, 0x0), "opcode 9"),
])
def test_encode_refuses_what_decode_would(pkt, fragment):
    with pytest.raises(MalformedPacket) as info:
        pkt.encode()
    assert fragment in str(info.value)


def test_the_scapy_layer_dissects_requests_and_replies():
    req = Packet(Opcode.WRITE, 0x1234_5678, SRC_IP.offset, 128, 4, data=(1, 2, 3, 4)).encode()
    pkt = IP(bytes(IP() / UDP(sport=40000, dport=mgmt.DEFAULT_PORT) / req))
    m = pkt[layers.Mgmt]
    assert (m.opcode, m.reply, m.seq, m.addr, m.width, m.count) == (2, 0, 0x1234_5678, 0x308, 128, 4)
    assert m.data == [1, 2, 3, 4] and not m.payload
    rep = Packet(Opcode.READ, 7, SCRATCH, reply=True, data=(0xDEAD,)).encode()
    m = IP(bytes(IP() / UDP(sport=mgmt.DEFAULT_PORT, dport=40000) / rep))[layers.Mgmt]
    assert (m.reply, m.status, m.data) == (1, Status.OK, [0xDEAD])
    assert bytes(layers.Mgmt(opcode=Opcode.READ, seq=7, addr=SCRATCH, width=32, count=1,
                             reply=1, data=[0xDEAD])) == rep


# --- the server's logic ------------------------------------------------------------------------

def _write(seq, addr, value, width=32):
    n = -(-width // 32)
    return Packet(Opcode.WRITE, seq, addr, width, n,
                  data=tuple((value >> (32 * k)) & 0xFFFF_FFFF for k in range(n))).encode()


def test_the_server_executes_reads_and_writes():
    bus = Bus()
    server = MgmtServer(bus)
    reply = decode(server.handle(_write(1, SRC_IP.offset, 0xFD00 << 112 | 1, 128), "c"))
    assert (reply.reply, reply.seq, reply.status, reply.data) == (True, 1, Status.OK, ())
    reply = decode(server.handle(Packet(Opcode.READ, 2, SRC_IP.offset, 128, 4).encode(), "c"))
    assert reply.value == 0xFD00 << 112 | 1 and reply.data == (1, 0, 0, 0xFD00_0000)
    burst = Packet(Opcode.WRITE_BURST, 3, 0x1_0000, 32, 3, data=(7, 8, 9)).encode()
    assert decode(server.handle(burst, "c")).status == Status.OK
    reply = decode(server.handle(Packet(Opcode.READ_BURST, 4, 0x1_0000, 32, 4).encode(), "c"))
    assert reply.data == (7, 8, 9, 0)
    assert server.executed == 4 and bus.writes[-3:] == [(0x1_0000, 32, 7), (0x1_0004, 32, 8),
                                                        (0x1_0008, 32, 9)]


def test_a_retransmission_is_answered_from_the_remembered_reply():
    bus = Bus()
    server = MgmtServer(bus)
    request = _write(41, SCRATCH, 0x55)
    first = server.handle(request, ("10.0.0.1", 5000))
    assert server.handle(request, ("10.0.0.1", 5000)) == first
    assert bus.writes == [(SCRATCH, 32, 0x55)] and (server.executed, server.replayed) == (1, 1)
    # the same bytes from another client are its own request
    assert server.handle(request, ("10.0.0.2", 5000)) == first and len(bus.writes) == 2
    # the same number with other bytes is not a retransmission of it
    server.handle(_write(41, SCRATCH, 0x66), ("10.0.0.1", 5000))
    assert bus.writes[-1] == (SCRATCH, 32, 0x66) and server.replayed == 1
    # only the last request is remembered: an older one again is executed again
    server.handle(request, ("10.0.0.1", 5000))
    assert bus.writes[-1] == (SCRATCH, 32, 0x55) and len(bus.writes) == 4


def test_the_server_remembers_its_most_recent_clients():
    bus = Bus()
    server = MgmtServer(bus, clients=2)
    requests = {c: _write(c, SCRATCH, c) for c in (1, 2, 3)}
    for c in (1, 2, 3):
        server.handle(requests[c], c)
    server.handle(requests[3], 3)
    server.handle(requests[2], 2)
    assert server.replayed == 2 and len(bus.writes) == 3
    server.handle(requests[1], 1)   # forgotten: executed again
    assert server.replayed == 2 and len(bus.writes) == 4


def test_the_server_answers_a_broken_request_with_its_status_and_drops_the_rest():
    server = MgmtServer(Bus())
    reply = decode(server.handle(raw(opcode=9, seq=77, addr=0x40, width=32, count=1)))
    assert (reply.reply, reply.seq, reply.opcode, reply.addr, reply.status) == (
        True, 77, 9, 0x40, Status.BAD_OPCODE)
    reply = decode(server.handle(raw(opcode=1, seq=78, addr=0x41, width=32, count=1)))
    assert (reply.seq, reply.status) == (78, Status.BAD_ADDRESS)
    reply = server.handle(raw(version=3, opcode=1, seq=79, width=32, count=1))
    assert reply[2] == mgmt.VERSION and decode(reply).status == Status.BAD_VERSION
    for datagram in (b"", b"hello", raw(magic=0x1234, opcode=1, width=32, count=1),
                     Packet(Opcode.READ, 80, 0, reply=True, data=(0,)).encode()):
        assert server.handle(datagram) is None
    assert (server.refused, server.dropped, server.executed) == (3, 4, 0)


class Broken:
    def __init__(self, error=None, value=0):
        self.error, self.value = error, value

    def read(self, addr, width):
        if self.error:
            raise self.error
        return self.value

    def write(self, addr, width, value):
        raise self.error


@pytest.mark.parametrize("backend,status", [
    (Broken(AccessError(Status.DENIED)), Status.DENIED),
    (Broken(KeyError(0x40)), Status.BAD_ADDRESS),
    (Broken(RuntimeError("bus hung")), Status.FAILED),
    (Broken(value=1 << 32), Status.FAILED),      # a value wider than asked for
    (Broken(value=-1), Status.FAILED),
])
def test_a_backend_refusal_or_fault_is_the_replys_status(backend, status, caplog):
    server = MgmtServer(backend)
    with caplog.at_level(logging.ERROR, logger="mrcnic.mgmt"):
        reply = decode(server.handle(Packet(Opcode.READ, 1, 0x40).encode()))
    assert reply.status == status and reply.data == ()
    assert ("failed" in caplog.text) == (status == Status.FAILED)


def test_a_burst_stops_at_the_first_word_refused():
    bus = Bus()
    server = MgmtServer(bus)
    last = Bus.MEMORY[-1]
    reply = decode(server.handle(Packet(Opcode.WRITE_BURST, 1, last - 4, 32, 3,
                                        data=(1, 2, 3)).encode()))
    assert reply.status == Status.BAD_ADDRESS
    assert (bus.words[last - 4], bus.words[last]) == (1, 2) and len(bus.writes) == 3


# --- over loopback -----------------------------------------------------------------------------

@pytest.fixture
def served():
    """A Bus served on a loopback port, and a client of it."""
    bus = Bus()
    server = MgmtServer(bus)
    with UdpEndpoint(server, port=0) as endpoint, MgmtClient(*endpoint.address) as client:
        yield bus, server, endpoint, client


def test_reads_and_writes_over_udp(served):
    bus, server, _, client = served
    assert client.read(regmap.by_name("global.id").offset) == regmap.MRCNIC_ID
    client.write(SCRATCH, 0xCAFE_F00D)
    assert client.read(SCRATCH) == 0xCAFE_F00D
    client.write(MR_VA.offset, 0x1_8000_0000, width=64)
    assert client.read(MR_VA.offset, 64) == 0x1_8000_0000
    client.write_burst(Bus.MEMORY[0], range(10, 20))
    assert client.read_burst(Bus.MEMORY[0], 12) == list(range(10, 20)) + [0, 0]
    assert (server.executed, client.retransmitted, client.ignored) == (7, 0, 0)


def test_a_refusal_over_udp_raises_with_the_status(served):
    bus, server, _, client = served
    for call, status in ((lambda: client.read(0xFF0), Status.BAD_ADDRESS),
                         (lambda: client.write(regmap.by_name("rx.frames").offset, 1),
                          Status.DENIED),
                         (lambda: client.read(MR_VA.offset, 48), Status.BAD_LENGTH),
                         (lambda: client.write(regmap.by_name("qp.state").offset, 5, width=3),
                          Status.BAD_VALUE)):
        with pytest.raises(StatusError) as info:
            call()
        assert info.value.status is status and status.name in str(info.value)
    # what the protocol itself forbids never leaves the client
    with pytest.raises(MalformedPacket, match="does not fit 8 bits"):
        client.write(SCRATCH, 0x100, width=8)
    with pytest.raises(MalformedPacket, match="not a multiple of 4"):
        client.read(SCRATCH + 2)
    assert server.executed == 4


def test_the_register_client_runs_over_udp(served):
    bus, _, _, client = served
    regs = RegisterClient(client)   # 32-bit words, wide registers low word first
    regs.write("tx.src_ip", 0xFD00_0000_0000_0000_0000_0000_0000_0042)
    assert client.read(SRC_IP.offset, 128) == 0xFD00_0000_0000_0000_0000_0000_0000_0042
    assert regs.read("tx.src_ip") == 0xFD00_0000_0000_0000_0000_0000_0000_0042
    assert regs.read("global.version") == regmap.MRCNIC_VERSION


class LossyProxy:
    """Passes datagrams between one client and a server, dropping the server's replies whose
    numbers (1, 2, ...) are in ``drop``; keeps every request it passed."""

    def __init__(self, server_address, drop=()):
        self.drop, self.requests, self.replies = set(drop), [], 0
        self.front = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.front.bind(("127.0.0.1", 0))
        self.back = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.back.connect(server_address)
        self.address = self.front.getsockname()
        self.client = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            ready, _, _ = select.select([self.front, self.back], [], [], 0.05)
            if self.front in ready:
                data, self.client = self.front.recvfrom(65536)
                self.requests.append(data)
                self.back.send(data)
            if self.back in ready:
                data = self.back.recv(65536)
                self.replies += 1
                if self.replies not in self.drop:
                    self.front.sendto(data, self.client)

    def close(self):
        self._stop.set()
        self._thread.join()
        self.front.close()
        self.back.close()


def test_a_lost_reply_is_retransmitted_and_the_write_executed_once(served):
    bus, server, endpoint, _ = served
    proxy = LossyProxy(endpoint.address, drop={1})
    try:
        with MgmtClient(*proxy.address, timeout=0.2, retries=3) as client:
            client.write(SCRATCH, 0x1234)
            assert client.read(SCRATCH) == 0x1234
            assert (client.retransmitted, client.ignored) == (1, 0)
    finally:
        proxy.close()
    assert bus.writes == [(SCRATCH, 32, 0x1234)]
    assert (server.executed, server.replayed) == (2, 1)
    # the retransmission is the request itself, byte for byte; the next request is numbered on
    first, _, read = (decode(r) for r in proxy.requests)
    assert proxy.requests[0] == proxy.requests[1] and read.seq == (first.seq + 1) & 0xFFFF_FFFF


def test_a_duplicated_request_is_answered_twice_and_executed_once(served):
    bus, server, endpoint, _ = served
    request = _write(0xABCD, SCRATCH, 0x77)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(2)
        s.connect(endpoint.address)
        s.send(request)
        s.send(request)
        replies = [s.recv(65536), s.recv(65536)]
    assert replies[0] == replies[1] and decode(replies[0]).seq == 0xABCD
    assert bus.writes == [(SCRATCH, 32, 0x77)] and (server.executed, server.replayed) == (1, 1)


class Scripted:
    """A stand-in server that answers each request with what ``script(request)`` returns (a
    list of datagrams) and keeps the requests."""

    def __init__(self, script):
        self.script, self.requests = script, []
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.address = self.sock.getsockname()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                data, peer = self.sock.recvfrom(65536)
            except TimeoutError:
                continue
            self.requests.append(data)
            for out in self.script(decode(data)):
                self.sock.sendto(out, peer)

    def close(self):
        self._stop.set()
        self._thread.join()
        self.sock.close()


def test_stale_duplicate_and_malformed_replies_are_ignored():
    def script(req):
        right = Packet(req.opcode, req.seq, req.addr, req.width, req.count, reply=True,
                       data=(0x600D,))
        return [Packet(req.opcode, (req.seq - 1) & 0xFFFF_FFFF, req.addr, reply=True,
                       data=(0xBAD,)).encode(),                          # an earlier request's
                Packet(req.opcode, req.seq, req.addr + 4, reply=True, data=(0xBAD,)).encode(),
                b"\x00garbage",
                req.encode(),                                            # not a reply
                right.encode(), right.encode()]                          # and a duplicate
    fake = Scripted(script)
    try:
        with MgmtClient(*fake.address, timeout=1.0, retries=0) as client:
            assert client.read(0x40) == 0x600D
            assert client.ignored == 4
            assert client.read(0x40) == 0x600D   # the duplicate of the first is stale now
            assert client.ignored == 4 + 1 + 4
    finally:
        fake.close()


def test_every_retransmission_carries_the_same_sequence_number():
    fake = Scripted(lambda req: [])
    try:
        with MgmtClient(*fake.address, timeout=0.05, retries=2) as client:
            with pytest.raises(Unreachable) as info:
                client.write(SCRATCH, 1)
            assert client.retransmitted == 2
    finally:
        fake.close()
    assert len(fake.requests) == 3 and len(set(fake.requests)) == 1
    assert "after 3 attempts" in str(info.value) and "refused" not in str(info.value)


def test_a_reply_of_another_version_is_reported_as_such():
    fake = Scripted(lambda req: [raw(version=2, reply=1, opcode=req.opcode, seq=req.seq,
                                     status=Status.BAD_VERSION)])
    try:
        with MgmtClient(*fake.address, timeout=1.0, retries=0) as client:
            with pytest.raises(StatusError) as info:
                client.read(0x40)
    finally:
        fake.close()
    assert info.value.status is Status.BAD_VERSION and "speaks version 2" in str(info.value)


def test_an_unreachable_port_raises_within_about_two_seconds():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]   # free once closed: nothing listens there
    with MgmtClient("127.0.0.1", port) as client:
        start = time.monotonic()
        with pytest.raises(Unreachable) as info:
            client.read(SCRATCH)
        elapsed = time.monotonic() - start
    assert 1.9 <= elapsed <= 3.0, elapsed
    assert isinstance(info.value, TimeoutError)
    assert f"127.0.0.1:{port}" in str(info.value) and "after 8 attempts" in str(info.value)
    assert "refused" in str(info.value)


def test_client_parameters_are_checked():
    with pytest.raises(ValueError, match="timeout 0"):
        MgmtClient("127.0.0.1", 1, timeout=0)
    with pytest.raises(ValueError, match="retries -1"):
        MgmtClient("127.0.0.1", 1, retries=-1)


def test_the_protocol_imports_no_gateware():
    r = subprocess.run([sys.executable, "-c", "import sys, mrcnic.mgmt; print([m for m in "
                        "sys.modules if m.startswith(('mrcnic.hdl', 'mrcnic.verif', 'amaranth', "
                        "'cocotb', 'scapy'))])"], capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout) == (0, "[]\n"), r.stderr
