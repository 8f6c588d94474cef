"""``mrcnic qp show``, ``ev show|deny|allow``, ``port show|set`` and ``stats``, run as a user
runs them against a NIC of ``mrcnic sim serve``: what they print is what the NIC's registers
say, a look leaves every register as it was, a change is read back, ``stats -w`` reports what
moves until Ctrl-C, and every bad argument or unreachable target is one line and exit status 2
with nothing written."""

import ipaddress
import json
import queue
import re
import signal
import subprocess
import sys
import threading
import time

from mrcnic import driver, regmap
from mrcnic.enums import MTU_CODES, EvState, QpState, SrMode
from mrcnic.evmap import EvLayout
from mrcnic.target import Device
from mrcnic.verif.cli_helpers import mrcnic, sigint_default

#: RO registers that are not counts (what each is: driver.COUNTERS)
NOT_COUNTERS = {"parser.last_error", "ev.state", "ev.entry", "ev.size", "net.port_up",
                "rel.cwnd", "rel.inflight", "rel.rtt", "rel.srtt", "cq.count", "cq.entry",
                "mem.error", "mem.rdata",
                "evq.count", "evq.entry", "ep.rtt", "cc.view",
                # one profile entry's, through path.qp and path.entry (mrcnic path show)
                "path.rtt", "path.timed", "path.ecn", "path.acked", "path.lost",
                # a board's last pattern run's outcome
                "gen.error", "chk.error", "chk.bad"}


def test_every_ro_register_is_a_counter_or_named_as_not_one():
    """A new RO register must be sorted into stats or out of it, not fall in by default."""
    ro = [r.path for r in regmap.REGISTERS if r.access is regmap.Access.RO]
    assert [p for p in ro if p not in NOT_COUNTERS] == list(driver.COUNTERS
                                                            + driver.BOARD_COUNTERS)


def test_qp_show_is_what_the_registers_say(served):
    url = served.urls[0]
    staged = {"qp.state": QpState.RTR.value, "qp.mode": SrMode.USID_SRH.value, "qp.mtu": 0,
              "qp.dqp": 0x1234, "qp.dst_mac": 0x02_0000_ABCD_EF, "qp.dst_ip": 0xFD00 << 112 | 7}
    with Device(url) as dev:
        saved = {p: dev.read(p) for p in [*staged, "rel.view_qp"]}
        for p, v in staged.items():          # staged only: no qp.write, no QP changes
            dev.write(p, v)
        dev.write("rel.view_qp", 2)
        try:
            r = mrcnic("--target", url, "qp", "show")
            j = json.loads(mrcnic("-j", "--target", url, "qp", "show").stdout)
            views = [dev.regs.run(driver.congestion(q)) for q in range(dev.info["qps"])]
            raw = {f"qp.{name}": dev.read(f"qp.{name}")
                   for name in (r_.name for r_ in regmap.REGISTERS
                                if r_.block == "qp" and r_.access is regmap.Access.RW)}
            dev.write("rel.view_qp", 2)
            one = mrcnic("-p", "qp", "show", "3", "--target", url)
            assert dev.read("rel.view_qp") == 2               # the look left it as it was
        finally:
            for p, v in saved.items():
                dev.write(p, v)
    assert r.returncode == 0 and r.stderr == "", r
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["qp", "cwnd", "inflight", "rtt", "srtt", "cc_profile"]
    rows = [[int(x) for x in line.split()] for line in lines[1:1 + len(views)]]
    assert rows == [[q, v["cwnd"], v["inflight"], v["rtt"], v["srtt"], v["cc_profile"]]
                    for q, v in enumerate(views)]
    assert views[0]["srtt"] > 0      # NIC 0's start-up write measured an RTT on QP 0
    assert lines[1 + len(views)].startswith("staged (qp.*)")
    table = dict(line.split() for line in lines[2 + len(views):])
    # decoded with the field enums, each as the register holds it
    assert (table["state"], table["mode"], table["mtu"]) == ("RTR", "USID_SRH", "256")
    expected = {"state": QpState(raw["qp.state"]).name, "mode": SrMode(raw["qp.mode"]).name,
                "mtu": MTU_CODES[raw["qp.mtu"]], "dst_mac": "02:00:00:ab:cd:ef",
                "dst_ip": str(ipaddress.IPv6Address(raw["qp.dst_ip"]))}
    expected |= {k.removeprefix("qp."): v for k, v in raw.items()
                 if k.removeprefix("qp.") not in expected}
    assert j == {"qps": [{"qp": q, **v} for q, v in enumerate(views)], "staged": expected}
    assert table == {k: (f"{v:#x}" if k in ("rkey", "mr_va") else str(v))
                     for k, v in expected.items()}
    assert one.returncode == 0 and len(one.stdout.splitlines()) > 10
    assert json.loads(one.stdout) == {"qps": [{"qp": 3, **views[3]}], "staged": expected}


