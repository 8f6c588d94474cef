"""Why an EV did or did not leave a dead path: a system run's captures replayed through the
reliability engine's reference model (verif/rel_model.py), one QP of one host.

    python -m mrcnic.verif.failover_trace RUN_DIR [--host 0] [--qp 0] [--all]

``RUN_DIR`` is what ``make demo`` (or a bench or test run) left: ``results.json`` and
``pcap/``. What the host's ports sent (data, probes) and received (SACKs, NACKs) is fed to the
model in time order; every event that touches the failed path's entries is printed: each
packet sent on them, each SACK hole the model finds there, each EV state change and why
(a hole, a second hole on a suspect path, a timeout, a probe's answer), and each time the path's
suspicion is cleared and by what. ``--all`` prints every QP event.

Each event is put where the NIC's reliability engine met it, not where the port did: a
packet sent where it was granted (its TSETH stamp, the NIC's cycle count then, which
``results.json``'s ``ts_origin_ns`` places in simulation time), a SACK or NACK
``FEEDBACK_NS`` after it reached the port (the receive pipeline's latency). Under load a
packet waits microseconds between its grant and the wire, and a SACK that the engine took in
between finds its record already there (a retransmission's, on another path): replayed in
capture order, the model blamed and excused other paths than the NIC did. The model runs the
NIC's retransmission timer itself; a retransmission it did not order means the NIC's timer
fired first (its RTT samples are taken where the receive pipeline delivers each SACK), and
the replay is out of step from there (``desync_us``).
"""

from __future__ import annotations

import argparse
import heapq
import json
import sys
from pathlib import Path

from scapy.utils import PcapReader

from mrcnic import wire
from mrcnic.evmap import EvLayout
from mrcnic.hdl.retransmit_tracker import RelMode
from mrcnic.hdl.spray_scheduler import EvState
from mrcnic.regmap import by_name
from mrcnic.verif.fabric import frame_ev, ip_offsets
from mrcnic.verif.rel_model import Congestion, Sender
from mrcnic.verif.scenarios import SCENARIOS
from mrcnic.verif.tbkit import CLOCK_NS

DATA = {int(op) for op in wire.DATA_OPCODES}
LAST = {int(wire.Opcode.WRITE_LAST), int(wire.Opcode.WRITE_LAST_IMM),
        int(wire.Opcode.WRITE_ONLY), int(wire.Opcode.WRITE_ONLY_IMM)}
TIME_MOD = 1 << 16
#: From a SACK or NACK at the port to the reliability engine taking it, at 64 bits: 620 of a
#: 1 MiB link-down run's 733 exactly (read in its waves), the rest later, by up to 2.5 us
#: when they queued behind data frames in the receive pipeline (the model then takes them
#: early).
FEEDBACK_NS = 278


def _records(path: Path, direction: str, plane: int):
    """(ns, direction, plane, frame) of every frame in a capture."""
    with PcapReader(str(path)) as rd:
        for pkt in rd:
            yield (int(pkt.time * 1_000_000_000), direction, plane, bytes(pkt))


def _parse(frame: bytes) -> dict:
    """The inner headers of an MRC frame, as the reliability engine reads them."""
    _, inner = ip_offsets(frame)
    udp = inner + wire.IPV6.length
    bth_at = udp + wire.UDP.length
    bth = wire.BTH.unpack(frame[bth_at:])
    out = {"bth": bth, "ev": frame_ev(frame), "op": bth["opcode"]}
    at = bth_at + wire.BTH.length
    for hdr in wire.headers_after_bth(bth["opcode"], bool(bth["tsh"])):
        out[hdr.name] = hdr.unpack(frame[at:])
        at += hdr.length
    out["payload"] = len(frame) - at - wire.ICRC_BYTES
    return out


