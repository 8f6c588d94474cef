"""Board management over UDP: register reads and writes, a request and its reply at a time.

One protocol for the simulated NIC and for the gateware on a board, so it is kept simple for
hardware: a fixed 20-byte big-endian header (:data:`HEADER`), then 32-bit big-endian data words
in address order. Every request gets a reply, writes included; the host retransmits a request
whose reply does not come, under the same sequence number, and the server answers a
retransmission from the reply it remembers instead of executing the request twice.
``docs/management.md`` is generated from this module (:data:`RULES`, :class:`Opcode`,
:class:`Status`, :data:`HEADER`).

Here: :class:`Packet` with :meth:`Packet.encode` and :func:`decode`; :class:`MgmtClient`, the host
side; :class:`MgmtServer`, the server's logic, bytes in and bytes out, over a backend with
``read(addr, width)`` and ``write(addr, width, value)``; :class:`UdpEndpoint`, which serves one on
a UDP socket.
"""

from __future__ import annotations

import enum
import logging
import random
import socket
import struct
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Protocol

from . import wire

__all__ = ["MAGIC", "VERSION", "DEFAULT_PORT", "WORD_BITS", "MAX_WIDTH", "MAX_BURST_WORDS",
           "MAX_PACKET", "DEFAULT_TIMEOUT", "DEFAULT_RETRIES", "REMEMBERED_CLIENTS", "BOARD_CLIENTS",
           "HEADER",
           "RULES", "Opcode", "Status", "STATUS_DOC", "Packet", "decode", "data_words", "MgmtError",
           "MalformedPacket", "StatusError", "Unreachable", "AccessError", "Backend", "MgmtClient",
           "MgmtServer", "UdpEndpoint"]

log = logging.getLogger(__name__)

MAGIC = 0x4D47              # "MG"
VERSION = 1
DEFAULT_PORT = 0x4D47       # 19783
WORD_BITS = 32
MAX_WIDTH = 256             # the widest register sw/regmap.py allows
MAX_BURST_WORDS = 256
DEFAULT_TIMEOUT = 0.25      # seconds a client waits for a reply before retransmitting
DEFAULT_RETRIES = 7         # retransmissions: 2 s in all, by default
REMEMBERED_CLIENTS = 64     # clients whose last request and reply a server keeps
BOARD_CLIENTS = 4           # the same, in a board's gateware (hdl/mgmt_server.py)
_U32 = 0xFFFF_FFFF


class Opcode(enum.IntEnum):
    """What a request asks for."""
    READ = 1          #: one register of ``width`` bits
    WRITE = 2         #: one register of ``width`` bits
    READ_BURST = 3    #: ``count`` words at consecutive addresses, one access each
    WRITE_BURST = 4   #: ``count`` words at consecutive addresses, one access each


class Status(enum.IntEnum):
    """A reply's outcome (0 in a request)."""
    OK = 0
    BAD_ADDRESS = 1
    BAD_OPCODE = 2
    BAD_LENGTH = 3
    BAD_VALUE = 4
    DENIED = 5
    BAD_VERSION = 6
    FAILED = 7


STATUS_DOC = {
    Status.OK: "done; the reply to a READ or READ_BURST carries the words",
    Status.BAD_ADDRESS: "nothing at the address, or it is not a multiple of 4, or the access runs "
                        "past the end of the 32-bit address space",
    Status.BAD_OPCODE: "the opcode is not one of the four",
    Status.BAD_LENGTH: "width or count outside what the opcode allows, disagreeing with each "
                       "other or with the register's width, or a datagram that is not the "
                       "header and exactly the data words the request needs",
    Status.BAD_VALUE: "a value written has bits set above the width, or the register refuses "
                      "it (above its limit)",
    Status.DENIED: "the register cannot be accessed so (a write to a read-only register, or "
                   "while its block's command is pending)",
    Status.BAD_VERSION: "the request's version is not the server's (the reply carries the "
                        "server's)",
    Status.FAILED: "the server could not carry out the access (a fault of its own)",
}

