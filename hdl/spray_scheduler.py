"""Spray scheduler: picks the EV (and so the plane and path) of every packet a QP sends."""

from amaranth import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from mrcnic.enums import EvState, LoadOp, SprayMode
from mrcnic.evmap import EvLayout

from .bits import decode, first_from
from .ev_fields import ev_path

__all__ = ["EvState", "LoadOp", "SprayMode", "SprayScheduler"]


class SprayScheduler(wiring.Component):
    """Chooses, for each packet, an EV of its QP's profile: only GOOD EVs, only on planes whose
    port is ready, planes in turn so they stay balanced, and within the plane a pseudo-random EV
    among those not yet used in the plane's current round (so every eligible EV carries the same
    share, however the good ones are scattered).

    A QP's profile holds up to ``evs`` EVs; entry ``i`` belongs to plane ``i % planes``, so a
    profile loaded in order is split evenly over the planes. Each (QP, plane) also keeps up to
    ``backups`` spare EVs: when an EV is reported ASSUMED_BAD and its plane has a spare, the spare
    takes its place (GOOD) and the bad EV leaves the profile.

    SKIP lasts one rotation: the QP's next ``profile size`` grants after the current rotation
    ends (so at least one full rotation, at most two), then the EV is GOOD again. A SKIP for a
    trim (``update.trim``) lasts ``trim_rounds`` rotations instead: the QP's rotations are
    counted in periods of that many, and the EV sits out the rest of the current period and
    the whole next one. A queue that trims is full, and one rotation is often less than it
    takes to drain. Skipping moves traffic to the plane's other EVs, never to another plane:
    a plane whose GOOD EVs are all skipped keeps its turn with them.

    The reliability engine may hold paths of a QP (``hold``): a path (the plane and spine an
    EV names) that lost a packet and has not shown since that it works. The QP's GOOD EVs on
    a held path are passed over while their plane has another GOOD EV; their state does not
    change. An ASSUMED_BAD update with ``path`` retires every GOOD EV of the QP on that entry's
    path at once: a dead link loses whatever is sent its way, on any entry.

    With ``mode`` SEQUENCE, the rounds as ROUNDS has them, but taken in profile order: a
    plane's next EV is its first eligible one after the last it gave, from one round into the
    next; after the profile is emptied, the plane starts at a pseudo-random entry. A profile
    the driver lays out path by path is then sprayed path by path, so that a switch's uplinks
    take each QP's packets in turn rather than in random runs; the random first entry keeps
    QPs that start together out of step.

    With ``mode`` RANDOM (oblivious spraying, to measure MRC against) the plane and the EV are
    drawn afresh for every packet among the eligible ones, with no turns and no rounds: what
    was picked before changes nothing.

    One decision a cycle: a request accepted at cycle t leaves as a grant at t + 3 (the pick
    takes two cycles), and a request for the QP of the one accepted at t - 1 is not accepted
    at t. A state change accepted at cycle t applies to every request accepted from t on.

    Parameters
    ----------
    qps : number of QPs.
    evs : the largest profile (a power of two, a multiple of ``planes``).
    planes : network planes (a power of two).
    backups : spare EVs per QP and plane.
    spines : spines a plane, which with ``planes`` gives the EV layout
        (:class:`mrcnic.evmap.EvLayout`) an entry's path is read from.

    Attributes
    ----------
    request : In(stream {qp, retry, avoid, probe, entry})
        A packet of ``qp`` wants an EV; with ``retry``, not entry ``avoid`` (the one that lost
        it) unless no other is usable. With ``probe``, exactly entry ``entry``, whatever its
        state, once its plane is ready (a probe of an ASSUMED_BAD EV; rotations are untouched).
    grant : Out(stream {qp, index, plane, ev})
        The EV chosen, with its index in the profile and its plane.
    port_ready : In(planes)
        Bit p: plane p's port can take a packet now.
    port_busy : In(planes), ports holding frames back now (their output stalled): new
        packets go to the other ready planes while one is free.
    mode : In(SprayMode), ROUNDS (MRC), SEQUENCE (MRC, each round in profile order) or
        RANDOM. (A value past them acts as ROUNDS.)
    trim_rounds : In(4), the rotations a trim's SKIP lasts (0 acts as 1).
    load : In(stream {qp, index, ev, op})
        Management (:class:`LoadOp`): write profile entry ``index`` (it becomes GOOD), push a
        spare EV for plane ``index % planes``, or empty the QP's profile. A QP's profile size
        grows to cover the entries written since it was last emptied.
    update : In(stream {qp, index, state, management, path, trim})
        A state change; DENIED can be set, and left, only with ``management``. SKIP with
        ``trim`` lasts ``trim_rounds`` rotations. ASSUMED_BAD
        with ``path`` also sets every other GOOD entry of the QP on the same path ASSUMED_BAD
        (none of them replaced by a spare), unless that would leave the QP no GOOD EV and no
        spare: then only the entry named goes, under the rule below.
    hold : In(ArrayLayout(paths, qps))
        Element q: the paths (bit ``EvLayout.path(ev)``) QP ``q`` should not spray on now,
        from the cycle after it is given.
    ignored : Out(1), an event (:attr:`events`)
        Updates and loads refused: DENIED without management, a change to a DENIED EV without
        it, ASSUMED_BAD without management for a QP's last GOOD EV when no spare can replace
        it, an index outside the profile, a spare for a plane whose spares are full, an unknown
        load operation.
    replaced : Out(1), an event (:attr:`events`)
        ASSUMED_BAD EVs replaced by a spare.
    changed : Out(stream {qp, index, state, management, replaced, others}, always ready)
        Each update that changed an entry, the cycle after: to GOOD from ASSUMED_BAD or DENIED,
        to ASSUMED_BAD from use (``replaced``: a spare took its place; ``others``: the entries
        of its path that went with it), to DENIED. SKIP, the NIC's own for a rotation or more, and
        profile loads are not changes here.
    peer : In(stream {qp, planes}), always ready
        The planes QP ``qp``'s peer can receive on (its port status); every plane when a QP
        starts. A QP uses only planes both ready here and up at its peer, unless that leaves
        none: then the peer's word is not taken, as nothing (not even the acknowledgements that
        could change it) could reach the peer at all.
    view_qp : In(range(qps)); view_index : In(range(evs)); view_state : Out(EvState)
        The state of that entry: DENIED, ASSUMED_BAD (also an entry outside the profile, or one
        a spare is replacing), SKIP (left out of this rotation or the next) or GOOD.
    view_ev : Out(32)
        The EV that entry holds (loaded, or the spare that took its place; 0 past the
        profile or not loaded since it was emptied), a cycle after ``view_qp`` and
        ``view_index`` name it.
    view_size : Out(range(evs + 1))
        The size of QP ``view_qp``'s profile: the entries written since it was last emptied.
    bad_qp : In(range(qps)); bad : Out(evs)
        The entries of QP ``bad_qp`` that are ASSUMED_BAD (no spare took their place) on a plane
        the QP may use now: what may be probed.
    """

    def __init__(self, qps=16, evs=64, planes=2, backups=4, spines=4):
        for name, v, lo in (("qps", qps, 1), ("evs", evs, 2), ("planes", planes, 1),
                            ("backups", backups, 1)):
            if not isinstance(v, int) or v < lo:
                raise ValueError(f"{name} must be an integer of at least {lo}, not {v!r}")
        if planes & (planes - 1) or evs & (evs - 1) or evs % planes:
            raise ValueError(f"planes ({planes}) and evs ({evs}) must be powers of two, evs a "
                             "multiple of planes")
        self._qps, self._evs, self._planes, self._backups = qps, evs, planes, backups
        self._layout = EvLayout(planes, spines)     # raises on a bad count
        qp_shape = range(qps)
        idx_shape = range(evs)
        super().__init__({
            "request": In(stream.Signature(data.StructLayout({
                "qp": qp_shape, "retry": 1, "avoid": idx_shape, "probe": 1,
                "entry": idx_shape}))),
            "grant": Out(stream.Signature(data.StructLayout({
                "qp": qp_shape, "index": idx_shape, "plane": range(planes), "ev": 32}))),
            "port_ready": In(planes), "port_busy": In(planes), "mode": In(SprayMode),
            "trim_rounds": In(4),
            "load": In(stream.Signature(data.StructLayout({
                "qp": qp_shape, "index": idx_shape, "ev": 32, "op": LoadOp}))),
            "update": In(stream.Signature(data.StructLayout({
                "qp": qp_shape, "index": idx_shape, "state": EvState, "management": 1,
                "path": 1, "trim": 1}))),
            "hold": In(data.ArrayLayout(self._layout.paths, qps)),
            "ignored": Out(1),
            "replaced": Out(1),
            "peer": In(stream.Signature(data.StructLayout({
                "qp": qp_shape, "planes": planes}), always_ready=True)),
            "bad_qp": In(qp_shape), "bad": Out(evs),
            "changed": Out(stream.Signature(data.StructLayout({
                "qp": qp_shape, "index": idx_shape, "state": EvState, "management": 1,
                "replaced": 1, "others": evs}), always_ready=True)),
            "view_qp": In(qp_shape), "view_index": In(idx_shape), "view_state": Out(EvState),
            "view_ev": Out(32), "view_size": Out(range(evs + 1)),
        })

    @property
    def events(self):
        """The counters' event outputs, for the register bank to count."""
        return ("ignored", "replaced")

    def elaborate(self, platform):
        m = Module()
        Q, E, P, B = self._qps, self._evs, self._planes, self._backups
        per_plane = E // P

        def plane_of(index):
            """The plane of profile entry ``index`` (``index % P``)."""
            return index[:max(1, (P - 1).bit_length())] if P > 1 else Const(0)
        lay = self._layout
        NP = lay.paths

        # EV values in block RAM; health as bitmaps in flip-flops, one word per QP, so a pick
        # sees every change made up to the cycle before.
        m.submodules.ev_mem = ev_mem = Memory(shape=32, depth=Q * E, init=[])
        m.submodules.spare_mem = spare_mem = Memory(shape=32, depth=Q * P * B, init=[])
        # A bitmap's bits are written through masks, never by assigning one bit at a variable
        # index: that converts to an E-way case for each bitmap, QP and write, which at 256
        # EVs was most of the block's Verilog (and of its Verilator build). Each bitmap's next
        # value is ``after`` (what a pick or a rotation leaves), with the bits of ``sets``
        # set and those of ``clears`` cleared: a load or an update wins over a pick, as it
        # did when it was the later assignment.
        after, sets, clears = {}, {}, {}

        def bitmap(name):
            state = [Signal(E, name=f"{name}_q{q}") for q in range(Q)]
            after[name], sets[name], clears[name] = (
                [Signal(E, name=f"{name}_q{q}_{k}") for q in range(Q)]
                for k in ("after", "set", "clear"))
            for q in range(Q):
                m.d.comb += after[name][q].eq(state[q])
                m.d.sync += state[q].eq(after[name][q] & ~clears[name][q] | sets[name][q])
            return state

        def write(q, bits, **values):
            """Bits ``bits`` of QP ``q``'s bitmaps named, to 1 or 0 (one write each a cycle)."""
            for name, v in values.items():
                m.d.comb += (sets if v else clears)[name][q].eq(bits)

        good = bitmap("good")
        denied = bitmap("denied")
        bad = bitmap("bad")        # ASSUMED_BAD, not replaced
        # Each entry's path (EvLayout.path of its EV), kept beside its health so a pick can
        # pass over a held path's entries in the same cycle.
        paths = [Signal(data.ArrayLayout(range(NP), E), name=f"paths_q{q}") for q in range(Q)]
        paths_d = [Signal(data.ArrayLayout(range(NP), E), name=f"paths_d_q{q}") for q in range(Q)]
        for q in range(Q):
            m.d.comb += paths_d[q].eq(paths[q])
            m.d.sync += paths[q].eq(paths_d[q])
        # Each QP's entries on a path it holds, in a register: looking up each entry's path in
        # the requesting QP's hold in the pick's cycle began the core clock's longest path. A
        # hold thus acts a cycle after it is given; an entry's new path acts as it is written.
        held = [Signal(E, name=f"held_q{q}") for q in range(Q)]
        for q in range(Q):
            m.d.sync += held[q].eq(Cat(*[self.hold[q].bit_select(paths_d[q][i], 1)
                                         for i in range(E)]))

        def named(value, name):
            """``value`` as a signal. An expression sliced bit by bit converts once per bit;
            a signal's bits are only wires."""
            out = Signal(len(value), name=name)
            m.d.comb += out.eq(value)
            return out

        def onehot(index, name):
            return named(decode(index, E), name)

        def set_path(q, one, path):
            """The entry of ``one`` (:func:`onehot`) of QP ``q`` is on ``path``."""
            m.d.comb += paths_d[q].eq(Cat(*[Mux(one[i], path, paths[q][i]) for i in range(E)]))
        peer_up = [Signal(P, name=f"peer_up_q{q}", init=(1 << P) - 1) for q in range(Q)]
        with m.If(self.peer.valid):
            for q in range(Q):
                with m.If(self.peer.payload.qp == q):
                    m.d.sync += peer_up[q].eq(self.peer.payload.planes)

        def ready_for(qsel):
            """The planes QP ``qsel`` may use now."""
            both = Signal(P)
            ready = Signal(P)
            m.d.comb += [both.eq(self.port_ready & Array(peer_up)[qsel]),
                         ready.eq(Mux(both.any(), both, self.port_ready))]
            return ready

        bad_ready = ready_for(self.bad_qp)
        m.d.comb += self.bad.eq(Array(bad)[self.bad_qp]
                                & Cat(*[bad_ready[i % P] for i in range(E)]))
        skip_now = bitmap("skip_now")
        skip_next = bitmap("skip_next")
        # A trim's SKIP: the same pair of masks, turned over once a period of trim_rounds
        # rotations (``period``: the rotations of the current one gone by).
        trim_now = bitmap("trim_now")
        trim_next = bitmap("trim_next")
        period = [Signal(4, name=f"period_q{q}") for q in range(Q)]
        size = [Signal(range(E + 1), name=f"size_q{q}") for q in range(Q)]
        turn = [Signal(range(P), name=f"turn_q{q}") for q in range(Q)]
        grants = [Signal(range(E + 1), name=f"grants_q{q}") for q in range(Q)]
        used = bitmap("used")
        spares = [[Signal(range(B + 1), name=f"spares_q{q}_p{p}") for p in range(P)]
                  for q in range(Q)]

        def entry(bits, name):
            """Entry ``view_index`` of QP ``view_qp`` in bitmap ``bits``: each bitmap's is
            selected once, as a signal (each use of an expression was a selector of its own:
            alone at 4 QPs x 16 EVs, 4693 LUT4 sites became 4502)."""
            return named(Array(bits)[self.view_qp].bit_select(self.view_index, 1),
                         f"view_{name}")

        v_good, v_denied, v_bad = entry(good, "good"), entry(denied, "denied"), entry(bad, "bad")
        v_skip = (entry(skip_now, "skip_now") | entry(skip_next, "skip_next")
                  | entry(trim_now, "trim_now") | entry(trim_next, "trim_next"))

        # The host's look at the table: a read port of its own, so a look never holds a pick.
        # (an entry past the profile, or one not loaded since it was emptied, reads 0, not
        # what an earlier profile left there)
        view_rd = ev_mem.read_port(transparent_for=())
        view_in = Signal()
        m.d.sync += view_in.eq((self.view_index < self.view_size) & (v_good | v_denied | v_bad))
        m.d.comb += [view_rd.addr.eq(self.view_qp * E + self.view_index),
                     self.view_ev.eq(Mux(view_in, view_rd.data, 0)),
                     self.view_size.eq(Array(size)[self.view_qp])]

        with m.If(v_denied):
            m.d.comb += self.view_state.eq(EvState.DENIED)
        with m.Elif(v_good & v_skip):
            m.d.comb += self.view_state.eq(EvState.SKIP)
        with m.Elif(v_good):
            m.d.comb += self.view_state.eq(EvState.GOOD)
        with m.Else():
            m.d.comb += self.view_state.eq(EvState.ASSUMED_BAD)

        lfsr = Signal(16, init=0xACE1)
        m.d.sync += lfsr.eq(Cat(lfsr[1:], lfsr[0] ^ lfsr[2] ^ lfsr[3] ^ lfsr[5]))

        # ---- stage 1: the request's eligible EVs (request accepted this cycle) -------------
        # The pick takes two cycles: this one narrows the QP's entries down to those each
        # plane may use, the next chooses among them and moves the QP's turn and round on. (In
        # one cycle, request to round, it was the core clock's longest path.) A request for
        # the QP whose pick is in the second stage waits a cycle, so each sees the last's turn.
        sb_valid = Signal()                   # stage 2: the pick
        sb_qp = Signal(range(Q))
        sb_probe, sb_entry = Signal(), Signal(range(E))
        sb_bits = [Signal(per_plane, name=f"sb_plane{p}_bits") for p in range(P)]
        sb_usable, sb_renew = Signal(P), Signal(P)
        sb_turn = Signal(range(P))
        sb_start = [Signal(range(per_plane), name=f"sb_plane{p}_start") for p in range(P)]
        s2_valid = Signal()                   # stage 3: the grant
        s2_qp = Signal(range(Q))
        s2_index = Signal(range(E))
        s2_plane = Signal(range(P))
        stall = s2_valid & ~self.grant.ready
        sb_held = sb_valid & stall            # the pick cannot move on this cycle

        qp = self.request.payload.qp
        ready_now = ready_for(qp)
        # A port holding frames back (busy) takes no new packet while another ready one is
        # free: planes in turn count packets, not bytes, and a port the turns overload would
        # queue (and hold up the other behind it) until its share came right.
        calm = Signal(P)
        port_ready = Signal(P)
        m.d.comb += [calm.eq(ready_now & ~self.port_busy),
                     port_ready.eq(Mux(calm.any(), calm, ready_now))]
        # Each (QP, plane) sprays in rounds: an EV used this round waits until every other
        # eligible EV of its plane has had its turn, so traffic spreads evenly however the good
        # EVs are scattered; within a round the order is pseudo-random.
        used_now = Signal(E)
        good_now = Signal(E)
        skipped_now = Signal(E)
        rounds = self.mode != SprayMode.RANDOM
        sequence = self.mode == SprayMode.SEQUENCE
        with m.Switch(qp):
            for q in range(Q):
                with m.Case(q):
                    m.d.comb += [good_now.eq(good[q]), used_now.eq(Mux(rounds, used[q], 0)),
                                 skipped_now.eq(skip_now[q] | trim_now[q])]

        def plane_wise(first, fallback, name):
            """``first`` on each plane that has one of its bits, ``fallback`` on the others."""
            out = Signal(E, name=name)
            first, fallback = named(first, f"{name}_first"), named(fallback, f"{name}_fallback")
            for p in range(P):
                lanes = range(p, E, P)
                has = named(Cat(*[first[i] for i in lanes]).any(), f"{name}_has_p{p}")
                for i in lanes:
                    m.d.comb += out[i].eq(Mux(has, first[i], fallback[i]))
            return out

        # GOOD and not skipped; on a plane whose GOOD EVs are all skipped, those: skipping is
        # to move traffic to other paths of the plane, and taking the plane out of turn sent
        # its share to the others, whose ports then queued (20 us on the failover bench's
        # seed 9).
        open_now = plane_wise(good_now & ~skipped_now, good_now, "open_now")

        def on_ready_plane(bits):
            """Whether a ready plane has one of ``bits``."""
            return (Cat(*[Cat(*[bits[i] for i in range(p, E, P)]).any()
                          for p in range(P)]) & port_ready).any()

        # The QP's entries on a held path wait, if a ready plane has another.
        cur_held = Signal(E)
        with m.Switch(qp):
            for q in range(Q):
                with m.Case(q):
                    m.d.comb += cur_held.eq(held[q])
        free = Signal(E)
        m.d.comb += free.eq(open_now & ~cur_held)
        # (per plane, so a plane whose open EVs are all on held paths keeps its turn)
        base = plane_wise(free, open_now, "base")
        # A retry leaves out the entry that lost the packet, if a ready plane has another.
        avoid = Signal(E)
        m.d.comb += avoid.eq(Mux(self.request.payload.retry,
                                 onehot(self.request.payload.avoid, "avoid_one"), 0))
        others = named(base & ~avoid, "others")
        eligible = Signal(E)
        unused = Signal(E)
        m.d.comb += [eligible.eq(Mux(on_ready_plane(others), others, base)),
                     unused.eq(eligible & ~used_now)]
        plane_bits = [Signal(per_plane, name=f"plane{p}_bits") for p in range(P)]
        renew = Signal(P)            # plane p's round is over: all its eligible EVs are open again
        for p in range(P):
            fresh = Cat(*[unused[i] for i in range(p, E, P)])
            m.d.comb += [renew[p].eq(~fresh.any()),
                         plane_bits[p].eq(Mux(renew[p], Cat(*[eligible[i]
                                                              for i in range(p, E, P)]), fresh))]
        usable = Signal(P)
        m.d.comb += usable.eq(Cat(*[plane_bits[p].any() for p in range(P)]) & port_ready)
        # Whether a ready plane has GOOD EVs at all, skipped or not: if only SKIP holds the
        # packet back, the rotation ends now rather than never.
        only_skipped = Signal()
        m.d.comb += only_skipped.eq(~usable.any() & (Cat(*[
            Cat(*[good_now[i] for i in range(p, E, P)]).any() for p in range(P)])
            & port_ready).any())

        # The plane's turn (RANDOM: a drawn one, with bits of the generator the EV's start does
        # not use), and the EV's pseudo-random start within the plane, drawn over the slots the
        # QP's profile uses on a plane, not over the whole plane: from a start in the unused
        # slots the search would always land on slot 0.
        cur_turn = Signal(range(P))
        with m.Switch(qp):
            for q in range(Q):
                with m.Case(q):
                    m.d.comb += cur_turn.eq(Mux(rounds, turn[q], lfsr[8:8 + len(cur_turn)]))
        kbits = max(1, (per_plane - 1).bit_length())
        cur_size = Signal(range(E + 1))
        with m.Switch(qp):
            for q in range(Q):
                with m.Case(q):
                    m.d.comb += cur_size.eq(size[q])
        slots = Signal(range(per_plane + 1))
        m.d.comb += slots.eq((cur_size + P - 1) >> (P - 1).bit_length())
        start = Signal(range(per_plane))
        m.d.comb += start.eq((lfsr[:kbits] * slots) >> kbits if per_plane > 1 else 0)
        # SEQUENCE: where each plane's rounds go on from (the entry after the last it gave).
        # Each plane's start is chosen here, where the plane is not yet known, so that the
        # pick's stage only selects one by its plane. ``begun``: the plane has given an EV
        # since the profile was emptied; until then its start is drawn, over the slots the
        # profile uses (a place set at the emptying could lie past them, and the search would
        # wrap to slot 0 from there).
        cursor = [[Signal(range(per_plane), name=f"cursor_q{q}_p{p}") for p in range(P)]
                  for q in range(Q)]
        begun = [Signal(P, name=f"begun_q{q}") for q in range(Q)]
        cur_cursor = [Signal(range(per_plane), name=f"cur_cursor_p{p}") for p in range(P)]
        cur_begun = Signal(P)
        with m.Switch(qp):
            for q in range(Q):
                with m.Case(q):
                    m.d.comb += [cur_begun.eq(begun[q]),
                                 *[cur_cursor[p].eq(cursor[q][p]) for p in range(P)]]
        starts = [Mux(sequence & cur_begun[p], cur_cursor[p], start) for p in range(P)]

        # A probe takes exactly its entry, on that entry's plane, once that plane is ready.
        probe = self.request.payload.probe
        entry = self.request.payload.entry
        entry_plane = plane_of(entry)
        can_pick = Mux(probe, ready_now.bit_select(entry_plane, 1), usable.any())
        follows = sb_valid & (sb_qp == qp)    # the QP's last pick is still in stage 2
        takes = ~sb_held & ~follows
        m.d.comb += self.request.ready.eq(takes & can_pick)
        accepted = self.request.valid & self.request.ready
        with m.If(~sb_held):
            m.d.sync += sb_valid.eq(accepted)
        with m.If(accepted):
            m.d.sync += [sb_qp.eq(qp), sb_probe.eq(probe), sb_entry.eq(entry),
                         *[sb_bits[p].eq(plane_bits[p]) for p in range(P)],
                         sb_usable.eq(usable), sb_renew.eq(renew), sb_turn.eq(cur_turn),
                         *[sb_start[p].eq(starts[p]) for p in range(P)]]

        # ---- stage 2: the pick ---------------------------------------------------------------
        # Plane: the first usable one from the QP's turn onwards; EV within the plane: the
        # first eligible one from the start.
        plane = first_from(m, sb_usable, sb_turn, "plane")
        bits = Signal(per_plane)
        with m.Switch(plane):
            for p in range(P):
                with m.Case(p):
                    m.d.comb += bits.eq(sb_bits[p])
        slot_start = Signal(range(per_plane))
        with m.Switch(plane):
            for p in range(P):
                with m.Case(p):
                    m.d.comb += slot_start.eq(sb_start[p])
        slot = first_from(m, bits, slot_start, "slot")
        index = Signal(range(E))
        m.d.comb += index.eq(slot * P + plane if P > 1 else slot)
        pick_index = Signal(range(E))
        pick_plane = Signal(range(P))
        m.d.comb += [pick_index.eq(Mux(sb_probe, sb_entry, index)),
                     pick_plane.eq(Mux(sb_probe, plane_of(sb_entry), plane))]
        ev_rd = ev_mem.read_port(transparent_for=())
        m.d.comb += [ev_rd.en.eq(~stall), ev_rd.addr.eq(sb_qp * E + pick_index)]
        moves = sb_valid & ~stall
        with m.If(~stall):
            m.d.sync += s2_valid.eq(sb_valid)
        with m.If(moves):
            m.d.sync += [s2_qp.eq(sb_qp), s2_index.eq(pick_index), s2_plane.eq(pick_plane)]

        m.d.comb += [
            self.grant.valid.eq(s2_valid),
            self.grant.payload.qp.eq(s2_qp),
            self.grant.payload.index.eq(s2_index),
            self.grant.payload.plane.eq(s2_plane),
            self.grant.payload.ev.eq(ev_rd.data),
        ]

        # ---- per-QP turn, rotation and SKIP expiry on each grant picked ------------------
        picked = moves & ~sb_probe
        picked_one = onehot(index, "picked_one")

        def end_rotation(q):
            """What was skipped since the last boundary now waits one more rotation, what
            waited is GOOD again; a trim's skip turns over likewise once a period."""
            m.d.sync += grants[q].eq(0)
            m.d.comb += [after["skip_now"][q].eq(skip_next[q]), after["skip_next"][q].eq(0)]
            with m.If(period[q] + 1 >= self.trim_rounds):
                m.d.sync += period[q].eq(0)
                m.d.comb += [after["trim_now"][q].eq(trim_next[q]), after["trim_next"][q].eq(0)]
            with m.Else():
                m.d.sync += period[q].eq(period[q] + 1)

        for q in range(Q):
            with m.If(self.request.valid & ~probe & takes & only_skipped & (qp == q)):
                end_rotation(q)
            with m.If(picked & (sb_qp == q)):
                m.d.sync += turn[q].eq(plane + 1 if P > 1 else 0)
                with m.Switch(plane):
                    for p in range(P):
                        with m.Case(p):
                            # (per_plane is a power of two: the slot after the last wraps)
                            m.d.sync += [cursor[q][p].eq(slot + 1), begun[q][p].eq(1)]
                            others = used[q] & ~Const(sum(1 << i for i in range(p, E, P)), E)
                            m.d.comb += after["used"][q].eq(Mux(sb_renew[p], others, used[q])
                                                            | picked_one)
                with m.If(grants[q] + 1 >= size[q]):
                    end_rotation(q)
                with m.Else():
                    m.d.sync += grants[q].eq(grants[q] + 1)

        # ---- management loads --------------------------------------------------------------
        ev_wr = ev_mem.write_port()
        spare_wr = spare_mem.write_port()
        ld = self.load.payload
        ld_plane = plane_of(ld.index)
        ld_one = onehot(ld.index, "ld_one")

        # ---- updates (two cycles when a spare must be fetched) ---------------------------
        up = self.update.payload
        up_plane = plane_of(up.index)
        up_one = onehot(up.index, "up_one")
        spare_rd = spare_mem.read_port(transparent_for=())
        # Replacing an ASSUMED_BAD EV by a spare: the update cycle takes the EV out of use and
        # reads the spare; the next cycle writes it in and puts the entry back in use, so no pick
        # can see the old value as GOOD.
        load_refused = Signal()
        update_refused = Signal()
        with m.If(load_refused | update_refused):
            m.d.comb += self.ignored.eq(1)
        fetch = Signal()
        fetch_qp = Signal(range(Q))
        fetch_index = Signal(range(E))
        fetch_one = onehot(fetch_index, "fetch_one")
        m.d.comb += [self.update.ready.eq(~fetch & ~self.load.valid),   # one at a time
                     self.load.ready.eq(~fetch)]

        with m.If(fetch):
            m.d.comb += [ev_wr.en.eq(1), ev_wr.addr.eq(fetch_qp * E + fetch_index),
                         ev_wr.data.eq(spare_rd.data)]
            m.d.sync += fetch.eq(0)
            for q in range(Q):
                with m.If(fetch_qp == q):
                    # The spare is new to the round: it may be picked before the round ends.
                    write(q, fetch_one, good=1, used=0)
                    set_path(q, fetch_one, ev_path(lay, spare_rd.data))
        with m.Elif(self.load.valid & (ld.op == LoadOp.CLEAR)):
            for q in range(Q):
                with m.If(ld.qp == q):
                    write(q, Const((1 << E) - 1, E), **{name: 0 for name in after})
                    m.d.sync += [period[q].eq(0), size[q].eq(0), grants[q].eq(0), turn[q].eq(0),
                                 *[spares[q][p].eq(0) for p in range(P)],
                                 begun[q].eq(0)]
        with m.Elif(self.load.valid & (ld.op == LoadOp.SPARE)):
            for q in range(Q):
                for p in range(P):
                    with m.If((ld.qp == q) & (ld_plane == p)):
                        with m.If(spares[q][p] < B):
                            m.d.comb += [spare_wr.en.eq(1),
                                         spare_wr.addr.eq((q * P + p) * B + spares[q][p]),
                                         spare_wr.data.eq(ld.ev)]
                            m.d.sync += spares[q][p].eq(spares[q][p] + 1)
                        with m.Else():
                            m.d.comb += load_refused.eq(1)
        with m.Elif(self.load.valid & (ld.op != LoadOp.ENTRY)):
            m.d.comb += load_refused.eq(1)      # not an operation
        with m.Elif(self.load.valid):
            m.d.comb += [ev_wr.en.eq(1), ev_wr.addr.eq(ld.qp * E + ld.index),
                         ev_wr.data.eq(ld.ev)]
            for q in range(Q):
                with m.If(ld.qp == q):
                    write(q, ld_one, good=1, used=0, denied=0, bad=0, skip_now=0,
                          skip_next=0, trim_now=0, trim_next=0)
                    set_path(q, ld_one, ev_path(lay, ld.ev))
                    with m.If(ld.index >= size[q]):
                        m.d.sync += size[q].eq(ld.index + 1)

        chg = self.changed.payload
        m.d.sync += [self.changed.valid.eq(0), chg.qp.eq(up.qp), chg.index.eq(up.index),
                     chg.state.eq(up.state), chg.management.eq(up.management),
                     chg.replaced.eq(0), chg.others.eq(0)]
        # The updated QP's state, chosen once: the checks below are then one piece of logic,
        # not one a QP (each QP's bitmaps only take the masks they make).
        u_good, u_denied, u_bad = (Signal(E, name=f"up_{name}") for name in ("good", "denied", "bad"))
        u_paths = Signal(data.ArrayLayout(range(NP), E))
        u_spares = Signal(range(B + 1))
        with m.Switch(up.qp):
            for q in range(Q):
                with m.Case(q):
                    m.d.comb += [u_good.eq(good[q]), u_denied.eq(denied[q]), u_bad.eq(bad[q]),
                                 u_paths.eq(paths[q]), u_spares.eq(Array(spares[q])[up_plane])]

        def write_up(bits, **values):
            for q in range(Q):
                with m.If(up.qp == q):
                    write(q, bits, **values)

        is_denied = u_denied.bit_select(up.index, 1)
        # The reliability engine may not retire a QP's last GOOD EV with no spare to take its
        # place: the QP could never send again, nor get the news back.
        no_spare = u_spares == 0
        rest = named(u_good & ~up_one, "up_rest")
        last_one = (~up.management & (up.state == EvState.ASSUMED_BAD) & no_spare & ~rest.any())
        # With ``path``, the other GOOD entries on its path go too, if that leaves a GOOD EV or
        # a spare.
        mine = named(u_paths[up.index], "up_path")
        same = named(Cat(*[u_paths[i] == mine for i in range(E)]), "up_same")
        siblings = Signal(E)
        m.d.comb += siblings.eq(Mux(up.path & (~no_spare | (rest & ~same).any()), rest & same, 0))
        refuse = ((up.index >= Array(size)[up.qp]) | last_one
                  | (~up.management & (is_denied | (up.state == EvState.DENIED))))
        with m.If(self.update.valid & self.update.ready):
            with m.If(refuse):
                m.d.comb += update_refused.eq(1)
            with m.Elif(up.state == EvState.GOOD):
                write_up(up_one, good=1, denied=0, bad=0, skip_now=0, skip_next=0, trim_now=0,
                         trim_next=0)
                m.d.sync += self.changed.valid.eq(u_bad.bit_select(up.index, 1) | is_denied)
            with m.Elif((up.state == EvState.SKIP) & up.trim):
                write_up(up_one, trim_now=1, trim_next=1)
            with m.Elif(up.state == EvState.SKIP):
                write_up(up_one, skip_now=1, skip_next=1)
            with m.Elif(up.state == EvState.DENIED):
                write_up(up_one, good=0, denied=1, bad=0)
                m.d.sync += self.changed.valid.eq(~is_denied)
            with m.Else():   # ASSUMED_BAD
                write_up(siblings | up_one, good=0)
                write_up(siblings, bad=1)
                m.d.sync += [self.changed.valid.eq(u_good.bit_select(up.index, 1) | siblings.any()),
                             chg.others.eq(siblings), chg.replaced.eq(~no_spare)]
                with m.If(~no_spare):
                    m.d.comb += [spare_rd.en.eq(1),
                                 spare_rd.addr.eq((up.qp * P + up_plane) * B + u_spares - 1)]
                    for q in range(Q):
                        for p in range(P):
                            with m.If((up.qp == q) & (up_plane == p)):
                                m.d.sync += spares[q][p].eq(spares[q][p] - 1)
                    m.d.sync += [fetch.eq(1), fetch_qp.eq(up.qp), fetch_index.eq(up.index)]
                    write_up(up_one, skip_now=0, skip_next=0, trim_now=0, trim_next=0)
                    m.d.comb += self.replaced.eq(1)
                with m.Else():
                    write_up(siblings | up_one, bad=1)
        return m
