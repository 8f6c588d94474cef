"""The OCP EV expansion rule: how an EV and its EV profile become the bits a packet carries.

The OCP MRC controller API (``mrc_ctl.h`` in opencomputeproject/OCP-Multipath-Reliable-Connection)
describes an EV with two profiles. The *EV format profile* is a list of format field widths, in
bits; their concatenation is the value on the wire. The *EV profile* is a list of fields, each
{width, init_val, min_val, max_val, mask}, field ``i`` filling format field ``i``.

Expansion, field by field in order: the field starts as ``init_val``; it takes as many bits from
the EV as its mask has bits set (the EV is a byte string read from the most significant bit of
byte 0 on, each field continuing where the previous one stopped); the first bit taken replaces
the field's highest mask bit, the next the next highest, and so on; the field is then written at
its format field's width (zero-filled on the left) after the ones before it, most significant bit
first. Format fields beyond the profile's last field are zero. The result is left-aligned in
whole bytes. A field with mask 0 is fixed: its ``init_val`` alone. The OCP repository's
``examples/ev_expansion/ev_expansion.c`` is the reference this module is tested against
(verif/test_ev_expand.py).

A GENERATED profile's EVs are the NIC's to make: each field with a mask takes every value from
``min_val`` to ``max_val`` in its mask's bit count (the header's generated example counts them
as the product of the fields' ranges). :meth:`EvProfile.generated_evs` lists them in ascending
order of the EV read as a number, the first field most significant; the header names no order,
so that one is this project's.

Every rule is a :class:`Rule`; breaking one raises :class:`EvInvalid` (``EINVAL``) or
:class:`EvTooBig` (``E2BIG``) as the header says, with the rule and the offending value. They
belong to the controller API's one error hierarchy (:mod:`mrcnic.ctl_errors`): an EvInvalid is
an ``InvalidArgument``, an EvTooBig a ``TooBig``. This module imports no gateware.
"""

from __future__ import annotations

import enum
import errno
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from .ctl_errors import InvalidArgument, MrcError, TooBig

__all__ = ["MAX_EV_BYTES", "MAX_FORMAT_FIELD_BITS", "MAX_FIELD_BITS", "FormatMode", "Rule",
           "EvProfileError", "EvInvalid", "EvTooBig", "FormatProfile", "EvField", "EvProfile",
           "validate", "expand", "expand_fields"]

MAX_EV_BYTES = 32              # MRC_CTL_EV_MAX_BYTES: an EV value, and so an expanded EV
MAX_FORMAT_FIELD_BITS = 255    # struct mrc_ctl_ev_fmt_field: a uint8_t width
MAX_FIELD_BITS = 32            # struct mrc_ctl_ev_field: init_val, min_val, max_val, mask are uint32_t


class FormatMode(enum.Enum):
    """EV format modes (``enum mrc_ctl_ev_fmt_mode``) and the most bits each can carry."""
    STEV = 32     # at most 32 bits, over the IPv6 flow label and the UDP source port
    SRV6 = 256    # an SRv6 address (16 bytes), then an optional single-segment SRH one
    UDP = 16      # the UDP source port alone

    @property
    def max_bits(self) -> int:
        return self.value


