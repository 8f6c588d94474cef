"""The OCP EV expansion rule (mrcnic.ev_expand) against the OCP reference program, every rule a
profile or an EV can break, and `mrcnic ev expand` as a user runs it."""

import io
import itertools
import json
import re
import shlex
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from mrcnic import cli
from mrcnic.ev_expand import (
    EvField,
    EvInvalid,
    EvProfile,
    EvProfileError,
    EvTooBig,
    FormatMode,
    FormatProfile,
    Rule,
    expand,
    expand_fields,
    validate,
)

# The reference program: examples/ev_expansion/ev_expansion.c in the OCP companion repository
# opencomputeproject/OCP-Multipath-Reliable-Connection (commit 662a1509e7e4). It seeds random()
# with 0, so its output is fixed. Each scenario below is one of its functions: the format field
# widths and the fields it prints, then its EVs (bytes after the last bit the masks take are zero
# there and left out here) with the expanded EVs it prints (its 32-byte buffer cut to the
# format's whole bytes; the rest is zero there). To regenerate: build and run the program as its
# header comment says (on glibc) and read each scenario's "evs" and "EXPANDED EVs".
FULL16 = (16, 0, 0, 0, 0xFFFF)   # a 16-bit field wholly from the EV
REFERENCE = [
    ("stev_exp", (16, 16), [FULL16] * 2,
     [("f3b04256", "f3b04256"), ("a6fca7ae", "a6fca7ae"), ("03514976", "03514976"),
      ("33bf42bb", "33bf42bb"), ("b842b6c3", "b842b6c3"), ("d6952b28", "d6952b28"),
      ("a470b360", "a470b360"), ("c7238d56", "c7238d56")]),
    ("stev_gen_1", (16, 16), [FULL16] * 2,
     [("dc5193be", "dc5193be"), ("751aaa75", "751aaa75"), ("32250009", "32250009"),
      ("78df7daa", "78df7daa"), ("8523ad58", "8523ad58"), ("cc095180", "cc095180"),
      ("11428ff3", "11428ff3"), ("72060373", "72060373")]),
    ("stev_gen_2", (32,), [(32, 0, 0, 0, 0xFFFFFFFF)],
     [("67fb6a4e", "67fb6a4e"), ("335de425", "335de425"), ("0e509b51", "0e509b51"),
      ("b8d71b43", "b8d71b43"), ("32ba2d3f", "32ba2d3f"), ("59e4837c", "59e4837c"),
      ("a4307125", "a4307125"), ("5bd9bb62", "5bd9bb62")]),
    ("stev_gen_with_fixed", (16, 16), [(16, 0x100, 1, 0xF, 0xF), (16, 0x200, 1, 0xF, 0xF)],
     [("a4", "010a0204"), ("7f", "0107020f"), ("f8", "010f0208"), ("9f", "0109020f"),
      ("61", "01060201"), ("92", "01090202"), ("26", "01020206"), ("c4", "010c0204")]),
    ("stev_gen_with_fixed_weird_mask", (16, 16),
     [(16, 0x1000, 1, 0xFF, 0xF0F), (16, 0x2000, 1, 0xFF, 0xF0F)],
     [("3312", "13032102"), ("e33e", "1e03230e"), ("b5b5", "1b052b05"), ("d05a", "1d00250a"),
      ("24cf", "12042c0f"), ("283e", "1208230e"), ("a8e0", "1a082e00"), ("97fa", "19072f0a")]),
    ("srv6_exp", (32, 16, 16, 16, 16), [(32, 0xCAFECAFE, 0, 0, 0)] + [FULL16] * 4,
     [("43ba48d6a43de086", "cafecafe43ba48d6a43de086"),
      ("4ede65a95725e8a4", "cafecafe4ede65a95725e8a4"),
      ("9c2f77b9b290d1be", "cafecafe9c2f77b9b290d1be"),
      ("10adf9a68af15679", "cafecafe10adf9a68af15679"),
      ("0bc79524ab07adda", "cafecafe0bc79524ab07adda"),
      ("0fde02891fb8a21a", "cafecafe0fde02891fb8a21a"),
      ("032c65b093d0df2f", "cafecafe032c65b093d0df2f"),
      ("be7e9b424d580239", "cafecafebe7e9b424d580239")]),
    ("srv6_exp_subset", (32, 16, 16, 16, 16), [(32, 0xDEADDEAD, 0, 0, 0)] + [FULL16] * 2,
     [("e298f115", "deaddeade298f11500000000"), ("e13f3177", "deaddeade13f317700000000"),
      ("553f36e5", "deaddead553f36e500000000"), ("191cefee", "deaddead191cefee00000000"),
      ("ae9eca2c", "deaddeadae9eca2c00000000"), ("c02dbdcb", "deaddeadc02dbdcb00000000"),
      ("c3d34a1f", "deaddeadc3d34a1f00000000"), ("12c5ce9a", "deaddead12c5ce9a00000000")]),
    ("srv6_gen", (32, 16, 16, 16, 16), [(32, 0x42424242, 0, 0, 0)] + [(4, 0, 1, 0xF, 0xF)] * 4,
     [("78ba", "4242424200070008000b000a"), ("76dc", "4242424200070006000d000c"),
      ("d2a8", "42424242000d0002000a0008"), ("7634", "424242420007000600030004"),
      ("ff29", "42424242000f000f00020009"), ("3fe7", "424242420003000f000e0007"),
      ("144f", "42424242000100040004000f"), ("bae6", "42424242000b000a000e0006")]),
    ("srv6_gen_with_fixed", (32, 16, 16, 16, 16),
     [(32, 0x13131313, 0, 0, 0)] + [(16, k << 8, 1, 0xF, 0xF) for k in range(1, 5)],
     [("9b79", "131313130109020b03070409"), ("26c7", "1313131301020206030c0407"),
      ("f9fe", "13131313010f0209030f040e"), ("eb26", "13131313010e020b03020406"),
      ("a5f5", "13131313010a0205030f0405"), ("473c", "13131313010402070303040c"),
      ("a23b", "13131313010a02020303040b"), ("3e8c", "131313130103020e0308040c")]),
    ("srv6_srh_exp", (32,) + (16,) * 6 + (32, 16, 16),
     [(32, 0xCAFECAFE, 0, 0, 0)] + [FULL16] * 6 + [(32, 0xDECAFBAD, 0, 0, 0)] + [FULL16] * 2,
     [("b8a7310e14c80962ae4b9dd6587a4c16", "cafecafeb8a7310e14c80962ae4b9dd6decafbad587a4c16"),
      ("c496626fa3b0d56027fa9733c0ca89da", "cafecafec496626fa3b0d56027fa9733decafbadc0ca89da"),
      ("5796da93bdf5faf412ab716a4bfc273e", "cafecafe5796da93bdf5faf412ab716adecafbad4bfc273e"),
      ("62840e0062eca1080d1ba279ec43c442", "cafecafe62840e0062eca1080d1ba279decafbadec43c442"),
      ("d287ff8bcd2480d39be2249fcb695f79", "cafecafed287ff8bcd2480d39be2249fdecafbadcb695f79"),
      ("858e6e1a335aac0804cef3a435e35ae4", "cafecafe858e6e1a335aac0804cef3a4decafbad35e35ae4"),
      ("ccb8f2585459dde36343a0550522c447", "cafecafeccb8f2585459dde36343a055decafbad0522c447"),
      ("ad55668e6450b8f009084f147d33da0f", "cafecafead55668e6450b8f009084f14decafbad7d33da0f")]),
]

