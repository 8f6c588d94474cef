"""``mrcnic ev-fmt``, ``ev-profile``, ``cc-profile`` and ``ev replace``: the OCP controller's
profiles from the command line, against a FakeNic. The FakeNic holds the NIC's store too, and
each ``cli.main`` call makes its own controller, as each command a user runs does: a profile
one command makes is there for the next only because the NIC keeps it.

Every bad argument or value is one line on stderr naming it, exit status 2, and nothing written
to the NIC, not even its store; the controller's refusals are its message and errno name, exit
status 2 for EINVAL and E2BIG and 1 for the rest."""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from mrcnic import driver, regmap, store
from mrcnic.enums import EvState
from mrcnic.mgmt import Status, StatusError
from mrcnic.regclient import RegisterClient
from mrcnic.verif.test_cli import run_cli
from mrcnic.verif.test_ctl import BLOCK, LAYOUT, ONE_USID, FakeNic

GOOD, DENIED = EvState.GOOD.value, EvState.DENIED.value
SRV6_FIELDS = ("--field", "32:0xfcbbbb00:0:0:0", "--field", "16:0x10:0:7:0x1003")
STEV_FIELDS = ("--field", "16:0:0:0xffff:0xffff", "--field", "16:0:0:0xffff:0xffff")
TEMPLATE = "0xfcbbbb00/32:0x10@0"


@pytest.fixture
def mrcnic(monkeypatch, capsys):
    """``mrcnic(nic, *args)``: (exit status, stdout, stderr) of ``mrcnic ARGS`` on ``nic``."""
    def run(nic, *args):
        try:
            return run_cli(monkeypatch, capsys, nic, *args)
        except SystemExit as e:          # argparse's refusal
            out, err = capsys.readouterr()
            return e.code, out, err
    return run


def ok(mrcnic, nic, *args) -> str:
    status, out, err = mrcnic(nic, *args)
    assert (status, err) == (0, ""), err
    return out


def configured(mrcnic) -> FakeNic:
    """A NIC holding EV format profiles 1 (SRV6 32,16) and 2 (STEV 16,16), ONLINE; GENERATED
    EV profile 7 of format 1 (eight EVs: the plane and spine of a one-uSID route), ONLINE;
    EXPLICIT EV profile 5 of format 2, OFFLINE, its two entries 0x5a5a0000 on port 1 and one
    unpopulated; CC profile 3, OFFLINE. Nothing loaded into a QP."""
    nic = FakeNic()
    ok(mrcnic, nic, "ev-fmt", "add", "1", "--mode", "srv6", "--widths", "32,16")
    ok(mrcnic, nic, "ev-fmt", "add", "2", "--mode", "stev", "--widths", "16,16")
    ok(mrcnic, nic, "ev-profile", "add", "7", "--fmt", "1", "--mode", "generated", "--count",
       "8", *SRV6_FIELDS)
    ok(mrcnic, nic, "ev-profile", "add", "5", "--fmt", "2", "--mode", "explicit", "--count",
       "2", *STEV_FIELDS, "--offline")
    ok(mrcnic, nic, "ev", "replace", "5", "unpopulated", "0x5a5a0000", "--port", "1")
    ok(mrcnic, nic, "cc-profile", "add", "3", "--offline")
    return nic


# -- the OCP controller flow ------------------------------------------------------------------


