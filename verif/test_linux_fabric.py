"""The Linux SRv6 fabric (verif/linux_fabric.py), proven with scapy-built MRC frames: the kernel's
uN forwards the NIC's route format hop by hop, drops what it cannot forward where it should,
routes around a downed spine link, and the harness leaves nothing behind.

Needs root (network namespaces); without it every test here skips, saying why."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest
from scapy.compat import raw
from scapy.layers.inet6 import IPv6, IPv6ExtHdrSegmentRouting
from scapy.layers.l2 import Ether
from scapy.utils import rdpcap

import mrcnic.layers  # noqa: F401  (UDP 4791 is BTH)
from mrcnic.evmap import UsidTemplate, format_addr
from mrcnic.verif import linux_fabric as lf
from mrcnic.verif.linux_fabric import FORMATS, LinuxFabric, host_usid, leaf_usid, observe, spine_usid

HOPS_HLIM = [64, 63, 62, 61]     # what the kernel does: every router (leaves too) takes one


def need_fabric() -> None:
    """Skips (never passes) where the kernel fabric cannot be built, saying why."""
    reason = lf.unsupported()
    if reason:
        pytest.skip(reason)


def build(fmt: str = "F3216", **kw) -> LinuxFabric:
    need_fabric()
    block, bits = FORMATS[fmt]
    return LinuxFabric(block=block, block_bits=bits, **kw)


@pytest.fixture(params=sorted(FORMATS))
def fab(request):
    with build(request.param, planes=2, spines=2, hosts=2) as f:
        yield f


def names(*nodes):
    return [f"p{p}_{k}{n}" for k, p, n in nodes]


mrc_frame = lf.nic_frame


def routed(fab: LinuxFabric, src: int, dst: int, plane: int, spine: int, **kw) -> bytes:
    """A frame on the route format's path: uSIDs (leaf src, spine, leaf dst, host dst)."""
    tpl = UsidTemplate(fab.block, (0x20 + src, 0x10, 0x20 + dst, 0x30 + dst), spine_index=1,
                       block_bits=fab.block_bits)
    (carrier,) = tpl.carriers(plane, spine)
    return mrc_frame(fab, src, plane, format_addr(carrier), **kw)


def nothing_arrived(fab: LinuxFabric):
    for h in range(fab.hosts):
        for p in range(fab.planes):
            assert fab.port(h, p).recv() == [], f"host {h} plane {p} got a frame"


def test_frames_cross_leaf_spine_leaf_to_the_host(fab):
    seed = 0
    for plane in range(fab.planes):
        for spine in range(fab.spines):
            for src, dst in ((0, 1), (1, 0)):
                seed += 1
                frame = routed(fab, src, dst, plane, spine, seed=seed)
                trace = observe(fab, src, plane, frame)
                hosts = [("host", plane, src), ("leaf", plane, src), ("spine", plane, spine),
                         ("leaf", plane, dst), ("host", plane, dst)]
                assert trace.path == names(*hosts), str(trace)
                assert trace.delivered == (dst, plane) and trace.dropped_at is None
                # the DA loses one uSID per switch; every router takes one off the hop limit
                lu, su = leaf_usid(plane, src), spine_usid(plane, spine)
                ld, hd = leaf_usid(plane, dst), host_usid(plane, dst)
                assert [h.dst_addr for h in trace.hops] == [
                    fab.addr(lu, su, ld, hd), fab.addr(su, ld, hd), fab.addr(ld, hd), fab.addr(hd)]
                assert [h.hop_limit for h in trace.hops] == HOPS_HLIM
                assert all(h.segments_left is None for h in trace.hops)
                # byte-exact at the NIC but for the outer DA, the hop limit, the MACs
                (got,) = fab.port(dst, plane).recv()
                want = Ether(frame)
                want[IPv6].dst = fab.addr(hd)
                want[IPv6].hlim = 61
                want.dst, want.src = fab.nic_mac(dst, plane), fab.leaf_port_mac(dst, plane)
                assert got == raw(want)
                assert got == trace.hops[-1].frame
                nothing_arrived(fab)


