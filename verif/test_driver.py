"""The driver's register programs, run against a word store that answers like the register bank
(the bank itself runs them under Verilator in the TX tests)."""

import pytest

from mrcnic import driver, regmap
from mrcnic.enums import SprayMode
from mrcnic.evmap import EvLayout, UsidTemplate
from mrcnic.hdl.retransmit_tracker import RelMode
from mrcnic.regclient import RegisterClient, RegisterError
from mrcnic.transports import TRANSPORTS, flow_path, transport
from mrcnic.verif.test_regmap import FakeBus

LAYOUT = EvLayout(planes=2, spines=4)


def nic(**build):
    bus = FakeBus()
    build = {"id": regmap.MRCNIC_ID, "planes": 2, "qps": 4, "evs": 16, "templates": 4,
             "max_usids": 14, "spines": 4, "spares": 2, "cc_profiles": 1, **build}
    for k, v in build.items():
        bus.words[regmap.by_name(f"global.{k}").offset] = v
    return bus, RegisterClient(bus)


def commands(bus, path):
    off = regmap.by_name(path).offset
    return [v for o, v in bus.writes if o == off]


def test_identify_reads_the_build_and_refuses_a_stranger():
    bus, c = nic()
    assert c.run(driver.identify())["evs"] == 16
    bus.words[0] = 0x1234
    with pytest.raises(RegisterError, match="not an mrcnic"):
        c.run(driver.identify())


def test_profile_entries_sit_on_their_own_plane():
    bus, c = nic()
    evs = [LAYOUT.make(1, s, 7) for s in range(4)] + [LAYOUT.make(0, s, 9) for s in range(4)]
    profile = c.run(driver.load_ev_profile(2, evs, LAYOUT))
    assert sorted(profile) == sorted(evs)
    assert [LAYOUT.plane(ev) for ev in profile] == [i % 2 for i in range(8)]
    assert commands(bus, "ev.load") == [2] + [0] * 8        # CLEAR, then each entry
    assert commands(bus, "ev.value") == profile


@pytest.mark.parametrize("evs,match", [
    ([LAYOUT.make(0, 0), LAYOUT.make(0, 1), LAYOUT.make(1, 0)], "2 on plane 0, 1 on plane 1"),
    ([], "1 .. 16"), ([LAYOUT.make(p % 2, 0, p) for p in range(18)], "1 .. 16"),
    ([1 << 32, 0], "32-bit"),
])
def test_bad_profiles_are_refused_before_any_write(evs, match):
    bus, c = nic()
    with pytest.raises(RegisterError, match=match):
        c.run(driver.load_ev_profile(0, evs, LAYOUT))
    assert bus.writes == []


def test_profile_layout_must_match_the_nic():
    _, c = nic(planes=4)
    with pytest.raises(RegisterError, match="is not the NIC's"):
        c.run(driver.load_ev_profile(0, [LAYOUT.make(0, 0), LAYOUT.make(1, 0)], LAYOUT))
    _, c = nic()
    moved = EvLayout(planes=2, spines=4, plane_shift=12)
    with pytest.raises(RegisterError, match="is not the NIC's"):
        c.run(driver.load_ev_profile(0, [moved.make(0, 0), moved.make(1, 0)], moved))


def test_bad_spares_are_refused_before_any_write():
    for spares, match in (([1 << 40], "32-bit"), ([LAYOUT.make(1, s) for s in range(3)],
                                                  "3 spares for plane 1")):
        bus, c = nic()
        with pytest.raises(RegisterError, match=match):
            c.run(driver.load_ev_profile(0, [LAYOUT.make(0, 0), LAYOUT.make(1, 0)], LAYOUT,
                                         spares))
        assert bus.writes == []