class Rule(enum.Enum):
    """The rules an EV profile and its EVs obey: (errno, the rule, where it comes from: the OCP
    header, its reference program, or this project where they are silent)."""
    FMT_FIELDS = (errno.EINVAL, "a format profile has at least one format field", "mrcnic")
    # the header's width is a uint8_t; a field of no bits carries nothing
    FMT_WIDTH = (errno.EINVAL, "a format field is 1..255 bits wide", "mrc_ctl.h")
    # MRC_CTL_EV_MAX_BYTES = 32
    FMT_TOTAL = (errno.E2BIG, "a format is at most 256 bits wide", "mrc_ctl.h")
    # the header's E2BIG for format fields a device cannot support
    FMT_MODE = (errno.E2BIG, "a format fits its mode: "
                + ", ".join(f"{m.name} {m.max_bits} bits" for m in FormatMode), "mrc_ctl.h")
    FIELD_COUNT = (errno.E2BIG, "no more fields than the format has format fields", "mrc_ctl.h")
    # the values are uint32_t; the reference asserts width <= 32
    FIELD_WIDTH = (errno.EINVAL, "a field is 1..32 bits wide", "mrc_ctl.h")
    TOTAL_WIDTH = (errno.EINVAL, "the fields' widths add up to no more than the format fields'",
                   "mrc_ctl.h")
    # the header has the format profile limit each field's width; the reference would silently
    # cut a wider field's high bits
    FIELD_FITS = (errno.EINVAL, "a field is no wider than its format field", "mrc_ctl.h")
    INIT_VAL = (errno.EINVAL, "a field's init_val fits in its width", "mrc_ctl.h")
    MASK = (errno.EINVAL, "a field's mask sets no bit outside its width", "mrc_ctl.h")
    MAX_VAL = (errno.EINVAL, "a field's max_val fits in as many bits as its mask sets",
               "mrc_ctl.h")
    # generated values lie between min_val and max_val
    MIN_MAX = (errno.EINVAL, "a field's min_val is at most its max_val", "mrc_ctl.h")
    FIXED = (errno.EINVAL, "a fixed field (mask 0) has min_val and max_val 0", "mrc_ctl.h")
    MAX_WIDTH = (errno.E2BIG, "the fields extend no further than the device's ev_max_width",
                 "mrc_ctl.h")
    # MRC_CTL_EV_MAX_BYTES
    EV_LENGTH = (errno.EINVAL, "an EV is at most 32 bytes", "mrc_ctl.h")
    # verify_unused_bits_zero() asserts it
    EV_UNUSED = (errno.EINVAL, "an EV has no bits set beyond those the masks take",
                 "ev_expansion.c")
    # the header's generated example derives ev_count from the fields' ranges
    EV_COUNT = (errno.EINVAL, "a GENERATED profile's ev_count is at most the EVs its fields make",
                "mrcnic")

    def __init__(self, code: int, text: str, source: str):
        self.errno = code
        self.text = text
        self.source = source

    @property
    def errno_name(self) -> str:
        return errno.errorcode[self.errno]


class EvProfileError(MrcError, ValueError):
    """An EV profile or an EV broke :attr:`rule`; :attr:`errno` is what the OCP API returns."""

    def __init__(self, rule: Rule, message: str):
        self.rule = rule
        self.errno = rule.errno
        self.detail = message
        super().__init__(f"{message} [{rule.errno_name}: {rule.text}]")


class EvInvalid(EvProfileError, InvalidArgument):
    """``EINVAL``: an argument the OCP API calls invalid."""


class EvTooBig(EvProfileError, TooBig):
    """``E2BIG``: more fields or bits than the format or the device can hold."""


def _refuse(rule: Rule, message: str):
    raise (EvTooBig if rule.errno == errno.E2BIG else EvInvalid)(rule, message)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


@dataclass(frozen=True)
class FormatProfile:
    """An EV format profile: its format fields' widths in bits, first on the wire first.

    Parameters
    ----------
    widths : sequence of int
        One width per format field.
    mode : FormatMode, optional
        Where the value goes (STEV, SRV6, UDP); it bounds the total width. None: only the
        32-byte limit of an EV applies.
    """
    widths: tuple[int, ...]
    mode: FormatMode | None = None

    def __post_init__(self):
        object.__setattr__(self, "widths", tuple(self.widths))

    @property
    def total_width(self) -> int:
        return sum(self.widths)

    @property
    def byte_length(self) -> int:
        """Bytes of an expanded EV: the total width rounded up to whole bytes."""
        return (self.total_width + 7) // 8

    def validate(self) -> None:
        if not self.widths:
            _refuse(Rule.FMT_FIELDS, "the format profile has no format fields")
        for i, w in enumerate(self.widths):
            if not _is_int(w) or not 1 <= w <= MAX_FORMAT_FIELD_BITS:
                _refuse(Rule.FMT_WIDTH, f"format field {i} is {w!r} bits wide, not 1..255")
        if self.total_width > 8 * MAX_EV_BYTES:
            _refuse(Rule.FMT_TOTAL, f"the format fields add up to {self.total_width} bits, more "
                    f"than {8 * MAX_EV_BYTES}")
        if self.mode is not None and self.total_width > self.mode.max_bits:
            _refuse(Rule.FMT_MODE, f"the format fields add up to {self.total_width} bits, more "
                    f"than the {self.mode.max_bits} a {self.mode.name} format carries")