def test_a_frame_with_an_srh_continues_from_it(fab):
    """A carrier used up at the spine: End takes the next carrier from the SRH."""
    plane, spine = 1, 0
    lu, su, ld, hd = leaf_usid(plane, 0), spine_usid(plane, spine), leaf_usid(plane, 1), host_usid(plane, 1)
    c1, c2 = fab.addr(lu, su), fab.addr(ld, hd)
    trace = observe(fab, 0, plane, mrc_frame(fab, 0, plane, c1, segments=[c1, c2]))
    assert trace.delivered == (1, plane), str(trace)
    assert [(h.dst_addr, h.segments_left, h.hop_limit) for h in trace.hops] == [
        (c1, 1, 64), (fab.addr(su), 1, 63), (c2, 0, 62), (fab.addr(hd), 0, 61)]
    (got,) = fab.port(1, plane).recv()
    assert Ether(got)[IPv6ExtHdrSegmentRouting].segleft == 0
    # a one-carrier SRH (segments left 0) changes nothing: NEXT-CSID shifts as without it
    carrier = fab.addr(lu, su, ld, hd)
    trace = observe(fab, 0, plane, mrc_frame(fab, 0, plane, carrier, segments=[carrier]))
    assert trace.delivered == (1, plane), str(trace)
    assert [h.segments_left for h in trace.hops] == [0, 0, 0, 0]
    assert fab.port(1, plane).recv() == [trace.hops[-1].frame]


def test_the_kernel_drops_what_it_cannot_forward(fab):
    plane = 0
    lu, s1, l1, h1 = leaf_usid(plane, 0), spine_usid(plane, 1), leaf_usid(plane, 1), host_usid(plane, 1)
    leaf0, spine1 = ("leaf", plane, 0), ("spine", plane, 1)
    cases = [
        # (outer DA, hop limit, where it stops, the links it crossed, a counter that says why)
        ("route ends at the spine: uN with nothing after its own uSID, no SRH",
         fab.addr(lu, s1), 64, spine1, 2, "SID error counter"),
        ("a uSID nobody owns", fab.addr(0x0099), 64, leaf0, 1, "Ip6InNoRoutes"),
        ("a uSID nobody owns after the leaf's", fab.addr(lu, 0x0077, l1, h1), 64, leaf0, 1,
         "Ip6InNoRoutes"),
        ("hop limit 2 dies at the spine", fab.addr(lu, s1, l1, h1), 2, spine1, 2, "Ip6InHdrErrors"),
        ("hop limit 1 dies at the first leaf", fab.addr(lu, s1, l1, h1), 1, leaf0, 1, "Ip6InHdrErrors"),
        ("leaf to leaf: no link", fab.addr(lu, l1, h1), 64, leaf0, 1, "Ip6InNoRoutes"),
        ("a spine of another plane: no link", fab.addr(lu, spine_usid(1, 1), l1, h1), 64, leaf0, 1,
         "Ip6InNoRoutes"),
    ]
    for seed, (what, da, hlim, where, links, why) in enumerate(cases):
        trace = observe(fab, 0, plane, mrc_frame(fab, 0, plane, da, hlim=hlim, seed=seed))
        assert trace.delivered is None and trace.dropped_at == where, f"{what}:\n{trace}"
        assert len(trace.hops) == links, f"{what}:\n{trace}"
        assert why in trace.reason, f"{what}:\n{trace}"
        nothing_arrived(fab)


def test_a_downed_spine_link_drops_its_paths_until_it_comes_back(fab):
    plane, spine = 0, 1
    fab.link_down(plane, spine, 1)
    t = observe(fab, 0, plane, routed(fab, 0, 1, plane, spine))
    assert t.dropped_at == ("spine", plane, spine) and "Ip6InNoRoutes" in t.reason, str(t)
    t = observe(fab, 1, plane, routed(fab, 1, 0, plane, spine))
    assert t.dropped_at == ("leaf", plane, 1) and "Ip6InNoRoutes" in t.reason, str(t)
    # the other spine, and the same spine on the other plane, still deliver
    for src, dst, p, s in ((0, 1, plane, 0), (1, 0, plane, 0), (0, 1, 1, spine)):
        t = observe(fab, src, p, routed(fab, src, dst, p, s))
        assert t.delivered == (dst, p), str(t)
        assert fab.port(dst, p).recv() == [t.hops[-1].frame]
    nothing_arrived(fab)
    fab.link_up(plane, spine, 1)
    for src, dst in ((0, 1), (1, 0)):
        t = observe(fab, src, plane, routed(fab, src, dst, plane, spine))
        assert t.delivered == (dst, plane), str(t)
        assert fab.port(dst, plane).recv() == [t.hops[-1].frame]


