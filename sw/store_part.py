"""One program's part of the document the NIC's store holds (:mod:`mrcnic.store`).

Each API that keeps its objects on the NIC keeps them under its own key of that one document:
the application API (:mod:`mrcnic.app`) under ``app``, the controller (:mod:`mrcnic.ctl`) under
``ctl``. A :class:`StorePart` reads its part again when the document's generation has moved
since it last read or wrote it, and writes it back, the other parts as the NIC holds them, as
the next generation.

A write is refused (``Busy``) when the part itself changed on the NIC since it was read:
another program changed the same objects meanwhile, and one of the two changes would be lost.
When only other parts changed (a program that drives both APIs changes both parts in one
call), the write goes on over them.
"""

from __future__ import annotations

import functools

from . import store
from .ctl_errors import Busy, IoError, TooBig, run_on_nic
from .mgmt import Status, StatusError
from .regclient import Program, RegisterClient
from .store import StoreError, StoreFull

__all__ = ["StorePart", "has_store", "shared"]


def shared(fn):
    """A method of an object that keeps its part on the NIC (its ``_sync()`` takes the part up,
    ``_encoded()`` encodes it, ``_save(before)`` writes it back if it changed since): it first
    takes up what the NIC's store holds (another program may have changed it), and what it
    changes goes back there. Called from another such method, it leaves both to that one."""
    @functools.wraps(fn)
    def method(self, *args, **kwargs):
        if getattr(self, "_depth", 0):
            return fn(self, *args, **kwargs)
        self._sync()
        before = self._encoded()
        self._depth = 1
        try:
            return fn(self, *args, **kwargs)
        finally:
            self._depth = 0
            self._save(before)
    return method


def has_store(regs: RegisterClient) -> bool:
    """Whether the NIC behind ``regs`` has a store (``store.data``, register map 1.3 on): one
    built before answers BAD_ADDRESS there."""
    try:
        run_on_nic(regs, store.generation())
    except IoError as e:
        cause = e.__cause__
        if isinstance(cause, StatusError) and cause.status is Status.BAD_ADDRESS:
            return False
        raise
    return True


class StorePart:
    """The part under ``key`` of the NIC's store document: ``classes`` are the dataclasses and
    enums it may hold (:func:`mrcnic.store.decode`), ``what`` names it in errors. On a NIC
    without a store (:attr:`kept` False) it reads nothing and writes nothing."""

    def __init__(self, regs: RegisterClient, key: str, classes, what: str):
        self.regs, self.key, self.classes, self.what = regs, key, tuple(classes), what
        self.kept = has_store(regs)
        self.gen: int | None = None     # the generation last read or written
        self.doc: dict = {}             # the document then, every part

    def _run(self, program: Program):
        return run_on_nic(self.regs, program)

    def _load(self) -> tuple[int, dict]:
        try:
            gen, doc = self._run(store.load())
        except StoreError as e:
            raise IoError(f"the NIC's store: {e}") from e
        if not isinstance(doc or {}, dict):
            raise IoError("the NIC's store does not hold a document of parts")
        return gen, doc or {}

    def load(self) -> dict | None:
        """The part, decoded ({} when the document has none), if the store changed since it
        was last read or written here; None if it did not (or the NIC has no store)."""
        if not self.kept:
            return None
        if self.gen is not None and self._run(store.generation()) == self.gen:
            return None
        gen, doc = self._load()
        try:
            part = {} if self.key not in doc else store.decode(doc[self.key], self.classes)
        except StoreError as e:
            raise IoError(f"the NIC's store: {e}") from e
        if not isinstance(part, dict):
            raise IoError(f"the NIC's store does not hold {self.what} under {self.key!r}")
        self.gen, self.doc = gen, doc
        return part

    def save(self, encoded) -> None:
        """Writes ``encoded`` (:func:`mrcnic.store.encode` of the part) as the part.

        Raises Busy, with nothing written, if the part changed on the NIC since it was last
        read or written here; TooBig (``.needed``) if the document does not fit."""
        if not self.kept:
            return
        gen, doc = self.gen, self.doc
        if self._run(store.generation()) != gen:
            gen, doc = self._load()
            if doc.get(self.key) != self.doc.get(self.key):
                raise Busy(f"another program changed {self.what} in the NIC's store while this "
                           "one did; what this one did is on the NIC but not in its store: look "
                           "again and repeat it")
        new = {**doc, self.key: encoded}
        try:
            self._run(store.save(new, gen + 1))
        except StoreFull as e:
            raise TooBig(f"the NIC's store cannot hold {self.what}: {e}",
                         needed=e.needed) from e
        self.gen, self.doc = gen + 1, new