# What its examples leave out: widths that are not whole bytes, masks with gaps over init_val
# bits, a field narrower than its format field, fewer fields than format fields. Computed with
# the same program's check_profs() and dump_expanded_ev(), these profiles and EVs put in its
# globals in place of its own (its functions, untouched).
REFERENCE_MORE = [
    ("tiers_8_4_4", (8, 4, 4), [(8, 0, 0, 0xFF, 0xFF), (4, 0, 0, 0xF, 0xF), (4, 0, 0, 0xF, 0xF)],
     [("0000", "0000"), ("b3a5", "b3a5"), ("ffff", "ffff"), ("1234", "1234")]),
    ("odd_widths", (5, 6, 3, 7),
     [(5, 0x11, 0, 3, 0x0A), (6, 0x2A, 0, 7, 0x31), (3, 0x7, 0, 0, 0), (7, 0, 0, 0x7F, 0x7F)],
     [("fff0", "df7ff8"), ("a5c0", "cd5ee0"), ("5a30", "9b7d18"), ("0010", "895c08"),
      ("8000", "c95c00")]),
    ("one_field_of_two", (12, 20), [(10, 0x2AA, 1, 30, 0x21F)],
     [("fc", "2bf00000"), ("04", "0a100000"), ("a8", "2aa00000"), ("00", "0a000000")]),
]


