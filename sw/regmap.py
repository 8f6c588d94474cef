"""The register map: the one table every register comes from.

The HDL register bank (:class:`mrcnic.hdl.register_bank.RegisterBank`), the driver's register
client (:mod:`mrcnic.regclient`), the CLI's ``mrcnic regs`` and ``docs/registers.md`` are all
generated from :data:`REGISTERS`.

The bus carries 32-bit words at byte offsets that are multiples of 4. A register wider than 32
bits takes consecutive words, least significant word first. Access kinds:

* ``RW``: storage in the register bank, driven out to the gateware; the host reads back what it
  wrote. A write with bits set above the register's width, or a value above the register's
  limit, is refused (ignored and counted in ``global.bus_errors``), never truncated. Some limits
  are build parameters (the number of QPs, EVs, templates); the ``global`` block reports them.
* ``RO``: driven by the gateware (status, counters); writes are refused and counted. Reading the
  first word of a wide RO register takes a snapshot of the whole register, which the following
  words then read, so a 64-bit counter reads consistently low word first.
* ``CONST``: a value fixed when the bank is built (identification, build parameters).
* ``CMD``: a command. Writing it hands the value, with the block's RW registers as they stand, to
  the gateware; reading it returns 1 while that command is still pending and 0 once taken.
  While a command is pending, writes to its block's commands and RW registers are refused and
  counted, so what the gateware receives is exactly what the host staged. A driver writes
  the block's registers, writes the command, and reads it back until 0 before the next one.

A register named ``<name>_p<n>`` belongs to plane ``n`` (:func:`plane_of`). The map has them for
:data:`MAX_PLANES` planes; a NIC built with fewer (``global.planes``) holds none of the others:
they read 0 and refuse writes.

The blocks ``board``, ``gen``, ``chk``, ``mac`` and ``mgmt`` (:data:`BOARD_BLOCKS`, offsets
0xc00 .. 0xdff) exist only on a board (:class:`mrcnic.hdl.board_nic.BoardNic`), whose second
register bank holds them beside the NIC's; a NIC without a board answers them as unmapped.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["Access", "Register", "REGISTERS", "MRCNIC_ID", "MRCNIC_VERSION", "by_name",
           "by_offset", "ADDR_WIDTH", "BUS_ERRORS", "MAX_PLANES", "USID_WORDS",
           "TX_ERROR_REASONS", "REL_COUNTERS", "RTO_LIMIT", "CQ_ENTRY", "CQ_ROUTE_SEND",
           "CQ_ROUTE_RECV", "MEM_WINDOW_BYTES", "EVQ_ENTRY", "EVQ_OTHERS", "STORE_WORDS",
           "CC_PARAMS", "unpack", "pack", "commands", "memories", "MAC_COUNTERS",
           "MGMT_COUNTERS", "MAC_COUNTER_STEPS", "BOARD_PLANES", "BOARD_BLOCKS", "NIC_REGISTERS",
           "BOARD_REGISTERS", "plane_of"]

MRCNIC_ID = 0x4D52_4331       # "MRC1"
MRCNIC_VERSION = 0x0001_0003  # major.minor in the two halves
ADDR_WIDTH = 13               # byte-address bits of the CSR bus: an 8 KiB window
BUS_ERRORS = "global.bus_errors"   # the one RO register the bank drives itself


MAX_PLANES = 8                # per-plane registers exist for this many; those of planes
                              # beyond ``global.planes`` read 0 and refuse writes
USID_WORDS = 7                # tpl.usids: up to 14 uSIDs of 16 bits
TX_ERROR_REASONS = ("zero_length", "too_long", "bad_qp", "qp_not_rts", "memory")


class Access(enum.Enum):
    RW = "RW"
    RO = "RO"
    CONST = "CONST"
    CMD = "CMD"
    MEM = "MEM"


@dataclass(frozen=True)
class Register:
    block: str
    name: str
    offset: int
    width: int
    access: Access
    reset: int
    doc: str
    limit: int | None = None   # the largest value the register accepts (default: its width)
    #: an event counter (RO, wraps) when not 0: the gateware gives the register bank an
    #: increment of up to this many bits each cycle, and the bank keeps the count
    counts: int = 0

    @property
    def words(self) -> int:
        return (self.width + 31) // 32

    @property
    def max_value(self) -> int:
        return (1 << self.width) - 1 if self.limit is None else self.limit

    @property
    def path(self) -> str:
        """The register's name as the driver and CLI spell it: ``block.name``."""
        return f"{self.block}.{self.name}"

    @property
    def port(self) -> str:
        """The register bank's port for it: ``block_name``."""
        return f"{self.block}_{self.name}"


def _r(block, name, offset, width, access, reset, doc, limit=None, counts=0):
    if counts and access != "RO":
        raise ValueError(f"{block}.{name}: only an RO register can be a counter")
    return Register(block, name, offset, width, Access(access), reset, doc, limit, counts)


def _count(block, name, offset, doc, width=32, step=1):
    """An event counter: ``step`` bits of increment a cycle."""
    return _r(block, name, offset, width, "RO", 0, doc, counts=step)


