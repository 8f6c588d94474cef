"""Retransmit tracker: the sender's half of MRC's reliability. It remembers every packet in
flight, hears the peer's SACKs and NACKs, completes what is acknowledged, retransmits what is
missing on another EV, and reports the EVs that lost or marked packets."""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from mrcnic import wire
from mrcnic.enums import EvState, RelMode
from mrcnic.evmap import EvLayout
from mrcnic.regmap import REL_COUNTERS
from mrcnic.wire import TIME_BITS

from .bits import decode, first_set, last_set
from .congestion_window import CWND_BITS, CongestionWindow
from .ev_fields import ev_path
from .feedback_check import FeedbackCheck, Verdict
from .headers import header_view
from .hole_judge import HoleJudge
from .kept_probes import KeptProbes, probed_layout
from .packet_records import PacketRecords, sent_layout
from .psn_bounds import PsnBounds
from .qp_rows import QpRows
from .reorder_tracker import PSN_BITS, SACK_BITS
from .rto_timer import RtoTimer
from .rtt_estimator import RttEstimator
from .segmenter import MAX_TRIES, WrStatus, completion_layout, packet_descriptor_layout
from .send_window import SendWindow
from .suspect_paths import SuspectPaths
from .transport_parser import transport_layout
from .window_bits import WindowBits

__all__ = ["RelMode", "retransmit_layout", "PathEvent", "path_event_layout",
           "RetransmitTracker", "PROBES_KEPT"]

PROBES_KEPT = 4         # a QP's latest probes an answer is matched against


def retransmit_layout(qps, evs):
    """A packet to send again (its ``pkt.tries`` already counts this try), on any EV of its
    QP's profile but ``avoid`` when another is usable."""
    return data.StructLayout({"pkt": packet_descriptor_layout(qps), "avoid": range(evs)})


class PathEvent(enum.Enum, shape=2):
    """What a path event says of the packet it is about."""
    TIMED = 0     # a SACK timed it: ``rtt``, and ``ecn`` if it arrived marked
    ACKED = 1     # it arrived: newly SACKed, or cumulatively acknowledged and not SACKed before
    LOST = 2      # it is sent again


def path_event_layout(qps, evs):
    return data.StructLayout({"qp": range(qps), "index": range(evs), "kind": PathEvent,
                              "rtt": TIME_BITS, "ecn": 1})


class _Cause(enum.Enum, shape=2):
    SACK = 0
    TRIM = 1
    TIMEOUT = 2


