"""Amaranth views of the wire format in :mod:`mrcnic.wire`: field layouts and extractors.

Headers arrive as bytes in lane order (byte 0 in bits 0..7) while their fields are big-endian,
so a field is gathered byte by byte rather than sliced. Nothing here knows an offset of its own:
every offset comes from the wire table.
"""

from amaranth import Cat, Const, Value
from amaranth.lib import data

from mrcnic import wire

__all__ = ["header_layout", "assign_fields", "field_value", "header_view", "header_bytes"]


def header_layout(hdr: wire.Header, *, reserved=False, only=None):
    """A ``StructLayout`` with one member per field (reserved fields only if asked), or only
    the fields named in ``only``."""
    if only is not None:
        return data.StructLayout({name: hdr.field(name).bits for name in only})
    return data.StructLayout({f.name: f.bits for f in hdr.fields if reserved or not f.reserved})


def assign_fields(dst, src):
    """Statements setting each field of the view ``dst`` (nested struct layouts walked) from
    the field of the same name in ``src``, a view with at least those fields."""
    out = []
    for name, f in dst.shape():
        if isinstance(f.shape, data.StructLayout):
            out += assign_fields(dst[name], src[name])
        else:
            out.append(dst[name].eq(src[name]))
    return out


def field_value(window, hdr: wire.Header, name: str, base: int):
    """The value of ``hdr.name`` for a header starting at byte ``base`` of ``window``."""
    bit = hdr.bit_offset(name)
    width = hdr.field(name).bits
    first = base + bit // 8
    count = (bit % 8 + width + 7) // 8
    be = Cat(*[window.word_select(first + i, 8) for i in reversed(range(count))])
    lo = 8 * count - bit % 8 - width
    return be[lo:lo + width]


def header_view(window, hdr: wire.Header, base: int, *, reserved=False):
    """A view of the header at byte ``base`` of ``window`` in :func:`header_layout` form."""
    layout = header_layout(hdr, reserved=reserved)
    return layout(Cat(*[field_value(window, hdr, name, base) for name, _ in layout]))


def header_bytes(values: dict, hdr: wire.Header):
    """The header's bytes in lane order from {field: value or int}; missing fields are zero."""
    def fit(v, bits):
        v = Const(v, bits) if isinstance(v, int) else Value.cast(v).as_unsigned()
        return Cat(v, Const(0, bits - len(v)))[:bits] if len(v) < bits else v[:bits]
    unknown = set(values) - {f.name for f in hdr.fields}
    if unknown:
        raise KeyError(f"header {hdr.name} has no field(s) {sorted(unknown)}")
    word = Cat(*[fit(values.get(f.name, 0), f.bits) for f in reversed(hdr.fields)])
    return Cat(*[word.word_select(hdr.length - 1 - i, 8) for i in range(hdr.length)])