#: What the receive side counts, in the order the gateware numbers them (hdl/rx_pipeline.py
#: checks its own lists against these).
RX_FRONT_DROPS = {
    "oversize": "longer than the largest frame", "truncated": "ends inside its headers",
    "ethertype": "not IPv6", "ip_version": "an IPv6 header whose version is not 6",
    "not_udp": "no UDP where it must be", "srh_malformed": "an SRH that breaks a rule",
    "not_roce": "UDP destination port not 4791",
    "length": "an IPv6 or UDP length that disagrees with the frame",
    "cut": "cut by its plane's guard: too long, or its next beat too late",
    "icrc": "wrong ICRC (a trimmed frame is not checked)",
    "not_mine": "SRv6 frames for another node: an outer destination that is not this NIC's "
                "SRv6 address on the plane it came on (net.sid_p<n>), or SRH segments left",
}
RX_OUTCOMES = {
    "placed": "new data packets written to host memory",
    "empty": "new data packets with no payload",
    "duplicate": "data packets that had arrived before (acknowledged, not written)",
    "beyond": "data packets past the PSN window or the message window (NACKed)",
    "trimmed": "data packets a switch inside the fabric trimmed (NACKed TRIMMED for a "
               "retransmit)",
    "probe": "reliability probes answered",
    "feedback": "SACK, NACK, ACK and endpoint packets received",
    "qp": "packets for a QP that does not exist or is not RTR/RTS",
    "rkey": "data packets with the wrong R_Key (NACKed, not written)",
    "bounds": "data packets outside the QP's memory region (NACKed, not written)",
    "opcode": "packets with an opcode MRC does not define",
    "truncated": "packets shorter than their opcode's headers",
    "trimmed_lasthop": "data packets the last hop trimmed (NACKed TRIMMED_LASTHOP for a "
                       "retransmit)",
}
RX_EVENTS = {
    "ooo": "new data packets that arrived out of order",
    "completions": "messages completed",
    "sacks": "SACKs sent", "nacks": "NACKs sent",
    "place_errors": "payload writes host memory refused",
}


def _rx_registers():
    regs = [_count("rx", "frames", 0x600,
                   "Frames the front end passed on (well formed, ICRC right, decapsulated).")]
    regs += [_count("rx", f"drop_{name}", 0x604 + 4 * i, f"Frames dropped: {doc}.")
             for i, (name, doc) in enumerate(RX_FRONT_DROPS.items())]
    regs += [_count("rx", f"outcome_{name}", 0x640 + 4 * i, doc[0].upper() + doc[1:] + ".")
             for i, (name, doc) in enumerate(RX_OUTCOMES.items())]
    regs += [_count("rx", name, 0x680 + 4 * i, doc[0].upper() + doc[1:] + ".")
             for i, (name, doc) in enumerate(RX_EVENTS.items())]
    regs += [
        _r("rx", "coalesce", 0x6C0, 8, "RW", 8,
           "New data packets per SACK (0 acts as 1). ECN-CE, the BTH ack-request bit, "
           "duplicates and probes are acknowledged at once."),
        _r("rx", "ack_timeout", 0x6C4, 32, "RW", 1024,
           "Cycles after which a QP's unacknowledged arrivals get a SACK anyway."),
        _r("rx", "share_period", 0x6C8, 16, "RW", 0,
           "Each SACK's rcv_cwnd_pen is the number of QPs that took new data in this period of "
           "so many cycles or the last (at most 127): the senders divide this port by it "
           "(their rel.rcv_wnd). 0: rcv_cwnd_pen is 0."),
    ]
    return regs


#: What the sender's reliability engine counts, in the order the gateware numbers them
#: (hdl/retransmit_tracker.py has an output for each but ``status_sent``, the TX side's).
REL_COUNTERS = {
    "rtx_sack": "packets retransmitted because SACKs showed them missing",
    "rtx_trim": "packets retransmitted because the peer NACKed them TRIMMED or "
                "TRIMMED_LASTHOP (with GO_BACK_N, the packets after them too)",
    "rtx_timeout": "packets retransmitted because their QP made no progress for its RTO (with "
                   "GO_BACK_N, every packet from the oldest on)",
    "ev_skip": "EVs set SKIP (a SACK with m = SKIP_ONCE, a NACK TRIMMED)",
    "ev_bad": "EVs set ASSUMED_BAD (a SACK with m = ALWAYS_SKIP, a timeout)",
    "probes_sent": "probes sent to ASSUMED_BAD EVs",
    "probes_answered": "probes answered (their EV set GOOD again)",
    "acked": "packets cumulatively acknowledged",
    "completions": "work requests completed",
    "stale": "SACKs and NACKs about what was already acknowledged (ignored)",
    "invalid": "feedback ignored as impossible: any for an unknown QP; a SACK or NACK naming a "
               "PSN never sent, or a SACK saying its cumulative PSN both missing and arrived; a "
               "port status with no plane of this NIC up",
    "other": "feedback with nothing for the sender (ACK, endpoint responses and EV_PROBE "
             "requests, other NACK reasons; with rel.mode OFF, every SACK and NACK for a known QP)",
    "status_sent": "port-status updates (ERTH) sent to QPs' peers",
    "status_received": "port-status updates received and applied (the planes a QP's peer can "
                       "receive on)",
}


#: the longest RTO the reliability engine's 16-bit time base can watch
RTO_LIMIT = 49152