def test_profiles_live_on_the_nic_and_show_as_tables_or_json(mrcnic):
    nic = configured(mrcnic)
    # so far only the store was written: a profile reaches the registers when bound or applied
    assert nic.writes and nic.register_writes() == []
    assert ok(mrcnic, nic, "ev-fmt", "show").splitlines() == [
        "id  state   mode  widths",
        " 1  ONLINE  SRV6  32,16",
        " 2  ONLINE  STEV  16,16"]
    assert json.loads(ok(mrcnic, nic, "-j", "ev-fmt", "show", "2")) == {
        "id": 2, "state": "ONLINE", "mode": "STEV", "widths": [16, 16]}
    # an id not configured is INIT, as every OCP profile id starts
    assert json.loads(ok(mrcnic, nic, "ev-fmt", "show", "9", "-j")) == {
        "id": 9, "state": "INIT", "mode": None, "widths": None}
    assert ok(mrcnic, nic, "ev-profile", "show").splitlines() == [
        "id  state    mode       fmt  count  min_active  events  qps  fields",
        " 5  OFFLINE  EXPLICIT   2    2      1           none    -    "
        "16:0:0:0xffff:0xffff 16:0:0:0xffff:0xffff",
        " 7  ONLINE   GENERATED  1    8      1           none    -    "
        "32:0xfcbbbb00:0:0:0 16:0x10:0:7:0x1003"]
    assert json.loads(ok(mrcnic, nic, "-j", "ev-profile", "show")) == [
        {"id": 5, "state": "OFFLINE", "mode": "EXPLICIT", "fmt": 2, "count": 2,
         "min_active": 1, "events": [], "qps": [],
         "fields": [{"width": 16, "init": 0, "min": 0, "max": 0xFFFF, "mask": 0xFFFF}] * 2},
        {"id": 7, "state": "ONLINE", "mode": "GENERATED", "fmt": 1, "count": 8,
         "min_active": 1, "events": [], "qps": [],
         "fields": [{"width": 32, "init": BLOCK, "min": 0, "max": 0, "mask": 0},
                    {"width": 16, "init": 0x10, "min": 0, "max": 7, "mask": 0x1003}]}]
    assert ok(mrcnic, nic, "cc-profile", "show").splitlines() == [
        "id  state    algorithm     nic_profile  config",
        " 3  OFFLINE  uet-1.0-nscc  -            none"]
    # the shown fields are what --field takes: a profile made from them is the same
    fields = ok(mrcnic, nic, "ev-profile", "show", "7").splitlines()[1].split()[-2:]
    ok(mrcnic, nic, "ev-profile", "add", "8", "--fmt", "1", "--mode", "generated", "--count",
       "8", "--field", fields[0], "--field", fields[1])
    assert (json.loads(ok(mrcnic, nic, "-j", "ev-profile", "show", "8"))["fields"]
            == json.loads(ok(mrcnic, nic, "-j", "ev-profile", "show", "7"))["fields"])


def test_a_generated_srv6_profile_is_loaded_into_a_qps_table_and_taken_out(mrcnic):
    nic = configured(mrcnic)
    bound = json.loads(ok(mrcnic, nic, "-j", "ev-profile", "bind", "7", "2", "--template",
                          TEMPLATE))
    assert (bound["id"], bound["qp"], bound["mode"]) == (7, 2, "USID")
    assert bound["template"] == {"block": "0xfcbbbb00", "block_bits": 32, "usids": ["0x10"],
                                 "spine_index": 0}
    shown = json.loads(ok(mrcnic, nic, "-j", "ev-profile", "show", "7", "--evs"))
    assert shown["qps"] == [2] and len(shown["evs"]) == 8
    for ev, entry, nic_ev in zip(shown["evs"], bound["entries"], bound["nic_evs"], strict=True):
        nic_ev = int(nic_ev, 16)
        # the table holds, GOOD, the NIC EV whose route is the EV's expansion, on its port
        assert nic.tables[2][entry] == [nic_ev, GOOD]
        assert (ev["entry"], ev["nic_ev"], ev["state"]) == (entry, f"{nic_ev:#010x}", "GOOD")
        expansion = bytes.fromhex(ev["expansion"][2:])
        assert ONE_USID.route(nic_ev, LAYOUT).dst == int.from_bytes(expansion.ljust(16, b"\0"))
        assert ev["port"] == LAYOUT.plane(nic_ev) + 1 == entry % 2 + 1
    assert ok(mrcnic, nic, "ev-profile", "show", "7", "--evs").splitlines()[3:6] == [
        "index  ev    port  state  expansion       entry  nic_ev",
        "    0  0x00     1  GOOD   0xfcbbbb000010      0  0x00000000",
        "    1  0x20     1  GOOD   0xfcbbbb000011      2  0x00000001"]
    # the template as an address is the same template
    again = json.loads(ok(mrcnic, nic, "-j", "ev-profile", "bind", "7", "3", "--template",
                          "fcbb:bb00::/32:0x10@0"))
    assert (again["template"], again["nic_evs"]) == (bound["template"], bound["nic_evs"])
    status, out, err = mrcnic(nic, "ev-profile", "show", "7", "--evs")
    assert (status, out) == (2, "") and err == (
        "mrcnic ev-profile show: EV profile 7 is loaded into QPs 2, 3, each with its own "
        "states: give --qp\n")
    assert "0x00000103" in ok(mrcnic, nic, "ev-profile", "show", "7", "--evs", "--qp", "3")
    # loaded, it stays until its QPs are emptied
    nic.writes.clear()
    status, out, err = mrcnic(nic, "ev-profile", "del", "7")
    assert (status, out, nic.writes) == (1, "", [])
    assert err == ("mrcnic ev-profile del: EV profile 7 is loaded into QP(s) 2, 3: unbind them "
                   "first (EBUSY)\n")
    assert json.loads(ok(mrcnic, nic, "-j", "ev-profile", "unbind", "2")) == {"qp": 2, "id": 7}
    assert ok(mrcnic, nic, "ev-profile", "unbind", "3") == ""
    assert nic.tables[2] == nic.tables[3] == []
    assert json.loads(ok(mrcnic, nic, "-j", "ev-profile", "del", "7")) == {"id": 7,
                                                                            "state": "INIT"}
    assert json.loads(ok(mrcnic, nic, "-j", "ev-profile", "show", "7"))["state"] == "INIT"
    assert ok(mrcnic, nic, "ev-fmt", "del", "1") == ""
    assert [r.split()[0] for r in ok(mrcnic, nic, "ev-fmt", "show").splitlines()] == ["id", "2"]


