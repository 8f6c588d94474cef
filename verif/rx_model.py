"""Reference model of the receiver, written from MRC-REFERENCE in plain Python: what the RX
gateware must decide for each arrival."""

from __future__ import annotations

from dataclasses import dataclass, field

from mrcnic.hdl.reorder_tracker import SACK_BITS, PsnStatus

__all__ = ["PSN_MOD", "ReorderModel"]

PSN_MOD = 1 << 24


@dataclass
class _Qp:
    base: int                       # the first PSN not yet arrived
    have: set = field(default_factory=set)   # PSNs past base that have arrived


class ReorderModel:
    """Per QP: the cumulative PSN and the PSNs arrived past it, within ``window``."""

    def __init__(self, window=256):
        self.window = window
        self.qps: dict[int, _Qp] = {}

    def init(self, qp: int, psn: int) -> None:
        self.qps[qp] = _Qp(psn % PSN_MOD)

    def arrive(self, qp: int, psn: int) -> dict:
        """The tracker's result for PSN ``psn`` of ``qp`` (the fields of result_layout)."""
        q = self.qps.setdefault(qp, _Qp(0))
        diff = (psn - q.base) % PSN_MOD
        if diff >= PSN_MOD // 2 or (diff < self.window and psn in q.have):
            status, ooo = PsnStatus.DUPLICATE, 0
        elif diff < self.window:
            status, ooo = PsnStatus.NEW, int(diff != 0)
            q.have.add(psn)
            while q.base in q.have:
                q.have.discard(q.base)
                q.base = (q.base + 1) % PSN_MOD
        else:
            status, ooo = PsnStatus.BEYOND, 0
        rel = (psn - q.base) % PSN_MOD
        offset = (rel // SACK_BITS) * SACK_BITS if rel < self.window else 0
        bitmap = sum(1 << i for i in range(SACK_BITS)
                     if (q.base + offset + i) % PSN_MOD in q.have)
        return {"qp": qp, "psn": psn, "status": status, "ooo": ooo, "cack": q.base,
                "sack_offset": offset, "sack_bitmap": bitmap}
