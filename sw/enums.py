"""The values the register map's enumerated fields take: QP states, route modes, EV states,
profile load operations, reliability modes, MTU codes. The driver writes them and the
gateware decodes them, so they live here, once, and the gateware imports them.

With Amaranth installed each is an ``amaranth.lib.enum.Enum`` of the field's width (a shape
the gateware's signals and layouts take); without it, as in a plain install of the host
tools, a standard ``enum.Enum`` with the same members and values.
"""

from __future__ import annotations

try:
    from amaranth.lib.enum import Enum

    def _bits(width: int) -> dict:
        return {"shape": width}
except ImportError:               # the host tools alone: no gateware, no shapes
    from enum import Enum

    def _bits(width: int) -> dict:
        return {}

__all__ = ["QpState", "SrMode", "EvState", "LoadOp", "RelMode", "WrOpcode", "WrStatus",
           "MTU_CODES"]

#: mtu field value -> bytes
MTU_CODES = {0: 256, 1: 512, 2: 1024, 3: 2048, 4: 4096}


class QpState(Enum, **_bits(3)):
    RESET = 0
    INIT = 1
    RTR = 2    # ready to receive
    RTS = 3    # ready to send
    ERROR = 4


class SrMode(Enum, **_bits(2)):
    """How the QP's packets are routed."""
    PLAIN = 0      # plain RoCEv2: no outer header, switches hash the EV
    USID = 1       # SRv6: outer IPv6 to the uSID carrier
    USID_SRH = 2   # SRv6: outer IPv6 and an SRH when the path needs more than one carrier


class EvState(Enum, **_bits(2)):
    """The health of one EV of a QP's profile (MRC-REFERENCE, EV states)."""
    GOOD = 0         # sprayed on
    SKIP = 1         # left out for a rotation (ECN seen) or tx.trim_rounds (trimmed)
    ASSUMED_BAD = 2  # not used until a probe brings it back; replaced by a backup when one exists
    DENIED = 3       # set and cleared by management only


class LoadOp(Enum, **_bits(2)):
    """What a profile load does (the value of the ``ev.load`` command)."""
    ENTRY = 0    # entry ``index`` becomes ``ev``, GOOD
    SPARE = 1    # ``ev`` becomes a spare of plane ``index % planes``
    CLEAR = 2    # the QP's profile and spares are emptied (a new, perhaps smaller, one follows)


class RelMode(Enum, **_bits(2)):
    """How the sender recovers (the ``rel.mode`` register)."""
    SELECTIVE = 0   # MRC: retransmit exactly the packets the SACKs show missing
    GO_BACK_N = 1   # plain RoCE: on a loss, resend everything from the first missing packet
    OFF = 2         # nothing is retransmitted: a packet counts as acknowledged once sent


class SprayMode(Enum, **_bits(2)):
    """How the spray scheduler picks each packet's EV (the ``tx.spray`` register)."""
    ROUNDS = 0   # MRC: planes in turn, each plane's eligible EVs in rounds, each used once a round
    RANDOM = 1   # oblivious spraying: an eligible EV drawn afresh for every packet
    SEQUENCE = 2  # MRC's rounds, each taken in profile order from a pseudo-random entry


class WrOpcode(Enum, **_bits(1)):
    """What a work request does (the ``wq.opcode`` register, the work-request stream)."""
    WRITE = 0
    WRITE_IMM = 1    # RDMA write with immediate: the peer completes a receive carrying it


class WrStatus(Enum, **_bits(3)):
    """A completion's status: OK, or why a work request failed (the completion of a good one
    comes with its acknowledgement)."""
    OK = 0
    ZERO_LENGTH = 1
    TOO_LONG = 2      # over 2 GiB
    BAD_QP = 3        # no such QP
    QP_NOT_RTS = 4    # the QP is not ready to send
    MEMORY = 5        # the host memory read failed (reported by the header builder)