@dataclass(frozen=True)
class EvField:
    """One field of an EV profile (``struct mrc_ctl_ev_field``).

    Parameters
    ----------
    width : int
        Bits of the field, 1..32.
    init_val : int
        The field's value before EV bits overwrite its mask bits (the whole value of a fixed
        field).
    min_val, max_val : int
        The range a GENERATED profile's values take for this field (in the mask's bit count);
        0 and 0 for a fixed field.
    mask : int
        Which of the field's bits come from the EV; 0 for a fixed field.
    """
    width: int
    init_val: int = 0
    min_val: int = 0
    max_val: int = 0
    mask: int = 0

    @property
    def ev_bits(self) -> int:
        """Bits of the EV this field takes: its mask's bit count."""
        return self.mask.bit_count()

    @property
    def fixed(self) -> bool:
        return self.mask == 0

    def overlay(self, taken: int) -> int:
        """The field's value with ``taken`` (``ev_bits`` bits, first taken most significant)
        written over its mask bits, the first bit taken on the highest mask bit."""
        value = self.init_val
        k = self.ev_bits
        for b in reversed(range(self.width)):
            if self.mask >> b & 1:
                k -= 1
                value = (value & ~(1 << b)) | (((taken >> k) & 1) << b)
        return value


def validate(fmt: FormatProfile, fields: Sequence[EvField], max_width: int | None = None) -> None:
    """Raises :class:`EvProfileError` naming the first rule ``fields`` and ``fmt`` break.

    ``max_width`` is a device's ``ev_max_width`` (None: no device limit)."""
    fmt.validate()
    if len(fields) > len(fmt.widths):
        _refuse(Rule.FIELD_COUNT, f"{len(fields)} fields, but the format has "
                f"{len(fmt.widths)} format fields")
    for i, f in enumerate(fields):
        if not _is_int(f.width) or not 1 <= f.width <= MAX_FIELD_BITS:
            _refuse(Rule.FIELD_WIDTH, f"field {i} is {f.width!r} bits wide, not 1..32")
        for name, rule in (("init_val", Rule.INIT_VAL), ("mask", Rule.MASK),
                           ("max_val", Rule.MAX_VAL), ("min_val", Rule.MIN_MAX)):
            v = getattr(f, name)
            if not _is_int(v) or v < 0:
                _refuse(rule, f"field {i}: {name} {v!r} is not an unsigned whole number")
    total = sum(f.width for f in fields)
    if total > fmt.total_width:
        _refuse(Rule.TOTAL_WIDTH, f"the fields add up to {total} bits, the format fields to "
                f"{fmt.total_width}")
    for i, (f, fw) in enumerate(zip(fields, fmt.widths, strict=False)):
        if f.width > fw:
            _refuse(Rule.FIELD_FITS, f"field {i} is {f.width} bits wide, its format field {fw}")
        if f.init_val >> f.width:
            _refuse(Rule.INIT_VAL, f"field {i}: init_val {f.init_val:#x} does not fit its "
                    f"{f.width} bits")
        if f.mask >> f.width:
            _refuse(Rule.MASK, f"field {i}: mask {f.mask:#x} has bits set outside its "
                    f"{f.width} bits")
        if f.fixed:
            if f.min_val or f.max_val:
                _refuse(Rule.FIXED, f"field {i} has mask 0 but min_val {f.min_val:#x} and "
                        f"max_val {f.max_val:#x}")
            continue
        if f.max_val >> f.ev_bits:
            _refuse(Rule.MAX_VAL, f"field {i}: max_val {f.max_val:#x} does not fit the "
                    f"{f.ev_bits} bits mask {f.mask:#x} sets")
        if f.min_val > f.max_val:
            _refuse(Rule.MIN_MAX, f"field {i}: min_val {f.min_val:#x} is above max_val "
                    f"{f.max_val:#x}")
    if max_width is not None and total > max_width:
        _refuse(Rule.MAX_WIDTH, f"the fields add up to {total} bits, past the device's "
                f"ev_max_width {max_width}")


