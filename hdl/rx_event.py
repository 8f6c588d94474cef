"""What the RX transport decides about each packet, and the records that carry it on: to the
message completer, the acknowledgement generator and the TX side."""

from amaranth.lib import data, enum

from mrcnic import wire

from .reorder_tracker import PSN_BITS, SACK_BITS

__all__ = ["RxOutcome", "AckKind", "event_layout", "ack_layout", "completion_layout",
           "TRACKED", "ANSWERED"]


class RxOutcome(enum.Enum, shape=4):
    """What became of a packet; the frame filter counts each but PLACED under its number."""
    PLACED = 0      # a new data packet, written to memory
    EMPTY = 1       # a new data packet with no payload: nothing to write
    DUPLICATE = 2   # arrived before: dropped, acknowledged at once
    BEYOND = 3      # past the PSN window (or its MSN past the message window): NACK
    TRIMMED = 4     # cut by a switch: NACK TRIMMED for an immediate retransmit
    PROBE = 5       # a reliability probe: answered with a SACK (probe-response bit)
    FEEDBACK = 6    # SACK, NACK, ACK or endpoint packet: for the sender's side
    QP = 7          # no such QP, or it is not ready to receive (RTR or RTS)
    RKEY = 8        # R_Key not the QP's memory region's: nothing written, NACK
    BOUNDS = 9      # payload outside the QP's memory region: nothing written, NACK
    OPCODE = 10     # not an MRC opcode
    TRUNCATED = 11  # shorter than its opcode's headers
    TRIMMED_LASTHOP = 12  # cut by the last hop: NACK TRIMMED_LASTHOP (not the path's doing)


#: outcomes that went through the reorder tracker, so their events carry the QP's state
TRACKED = (RxOutcome.PLACED, RxOutcome.EMPTY, RxOutcome.DUPLICATE, RxOutcome.PROBE)
#: outcomes the acknowledgement generator hears about
ANSWERED = TRACKED + (RxOutcome.BEYOND, RxOutcome.TRIMMED, RxOutcome.TRIMMED_LASTHOP,
                      RxOutcome.RKEY, RxOutcome.BOUNDS)


class AckKind(enum.Enum, shape=2):
    SACK = 0
    NACK = 1
    PROBE = 2     # not an acknowledgement: the sender's probe of an ASSUMED_BAD EV (PETH)
    STATUS = 3    # not an acknowledgement: this NIC's port status, told to a QP's peer (ERTH)


def event_layout(qps):
    """One packet's outcome, in arrival order, once its data (if any) is placed."""
    return data.StructLayout({
        "outcome": RxOutcome, "qp": range(qps), "psn": PSN_BITS,
        "ooo": 1, "cack": PSN_BITS, "sack_offset": 16, "sack_bitmap": SACK_BITS,
        "ev": 32, "ce": 1, "ts": 16, "ackreq": 1,
        "is_last": 1, "msn": 16, "imm": 32, "has_imm": 1, "length": 16,
    })


def ack_layout(qps):
    """A SACK or NACK for the TX side to frame (SETH / NETH fields; the rest zero); the TX
    side also frames its probes (kind PROBE) and port-status updates (kind STATUS) from this
    record, from ``qp`` and ``ts``."""
    return data.StructLayout({
        "kind": AckKind, "qp": range(qps),
        "psn": PSN_BITS,          # the PSN it is about (the triggering packet's)
        "ev": 32, "ts": 16,       # the triggering packet's EV and timestamp, echoed
        "m": 2, "pr": 1, "nack_reason": 8,
        "cack": PSN_BITS, "sack_offset": 16, "sack_bitmap": SACK_BITS,
        "ooo_count": 15, "rcvd_bytes": 24, "rcv_cwnd_pen": 7,
    })


def completion_layout(qps):
    """A message that is whole, in MSN order per QP."""
    return data.StructLayout({"qp": range(qps), "msn": 16, "imm": 32, "has_imm": 1})


# The SACK fields the generator fills must exist on the wire as named here.
for _name in ("cack_psn", "sack_offset", "sack_bitmap", "ooo_count", "rcvd_bytes", "rcv_cwnd_pen",
              "m", "pr"):
    wire.SETH.field(_name)
