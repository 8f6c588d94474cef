"""The MRC wire format: the one source of every header layout this project uses.

Each header is a list of fields, most significant bit of the first byte first (network order).
From this table come the scapy layers (:mod:`mrcnic.layers`), the Amaranth layouts and field
extractors the gateware uses (:mod:`mrcnic.hdl.headers`) and ``docs/wire-format.md``
(:mod:`mrcnic.docgen`). Where the public MRC facts are silent, the field carries a ``choice`` that
says what this project decided; the doc lists them all.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

__all__ = [
    "Field", "Header", "Opcode", "NackReason", "SackMark", "EndpointOp", "DscpClass",
    "ETHERNET", "IPV6", "IPV4", "SRH", "UDP", "BTH", "METH", "TSETH", "RETH", "IMMDT", "AETH",
    "SETH", "NETH", "PETH", "ERTH", "EETH", "MRC_HEADERS", "ALL_HEADERS",
    "ROCE_UDP_PORT", "ETHERTYPE_IPV6", "ETHERTYPE_IPV4", "ETHERTYPE_ARP", "IPPROTO_UDP",
    "IPPROTO_IPV6", "IPPROTO_ROUTING",
    "SRH_ROUTING_TYPE", "PROBE_DQP", "ICRC_BYTES", "headers_after_bth", "DATA_OPCODES",
    "TRIMMED_PACKET", "PROBE_QP_FIELD", "ETH_WIRE_OVERHEAD", "ETH_PREAMBLE", "ETH_SFD",
    "ETH_PREAMBLE_BYTES", "ETH_FCS_BYTES", "ETH_IFG_BYTES", "ETH_MIN_FRAME", "ETH_FCS_RESIDUE",
    "TIME_BITS",
]

ROCE_UDP_PORT = 4791
ETHERTYPE_IPV6 = 0x86DD
ETHERTYPE_IPV4 = 0x0800   # the board management port's IPv4
ETHERTYPE_ARP = 0x0806
IPPROTO_UDP = 17
IPPROTO_IPV6 = 41      # IPv6-in-IPv6: the SRv6 outer header's next header
IPPROTO_ROUTING = 43   # IPv6 routing extension header (the SRH)
SRH_ROUTING_TYPE = 4   # RFC 8754
PROBE_DQP = 0x2        # destination QP reserved for EV probes
ICRC_BYTES = 4
# Ethernet framing as the MAC puts it on the wire (IEEE 802.3 clause 3 and 4).
ETH_PREAMBLE = 0x55            #: each preamble byte
ETH_SFD = 0xD5                 #: the start-of-frame delimiter that ends the preamble
ETH_PREAMBLE_BYTES = 8         #: preamble and SFD
ETH_FCS_BYTES = 4              #: the frame check sequence: CRC-32, least significant byte first
ETH_IFG_BYTES = 12             #: the least idle time between frames, in byte times
ETH_MIN_FRAME = 64             #: the shortest frame, FCS included: shorter ones are padded
#: the CRC-32 shift register (all ones at the start, no final inversion) after a frame and its
#: correct FCS: a receiver checks this instead of comparing the FCS
ETH_FCS_RESIDUE = 0xDEBB20E3
#: bytes a frame takes on the wire beyond itself: preamble and SFD, FCS, gap
ETH_WIRE_OVERHEAD = ETH_PREAMBLE_BYTES + ETH_FCS_BYTES + ETH_IFG_BYTES


class Opcode(enum.IntEnum):
    """BTH opcodes MRC uses (MRC-REFERENCE table; only writes are defined)."""
    WRITE_FIRST = 0xC6
    WRITE_MIDDLE = 0xC7
    WRITE_LAST = 0xC8
    WRITE_LAST_IMM = 0xC9
    WRITE_ONLY = 0xCA
    WRITE_ONLY_IMM = 0xCB
    ACKNOWLEDGE = 0xD1
    ENDPOINT_REQUEST = 0xD8
    ENDPOINT_RESPONSE = 0xD9
    SACK = 0xDC
    NACK = 0xDD
    PROBE = 0xDE


DATA_OPCODES = frozenset({Opcode.WRITE_FIRST, Opcode.WRITE_MIDDLE, Opcode.WRITE_LAST,
                          Opcode.WRITE_LAST_IMM, Opcode.WRITE_ONLY, Opcode.WRITE_ONLY_IMM})
IMM_OPCODES = frozenset({Opcode.WRITE_LAST_IMM, Opcode.WRITE_ONLY_IMM})


class NackReason(enum.IntEnum):
    """NETH nack_reason codes (names public, numbers chosen by this project)."""
    TRIMMED = 1
    TRIMMED_LASTHOP = 2
    NO_BITMAP = 3
    NO_PKT_BUFFER = 4
    PSN_OOR_WINDOW = 5
    UNEXP_EVENT = 6


class SackMark(enum.IntEnum):
    """SETH ``m``: what the receiver tells the sender about the EV the packet used."""
    NONE = 0
    SKIP_ONCE = 1
    ALWAYS_SKIP = 2


class EndpointOp(enum.IntEnum):
    """ERTH / EETH ``op`` (numbers chosen by this project). This NIC probes EVs with PETH, so
    it sends only PORT_STATUS; an EV_PROBE it receives is counted and otherwise ignored."""
    EV_PROBE = 1
    PORT_STATUS = 2


class DscpClass(enum.IntEnum):
    """DSCP code points for MRC's traffic classes (class names public, values chosen here)."""
    DATA_TRIMMABLE = 10
    DATA_NO_TRIM = 12
    DATA_TRIMMABLE_RTX = 14
    CONTROL = 46
    TRIMMED = 48   # a data packet a switch cut to its headers, forwarded at control priority
    TRIMMED_LASTHOP = 50   # the same, cut by the last hop (the queue to the receiver itself)


