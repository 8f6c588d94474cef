"""The three transports the NIC runs, each set through its registers alone: MRC, and the two
that users would otherwise run, which MRC is measured against (``make bench``, block
``compare``).

- ``mrc``: every QP sprays over its whole EV profile in rounds, retransmits only what the
  SACKs show missing, and moves off the EVs whose paths lose packets (EV health).
- ``roce``: single-path RoCEv2. Each QP keeps one EV, chosen by a hash of its flow as an
  ECMP switch would, and recovers by going back N; nothing a loss shows moves it.
- ``spray``: oblivious (blind) spraying. Every packet takes an EV of the profile drawn at
  random, and lost ones are retransmitted selectively, but no EV is ever set aside.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from .enums import RelMode, SprayMode

__all__ = ["Transport", "TRANSPORTS", "transport", "flow_path"]


@dataclass(frozen=True)
class Transport:
    name: str
    about: str
    rel_mode: RelMode          # rel.mode
    ev_health: bool            # rel.ev_health
    spray: SprayMode           # tx.spray
    single_path: bool          # one EV per QP (flow_path), not the whole profile


TRANSPORTS = {t.name: t for t in (
    Transport("mrc", "MRC: spraying in rounds, selective retransmit, EV health",
              RelMode.SELECTIVE, True, SprayMode.ROUNDS, False),
    Transport("roce", "single-path RoCEv2: one EV per QP by hash, go-back-N",
              RelMode.GO_BACK_N, False, SprayMode.ROUNDS, True),
    Transport("spray", "oblivious spraying: random EVs, selective retransmit, no EV health",
              RelMode.SELECTIVE, False, SprayMode.RANDOM, False),
)}


def transport(name: str) -> Transport:
    """The transport called ``name``, or a ValueError naming the ones there are."""
    try:
        return TRANSPORTS[name]
    except KeyError:
        raise ValueError(f"no transport {name!r}; transports are {', '.join(TRANSPORTS)}") \
            from None


def flow_path(src_ip: int, dst_ip: int, qp: int, paths: int) -> int:
    """The path (0 .. ``paths`` - 1) an ECMP hash puts a single-path QP's flow on: a
    well-mixed hash (BLAKE2s) of what stays fixed in its headers, its addresses and
    destination QP. Flows collide on a path as hashes do: single-path RoCE's weakness."""
    if paths < 1:
        raise ValueError(f"paths must be at least 1, not {paths!r}")
    key = src_ip.to_bytes(16, "big") + dst_ip.to_bytes(16, "big") + qp.to_bytes(3, "big")
    return int.from_bytes(hashlib.blake2s(key, digest_size=4).digest(), "big") % paths