def test_a_refusal_by_the_nic_fails_the_sequence():
    bus, c = nic()
    refused = regmap.by_name("qp.dqp").offset
    errors = regmap.by_name("global.bus_errors").offset
    write = bus.write

    def refusing(offset, value):       # the bank refuses this one, as it does a locked block
        if offset == refused:
            bus.words[errors] += 1
        else:
            write(offset, value)

    bus.write = refusing
    with pytest.raises(RegisterError, match="refused 1 access"):
        c.run(driver.configure_qp(0, driver.QpConfig(5, "02:00:00:00:00:02", "fd00::2")))


def test_addresses_and_templates_are_checked_first():
    bus, c = nic()
    with pytest.raises(RegisterError, match="not an IPv6"):
        c.run(driver.set_addresses("02:00:00:00:00:01", "fd00::1::"))
    with pytest.raises(RegisterError, match="16- or 32-bit block"):
        c.run(driver.write_template(0, UsidTemplate(0xFCBB_0001_0002, (0x100,), 0, block_bits=48)))
    with pytest.raises(RegisterError, match="plane must be 0 .. 1, not 2"):
        c.run(driver.set_plane_addresses(2, next_hop="02:00:00:00:0e:01"))
    with pytest.raises(RegisterError, match="not a MAC"):
        c.run(driver.set_plane_addresses(0, next_hop="02:00"))
    with pytest.raises(RegisterError, match="not an IPv6"):
        c.run(driver.set_plane_addresses(0, sid="fcbb::1::"))
    assert bus.writes == []


@pytest.mark.parametrize("qp,cfg,match", [
    (4, {}, "QP 4 does not exist"), (0, {"mtu": 1500}, "MTU 1500"),
    (0, {"template": 4}, "template 4 does not exist"), (0, {"dqp": 1 << 24}, "dqp"),
    (0, {"dst_mac": "02:00:00"}, "not a MAC"), (0, {"dst_ip": "fd00::1::2"}, "not an IPv6"),
])
def test_bad_qp_settings_are_refused(qp, cfg, match):
    bus, c = nic()
    good = dict(dqp=5, dst_mac="02:00:00:00:00:02", dst_ip="fd00::2")
    with pytest.raises(RegisterError, match=match):
        c.run(driver.configure_qp(qp, driver.QpConfig(**{**good, **cfg})))
    assert commands(bus, "qp.write") == []


def test_qp_and_template_land_in_their_registers():
    bus, c = nic()
    c.run(driver.configure_qp(1, driver.QpConfig(dqp=0x77, dst_mac="02:00:00:00:00:02",
                                                 dst_ip="fd00::2", mtu=1024, next_psn=5)))
    assert c.read("qp.dqp") == 0x77 and c.read("qp.mtu") == 2 and c.read("qp.next_psn") == 5
    assert c.read("qp.dst_ip") == (0xFD00 << 112) | 2
    assert commands(bus, "qp.write") == [1]
    c.run(driver.write_template(3, UsidTemplate(0xFCBB, (0x100, 0x200, 0x300), spine_index=1)))
    assert c.read("tpl.usids") == 0x0300_0200_0100 and c.read("tpl.count") == 3
    assert c.read("tpl.format") == 0 and c.read("tpl.block") == 0xFCBB
    c.run(driver.write_template(2, UsidTemplate(0xFCBBBB00, (0x21,), 0, block_bits=32)))
    assert c.read("tpl.format") == 1 and c.read("tpl.block") == 0xFCBBBB00
    c.run(driver.set_plane_addresses(1, next_hop="02:00:00:00:0e:01", sid="fcbb:bb00:1031::"))
    assert c.read("net.next_hop_p1") == 0x02_00_00_00_0E_01
    assert c.read("net.sid_p1") == 0xFCBB_BB00_1031 << 80 and c.read("net.sid_p0") == 0
    with pytest.raises(RegisterError, match="at most 2"):
        _, small = nic(max_usids=2)
        small.run(driver.write_template(0, UsidTemplate(0xFCBB, (1, 2, 3), spine_index=0)))