class RetransmitTracker(wiring.Component):
    """Per QP: the PSNs from the oldest unacknowledged (``una``) to the next to send (``nxt``),
    at most ``window`` of them, a bit each saying it was SACKed (one in flight and not SACKed
    is outstanding), and a record per packet in block RAM (descriptor, EV and its profile
    index, send time).

    Feedback, one record at a time:

    * SACK: checked first and ignored whole (counted) if its cumulative PSN is behind ``una``
      (stale) or past ``nxt``, or its bitmap claims a PSN never sent. Then: the echoed
      timestamp gives an RTT sample (smoothed as TCP does: srtt += err/8, rttvar +=
      (|err| - rttvar)/4; RTO = srtt + 4 rttvar within ``rto_min``..``rto_max``); the EV of the
      packet that triggered it is set SKIP for m = SKIP_ONCE and ASSUMED_BAD for m = ALWAYS_SKIP;
      the bitmap clears what it covers; ``una`` advances to the cumulative PSN, completing each
      message whose last packet it passes; then every outstanding packet at least ``reorder``
      PSNs below the highest known to have arrived is retransmitted, once (a hole retransmitted
      is tried again only after a timeout), and so is every outstanding packet, below it or
      above it, that was sent more than ``reo_wnd`` cycles before the latest-sent packet known
      to have arrived, less than ``RACK_FRESH`` cycles ago (RACK's time rule, from the send
      times the SACKs echo; ``reo_wnd`` 0: off). A QP with few packets in flight never has
      ``reorder`` more behind a loss, and a count alone would leave each such loss to a
      timeout; nor does a count ever find a loss above the highest PSN arrived (a message's
      tail), which the time rule finds once a later-sent retransmission arrives. Above the
      highest the scan stops at the first packet sent too late to be lost: first sends leave
      in PSN order, so none after it is either. In SELECTIVE mode such a hole also blames the path
      that lost it (the plane and spine its EV names; a QP's entries on one path share the
      evidence): the entry is set SKIP and the path suspect; or, when its path lost a packet
      before with none arriving on it since (a SACK whose triggering packet came on the path,
      or a probe's answer from it, clears the suspicion), every entry of the QP on the path
      is set ASSUMED_BAD (an ``ev_update`` with ``path``). A first hole also holds the QP's
      suspect paths (``hold``: the spray scheduler passes over their entries) until every
      packet the QP had sent by then is acknowledged or found lost: the highest PSN known to
      have arrived ``reorder`` past them. So a dead path carries nothing new from its first
      loss seen, and goes whole at its second, which its packets already in flight give,
      even while the retransmissions keep the QP moving and no timeout fires. If nothing
      arrived on the hole's path while it was held, the hold ends with that path ASSUMED_BAD
      (its probes bring it back): a QP sending too little to lose a second packet there
      would otherwise take the path up again on no evidence, dead or not. A hole on a path
      whose latest arrival carried ECN only sets its entry SKIP, once (the next such hole
      counts, unless another marked arrival came between): a packet held in a long queue is
      overtaken, by count or by time, as a lost one is, and retiring queued paths crowded the
      rest (a clean failover-bench run retired six); but a link that dies under load has its
      last arrival marked, and nothing comes after to clear the mark. Nor does the hole of a
      packet NACKed as trimmed (the very send the NACK was for) count: a full queue lost it.
    * NACK TRIMMED or TRIMMED_LASTHOP for an outstanding PSN: for TRIMMED_LASTHOP (and for
      TRIMMED without ``ev_health``) the window shrinks (below); that packet is retransmitted
      at once if the QP's bytes in flight less its own are below the window (in GO_BACK_N,
      always), or if fewer than ``reorder`` packets were sent after it (too few for a SACK hole
      to show it); otherwise it is left to be a SACK hole.
      For TRIMMED its EV is set SKIP (a last-hop trim says nothing against the path).
      Other NACK reasons, ACKs and endpoint packets other than a port status are counted
      under ``other``.
    * Port status (ERTH, op PORT_STATUS, BTH dqp naming the QP): the planes its peer says it
      can receive on go to the spray scheduler (``peer``), whatever the mode; a status with no
      plane of this NIC up is impossible, and ignored. A QP that starts again takes its peer
      to have every plane up.
    * A QP with packets outstanding and no progress of ``una`` for its RTO: the oldest
      outstanding packet, if it has itself been out that long, is retransmitted and its EV set
      ASSUMED_BAD; every hole may then be retransmitted again. (Not evidence against the path:
      under load a timeout is as often a packet held in a queue as one lost, and retiring
      healthy paths on it crowded the rest: the link-down transfer took up to 29% longer.)

    Congestion control (NSCC's four cases, on each accepted SACK, its RTT sample against
    ``target_rtt``; ECN is a SACK with m = SKIP_ONCE): no ECN and RTT below the target: the
    window grows by (target - RTT) x ``cc_gain`` / 16 bytes; no ECN, RTT at or above it: by
    ``cc_fair`` bytes; ECN and RTT at or above: it shrinks by its 2^-``cc_md``, at most once a
    round trip (not again until a SACK for a packet sent after the last decrease); ECN and RTT
    below: no change. A NACK TRIMMED_LASTHOP for an outstanding packet takes that packet's
    bytes off it, as NSCC does (halving it on each trim, as a loss does TCP's, starved QPs
    that were trimmed again and again: in the scale model's degraded fat tree the slowest write
    took 5.7 times its ideal, against 1.7); an incast is held by ``rcv_cwnd_pen`` too (below).
    A NACK TRIMMED leaves the window alone when ``ev_health`` is on: a queue inside the fabric
    was full, news of one path, which its EV's SKIP answers, as an ECN mark is (ECN is not
    marked on the last hop), not of the receiver every path shares; without EV health nothing
    skips the path, and it cuts the window as TRIMMED_LASTHOP does. (Taking its bytes off too
    cost the writes behind the scale model's slow core links a window's worth of trims while
    they found them.) It stays within ``cwnd_min`` .. ``cwnd_max`` and starts at
    ``cwnd_init``. A SACK whose ``rcv_cwnd_pen`` n is 2 or more also holds it to ``rcv_wnd`` /
    n (no less than ``cwnd_min``; ``rcv_wnd`` 0 ignores it): the receiver's port shared by its
    n busy QPs, the word of an incast that arrives with the first SACK, long before the QP's
    own feedback could close a window opened too wide. A QP alone at its receiver (n = 1) is
    left to NSCC.

    A QP sends a new packet only while its bytes in flight are below its window (not in OFF
    mode): payload bytes sent and neither cumulatively acknowledged nor SACKed (as TCP's
    "pipe"). A packet SACKed above a hole has left the network: counted until the hole is
    filled, it stalled the QP for the round trip its recovery takes (the link-down transfers
    took up to 19% longer than clean ones).

    Retransmissions re-read their payload (the descriptor is sent again), count their try in the
    descriptor (the TX side sets the BTH rtx bit), and avoid the EV that carried the last try.
    In GO_BACK_N a loss (a SACK showing a packet ``reorder`` beyond ``una``, a trim, a timeout)
    resends every packet from the lost one to ``nxt``, but yields to feedback waiting: sent
    whole, a sweep held the RX side up for as long as the port took to send the window, and a
    single-path QP crawled a packet a timeout after a long outage. The next SACK showing the
    loss, or the next timeout, takes the sweep up again past what it resent. In OFF the
    tracker acknowledges each packet itself as soon as it is recorded.

    Its FSM serves one QP at a time (``cq``); the rest is in units of their own, driven for that
    QP: the packet records (``hdl/packet_records.py``), each QP's una and nxt
    (``hdl/psn_bounds.py``), the feedback's check (``hdl/feedback_check.py``), the hole judge
    (``hdl/hole_judge.py``), the congestion window (``hdl/congestion_window.py``), the send
    window and bytes in flight (``hdl/send_window.py``), the RTO timer (``hdl/rto_timer.py``),
    the RTT estimator (``hdl/rtt_estimator.py``), the window bits (``hdl/window_bits.py``), the
    suspect paths and the hold (``hdl/suspect_paths.py``), the kept probes
    (``hdl/kept_probes.py``), and the rows of what only the FSM changes (``hdl/qp_rows.py``).

    Parameters
    ----------
    qps, evs : as the spray scheduler; planes : the RX side's planes (its record layout);
    window : PSNs a QP may have in flight (a power of two, 64 .. 2**23); spines : spines a
    plane, which with ``planes`` gives the EV layout (:class:`mrcnic.evmap.EvLayout`) a path
    is read from.

    Attributes
    ----------
    init : In(stream {qp, psn}): a QP starts again, its next PSN ``psn``, nothing in flight.
    sent : In(stream sent_layout), always ready: each data packet as it is granted its EV.
    probed : In(stream {qp, index, ev}), always ready: each probe as it is granted its EV. A
        SACK with the probe-response bit for that QP naming that EV (and m not ALWAYS_SKIP)
        sets the entry GOOD again; the QP's latest ``PROBES_KEPT`` probes are remembered (the
        first of them on that EV is answered), as under load an answer can take longer than
        the interval between probes.
    feedback : In(stream transport_layout(planes)): SACK, NACK, ACK and endpoint packets.
    retransmit : Out(stream retransmit_layout)
    ev_update : Out(stream {qp, index, state, path, trim}): with ``path``, ASSUMED_BAD for
        every entry of the QP on that entry's path; with ``trim``, the SKIP of an EV whose
        packet a queue trimmed (the spray scheduler keeps it longer).
    hold : Out(ArrayLayout(paths, qps)): each QP's paths to pass over for now (``paths`` bits
        numbered by :meth:`mrcnic.evmap.EvLayout.path`).
    peer : Out(stream {qp, planes}), always ready: the planes a QP's peer can receive on
    cpl : Out(stream completion_layout): work requests completed (status OK).
    probe_answer : Out(stream {qp, index, rtt}), always ready: each probe answered, the entry
        it was sent on and its round trip (the TX timestamp's cycles).
    path_event : Out(stream {qp, index, kind, rtt, ecn}), always ready: what became of a packet
        sent on entry ``index`` (:class:`PathEvent`): timed by the SACK it triggered (``rtt``,
        ``ecn``), arrived, or sent again (on any entry).
    gate_qp, gate_psn, gate_length : In; gate_open : Out, whether QP ``gate_qp`` may send
        PSN ``gate_psn`` (it is less than ``window`` past ``una``, the QP's bytes in flight
        are below its window, and, reliability on, the FSM is not handling feedback or a
        timeout of the QP: the EVs a SACK finds lost on are judged before the sends its
        acknowledgements make room for); gate_take : In, it is sent: its bytes count from the
        next cycle (the gate's answer then does not include them: pass one packet in two cycles
        at most), so the packets between the gate and the grant count too.
    gate_ready : Out(qps), the QPs whose next packet ``gate_open`` would let go (counting the
        PSNs recorded as sent, which lag the gate by the grant's few cycles): the segmenter
        offers only these, so a QP whose window is shut holds up no other.
    now : In(16), the TX timestamp counter.
    ev_health : In(1), rel.ev_health: a NACK TRIMMED cuts the window only without it.
    mode : In(RelMode); reorder, reo_wnd, rto_min, rto_max, target_rtt, cc_fair : In(16); cwnd_init,
        cwnd_min, cwnd_max, rcv_wnd : In(24); cc_gain : In(8); cc_md : In(4): the ``rel.*``
        registers, but for the congestion inputs (target_rtt, cc_fair, cc_gain, cc_md, cwnd_*):
        those of the CC profile QP ``cc_qp`` followed the cycle before.
    cc_qp : Out(range(qps)), the QP whose window the congestion inputs act on in the next
        cycle: the NIC looks up its CC profile (``hdl/cc_profile_table.py``) and registers
        it, so the lookup is not on the path of the window's arithmetic.
    view_qp : In(range(qps)); view_cwnd : Out(24), view_inflight : Out(32), view_rtt,
        view_srtt : Out(16): that QP's window, bytes in flight, last and smoothed RTT.
    <counter> : Out(1), an event (:attr:`events`) for each name in the register map's
        ``REL_COUNTERS`` but ``status_sent`` (the TX side counts what it sends).
    """

    def __init__(self, qps=16, evs=64, planes=2, window=256, spines=4):
        if not isinstance(window, int) or window & (window - 1) or not 64 <= window <= 1 << 23:
            raise ValueError(f"window must be a power of two from {SACK_BITS} to 2**23, "
                             f"not {window!r}")
        if not isinstance(qps, int) or qps < 1:
            raise ValueError(f"qps must be a positive integer, not {qps!r}")
        self._qps, self._evs, self._planes, self._window = qps, evs, planes, window
        self._layout = EvLayout(planes, spines)     # raises on a bad count
        super().__init__({
            "init": In(stream.Signature(data.StructLayout({"qp": range(qps), "psn": PSN_BITS}))),
            "sent": In(stream.Signature(sent_layout(qps, evs), always_ready=True)),
            "probed": In(stream.Signature(probed_layout(qps, evs), always_ready=True)),
            "feedback": In(stream.Signature(transport_layout(planes))),
            "retransmit": Out(stream.Signature(retransmit_layout(qps, evs))),
            "ev_update": Out(stream.Signature(data.StructLayout({
                "qp": range(qps), "index": range(evs), "state": EvState, "path": 1,
                "trim": 1}))),
            "hold": Out(data.ArrayLayout(self._layout.paths, qps)),
            "cpl": Out(stream.Signature(completion_layout(qps))),
            "probe_answer": Out(stream.Signature(data.StructLayout({
                "qp": range(qps), "index": range(evs), "rtt": TIME_BITS}), always_ready=True)),
            "peer": Out(stream.Signature(data.StructLayout({
                "qp": range(qps), "planes": planes}), always_ready=True)),
            "path_event": Out(stream.Signature(path_event_layout(qps, evs), always_ready=True)),
            "gate_qp": In(range(qps)), "gate_psn": In(PSN_BITS), "gate_length": In(13),
            "gate_open": Out(1), "gate_take": In(1), "gate_ready": Out(qps),
            "now": In(TIME_BITS), "cc_qp": Out(range(qps)),
            "mode": In(RelMode), "ev_health": In(1), "reorder": In(16), "reo_wnd": In(16),
            "rto_min": In(16), "rto_max": In(16),
            "target_rtt": In(16), "cc_fair": In(16), "cc_gain": In(8), "cc_md": In(4),
            "cwnd_init": In(CWND_BITS), "cwnd_min": In(CWND_BITS), "cwnd_max": In(CWND_BITS),
            "rcv_wnd": In(CWND_BITS),
            "view_qp": In(range(qps)), "view_cwnd": Out(CWND_BITS), "view_inflight": Out(32),
            "view_rtt": Out(TIME_BITS), "view_srtt": Out(TIME_BITS),
            **{name: Out(1) for name in REL_COUNTERS if name != "status_sent"},
        })

    @property
    def events(self):
        """The counters' event outputs, for the register bank to count."""
        return tuple(name for name in REL_COUNTERS if name != "status_sent")

    def elaborate(self, platform):
        m = Module()
        Q, E, W = self._qps, self._evs, self._window
        wb = W.bit_length() - 1
        # A record per packet in flight (hdl/packet_records.py), written as it is sent, read
        # for QP cq. The record being offered on a stream is held until taken: a ``sent`` may
        # rewrite its slot (the read port is transparent), and a payload must not change under
        # valid. The read port holds it: it reads nothing more while the offer waits (a copy in
        # flip-flops and a multiplexer in front of the RAM did the same for 500 LUT4s more). Its
        # enable is at the end, from the FSM's state.
        m.submodules.packets = packets = PacketRecords(Q, E, W)
        wiring.connect(m, wiring.flipped(self.sent), packets.sent)
        rec = packets.record

        def read_at(psn):
            """The record of QP cq's ``psn``, in the next cycle."""
            m.d.comb += [packets.addr_qp.eq(cq), packets.addr_psn.eq(psn)]

        def onehot(psn):
            return (Const(1, W) << psn[:wb])[:W]

        def count(name):
            m.d.comb += getattr(self, name).eq(1)

        # Each QP's una and nxt, and the served QP's in registers (hdl/psn_bounds.py).
        m.submodules.bounds = bounds = PsnBounds(Q)
        una, nxt = bounds.una, bounds.nxt
        # Each QP's congestion window, what it may send and its bytes in flight, and its
        # retransmission timer: units of their own, acting for the QP the FSM serves.
        m.submodules.cc = cc = CongestionWindow(Q)
        m.submodules.send_window = win = SendWindow(Q, W)
        m.submodules.timer = timer = RtoTimer(Q)
        # The QP's last PROBES_KEPT probes, which an answer looks at one a cycle (``p_k``).
        K = PROBES_KEPT
        m.submodules.probes = probes = KeptProbes(Q, E, K)
        wiring.connect(m, wiring.flipped(self.probed), probes.probed)
        p_k = Signal(range(K))
        # The send time of each packet NACKed as trimmed is kept by its slot (``packets``):
        # kept per packet, not per QP: under a load that never lets up, a QP-wide exemption
        # lasted as long as the load, and a dead link (which trims nothing) was only ever
        # skipped. (A slot's stale time, or the reset 0, equal to a later send's by chance, 1
        # in 2^16, only excuses that one hole.)
        # Paths (an EV's plane and spine fields) that lost a packet (a SACK hole) with none
        # arriving on them since, and the hold (below).
        lay = self._layout
        NP = lay.paths
        m.submodules.suspects = suspects = SuspectPaths(Q, NP)
        sus_set, sus_clr = suspects.suspect_set, suspects.suspect_clear
        # Paths whose latest arrival carried ECN: their queues are long, and a packet held in
        # one is overtaken, by count or by time, as a lost one is; a hole there is not
        # blamed on the path (retiring queued paths spiralled: a clean bench run retired six).
        mark_set, mark_clr = Signal(NP), Signal(NP)

        # What only the FSM changes of a QP, and only for its QP ``cq``: a row each
        # (hdl/qp_rows.py), QP cq's in a register (``row``), written back every cycle with this
        # cycle's changes (``st_new``), or a QP's fresh row when it starts; also read for the
        # timer's QP and the host's view.
        #   high: one past the highest PSN SACKed; srtt, rttvar, have_rtt: the RTT estimates;
        #   rack_ts, rack_on: RACK, the send time of the latest-sent packet known to have
        #   arrived (a SACK's echo; one for all planes: kept per plane, a QP with few packets
        #   in flight seldom has one arrive after a loss on the same plane, and the demo's
        #   seeds 7 and 19 failed again); marked: the paths above; the hold's PSN and the hole
        #   it began with (below); the last multiplicative decrease (below); the last RTT.
        qp_row = data.StructLayout({
            "high": PSN_BITS, "srtt": TIME_BITS, "rttvar": TIME_BITS, "have_rtt": 1,
            "rack_ts": TIME_BITS, "rack_on": 1, "marked": NP, "hold_psn": PSN_BITS,
            "sus_index": range(E), "sus_path": range(NP), "sus_live": 1, "cut_psn": PSN_BITS,
            "cutting": 1, "last_rtt": TIME_BITS})
        m.submodules.qp_state = rows = QpRows(Q, qp_row, readers=2)
        row = rows.row
        st_timer, st_view = rows.read[0], rows.read[1]     # the timer's QP's, the host's
        st_new = Signal(qp_row)
        m.d.comb += [st_new.eq(row), rows.update.eq(st_new)]

        def path_bit(ev):
            return decode(ev_path(lay, ev), NP)
        with m.If(self.probed.valid):
            count("probes_sent")
        m.d.comb += [self.view_cwnd.eq(cc.cwnd[self.view_qp]),
                     self.view_inflight.eq(win.flight[self.view_qp]),
                     rows.read_qp[1].eq(self.view_qp),
                     self.view_rtt.eq(st_view.last_rtt),
                     self.view_srtt.eq(st_view.srtt)]

        off = self.mode == RelMode.OFF
        gbn = self.mode == RelMode.GO_BACK_N

        # The window each QP may still send into: PSNs, and bytes under congestion control.
        # It is shut to the QP whose feedback or timeout the FSM is handling (``busy``, the QP
        # ``cq``): a SACK's acknowledged bytes leave the flight (PIPE, WALK) before its holes
        # are found (SCAN), and a packet let go in between took its EV before the SACK's
        # verdict on that EV's path reached the spray scheduler (tens of cycles later, more
        # with a long bitmap or walk): on a dead path, one more data packet lost. (With
        # reliability off the FSM only acknowledges what was sent: no verdict to wait for, and
        # a host slow to take completions would hold the QP's sends up at WALK_USE.) ``busy``
        # is set from the FSM's state, below it.
        busy = Signal()
        cq = Signal(range(Q))
        m.d.comb += [win.una.eq(una), win.nxt.eq(nxt)]
        m.d.comb += [win.cwnd.eq(cc.cwnd), win.unlimited.eq(off), win.qp.eq(cq),
                     win.busy.eq(busy), win.gate_qp.eq(self.gate_qp),
                     win.gate_psn.eq(self.gate_psn), win.gate_length.eq(self.gate_length),
                     win.gate_take.eq(self.gate_take), self.gate_open.eq(win.gate_open),
                     self.gate_ready.eq(win.gate_ready)]

        # ---- packets sent: recorded as granted ------------------------------------------------
        s = self.sent.payload
        m.d.comb += [packets.now.eq(self.now), packets.una.eq(una), packets.nxt.eq(nxt),
                     bounds.send.eq(packets.new), bounds.send_qp.eq(s.pkt.qp),
                     bounds.send_psn.eq(s.pkt.psn)]
        # (the first in flight starts the clock)
        m.d.comb += [timer.start.eq(packets.new & packets.first), timer.start_qp.eq(s.pkt.qp)]

        # ---- the FSM's QP and its state ------------------------------------------------------
        cq_next = Signal(range(Q))       # what cq is in the next cycle: the CC profile's QP
        m.d.comb += cq_next.eq(cq)
        m.d.comb += [rows.qp.eq(cq), rows.qp_next.eq(cq_next), rows.update_qp.eq(cq)]
        # QP cq's una and nxt, and what the hole tests take from them, in registers loaded the
        # same way (from ``cq_next``'s next values).
        m.d.comb += [bounds.qp.eq(cq), bounds.qp_next.eq(cq_next), bounds.high.eq(row.high)]
        c_una, c_nxt, c_high = bounds.c_una, bounds.c_nxt, row.high
        inflight = bounds.inflight
        # PSNs from una to one past the highest SACKed: ``hd_now`` from the registers, ``hd`` as
        # they were a cycle before, for the scan (nothing it reads changes in the cycle before
        # it: WALK_RD or its own states).
        hd_now, hd = bounds.hd_now, bounds.hd

        # Bytes in flight: a new packet adds its payload as it passes the gate, the walk takes
        # acknowledged ones off.
        walk_len = Signal(13)            # set by the walk (and PIPE) for QP cq
        m.d.comb += win.acked_len.eq(walk_len)
        pipe_base = Signal(PSN_BITS)     # the PSN the last SACK's bitmap (f_bits) starts at
        m.d.comb += st_new.marked.eq((row.marked | mark_set) & ~mark_clr)

        # The hold: from a QP's first SACK hole on a path, its suspect paths carry nothing new
        # until every packet it had sent by then has been acknowledged or found lost (the
        # highest acknowledged ``reorder`` past them); so a dead path's other entries lose no
        # more while their losses in flight come to light. A later first hole renews it. The
        # hole's entry and path are kept: if nothing arrived on that path while held, the hold
        # ends with the path ASSUMED_BAD (HOLD_END), for a QP sending too little to lose a
        # second packet there would otherwise use it again, dead or not, with no evidence.
        # (row: hold_psn, the QP's nxt as the hold began; sus_index, sus_path, the hole's entry
        # and path; sus_live, that path not retired since, by a second hole)
        hold_set = suspects.hold_start       # the FSM's QP ``cq`` starts (or renews) its hold
        hold_end = suspects.hold_end         # the FSM's QP ``cq`` ends it
        new_index, new_path = Signal(range(E)), Signal(range(NP))
        retired = Signal()                   # the FSM's QP ``cq`` retires path ``new_path``
        m.d.comb += [suspects.qp.eq(cq), self.hold.eq(suspects.hold)]
        with m.If(hold_set):
            m.d.comb += [st_new.hold_psn.eq(c_nxt), st_new.sus_live.eq(1),
                         st_new.sus_index.eq(new_index), st_new.sus_path.eq(new_path)]
        with m.If(retired & (new_path == row.sus_path)):
            m.d.comb += st_new.sus_live.eq(0)
        c_past = Signal(PSN_BITS)
        m.d.comb += c_past.eq(c_high - row.hold_psn)
        lapsed = suspects.holding & (c_past >= self.reorder) & ~c_past[-1]

        # NSCC's multiplicative decrease, at most once a round trip: after one (row:
        # ``cutting``), marks on packets sent before it (below ``cut_psn``) answer the window it
        # replaced. Without this, a run of marks after a path dies takes the window down by its
        # 2^-cc_md per SACK, to a fraction of a BDP in a few microseconds.

        # A bit a PSN of the window, by its slot, for each QP: ``acked``, SACKed above una;
        # ``pend``, a hole already resent. Only the FSM changes them, for its QP ``f_q``. A PSN is
        # outstanding while it is in flight (una .. nxt) and not ``acked``: every reader looks
        # at a PSN in flight, and a slot's bits are cleared as una passes it, so a send need not
        # touch them.
        m.submodules.window_bits = bits = WindowBits(Q, W)
        f_q = bits.qp
        f_ack_set, f_ack_clr = bits.ack_set, bits.ack_clear
        f_pend_set, f_pend_clr = bits.pend_set, bits.pend_clear
        m.d.comb += f_q.eq(cq)
        c_acked, c_pend = bits.acked, bits.pend

        def outstanding(psn):
            """Whether ``psn``, in flight for QP cq, is not yet SACKed."""
            return ~c_acked.bit_select(psn[:wb], 1)

        # ---- feedback, latched ---------------------------------------------------------------
        fb = self.feedback.payload
        seth = header_view(fb.ext, wire.SETH, 0)
        neth = header_view(fb.ext, wire.NETH, 0)
        is_sack = fb.opcode == wire.Opcode.SACK
        erth = header_view(fb.ext, wire.ERTH, 0)
        is_status = ((fb.opcode == wire.Opcode.ENDPOINT_REQUEST)
                     & (erth.op == wire.EndpointOp.PORT_STATUS))
        status_planes = erth.port_status_mask[:self._planes]
        f_cack, f_off, f_bits = Signal(PSN_BITS), Signal(16), Signal(SACK_BITS)
        # The bitmap's highest bit and whether it has one, found as the feedback is taken
        # (searched for in SACK_CHECK, it began the core clock's longest path, through the
        # SACK's validity check into the window's arithmetic).
        f_top, f_any = Signal(range(SACK_BITS)), Signal()
        sack_any, sack_top = last_set(m, seth.sack_bitmap, "sack_top")
        f_m, f_ent, f_ts, f_trig = Signal(2), Signal(32), Signal(TIME_BITS), Signal(PSN_BITS)
        f_rtt = Signal(TIME_BITS)      # the SACK's RTT sample, for the path it timed
        f_reason, f_psn, f_pr = Signal(8), Signal(PSN_BITS), Signal()
        # (the receiver's share, rcv_cwnd_pen, is the window's: it keeps it as the feedback is
        # taken, for the SACK it belongs to)
        m.d.comb += [cc.pen.eq(seth.rcv_cwnd_pen),
                     cc.pen_take.eq(self.feedback.valid & self.feedback.ready)]

        # Whether the latched SACK or NACK is about packets QP cq has in flight.
        m.submodules.check = check = FeedbackCheck()
        m.d.comb += [check.una.eq(c_una), check.nxt.eq(c_nxt), check.inflight.eq(inflight),
                     check.cack.eq(f_cack), check.offset.eq(f_off), check.bit0.eq(f_bits[0]),
                     check.any.eq(f_any), check.top.eq(f_top),
                     check.psn.eq(f_psn), check.outstanding.eq(outstanding(f_psn))]

        p = Signal(PSN_BITS)                  # the PSN a walk, scan or timeout is at
        cause = Signal(_Cause)
        # The timer looks at one QP a cycle, in turn, whatever the FSM is doing, and tells IDLE
        # in the next cycle whether that QP's RTO has passed (``t_due``), or, with reliability
        # off, whether it has anything in flight to acknowledge (``t_busy``). IDLE takes a
        # decision only if it was made while the FSM sat in IDLE with no QP starting
        # (``t_fresh``): the FSM's other states move una and the timers' starts, and a start
        # resets its QP. A send can only start a timer that was not running, so it never makes
        # a decision wrong.
        tq = timer.look
        t_q, t_busy, t_due, t_rto = timer.qp, timer.running, timer.due, timer.rto
        t_fresh = Signal()
        m.d.comb += [rows.read_qp[0].eq(tq), timer.rto_min.eq(self.rto_min),
                     timer.rto_max.eq(self.rto_max),
                     timer.looked.running.eq(una[tq] != nxt[tq]),
                     timer.looked.srtt.eq(st_timer.srtt),
                     timer.looked.rttvar.eq(st_timer.rttvar),
                     timer.looked.have_rtt.eq(st_timer.have_rtt)]
        m.d.sync += t_fresh.eq(0)                # (IDLE sets it)
        # The FSM's QP's timer starts again (WALK_USE, the timeout's states): now, unless said.
        restart_at = Signal(TIME_BITS)
        m.d.comb += [timer.now.eq(self.now), timer.restart_qp.eq(cq),
                     timer.restart_at.eq(restart_at), restart_at.eq(self.now)]
        c_rto = Signal(TIME_BITS)             # QP cq's RTO, kept from when its timer fired
        p_out = outstanding(p)
        p_pend = c_pend.bit_select(p[:wb], 1)
        pd = Signal(PSN_BITS)
        m.d.comb += pd.eq(p - c_una)
        # Whether the packet at ``p`` is a hole (by count, or by time from its record,
        # ``rec``), and what its loss says of its path.
        m.submodules.judge = judge = HoleJudge(NP)
        m.d.comb += [judge.pd.eq(pd), judge.hd.eq(hd), judge.reorder.eq(self.reorder),
                     judge.reo_wnd.eq(self.reo_wnd), judge.rack_on.eq(row.rack_on),
                     judge.rack_ts.eq(row.rack_ts), judge.now.eq(self.now),
                     judge.time.eq(rec.time), judge.trim_time.eq(packets.trim_time),
                     judge.record.eq(rec.pkt.psn == p), judge.lost_on.eq(path_bit(rec.ev)),
                     judge.marked.eq(row.marked), judge.suspects.eq(suspects.suspect)]
        scan_end = Signal(PSN_BITS)          # go-back-N resends up to nxt as the scan began
        # Where a go-back-N sweep that yielded to feedback stopped (QP ``res_q``): it resent
        # everything from una to there, so the next SACK's sweep takes up at it. (From una,
        # passing a PSN a cycle over what was resent could take longer than the next feedback
        # takes to come, and the sweep would never get further.) A timeout starts afresh.
        res_on, res_q, res_psn = (Signal(name="res_on"), Signal(range(Q), name="res_q"),
                                  Signal(PSN_BITS, name="res_psn"))
        resumes = (gbn & res_on & (res_q == cq)
                   & ((res_psn - c_una)[:PSN_BITS] < (c_nxt - c_una)[:PSN_BITS]))

        def emit_retransmit():
            """Offers the record read (``rec``) again; True once taken."""
            nxt_try = Mux(rec.pkt.tries == MAX_TRIES, MAX_TRIES, rec.pkt.tries + 1)
            m.d.comb += [self.retransmit.valid.eq(1),
                         self.retransmit.payload.pkt.eq(rec.pkt),
                         self.retransmit.payload.pkt.tries.eq(nxt_try),
                         self.retransmit.payload.avoid.eq(rec.index),
                         self.path_event.valid.eq(self.retransmit.ready),
                         self.path_event.payload.kind.eq(PathEvent.LOST)]
            return self.retransmit.ready

        def count_retransmit():
            for c in _Cause:
                with m.If(cause == c):
                    count(f"rtx_{c.name.lower()}")

        # (a path event is about the record read: its QP's, its entry's)
        m.d.comb += [self.path_event.payload.qp.eq(rec.pkt.qp),
                     self.path_event.payload.index.eq(rec.index)]
        m.d.comb += [self.cpl.payload.wr_id.eq(rec.pkt.wr_id), self.cpl.payload.qp.eq(cq),
                     self.cpl.payload.status.eq(WrStatus.OK),
                     self.ev_update.payload.qp.eq(cq), self.ev_update.payload.index.eq(rec.index)]

        m.d.comb += self.cc_qp.eq(cq_next)
        # The window: a QP's first is set as it starts (IDLE), a SACK's the cycle after
        # SACK_CHECK takes it, from this cycle's arithmetic (the FSM keeps the QP), a trim's in
        # NACK_CUT. Its inputs are the CC profile of ``cc_qp``, followed the cycle before.
        sample = Signal(TIME_BITS)            # the RTT sample, from the echoed timestamp
        m.d.comb += sample.eq(self.now - f_ts)
        m.submodules.rtt = rtt = RttEstimator()
        m.d.comb += [rtt.srtt.eq(row.srtt), rtt.rttvar.eq(row.rttvar),
                     rtt.have_rtt.eq(row.have_rtt), rtt.sample.eq(sample)]
        # The packet that triggered this SACK left at or after the last cut.
        after_cut = (c_nxt - f_trig)[:PSN_BITS] <= (c_nxt - row.cut_psn)[:PSN_BITS]
        cut = cc.cut        # this SACK takes the multiplicative decrease
        m.d.comb += [cc.qp.eq(cq), cc.init_qp.eq(self.init.payload.qp),
                     cc.ecn.eq(f_m == wire.SackMark.SKIP_ONCE), cc.sample.eq(sample),
                     cc.may_cut.eq(~row.cutting | after_cut)]
        m.d.comb += [getattr(cc, name).eq(getattr(self, name)) for name in (
            "target_rtt", "cc_fair", "cc_gain", "cc_md", "cwnd_init", "cwnd_min", "cwnd_max",
            "rcv_wnd")]

        with m.FSM() as fsm:
            with m.State("IDLE"):
                t_una, t_nxt = una[t_q], nxt[t_q]
                m.d.comb += self.init.ready.eq(1)
                m.d.sync += t_fresh.eq(~self.init.valid)
                # A timeout's start, whatever IDLE does: the states IDLE goes to otherwise set
                # each of these before reading it, and their enables are then the state alone,
                # not the choice below (whose timer and window lookups ended the core clock's
                # longest path in ``cause``'s enable).
                m.d.sync += [p.eq(t_una), cause.eq(_Cause.TIMEOUT), scan_end.eq(t_nxt),
                             c_rto.eq(t_rto)]
                with m.If(self.init.valid):
                    iq = self.init.payload.qp
                    # (a packet passing the gate as its QP starts was queued before: it is not
                    # recorded as sent, so its bytes must not count)
                    m.d.comb += [cc.init.eq(1), win.restart.eq(1), win.restart_qp.eq(iq),
                                 suspects.restart.eq(1), suspects.restart_qp.eq(iq)]
                    with m.If(res_q == iq):
                        m.d.sync += res_on.eq(0)
                    m.d.comb += [self.cc_qp.eq(iq), f_q.eq(iq), f_ack_clr.eq(~0),
                                 f_pend_clr.eq(~0), self.peer.valid.eq(1),
                                 self.peer.payload.qp.eq(iq), self.peer.payload.planes.eq(~0)]
                    # (the QP's row afresh: no RTT, RACK, marks, hold or cut)
                    m.d.comb += [rows.update_qp.eq(iq), st_new.eq(0),
                                 st_new.high.eq(self.init.payload.psn)]
                    m.d.comb += [bounds.start.eq(1), bounds.start_qp.eq(iq),
                                 bounds.start_psn.eq(self.init.payload.psn)]
                with m.Elif(self.feedback.valid):
                    m.d.comb += [self.feedback.ready.eq(1), cq_next.eq(fb.qp)]
                    m.d.sync += [
                        cq.eq(fb.qp), f_cack.eq(seth.cack_psn), f_off.eq(seth.sack_offset),
                        f_bits.eq(seth.sack_bitmap), f_m.eq(seth.m), f_any.eq(sack_any),
                        f_top.eq(sack_top),
                        # the offset is two's complement: a duplicate below cack triggers too
                        f_trig.eq(seth.cack_psn + seth.ack_psn_offset.as_signed()),
                        f_ent.eq(Mux(is_sack, seth.entropy, neth.entropy)),
                        f_ts.eq(Mux(is_sack, seth.tx_timestamp, neth.tx_timestamp)),
                        f_reason.eq(neth.nack_reason), f_psn.eq(neth.nack_psn), f_pr.eq(seth.pr),
                    ]
                    with m.If((fb.qp >= Q) | (is_status & ~status_planes.any())):
                        count("invalid")
                    with m.Elif(is_status):
                        m.d.comb += [self.peer.valid.eq(1), self.peer.payload.qp.eq(fb.qp),
                                     self.peer.payload.planes.eq(status_planes)]
                        count("status_received")
                    with m.Elif(off | ~(is_sack | (fb.opcode == wire.Opcode.NACK))):
                        count("other")
                    with m.Elif(is_sack & seth.pr):
                        m.next = "PROBE_ANSWER"
                    with m.Elif(is_sack):
                        m.next = "SACK_CHECK"
                    with m.Else():
                        m.next = "NACK_CHECK"
                with m.Elif(off & t_busy & t_fresh):
                    # Nothing to wait for: acknowledge what was sent.
                    m.d.comb += cq_next.eq(t_q)
                    m.d.sync += [cq.eq(t_q), f_cack.eq(t_nxt)]
                    m.next = "WALK_RD"
                with m.Elif(~off & t_due & t_fresh):
                    m.d.comb += cq_next.eq(t_q)
                    m.d.sync += cq.eq(t_q)
                    m.next = "TO_FIND"

            # ---- a probe's answer: its EV is GOOD again ----------------------------------------
            with m.State("PROBE_ANSWER"):
                # The first of the QP's kept probes on the answer's EV, one a cycle.
                m.d.comb += [probes.qp.eq(cq), probes.k.eq(p_k), probes.ev.eq(f_ent)]
                hit = probes.hit
                with m.If(hit & (f_m != wire.SackMark.ALWAYS_SKIP)):
                    m.d.comb += [self.ev_update.valid.eq(1),
                                 self.ev_update.payload.index.eq(probes.index),
                                 self.ev_update.payload.state.eq(EvState.GOOD)]
                    with m.If(self.ev_update.ready):
                        count("probes_answered")
                        pa = self.probe_answer.payload
                        m.d.comb += [self.probe_answer.valid.eq(1), pa.qp.eq(cq),
                                     pa.index.eq(self.ev_update.payload.index),
                                     pa.rtt.eq((self.now - f_ts)[:TIME_BITS])]
                        m.d.comb += [sus_clr.eq(path_bit(f_ent)),     # the path works
                                     probes.forget.eq(1)]
                        m.d.sync += p_k.eq(0)
                        m.next = "SACK_CHECK"
                with m.Elif(hit | (p_k == K - 1)):
                    m.d.sync += p_k.eq(0)
                    m.next = "SACK_CHECK"
                with m.Else():
                    m.d.sync += p_k.eq(p_k + 1)

            with m.State("SACK_CHECK"):
                # Set whatever the verdict (a refused SACK goes back to IDLE, which reads none
                # of them, and every resend follows a state that sets ``cause``): the verdict
                # then reaches only the FSM's state and the row, not these registers' enables.
                m.d.sync += [f_rtt.eq(sample), pipe_base.eq(check.base), cause.eq(_Cause.SACK)]
                with m.If(check.sack == Verdict.STALE):
                    count("stale")
                    m.next = "IDLE"
                with m.Elif(check.sack == Verdict.INVALID):
                    count("invalid")
                    m.next = "IDLE"
                with m.Else():
                    m.d.comb += cc.sack.eq(1)
                    # The QP's new RTT estimates and RACK time, into its row.
                    newer = Signal(TIME_BITS)
                    rack_moves = Signal()
                    # (a probe's answer is left out: its timestamp is the probe's)
                    m.d.comb += [
                        newer.eq(f_ts - row.rack_ts),
                        rack_moves.eq(~f_pr & (~row.rack_on | ~newer[-1])),
                    ]
                    m.d.comb += st_new.last_rtt.eq(sample)
                    with m.If(cut):
                        m.d.comb += [st_new.cutting.eq(1), st_new.cut_psn.eq(c_nxt)]
                    with m.Elif(after_cut):
                        m.d.comb += st_new.cutting.eq(0)
                    with m.If(rack_moves):
                        m.d.comb += [st_new.rack_ts.eq(f_ts), st_new.rack_on.eq(1)]
                    m.d.comb += [st_new.srtt.eq(rtt.srtt_next), st_new.rttvar.eq(rtt.rttvar_next),
                                 st_new.have_rtt.eq(1)]
                    with m.If((check.high - c_una)[:PSN_BITS] > hd_now):
                        m.d.comb += st_new.high.eq(check.high)
                    read_at(f_trig)
                    m.next = "SACK_EV"

            with m.State("SACK_EV"):
                read_at(f_trig)
                came = (rec.pkt.psn == f_trig) & (rec.ev == f_ent) & (rec.pkt.qp == cq)
                ecn = f_m == wire.SackMark.SKIP_ONCE
                with m.If(came):
                    # A packet arrived on this path: it is not suspect (any more), and its
                    # queue is as long as its mark says.
                    m.d.comb += [sus_clr.eq(path_bit(rec.ev)),
                                 mark_set.eq(Mux(ecn, path_bit(rec.ev), 0)),
                                 mark_clr.eq(Mux(ecn, 0, path_bit(rec.ev)))]
                leaving = Signal()
                # the path's RTT and mark, once, as the state is left
                m.d.comb += [self.path_event.valid.eq(came & leaving),
                             self.path_event.payload.kind.eq(PathEvent.TIMED),
                             self.path_event.payload.rtt.eq(f_rtt),
                             self.path_event.payload.ecn.eq(ecn)]
                with m.If(came & (ecn | (f_m == wire.SackMark.ALWAYS_SKIP))):
                    bad = f_m == wire.SackMark.ALWAYS_SKIP
                    m.d.comb += [self.ev_update.valid.eq(1), self.ev_update.payload.state.eq(
                        Mux(bad, EvState.ASSUMED_BAD, EvState.SKIP))]
                    with m.If(self.ev_update.ready):
                        with m.If(bad):
                            count("ev_bad")
                        with m.Else():
                            count("ev_skip")
                        m.d.comb += leaving.eq(1)
                        m.next = "HOLD_CHECK"
                with m.Else():
                    m.d.comb += leaving.eq(1)
                    m.next = "HOLD_CHECK"

            # ---- a hold whose packets have all been accounted for ends ---------------------
            with m.State("HOLD_CHECK"):
                unproven = suspects.suspect.bit_select(row.sus_path, 1) & row.sus_live
                with m.If(lapsed & unproven):
                    m.d.comb += [self.ev_update.valid.eq(1),
                                 self.ev_update.payload.index.eq(row.sus_index),
                                 self.ev_update.payload.state.eq(EvState.ASSUMED_BAD),
                                 self.ev_update.payload.path.eq(1)]
                    with m.If(self.ev_update.ready):
                        count("ev_bad")
                        m.d.comb += hold_end.eq(1)
                        m.next = "PIPE"
                with m.Else():
                    m.d.comb += hold_end.eq(lapsed)
                    m.next = "PIPE"

            # ---- packets SACKed above una leave the flight ----------------------------------
            # What a SACK's bitmap covers is no longer outstanding, nor in flight: PIPE takes
            # each of its PSNs still outstanding out of both, so a hole at una does not stall
            # the QP while it is recovered. (It visits the bitmap's PSNs one by one: the bitmap
            # set against the QP's outstanding bits at once took two 64-bit rotations, about
            # 1,000 LUT4 sites at the board's size.)
            with m.State("PIPE"):
                any_left, at = first_set(m, f_bits, "pipe_at")
                m.d.sync += p.eq(pipe_base + at)
                with m.If(any_left):
                    m.d.sync += f_bits.eq(f_bits & ~decode(at, SACK_BITS))
                    m.next = "PIPE_RD"
                with m.Else():
                    m.next = "WALK_RD"
            with m.State("PIPE_RD"):
                read_at(p)
                with m.If(p_out):
                    m.next = "PIPE_USE"
                with m.Else():
                    m.next = "PIPE"             # SACKed by an earlier SACK
            with m.State("PIPE_USE"):
                read_at(p)
                m.d.comb += [f_ack_set.eq(onehot(p)),
                             walk_len.eq(Mux(rec.pkt.psn == p, rec.pkt.length, 0)),
                             self.path_event.valid.eq(rec.pkt.psn == p),
                             self.path_event.payload.kind.eq(PathEvent.ACKED)]
                m.next = "PIPE"

            # ---- una advances to the cumulative PSN, completing messages -------------------
            with m.State("WALK_RD"):
                read_at(c_una)
                with m.If(c_una == f_cack):
                    m.d.sync += [p.eq(Mux(resumes, res_psn, c_una)), scan_end.eq(c_nxt)]
                    with m.If(off):
                        m.next = "IDLE"
                    with m.Elif(gbn & (hd_now <= self.reorder)):
                        m.next = "IDLE"         # go-back-N: no loss seen
                    with m.Else():
                        m.next = "SCAN"
                with m.Else():
                    m.next = "WALK_USE"
            with m.State("WALK_USE"):
                read_at(c_una)
                ends = rec.pkt.last & (rec.pkt.psn == c_una)
                m.d.comb += self.cpl.valid.eq(ends)
                with m.If(~ends | self.cpl.ready):
                    with m.If(ends):
                        count("completions")
                    count("acked")
                    # (one SACKed left the flight then, and was counted as arrived)
                    arrived = (rec.pkt.psn == c_una) & outstanding(c_una)
                    m.d.comb += [f_ack_clr.eq(onehot(c_una)), f_pend_clr.eq(onehot(c_una)),
                                 walk_len.eq(Mux(arrived, rec.pkt.length, 0)),
                                 self.path_event.valid.eq(arrived),
                                 self.path_event.payload.kind.eq(PathEvent.ACKED)]
                    m.d.comb += [bounds.advance.eq(1), timer.restart.eq(1)]
                    m.next = "WALK_RD"

            # ---- holes: outstanding packets far enough below the highest SACKed ------------
            # (a packet ``reorder`` below the highest arrived is a hole by count; any other
            # outstanding one may be one by the time rule: SCAN_EV reads its time)
            counted, timed_on = judge.counted, judge.timed_on
            with m.State("SCAN"):
                read_at(p)
                in_range = Mux(gbn, pd < (scan_end - c_una)[:PSN_BITS],
                               counted | (timed_on & (pd < inflight)))
                with m.If(~in_range):
                    with m.If(res_q == cq):
                        m.d.sync += res_on.eq(0)
                    m.next = "IDLE"
                with m.Elif(gbn & self.feedback.valid):
                    # Feedback first: a go-back-N sweep lasts as long as the port takes to send
                    # the window, and would hold the RX side up all that time (the SACKs that
                    # would have cut it short among what waits). The next SACK showing the
                    # loss takes it up again here, or the next timeout afresh.
                    m.d.sync += [res_on.eq(1), res_q.eq(cq), res_psn.eq(p)]
                    m.next = "IDLE"
                with m.Elif(~p_pend & gbn):
                    m.next = "SCAN_RTX"
                with m.Elif(~p_pend & p_out):
                    m.next = "SCAN_EV"
                with m.Else():
                    m.d.sync += p.eq(p + 1)
            with m.State("SCAN_EV"):
                # A SACK hole: its path is suspect (and held), or, if the path already was,
                # every entry on it bad at once (it stays suspect).
                # (a trimmed packet's hole, or one on a queued path, is a queue's doing; the
                # mark excuses one hole, and only an arrival with ECN renews it: a link that
                # dies under load has its last arrival marked, and nothing arrives after)
                read_at(p)
                lost_on = judge.lost_on
                with m.If(~judge.lost):
                    m.d.sync += p.eq(p + 1)    # not (yet) lost
                    with m.If(pd < hd):
                        m.next = "SCAN"
                    with m.Else():
                        m.next = "IDLE"        # above the highest: no later send is lost
                with m.Elif(rec.pkt.psn == p):
                    m.d.comb += [self.ev_update.valid.eq(1),
                                 self.ev_update.payload.state.eq(judge.state),
                                 self.ev_update.payload.path.eq(judge.retire)]
                    m.d.comb += [new_index.eq(rec.index), new_path.eq(ev_path(lay, rec.ev))]
                    with m.If(self.ev_update.ready):
                        with m.If(judge.retire):
                            count("ev_bad")
                            m.d.comb += retired.eq(1)
                        with m.Else():
                            count("ev_skip")
                        with m.If(judge.suspect):
                            m.d.comb += [sus_set.eq(lost_on), hold_set.eq(1)]
                        with m.If(judge.unmark):
                            m.d.comb += mark_clr.eq(lost_on)
                        m.next = "SCAN_RTX"
                with m.Else():
                    m.next = "SCAN_RTX"
            with m.State("SCAN_RTX"):
                read_at(p)
                with m.If(emit_retransmit()):
                    m.d.comb += f_pend_set.eq(onehot(p))
                    count_retransmit()
                    m.d.sync += p.eq(p + 1)
                    m.next = "SCAN"

            # ---- a trimmed packet goes again at once ---------------------------------------
            with m.State("NACK_CHECK"):
                read_at(f_psn)
                m.d.sync += [p.eq(f_psn), cause.eq(_Cause.TRIM), scan_end.eq(c_nxt)]
                trim = ((f_reason == wire.NackReason.TRIMMED)
                        | (f_reason == wire.NackReason.TRIMMED_LASTHOP))
                with m.If(~trim):
                    count("other")
                    m.next = "IDLE"
                with m.Elif(check.nack == Verdict.STALE):
                    count("stale")
                    m.next = "IDLE"
                with m.Elif(check.nack == Verdict.INVALID):
                    count("invalid")
                    m.next = "IDLE"
                with m.Else():
                    m.next = "NACK_CUT"
            with m.State("NACK_CUT"):
                # A last hop's trim: the window gives up the packet's bytes (NSCC's answer; not
                # halved, which starved a QP trimmed again and again). A trim inside the fabric
                # is one path's news: with EV health its EV is skipped and the window kept;
                # without (one path, or blind spraying) it is cut as for the last hop.
                read_at(p)
                last = f_reason == wire.NackReason.TRIMMED_LASTHOP
                m.d.comb += [cc.trim.eq(last | ~self.ev_health),
                             cc.trim_len.eq(Mux(rec.pkt.psn == p, rec.pkt.length, 0))]
                m.next = "NACK_EV"
            with m.State("NACK_EV"):
                read_at(p)
                m.d.comb += packets.trimmed.eq(rec.pkt.psn == p)
                # It goes again at once if the window, just shrunk, would let it out as a new
                # packet (its own bytes left the network), or if too few packets follow it for
                # a SACK hole to show it (it would wait for a timeout); else it waits to be a
                # SACK hole: resending every trim at once into the queue that trimmed it keeps
                # that queue full. A retransmission trimmed so is a hole again: the scans pass
                # over packets already resent, and it would wait for a timeout.
                at_once = (((win.flight[cq] - rec.pkt.length)[:32] < cc.cwnd[cq])
                           | ((c_nxt - p)[:PSN_BITS] <= self.reorder))
                with m.If((f_reason == wire.NackReason.TRIMMED) & (rec.ev == f_ent)
                          & (rec.pkt.psn == p)):
                    m.d.comb += [self.ev_update.valid.eq(1),
                                 self.ev_update.payload.state.eq(EvState.SKIP),
                                 self.ev_update.payload.trim.eq(1)]
                    with m.If(self.ev_update.ready):
                        count("ev_skip")
                        with m.If(at_once | gbn):
                            m.next = "NACK_RTX"
                        with m.Else():
                            m.d.comb += f_pend_clr.eq(onehot(p))
                            m.next = "IDLE"
                with m.Elif(at_once | gbn):
                    m.next = "NACK_RTX"
                with m.Else():
                    m.d.comb += f_pend_clr.eq(onehot(p))
                    m.next = "IDLE"
            with m.State("NACK_RTX"):
                read_at(p)
                with m.If(emit_retransmit()):
                    m.d.comb += f_pend_set.eq(onehot(p))
                    count_retransmit()
                    m.d.sync += p.eq(p + 1)
                    m.next = "IDLE"
                    with m.If(gbn):
                        m.next = "SCAN"

            # ---- no progress for an RTO: the oldest outstanding packet goes again ----------
            with m.State("TO_FIND"):
                # (what was resent is to be resent again: the QP's pend bits clear here, not
                # as the timer fires, which kept the window bits' address off the timer's path)
                read_at(p)
                m.d.comb += f_pend_clr.eq(~0)
                # (a timeout starts afresh: its QP's sweep does not resume. Here, not in IDLE's
                # branch, whose timer and window lookups ended in the flag's enable.)
                with m.If(res_q == cq):
                    m.d.sync += res_on.eq(0)
                with m.If(p == c_nxt):
                    m.d.comb += timer.restart.eq(1)
                    m.next = "IDLE"
                with m.Elif(gbn | p_out):
                    m.next = "TO_EV"
                with m.Else():
                    m.d.sync += p.eq(p + 1)
            with m.State("TO_EV"):
                read_at(p)
                with m.If((self.now - rec.time)[:TIME_BITS] < c_rto):
                    # It went out again lately: wait an RTO from then.
                    m.d.comb += [timer.restart.eq(1), restart_at.eq(rec.time)]
                    m.next = "IDLE"
                with m.Else():
                    m.d.comb += [self.ev_update.valid.eq(1),
                                 self.ev_update.payload.state.eq(EvState.ASSUMED_BAD)]
                    with m.If(self.ev_update.ready):
                        count("ev_bad")
                        m.next = "TO_RTX"
            with m.State("TO_RTX"):
                read_at(p)
                with m.If(emit_retransmit()):
                    m.d.comb += f_pend_set.eq(onehot(p))
                    count_retransmit()
                    m.d.comb += timer.restart.eq(1)
                    m.d.sync += p.eq(p + 1)
                    m.next = "IDLE"
                    with m.If(gbn):
                        m.next = "SCAN"

        m.d.comb += busy.eq(~off & ~fsm.ongoing("IDLE"))     # (the window's gate, above)

        # The record RAM reads unless the FSM is in a state that may offer on a stream and the
        # stream is not ready: both are registers (the readies are the streams' slices').
        # Whether an offer is made (the hole tests) was the core clock's longest path, through
        # this enable to every bit of the RAM's output. Such a state that made no offer keeps
        # the record a cycle longer, as a waiting offer does; only SCAN_RTX after SCAN_EV and
        # NACK_RTX after NACK_EV use a record read before, and it is of the same slot.
        def waits(stream, *states):
            return Cat(fsm.ongoing(s) for s in states).any() & ~stream.ready
        m.d.comb += packets.read.eq(~(
            waits(self.retransmit, "SCAN_RTX", "NACK_RTX", "TO_RTX")
            | waits(self.ev_update, "PROBE_ANSWER", "SACK_EV", "HOLD_CHECK", "SCAN_EV",
                    "NACK_EV", "TO_EV")
            | waits(self.cpl, "WALK_USE")))
        return m