def _rel_registers():
    regs = [
        _r("rel", "mode", 0x700, 2, "RW", 0,
           "How lost packets are recovered: 0 SELECTIVE (MRC: only what the SACKs show "
           "missing), 1 GO_BACK_N (plain RoCE: everything from the first loss), 2 OFF (nothing "
           "is retransmitted; a packet counts as acknowledged once sent).", limit=2),
        _r("rel", "reorder", 0x704, 16, "RW", 8,
           "A packet is retransmitted as a SACK hole once a packet this many PSNs above it has "
           "arrived."),
        _r("rel", "reo_wnd", 0x7AC, 16, "RW", 1024,
           "The time rule (RACK's): a packet is also retransmitted as a SACK hole once a "
           "packet sent more than this many cycles after it has arrived (the SACKs echo each "
           "packet's send time). 0: only rel.reorder counts."),
        _r("rel", "rto_min", 0x708, 16, "RW", 1024,
           "Shortest retransmission timeout, in cycles (the RTO is srtt + 4 rttvar within "
           "rel.rto_min .. rel.rto_max).", limit=RTO_LIMIT),
        _r("rel", "rto_max", 0x70C, 16, "RW", 16384,
           "Longest retransmission timeout, in cycles; also the RTO before a QP's first RTT "
           f"sample. At most {RTO_LIMIT}: times are 16-bit, and a timeout must be seen before "
           "the clock wraps.", limit=RTO_LIMIT),
        _r("rel", "target_rtt", 0x710, 16, "RW", 4096,
           "NSCC's target delay, in cycles: each SACK's RTT sample is compared with it."),
        _r("rel", "cwnd_init", 0x714, 24, "RW", 65536,
           "A QP's congestion window when it starts, in payload bytes."),
        _r("rel", "cwnd_min", 0x718, 24, "RW", 4096, "The smallest congestion window, in bytes."),
        _r("rel", "cwnd_max", 0x71C, 24, "RW", 1 << 20,
           "The largest congestion window, in bytes."),
        _r("rel", "cc_fair", 0x720, 16, "RW", 512,
           "Fair increase: bytes a SACK without ECN and with an RTT at or above the target adds."),
        _r("rel", "cc_gain", 0x724, 8, "RW", 16,
           "Proportional increase: a SACK without ECN and with an RTT below the target adds "
           "(target - RTT) x cc_gain / 16 bytes."),
        _r("rel", "cc_md", 0x728, 4, "RW", 3,
           "Multiplicative decrease: a SACK with ECN and an RTT at or above the target takes "
           "cwnd / 2^cc_md off, at most once a round trip."),
        _r("rel", "rcv_wnd", 0x7A8, 24, "RW", 0,
           "Payload bytes the peer's port can have in flight to it at the target delay: a SACK "
           "with rcv_cwnd_pen n of 2 or more holds the QP's window to rcv_wnd / n, and no less "
           "than rel.cwnd_min. 0: rcv_cwnd_pen is ignored."),
        _r("rel", "probe_interval", 0x7A0, 24, "RW", 16384,
           "Cycles between probes of ASSUMED_BAD EVs (one probe each time, QPs and entries in "
           "turn); 0: never."),
        _r("rel", "status_interval", 0x7A4, 24, "RW", 65536,
           "Cycles between repeats of this NIC's port status to every RTR/RTS QP's peer (it is "
           "also sent at once when a port goes down or comes back); 0: only on changes."),
        _r("rel", "ev_health", 0x7B0, 1, "RW", 1,
           "1: what the feedback shows of a path changes its EVs' state (SKIP, ASSUMED_BAD, a "
           "spare in a bad EV's place) and holds a QP's suspect paths. 0: losses change no EV "
           "(single-path RoCE, oblivious spraying): only ev.set_state does."),
        _r("rel", "view_qp", 0x72C, 16, "RW", 0,
           "The QP rel.cwnd, rel.inflight, rel.rtt and rel.srtt show."),
        _r("rel", "cwnd", 0x730, 24, "RO", 0, "The congestion window of QP rel.view_qp, in bytes."),
        _r("rel", "inflight", 0x734, 32, "RO", 0,
           "Payload bytes QP rel.view_qp has sent and not yet had cumulatively acknowledged."),
        _r("rel", "rtt", 0x738, 16, "RO", 0, "QP rel.view_qp's last RTT sample, in cycles."),
        _r("rel", "srtt", 0x73C, 16, "RO", 0, "QP rel.view_qp's smoothed RTT, in cycles."),
    ]
    regs += [_count("rel", name, 0x740 + 4 * i, doc[0].upper() + doc[1:] + ".")
             for i, (name, doc) in enumerate(REL_COUNTERS.items())]
    return regs


def _tx_registers():
    regs = [
        _r("tx", "src_mac", 0x300, 48, "RW", 0,
           "This NIC's MAC address (inner Ethernet source); used from when global.control bit 0 "
           "is next clear, so a packet never carries half of an old and half of a new one."),
        _r("tx", "src_ip", 0x308, 128, "RW", 0,
           "This NIC's IPv6 address: inner source, and outer source in SRv6 modes; taken up "
           "like tx.src_mac."),
        _r("tx", "plane_enable", 0x318, MAX_PLANES, "RW", (1 << MAX_PLANES) - 1,
           "Bit p: the TX side may send on plane p (ANDed with the port's own readiness)."),
        _count("tx", "requests", 0x320, "Work requests taken."),
    ]
    regs += [_count("tx", f"err_{why}", 0x324 + 4 * i,
                    f"Error completions with status {why.upper()}"
                    + (": one per packet whose payload read failed." if why == "memory" else
                       ": one per work request refused."))
             for i, why in enumerate(TX_ERROR_REASONS)]
    # 64 bits: bytes at 400 Gb/s wrap 32 bits in 90 ms. A beat carries up to 64 bytes.
    regs += [_count("tx", f"frames_p{p}", 0x340 + 8 * p, f"Frames sent on plane {p}.", width=64)
             for p in range(MAX_PLANES)]
    regs += [_count("tx", f"bytes_p{p}", 0x380 + 8 * p,
                    f"Bytes sent on plane {p} (whole frames, without the Ethernet FCS).",
                    width=64, step=7)
             for p in range(MAX_PLANES)]
    regs += [
        _count("tx", "ev_refused", 0x3C0,
               "EV state changes and loads refused: DENIED set or left other than by "
               "ev.set_state, an index outside the profile, a spare beyond global.spares."),
        _count("tx", "ev_replaced", 0x3C4, "ASSUMED_BAD EVs replaced by a spare."),
        _r("tx", "port_rate", 0x3C8, 16, "RW", 0,
           "Each port's line rate, in 1/256 bytes a core clock cycle (8 Gb/s at 250 MHz: 1024), "
           "for the port meters: a port that holds more than tx.port_limit bytes of what it was "
           "given at this rate takes no new packet while another port is free. 0: no meter "
           "(a port is busy only while its MAC holds frames back)."),
        _r("tx", "port_limit", 0x3CC, 16, "RW", 2400,
           "Bytes a metered port may hold before it is passed over (tx.port_rate): about two "
           "frames of MTU 1024, so a port always has its next frame waiting and no more."),
        _r("tx", "spray", 0x3D0, 2, "RW", 0,
           "How each packet's EV is picked among its QP's eligible ones: 0 ROUNDS (MRC: planes "
           "in turn, and each plane's EVs in rounds, every EV once a round), 1 RANDOM "
           "(oblivious spraying: a plane and an EV drawn afresh for every packet, whatever "
           "went before), 2 SEQUENCE (MRC's rounds, each taken in profile order from a "
           "pseudo-random entry: for profiles laid out path by path, which it then sprays "
           "path by path).", limit=2),
        _r("tx", "trim_rounds", 0x3D4, 4, "RW", 4,
           "Rotations of its QP's profile an EV sits out after a NACK TRIMMED (a queue on its "
           "path was full): the rest of the current period of so many rotations and the whole "
           "next one (0 acts as 1). An ECN mark's SKIP lasts one rotation."),
    ]
    return regs