def test_an_explicit_profile_is_filled_by_ev_replace_then_loaded(mrcnic):
    nic = configured(mrcnic)
    status, out, err = mrcnic(nic, "ev-profile", "set", "5", "--state", "online")
    assert (status, out) == (2, "") and err == (
        "mrcnic ev-profile set: EV profile 5 cannot go ONLINE: EV array entry 1 (of 1) is "
        "unpopulated; REPLACE_EV fills it (EINVAL)\n")
    # loaded nowhere: the states are the controller's, an unpopulated entry's UNKNOWN
    assert ok(mrcnic, nic, "ev-profile", "show", "5", "--evs").splitlines()[3:] == [
        "index  ev           port  state    expansion",
        "    0  0x5a5a0000      1  GOOD     0x5a5a0000",
        "    1  unpopulated     -  UNKNOWN  -"]
    assert json.loads(ok(mrcnic, nic, "-j", "ev-profile", "show", "5", "--evs"))["evs"][1] == {
        "index": 1, "ev": None, "port": 0, "state": None, "expansion": None}
    replaced = json.loads(ok(mrcnic, nic, "-j", "ev", "replace", "5", "unpopulated",
                             "0x5a5a0100", "--port", "2"))
    assert replaced == {"profile": 5, "old": None, "new": "0x5a5a0100", "port": 2,
                        "state": "GOOD", "all_copies": False}
    ok(mrcnic, nic, "ev-profile", "set", "5", "--state", "online", "--events", "assumed_bad")
    ok(mrcnic, nic, "ev-profile", "bind", "5", "1")
    assert nic.tables[1] == [[0x5A5A_0000, GOOD], [0x5A5A_0100, GOOD]]
    # in place in the table too; the new EV takes the old one's port unless told
    ok(mrcnic, nic, "ev", "replace", "5", "0x5a5a0000", "0x5a5a0010", "--state", "denied")
    assert nic.tables[1] == [[0x5A5A_0010, DENIED], [0x5A5A_0100, GOOD]]
    assert ok(mrcnic, nic, "ev-profile", "show", "5", "--evs").splitlines() == [
        "id  state   mode      fmt  count  min_active  events       qps  fields",
        " 5  ONLINE  EXPLICIT  2    2      1           ASSUMED_BAD  1    "
        "16:0:0:0xffff:0xffff 16:0:0:0xffff:0xffff",
        "",
        "index  ev          port  state   expansion   entry  nic_ev",
        "    0  0x5a5a0010     1  DENIED  0x5a5a0010      0  0x5a5a0010",
        "    1  0x5a5a0100     2  GOOD    0x5a5a0100      1  0x5a5a0100"]
    # an EV that names plane 1 cannot take the entry on port 1
    nic.writes.clear()
    status, out, err = mrcnic(nic, "ev", "replace", "5", "0x5a5a0010", "0x5a5a0110", "--port",
                              "1")
    assert (status, out, nic.writes) == (1, "", [])
    assert err == ("mrcnic ev replace: EV profile 5: the new EV 0x5a5a0110 port 1: the NIC "
                   "sends it on port 2, the plane its EV 0x5a5a0110 names (EPERM)\n")