@dataclass(frozen=True)
class EvProfile:
    """An EV profile with its format profile, checked against every :class:`Rule` when made.

    Parameters
    ----------
    format : FormatProfile
    fields : sequence of EvField
        At most one per format field; format fields beyond them expand to zero.
    max_width : int, optional
        The device's ``ev_max_width``, if it has one.

    Raises
    ------
    EvInvalid, EvTooBig
        The first rule the profile breaks.
    """
    format: FormatProfile
    fields: tuple[EvField, ...]
    max_width: int | None = None

    def __post_init__(self):
        object.__setattr__(self, "fields", tuple(self.fields))
        validate(self.format, self.fields, self.max_width)

    @property
    def ev_bits(self) -> int:
        """Bits of an EV the profile reads; an EV's bits after them must be zero."""
        return sum(f.ev_bits for f in self.fields)

    def expand_fields(self, ev: bytes) -> tuple[int, ...]:
        """The value of every format field for ``ev`` (zero beyond the profile's fields)."""
        ev = bytes(ev)
        if len(ev) > MAX_EV_BYTES:
            _refuse(Rule.EV_LENGTH, f"the EV 0x{ev.hex()} is {len(ev)} bytes long")
        bits = 8 * len(ev)
        word = int.from_bytes(ev, "big")
        out, taken_so_far = [], 0
        for f in self.fields:
            n = f.ev_bits
            # bits past the EV's end read as zero, as a shorter EV is zero-filled
            shift = bits - taken_so_far - n
            taken = (word >> shift if shift >= 0 else word << -shift) & ((1 << n) - 1)
            taken_so_far += n
            out.append(f.overlay(taken))
        if taken_so_far < bits and word & ((1 << (bits - taken_so_far)) - 1):
            _refuse(Rule.EV_UNUSED, f"the EV 0x{ev.hex()} has bits set after the "
                    f"{taken_so_far} bits the profile's masks take")
        return tuple(out) + (0,) * (len(self.format.widths) - len(out))

    def expand(self, ev: bytes) -> bytes:
        """The expanded EV: the format fields' values concatenated, left-aligned in
        :attr:`FormatProfile.byte_length` bytes, byte 0 first on the wire."""
        word = 0
        for value, width in zip(self.expand_fields(ev), self.format.widths, strict=True):
            word = word << width | value
        n = self.format.byte_length
        return (word << (8 * n - self.format.total_width)).to_bytes(n, "big")

    def generated_count(self) -> int:
        """How many distinct EVs a GENERATED profile of these fields makes."""
        count = 1
        for f in self.fields:
            if not f.fixed:
                count *= f.max_val - f.min_val + 1
        return count

    def generated_evs(self, ev_count: int | None = None) -> Iterator[bytes]:
        """The first ``ev_count`` EVs (all of them by default) a GENERATED profile makes, each
        its fields' values at their mask bit counts, left-aligned in whole bytes."""
        total = self.generated_count()
        if ev_count is None:
            ev_count = total
        if not _is_int(ev_count) or not 0 <= ev_count <= total:
            _refuse(Rule.EV_COUNT, f"ev_count {ev_count!r}, but the fields make {total} EVs")
        live = [f for f in self.fields if not f.fixed]
        bits = sum(f.ev_bits for f in live)
        n = (bits + 7) // 8
        combos = itertools.product(*(range(f.min_val, f.max_val + 1) for f in live))
        for values in itertools.islice(combos, ev_count):
            word = 0
            for f, v in zip(live, values, strict=True):
                word = word << f.ev_bits | v
            yield (word << (8 * n - bits)).to_bytes(n, "big")


def expand(fmt: FormatProfile, fields: Sequence[EvField], ev: bytes) -> bytes:
    """``ev`` expanded under ``fields`` and ``fmt`` (see :meth:`EvProfile.expand`)."""
    return EvProfile(fmt, tuple(fields)).expand(ev)


def expand_fields(fmt: FormatProfile, fields: Sequence[EvField], ev: bytes) -> tuple[int, ...]:
    """Every format field's value for ``ev`` (see :meth:`EvProfile.expand_fields`)."""
    return EvProfile(fmt, tuple(fields)).expand_fields(ev)