# QP context: stage the fields, then write the QP number to qp.write. Field names are the QP
# context's (hdl/qp_context.py); the HDL connects them by name.
_QP = (
    _r("qp", "state", 0x400, 3, "RW", 0,
       "State: 0 RESET, 1 INIT, 2 RTR, 3 RTS, 4 ERROR. The TX side sends only in RTS.", limit=4),
    _r("qp", "dqp", 0x404, 24, "RW", 0, "The peer's QP number (BTH destination QP)."),
    _r("qp", "mtu", 0x408, 3, "RW", 0, "MTU code: 0 256, 1 512, 2 1024, 3 2048, 4 4096 bytes.",
       limit=4),
    _r("qp", "mode", 0x40C, 2, "RW", 0,
       "Routing: 0 plain RoCEv2, 1 SRv6 uSID carrier (SRH only when the path needs it), "
       "2 SRv6 carrier and SRH always.", limit=2),
    _r("qp", "template", 0x410, 8, "RW", 0,
       "uSID template of the destination (below global.templates)."),
    _r("qp", "cc_profile", 0x414, 8, "RW", 0,
       "The CC profile the QP's congestion window follows (below global.cc_profiles): 0 the "
       "rel.* registers, 1 and up those cc.write stores."),
    _r("qp", "dst_mac", 0x418, 48, "RW", 0, "Next-hop MAC address."),
    _r("qp", "dst_ip", 0x420, 128, "RW", 0, "The peer's IPv6 address (inner destination)."),
    _r("qp", "next_psn", 0x430, 24, "RW", 0, "First PSN the QP will send."),
    _r("qp", "msn", 0x434, 16, "RW", 0, "MSN of the QP's next message."),
    _r("qp", "write", 0x43C, 16, "CMD", 0,
       "Write a QP number (below global.qps): that QP's context becomes the qp.* fields, and "
       "its receive side starts again from qp.rx_psn and qp.rx_msn."),
    _r("qp", "rkey", 0x440, 32, "RW", 0,
       "R_Key of the QP's memory region: a data packet with another is not placed."),
    _r("qp", "mr_va", 0x448, 64, "RW", 0, "Start address of the QP's memory region."),
    _r("qp", "mr_length", 0x450, 64, "RW", 0,
       "Bytes in the QP's memory region: a payload must lie wholly inside it."),
    _r("qp", "rx_psn", 0x458, 24, "RW", 0, "First PSN the QP expects from its peer."),
    _r("qp", "rx_msn", 0x45C, 16, "RW", 0, "MSN of the first message the QP expects."),
)

# EV profiles: entry i of a QP's profile is on plane i % planes (the driver orders them so).
_EV = (
    _r("ev", "qp", 0x480, 16, "RW", 0, "QP whose profile ev.load and ev.set_state act on."),
    _r("ev", "index", 0x484, 16, "RW", 0, "Profile entry (below global.evs)."),
    _r("ev", "value", 0x488, 32, "RW", 0, "The EV (see docs/wire-format.md, EV to path)."),
    _r("ev", "load", 0x48C, 2, "CMD", 0,
       "0: entry ev.index of QP ev.qp becomes ev.value, GOOD. 1: ev.value becomes a spare EV of "
       "plane ev.index % planes, taking the place of the next EV of that plane found "
       "ASSUMED_BAD. 2: QP ev.qp's profile and spares are emptied.", limit=2),
    _r("ev", "set_state", 0x490, 2, "CMD", 0,
       "Entry ev.index of QP ev.qp takes this state: 0 GOOD, 1 SKIP, 2 ASSUMED_BAD, 3 DENIED. "
       "Only here can DENIED be set or left."),
    _r("ev", "state", 0x494, 2, "RO", 0,
       "The state of entry ev.index of QP ev.qp now: 0 GOOD, 1 SKIP (left out of this rotation "
       "or the next), 2 ASSUMED_BAD (also an entry outside the profile), 3 DENIED."),
    _r("ev", "entry", 0x498, 32, "RO", 0,
       "The EV entry ev.index of QP ev.qp holds now: the one loaded there, or the spare that "
       "took its place; 0 for an entry at or past ev.size, or not loaded since the profile was "
       "emptied."),
    _r("ev", "size", 0x49C, 16, "RO", 0,
       "The entries in QP ev.qp's profile: those written since it was last emptied (ev.load "
       "2), up to global.evs."),
)