def _profile(widths, fields, mode=None):
    return EvProfile(FormatProfile(widths, mode), tuple(EvField(*f) for f in fields))


@pytest.mark.parametrize("name,widths,fields,cases", REFERENCE + REFERENCE_MORE,
                         ids=[c[0] for c in REFERENCE + REFERENCE_MORE])
def test_expansion_is_the_reference_programs(name, widths, fields, cases):
    profile = _profile(widths, fields)
    for ev, want in cases:
        got = profile.expand(bytes.fromhex(ev))
        assert got.hex() == want, f"{name}: EV 0x{ev}"
        # an EV is zero-filled at the end: the same EV in the reference's 32 bytes expands alike
        assert profile.expand(bytes.fromhex(ev).ljust(32, b"\0")) == got
        # the per-field values are the expanded bits, field by field
        bits = format(int(want, 16), f"0{len(want) * 4}b")
        starts = itertools.accumulate(widths, initial=0)
        assert profile.expand_fields(bytes.fromhex(ev)) == tuple(
            int(bits[s:s + w], 2) for s, w in zip(starts, widths, strict=False))


def test_module_functions_are_the_profiles():
    fmt = FormatProfile((32, 16, 16, 16, 16))
    fields = [EvField(32, 0xDEADDEAD), EvField(*FULL16), EvField(*FULL16)]
    ev = bytes.fromhex("e298f115")
    assert expand(fmt, fields, ev).hex() == "deaddeade298f11500000000"
    assert expand_fields(fmt, fields, ev) == (0xDEADDEAD, 0xE298, 0xF115, 0, 0)


def test_a_format_field_wider_than_32_bits_is_zero_filled_on_the_left():
    # mrc_ctl.h: a format field wider than its field is zero-filled on the left. (The reference
    # packs with a shift of a 32-bit int, which C leaves undefined past 31 bits: the header
    # decides here.)
    profile = _profile((48, 16), [(32, 0xCAFECAFE, 0, 0, 0), FULL16])
    assert profile.expand(bytes.fromhex("1234")).hex() == "0000cafecafe1234"


def test_the_first_ev_bit_goes_to_the_highest_mask_bit():
    # mask 1010_0001 over init 0101_1110: EV bits 1, 1, 0 land on bits 7, 5 and 0
    profile = _profile((8,), [(8, 0b0101_1110, 0, 7, 0b1010_0001)])
    assert profile.expand(bytes([0b1100_0000])) == bytes([0b1111_1110])
    assert profile.expand(bytes([0b0010_0000])) == bytes([0b0101_1111])


