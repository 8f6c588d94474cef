"""``mrcnic qp add|set|del``, ``mrcnic mr add|show`` and what ``qp show`` adds from the NIC's
store: each command a separate run of the CLI, as a user runs them one after another, on a
register store that keeps store.data and takes the EV commands as the NIC does
(verif/test_ctl.py's FakeNic); and every refusal one line, with its exit status and nothing
written."""

import json

import pytest

from mrcnic import regmap, store
from mrcnic.app import Context
from mrcnic.ctl import Controller
from mrcnic.enums import MTU_CODES, QpState, SrMode
from mrcnic.regclient import RegisterClient
from mrcnic.verif.test_cli import run_cli
from mrcnic.verif.test_ctl import FakeNic, generated, nscc, srv6_format

RTR = ("dqp", "9", "dst-ip", "fd00::2", "dst-mac", "02:00:00:00:00:02", "rq-psn", "0x100")


def cli_nic() -> FakeNic:
    nic = FakeNic()
    nic.words[regmap.by_name("cq.depth").offset] = 8
    return nic


def context(nic) -> Context:
    """The QPs as another program finds them."""
    return Context(RegisterClient(nic))


def table(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines()]


@pytest.fixture
def cli(monkeypatch, capsys):
    """A NIC, and ``mrcnic ARGS`` run on it: (exit status, stdout, stderr)."""
    nic = cli_nic()

    def run(*args):
        try:
            return run_cli(monkeypatch, capsys, nic, *args)
        except SystemExit as e:          # argparse's refusal exits from within main
            out, err = capsys.readouterr()
            return e.code, out, err
    return nic, run


def test_a_qp_goes_add_init_rtr_rts_del_one_command_at_a_time(cli):
    nic, run = cli
    status, out, err = run("qp", "add", "1")
    assert (status, err) == (0, "")
    assert table(out) == [["qp", "state", "ev_profile_id", "cc_profile_id"],
                          ["1", "RESET", "-", "-"]]
    # the CQ was made first: every QP's completions go to cq.*
    assert nic.word("cq.route") == regmap.CQ_ROUTE_SEND | regmap.CQ_ROUTE_RECV
    status, out, _ = run("-j", "qp", "add")
    assert status == 0 and json.loads(out) == {"qp": 0, "state": "RESET", "ev_profile_id": None,
                                                "cc_profile_id": None}
    assert run("qp", "set", "1", "init") == (0, "", "")
    assert run("qp", "set", "1", "rtr", *RTR, "mtu", "1024", "mode", "plain", "template",
               "1", "rq-msn", "7") == (0, "", "")
    # the QP's whole context was written: its fields, staged, then qp.write
    staged = {name: nic.word(f"qp.{name}") for name in
              ("state", "dqp", "mtu", "mode", "template", "rx_psn", "rx_msn")}
    assert staged == {"state": QpState.RTR.value, "dqp": 9, "mtu": 2, "mode": SrMode.PLAIN.value,
                      "template": 1, "rx_psn": 0x100, "rx_msn": 7}
    assert MTU_CODES[staged["mtu"]] == 1024
    status, out, _ = run("-j", "qp", "set", "1", "rts", "sq-psn", "5")
    assert status == 0 and json.loads(out) == {"qp": 1, "state": "RTS", "ev_profile_id": None,
                                                "cc_profile_id": None}
    assert nic.word("qp.next_psn") == 5
    assert [(q.qp_num, q.state) for q in context(nic).qps()] == [(0, QpState.RESET),
                                                                 (1, QpState.RTS)]
    # qp show adds what the store holds of the created QPs, and only theirs
    status, out, err = run("qp", "show")
    assert (status, err) == (0, "")
    header, *rows = table(out)[:5]
    assert header[-3:] == ["state", "ev_profile_id", "cc_profile_id"]
    assert [r[0] for r in rows] == ["0", "1", "2", "3"]
    assert [r[-3:] for r in rows] == [["RESET", "-", "-"], ["RTS", "-", "-"], ["-", "-", "-"],
                                      ["-", "-", "-"]]
    status, out, _ = run("-j", "qp", "show")
    views = json.loads(out)["qps"]
    assert views[1]["state"] == "RTS" and views[1]["ev_profile_id"] is None
    assert "state" not in views[2]
    assert run("qp", "del", "1") == (0, "", "")
    assert nic.word("qp.state") == QpState.RESET.value
    assert run("qp", "del", "0") == (0, "", "")
    assert context(nic).qps() == []
    # none created: qp show is what the registers say, as before
    status, out, _ = run("qp", "show")
    assert status == 0 and not {"state", "ev_profile_id", "cc_profile_id"} & set(table(out)[0])


