"""``mrcnic path show``: per entry of a QP's EV profile, its port, state, EV and route (from the
controller's binding in the NIC's store) and what path.* counted, on a FakeNic."""

import json

import pytest

from mrcnic import regmap
from mrcnic.ctl import Controller
from mrcnic.regclient import RegisterClient
from mrcnic.verif.test_cli import run_cli
from mrcnic.verif.test_ctl import LAYOUT, ONE_USID, FakeNic, generated, srv6_format


def bound_nic():
    """QP 2 holds GENERATED profile 7 (8 SRv6 EVs), loaded by a controller."""
    nic = FakeNic()
    ctl = Controller(RegisterClient(nic))
    srv6_format(ctl)
    generated(ctl)
    return nic, ctl.bind_ev_profile(7, 2, template=ONE_USID)


def test_each_entry_of_a_bound_profile_shows_its_route_and_counts(monkeypatch, capsys):
    nic, b = bound_nic()
    entry = b.entries[3]
    nic.paths[(2, entry)] = {"rtt": 1000, "timed": 40, "ecn": 3, "acked": 80, "lost": 2}
    nic.writes.clear()
    status, out, err = run_cli(monkeypatch, capsys, nic, "path", "show", "2", "-j")
    assert (status, err) == (0, "")
    rows = json.loads(out)
    assert [r["entry"] for r in rows] == sorted(b.entries)
    by_entry = {r["entry"]: r for r in rows}
    for e, ev in zip(b.entries, b.nic_evs, strict=True):
        r = by_entry[e]
        assert r["port"] == e % 2 + 1 and r["state"] == "GOOD"
        assert r["ev"] == f"{ev:#010x}" and r["route"] == str(ONE_USID.route(ev, LAYOUT))
    assert {k: by_entry[entry][k] for k in ("rtt", "rtt_ns", "timed", "ecn", "acked", "lost")} == {
        "rtt": 1000, "rtt_ns": 4000, "timed": 40, "ecn": 3, "acked": 80, "lost": 2}
    # the look leaves the selectors as it found them
    assert nic.register_writes()[-2:] == [(regmap.by_name("path.qp").offset, 0),
                                          (regmap.by_name("path.entry").offset, 0)]
    # the table has a column a field
    status, out, _ = run_cli(monkeypatch, capsys, nic, "path", "show", "2", "--clock-mhz", "500")
    header, *lines = out.splitlines()
    assert header.split() == ["qp", "entry", "port", "state", "ev", "route", "rtt", "rtt_ns",
                              "timed", "ecn", "acked", "lost"]
    assert len(lines) == 8 and lines[[r["entry"] for r in rows].index(entry)].split()[-6:] == [
        "1000", "2000", "40", "3", "80", "2"]


def test_without_a_binding_the_entries_the_nic_shows_in_use(monkeypatch, capsys):
    nic = FakeNic()
    nic.tables[1] = [[0x10, 0], [0x11, 0]]          # loaded by another tool: GOOD, no binding
    nic.paths[(1, 5)] = {"lost": 1}                  # an entry outside it that lost a packet
    status, out, _ = run_cli(monkeypatch, capsys, nic, "path", "show", "1", "-j")
    rows = json.loads(out)
    assert [(r["entry"], r["ev"], r["route"], r["lost"]) for r in rows] == [
        (0, "0x00000010", "-", 0), (1, "0x00000011", "-", 0), (5, "-", "-", 1)]
    status, out, _ = run_cli(monkeypatch, capsys, nic, "path", "show", "1", "--all", "-j")
    assert [r["entry"] for r in json.loads(out)] == list(range(nic.word("global.evs")))


@pytest.mark.parametrize("args,fragment", [
    (("path", "show", "4"), "QP 4 does not exist: this NIC has 4 QPs"),
    (("path", "show", "x1"), "argument QP"),
    (("path", "show", "1", "--clock-mhz", "0"), "not a clock in MHz above 0"),
    (("path", "frob"), "invalid choice: 'frob'"),
])
def test_a_bad_argument_is_one_line_and_nothing_written(monkeypatch, capsys, args, fragment):
    nic = FakeNic()
    try:
        status, out, err = run_cli(monkeypatch, capsys, nic, *args)
    except SystemExit as e:                       # argparse's own exit
        status, (out, err) = e.code, capsys.readouterr()
    assert status == 2 and out == "" and len(err.splitlines()) == 1 and fragment in err, err
    assert nic.writes == []