# (format widths, mode, fields, ev_max_width, rule broken, what the message names)
VIOLATIONS = [
    ((), None, [], None, Rule.FMT_FIELDS, "no format fields"),
    ((16, 0), None, [FULL16], None, Rule.FMT_WIDTH, "format field 1 is 0 bits"),
    ((256, 16), None, [FULL16], None, Rule.FMT_WIDTH, "format field 0 is 256 bits"),
    ((255, 2), None, [FULL16], None, Rule.FMT_TOTAL, "257 bits, more than 256"),
    ((16, 16, 8), FormatMode.STEV, [FULL16], None, Rule.FMT_MODE, "40 bits, more than the 32"),
    ((16, 8), FormatMode.UDP, [FULL16], None, Rule.FMT_MODE, "a UDP format"),
    ((16, 16), None, [FULL16] * 3, None, Rule.FIELD_COUNT, "3 fields, but the format has 2"),
    ((64,), None, [(33, 0, 0, 0, 0)], None, Rule.FIELD_WIDTH, "field 0 is 33 bits"),
    ((16,), None, [(0, 0, 0, 0, 0)], None, Rule.FIELD_WIDTH, "field 0 is 0 bits"),
    ((16, 16), None, [(32, 0, 0, 0, 0xFFFF), (16, 0, 0, 0, 0)], None, Rule.TOTAL_WIDTH,
     "48 bits, the format fields to 32"),
    ((16, 32), None, [(24, 0, 0, 0, 0xFFFF), (8, 0, 0, 0, 0xFF)], None, Rule.FIELD_FITS,
     "field 0 is 24 bits wide, its format field 16"),
    ((16,), None, [(16, 0x10000, 0, 0, 0)], None, Rule.INIT_VAL, "init_val 0x10000"),
    ((16,), None, [(16, -1, 0, 0, 0)], None, Rule.INIT_VAL, "init_val -1"),
    ((16,), None, [(16, 0, 0, 0xF, 0x1000F)], None, Rule.MASK, "mask 0x1000f"),
    ((16,), None, [(16, 0, 0, 0x1F, 0x0F0)], None, Rule.MAX_VAL, "max_val 0x1f does not fit the 4"),
    ((16,), None, [(16, 0, 9, 8, 0xF)], None, Rule.MIN_MAX, "min_val 0x9 is above max_val 0x8"),
    ((16,), None, [(16, 0x10, 0, 1, 0)], None, Rule.FIXED, "mask 0 but min_val 0x0 and max_val 0x1"),
    ((16, 16), None, [FULL16] * 2, 24, Rule.MAX_WIDTH, "past the device's ev_max_width 24"),
]


@pytest.mark.parametrize("widths,mode,fields,max_width,rule,fragment", VIOLATIONS,
                         ids=[f"{v[4].name}-{i}" for i, v in enumerate(VIOLATIONS)])
def test_every_rule_is_refused_with_its_errno(widths, mode, fields, max_width, rule, fragment):
    fmt = FormatProfile(widths, mode)
    with pytest.raises(EvProfileError) as info:
        EvProfile(fmt, tuple(EvField(*f) for f in fields), max_width)
    e = info.value
    assert e.rule is rule, str(e)
    assert isinstance(e, EvTooBig if rule.errno_name == "E2BIG" else EvInvalid)
    assert e.errno == rule.errno
    assert fragment in str(e) and rule.text in str(e) and rule.errno_name in str(e)
    with pytest.raises(EvProfileError):   # the module-level check says the same
        validate(fmt, [EvField(*f) for f in fields], max_width)


def test_the_header_sets_which_errors_are_e2big():
    assert {r for r in Rule if r.errno_name == "E2BIG"} == {
        Rule.FMT_TOTAL, Rule.FMT_MODE, Rule.FIELD_COUNT, Rule.MAX_WIDTH}
    assert all(r.errno_name in ("EINVAL", "E2BIG") for r in Rule)


def test_every_rule_has_a_test():
    profile_rules = {v[4] for v in VIOLATIONS}
    # the EV rules and the generated count have tests of their own below
    assert profile_rules | {Rule.EV_LENGTH, Rule.EV_UNUSED, Rule.EV_COUNT} == set(Rule)


def test_the_limits_themselves_are_accepted():
    _profile((255, 1), [(32, 0xFFFFFFFF, 0, 0, 0)])            # 256 bits in all
    _profile((16, 16), [(16, 0xFFFF, 0, 0xF, 0xF000)])         # max_val fills the mask's bits
    _profile((32,), [(32, 0, 0, 0xFFFFFFFF, 0xFFFFFFFF)], FormatMode.STEV)
    _profile((16,), [(16, 0, 0, 0xFFFF, 0xFFFF)], FormatMode.UDP)
    EvProfile(FormatProfile((16, 16)), (EvField(*FULL16),) * 2, max_width=32)


