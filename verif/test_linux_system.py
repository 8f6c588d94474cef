"""Two whole NICs (gateware under Verilator) write to each other across a real Linux SRv6
fabric: every leaf and spine a Linux router in a namespace of its own (verif/linux_fabric.py),
forwarding the NICs' packets with the kernel's seg6local End next-csid (uN). A write lands
byte-exact (verif/tb_system.py checks every byte and completion); mid-transfer a spine link
goes down (``ip link set ... down``) and the NICs move off it (the entries on it that lost two
packets are ASSUMED_BAD before it returns); it comes back and the probes bring every EV back
to GOOD. Both route formats: F3216 and F1616. Needs root: without it (or without the kernel's
SRv6) the test is skipped and says why."""

import json

import pytest

from mrcnic.verif import builds, harness
from mrcnic.verif.fabric import FORMATS, nic_mac
from mrcnic.verif.scenarios import KIB

#: a short transfer: writes up to 256 KiB, so the dead link carries enough to be seen
SIZES = [1, 4096, 64 * KIB, 256 * KIB]


@pytest.fixture(scope="module")
def linux():
    """The fabric module, or a skip that says why it cannot run here."""
    from mrcnic.verif import linux_fabric
    why = linux_fabric.unsupported()
    if why:
        pytest.skip(f"no Linux SRv6 fabric here: {why}")
    return linux_fabric


def run_across_linux(linux, fmt, seed, out, sizes=SIZES, pcap_dir=None):
    """The link-down scenario on two NICs (2 planes x 4 spines) across a Linux fabric in
    format ``fmt``; the run's results."""
    from mrcnic.verif.linux_net import spec
    block, bits = FORMATS[fmt]
    macs = {(h, p): nic_mac(h) for h in range(2) for p in range(2)}
    b = builds.nic_system(64, 2)
    with linux.LinuxFabric(planes=2, spines=4, hosts=2, block=block, block_bits=bits,
                           nic_macs=macs, pcap_dir=pcap_dir) as fab:
        # (the simulation opens the NICs' TAPs itself)
        harness.run(b, "mrcnic.verif.tb_system", builds.system_params(
            64, "linkdown", seed, {"sizes": sizes}, out=str(out), pcaps=False,
            linux=spec(fab), format=fmt), run_dir=out / "sim")
    return json.loads((out / "results.json").read_text())


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_a_transfer_crosses_linux_and_rides_out_a_dead_spine_link(fmt, linux, tmp_path,
                                                                   seed_for):
    r = run_across_linux(linux, fmt, seed_for(18), tmp_path)
    # (tb_system checked every byte, every completion, and the dead path's entries)
    assert r["dead_entries_checked"] >= 1, "the transfer never reached the dead link"
    assert r["network"]["delivered"] > 0
    down = r["ev_states"]["link down"]
    assert any(s == "ASSUMED_BAD" for entries in down.values() for _, _, s in entries)
    end = r["ev_states"]["end"]
    assert not any(s == "ASSUMED_BAD" for entries in end.values() for _, _, s in entries)