def test_ev_show_lists_each_entry_with_its_state(served):
    url = served.urls[0]
    with Device(url) as dev:
        dev.regs.run(driver.set_ev_state(0, 5, EvState.DENIED))    # only management sets it
        dev.write("ev.qp", 1)
        dev.write("ev.index", 7)
        try:
            r = mrcnic("--target", url, "ev", "show", "0")
            every = json.loads(mrcnic("-j", "ev", "show", "--target", url).stdout)
            states = {q: dev.regs.run(driver.ev_states(q)) for q in range(dev.info["qps"])}
            tables = {q: dev.regs.run(driver.ev_table(q)) for q in range(dev.info["qps"])}
            dev.write("ev.qp", 1)
            dev.write("ev.index", 7)
            mrcnic("--target", url, "ev", "show", "2")
            assert (dev.read("ev.qp"), dev.read("ev.index")) == (1, 7)   # left as they were
        finally:
            dev.regs.run(driver.set_ev_state(0, 5, EvState.GOOD))
        planes, evs = dev.info["planes"], dev.info["evs"]
    assert r.returncode == 0 and r.stderr == "", r
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["qp", "index", "plane", "state", "ev"]

    def ev(q, i):
        return f"{tables[q][i]:#010x}" if i < len(tables[q]) else None
    rows = [line.split() for line in lines[1:]]
    assert rows == [["0", str(i), str(i % planes), states[0][i].name, ev(0, i) or "-"]
                    for i in range(evs)]
    assert states[0][5] is EvState.DENIED and states[0][4] is EvState.GOOD
    assert every == [{"qp": q, "index": i, "plane": i % planes, "state": s.name, "ev": ev(q, i)}
                     for q in states for i, s in enumerate(states[q])]
    # the simulation loaded QPs 0 and 1, each entry's EV on the entry's plane; QP 2 was never
    # given a profile: every entry lies past its end
    assert tables[0] and tables[1] and tables[2] == []
    assert all(EvLayout(planes, dev.info["spines"]).plane(v) == i % planes
               for i, v in enumerate(tables[0]))
    assert set(states[2]) == {EvState.ASSUMED_BAD}


def test_port_show_and_set_admin(served):
    url = served.urls[1]
    r = mrcnic("--target", url, "port", "show")
    assert r.returncode == 0 and r.stderr == "", r
    lines = [line.split() for line in r.stdout.splitlines()]
    assert lines[0] == ["port", "plane", "admin", "state", "frames", "bytes"]
    assert [row[:4] for row in lines[1:]] == [["1", "0", "up", "up"], ["2", "1", "up", "up"]]
    try:
        r = mrcnic("--target", url, "port", "set", "2", "admin", "down")
        assert r.returncode == 0 and r.stdout == r.stderr == "", r
        with Device(url) as dev:
            assert dev.read("net.port_admin") & 0b11 == 0b01
            assert dev.read("net.port_up") & 0b11 == 0b01
        shown = json.loads(mrcnic("-j", "port", "show", "2", "--target", url).stdout)
        assert [{k: v for k, v in row.items() if k not in ("frames", "bytes")}
                for row in shown] == [{"port": 2, "plane": 1, "admin": "down", "state": "down"}]
    finally:
        r = mrcnic("--target", url, "-j", "port", "set", "2", "admin", "up")
    assert json.loads(r.stdout) == {"port": 2, "admin": "up", "state": "up"}