def test_pcaps_per_link_as_the_model_names_them(tmp_path):
    with build("F1616", planes=1, spines=2, hosts=2, pcap_dir=tmp_path) as fab:
        trace = observe(fab, 0, 0, routed(fab, 0, 1, 0, 1))
        assert trace.delivered == (1, 0)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == sorted(f"{lf.link_name(a, b)}.pcap" for a, b in fab.links())
    for hop in trace.hops:
        (pkt,) = rdpcap(str(tmp_path / f"{lf.link_name(hop.src, hop.dst)}.pcap"))
        assert raw(pkt) == hop.frame
    assert not rdpcap(str(tmp_path / "p0_leaf0-p0_spine0.pcap"))


def test_another_process_opens_a_port_and_the_frames_flow_both_ways():
    with build("F3216", planes=1, spines=1, hosts=2) as fab:
        ns, tap = fab.port_spec(1, 0)
        fab.port(0, 0)                             # host 0's port, held here, takes the reply
        back = routed(fab, 1, 0, 0, 0, seed=7)
        child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
            import select, sys
            from mrcnic.verif.linux_fabric import open_tap
            port = open_tap({ns!r}, {tap!r})
            print("open", flush=True)
            port.send(bytes.fromhex({back.hex()!r}))
            if select.select([port], [], [], 5)[0]:
                print(port.recv()[0].hex(), flush=True)
            """)], stdout=subprocess.PIPE, text=True)
        try:
            assert child.stdout.readline().strip() == "open"
            with pytest.raises(OSError):           # one fd per TAP: the child has it
                fab.port(1, 0)
            trace = observe(fab, 0, 0, routed(fab, 0, 1, 0, 0, seed=8))
            assert trace.delivered == (1, 0), str(trace)
            assert child.stdout.readline().strip() == trace.hops[-1].frame.hex()
            (got,) = fab.port(0, 0).recv()
            assert Ether(got)[IPv6].dst == fab.addr(host_usid(0, 0))
        finally:
            child.kill()
            child.wait()
            child.stdout.close()


def _ours(prefix: str) -> list[str]:
    return [n for n in lf._netns_list() + lf._root_links() if n.startswith(prefix)]


def test_nothing_remains_after_the_fabric_closes():
    with build(planes=1, spines=1, hosts=2) as fab:
        assert _ours(fab.prefix)
    assert _ours(fab.prefix) == []
    for exc in (ValueError, KeyboardInterrupt):          # an error; Ctrl-C
        with pytest.raises(exc), build(planes=1, spines=1, hosts=2) as fab:
            assert _ours(fab.prefix)
            raise exc
        assert _ours(fab.prefix) == []


def test_stale_leftovers_are_removed_at_start():
    need_fabric()
    with open("/proc/sys/kernel/pid_max") as f:
        dead = int(f.read()) + 1                  # a pid no process can have
    stale = f"{lf.COMMON_PREFIX}{dead:x}x0"
    subprocess.run(["ip", "netns", "add", f"{stale}-p0_leaf0"], check=True)
    subprocess.run(["ip", "link", "add", f"{stale}a", "type", "veth", "peer", "name", f"{stale}b"],
                   check=True)
    with build(planes=1, spines=1, hosts=2):
        assert _ours(stale) == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_killed_builder_leaves_nothing_for_long(sig):
    """SIGTERM: it tears down itself. SIGKILL: the next fabric removes what it left."""
    need_fabric()
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import time
        from mrcnic.verif.linux_fabric import LinuxFabric
        with LinuxFabric(planes=1, spines=1, hosts=2) as fab:
            print(fab.prefix, flush=True)
            time.sleep(60)
        """)], stdout=subprocess.PIPE, text=True)
    try:
        prefix = child.stdout.readline().strip()
        assert prefix and _ours(prefix)
        child.send_signal(sig)
        child.wait(timeout=20)
    finally:
        child.kill()
        child.wait()
        child.stdout.close()
    if sig == signal.SIGTERM:
        assert child.returncode == 128 + sig
        assert _ours(prefix) == []
    else:
        # (left behind, unless a fabric another pytest worker started has removed it already)
        with build(planes=1, spines=1, hosts=2):
            assert _ours(prefix) == []


def test_without_root_it_skips_saying_why(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(pytest.skip.Exception, match="needs root"):
        need_fabric()
    with pytest.raises(lf.FabricUnavailable, match="needs root"), LinuxFabric():
        pass