def test_a_cc_profile_is_applied_to_the_rel_registers(mrcnic):
    nic = configured(mrcnic)
    ok(mrcnic, nic, "cc-profile", "set", "3", "--target-delay", "6000", "--base-rtt", "2000",
       "--max-cwnd", "300000", "--fi", "0", "--disable-qa", "1", "--state", "online")
    assert nic.register_writes() == []
    assert json.loads(ok(mrcnic, nic, "-j", "cc-profile", "show", "3")) == {
        "id": 3, "state": "ONLINE", "algorithm": "uet-1.0-nscc", "nic_profile": None,
        "config": {"disable_qa": 1, "base_rtt": 2000, "fi": 0, "max_cwnd": 300_000,
                   "target_delay": 6000}}
    # 6000 + 2000 ns at 250 MHz; the window starts at its largest, as NSCC's does
    assert ok(mrcnic, nic, "cc-profile", "set", "3", "--apply").splitlines() == [
        "register         value",
        "rel.cc_fair          0",
        "rel.target_rtt    2000",
        "rel.cwnd_max    300000",
        "rel.cwnd_init   300000"]
    regs = {r: nic.word(f"rel.{r}") for r in ("target_rtt", "cwnd_max", "cwnd_init", "cc_fair")}
    assert regs == {"target_rtt": 2000, "cwnd_max": 300_000, "cwnd_init": 300_000, "cc_fair": 0}
    # a field given changes, the others stay; the profile applied goes to the NIC at once
    ok(mrcnic, nic, "cc-profile", "set", "3", "--max-cwnd", "100000")
    assert (nic.word("rel.cwnd_max"), nic.word("rel.target_rtt")) == (100_000, 2000)
    applied = json.loads(ok(mrcnic, nic, "-j", "cc-profile", "set", "3", "--target-delay",
                            "2000", "--clock-mhz", "156.25", "--apply"))
    assert applied["config"]["base_rtt"] == 2000 and applied["registers"] == {
        "rel.cc_fair": 0, "rel.target_rtt": 625, "rel.cwnd_max": 100_000,
        "rel.cwnd_init": 100_000}                      # 4000 ns, 6.4 ns a cycle
    assert nic.word("rel.target_rtt") == 625
    ok(mrcnic, nic, "cc-profile", "del", "3")
    assert ok(mrcnic, nic, "cc-profile", "show") == ""


def test_on_a_nic_that_keeps_cc_profiles_each_is_one_of_its_own(mrcnic):
    nic = FakeNic(cc_profiles=4)
    ok(mrcnic, nic, "cc-profile", "add", "30", "--max-cwnd", "200000")
    ok(mrcnic, nic, "cc-profile", "add", "40", "--max-cwnd", "50000", "--target-delay", "2000")
    ok(mrcnic, nic, "cc-profile", "add", "50", "--offline")
    assert ok(mrcnic, nic, "cc-profile", "show").splitlines() == [
        "id  state    algorithm     nic_profile  config",
        "30  ONLINE   uet-1.0-nscc  1            max_cwnd=200000",
        "40  ONLINE   uet-1.0-nscc  2            max_cwnd=50000 target_delay=2000",
        "50  OFFLINE  uet-1.0-nscc  -            none"]
    # the NIC took each as it went ONLINE, and takes a change at once; rel.* is left alone
    assert (nic.cc_sets[1]["cwnd_max"], nic.cc_sets[2]["target_rtt"]) == (200_000, 500)
    ok(mrcnic, nic, "cc-profile", "set", "40", "--max-cwnd", "60000")
    assert nic.cc_sets[2]["cwnd_max"] == 60_000
    assert nic.word("rel.cwnd_max") != 60_000
    # a QP's window on profile 40's holds it
    RegisterClient(nic).run(driver.configure_qp(2, driver.QpConfig(
        dqp=9, dst_mac="02:00:00:00:00:02", dst_ip="fd00::2", cc_profile=2)))
    status, out, err = mrcnic(nic, "cc-profile", "del", "40")
    assert (status, out) == (1, "") and err == (
        "mrcnic cc-profile del: CC profile 40 is the window of QP(s) 2 (qp.cc_profile 2): move "
        "them to another first (EBUSY)\n")
    assert json.loads(ok(mrcnic, nic, "-j", "cc-profile", "show", "40"))["state"] == "ONLINE"


