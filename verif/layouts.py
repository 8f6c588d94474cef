"""Amaranth ``StructLayout`` values <-> nested Python dicts (``ArrayLayout`` values <-> lists),
for testbenches that drive and read record streams and per-QP ports."""

from __future__ import annotations

from amaranth.lib import data

__all__ = ["encode", "decode", "as_int"]


def encode(layout, values: dict) -> bytes:
    """Bytes (little-endian, as a stream's tdata) of ``values`` in ``layout``; missing fields 0.
    An ``ArrayLayout``'s values may be a list."""
    if isinstance(values, (list, tuple)):
        values = dict(enumerate(values))
    v = 0
    for name, f in layout:
        x = values.get(name, 0)
        if isinstance(x, dict):
            x = int.from_bytes(encode(f.shape, x), "little")
        v |= (x.value if hasattr(x, "value") else int(x)) << f.offset
    return v.to_bytes((layout.size + 7) // 8, "little")


def decode(layout, value) -> dict:
    """A nested dict from a value of ``layout`` (an int, or bytes as a stream's tdata, the form
    :func:`encode` gives); enum fields come back as members; an ``ArrayLayout`` gives a list."""
    if not isinstance(value, int):
        value = int.from_bytes(bytes(value), "little")
    out = {}
    for name, f in layout:
        v = (value >> f.offset) & ((1 << f.width) - 1)
        shape = f.shape
        if isinstance(shape, data.StructLayout):
            out[name] = decode(shape, v)
        elif isinstance(shape, type) and hasattr(shape, "__members__"):
            out[name] = shape(v)
        else:
            out[name] = v
    return list(out.values()) if isinstance(layout, data.ArrayLayout) else out


def as_int(layout, values) -> int:
    """:func:`encode`'s value as an integer, as a port's ``value`` takes it."""
    return int.from_bytes(encode(layout, values), "little")
