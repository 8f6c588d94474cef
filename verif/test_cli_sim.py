"""The OCP flows through the command line alone, each verb a program of its own, on the two
NICs of ``mrcnic sim serve``: the controller's (query, an EV format profile, a GENERATED EV
profile loaded into a QP, a CC profile) and the application's (QPs created and taken to RTS on
both NICs, one following the CC profile, a write with its completion, the peer's memory
checked through the simulated host), and what ``qp show`` and ``path show`` then report."""

from __future__ import annotations

import ipaddress
import json
import random

from mrcnic import store
from mrcnic.simctl import RECV_BASE, REGION, SEND_BASE, SimClient
from mrcnic.target import Device
from mrcnic.verif.cli_helpers import mrcnic
from mrcnic.verif.fabric import nic_ip

QP = 1            # set up by the system testbench, taken over here
IDLE_QP = 2       # carries no traffic (its number is the probes' DQP): the profile goes there
#: a route of one uSID, the spine's, in the sim's carrier format (F3216, block fcbb:bb00)
TEMPLATE = "0xfcbbbb00/32:0x10@0"


def run(url, *args) -> dict | list:
    """``mrcnic -j --target URL ARGS``, which must succeed: what it printed."""
    r = mrcnic("-j", "--target", url, *args)
    assert r.returncode == 0 and r.stderr == "", (args, r.stderr)
    return json.loads(r.stdout) if r.stdout.strip() else {}


def test_the_controller_and_application_flows_through_the_cli(served):
    url0, url1 = served.urls
    for url in served.urls:
        with Device(url) as dev:
            dev.regs.run(store.clear())
    # the controller's flow on NIC 0
    dev = run(url0, "dev", "show")
    assert dev["cc_profiles"] > 1
    run(url0, "ev-fmt", "add", "1", "--mode", "srv6", "--widths", "32,16")
    run(url0, "ev-profile", "add", "7", "--fmt", "1", "--mode", "generated", "--count", "8",
        "--field", "32:0xfcbbbb00:0:0:0", "--field", "16:0x10:0:7:0x1003")
    run(url0, "cc-profile", "add", "3", "--max-cwnd", "16384")
    shown = run(url0, "ev-profile", "show", "7")
    assert json.dumps(shown).count("ONLINE") >= 1
    bound = run(url0, "ev-profile", "bind", "7", str(IDLE_QP), "--template", TEMPLATE)
    assert bound
    paths = run(url0, "path", "show", str(IDLE_QP))
    assert len(paths) == 8 and all(p["route"].startswith("fcbb:bb00:") for p in paths)
    # the EVs path show reads back from the NIC's table are those the controller loaded
    loaded = dict(zip(bound["entries"], bound["nic_evs"], strict=True))
    assert {p["entry"]: p["ev"] for p in paths} == loaded
    assert {p["port"] for p in paths} == {1, 2}
    assert {p["state"] for p in paths} == {"GOOD"}
    # the application's flow: QP 1 of each NIC to RTS, NIC 0's on CC profile 3
    rng = random.Random(11)
    psn = [rng.getrandbits(24), rng.getrandbits(24)]
    for me, url in enumerate(served.urls):
        peer = 1 - me
        run(url, "qp", "add", str(QP))
        run(url, "qp", "set", str(QP), "init", *(("cc-profile", "3") if me == 0 else ()))
        peer_ip = str(ipaddress.IPv6Address(nic_ip(peer)))
        run(url, "qp", "set", str(QP), "rtr", "dqp", str(QP), "dst-ip", peer_ip,
            "rq-psn", str(psn[peer]), "mode", "usid", "template", str(peer), "mtu", "1024",
            "rkey", hex(0x300 + QP), "mr-va", hex(RECV_BASE + QP * REGION),
            "mr-length", str(REGION))
    for me, url in enumerate(served.urls):
        run(url, "qp", "set", str(QP), "rts", "sq-psn", str(psn[me]))
    qps = run(url0, "qp", "show", str(QP))
    (row,) = qps["qps"]
    assert row["state"] == "RTS" and row["cc_profile_id"] == 3 and row["cc_profile"] >= 1
    # a write through the CLI, its completion, and the bytes in the peer's memory
    data = rng.randbytes(20000)
    with Device(url0) as d0, Device(url1) as d1:
        SimClient(d0.client).host_write(SEND_BASE, data)
        done = run(url0, "write", str(QP), "--laddr", hex(SEND_BASE),
                   "--va", hex(RECV_BASE + QP * REGION), "--rkey", hex(0x300 + QP),
                   "--length", str(len(data)))
        assert done["status"] == "OK"
        assert SimClient(d1.client).host_read(RECV_BASE + QP * REGION, len(data)) == data
    # every packet of it arrived on some entry of QP 1's profile, as path show counts them
    acked = sum(p["acked"] for p in run(url0, "path", "show", str(QP)))
    assert acked >= -(-len(data) // 1024)
    # and the profile may not go while QP 1's window follows it
    r = mrcnic("--target", url0, "cc-profile", "del", "3")
    assert r.returncode == 1 and "EBUSY" in r.stderr and len(r.stderr.splitlines()) == 1