# The NIC's addresses on each plane's network, and its ports' administrative state.
_NET = tuple(
    _r("net", f"next_hop_p{p}", 0x800 + 8 * p, 48, "RW", 0,
       f"The Ethernet destination of every frame sent on plane {p}: the MAC of the router port "
       "the NIC is cabled to there (on a routed fabric the next hop is the leaf, not the peer). "
       "0: each QP's qp.dst_mac.")
    for p in range(MAX_PLANES)) + tuple(
    _r("net", f"sid_p{p}", 0x840 + 16 * p, 128, "RW", 0,
       f"This NIC's SRv6 address on plane {p} (the locator block and the NIC's own uSID): an "
       "SRv6 frame that arrives there for another address, or with SRH segments left, is "
       "dropped (rx.drop_not_mine). 0: any outer destination is taken.")
    for p in range(MAX_PLANES)) + (
    _r("net", "port_admin", 0x8C0, MAX_PLANES, "RW", (1 << MAX_PLANES) - 1,
       "Bit p: port p is administratively up. A port set down is down to everything: nothing "
       "is sent on it, the frames that arrive on it are discarded whole (net.disabled_drops), "
       "and the peers hear it is down (port status), as if its link had failed."),
    _r("net", "port_up", 0x8C4, MAX_PLANES, "RO", 0,
       "Bit p: port p is up: its link is (the MAC's port_ready) and net.port_admin lets it."),
    _count("net", "disabled_drops", 0x8C8,
           "Frames discarded because they arrived on a port net.port_admin holds down.",
           step=MAX_PLANES.bit_length()),       # one a plane a cycle
)

# uSID templates: one per destination leaf (see EV to path).
_TPL = (
    _r("tpl", "block", 0x500, 32, "RW", 0,
       "The locator block, the carrier's top 16 or 32 bits (tpl.format)."),
    _r("tpl", "format", 0x50C, 1, "RW", 0,
       "The carrier format: 0 F1616 (16-bit block, seven 16-bit uSIDs a carrier), 1 F3216 "
       "(32-bit block, six).", limit=1),
    _r("tpl", "count", 0x504, 4, "RW", 0, "uSIDs in the path (at most global.max_usids).",
       limit=2 * USID_WORDS),
    _r("tpl", "spine_index", 0x508, 4, "RW", 0,
       "Which uSID is the spine's (the EV picks the spine there).", limit=2 * USID_WORDS - 1),
    _r("tpl", "usids", 0x510, 32 * USID_WORDS, "RW", 0,
       "The uSIDs in hop order, 16 bits each, the first in the low bits."),
    _r("tpl", "write", 0x530, 8, "CMD", 0,
       "Write a template number (below global.templates): it becomes the tpl.* fields."),
)

# Work requests and completions through registers, for a host that has only register access
# (a board's management port): stage a request in wq.*, post it with wq.post; completions wait
# in the completion queue (cq.*) when cq.route sends them there.
_WQ = (
    _r("wq", "qp", 0x900, 16, "RW", 0, "The QP the posted request is for."),
    _r("wq", "opcode", 0x904, 1, "RW", 0,
       "0 WRITE, 1 WRITE_IMM (the peer completes a receive carrying wq.imm)."),
    _r("wq", "laddr", 0x908, 64, "RW", 0, "Where the payload is in this NIC's memory."),
    _r("wq", "va", 0x910, 64, "RW", 0, "Where it goes in the peer's memory region."),
    _r("wq", "rkey", 0x918, 32, "RW", 0, "The R_Key of the peer's memory region."),
    _r("wq", "length", 0x91C, 32, "RW", 0,
       "Bytes to write (1 .. 2^31; other lengths complete with an error)."),
    _r("wq", "imm", 0x920, 32, "RW", 0, "The immediate of a WRITE_IMM."),
    _r("wq", "post", 0x924, 16, "CMD", 0,
       "Write a work request id: the request staged in wq.* is posted with it. Pending until "
       "the TX side takes it, which it does only while global.control bit 0 is set."),
    _count("wq", "posted", 0x928, "Work requests posted through wq.post."),
)

#: cq.route bits
CQ_ROUTE_SEND, CQ_ROUTE_RECV = 1, 2
#: cq.entry's fields: name -> (lowest bit, width). ``recv`` 0: a send completion (wr_id, qp,
#: status); 1: a message received whole (qp, msn, has_imm, imm; status OK).
CQ_ENTRY = {"wr_id": (0, 16), "qp": (16, 16), "status": (32, 4), "recv": (36, 1),
            "has_imm": (37, 1), "msn": (48, 16), "imm": (64, 32)}

_CQ = (
    _r("cq", "route", 0x940, 2, "RW", 0,
       f"Bit 0 ({CQ_ROUTE_SEND}): send completions go to the completion queue here instead of "
       f"the completion stream; bit 1 ({CQ_ROUTE_RECV}): receive completions likewise."),
    _r("cq", "count", 0x944, 16, "RO", 0, "Entries waiting in the completion queue."),
    _r("cq", "entry", 0x948, 96, "RO", 0,
       "The oldest entry (all zero when none): bits 15:0 wr_id, 31:16 QP, 35:32 status, 36 "
       "recv (0 a work request completed, 1 a message received whole), 37 has_imm, 63:48 MSN "
       "(recv), 95:64 the immediate (recv with has_imm)."),
    _r("cq", "pop", 0x954, 1, "CMD", 0, "Write 1: the oldest entry leaves the queue."),
    _count("cq", "overflows", 0x958,
           "Completions lost because the queue was full (cq.depth entries): poll it often "
           "enough."),
    _r("cq", "depth", 0x95C, 32, "CONST", 0, "Entries the completion queue holds."),
)