def test_ev_deny_and_allow_one_entry(served):
    url = served.urls[0]
    with Device(url) as dev:
        dev.write("ev.qp", 3)
        dev.write("ev.index", 9)
        r = mrcnic("--target", url, "ev", "deny", "0", "5")
        assert r.returncode == 0 and r.stdout == r.stderr == "", r
        assert dev.regs.run(driver.ev_states(0))[5] is EvState.DENIED
        dev.write("ev.qp", 3)
        dev.write("ev.index", 9)
        r = mrcnic("--target", url, "-j", "ev", "allow", "0", "5")
        assert json.loads(r.stdout) == {"qp": 0, "index": 5, "state": "GOOD"}
        assert (dev.read("ev.qp"), dev.read("ev.index")) == (3, 9)      # left as they were
        assert dev.regs.run(driver.ev_states(0))[5] is EvState.GOOD
        # QP 2 has no profile: the NIC refuses the change, and says so
        refused = dev.read("tx.ev_refused")
        r = mrcnic("--target", url, "ev", "deny", "2", "0")
        assert r.returncode == 1 and "QP 2 entry 0 is ASSUMED_BAD, not DENIED" in r.stderr, r
        assert dev.read("tx.ev_refused") == refused + 1


def test_stats_lists_every_counter(served):
    url = served.urls[1]
    r = mrcnic("--target", url, "stats")
    j = mrcnic("--target", url, "stats", "-j")
    with Device(url) as dev:
        counters = dev.regs.run(driver.counters())
        planes = dev.info["planes"]
    assert r.returncode == 0 and r.stderr == "", r
    # one line each, block.name value, the NIC's planes only (and the NIC is idle: no change)
    assert [line.split() for line in r.stdout.splitlines()] == [[k, str(v)]
                                                                for k, v in counters.items()]
    assert json.loads(j.stdout) == counters
    assert f"tx.frames_p{planes - 1}" in counters and f"tx.frames_p{planes}" not in counters
    assert counters["rx.outcome_placed"] == 1 and counters["rx.completions"] == 1