#: The classes a trimmed data packet arrives in: its NACK's reason says which (TRIMMED: a queue
#: inside the fabric, news of that path; TRIMMED_LASTHOP: the receiver's own port, which every
#: path shares).
TRIMMED_CLASSES = (DscpClass.TRIMMED, DscpClass.TRIMMED_LASTHOP)


#: How a trimmed packet looks on the wire (this project's choice: the public facts say only that a
#: switch cuts a data packet to its headers and forwards it at control priority).
TRIMMED_PACKET = (
    "A switch that trims a data packet keeps its headers through RETH (and ImmDt), drops the "
    "payload, keeps the 4 bytes where the ICRC was (no longer a valid ICRC: the receiver does "
    "not check it), rewrites every IPv6 payload length and the UDP length to match, and sets "
    "DSCP TRIMMED on the header it routes on (the outer one of an SRv6 packet), or "
    "TRIMMED_LASTHOP when the queue that was full is the last hop's, the port to the receiver "
    "(as ECN is not marked there, the last hop knows itself). Switches mark "
    "ECN and trim only the header they route on, so the receiver reads both from the outer "
    "header when there is one.")

#: Which QP a probe is about: it goes to the probe QP, so the PETH names the QP (this project's
#: choice, as the PDC ids of SETH and NETH name QPs too).
PROBE_QP_FIELD = "dpdcid"


@dataclass(frozen=True)
class Field:
    """One field of a header.

    ``bits`` is its width; ``enum`` names its values; ``choice`` says what this project decided
    where the public facts are silent (empty when the layout is public).
    """
    name: str
    bits: int
    doc: str = ""
    enum: type[enum.IntEnum] | None = None
    choice: str = ""
    reserved: bool = False