def unpack(layout: dict, value: int) -> dict[str, int]:
    """The fields of a queue entry (``layout``: CQ_ENTRY or EVQ_ENTRY), by name."""
    return {name: value >> low & ((1 << width) - 1) for name, (low, width) in layout.items()}


def pack(layout: dict, fields: dict) -> int:
    """A queue entry from its fields by name (those left out are zero), as the NIC lays it out."""
    return sum(int(v) << layout[name][0] for name, v in fields.items())


#: what a CC profile sets: the rel.* registers of these names are profile 0, every QP's at
#: reset; the cc.* ones of the same names stage profiles 1 and up
CC_PARAMS = ("target_rtt", "cwnd_init", "cwnd_min", "cwnd_max", "cc_fair", "cc_gain", "cc_md")


def _cc_registers(rel):
    """The cc.* block: a staging register for each of CC_PARAMS, as wide as its rel.* register
    and reset the same, then the command that stores them as a profile."""
    by = {r.name: r for r in rel}
    regs = [_r("cc", name, 0xB00 + 4 * i, by[name].width, "RW", by[name].reset,
               f"Staged for cc.write, as rel.{name} is for profile 0. {by[name].doc}")
            for i, name in enumerate(CC_PARAMS)]
    regs += [
        _r("cc", "write", 0xB00 + 4 * len(CC_PARAMS), 8, "CMD", 0,
           "Write a CC profile number, 1 .. global.cc_profiles - 1: that profile takes the cc.* "
           "values, and every QP whose qp.cc_profile names it follows them from then on. "
           "Profile 0 is the rel.* registers themselves (0 is taken and changes nothing)."),
        _r("cc", "view", 0xB00 + 4 * (len(CC_PARAMS) + 1), 8, "RO", 0,
           "The CC profile QP rel.view_qp follows (its qp.cc_profile when last written)."),
    ]
    return regs


#: evq.entry's fields: name -> (lowest bit, width); ``others`` covers this many entries
EVQ_OTHERS = 64
EVQ_ENTRY = {"qp": (0, 16), "index": (16, 16), "state": (32, 2), "management": (34, 1),
             "replaced": (35, 1), "others": (64, EVQ_OTHERS)}

# EV events: the changes of EV state the reliability engine and management make, for the
# controller (mrc_ctl.h's EV event queue).
_EVQ = (
    _r("evq", "mask", 0x9E0, 4, "RW", 0,
       "Bit s: changes to EV state s are queued (1 GOOD, 4 ASSUMED_BAD, 8 DENIED; SKIP, the "
       "NIC's own for a rotation or more, is never a change). 0: none."),
    _r("evq", "count", 0x9E4, 16, "RO", 0, "Events waiting in the EV event queue."),
    _r("evq", "pop", 0x9E8, 1, "CMD", 0, "Write 1: the oldest event leaves the queue."),
    _count("evq", "overflows", 0x9EC,
           "Events lost because the queue was full (evq.depth events): an exact count."),
    _r("evq", "depth", 0x9F0, 32, "CONST", 0, "Events the EV event queue holds."),
    _r("evq", "entry", 0xA00, 128, "RO", 0,
       "The oldest event (all zero when none): bits 15:0 the QP, 31:16 the profile entry, "
       "33:32 its new state, 34 set by management (ev.set_state), 35 a spare EV took the "
       "entry's place (ASSUMED_BAD), 127:64 the other entries of the QP that went "
       "ASSUMED_BAD with it, their path's (bit i: entry i)."),
)

# Endpoint requests: what the controller asks the NIC to send (mrc_ctl.h's EV_PROBE and
# PORT_STATUS_UPDATE).
_EP = (
    _r("ep", "qp", 0xA40, 16, "RW", 0, "The QP whose profile entry ep.probe probes."),
    _r("ep", "entry", 0xA44, 16, "RW", 0, "The entry of QP ep.qp's profile ep.probe probes."),
    _r("ep", "probe", 0xA48, 1, "CMD", 0,
       "Write 1: a probe leaves on entry ep.entry of QP ep.qp, as the NIC's own probes of "
       "ASSUMED_BAD entries do, and its answer is timed (ep.answers, ep.rtt). Refused, and "
       "counted in ep.refused, while that entry's plane has its port down. Pending until the "
       "probe has gone to the TX side."),
    _r("ep", "answers", 0xA4C, 32, "RO", 0,
       "Probe answers heard for entry ep.entry of QP ep.qp (whoever sent the probe)."),
    _r("ep", "rtt", 0xA50, 16, "RO", 0,
       "The round trip of the last of them, in cycles: from the probe's send time, which its "
       "answer echoes, to the answer's arrival."),
    _count("ep", "refused", 0xA54,
           "ep.probe commands refused: the entry's plane had its port down, so nothing was "
           "sent."),
    _r("ep", "status", 0xA58, 1, "CMD", 0,
       "Write 1: this NIC's port status goes to every RTR or RTS QP's peer now, as when a port "
       "changes (rel.status_sent counts them); nothing while global.control bit 0 is clear."),
)

#: the most bytes one mem.access moves (mem.wdata, mem.rdata)
MEM_WINDOW_BYTES = 32

# A window onto the memory behind the NIC's memory ports (host memory, or a board's own).
_MEM = (
    _r("mem", "addr", 0x980, 64, "RW", 0, "Address of the access's first byte."),
    _r("mem", "length", 0x988, 6, "RW", MEM_WINDOW_BYTES,
       f"Bytes an access moves, 0 .. {MEM_WINDOW_BYTES} (0: the access does nothing).",
       limit=MEM_WINDOW_BYTES),
    _r("mem", "access", 0x98C, 1, "CMD", 0,
       "0: read mem.length bytes at mem.addr into mem.rdata; 1: write the first mem.length "
       "bytes of mem.wdata there. Pending until the memory has answered."),
    _r("mem", "error", 0x990, 1, "RO", 0,
       "1: the memory refused the last access (a read's mem.rdata is then zero)."),
    _count("mem", "errors", 0x994, "Accesses the memory refused."),
    _r("mem", "wdata", 0x9A0, 8 * MEM_WINDOW_BYTES, "RW", 0,
       "The bytes a write puts in memory, byte 0 (at mem.addr) in the low bits."),
    _r("mem", "rdata", 0x9C0, 8 * MEM_WINDOW_BYTES, "RO", 0,
       "The bytes the last read found, byte 0 in the low bits; zero past mem.length."),
)


