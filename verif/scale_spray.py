"""The scale model's EV choice for one QP: what ``hdl/spray_scheduler.py`` decides, at the
speed a 128-EV profile sprayed over a 1024-host fabric needs.

ROUNDS (MRC): planes in turn among the ready ones; within a plane, every eligible EV once a
round, in an order drawn afresh each round (SEQUENCE: in profile order, round after round,
from an entry drawn once); an EV on a held path is passed over while its
plane has another; a SKIP lasts the rest of the QP's rotation (``profile size`` grants) and
the next, a trim's the rest of its period of ``trim_rounds`` rotations and the next (as the
gateware keeps them, in pairs of masks turned over at those boundaries); ASSUMED_BAD until a
probe brings it back, and a retired path takes every GOOD EV on it (never the QP's last). RANDOM
(blind spraying): plane and EV drawn afresh for every packet. With EV health off nothing
changes an EV's state, which is what the NIC's rel.ev_health does.
"""

from __future__ import annotations

import random
from collections import deque

from mrcnic.enums import EvState, SprayMode

__all__ = ["Spray"]

GOOD, SKIP, BAD = EvState.GOOD, EvState.SKIP, EvState.ASSUMED_BAD


class _Skips:
    """One pair of the gateware's SKIP masks: ``now`` is what a pick passes over, ``next``
    what it will pass over once the current period of ``rounds`` rotations ends."""

    def __init__(self, rounds: int):
        self.rounds, self.gone = max(1, rounds), 0
        self.now: set = set()
        self.next: set = set()

    def set(self, i: int) -> None:
        self.now.add(i)
        self.next.add(i)

    def clear(self, i: int) -> None:
        self.now.discard(i)
        self.next.discard(i)

    def rotation(self) -> None:
        self.gone += 1
        if self.gone >= self.rounds:
            self.gone = 0
            self.now, self.next = self.next, set()