def test_an_ev_longer_than_32_bytes_is_refused():
    profile = _profile((32,), [(32, 0, 0, 0, 0xFFFFFFFF)])
    with pytest.raises(EvInvalid) as info:
        profile.expand(bytes(33))
    assert info.value.rule is Rule.EV_LENGTH and "33 bytes" in str(info.value)


def test_an_ev_with_bits_past_what_the_masks_take_is_refused():
    # the reference asserts this (verify_unused_bits_zero): 0xa4 has a bit past 2 x 4 bits here
    name, widths, fields, _ = REFERENCE[3]
    profile = _profile(widths, fields)
    profile.expand(bytes([0xA4, 0x00]))
    for ev in (bytes([0xA4, 0x01]), bytes([0xA4]) + bytes(30) + bytes([0x80])):
        with pytest.raises(EvInvalid) as info:
            profile.expand(ev)
        assert info.value.rule is Rule.EV_UNUSED and "after the 8 bits" in str(info.value)


def test_generated_evs_are_every_combination_of_the_ranges_in_order():
    # the controller example's tiers (mrc_ctl_gen_ev.md): 180 x 16 x 16 EVs
    profile = _profile((8, 4, 4), [(8, 0, 0, 179, 0xFF), (4, 0, 0, 15, 0xF), (4, 0, 0, 15, 0xF)])
    evs = list(profile.generated_evs())
    assert profile.generated_count() == len(evs) == 180 * 16 * 16
    assert evs[:3] == [bytes([0, 0x00]), bytes([0, 0x01]), bytes([0, 0x02])]
    assert evs[16] == bytes([0, 0x10]) and evs[-1] == bytes([179, 0xFF])
    assert evs == sorted(evs) and len(set(evs)) == len(evs)
    assert list(profile.generated_evs(5)) == evs[:5]


GENERATED_REFERENCE = [r for r in REFERENCE if r[0] in (
    "stev_gen_with_fixed", "stev_gen_with_fixed_weird_mask", "srv6_gen", "srv6_gen_with_fixed")]


@pytest.mark.parametrize("name,widths,fields,cases", GENERATED_REFERENCE,
                         ids=[r[0] for r in GENERATED_REFERENCE])
def test_the_reference_generated_evs_are_among_ours(name, widths, fields, cases):
    # its generated examples draw each field's value in min_val..max_val, as a GENERATED
    # profile's EVs are
    profile = _profile(widths, fields)
    evs = list(profile.generated_evs())
    assert len(set(evs)) == len(evs) == profile.generated_count()
    for ev, _ in cases:
        assert bytes.fromhex(ev) in evs, f"{name}: 0x{ev}"
    # the first one has every field at its min_val, the last at its max_val
    for ev, at in ((evs[0], 2), (evs[-1], 3)):
        assert profile.expand_fields(ev)[:len(fields)] == tuple(
            EvField(*f).overlay(f[at]) for f in fields)


def test_generated_values_stay_in_their_ranges():
    fields = [(32, 0x42424242, 0, 0, 0)] + [(4, 0, 3, 5, 0xF), (16, 0x100, 2, 3, 0x3)]
    profile = _profile((32, 16, 16), fields)
    got = [profile.expand_fields(ev) for ev in profile.generated_evs()]
    assert got == [(0x42424242, a, 0x100 | b) for a in (3, 4, 5) for b in (2, 3)]


def test_a_wholly_fixed_profile_generates_one_ev():
    profile = _profile((32,), [(32, 0xFCBB0000, 0, 0, 0)])
    assert list(profile.generated_evs()) == [b""]
    assert profile.expand(b"").hex() == "fcbb0000"


def test_a_generated_count_beyond_the_combinations_is_refused():
    profile = _profile((8,), [(8, 0, 1, 3, 0x3)])
    assert len(list(profile.generated_evs(3))) == 3
    for count in (4, -1):
        with pytest.raises(EvInvalid) as info:
            list(profile.generated_evs(count))
        assert info.value.rule is Rule.EV_COUNT and f"ev_count {count}" in str(info.value)