# What each profile entry's path did (hdl/path_stats.py): select an entry, read its record.
_PATH = (
    _r("path", "qp", 0xB40, 16, "RW", 0, "The QP whose profile entry path.* shows."),
    _r("path", "entry", 0xB44, 16, "RW", 0, "The entry of QP path.qp's profile path.* shows."),
    _r("path", "rtt", 0xB48, 16, "RO", 0,
       "The round trip of the last packet sent on that entry that a SACK timed, in cycles (0: "
       "none yet). A SACK times the packet that triggered it, so with SACKs coalesced some "
       "entries may seldom be timed; ep.probe times any entry."),
    _r("path", "timed", 0xB4C, 32, "RO", 0, "Packets sent on that entry that a SACK timed."),
    _r("path", "ecn", 0xB50, 32, "RO", 0, "Of those, the ones that arrived ECN-marked."),
    _r("path", "acked", 0xB54, 32, "RO", 0,
       "Packets sent on that entry that arrived (SACKed, or acknowledged cumulatively)."),
    _r("path", "lost", 0xB58, 32, "RO", 0,
       "Packets sent on that entry that were sent again: SACK holes, trims and timeouts (in "
       "GO_BACK_N, also every packet after a loss). The counts run from reset, whatever EV the "
       "entry held."),
)

#: words in store.data
STORE_WORDS = 1024

# What the host keeps on the NIC, so that every program driving it sees the same: the
# controller's profiles and the bindings of QPs to them (sw/store.py lays the words out).
#: What a board's Ethernet MAC counts, per port (hdl/eth_mac.py names its outputs so).
MAC_COUNTERS = {
    "rx_frames": "good frames received and passed on",
    "rx_bytes": "bytes of those frames, FCS not counted",
    "rx_fcs_errors": "frames dropped for a wrong FCS",
    "rx_phy_errors": "frames dropped for a PHY error (RX_ER) or no preamble and SFD",
    "rx_runts": "frames dropped for being shorter than 64 bytes",
    "rx_oversize": "frames dropped for being longer than the MAC's largest frame",
    "rx_overflows": "frames dropped because the receive buffer was full",
    "tx_frames": "frames sent",
    "tx_bytes": "bytes of those frames, padding included, FCS not",
    "tx_underruns": "frames cut short (ended with TX_ER) because their data came too late",
}
#: What a board's management port counts (hdl/management_port.py names its outputs so).
MGMT_COUNTERS = {
    "arp_replies": "ARP requests for the board's IPv4 address answered",
    "nd_replies": "IPv6 neighbour solicitations for its IPv6 address answered",
    "nd_bad": "neighbour solicitations dropped: a wrong checksum, or too long to look at",
    "nd_missed": "ARP requests and solicitations not answered: two replies were already due",
    "executed": "management requests carried out (whatever their status)",
    "replayed": "retransmitted requests answered from the reply they had",
    "refused": "requests answered with the status of the rule they break, not carried out",
    "dropped": "frames for the management port that were no well-formed request",
    "missed": "requests that arrived while another was being served (not answered)",
}
#: The MAC counters that count bytes, and the widths of their increments: a received frame's
#: bytes at its end (frames of up to 16383 bytes), a sent beat's (up to 64).
MAC_COUNTER_STEPS = {"rx_bytes": 14, "tx_bytes": 7}
BOARD_PLANES = 2              # Ethernet ports a board has counters for
#: The blocks only a board has, around the NIC: its address range is theirs alone.
BOARD_BLOCKS = ("board", "gen", "chk", "mac", "mgmt")


def _board_registers():
    regs = [_r("board", "mem_size", 0xC00, 32, "CONST", 0,
               "Bytes of on-chip memory standing in for host memory, from address 0 (a build "
               "parameter).")]
    for block, base, what in (("gen", 0xC10, "writes"), ("chk", 0xC30, "checks")):
        regs += [
            _r(block, "addr", base, 64, "RW", 0, f"First byte of the region it {what}."),
            _r(block, "length", base + 0x8, 32, "RW", 0, "Bytes of the region."),
            _r(block, "seed", base + 0xC, 32, "RW", 0,
               "Seed of the pattern (sw/pattern.py)."),
            _r(block, "start", base + 0x10, 1, "CMD", 0,
               "Write 1: start; pending until done (the block's registers hold still till then)."),
            _r(block, "error", base + 0x14, 1, "RO", 0,
               "The memory refused the last run's access."),
        ]
    regs.append(_r("chk", "bad", 0xC48, 32, "RO", 0,
                   "Bytes of the region that differed from the pattern at the last check."))
    for p in range(BOARD_PLANES):
        regs += [_count("mac", f"{name}_p{p}", 0xC80 + 0x40 * p + 4 * i, f"Port {p}: {doc}.",
                        step=MAC_COUNTER_STEPS.get(name, 1))
                 for i, (name, doc) in enumerate(MAC_COUNTERS.items())]
    regs += [_count("mgmt", name, 0xD00 + 4 * i, doc[0].upper() + doc[1:] + ".")
             for i, (name, doc) in enumerate(MGMT_COUNTERS.items())]
    return tuple(regs)