class Trace:
    def __init__(self, run: Path, host: int, qp: int, every: bool = False, quiet: bool = False):
        self.r = json.loads((run / "results.json").read_text())
        r = self.r
        self.run, self.h, self.qp, self.every, self.quiet = run, host, qp, every, quiet
        self.t0 = r["t0_us"] * 1000
        sc = SCENARIOS[r["scenario"]](planes=r["planes"], spines=r["spines"], width=64,
                                      **r["options"])
        self.sc = sc
        cc = sc.congestion(r["base_rtt_us"])
        self.target = cc["target_rtt"]
        rel = sc.reliability
        self.layout = EvLayout(r["planes"], r["spines"])
        self.model = Sender(r["qps"], 256, reorder=rel["reorder"], mode=RelMode.SELECTIVE,
                            cc=Congestion(target_rtt=cc["target_rtt"], cwnd_init=cc["cwnd_init"],
                                          rcv_wnd=cc["rcv_wnd"]),
                            planes=r["planes"], spines=r["spines"],
                            reo_wnd=rel.get("reo_wnd", by_name("rel.reo_wnd").reset))
        self.rto_min = rel.get("rto_min", by_name("rel.rto_min").reset)
        self.rto_max = rel.get("rto_max", by_name("rel.rto_max").reset)
        self.profile = r["profiles"][f"{host}.{qp}"]
        self.dead = {tuple(p) for f in r["failures"] for p in f["paths"]}
        if "ts_origin_ns" not in r:
            raise ValueError(f"{run}: results.json has no ts_origin_ns (a run from before it "
                             "was recorded): run it again")
        self.origin = r["ts_origin_ns"]   # when the NIC's 16-bit cycle count read 0
        self.tstart = None             # ns the QP's RTO timer runs from (None: not yet started)
        self.desync_us = None          # the first retransmission the model did not order
        self.state = ["GOOD"] * len(self.profile)
        self.events = []               # (us from t0, entry, state, why): every state change
        self.ordered = set()           # PSNs the model has ordered sent again, not yet sent

    def _on_dead(self, ev):
        return (self.layout.plane(ev), self.layout.spine(ev)) in self.dead

    def _entry(self, ev):
        return self.profile.index(ev) if ev in self.profile else None

    def note(self, text):
        if not self.quiet:
            print(text)

    def say(self, ns, text, dead=True):
        if self.quiet:
            return
        if dead or self.every:
            print(f"{(ns - self.t0) / 1000:9.3f} us  {text}")

    def _apply(self, ns, o, why):
        for qp, index, state in o.ev_updates:
            if qp != self.qp:
                continue
            ev = self.profile[index]
            whole = (qp, index) in o.paths
            self.say(ns, f"entry {index:2} ({self._path(ev)}) -> {state.name}"
                     f"{' with its whole path' if whole else ''}: {why}", self._on_dead(ev))
            # (as the spray scheduler takes it: SKIP leaves an ASSUMED_BAD entry bad)
            if not (state is EvState.SKIP and self.state[index] == EvState.ASSUMED_BAD.name):
                self.state[index] = state.name
            t_us = (ns - self.t0) / 1000
            self.events.append((t_us, index, self.state[index], why))
            if whole:
                path = self.layout.path(ev)
                for i, e in enumerate(self.profile):
                    if self.layout.path(e) == path and i != index:
                        self.state[i] = EvState.ASSUMED_BAD.name
                        self.events.append((t_us, i, EvState.ASSUMED_BAD.name,
                                            f"entry {index}'s path"))
        for qp, psn, _ in o.retransmits:
            if qp == self.qp:
                self.ordered.add(psn)

    def _sent(self, ns, pk):
        m, bth, ev = self.model, pk["bth"], pk["ev"]
        ts = pk.get("TSETH", {}).get("tx_timestamp")
        psn, rtx = bth["psn"], bth["rtx"]
        s = m.q[self.qp]
        if not rtx and s.una == s.nxt:
            self.tstart = ns           # the first in flight starts the timer
        index = self._entry(ev)
        if rtx and psn not in self.ordered:
            # The NIC's timer fired before the model's (its RTT estimates differ where SACKs
            # waited behind data in the receive pipeline): from here the replay is out of
            # step with the NIC, the first time kept in ``desync_us``.
            if self.desync_us is None:
                self.desync_us = (ns - self.t0) / 1000
            o, since = m.expire(self.qp, self._now(ns), m.rto(self.qp, self.rto_min,
                                                               self.rto_max))
            self.say(ns, f"timeout (the NIC resent PSN {psn:#x} unbidden: the replay is out "
                     "of step from here)", True)
            self._apply(ns, o, "timeout")
            self._restart(since, ns)
        self.ordered.discard(psn)
        m.sent(self.qp, psn, ev, index if index is not None else 0,
               pk["op"] in LAST, 0, int(rtx), pk["payload"], ts)
        held = self.layout.path(ev) in m.held(self.qp)
        self.say(ns, f"sent PSN {psn:#x}{' again' if rtx else ''} on entry {index} "
                 f"({self._path(ev)}; entry {self.state[index]}"
                 f"{', its path HELD' if held else ''})", self._on_dead(ev))

    def _path(self, ev):
        return f"plane {self.layout.plane(ev)} spine {self.layout.spine(ev)}"

    def _suspects(self):
        return {p for p in self.model.suspect[self.qp]}

    def _events(self, streams):
        """(ns, direction, parsed frame) of the host's MRC frames, each at the time the
        reliability engine met it (the module's docstring), in that order."""
        out = []
        for n, (ns, way, _, frame) in enumerate(heapq.merge(*streams, key=lambda x: x[0])):
            try:
                pk = _parse(frame)
            except (ValueError, KeyError, IndexError):
                continue
            at = ns + FEEDBACK_NS if way == "in" else ns
            if way == "out" and "TSETH" in pk:
                at = self._stamp_ns(pk["TSETH"]["tx_timestamp"], ns)
            out.append((at, n, way, pk))
        out.sort(key=lambda x: (x[0], x[1]))
        return [(at, way, pk) for at, _, way, pk in out]

    def _now(self, ns):
        """The NIC's 16-bit cycle count at ``ns``."""
        return ((ns - self.origin) // CLOCK_NS) % TIME_MOD

    def _stamp_ns(self, stamp, before):
        """The latest time, at or before ``before`` ns, at which the count read ``stamp``."""
        cycles = (before - self.origin) // CLOCK_NS
        return self.origin + (cycles - (cycles - stamp) % TIME_MOD) * CLOCK_NS

    def _restart(self, since, at):
        """The timer after a timeout at ``at`` ns: from then, or from ``since`` (the stamp
        of the oldest packet's latest send, when that went out less than an RTO before)."""
        self.tstart = at if since is None else self._stamp_ns(since, at)

    def _timer(self, upto):
        """The QP's RTO timer, as the tracker keeps it, up to ``upto`` ns: it runs from the
        first send in flight, from each move of the cumulative ack and from each timeout; when
        it fires, what was resent may go again and the oldest outstanding packet is lost,
        unless it went out less than an RTO ago (then the timer runs from that send)."""
        m = self.model
        s = m.q[self.qp]
        while self.tstart is not None and s.una != s.nxt:
            rto = m.rto(self.qp, self.rto_min, self.rto_max)
            due = self.tstart + rto * CLOCK_NS
            if due > upto:
                return
            o, since = m.expire(self.qp, self._now(due), rto)
            if o.retransmits:
                self.say(due, f"timeout: PSN {o.retransmits[0][1]:#x} out for an RTO "
                         f"({rto} cycles)", True)
            else:
                self.say(due, f"timeout ({rto} cycles): the oldest outstanding went out again "
                         "lately; what was resent may go again", False)
            self._apply(due, o, "timeout")
            self._restart(since, due)

    def run_trace(self):
        r, h = self.r, self.h
        streams = []
        for p in range(r["planes"]):
            streams.append(_records(self.run / "pcap" / f"p{p}_host{h}-p{p}_leaf{h}.pcap", "out", p))
            streams.append(_records(self.run / "pcap" / f"p{p}_leaf{h}-p{p}_host{h}.pcap", "in", p))
        m = self.model
        dead_paths = {self.layout.path(self.layout.make(p, s)) for p, s in self.dead}
        f = r["failures"][0]
        self.note(f"run {self.run}: seed {r['seed']}, host {h} QP {self.qp}; "
                  f"{f['what']} dies at {f['at_us'] - r['t0_us']:.3f} us"
                  + ("" if f["until_us"] is None else
                     f", returns at {f['until_us'] - r['t0_us']:.3f} us")
                  + f"; base RTT {r['base_rtt_us']:.3f} us; target {self.target} cycles; "
                  f"reorder {m.reorder}, reo_wnd {m.reo_wnd} cycles")
        self.note("entries on the failed path: " + ", ".join(
            str(i) for i, ev in enumerate(self.profile) if self._on_dead(ev)))
        m.init(self.qp, 0)
        started = False
        early = {}
        for ns, way, pk in self._events(streams):
            self._timer(ns)
            bth, op, ev = pk["bth"], pk["op"], pk["ev"]
            before = self._suspects() & dead_paths
            if way == "out" and op in DATA and bth["dqp"] == self.qp:
                if not started:
                    m.init(self.qp, bth["psn"])
                    started = True
                # (captured as the leaf got them: across planes, new PSNs may come out of order)
                if not bth["rtx"] and bth["psn"] != m.q[self.qp].nxt:
                    early[bth["psn"]] = pk
                    continue
                self._sent(ns, pk)
                while m.q[self.qp].nxt in early:
                    self._sent(ns, early.pop(m.q[self.qp].nxt))
            elif way == "out" and op == wire.Opcode.PROBE:
                q = pk["PETH"].get(wire.PROBE_QP_FIELD) if "PETH" in pk else None
                index = self._entry(ev)
                if q == self.qp and index is not None:
                    m.probed(self.qp, index, ev)
                    self.say(ns, f"probe on entry {index} ({self._path(ev)})", self._on_dead(ev))
            elif way == "in" and bth["dqp"] == self.qp and started and op == wire.Opcode.SACK:
                s = pk["SETH"]
                now = self._now(ns)
                rtt = (now - s["tx_timestamp"]) % TIME_MOD
                trig = (s["cack_psn"] + (s["ack_psn_offset"] ^ 0x8000) - 0x8000) % (1 << 24)
                una = m.q[self.qp].una
                o = m.sack(self.qp, s["cack_psn"], s["sack_offset"], s["sack_bitmap"], trig,
                           s["entropy"], s["m"], rtt, s["pr"], s["rcv_cwnd_pen"],
                           s["tx_timestamp"], now % TIME_MOD)
                if m.q[self.qp].una != una:
                    self.tstart = ns           # progress: the timer starts again
                tev = s["entropy"]
                what = (f"SACK cack {s['cack_psn']:#x} for PSN {trig:#x} on entry "
                        f"{self._entry(tev)} ({self._path(tev)}), m {wire.SackMark(s['m']).name}"
                        f"{', probe answer' if s['pr'] else ''}; RTT {rtt} cycles "
                        f"({'above' if rtt >= self.target else 'below'} target)")
                touches = self._on_dead(tev) or any(
                    self._on_dead(self.profile[i]) for q, i, _ in o.ev_updates if q == self.qp)
                self.say(ns, what, touches)
                self._apply(ns, o, "a SACK hole" if not s["pr"] else "the SACK")
            elif way == "in" and bth["dqp"] == self.qp and started and op == wire.Opcode.NACK:
                n = pk["NETH"]
                o = m.nack(self.qp, n["nack_psn"], n["nack_reason"], n["entropy"])
                self.say(ns, f"NACK {wire.NackReason(n['nack_reason']).name} PSN "
                         f"{n['nack_psn']:#x} (entry {self._entry(n['entropy'])}): its hole is not "
                         "the path's",
                         self._on_dead(n["entropy"]))
                self._apply(ns, o, "a trim")
            after = self._suspects() & dead_paths
            if after != before:
                self.say(ns, f"  failed path {'SUSPECT' if after else 'no longer suspect'}")
        self.note("entries at the end: " + ", ".join(
            f"{i}:{s}" for i, s in enumerate(self.state) if self._on_dead(self.profile[i])))
        return self

    def state_at(self, entry: int, t_us: float) -> str:
        """The model's state for ``entry`` at ``t_us`` (from t0)."""
        return next((s for t, i, s, _ in reversed(self.events) if i == entry and t <= t_us),
                    "GOOD")

    def states_between(self, entry: int, a_us: float, b_us: float) -> set:
        """Every state the model had ``entry`` in from ``a_us`` to ``b_us`` (from t0)."""
        return {self.state_at(entry, a_us)} | {
            s for t, i, s, _ in self.events if i == entry and a_us < t <= b_us}


def summed_counters(traces) -> dict:
    """The model's reliability counters over several replays (one NIC's QPs)."""
    out = {}
    for t in traces:
        for name, value in t.model.counters.items():
            out[name] = out.get(name, 0) + value
    return out


def print_counters(run: Path, host: int):
    """Every QP of ``host`` replayed, and its reliability counters beside the model's."""
    r = json.loads((run / "results.json").read_text())
    if not 0 <= host < len(r["rel"]):
        raise ValueError(f"{run} has hosts 0 to {len(r['rel']) - 1}, not {host}")
    qps = sorted(int(k.split(".")[1]) for k in r["profiles"] if int(k.split(".")[0]) == host)
    traces = [Trace(run, host, q, quiet=True).run_trace() for q in qps]
    model, nic = summed_counters(traces), r["rel"][host]
    print(f"host {host}, QPs {', '.join(map(str, qps))}: the NIC's reliability counters and "
          "the model's over the replays")
    for name in nic:
        mark = "" if nic[name] == model.get(name, 0) else "  <- differs"
        print(f"  {name:16} {nic[name]:8} {model.get(name, 0):8}{mark}")
    for q, t in zip(qps, traces, strict=True):
        if t.desync_us is not None:
            print(f"  QP {q}'s replay fell out of step at {t.desync_us:.3f} us (a retransmission "
                  "the model did not order)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mrcnic.verif.failover_trace",
                                 description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", help="a run's output directory (results.json, pcap/)")
    ap.add_argument("--host", type=int, default=0)
    ap.add_argument("--qp", type=int, default=0)
    ap.add_argument("--all", action="store_true", help="every event of the QP, not only the "
                    "failed path's")
    ap.add_argument("--counters", action="store_true", help="replay every QP of the host and "
                    "print the NIC's reliability counters beside the model's")
    a = ap.parse_args(argv)
    run = Path(a.run)
    if not (run / "results.json").exists() or not (run / "pcap").is_dir():
        ap.error(f"{run} has no results.json and pcap/: give a run's output directory")
    try:
        if a.counters:
            print_counters(run, a.host)
        else:
            Trace(run, a.host, a.qp, a.all).run_trace()
    except ValueError as e:
        ap.error(str(e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