@dataclass(frozen=True)
class Header:
    """A header: an ordered list of fields, packed most significant bit first."""
    name: str
    title: str
    fields: tuple[Field, ...]
    doc: str = ""
    _offsets: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self):
        total = 0
        names = set()
        for f in self.fields:
            if f.name in names:
                raise ValueError(f"header {self.name}: field {f.name!r} is declared twice")
            names.add(f.name)
            self._offsets[f.name] = total
            total += f.bits
        if total % 8:
            raise ValueError(f"header {self.name}: fields add up to {total} bits, not whole bytes")

    @property
    def bits(self) -> int:
        return sum(f.bits for f in self.fields)

    @property
    def length(self) -> int:
        """Length in bytes."""
        return self.bits // 8

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"header {self.name} has no field {name!r}; it has "
                       f"{', '.join(f.name for f in self.fields)}")

    def bit_offset(self, name: str) -> int:
        """Offset of the field's most significant bit from the header's first bit."""
        self.field(name)
        return self._offsets[name]

    def pack(self, **values: int) -> bytes:
        """Bytes of the header; unnamed fields are zero. Raises on a value that does not fit."""
        unknown = set(values) - {f.name for f in self.fields}
        if unknown:
            raise KeyError(f"header {self.name} has no field(s) {sorted(unknown)}")
        word = 0
        for f in self.fields:
            v = int(values.get(f.name, 0))
            if not 0 <= v < (1 << f.bits):
                raise ValueError(f"{self.name}.{f.name} = {v:#x} does not fit in {f.bits} bits")
            word = (word << f.bits) | v
        return word.to_bytes(self.length, "big")

    def unpack(self, data: bytes) -> dict[str, int]:
        """Fields of the header at the start of ``data``."""
        if len(data) < self.length:
            raise ValueError(f"{self.name} needs {self.length} bytes, got {len(data)}")
        word = int.from_bytes(data[:self.length], "big")
        out = {}
        for f in self.fields:
            shift = self.bits - self._offsets[f.name] - f.bits
            out[f.name] = (word >> shift) & ((1 << f.bits) - 1)
        return out


def _h(name, title, doc, *fields):
    return Header(name, title, tuple(fields), doc)


F = Field

# --- Standard headers the NIC parses and builds -------------------------------------------------

ETHERNET = _h("ETHERNET", "Ethernet II", "No VLAN tag; the NIC sends and accepts untagged frames.",
              F("dst", 48, "destination MAC"), F("src", 48, "source MAC"),
              F("ethertype", 16, "0x86DD (IPv6) for everything MRC sends"))

IPV6 = _h("IPV6", "IPv6 (inner RoCEv2 header, and the SRv6 outer header)",
          "The inner header carries the EV's low half in the flow label. The outer header "
          "(next header 41) carries the uSID carrier as its destination.",
          F("version", 4, "6"), F("tc", 8, "traffic class: DSCP (6) | ECN (2)"),
          F("flow_label", 20, "inner: low 16 bits = EV low half"),
          F("payload_length", 16), F("next_header", 8), F("hop_limit", 8),
          F("src", 128), F("dst", 128))

SRH = _h("SRH", "IPv6 Segment Routing Header (RFC 8754), fixed part",
         "Followed by (last_entry + 1) 16-byte segments, segment[0] being the last one visited. "
         "Each segment is a further uSID carrier.",
         F("next_header", 8), F("hdr_ext_len", 8, "length in 8-byte units, not counting the first 8"),
         F("routing_type", 8, "4"), F("segments_left", 8), F("last_entry", 8),
         F("flags", 8), F("tag", 16))

IPV4 = _h("IPV4", "IPv4 (the board management port only)",
          "Without options (IHL 5) and unfragmented; MRC itself runs over IPv6 alone.",
          F("version", 4, "4"), F("ihl", 4, "header length in 32-bit words: 5"),
          F("tos", 8, "DSCP (6) | ECN (2)"), F("total_length", 16, "header and payload, in bytes"),
          F("id", 16), F("flags", 3, "bit 1: don't fragment, bit 0: more fragments"),
          F("frag_offset", 13), F("ttl", 8), F("protocol", 8, "17 (UDP)"),
          F("checksum", 16, "ones' complement of the ones' complement sum of the header's words"),
          F("src", 32), F("dst", 32))

UDP = _h("UDP", "UDP", "Source port = EV high half; destination port 4791 (RoCEv2).",
         F("sport", 16, "EV bits 31..16"), F("dport", 16, "4791"),
         F("length", 16), F("checksum", 16, "0: RoCEv2 over IPv6 relies on the ICRC"))

# --- InfiniBand / MRC transport headers ---------------------------------------------------------