def test_reliability_settings_land_in_their_registers():
    bus, c = nic()
    c.run(driver.set_reliability(RelMode.GO_BACK_N, reorder=3, rto_min=500, rto_max=9000,
                                 probe_interval=0, status_interval=5000))
    written = {regmap.by_offset(o).path: v for o, v in bus.writes}
    assert written == {"rel.mode": RelMode.GO_BACK_N.value, "rel.reorder": 3,
                       "rel.rto_min": 500, "rel.rto_max": 9000, "rel.probe_interval": 0,
                       "rel.status_interval": 5000}
    bus.writes.clear()
    c.run(driver.set_reliability(RelMode.OFF))
    assert [(regmap.by_offset(o).path, v) for o, v in bus.writes] == [
        ("rel.mode", RelMode.OFF.value)]


@pytest.mark.parametrize("name", sorted(TRANSPORTS))
def test_a_transport_is_set_through_three_registers(name):
    """MRC and the two baselines differ only in rel.mode, rel.ev_health and tx.spray."""
    t = TRANSPORTS[name]
    bus, c = nic()
    c.run(driver.set_reliability(t.rel_mode, ev_health=t.ev_health))
    c.run(driver.set_spray(t.spray))
    written = {regmap.by_offset(o).path: v for o, v in bus.writes}
    assert written == {"rel.mode": t.rel_mode.value, "rel.ev_health": int(t.ev_health),
                       "tx.spray": t.spray.value}


def test_bad_transports_and_spray_modes_are_refused():
    bus, c = nic()
    with pytest.raises(RegisterError, match="spray mode must be one of"):
        c.run(driver.set_spray(3))
    assert not bus.writes
    c.run(driver.set_spray(SprayMode.SEQUENCE))
    assert [(regmap.by_offset(o).path, v) for o, v in bus.writes] == [("tx.spray", 2)]
    with pytest.raises(ValueError, match="no transport 'dcqcn'; transports are mrc, roce, spray"):
        transport("dcqcn")
    with pytest.raises(ValueError, match="paths must be at least 1"):
        flow_path(1, 2, 0, 0)


def test_the_flow_hash_spreads_flows_and_keeps_each_on_one_path():
    """The single-path transport's ECMP stand-in: the same flow, the same path, every time;
    many flows cover every path, none taking much more than its share."""
    paths = 8
    got = [flow_path(0xFD00 << 112 | s, 0xFD00 << 112 | d, q, paths)
           for s in range(1, 9) for d in range(1, 9) for q in range(16) if s != d]
    assert got == [flow_path(0xFD00 << 112 | s, 0xFD00 << 112 | d, q, paths)
                   for s in range(1, 9) for d in range(1, 9) for q in range(16) if s != d]
    counts = [got.count(p) for p in range(paths)]
    assert min(counts) > 0.7 * len(got) / paths and max(counts) < 1.3 * len(got) / paths, counts


@pytest.mark.parametrize("kw, match", [
    (dict(mode=7), "mode must be one of"),
    (dict(reorder=-1), "reorder must be 0"),
    (dict(rto_min=0), "rto_min must be 1"),
    (dict(rto_max=49153), "rto_max must be 1"),
    (dict(rto_min=900, rto_max=800), "above rto_max"),
    (dict(probe_interval=1 << 24), "probe_interval must be 0"),
    (dict(probe_interval=-5), "probe_interval must be 0"),
    (dict(status_interval=1 << 24), "status_interval must be 0"),
    (dict(status_interval=2.5), "status_interval must be 0"),
    (dict(ev_health=1), "ev_health must be True or False"),
])
def test_bad_reliability_settings_are_refused_before_any_write(kw, match):
    bus, c = nic()
    with pytest.raises(RegisterError, match=match):
        c.run(driver.set_reliability(**kw))
    assert not [o for o, _ in bus.writes if regmap.by_offset(o).block == "rel"]