_STORE = (
    _r("store", "data", 0x1000, 32 * STORE_WORDS, "MEM", 0,
       f"{STORE_WORDS} words of block RAM the NIC keeps for its host software (the datapath "
       "never reads them): the controller's EV format, EV and CC profiles and which QP uses "
       "which, laid out by sw/store.py."),
)


_REL = _rel_registers()

REGISTERS: tuple[Register, ...] = (
    _r("global", "id", 0x000, 32, "CONST", MRCNIC_ID, "Identification: 0x4D524331 ('MRC1')."),
    _r("global", "version", 0x004, 32, "CONST", MRCNIC_VERSION, "Register-map version, major.minor."),
    _r("global", "data_width", 0x008, 32, "CONST", 0, "Datapath width in bits (a build parameter)."),
    _r("global", "planes", 0x00C, 32, "CONST", 0, "Network planes (ports) the NIC was built with."),
    _r("global", "scratch", 0x010, 32, "RW", 0, "Scratch register: reads back what was written."),
    _r("global", "control", 0x014, 1, "RW", 0,
       "Bit 0: the NIC takes work requests. Clear after reset: set it once the NIC is set up. "
       "tx.src_mac and tx.src_ip take effect only while it is clear."),
    _r("global", "bus_errors", 0x018, 32, "RO", 0,
       "CSR accesses refused: unmapped offset, write to a register that is not RW or CMD, a "
       "value too wide or above the limit, a write while the block's command is pending."),
    _r("global", "qps", 0x01C, 32, "CONST", 0, "QPs the NIC was built with."),
    _r("global", "evs", 0x020, 32, "CONST", 0, "The largest EV profile (entries per QP)."),
    _r("global", "templates", 0x024, 32, "CONST", 0, "uSID templates."),
    _r("global", "max_usids", 0x028, 32, "CONST", 0, "uSIDs a template can hold."),
    _r("global", "spines", 0x02C, 32, "CONST", 0,
       "Spines the EV layout names (with global.planes, the layout of docs/wire-format.md)."),
    _r("global", "spares", 0x030, 32, "CONST", 0,
       "Spare EVs each QP keeps per plane (ev.load 1 beyond them is refused)."),
    _r("global", "cc_profiles", 0x034, 32, "CONST", 0,
       "CC profiles: 0, the rel.* registers, and those cc.write stores."),
    _count("icrc", "frames", 0x100, "Frames the ICRC checker has seen."),
    _count("icrc", "bad", 0x104, "Frames whose ICRC was wrong."),
    _count("parser", "frames", 0x200, "Frames the header parser has seen."),
    _count("parser", "errors", 0x204, "Frames the header parser found malformed."),
    _r("parser", "last_error", 0x208, 4, "RO", 0, "Reason code of the last malformed frame."),
    *_tx_registers(), *_QP, *_EV, *_TPL, *_rx_registers(), *_REL,
    *_cc_registers(_REL), *_NET, *_WQ, *_CQ, *_MEM, *_EVQ, *_EP, *_PATH,
    *_STORE, *_board_registers(),
)
#: The NIC's own registers (its register bank), and those a board adds around it.
NIC_REGISTERS = tuple(r for r in REGISTERS if r.block not in BOARD_BLOCKS)
BOARD_REGISTERS = tuple(r for r in REGISTERS if r.block in BOARD_BLOCKS)


def _check(regs):
    seen: dict[int, Register] = {}
    names = set()
    for r in regs:
        end = r.offset + 4 * r.words
        if r.offset % 4 or not 0 <= r.offset or end > 1 << ADDR_WIDTH:
            raise ValueError(f"{r.path}: offset {r.offset:#x} is not a word inside the CSR window")
        if r.access is Access.MEM:
            # a power of two of words at a multiple of its size: the bank decodes it by its
            # high address bits alone
            if (r.width % 32 or r.words & (r.words - 1) or r.offset % (4 * r.words)
                    or r.limit is not None or r.reset):
                raise ValueError(f"{r.path}: a MEM register is a power of two of words at a "
                                 "multiple of its size, with no limit and reset 0")
        elif not 1 <= r.width <= (32 if r.access in (Access.CONST, Access.CMD) else 256):
            raise ValueError(f"{r.path}: width {r.width} is out of range")
        if r.limit is not None and not (r.words == 1 and 0 <= r.limit < 1 << r.width):
            raise ValueError(f"{r.path}: limit {r.limit} does not fit its width (or the "
                             "register is wider than a word, where limits do not apply)")
        for off in range(r.offset, end, 4):
            if off in seen:
                raise ValueError(f"{r.path} and {seen[off].path} share offset {off:#x}")
            seen[off] = r
        if r.path in names:
            raise ValueError(f"{r.path} is declared twice")
        names.add(r.path)


_check(REGISTERS)
_BY_NAME = {r.path: r for r in REGISTERS}
_BY_OFFSET = {r.offset + 4 * k: r for r in REGISTERS for k in range(r.words)}


def by_name(path: str) -> Register:
    try:
        return _BY_NAME[path]
    except KeyError:
        raise KeyError(f"no register named {path!r}; registers are named block.name, "
                       f"e.g. {REGISTERS[0].path}") from None


def by_offset(offset: int) -> Register | None:
    """The register one of whose words is at ``offset``."""
    return _BY_OFFSET.get(offset)


def plane_of(r: Register) -> int | None:
    """The plane a per-plane register (``<name>_p<n>``) belongs to; None for the others."""
    head, sep, tail = r.name.rpartition("_p")
    return int(tail) if sep and head and tail.isdigit() else None


def memories() -> list[Register]:
    """The MEM registers."""
    return [r for r in REGISTERS if r.access is Access.MEM]


def commands(block: str) -> list[Register]:
    return [r for r in REGISTERS if r.block == block and r.access is Access.CMD]
