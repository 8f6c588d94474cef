"""What the host keeps on the NIC (``store.data``): one document every program that drives the
NIC reads and writes, so that a profile one ``mrcnic`` command makes is there for the next.

The words of ``store.data``:

======  ============================================================================
word    what
======  ============================================================================
0       :data:`MAGIC`, ``MRCS``: anything else is an empty store (a NIC just reset)
1       :data:`FORMAT`: the layout of what follows
2       generation: 1 for the first document written, one more for each after it
3       the payload's length in bytes
4       the payload's CRC-32 (zlib's)
5 ..    the payload, four bytes a word, the first in the low bits: the document as
        JSON (:func:`encode`), compressed with zlib
======  ============================================================================

A writer writes the payload first and the header last, so a reader that finds a payload whose
CRC disagrees with the header has caught a write half done and reads again. Each program
that changes the document first checks that the generation is still the one it read: two
programs changing the NIC's profiles at once are told, never merged silently.

:func:`encode` and :func:`decode` turn the host's objects (dataclasses, enums, bytes, tuples,
sets and dicts with any keys) into JSON and back, naming each class; only the classes given
to :func:`decode` are made, so a document cannot make anything else.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import time
import zlib

from .regclient import Program, read_words, write_words
from .regmap import STORE_WORDS

__all__ = ["MAGIC", "FORMAT", "HEADER_WORDS", "CAPACITY", "StoreError", "StoreFull",
           "encode", "decode", "load", "save", "size", "generation", "clear"]

MAGIC = 0x5343_524D          # b"MRCS" in the word's four bytes, low first
FORMAT = 1
HEADER_WORDS = 5
#: the most payload bytes the NIC holds
CAPACITY = 4 * (STORE_WORDS - HEADER_WORDS)
PATH = "store.data"
#: how often a load reads again a payload caught half written
_RETRIES = 5


class StoreError(ValueError):
    """The store holds something this host software cannot read."""


class StoreFull(StoreError):
    """A document too large for the NIC's store; ``needed`` the payload bytes it takes."""

    def __init__(self, needed: int):
        super().__init__(f"the document is {needed} bytes compressed; the NIC's store holds "
                         f"{CAPACITY}")
        self.needed = needed


def encode(value):
    """``value`` as JSON-able data that :func:`decode` turns back into it."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, enum.Enum):
        return {"@enum": type(value).__name__, "name": value.name}
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, (bytes, bytearray)):
        return {"@bytes": bytes(value).hex()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"@class": type(value).__name__,
                **{f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}}
    if isinstance(value, tuple):
        return {"@tuple": [encode(v) for v in value]}
    if isinstance(value, (set, frozenset)):
        return {"@set": sorted((encode(v) for v in value), key=json.dumps)}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {"@dict": [[encode(k), encode(v)] for k, v in value.items()]}
    raise TypeError(f"the store cannot hold a {type(value).__name__}")


def decode(data, classes):
    """The value :func:`encode` made ``data`` from; ``classes`` the dataclasses and enums it may
    name. A set comes back a frozenset."""
    known = {c.__name__: c for c in classes}

    def one(d):
        if isinstance(d, list):
            return [one(v) for v in d]
        if not isinstance(d, dict):
            return d
        if "@enum" in d:
            return _known(known, d["@enum"])[d["name"]]
        if "@bytes" in d:
            return bytes.fromhex(d["@bytes"])
        if "@tuple" in d:
            return tuple(one(v) for v in d["@tuple"])
        if "@set" in d:
            return frozenset(one(v) for v in d["@set"])
        if "@dict" in d:
            return {one(k): one(v) for k, v in d["@dict"]}
        if "@class" in d:
            cls = _known(known, d["@class"])
            return cls(**{k: one(v) for k, v in d.items() if k != "@class"})
        raise StoreError(f"the store holds an object this software does not know: {d!r:.80}")

    try:
        return one(data)
    except (KeyError, TypeError, ValueError) as e:
        if isinstance(e, StoreError):
            raise
        raise StoreError(f"the store holds what this software cannot read back ({e})") from e


def _known(known: dict, name: str):
    if name not in known:
        raise StoreError(f"the store names {name!r}, which this software does not keep there")
    return known[name]


def _words(data: bytes) -> list[int]:
    data += bytes(-len(data) % 4)
    return [int.from_bytes(data[k:k + 4], "little") for k in range(0, len(data), 4)]


def generation() -> Program:
    """The generation of the document on the NIC; 0 for an empty store."""
    magic, _fmt, gen = yield from read_words(PATH, 0, 3)
    return gen if magic == MAGIC else 0


def load() -> Program:
    """``(generation, document)`` as the NIC holds them: ``(0, None)`` for an empty store.
    Raises :class:`StoreError` for a document of another format or one still torn after a few
    reads (a writer that stopped half way)."""
    for attempt in range(_RETRIES):
        magic, fmt, gen, length, crc = yield from read_words(PATH, 0, HEADER_WORDS)
        if magic != MAGIC:
            return 0, None
        if fmt != FORMAT:
            raise StoreError(f"the NIC's store is format {fmt}; this software reads format "
                             f"{FORMAT}: use host tools of one version, or clear it")
        if length > CAPACITY:
            raise StoreError(f"the NIC's store header claims {length} bytes; it holds "
                             f"{CAPACITY}")
        words = yield from read_words(PATH, HEADER_WORDS, -(-length // 4))
        payload = b"".join(w.to_bytes(4, "little") for w in words)[:length]
        if zlib.crc32(payload) == crc:
            try:
                doc = json.loads(zlib.decompress(payload))
            except (zlib.error, ValueError) as e:
                raise StoreError(f"the NIC's store does not decompress ({e})") from e
            return gen, doc
        time.sleep(0.01 * (attempt + 1))     # a writer is between payload and header
    raise StoreError("the NIC's store disagrees with its own CRC: a program stopped while "
                     "writing it")


def _payload(doc) -> bytes:
    return zlib.compress(json.dumps(doc, separators=(",", ":")).encode(), 9)


def size(doc) -> int:
    """The bytes ``doc`` takes in the store (of :data:`CAPACITY`)."""
    return len(_payload(doc))


def save(doc, gen: int) -> Program:
    """Writes ``doc`` (JSON-able) as generation ``gen``. Raises :class:`StoreFull`, with nothing
    written, if it does not fit."""
    payload = _payload(doc)
    if len(payload) > CAPACITY:
        raise StoreFull(len(payload))
    yield from write_words(PATH, HEADER_WORDS, _words(payload))
    yield from write_words(PATH, 0, [MAGIC, FORMAT, gen & 0xFFFF_FFFF, len(payload),
                                     zlib.crc32(payload)])


def clear() -> Program:
    """Empties the store (its magic word cleared)."""
    yield from write_words(PATH, 0, [0])
