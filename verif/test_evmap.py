"""EV -> uSID carrier: the MRC-REFERENCE example, and the SRH form of longer paths."""

import pytest

from mrcnic.evmap import EvLayout, UsidTemplate, ev_join, ev_split, format_addr

# 2 planes, 2 spines, host0 -> host2 (MRC-REFERENCE "SRv6 uSID mode" example).
EXAMPLE = {0x0000: "fcbb:20:10:22::", 0x0001: "fcbb:20:11:22::",
           0x0100: "fcbb:1020:1010:1022::", 0x0101: "fcbb:1020:1011:1022::"}
HOST2 = UsidTemplate(block=0xFCBB, usids=(0x0020, 0x0010, 0x0022), spine_index=1)


@pytest.mark.parametrize("ev", sorted(EXAMPLE))
def test_reference_example(ev):
    route = HOST2.route(ev, EvLayout(planes=2, spines=2))
    assert format_addr(route.dst) == EXAMPLE[ev]
    assert route.segments == ()


def test_each_plane_and_spine_is_one_path():
    """The path number the reliability engine keeps its suspicion by: every (plane, spine)
    its own, whatever the EV's other bits."""
    lay = EvLayout(planes=2, spines=4)
    seen = {}
    for plane in range(2):
        for spine in range(4):
            for entropy in (0, 0xDEADBEEF, 0xFFFFFFFF):
                seen.setdefault(lay.path(lay.make(plane, spine, entropy)), set()).add(
                    (plane, spine))
    assert sorted(seen) == list(range(lay.paths)) and all(len(v) == 1 for v in seen.values())
    assert lay.path(0x0103) == 0b111 and EvLayout(planes=1, spines=3).paths == 4


def test_long_path_gets_an_srh():
    t = UsidTemplate(block=0xFCBB, usids=tuple(range(0x10, 0x19)), spine_index=2)
    r = t.route(0x0101, EvLayout(planes=2, spines=2))
    assert format_addr(r.dst) == "fcbb:1010:1011:1013:1013:1014:1015:1016"
    assert [format_addr(a) for a in r.segments] == ["fcbb:1017:1018::", format_addr(r.dst)]
    assert r.segments_left == 1


def test_f3216_carries_six_usids():
    t = UsidTemplate(block=0xFCBB0000, block_bits=32, usids=(1, 2, 3, 4, 5, 6, 7), spine_index=0)
    assert t.per_carrier == 6
    assert len(t.carriers(0, 0)) == 2


def test_ev_halves():
    assert ev_split(0x12345678) == (0x1234, 0x5678)
    assert ev_join(0x1234, 0xF5678) == 0x12345678


@pytest.mark.parametrize("bad", [
    lambda: EvLayout(planes=0), lambda: EvLayout(planes=4, plane_shift=0, spine_shift=0),
    lambda: UsidTemplate(0xFCBB, (), 0), lambda: UsidTemplate(0xFCBB, (1, 2), 5),
    lambda: UsidTemplate(0x1FFFF, (1,), 0), lambda: EvLayout(3, 2).plane(0x0300),
    lambda: ev_split(1 << 32),
])
def test_bad_parameters_are_refused(bad):
    with pytest.raises(ValueError):
        bad()
