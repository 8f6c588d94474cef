"""Reference model of the receiver, written from MRC-REFERENCE in plain Python: what the RX
gateware must decide for each arrival."""

from __future__ import annotations

from dataclasses import dataclass, field

from mrcnic import wire
from mrcnic.hdl.qp_context import QpState
from mrcnic.hdl.reorder_tracker import SACK_BITS, PsnStatus
from mrcnic.hdl.rx_event import RxOutcome

__all__ = ["PSN_MOD", "ReorderModel", "Receiver", "RxQp"]

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

    def arrive(self, qp: int, psn: int, peek: bool = False) -> dict:
        """The tracker's result for PSN ``psn`` of ``qp`` (the fields of result_layout)."""
        q = self.qps.setdefault(qp, _Qp(0))
        diff = (psn - q.base) % PSN_MOD
        if peek:
            status, ooo = PsnStatus.PEEK, 0
        elif diff >= PSN_MOD // 2 or (diff < self.window and psn in q.have):
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
        offset = (rel // SACK_BITS) * SACK_BITS if rel < self.window and not peek else 0
        bitmap = sum(1 << i for i in range(SACK_BITS)
                     if (q.base + offset + i) % PSN_MOD in q.have)
        return {"qp": qp, "psn": psn, "status": status, "ooo": ooo, "cack": q.base,
                "sack_offset": offset, "sack_bitmap": bitmap}


# --- The whole receiver: judge, place, complete, acknowledge -------------------------------------

HEAD = 14 + 40 + 8 + 12          # Ethernet, IPv6, UDP, BTH of a decapsulated frame


@dataclass
class RxQp:
    """A QP's receive context, as management sets it."""
    state: int = 3                  # QpState.RTS
    rkey: int = 0
    mr_va: int = 0
    mr_length: int = 0
    rx_psn: int = 0
    rx_msn: int = 0


@dataclass
class _AckState:
    pending: int = 0
    ooo_count: int = 0
    rcvd_bytes: int = 0
    last: dict = field(default_factory=dict)


class Receiver:
    """What the RX gateware must do with each frame that passes its front end, frame by frame in
    the order it judges them: the outcome, the memory writes, the completions (MSN order) and
    the SACKs and NACKs (the rules of hdl/ack_generator.py). Timeout SACKs are left to
    :meth:`flush`."""

    def __init__(self, qps: int, contexts: dict, *, window=256, messages=16, coalesce=1):
        self.O = RxOutcome
        self.nqps, self.messages, self.coalesce = qps, messages, max(coalesce, 1)
        self.ctx = dict(contexts)
        self.tracker = ReorderModel(window)
        self.next_msn, self.slots, self.acks_state = {}, {}, {}
        for q, c in self.ctx.items():
            self.tracker.init(q, c.rx_psn)
            self.next_msn[q] = c.rx_msn
            self.slots[q] = {}
            self.acks_state[q] = _AckState()
        self.writes: list[tuple[int, bytes]] = []
        self.completions: list[dict] = []
        self.acks: list[dict] = []
        self.feedback: list[bytes] = []
        self.counts = {o: 0 for o in RxOutcome}
        self.ooo = 0

    def receive(self, frame: bytes, tc: int) -> RxOutcome:
        """One plain RoCEv2 frame (ICRC included) whose arrival traffic class was ``tc``."""
        O = self.O
        ip = wire.IPV6.unpack(frame[14:])
        udp = wire.UDP.unpack(frame[54:])
        bth = wire.BTH.unpack(frame[62:])
        ext_bytes = frame[HEAD:HEAD + 36].ljust(36, b"\0")
        op = bth["opcode"]
        ev = (udp["sport"] << 16) | (ip["flow_label"] & 0xFFFF)
        rec = {"psn": bth["psn"], "ev": ev, "ce": int(tc & 3 == 3), "ts": 0,
               "ackreq": bth["ackreq"], "is_last": 0, "msn": 0, "imm": 0, "has_imm": 0,
               "length": 0}
        try:
            opcode = wire.Opcode(op)
        except ValueError:
            return self._count(O.OPCODE)
        data = opcode in wire.DATA_OPCODES
        hdrs = wire.headers_after_bth(opcode, bool(bth["tsh"]) if data else False)
        ext = sum(h.length for h in hdrs)
        if len(frame) < HEAD + ext + 4:
            return self._count(O.TRUNCATED)
        if not data and opcode is not wire.Opcode.PROBE:
            self.feedback.append(frame)
            return self._count(O.FEEDBACK)
        fields, at = {}, 0
        for h in hdrs:
            fields[h.name] = h.unpack(ext_bytes[at:])
            at += h.length
        qp = fields["PETH"][wire.PROBE_QP_FIELD] if not data else bth["dqp"]
        c = self.ctx.get(qp)
        if qp >= self.nqps or c is None or c.state not in (QpState.RTR.value, QpState.RTS.value) \
                or (data and qp == wire.PROBE_DQP):
            return self._count(O.QP)
        rec["qp"] = qp
        if not data:
            rec["ts"] = fields["PETH"]["tx_timestamp"]
            t = self.tracker.arrive(qp, bth["psn"], peek=True)
            return self._event(O.PROBE, rec, t)
        rec["msn"] = fields["METH"]["msn"]
        rec["ts"] = fields["TSETH"]["tx_timestamp"] if "TSETH" in fields else 0
        rec["is_last"] = int(opcode in (wire.Opcode.WRITE_LAST, wire.Opcode.WRITE_LAST_IMM,
                                        wire.Opcode.WRITE_ONLY, wire.Opcode.WRITE_ONLY_IMM))
        rec["has_imm"] = int("IMMDT" in fields)
        rec["imm"] = fields["IMMDT"]["imm"] if "IMMDT" in fields else 0
        trimmed = (tc >> 2) in wire.TRIMMED_CLASSES
        payload = b"" if trimmed else frame[HEAD + ext:-4]
        rec["length"] = len(payload)
        va, rkey = fields["RETH"]["va"], fields["RETH"]["rkey"]
        if trimmed:
            last = (tc >> 2) == wire.DscpClass.TRIMMED_LASTHOP
            return self._event(O.TRIMMED_LASTHOP if last else O.TRIMMED, rec, None)
        if rkey != c.rkey:
            return self._event(O.RKEY, rec, None)
        if va < c.mr_va or va + len(payload) > c.mr_va + c.mr_length:
            return self._event(O.BOUNDS, rec, None)
        ahead = (rec["msn"] - self.next_msn[qp]) % (1 << 16)
        if ahead < 1 << 15 and ahead >= self.messages:
            return self._event(O.BEYOND, rec, None)
        t = self.tracker.arrive(qp, bth["psn"])
        if t["status"] == PsnStatus.NEW:
            out = O.PLACED if payload else O.EMPTY
            if payload:
                self.writes.append((va, payload))
            self.ooo += t["ooo"]
        elif t["status"] == PsnStatus.DUPLICATE:
            out = O.DUPLICATE
        else:
            out = O.BEYOND
        return self._event(out, rec, t)

    def _count(self, outcome):
        self.counts[outcome] += 1
        return outcome

    def _event(self, outcome, rec, t):
        O = self.O
        self._count(outcome)
        t = t or {"ooo": 0, "cack": 0, "sack_offset": 0, "sack_bitmap": 0}
        e = {**rec, "ooo": t["ooo"],
             "cack": t["cack"], "sack_offset": t["sack_offset"], "sack_bitmap": t["sack_bitmap"]}
        q = rec["qp"]
        # The completer.
        M = self.messages
        if outcome in (O.PLACED, O.EMPTY) and e["is_last"]:
            self.slots[q][e["msn"] % M] = (e["psn"], e["imm"], e["has_imm"])
        if outcome in (O.PLACED, O.EMPTY, O.DUPLICATE, O.PROBE):
            while True:
                s = self.slots[q].get(self.next_msn[q] % M)
                if s is None or (e["cack"] - s[0] - 1) % PSN_MOD >= PSN_MOD // 2:
                    break
                self.completions.append({"qp": q, "msn": self.next_msn[q], "imm": s[1],
                                         "has_imm": s[2]})
                del self.slots[q][self.next_msn[q] % M]
                self.next_msn[q] = (self.next_msn[q] + 1) % (1 << 16)
        # The acknowledgement generator.
        st = self.acks_state[q]
        view = {k: e[k] for k in ("psn", "ev", "ts", "cack", "sack_offset", "sack_bitmap")}
        mark = wire.SackMark.SKIP_ONCE if e["ce"] else wire.SackMark.NONE
        if outcome in (O.PLACED, O.EMPTY):
            st.ooo_count = (st.ooo_count + e["ooo"]) % (1 << 15)
            st.rcvd_bytes = (st.rcvd_bytes + e["length"]) % (1 << 24)
            st.last = view
            st.pending += 1
            if e["ce"] or e["ackreq"] or st.pending >= self.coalesce:
                self._sack(q, view, st, m=mark)
        elif outcome is O.DUPLICATE:
            st.last = view
            self._sack(q, view, st, m=mark)
        elif outcome is O.PROBE:
            self._sack(q, view, st, m=mark, pr=1)
        else:
            reason = {O.BEYOND: wire.NackReason.PSN_OOR_WINDOW,
                      O.TRIMMED: wire.NackReason.TRIMMED,
                      O.TRIMMED_LASTHOP: wire.NackReason.TRIMMED_LASTHOP,
                      }.get(outcome, wire.NackReason.UNEXP_EVENT)
            self.acks.append(_ack(kind=1, qp=q, psn=e["psn"], ev=e["ev"], ts=e["ts"],
                                  nack_reason=int(reason)))
        return outcome

    def _sack(self, q, view, st, m=0, pr=0):
        st.pending = 0
        self.acks.append(_ack(kind=0, qp=q, m=int(m), pr=pr, ooo_count=st.ooo_count,
                              rcvd_bytes=st.rcvd_bytes, **view))

    def regions(self) -> dict[int, tuple[int, bytes]]:
        """Each QP's memory region (start, what it must hold): the model's writes into it, zeros
        elsewhere."""
        out = {}
        for q, c in self.ctx.items():
            if not c.mr_length:
                continue
            want = bytearray(c.mr_length)
            for va, data in self.writes:
                if c.mr_va <= va < c.mr_va + c.mr_length:
                    want[va - c.mr_va:va - c.mr_va + len(data)] = data
            out[q] = (c.mr_va, bytes(want))
        return out

    def flush(self) -> dict:
        """The SACK each QP still owes once its timeout passes, by QP."""
        out = {}
        for q, st in self.acks_state.items():
            if st.pending:
                out[q] = _ack(kind=0, qp=q, ooo_count=st.ooo_count, rcvd_bytes=st.rcvd_bytes,
                              **st.last)
                st.pending = 0
        return out


def _ack(**fields) -> dict:
    base = dict.fromkeys(("kind", "qp", "psn", "ev", "ts", "m", "pr", "nack_reason", "cack",
                          "sack_offset", "sack_bitmap", "ooo_count", "rcvd_bytes",
                          "rcv_cwnd_pen"), 0)
    base.update(fields)
    return base