class Spray:
    """EVs ``evs`` (entry ``i`` on plane ``plane_of[i]``, path ``path_of[i]``); a trim's SKIP
    lasts ``trim_rounds`` rotations (the register ``tx.trim_rounds``), another's
    ``mark_rounds`` (the gateware's is 1; more: a what-if)."""

    def __init__(self, evs: list[int], plane_of: list[int], path_of: list, mode: SprayMode,
                 rng: random.Random, health: bool = True, recycle: int = 0,
                 trim_rounds: int = 1, mark_rounds: int = 1):
        self.evs, self.plane_of, self.path_of = list(evs), list(plane_of), list(path_of)
        self.mode, self.rng, self.health = SprayMode(mode), rng, health
        self.n = len(self.evs)
        self.state = [GOOD] * self.n          # GOOD or ASSUMED_BAD; SKIP is the masks'
        self.marks, self.trims = _Skips(mark_rounds), _Skips(trim_rounds)
        self.grants = 0                       # picks in the current rotation
        self.planes = sorted(set(self.plane_of))
        self.members = {p: [i for i in range(self.n) if self.plane_of[i] == p] for p in self.planes}
        self.order = {p: [] for p in self.planes}
        self.pos = dict.fromkeys(self.planes, 0)
        self.first: dict = {}                 # SEQUENCE: each plane's first entry, drawn once
        self.turn = 0
        self.probe_at = 0                     # the next ASSUMED_BAD entry a probe tries
        # A what-if the gateware does not do (REPS's recycling): entries whose SACK came back
        # unmarked, oldest first, at most ``recycle`` of them, used again before the rounds.
        self.recycle = recycle
        self.fresh: deque = deque()

    def _good(self, i: int) -> bool:
        """GOOD, skipped or not."""
        return self.state[i] is GOOD

    def _open(self, i: int) -> bool:
        """GOOD and not skipped now."""
        return (self.state[i] is GOOD and i not in self.marks.now
                and i not in self.trims.now)

    def skipped(self, i: int) -> bool:
        """What the gateware's ev.state reads as SKIP."""
        return self.state[i] is GOOD and any(
            i in s for s in (self.marks.now, self.marks.next, self.trims.now, self.trims.next))

    def _granted(self) -> None:
        self.grants += 1
        if self.grants >= self.n:
            self.grants = 0
            self.marks.rotation()
            self.trims.rotation()

    def _in_plane(self, p: int, held, avoid) -> int | None:
        """The plane's next eligible entry this round (a new round once it is used up)."""
        members = self.members[p]
        order, pos = self.order[p], self.pos[p]
        # first pass: GOOD, not skipped, not held, not avoided; then the plane's open ones
        # (or, all of them skipped, its GOOD ones), the avoided one last
        for _ in range(2 * len(members) + 1):
            if pos >= len(order):
                if self.mode is SprayMode.SEQUENCE:
                    k = self.first.setdefault(p, self.rng.randrange(len(members)))
                    order = self.order[p] = members[k:] + members[:k]
                else:
                    order = self.order[p] = self.rng.sample(members, len(members))
                pos = 0
            i = order[pos]
            pos += 1
            if self._open(i) and i != avoid and not (held and self.path_of[i] in held):
                self.pos[p] = pos
                return i
        good = ([i for i in members if self._open(i)]
                or [i for i in members if self._good(i)])
        pick = [i for i in good if i != avoid] or good
        self.pos[p] = pos
        return self.rng.choice(pick) if pick else None

    def pick(self, ready: list[int], held=None, avoid: int | None = None) -> int | None:
        """The entry the next packet takes, on one of the ``ready`` planes (None: no plane is
        ready); ``held``: paths to pass over while the plane has another EV; ``avoid``: the
        entry that lost the packet being sent again."""
        if not ready:
            return None
        i = self._choose(ready, held, avoid)
        self._granted()              # (a rotation ends after its last pick, as in the gateware)
        return i

    def _choose(self, ready: list[int], held, avoid: int | None) -> int:
        if self.mode is SprayMode.RANDOM:
            p = ready[0] if len(ready) == 1 else self.rng.choice(ready)
            members = self.members[p]
            i = self.rng.choice(members)
            if i == avoid and len(members) > 1:
                i = self.rng.choice([m for m in members if m != avoid])
            return i
        while self.fresh:
            i = self.fresh.popleft()
            if (self.plane_of[i] in ready and self._open(i) and i != avoid
                    and not (held and self.path_of[i] in held)):
                return i
        planes = self.planes
        for k in range(len(planes)):
            p = planes[(self.turn + k) % len(planes)]
            if p not in ready:
                continue
            i = self._in_plane(p, held, avoid)
            if i is not None:
                self.turn = (planes.index(p) + 1) % len(planes)
                return i
        # every EV of the ready planes ASSUMED_BAD: the first of them (its probe decides)
        p = ready[0]
        return self.members[p][0]

    def clean(self, index: int) -> None:
        """A SACK came back unmarked for a packet that took entry ``index`` (the what-if)."""
        if self.recycle and self.health:
            self.fresh.append(index)
            if len(self.fresh) > self.recycle:
                self.fresh.popleft()

    def update(self, index: int, state: EvState, trim: bool = False) -> None:
        """``state`` for entry ``index``; a SKIP with ``trim`` is a trim's."""
        if not self.health:
            return
        if state is SKIP:
            if self.state[index] is GOOD:
                (self.trims if trim else self.marks).set(index)
            return
        self.state[index] = state
        if state is GOOD:
            self.marks.clear(index)
            self.trims.clear(index)

    def retire_path(self, index: int) -> None:
        """ASSUMED_BAD with path: every GOOD EV on entry ``index``'s path, unless that leaves
        the QP none."""
        if not self.health:
            return
        path = self.path_of[index]
        on = [i for i in range(self.n) if self.path_of[i] == path and self._good(i)]
        if len(on) < sum(1 for i in range(self.n) if self._good(i)):
            for i in on:
                self.state[i] = BAD

    def bad(self) -> list[int]:
        return [i for i in range(self.n) if self.state[i] is BAD]

    def next_probe(self) -> int | None:
        """The ASSUMED_BAD entry the next probe tries, in turn; None if there is none."""
        bad = self.bad()
        if not bad:
            return None
        i = next((b for b in bad if b >= self.probe_at), bad[0])
        self.probe_at = i + 1
        return i