_F = wire.Field
HEADER = wire.Header(
    "MGMT", "Board management header",
    (_F("magic", 16, f"{MAGIC:#06x} ('MG'); a datagram with anything else is dropped"),
     _F("version", 8, f"{VERSION}"),
     _F("reply", 1, "0 in a request, 1 in its reply"),
     _F("opcode", 7, enum=Opcode),
     _F("seq", 32, "sequence number: new for each request, the same on its retransmissions; "
                   "the reply echoes it"),
     _F("addr", 32, "byte address of the first word, a multiple of 4"),
     _F("width", 16, f"READ, WRITE: the register's width in bits, 1..{MAX_WIDTH}; bursts: 32"),
     _F("count", 16, f"data words the access covers: READ, WRITE ceil(width / 32); bursts "
                     f"1..{MAX_BURST_WORDS}"),
     _F("status", 8, "0 in a request; the outcome in a reply", enum=Status),
     _F("resv24", 24, reserved=True)),
    "Then the data words, 32 bits each, big-endian: a WRITE or WRITE_BURST request and the "
    "reply to a READ or READ_BURST that succeeded carry `count` of them, other packets none.")
#: the largest datagram: a header and the most words an access covers
MAX_PACKET = HEADER.length + 4 * max(MAX_BURST_WORDS, MAX_WIDTH // WORD_BITS)

RULES = (
    "Every request gets one reply, writes included, sent to the address and port the request "
    "came from. The reply echoes the request's header with `reply` set and `status` filled in.",
    "Data words are in address order: word k is the one at addr + 4k. A register wider than 32 "
    "bits is ceil(width / 32) words, least significant first, as the CSR bus lays it out "
    "(docs/registers.md); the bits of its last word above its width are zero.",
    "READ and WRITE are one access to one register of `width` bits, which the server may take "
    "whole (a wide counter read at once is consistent). READ_BURST and WRITE_BURST are `count` "
    "one-word accesses at consecutive addresses, for a memory window; a burst stops at the first "
    "word refused, the status says why, and the words before it have been written.",
    "The client numbers its requests from a random start: each new request the previous number "
    "plus one (modulo 2^32), each retransmission the number of the request it repeats, unchanged.",
    f"A client that has no reply within its timeout ({DEFAULT_TIMEOUT} s by default) sends the "
    f"request again, up to `retries` times ({DEFAULT_RETRIES} by default): after "
    f"{DEFAULT_TIMEOUT * (DEFAULT_RETRIES + 1):g} s in all it reports the board unreachable.",
    "A client takes only a reply with its outstanding request's sequence number, opcode, "
    "address, width and count; it ignores anything else (a late reply to an earlier request, a "
    "duplicate, a malformed datagram).",
    f"A server remembers, for each of its most recent clients (address and port; the host tools' "
    f"server keeps {REMEMBERED_CLIENTS}, a board's gateware {BOARD_CLIENTS}), its last request "
    "and the reply it sent. The same request again (same sequence number, same bytes; a board "
    "compares the bytes by their CRC-32) is a retransmission: it gets that reply again and is "
    "not executed a second time, so a write whose reply was lost is not repeated.",
    "A server answers a request that breaks a rule with the status that names it (the header "
    "echoed, no data), and drops unanswered a datagram shorter than the header, one with another "
    "magic, and every reply.",
    "The first 8 bytes (magic, version, reply, opcode, seq) keep their place in every version: "
    "a server answers another version with BAD_VERSION and its own version number, and a client "
    "reports a reply of another version as that.",
    f"The largest packet is {MAX_PACKET} bytes (the header and {MAX_BURST_WORDS} words): one "
    "1500-byte Ethernet frame carries it.",
)


class MgmtError(Exception):
    """Anything the management protocol reports."""


class MalformedPacket(MgmtError, ValueError):
    """A datagram or a packet that breaks the protocol.

    Attributes
    ----------
    status : Status or None
        What a server answers it with; None: it is dropped unanswered (too short, another
        magic, a reply with a status that does not exist).
    header : dict or None
        Its header fields, when it has a header to echo.
    """

    def __init__(self, message: str, status: Status | None = None, header: dict | None = None):
        super().__init__(message)
        self.status = status
        self.header = header


class StatusError(MgmtError):
    """The server answered with a status other than OK (:attr:`status`)."""

    def __init__(self, status: Status, message: str):
        super().__init__(message)
        self.status = status


class Unreachable(MgmtError, TimeoutError):
    """No reply after every retransmission."""


class AccessError(MgmtError):
    """What a backend raises to refuse an access; the reply carries :attr:`status`."""

    def __init__(self, status: Status, message: str = ""):
        super().__init__(message or status.name)
        self.status = Status(status)


def data_words(opcode: int, reply: bool, status: int, count: int) -> int:
    """How many data words follow the header of such a packet."""
    if reply:
        return count if status == Status.OK and opcode in (Opcode.READ, Opcode.READ_BURST) else 0
    return count if opcode in (Opcode.WRITE, Opcode.WRITE_BURST) else 0


def _words(value: int, count: int) -> tuple[int, ...]:
    return tuple((value >> (WORD_BITS * k)) & _U32 for k in range(count))


def _value(words) -> int:
    return sum(w << (WORD_BITS * k) for k, w in enumerate(words))


@dataclass(frozen=True)
class Packet:
    """A request or a reply. ``opcode`` is an :class:`Opcode`, or the unknown number a
    BAD_OPCODE reply echoes; ``data`` holds the data words (see :func:`data_words`)."""
    opcode: int
    seq: int
    addr: int = 0
    width: int = WORD_BITS
    count: int = 1
    reply: bool = False
    status: Status = Status.OK
    data: tuple[int, ...] = ()

    @property
    def value(self) -> int:
        """The data words as one number (word 0 least significant): a register's value."""
        return _value(self.data)

    def problem(self) -> tuple[Status, str] | None:
        """The first protocol rule the packet breaks, as (status, sentence); None if none.

        A reply with a status other than OK echoes a request that may have broken them, so only
        its data is checked."""
        n = data_words(self.opcode, self.reply, self.status, self.count)
        if len(self.data) != n:
            return Status.BAD_LENGTH, f"{len(self.data)} data words, but it needs {n}"
        bad = [w for w in self.data if not 0 <= w <= _U32]
        if bad:
            return Status.BAD_VALUE, f"data word {bad[0]!r} is not 32 bits"
        if self.reply and self.status != Status.OK:
            return None
        try:
            op = Opcode(self.opcode)
        except ValueError:
            return Status.BAD_OPCODE, (f"opcode {self.opcode} is none of "
                                       + ", ".join(f"{o.value} {o.name}" for o in Opcode))
        if op in (Opcode.READ, Opcode.WRITE):
            if not 1 <= self.width <= MAX_WIDTH:
                return Status.BAD_LENGTH, f"{op.name} width {self.width}, not 1..{MAX_WIDTH} bits"
            need = -(-self.width // WORD_BITS)
            if self.count != need:
                return Status.BAD_LENGTH, (f"{op.name} of {self.width} bits has count "
                                           f"{self.count}, not {need}")
        else:
            if self.width != WORD_BITS:
                return Status.BAD_LENGTH, f"{op.name} width {self.width}, not {WORD_BITS}"
            if not 1 <= self.count <= MAX_BURST_WORDS:
                return Status.BAD_LENGTH, (f"{op.name} of {self.count} words, not "
                                           f"1..{MAX_BURST_WORDS}")
        if self.addr % 4:
            return Status.BAD_ADDRESS, f"address {self.addr:#x} is not a multiple of 4"
        if self.addr + 4 * self.count > 1 << 32:
            return Status.BAD_ADDRESS, (f"{self.count} words from {self.addr:#x} run past the end "
                                        "of the 32-bit address space")
        if self.data and op in (Opcode.READ, Opcode.WRITE) and self.value >> self.width:
            return Status.BAD_VALUE, (f"value {self.value:#x} has bits set above its "
                                      f"{self.width}-bit width")
        return None

    def encode(self) -> bytes:
        """The datagram. Raises :class:`MalformedPacket` on a packet that breaks a rule."""
        bad = self.problem()
        if bad is not None:
            raise MalformedPacket(bad[1], bad[0])
        try:
            head = HEADER.pack(magic=MAGIC, version=VERSION, reply=int(self.reply),
                               opcode=self.opcode, seq=self.seq, addr=self.addr,
                               width=self.width, count=self.count, status=self.status)
        except ValueError as e:
            raise MalformedPacket(str(e), Status.BAD_LENGTH) from None
        return head + struct.pack(f">{len(self.data)}I", *self.data)


def decode(raw: bytes) -> Packet:
    """The packet in a datagram. Raises :class:`MalformedPacket`, whose ``status`` is what a
    server answers (None: drop it) and whose ``header`` is there to echo."""
    raw = bytes(raw)
    if len(raw) < HEADER.length:
        raise MalformedPacket(f"{len(raw)} bytes, shorter than the {HEADER.length}-byte header")
    h = HEADER.unpack(raw)
    if h["magic"] != MAGIC:
        raise MalformedPacket(f"magic {h['magic']:#06x}, not {MAGIC:#06x}: not a management packet")
    if h["version"] != VERSION:
        raise MalformedPacket(f"version {h['version']}, but this side speaks {VERSION}",
                              Status.BAD_VERSION, h)
    reply = bool(h["reply"])
    try:
        status = Status(h["status"]) if reply else Status.OK   # a request's is ignored
    except ValueError:
        raise MalformedPacket(f"reply status {h['status']} is not one of "
                              f"{', '.join(s.name for s in Status)}", None, h) from None
    try:
        opcode = Opcode(h["opcode"])
    except ValueError:
        opcode = h["opcode"]   # Packet.problem() names it, unless an error reply echoes it
    words = data_words(opcode, reply, status, h["count"])
    pkt = Packet(opcode, h["seq"], h["addr"], h["width"], h["count"], reply, status)
    # the access rules first: a wrong count is a clearer sentence than the length it implies
    bad = replace(pkt, data=(0,) * words).problem()
    if bad is not None:
        raise MalformedPacket(bad[1], bad[0], h)
    need = HEADER.length + 4 * words
    if len(raw) != need:
        raise MalformedPacket(f"{len(raw)} bytes, but {'a reply' if reply else 'a request'} "
                              f"{getattr(opcode, 'name', opcode)} of {h['count']} words is {need}",
                              Status.BAD_LENGTH, h)
    pkt = replace(pkt, data=struct.unpack(f">{words}I", raw[HEADER.length:]))
    bad = pkt.problem()
    if bad is not None:
        raise MalformedPacket(bad[1], bad[0], h)
    return pkt


class Backend(Protocol):
    """What a :class:`MgmtServer` executes requests on: registers or memory by byte address.
    A method raises :class:`AccessError` to refuse (``KeyError`` reads as BAD_ADDRESS).

    A backend may also have ``read_burst(addr, count) -> [words]`` and ``write_burst(addr,
    words)``, which carry a burst's one-word accesses out in order and stop at the first one
    refused, raising as that access would: the server then hands it the burst whole (a
    simulation serves a burst in one visit, not one a word)."""

    def read(self, addr: int, width: int) -> int: ...

    def write(self, addr: int, width: int, value: int) -> None: ...


class MgmtServer:
    """The server's side, whatever carries the datagrams: :meth:`handle` takes a request and
    returns the reply (None: send nothing).

    Parameters
    ----------
    backend : Backend
    clients : int
        How many clients' last request and reply it remembers (the most recent).

    Attributes
    ----------
    executed, replayed, refused, dropped : int
        Requests carried out; retransmissions answered from the remembered reply; requests
        answered with the status of the rule they break; datagrams dropped unanswered.
    """

    def __init__(self, backend: Backend, clients: int = REMEMBERED_CLIENTS):
        self.backend = backend
        self.clients = clients
        self._last: OrderedDict = OrderedDict()   # client -> (request bytes, reply bytes)
        self.executed = self.replayed = self.refused = self.dropped = 0

    def handle(self, request: bytes, client=None) -> bytes | None:
        """The reply to ``request`` from ``client`` (any hashable name for the sender, e.g. its
        address and port)."""
        request = bytes(request)
        try:
            pkt = decode(request)
        except MalformedPacket as e:
            if e.status is None or e.header["reply"]:
                self.dropped += 1
                return None
            self.refused += 1
            h = e.header
            return Packet(h["opcode"], h["seq"], h["addr"], h["width"], h["count"], reply=True,
                          status=e.status).encode()
        if pkt.reply:
            self.dropped += 1
            return None
        last = self._last.get(client)
        if last is not None and last[0] == request:
            self._last.move_to_end(client)
            self.replayed += 1
            return last[1]
        status, data = self._execute(pkt)
        reply = replace(pkt, reply=True, status=status, data=data).encode()
        self._last[client] = (request, reply)
        self._last.move_to_end(client)
        while len(self._last) > self.clients:
            self._last.popitem(last=False)
        self.executed += 1
        return reply

    def _read(self, addr: int, width: int) -> int:
        value = self.backend.read(addr, width)
        if not isinstance(value, int) or not 0 <= value < 1 << width:
            raise ValueError(f"backend read {addr:#x} ({width} bits) returned {value!r}")
        return value

    def _execute(self, pkt: Packet) -> tuple[Status, tuple[int, ...]]:
        op, addr = pkt.opcode, pkt.addr
        try:
            if op is Opcode.READ:
                return Status.OK, _words(self._read(addr, pkt.width), pkt.count)
            if op is Opcode.WRITE:
                self.backend.write(addr, pkt.width, pkt.value)
            elif op is Opcode.READ_BURST:
                if hasattr(self.backend, "read_burst"):
                    words = tuple(self.backend.read_burst(addr, pkt.count))
                    if len(words) != pkt.count or not all(
                            isinstance(w, int) and 0 <= w <= _U32 for w in words):
                        raise ValueError(f"backend burst at {addr:#x} returned {words!r:.80}")
                    return Status.OK, words
                return Status.OK, tuple(self._read(addr + 4 * k, WORD_BITS)
                                        for k in range(pkt.count))
            elif hasattr(self.backend, "write_burst"):
                self.backend.write_burst(addr, list(pkt.data))
            else:
                for k, word in enumerate(pkt.data):
                    self.backend.write(addr + 4 * k, WORD_BITS, word)
            return Status.OK, ()
        except AccessError as e:
            return e.status, ()
        except KeyError:
            return Status.BAD_ADDRESS, ()
        except Exception:   # a fault of the backend's: the client still gets its reply
            log.exception("management %s at %#x failed", op.name, addr)
            return Status.FAILED, ()


class MgmtClient:
    """The host's side: register reads and writes on a board or a simulation.

    ``read(offset)`` and ``write(offset, value)`` make it a transport for
    :class:`mrcnic.regclient.RegisterClient`.

    Parameters
    ----------
    addr : str
        Host name or IP address of the server.
    port : int
    timeout : float
        Seconds to wait for a reply before retransmitting.
    retries : int
        Retransmissions before :class:`Unreachable`; the wait is at most
        ``timeout * (retries + 1)``, 2 s by default.

    Attributes
    ----------
    retransmitted, ignored : int
        Retransmissions sent; datagrams ignored (stale, duplicate or malformed replies).
    """

    def __init__(self, addr: str, port: int = DEFAULT_PORT, timeout: float = DEFAULT_TIMEOUT,
                 retries: int = DEFAULT_RETRIES):
        if not timeout > 0:
            raise ValueError(f"timeout {timeout!r}: a reply needs some time, give seconds > 0")
        if not isinstance(retries, int) or retries < 0:
            raise ValueError(f"retries {retries!r}: give a whole number >= 0")
        self.addr, self.port, self.timeout, self.retries = addr, port, timeout, retries
        family, _, _, _, sockaddr = socket.getaddrinfo(addr, port, type=socket.SOCK_DGRAM)[0]
        self._sock = socket.socket(family, socket.SOCK_DGRAM)
        self._sock.connect(sockaddr)   # and so takes datagrams from the server alone
        self._seq = random.SystemRandom().getrandbits(32)
        self.retransmitted = self.ignored = 0

    def close(self) -> None:
        self._sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def read(self, addr: int, width: int = WORD_BITS) -> int:
        """The register of ``width`` bits at ``addr``."""
        return self.request(Packet(Opcode.READ, 0, addr, width, -(-width // WORD_BITS))).value

    def write(self, addr: int, value: int, width: int = WORD_BITS) -> None:
        """Writes ``value`` to the register of ``width`` bits at ``addr``."""
        if not isinstance(value, int) or value < 0 or (width > 0 and value >> width):
            raise MalformedPacket(f"value {value!r} does not fit {width} bits", Status.BAD_VALUE)
        count = -(-width // WORD_BITS)
        self.request(Packet(Opcode.WRITE, 0, addr, width, count, data=_words(value, count)))

    def read_burst(self, addr: int, count: int) -> list[int]:
        """``count`` words from ``addr`` on."""
        return list(self.request(Packet(Opcode.READ_BURST, 0, addr, WORD_BITS, count)).data)

    def write_burst(self, addr: int, words) -> None:
        """Writes ``words`` to consecutive words from ``addr`` on."""
        words = tuple(words)
        self.request(Packet(Opcode.WRITE_BURST, 0, addr, WORD_BITS, len(words), data=words))

    def request(self, pkt: Packet) -> Packet:
        """Sends ``pkt`` under the next sequence number, retransmits it until its reply comes,
        and returns the reply. Raises :class:`MalformedPacket` (nothing sent) for a request that
        breaks a rule, :class:`StatusError` for a reply that is not OK, :class:`Unreachable`."""
        self._seq = (self._seq + 1) & _U32
        pkt = replace(pkt, seq=self._seq, reply=False, status=Status.OK)
        raw = pkt.encode()
        refused = False
        start = time.monotonic()
        for attempt in range(self.retries + 1):
            if attempt:
                self.retransmitted += 1
            refused |= self._send(raw)
            deadline = time.monotonic() + self.timeout
            while (left := deadline - time.monotonic()) > 0:
                self._sock.settimeout(left)
                try:
                    datagram = self._sock.recv(65536)
                except TimeoutError:
                    break
                except ConnectionRefusedError:   # the ICMP answer to a port nobody listens on
                    refused = True
                    continue
                reply = self._match(pkt, datagram)
                if reply is not None:
                    return reply
        what = f"{getattr(pkt.opcode, 'name', pkt.opcode)} at {pkt.addr:#x} (sequence {pkt.seq})"
        raise Unreachable(f"no reply from {self.addr}:{self.port} to {what} after "
                          f"{self.retries + 1} attempts in {time.monotonic() - start:.1f} s"
                          + ("; the port refused it: nothing listens there" if refused else ""))

    def _send(self, raw: bytes) -> bool:
        """Sends; True if an earlier ICMP refusal surfaced (Linux reports it on the next send,
        which then sends nothing, so it is sent again)."""
        try:
            self._sock.send(raw)
            return False
        except ConnectionRefusedError:
            try:
                self._sock.send(raw)
            except ConnectionRefusedError:
                pass
            return True

    def _match(self, pkt: Packet, datagram: bytes) -> Packet | None:
        try:
            reply = decode(datagram)
        except MalformedPacket as e:
            h = e.header
            if e.status is Status.BAD_VERSION and h["reply"] and h["seq"] == pkt.seq:
                raise StatusError(Status.BAD_VERSION, f"the server at {self.addr}:{self.port} "
                                  f"speaks version {h['version']}, this client {VERSION}") from None
            self.ignored += 1
            return None
        if not (reply.reply and reply.seq == pkt.seq and reply.opcode == pkt.opcode
                and (reply.addr, reply.width, reply.count) == (pkt.addr, pkt.width, pkt.count)):
            self.ignored += 1
            return None
        if reply.status != Status.OK:
            raise StatusError(reply.status, f"{pkt.opcode.name} at {pkt.addr:#x} ({pkt.width} "
                              f"bits, {pkt.count} words): {reply.status.name}: "
                              f"{STATUS_DOC[reply.status]}")
        return reply


class UdpEndpoint:
    """Serves a :class:`MgmtServer` on a UDP socket: in a thread of its own after
    :meth:`start` (or ``with``), or in the caller's with :meth:`serve_forever`.

    Parameters
    ----------
    server : MgmtServer
    host : str
        The address to listen on; loopback unless told otherwise.
    port : int
        0: any free port (:attr:`address` says which).
    """

    POLL = 0.1   # seconds between looks at the stop flag

    def __init__(self, server: MgmtServer, host: str = "127.0.0.1", port: int = DEFAULT_PORT):
        self.server = server
        family, _, _, _, sockaddr = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM,
                                                       flags=socket.AI_PASSIVE)[0]
        self._sock = socket.socket(family, socket.SOCK_DGRAM)
        self._sock.bind(sockaddr)
        self._sock.settimeout(self.POLL)
        self.address = self._sock.getsockname()[:2]
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def serve_forever(self) -> None:
        """Answers requests until :meth:`close`."""
        while not self._stop.is_set():
            try:
                datagram, peer = self._sock.recvfrom(65536)
            except TimeoutError:
                continue
            except OSError:
                if self._stop.is_set():
                    return
                raise
            try:
                reply = self.server.handle(datagram, peer)
            except Exception:   # one bad datagram must not end the service
                log.exception("management request from %s failed", peer)
                continue
            if reply is not None:
                try:
                    self._sock.sendto(reply, peer)
                except OSError as e:
                    log.warning("management reply to %s not sent: %s", peer, e)

    def start(self) -> UdpEndpoint:
        if self._thread is None:
            self._thread = threading.Thread(target=self.serve_forever, daemon=True,
                                            name=f"mgmt-udp-{self.address[1]}")
            self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sock.close()

    def __enter__(self) -> UdpEndpoint:
        return self.start()

    def __exit__(self, *exc):
        self.close()