def test_qp_set_gives_a_qp_its_ev_and_cc_profiles(cli):
    nic, run = cli
    ctl = Controller(RegisterClient(nic))
    srv6_format(ctl)
    generated(ctl)                                   # EV profile 7, SRv6, for ONE_USID routes
    nscc(ctl, 3, target_delay=5000)
    assert run("qp", "add", "2")[0] == 0
    assert run("qp", "set", "2", "init", "ev-profile", "7", "cc-profile", "3") == (0, "", "")
    assert nic.word("rel.target_rtt") == 1250        # 5000 ns at 250 MHz: applied
    assert run("qp", "set", "2", "rtr", *RTR, "mode", "usid", "template", "2",
               "route", "0xfcbbbb00/32:0x10@0") == (0, "", "")
    b = ctl.binding(2)
    assert b.profile_id == 7 and [nic.tables[2][e][0] for e in b.entries] == list(b.nic_evs)
    status, out, _ = run("-j", "qp", "show", "2")
    (view,) = json.loads(out)["qps"]
    assert (view["state"], view["ev_profile_id"], view["cc_profile_id"]) == ("RTR", 7, 3)
    status, out, _ = run("qp", "show", "2")
    assert table(out)[1][-3:] == ["RTR", "7", "3"]
    assert run("qp", "del", "2") == (0, "", "")
    assert nic.tables[2] == [] and ctl.binding(2) is None


def test_mr_add_gives_a_qp_its_region_which_rtr_keeps(cli):
    nic, run = cli
    run("qp", "add", "1")
    run("qp", "add", "2")
    assert run("mr", "add", "1", "--va", "0x43000000", "--length", "0x100000",
               "--rkey", "0x103") == (0, "", "")
    status, out, err = run("mr", "show")
    assert (status, err) == (0, "")
    assert table(out) == [["qp", "state", "rkey", "va", "length"],
                          ["1", "RESET", "0x103", "0x43000000", "1048576"]]
    assert run("mr", "show", "2") == (0, "", "")                # no region: no row
    assert json.loads(run("-j", "mr", "show", "2")[1]) == []
    run("qp", "set", "1", "init")
    run("qp", "set", "1", "rtr", *RTR)
    assert (nic.word("qp.rkey"), nic.word("qp.mr_va"), nic.word("qp.mr_length")) == (
        0x103, 0x4300_0000, 0x10_0000)
    status, out, _ = run("-j", "mr", "show", "1")
    assert json.loads(out) == [{"qp": 1, "state": "RTR", "rkey": 0x103, "va": 0x4300_0000,
                                "length": 0x10_0000}]
    status, out, _ = run("-j", "mr", "add", "2", "--va", "0", "--length", "64", "--rkey", "7")
    assert json.loads(out) == {"qp": 2, "state": "RESET", "rkey": 7, "va": 0, "length": 64}


def test_qp_add_of_a_qp_the_nic_lacks_makes_no_cq(cli):
    nic, run = cli
    status, out, err = run("qp", "add", "4")
    assert (status, out) == (2, "")
    assert err == "mrcnic qp add: QP 4 does not exist: this NIC has 4 QPs, 0 .. 3 (global.qps)\n"
    assert nic.writes == []


@pytest.fixture
def set_up(cli):
    """QP 1 in RESET with a region; QP 3 in INIT with EV profile 7 and CC profile 3, applied."""
    nic, run = cli
    ctl = Controller(RegisterClient(nic))
    srv6_format(ctl)
    generated(ctl)
    nscc(ctl, 3, target_delay=5000)
    for args in (("qp", "add", "1"), ("qp", "add", "3"),
                 ("mr", "add", "1", "--va", "0x1000", "--length", "64", "--rkey", "1"),
                 ("qp", "set", "3", "init", "ev-profile", "7", "cc-profile", "3")):
        assert run(*args)[0] == 0, args
    return nic, run