def _watch(url: str, *options: str) -> tuple[list[str], str, int, int]:
    """``mrcnic stats -w 0.5`` for about 2 s, a write the NIC refuses (which it counts in
    global.bus_errors) in the middle, then SIGINT: (stdout lines, stderr, exit status,
    global.bus_errors after)."""
    proc = subprocess.Popen([sys.executable, "-m", "mrcnic.cli", "--target", url, *options,
                             "stats", "-w", "0.5"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=sigint_default)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout], daemon=True).start()
    out: list[str] = []

    def wait_for(pattern: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not any(re.search(pattern, x) for x in out):
            out.append(lines.get(timeout=max(0.0, deadline - time.monotonic())).rstrip("\n"))

    try:
        start = time.monotonic()
        wait_for(r'^after |"interval": 0\.')                     # a first interval
        refused = mrcnic("--target", url, "regs", "set", "qp.write", "0x3f")
        assert refused.returncode == 1, refused
        # the interval that counted it (not the first lines, which hold every counter)
        wait_for(r'^global\.bus_errors +\d+ +\S+/s$|"counters": \{"global\.bus_errors": \d+\}')
        time.sleep(max(0.0, 2.0 - (time.monotonic() - start)))
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    while not lines.empty():
        out.append(lines.get().rstrip("\n"))
    out += rest.splitlines()
    with Device(url) as dev:
        errors = dev.read(regmap.BUS_ERRORS)
    return out, err, proc.returncode, errors


def test_stats_watch_shows_what_moves_until_ctrl_c(served):
    url = served.urls[0]
    with Device(url) as dev:
        names = list(dev.regs.run(driver.counters()))
    out, err, code, errors = _watch(url)
    assert code == 0 and err == "", (code, err)
    heads = [i for i, line in enumerate(out) if line.startswith("after ")]
    # every counter, then the intervals
    assert heads and [line.split()[0] for line in out[:heads[0]]] == names
    assert all(re.fullmatch(r"after \d+\.\d\d s \(\+\d+\.\d\d s\): (nothing|\d+) moved", out[i])
               for i in heads)
    moved = [out[i].split() for i in range(heads[0], len(out)) if i not in heads]
    assert [m[:2] for m in moved if m[0] == regmap.BUS_ERRORS] == [[regmap.BUS_ERRORS, str(errors)]]
    assert all(re.fullmatch(r"\d+\.\d/s", m[2]) and float(m[2][:-2]) > 0 for m in moved)

    out, err, code, errors = _watch(url, "-j")
    assert code == 0 and err == "", (code, err)
    objs = [json.loads(line) for line in out]
    assert objs[0]["interval"] is None and list(objs[0]["counters"]) == names
    assert len(objs) >= 2 and all(0.4 < o["interval"] < 5 for o in objs[1:])
    assert [o["counters"] for o in objs[1:] if o["counters"]] == [{regmap.BUS_ERRORS: errors}]
    assert objs[0]["rates"] == {} and all(set(o["rates"]) == set(o["counters"]) for o in objs[1:])


def test_bad_arguments_are_one_line_and_write_nothing(served):
    url = served.urls[0]
    cases = [
        (["qp", "show", "4"], "QP 4 does not exist: this NIC has 4 QPs, 0 .. 3"),
        (["ev", "show", "0x10"], "QP 16 does not exist: this NIC has 4 QPs, 0 .. 3"),
        (["-j", "ev", "show", "4"], "QP 4 does not exist"),
        (["qp", "show", "x"], "argument QP: QP 'x' is not a number"),
        (["ev", "show", "-1"], "argument QP: QP '-1' is not a number"),
        (["qp", "show", "0", "1"], "unrecognized arguments: 1"),
        (["stats", "-w", "0"], "argument -w/--watch: '0' is not a number of seconds above 0"),
        (["stats", "-w", "x"], "argument -w/--watch: 'x' is not a number of seconds above 0"),
        (["stats", "-w", "-2"], "argument -w/--watch: '-2' is not"),
        (["stats", "-w", "inf"], "argument -w/--watch: 'inf' is not"),
        (["stats", "-w"], "argument -w/--watch: expected one argument"),
        (["port", "show", "3"], "port 3 does not exist: this NIC has ports 1 .. 2"),
        (["ev", "deny", "4", "0"], "QP 4 does not exist: this NIC has 4 QPs"),
        (["ev", "allow", "0", "16"], "entry 16 does not exist: a profile of this NIC has "
                                     "entries 0 .. 15"),
        (["ev", "deny", "0"], "the following arguments are required: INDEX"),
        (["ev", "allow", "x", "1"], "argument QP: QP 'x' is not a number"),
        (["port", "set", "3", "admin", "down"], "port 3 does not exist"),
        (["port", "set", "0", "admin", "down"], "ports are numbered from 1"),
        (["port", "set", "1", "admin", "sideways"], "invalid choice: 'sideways'"),
        (["port", "set", "1", "speed", "up"], "invalid choice: 'speed'"),
    ]
    with Device(url) as dev:
        before = dev.regs.dump()
    for args, fragment in cases:
        r = mrcnic("--target", url, *args)
        assert r.returncode == 2 and r.stdout == "", (args, r)
        assert len(r.stderr.splitlines()) == 1 and fragment in r.stderr, (args, r.stderr)
    with Device(url) as dev:
        assert dev.regs.dump() == before


def test_an_unreachable_target_is_one_line_within_three_seconds():
    for verb in (["qp", "show"], ["ev", "show", "0"], ["stats", "-w", "0.5"]):
        # what the interpreter takes to start and import the verbs' modules, which a busy
        # machine (two cores, simulations running) stretches: not the target's wait
        start = time.monotonic()
        subprocess.run([sys.executable, "-c", "import mrcnic.cli, mrcnic.driver, mrcnic.target"],
                       check=True, timeout=30)
        startup = time.monotonic() - start
        start = time.monotonic()
        r = mrcnic("--target", "udp://127.0.0.1:9", *verb, timeout=30)
        took = time.monotonic() - start - startup
        assert r.returncode == 2 and r.stdout == "" and len(r.stderr.splitlines()) == 1, r
        assert "target udp://127.0.0.1:9 unreachable: no reply from 127.0.0.1:9" in r.stderr
        waited = float(re.search(r"after 8 attempts in ([0-9.]+) s", r.stderr).group(1))
        assert 1.9 <= waited <= 2.5 and took < 3, (verb, waited, took, startup)