# --- the command line --------------------------------------------------------------------------

def mrcnic(*args):
    """(exit status, stdout, stderr) of ``mrcnic ARGS``, run in this process."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            rc = cli.main(list(args))
        except SystemExit as e:
            rc = e.code
    return rc, out.getvalue(), err.getvalue()


def _field_args(fields):
    return [a for f in fields for a in ("--field", ":".join(hex(v) for v in f))]


@pytest.mark.parametrize("name,widths,fields,cases", REFERENCE, ids=[c[0] for c in REFERENCE])
def test_cli_prints_the_reference_expansions(name, widths, fields, cases):
    rc, out, err = mrcnic("ev", "expand", "--fmt", ",".join(map(str, widths)),
                          *_field_args(fields), *("0x" + ev for ev, _ in cases))
    assert (rc, err) == (0, "")
    assert out.splitlines() == ["0x" + want for _, want in cases]


def test_cli_json_names_each_ev_its_fields_and_value():
    _, widths, fields, cases = REFERENCE[6]   # srv6_exp_subset: 3 fields of 5
    args = ["--fmt", ",".join(map(str, widths)), *_field_args(fields), "0x" + cases[0][0], "e13f"]
    for argv in (["-j", "ev", "expand", *args], ["ev", "expand", "-j", *args]):
        rc, out, err = mrcnic(*argv)
        assert (rc, err) == (0, "") and len(out.splitlines()) == 1
        assert json.loads(out) == [
            {"ev": "0xe298f115", "fields": [0xDEADDEAD, 0xE298, 0xF115, 0, 0],
             "value": "0xdeaddeade298f11500000000"},
            {"ev": "0xe13f", "fields": [0xDEADDEAD, 0xE13F, 0, 0, 0],
             "value": "0xdeaddeade13f000000000000"}]
    rc, out, _ = mrcnic("ev", "expand", "-p", *args)
    assert rc == 0 and len(out.splitlines()) > 2 and json.loads(out)[1]["ev"] == "0xe13f"


def test_cli_evs_are_bytes_first_first_and_zero_filled():
    base = ["ev", "expand", "--fmt", "8,8,8", "--field", "8:0:0:0xff:0xff", "--field",
            "8:0:0:255:255", "--field", "8:0:0:0:0xff"]
    assert mrcnic(*base, "0x3412", "3412", "0x341200", "0X34")[1].splitlines() == [
        "0x341200", "0x341200", "0x341200", "0x340000"]


def test_cli_widths_not_whole_bytes_round_up():
    rc, out, _ = mrcnic("ev", "expand", "--fmt", "5,6,3,7", *_field_args(REFERENCE_MORE[1][2]),
                        "0xfff0")
    assert (rc, out) == (0, "0xdf7ff8\n")


@pytest.mark.parametrize("args,fragment", [
    (["--fmt", "16,x", "--field", "16:0:0:0:0xffff", "0x12"],
     "argument --fmt: format field width 'x' is not a number (decimal or 0x-hex)"),
    (["--fmt", "16,", "--field", "16:0:0:0:0xffff", "0x12"], "format field width ''"),
    (["--field", "16:0:0:0:0xffff", "0x12"], "required: --fmt"),
    (["--fmt", "16", "0x12"], "required: --field"),
    (["--fmt", "16", "--field", "16:0:0:0xffff", "0x12"],
     "argument --field: '16:0:0:0xffff' is not WIDTH:INIT:MIN:MAX:MASK"),
    (["--fmt", "16", "--field", "16:0:0:0:0o17", "0x12"], "MASK '0o17' is not a number"),
    (["--fmt", "16", "--field", "16:0:0:0:-1", "0x12"], "MASK '-1' is not a number"),
    (["--fmt", "16", "--field", "16:0:0:0:0xffff"], "required: EV"),
    (["--fmt", "16", "--field", "16:0:0:0:0xffff", "0xzz"], "argument EV: '0xzz' is not hex bytes"),
    (["--fmt", "16", "--field", "16:0:0:0:0xffff", "0x"], "argument EV: '0x' is not hex bytes"),
    (["--fmt", "16", "--field", "16:0:0:0:0xffff", "0x123"], "odd number of hex digits"),
    (["--fmt", "16", "--field", "16:0:0:0:0xffff", "0x" + "00" * 33],
     "is 33 bytes: an EV is at most 32"),
    (["--fmt", "16", "--mode", "roce", "--field", "16:0:0:0:0xffff", "0x12"],
     "argument --mode: invalid choice: 'roce'"),
    (["--fmt", "16", "--field", "16:0:0:0x1f:0xf", "0x12"],
     "profile refused: field 0: max_val 0x1f does not fit the 4 bits mask 0xf sets (EINVAL, "
     "rule MAX_VAL: a field's max_val fits in as many bits as its mask sets)"),
    (["--fmt", "16", "--field", "16:0:0:0:0xffff", "--field", "8:0:0:0:0xff", "0x12"],
     "profile refused: 2 fields, but the format has 1 format fields (E2BIG, rule FIELD_COUNT"),
    (["--mode", "udp", "--fmt", "16,16", "--field", "16:0:0:0:0xffff", "0x12"],
     "(E2BIG, rule FMT_MODE"),
    (["--fmt", "16", "--field", "16:0:0:0:0xff00", "0x1200", "0x1280"],
     "EV refused: the EV 0x1280 has bits set after the 8 bits the profile's masks take "
     "(EINVAL, rule EV_UNUSED"),
])
def test_cli_refuses_a_bad_argument_in_one_line(args, fragment):
    rc, out, err = mrcnic("ev", "expand", *args)
    assert rc == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith("mrcnic ev expand: ")
    assert fragment in err, err


def test_cli_ev_needs_a_verb_and_help_lists_the_rules():
    rc, _, err = mrcnic("ev")
    assert rc == 2 and len(err.splitlines()) == 1 and "VERB" in err
    rc, _, err = mrcnic("ev", "collapse")
    assert rc == 2 and ("invalid choice: 'collapse' (choose from 'show', 'deny', 'allow', 'events', "
                        "'expand', 'replace')") in err
    rc, out, _ = mrcnic("ev", "expand", "-h")
    assert rc == 0
    for rule in Rule:
        assert re.search(rf"{rule.errno_name}\s+{rule.name}\s+{re.escape(rule.text)}", out)


def test_cli_runs_as_a_program():
    r = subprocess.run([sys.executable, "-m", "mrcnic.cli", "ev", "expand", "--fmt", "32,16",
                        "--field", "32:0xfcbb0000:0:0:0", "--field", "16:0x100:0:15:0xf", "0xa0"],
                       capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout, r.stderr) == (0, "0xfcbb0000010a\n", "")


def test_the_driver_doc_shows_what_the_command_prints():
    doc = (Path(__file__).resolve().parent.parent / "docs" / "driver.md").read_text()
    blocks = re.findall(r"```console\n(.*?)```", doc, re.S)
    commands = [b for b in blocks if b.startswith("$ mrcnic ev expand")]
    assert commands, "docs/driver.md shows no `mrcnic ev expand` run"
    for block in commands:
        command, *shown = block.rstrip("\n").split("\n")
        _, out, err = mrcnic(*shlex.split(command)[2:])   # past "$ mrcnic"
        assert (out + err).rstrip("\n").split("\n") == shown, command


def test_the_rule_imports_no_gateware():
    r = subprocess.run([sys.executable, "-c", "import sys, mrcnic.ev_expand, mrcnic.cli; print("
                        "[m for m in sys.modules if m.startswith(('mrcnic.hdl', 'mrcnic.verif', "
                        "'amaranth', 'cocotb', 'scapy'))])"], capture_output=True, text=True,
                       timeout=60)
    assert (r.returncode, r.stdout) == (0, "[]\n"), r.stderr