# -- what is refused --------------------------------------------------------------------------

ADD_8 = ("ev-profile", "add", "8", "--fmt", "1", "--mode", "generated", "--count", "8")


@pytest.mark.parametrize("args,status,message", [
    # an unknown verb, a missing one
    (("ev-profile", "frob"), 2, "mrcnic ev-profile: argument VERB: invalid choice: 'frob' "
                                "(choose from 'add', 'show', 'set', 'del', 'bind', 'unbind')"),
    (("cc-profile",), 2, "mrcnic cc-profile: the following arguments are required: VERB"),
    (("ev", "replace", "5", "0x5a5a0000"), 2,
     "mrcnic ev replace: the following arguments are required: NEW_EV"),
    # a bad number or value
    (("ev-profile", "bind", "7", "x1"), 2,
     "mrcnic ev-profile bind: argument QP: QP 'x1' is not a number (decimal or 0x-hex)"),
    (("ev-fmt", "add", "1", "--mode", "srv6", "--widths", "32,sixteen"), 2,
     "argument --widths: format field width 'sixteen' is not a number"),
    (("cc-profile", "add", "4", "--max-cwnd", "lots"), 2,
     "argument --max-cwnd: max-cwnd 'lots' is not a number"),
    (("cc-profile", "add", "4", "--fi", "-1"), 2,
     "argument --fi: fi '-1' is not a number of at least 0"),
    (("ev-profile", "set", "7", "--events", "good,denied"), 2,
     "argument --events: 'good,denied' is not an event mask: good, assumed_bad, both "
     "comma-separated, or none"),
    (("ev-profile", "bind", "7", "2", "--template", "fcbb::"), 2,
     "argument --template: 'fcbb::' is not a template: BLOCK/BITS:USID,...@SPINE_INDEX"),
    (("ev-profile", "bind", "7", "2", "--template", "0xfcbbbb00/32:0x10@1"), 2,
     "spine_index 1 is outside the 1 uSIDs"),
    (("ev", "replace", "5", "0x5a5a0000", "0x5a5a0"), 2,
     "argument NEW_EV: '0x5a5a0' has an odd number of hex digits"),
    # out of range: of the syntax, then of what the NIC reports
    (("ev-fmt", "show", "0x10000000000000000"), 2,
     "argument ID: ID 0x10000000000000000 is not 0 .. 0xffffffffffffffff"),
    (("cc-profile", "add", "4", "--disable-qa", "256"), 2,
     "argument --disable-qa: disable-qa 256 is not 0 .. 255"),
    (("ev-profile", "bind", "7", "4", "--template", TEMPLATE), 2,
     "mrcnic ev-profile bind: QP 4 does not exist: this NIC has 4 QPs, 0 .. 3 (global.qps)"),
    (("ev-profile", "unbind", "9"), 2, "QP 9 does not exist: this NIC has 4 QPs"),
    (ADD_8[:-1] + ("18", *SRV6_FIELDS), 2,
     "mrcnic ev-profile add: --count 18: an EV profile of this NIC holds 2 .. 16 EVs, a "
     "multiple of 2"),
    (ADD_8[:-1] + ("3", *SRV6_FIELDS), 2, "--count 3: an EV profile of this NIC holds"),
    (("ev", "replace", "5", "unpopulated", "0x01", "--port", "3"), 2,
     "mrcnic ev replace: --port 3 does not exist: this NIC has ports 1 .. 2 (one a plane, "
     "global.planes)"),
    (("ev-fmt", "add", "9", "--mode", "udp", "--widths", "16"), 2,
     "mrcnic ev-fmt add: --mode udp: this NIC takes stev, srv6 (its ev_fmt_modes"),
    (("ev-profile", "show", "--qp", "1"), 2, "--qp chooses the table whose states --evs shows"),
    (("ev-profile", "show", "--evs"), 2, "--evs shows one profile's EVs: give its ID"),
    # a profile that breaks an OCP rule: the rule named, as ev expand names it
    (("ev-fmt", "add", "9", "--mode", "stev", "--widths", "16,20"), 2,
     "mrcnic ev-fmt add: the format fields add up to 36 bits, more than the 32 a STEV format "
     "carries (E2BIG, rule FMT_MODE: a format fits its mode"),
    (("ev-fmt", "add", "9", "--mode", "srv6", "--widths", "32,0"), 2,
     "(EINVAL, rule FMT_WIDTH: a format field is 1..255 bits wide)"),
    ((*ADD_8, "--field", "32:0xfcbbbb00:0:0:0", "--field", "16:0x10:0:8:0x1003"), 2,
     "mrcnic ev-profile add: field 1: max_val 0x8 does not fit the 3 bits mask 0x1003 sets "
     "(EINVAL, rule MAX_VAL: a field's max_val fits in as many bits as its mask sets)"),
    ((*ADD_8[:-1], "10", *SRV6_FIELDS), 2,
     "ev_count 10, but the fields make 8 EVs (EINVAL, rule EV_COUNT"),
    (("ev", "replace", "5", "unpopulated", "0x5a5a000001", "--port", "1"), 2,
     "has bits set after the 32 bits the profile's masks take (EINVAL, rule EV_UNUSED"),
    # what the profile's state does not allow
    (("ev-profile", "set", "7", "--count", "4"), 2,
     "mrcnic ev-profile set: EV profile 7 is ONLINE: ev_count cannot be changed there (EINVAL)"),
    (("ev-fmt", "del", "1"), 1,
     "mrcnic ev-fmt del: EV format profile 1 is used by ONLINE EV profile(s) 7 (EBUSY)"),
    (("cc-profile", "set", "3", "--apply"), 2,
     "mrcnic cc-profile set: CC profile 3 is OFFLINE: only an ONLINE profile is applied "
     "(EINVAL)"),
    (("ev-profile", "bind", "5", "1"), 2,
     "EV profile 5 is OFFLINE: only an ONLINE profile is loaded into a QP (EINVAL)"),
    (("ev-profile", "add", "7", "--fmt", "1", "--mode", "generated", "--count", "8",
      *SRV6_FIELDS), 2,
     "mrcnic ev-profile add: EV profile 7 exists (ONLINE): mrcnic ev-profile del removes it, "
     "ev-profile set changes it"),
    (("ev-profile", "add", "6", "--fmt", "2", "--mode", "explicit", "--count", "2",
      *STEV_FIELDS), 2, "an EXPLICIT profile is added --offline"),
    (("ev-profile", "add", "6", "--fmt", "9", "--mode", "generated", "--count", "2",
      *STEV_FIELDS), 2, "--fmt 9: EV format profile 9 is INIT; an ONLINE EV profile needs an "
                        "ONLINE format"),
    (("ev-profile", "del", "9"), 2,
     "mrcnic ev-profile del: EV profile 9 is INIT: there is none (mrcnic ev-profile add makes "
     "one)"),
    (("ev-profile", "set", "7"), 2, "nothing to set: give --state"),
    (("ev", "replace", "7", "0x00", "0x20", "--port", "1"), 2,
     "EV profile 7 is GENERATED: its EVs are its fields' values, only an EXPLICIT profile's "
     "are replaced (EINVAL)"),
    # what this NIC cannot do, or an EV the profile does not hold: exit status 1
    (("cc-profile", "set", "3", "--eta", "0.5"), 1,
     "mrcnic cc-profile set: CC profile 3: NSCC eta 0.5: the NIC adds nothing once an "
     "adjustment period (0) (EPERM)"),
    ((*ADD_8, *SRV6_FIELDS, "--min-active", "2"), 1,
     "ev_min_active 2: the NIC keeps only a QP's last GOOD EV from being marked ASSUMED_BAD "
     "(EPERM)"),
    (("ev-profile", "bind", "7", "2", "--template", TEMPLATE, "--mode", "plain"), 1,
     "EV profile 7 is SRV6: a QP in mode <SrMode.PLAIN: 0> sends no SRv6 header (EPERM)"),
    (("ev", "replace", "5", "0x77", "0x01"), 1,
     "mrcnic ev replace: EV profile 5 holds no EV 0x77 port 0 (ENOENT)"),
])
def test_a_refusal_is_one_line_and_writes_nothing(mrcnic, args, status, message):
    nic = configured(mrcnic)
    before = dict(nic.words)
    nic.writes.clear()
    got, out, err = mrcnic(nic, *args)
    assert (got, out) == (status, ""), err
    assert len(err.splitlines()) == 1 and message in err, err
    assert err.startswith(f"mrcnic {args[0]}")
    assert nic.writes == [] and nic.words == before