@pytest.mark.parametrize("args,status,fragment", [
    # what argparse refuses
    (("qp", "set", "1", "bogus"), 2, "argument STATE: invalid choice: 'bogus' (choose from"),
    (("qp", "add", "x"), 2, "argument QP: QP 'x' is not a number"),
    (("qp", "set", "1"), 2, "the following arguments are required: STATE"),
    (("mr", "add", "1", "--va", "0", "--length", "0", "--rkey", "1"), 2,
     "argument --length: length 0 is not 1 .. 0xffffffffffffffff"),
    (("mr", "add", "1", "--va", "0", "--length", "1"), 2,
     "the following arguments are required: --rkey"),
    # qp set's names and values
    (("qp", "set", "1", "init", "cc-profile"), 2, "cc-profile needs its value: cc-profile ID"),
    (("qp", "set", "1", "init", "dqp", "3"), 2, "init takes ev-profile, cc-profile, not 'dqp'"),
    (("qp", "set", "1", "reset", "dqp", "3"), 2, "reset takes no attribute, not 'dqp'"),
    (("qp", "set", "1", "init", "ev-profile", "-1"), 2,
     "ev-profile '-1' is not a number 0 .. 0xffffffffffffffff"),
    (("qp", "set", "1", "rtr", "dqp", "3", "dst-ip", "fd00::2"), 2,
     "rtr needs rq-psn: rtr dqp N dst-ip ADDR rq-psn N [dst-mac MAC]"),
    (("qp", "set", "1", "rtr", *RTR, "mtu", "1500"), 2,
     "mtu '1500' is not one of 256, 512, 1024, 2048, 4096 (bytes)"),
    (("qp", "set", "1", "rtr", *RTR[:2], "dst-ip", "nope", *RTR[4:]), 2,
     "dst-ip 'nope' is not an IPv6 address"),
    (("qp", "set", "1", "rtr", *RTR[:4], "dst-mac", "02:00", *RTR[6:]), 2,
     "dst-mac '02:00' is not a MAC address (aa:bb:cc:dd:ee:ff)"),
    (("qp", "set", "1", "rtr", *RTR, "mode", "srv6"), 2,
     "mode 'srv6' is not one of plain, usid, usid_srh"),
    (("qp", "set", "1", "rtr", "dqp", "0x1000000", *RTR[2:]), 2,
     "dqp '0x1000000' is not a number 0 .. 0xffffff"),
    (("qp", "set", "1", "rtr", *RTR, "route", "fcbb"), 2,
     "route 'fcbb' is not a template: BLOCK/BITS:USID,...@SPINE_INDEX"),
    (("qp", "set", "1", "rtr", *RTR, "dqp", "4"), 2, "dqp is given twice"),
    (("mr", "add", "1", "--va", "0xffffffffffffffff", "--length", "2", "--rkey", "1"), 2,
     "run past the end of the 64-bit address space"),
    # QPs the NIC lacks, or that are not created
    (("qp", "set", "4", "init"), 2, "QP 4 does not exist: this NIC has 4 QPs"),
    (("qp", "set", "2", "init"), 2, "QP 2 is not created: mrcnic qp add 2 creates it"),
    (("qp", "del", "2"), 2, "QP 2 is not created"),
    (("mr", "show", "2"), 2, "QP 2 is not created"),
    (("mr", "add", "0", "--va", "0", "--length", "1", "--rkey", "1"), 2, "QP 0 is not created"),
    # the API's refusals, with their errno
    (("qp", "set", "1", "rts", "sq-psn", "0"), 2,
     "QP 1 is RESET: QPs go RESET -> INIT -> RTR -> RTS, and to RESET or ERROR from any state; "
     "not to RTS (EINVAL)"),
    (("qp", "set", "1", "init", "ev-profile", "9"), 2,
     "EV profile 9 is INIT; a QP takes an ONLINE one, which is loaded into its EV table at RTR "
     "(EINVAL)"),
    (("mr", "add", "1", "--va", "0", "--length", "1", "--rkey", "1"), 2,
     "has its region already (rkey 0x1, 64 bytes at 0x1000): the NIC holds one a QP (qp.rkey, "
     "qp.mr_va, qp.mr_length); a move to RESET clears it (E2BIG)"),
    (("qp", "add", "1"), 1, "QP 1 is created already (EBUSY)"),
    (("qp", "set", "1", "init", "cc-profile", "4"), 1,
     "QP 3 of this context follows CC profile 3 there: busy, not beyond the NIC; another "
     "profile can take them once QP 3 is moved to RESET (EBUSY)"),
    (("qp", "set", "3", "rtr", *RTR, "mode", "plain"), 1, "sends no SRv6 header (EPERM)"),
])
def test_a_refusal_is_one_line_its_exit_status_and_nothing_written(set_up, args, status,
                                                                   fragment):
    nic, run = set_up
    writes = list(nic.writes)
    got, out, err = run(*args)
    assert (got, out) == (status, ""), (got, out, err)
    assert len(err.splitlines()) == 1 and fragment in err, err
    assert err.startswith(f"mrcnic {args[0]} {args[1]}: "), err
    assert nic.writes == writes


def test_a_store_this_software_cannot_read_is_eio_and_exit_1(cli):
    nic, run = cli
    regs = RegisterClient(nic)
    regs.run(store.save({"app": {"qps": 1}}, 1))          # not what a context writes
    writes = list(nic.writes)
    status, out, err = run("qp", "add")
    assert (status, out) == (1, "")
    assert err == ("mrcnic qp add: the NIC's store: the store holds an object this software does "
                   "not know: {'qps': 1} (EIO)\n")
    assert nic.writes == writes