def test_port_rate_lands_in_its_registers():
    bus, c = nic()
    c.run(driver.set_port_rate(8, 250, limit=1500))     # 8 Gb/s at 250 MHz: 4 bytes a cycle
    assert [(regmap.by_offset(o).path, v) for o, v in bus.writes] == [
        ("tx.port_rate", 4 * 256), ("tx.port_limit", 1500)]
    bus.writes.clear()
    c.run(driver.set_port_rate(1, 156.25))                # a 1 Gb/s board port, limit as it is
    assert [(regmap.by_offset(o).path, v) for o, v in bus.writes] == [("tx.port_rate", 205)]


@pytest.mark.parametrize("args, kw, match", [
    ((-1,), {}, "gbps must be a number"),
    (("8",), {}, "gbps must be a number"),
    ((8, 0), {}, "clock_mhz must be above 0"),
    ((600, 250), {}, "tx.port_rate holds 1 .. 65535"),
    ((0.0001, 250), {}, "tx.port_rate holds 1 .. 65535"),
    ((8,), dict(limit=1 << 16), "limit must be 0 .. 65535"),
    ((8,), dict(limit=1.5), "limit must be 0 .. 65535"),
])
def test_bad_port_rates_are_refused_before_any_write(args, kw, match):
    bus, c = nic()
    with pytest.raises(RegisterError, match=match):
        c.run(driver.set_port_rate(*args, **kw))
    assert not [o for o, _ in bus.writes if regmap.by_offset(o).block == "tx"]


def test_congestion_settings_land_and_read_back():
    bus, c = nic()
    c.run(driver.set_congestion(target_rtt=3000, cwnd_init=8192, cwnd_min=2048, cwnd_max=9000,
                                fair=100, gain=8, md_shift=2, rcv_wnd=12000))
    written = {regmap.by_offset(o).path: v for o, v in bus.writes}
    assert written == {"rel.target_rtt": 3000, "rel.cwnd_init": 8192, "rel.cwnd_min": 2048,
                       "rel.cwnd_max": 9000, "rel.cc_fair": 100, "rel.cc_gain": 8, "rel.cc_md": 2,
                       "rel.rcv_wnd": 12000}
    bus.words[regmap.by_name("rel.cwnd").offset] = 5000
    assert c.run(driver.congestion(2))["cwnd"] == 5000
    assert bus.writes[-1] == (regmap.by_name("rel.view_qp").offset, 2)


@pytest.mark.parametrize("kw, match", [
    (dict(target_rtt=0), "target_rtt must be 1"),
    (dict(cwnd_max=1 << 24), "cwnd_max must be 1"),
    (dict(md_shift=16), "cc_md must be 0 .. 15"),
    (dict(cwnd_min=9000, cwnd_max=8000), "above cwnd_max"),
    (dict(rcv_wnd=-1), "rcv_wnd must be 0"),
])
def test_bad_congestion_settings_are_refused_before_any_write(kw, match):
    bus, c = nic()
    with pytest.raises(RegisterError, match=match):
        c.run(driver.set_congestion(**kw))
    assert not [o for o, _ in bus.writes if regmap.by_offset(o).block == "rel"]


def test_congestion_of_a_qp_the_nic_lacks_is_refused():
    _, c = nic()
    with pytest.raises(RegisterError, match="QP 4"):
        c.run(driver.congestion(4))


def test_ack_policy_lands_with_its_share_period():
    bus, c = nic()
    c.run(driver.set_ack_policy(4, 256, share_period=4500))
    assert {regmap.by_offset(o).path: v for o, v in bus.writes} == {
        "rx.coalesce": 4, "rx.ack_timeout": 256, "rx.share_period": 4500}


@pytest.mark.parametrize("args, kw, match", [
    ((0, 256), {}, "coalesce must be 1 .. 255"),
    ((4, 0), {}, "ACK timeout must be 1"),
    ((4, 256), {"share_period": 1 << 16}, "share period must be 0 .. 65535"),
    ((4, 256), {"share_period": 2.5}, "share period must be 0 .. 65535"),
])
def test_bad_ack_policy_is_refused_before_any_write(args, kw, match):
    bus, c = nic()
    with pytest.raises(RegisterError, match=match):
        c.run(driver.set_ack_policy(*args, **kw))
    assert not bus.writes