BTH = _h("BTH", "Base Transport Header", "12 bytes, first after UDP in every MRC packet.",
         F("opcode", 8, "MRC opcode", enum=Opcode),
         F("se", 1, "solicited event"), F("migreq", 1, "migration state"),
         F("pad", 2, "pad count"), F("tver", 4, "transport header version"),
         F("pkey", 16, "partition key"),
         F("fecn", 1, "forward ECN (masked in the ICRC)"),
         F("becn", 1, "backward ECN (masked in the ICRC)"),
         F("resv6", 6, "reserved (masked in the ICRC)", reserved=True),
         F("dqp", 24, "destination QP; 0x2 = EV probes"),
         F("ackreq", 1, "acknowledge request (the 'a' bit)"),
         F("resv1", 1, "the 'R' bit: reserved", choice="R read as a reserved bit", reserved=True),
         F("rtx", 1, "set on every retransmitted packet"),
         F("tsh", 1, "a TSETH follows the METH",
           choice="'tsh' read as 'timestamp header present': it selects whether TSETH is there"),
         F("resv4", 4, "reserved", reserved=True),
         F("psn", 24, "packet sequence number"))

METH = _h("METH", "MRC Extended Transport Header", "In every data packet; orders completions.",
          F("rqmsn", 16, "request MSN"), F("msn", 16, "message sequence number"))

TSETH = _h("TSETH", "Timestamp Extended Transport Header",
           "Present when BTH.tsh is set; the receiver echoes the timestamp in SETH/NETH.",
           F("tx_timestamp", 16, "sender's free-running timestamp"),
           F("reserved", 16, choice="timestamp in the first two bytes, then 16 reserved bits",
             reserved=True))

#: The sender's timestamp counter's width (TSETH's, echoed in SETH and NETH): send times and
#: RTT samples are in its cycles, and wrap with it.
TIME_BITS = TSETH.field("tx_timestamp").bits

RETH = _h("RETH", "RDMA Extended Transport Header",
          "In EVERY data packet (not only the first): spraying means any packet can arrive first. "
          "va is that packet's own payload address.",
          F("va", 64, "virtual address of this packet's payload"),
          F("rkey", 32, "remote key"), F("dma_length", 32, "length of the whole message"))

IMMDT = _h("IMMDT", "Immediate Data", "After RETH in WRITE_LAST_IMM and WRITE_ONLY_IMM.",
           F("imm", 32, "immediate value delivered with the completion"))

AETH = _h("AETH", "ACK Extended Transport Header", "The plain RoCE ACK (opcode 0xD1).",
          F("syndrome", 8), F("msn", 24))

SETH = _h("SETH", "Selective ACK Extended Transport Header + CC_STATE",
          "36 bytes: selective acknowledgement with the congestion-control state.",
          F("type", 4, choice="byte 0 split as type(4) | nh(4)"),
          F("nh", 4, "next header"),
          F("m", 2, "EV mark: what the sender should do with the EV", enum=SackMark),
          F("pr", 1, "probe response", choice="'pr' read as the probe-response bit"),
          F("resv5", 5, reserved=True),
          F("ack_psn_offset", 16, "PSN of the packet that triggered this SACK, minus cack_psn",
            choice="two's complement: a duplicate below cack_psn gives a negative offset"),
          F("entropy", 32, "EV of the packet that triggered this SACK"),
          F("spdcid", 16, "source PDC id"), F("dpdcid", 16, "destination PDC id"),
          F("resv8", 8, reserved=True),
          F("cack_psn", 24, "cumulative ack: every PSN before it has arrived"),
          F("cc_type", 4), F("cc_flags", 4), F("mpr", 8, "max pending requests"),
          F("sack_offset", 16, "bitmap bit 0 = PSN cack_psn + sack_offset"),
          F("sack_bitmap", 64, "bit i set = PSN (cack_psn + sack_offset + i) has arrived",
            choice="bit i is the integer's bit i (LSB = first PSN)"),
          F("tx_timestamp", 16, "echo of the triggering packet's TSETH"),
          F("resv1", 1, reserved=True, choice="ooo_count is the low 15 bits of bytes 30..31"),
          F("ooo_count", 15, "packets that arrived out of order"),
          F("restore_cwnd", 1),
          F("rcv_cwnd_pen", 7, "QPs the receiver took new data for lately, at most 127 (0: not "
            "said); the sender holds its window to its share of the receiver's port"),
          F("rcvd_bytes", 24, "bytes received on the connection, modulo 2^24"))