def test_an_add_the_nic_fails_half_way_says_where_it_left_the_profile(mrcnic):
    class Locking(FakeNic):
        """A NIC whose store takes one document, then refuses every write to it."""
        locked = False

        def write(self, offset, value):
            if self.locked and regmap.by_offset(offset).path == store.PATH:
                raise StatusError(Status.DENIED, "the block is locked")
            super().write(offset, value)
            # the header's last word, the CRC, is the last a document writes
            crc = regmap.by_name(store.PATH).offset + 4 * (store.HEADER_WORDS - 1)
            self.locked = self.locked or offset == crc

    nic = Locking()
    status, out, err = mrcnic(nic, "ev-fmt", "add", "1", "--mode", "srv6", "--widths", "32,16")
    assert (status, out, len(err.splitlines())) == (1, "", 1)
    assert err.startswith("mrcnic ev-fmt add: the NIC failed: ")
    assert err.endswith("(EIO); EV format profile 1 was left OFFLINE\n"), err
    assert json.loads(ok(mrcnic, nic, "-j", "ev-fmt", "show", "1"))["state"] == "OFFLINE"


def test_the_driver_doc_shows_what_these_verbs_print(mrcnic):
    doc = (Path(__file__).resolve().parent.parent / "docs" / "driver.md").read_text()
    section = doc.split("\n## Profiles from the command line")[1].split("\n## ")[0]
    runs = []                             # (command, the lines shown after it)
    for block in re.findall(r"```console\n(.*?)```", section, re.S):
        for line in block.rstrip("\n").split("\n"):
            if line.startswith("$ mrcnic "):
                runs.append((line, []))
            else:
                runs[-1][1].append(line)
    assert len(runs) > 20
    nic = FakeNic()                       # the doc's commands run one after another on one NIC
    for command, shown in runs:
        _, out, err = mrcnic(nic, *shlex.split(command)[2:])
        assert (out + err).splitlines() == shown, command


def test_a_refusal_is_one_line_when_run_as_a_program_too():
    # python -m mrcnic.cli runs cli as __main__, beside the mrcnic.cli these verbs import
    env = {k: v for k, v in os.environ.items() if k != "MRCNIC_TARGET"}
    for args, err in (
            (("ev-profile", "show", "--qp", "1"), "mrcnic ev-profile show: --qp chooses the "
                                                  "table whose states --evs shows: give --evs "
                                                  "too\n"),
            (("ev", "replace", "5", "unpopulated", "0x01"), "mrcnic ev replace: no target: ")):
        r = subprocess.run([sys.executable, "-m", "mrcnic.cli", *args], capture_output=True,
                           text=True, timeout=60, env=env)
        assert (r.returncode, r.stdout) == (2, "") and r.stderr.startswith(err), r.stderr
        assert len(r.stderr.splitlines()) == 1