NETH = _h("NETH", "NACK Extended Transport Header", "20 bytes.",
          F("type", 4, choice="bytes 0..1 mirror SETH: type(4) | nh(4) | 8 reserved"),
          F("nh", 4), F("resv8a", 8, reserved=True),
          F("nack_reason", 8, enum=NackReason), F("vendor", 8),
          F("entropy", 32, "EV of the packet the NACK is about"),
          F("spdcid", 16), F("dpdcid", 16), F("resv8b", 8, reserved=True),
          F("nack_psn", 24), F("cc_type", 4), F("cc_flags", 4), F("resv8c", 8, reserved=True),
          F("tx_timestamp", 16, "echo of the packet's TSETH"))

PETH = _h("PETH", "Probe Extended Transport Header", "16 bytes; opcode 0xDE.",
          F("probe_id", 32, choice="field order and widths: probe_id 32, spdcid 16, dpdcid 16, "
            "tx_timestamp 16, tsr 16, ftype 8, 24 reserved"),
          F("spdcid", 16), F("dpdcid", 16), F("tx_timestamp", 16),
          F("tsr", 16, "timestamp reflected"), F("ftype", 8), F("reserved", 24, reserved=True))

ERTH = _h("ERTH", "Endpoint Request Transport Header", "16 bytes; opcode 0xD8 (EV probe, port status).",
          F("op", 8, enum=EndpointOp,
            choice="op 8, 24 reserved, port_status_mask 32, tx_timestamp 16, 48 reserved; BTH "
            "dqp names the receiver's QP whose peer the status is about"),
          F("resv24", 24, reserved=True),
          F("port_status_mask", 32, "bit p set = the sender's port on plane p is up"),
          F("tx_timestamp", 16), F("resv48", 48, reserved=True))

EETH = _h("EETH", "Endpoint Response Transport Header", "36 bytes; opcode 0xD9.",
          F("op", 8, enum=EndpointOp, choice="op 8, 24 reserved, port_status_mask 32, "
            "tx_timestamp 16, echo_timestamp 16, 192 reserved"),
          F("resv24", 24, reserved=True), F("port_status_mask", 32),
          F("tx_timestamp", 16), F("echo_timestamp", 16), F("resv192", 192, reserved=True))

MRC_HEADERS = (BTH, METH, TSETH, RETH, IMMDT, AETH, SETH, NETH, PETH, ERTH, EETH)
ALL_HEADERS = (ETHERNET, IPV6, IPV4, SRH, UDP) + MRC_HEADERS

_EXPECTED_LENGTHS = {"ETHERNET": 14, "IPV6": 40, "IPV4": 20, "SRH": 8, "UDP": 8, "BTH": 12, "METH": 4,
                     "TSETH": 4, "RETH": 16, "IMMDT": 4, "AETH": 4, "SETH": 36, "NETH": 20,
                     "PETH": 16, "ERTH": 16, "EETH": 36}
for _hdr in ALL_HEADERS:
    if _hdr.length != _EXPECTED_LENGTHS[_hdr.name]:
        raise AssertionError(f"{_hdr.name} is {_hdr.length} bytes, the spec says "
                             f"{_EXPECTED_LENGTHS[_hdr.name]}")


def headers_after_bth(opcode: int, tsh: bool) -> tuple[Header, ...]:
    """The headers that follow BTH for ``opcode`` (TSETH only when ``tsh``)."""
    op = Opcode(opcode)
    if op in DATA_OPCODES:
        hs = [METH] + ([TSETH] if tsh else []) + [RETH]
        if op in IMM_OPCODES:
            hs.append(IMMDT)
        return tuple(hs)
    return {Opcode.ACKNOWLEDGE: (AETH,), Opcode.ENDPOINT_REQUEST: (ERTH,),
            Opcode.ENDPOINT_RESPONSE: (EETH,), Opcode.SACK: (SETH,), Opcode.NACK: (NETH,),
            Opcode.PROBE: (PETH,)}[op]
