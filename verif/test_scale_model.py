"""The scale model (verif/scale_*.py): its network's timing, queues and failures, its fat tree's
routes, its EV choice, its receiver against the reorder tracker's reference model, whole runs,
and its sweeps on Dask."""

import random
from dataclasses import replace

import pytest

from mrcnic import wire
from mrcnic.enums import EvState, SprayMode
from mrcnic.evmap import EvLayout
from mrcnic.transports import transport
from mrcnic.verif import scale_model, scale_sweep, scenarios
from mrcnic.verif.network import LinkConfig
from mrcnic.verif.rx_model import ReorderModel
from mrcnic.verif.scale_net import ACK, DATA, FatTree, LeafSpine, Packet, Port, Sim
from mrcnic.verif.scale_nic import NicConfig, ScaleNic, Write
from mrcnic.verif.scale_spray import Spray

GBPS, LATENCY = 8.0, 400.0


def _leafspine(sim, hosts=2, **cfg):
    layout = EvLayout(2, 4)
    return LeafSpine(sim, 2, 4, hosts, lambda a, b: LinkConfig(gbps=GBPS, latency_ns=LATENCY,
                                                               **cfg), layout), layout


def _port(sim, last_hop=False, queue=10_000, ecn=3_000):
    p = Port(sim, ("leaf", 0, 0), ("spine", 0, 0), GBPS, LATENCY, queue, ecn, ecn, last_hop,
             random.Random(1), header_bytes=100)
    got = []
    p.deliver = lambda pkt: got.append((sim.now, pkt))
    return p, got


def test_a_packet_crosses_each_hop_at_line_rate_then_its_latency():
    """One write of one packet on an idle fabric: four hops of serialisation and latency out,
    the NIC's delay, the same back for the SACK, the NIC's delay again."""
    sim = Sim()
    net, layout = _leafspine(sim)
    cfg = NicConfig(mtu=1024, coalesce=1)
    ev = layout.make(1, 2)
    prof = {0: [(ev, 1, layout.path(ev))]}
    done = []
    nics = [ScaleNic(sim, net, h, 2, {0: 1 - h}, prof, transport("mrc"), cfg, 1, layout=layout,
                     on_done=lambda h, w, t: done.append(t)) for h in range(2)]
    sim.at(0.0, nics[0].post, Write(1, 0, 1, 1024))
    sim.run(stop=lambda: done)            # (the NICs' probe timers tick on for ever)
    hop = lambda size: size * 8 / GBPS + LATENCY      # noqa: E731
    want = 4 * hop(1024 + cfg.data_overhead) + 4 * hop(cfg.ctrl_bytes) + 2 * cfg.nic_delay_ns
    assert done == [pytest.approx(want)]
    # both ways on the EV's plane and spine, and nothing else moved
    used = {k for k, p in net.links.items() if p.count["delivered"]}
    assert used == {(("host", 1, 0), ("leaf", 1, 0)), (("leaf", 1, 0), ("spine", 1, 2)),
                    (("spine", 1, 2), ("leaf", 1, 1)), (("leaf", 1, 1), ("host", 1, 1)),
                    (("host", 1, 1), ("leaf", 1, 1)), (("leaf", 1, 1), ("spine", 1, 2)),
                    (("spine", 1, 2), ("leaf", 1, 0)), (("leaf", 1, 0), ("host", 1, 0))}


def test_a_long_write_runs_at_the_ports_line_rate():
    """1 MiB alone, sprayed over both planes: no faster than its frames take on the two ports,
    and within 3% of it (the RTL system measures 98.1%: bench block linerate)."""
    sim = Sim()
    net, layout = _leafspine(sim)
    cfg = NicConfig(mtu=1024)
    prof = {0: [(layout.make(i % 2, i // 2 % 4), i % 2, layout.path(layout.make(i % 2, i // 2 % 4)))
                for i in range(16)]}
    done = []
    nics = [ScaleNic(sim, net, h, 2, {0: 1 - h}, prof, transport("mrc"), cfg, 1, layout=layout,
                     on_done=lambda h, w, t: done.append(t)) for h in range(2)]
    size = 1 << 20
    sim.at(0.0, nics[0].post, Write(1, 0, 1, size))
    sim.run(stop=lambda: done)
    ideal = (size // 1024) * (1024 + cfg.data_overhead) * 8 / (2 * GBPS)
    assert ideal < done[0] < 1.03 * ideal, (done, ideal)
    assert nics[0].retransmissions() == 0


def test_a_full_queue_trims_and_a_long_one_marks():
    sim = Sim()
    port, got = _port(sim)
    sent = [Packet(DATA, 0, 1, 0, psn, 0, 1200) for psn in range(10)]
    for pkt in sent:
        port.offer(pkt)
    sim.run()
    trimmed = [pkt.psn for _, pkt in got if pkt.trimmed]
    marked = [pkt.psn for _, pkt in got if pkt.ce]
    # 10,000 bytes hold 8 frames of 1200: the last two are cut to their headers, and go first
    assert trimmed == [8, 9] and [pkt.psn for _, pkt in got[:2]] == [8, 9]
    assert all(pkt.size == 100 for _, pkt in got[:2])
    # a frame that finds more than 3000 bytes queued is marked
    assert marked == [3, 4, 5, 6, 7]
    assert port.count["trimmed"] == 2 and port.count["ecn_marked"] == 5


def test_no_mark_on_the_last_hop_and_control_is_never_trimmed():
    sim = Sim()
    port, got = _port(sim, last_hop=True, queue=2_000)
    for psn in range(4):
        port.offer(Packet(DATA, 0, 1, 0, psn, 0, 900))
    port.offer(Packet(ACK, 0, 1, 0, 9, 0, 150))
    sim.run()
    assert not any(pkt.ce for _, pkt in got)
    ack = next(pkt for _, pkt in got if pkt.kind == ACK)
    assert not ack.trimmed and ack.size == 150


def test_a_dead_link_drops_what_is_on_it_and_what_enters_it():
    sim = Sim()
    port, got = _port(sim)
    port.offer(Packet(DATA, 0, 1, 0, 1, 0, 1000))
    sim.at(500.0, port.set_down, True)
    sim.at(600.0, port.offer, Packet(DATA, 0, 1, 0, 2, 0, 1000))
    sim.at(700.0, port.set_down, False)
    sim.at(800.0, port.offer, Packet(DATA, 0, 1, 0, 3, 0, 1000))
    sim.run()
    assert [pkt.psn for _, pkt in got] == [3]
    assert port.count["dropped_down"] == 2
    assert got[0][0] == pytest.approx(800 + 1000 * 8 / GBPS + LATENCY)


def test_fat_tree_routes_go_up_by_hash_and_down_by_address():
    sim = Sim()
    ft = FatTree(sim, 4, lambda a, b: dict(gbps=100, latency_ns=1000, queue_bytes=10**6,
                                           ecn_lo=10**5, ecn_hi=10**5))
    assert ft.hosts == 16 and len(ft.links) == 2 * (16 + 16 + 16)
    assert len(ft.route(0, 1, 7, 0)) == 2            # same ToR
    assert len(ft.route(0, 2, 7, 0)) == 4            # same pod
    assert len(ft.route(0, 15, 7, 0)) == 6           # across the core
    cores = {ft.route(0, 15, ev, 0)[2].dst for ev in range(256)}
    assert cores == {("core", 0, c) for c in range(4)}   # every path, by EV alone
    for ev in range(64):
        r = ft.route(3, 12, ev, 0)
        assert r[-1].dst == ("host", 0, 12) and r[-1].src == ft.tor(12)
        assert r[3].dst == ("agg", 3, r[1].dst[2])       # down through the same Agg index
    assert [(p.src, p.dst) for p in ft.core_downlinks(0, 1)] == [
        (("core", 0, 2), ("agg", 0, 1)), (("core", 0, 3), ("agg", 0, 1))]
    with pytest.raises(ValueError, match="even"):
        FatTree(sim, 3, None)


def test_on_srv6_routes_the_ev_names_the_agg_and_the_core():
    sim = Sim()
    ft = FatTree(sim, 4, lambda a, b: dict(gbps=100, latency_ns=1000, queue_bytes=10**6,
                                           ecn_lo=10**5, ecn_hi=10**5), routing="srv6")
    assert ft.routes() == 4
    for route in range(4):
        ev = ft.srv6_ev(route, entropy=0xBEEF)
        assert ev >> 16 == 0xBEEF and ft.route_of(ev) == route
        up = ft.route(0, 15, ev, 0)
        agg, core = route % 2, route // 2
        assert up[1].dst == ("agg", 0, agg) and up[2].dst == ("core", 0, agg * 2 + core)
        assert ft.route(0, 2, ev, 0)[1].dst == ("agg", 0, agg)      # within the pod: the Agg
    # the same route whatever the flow: the source chose it, no switch hashes
    assert {ft.route(s, 15, ft.srv6_ev(3), 0)[2].dst for s in range(4)} == {("core", 0, 3)}
    with pytest.raises(ValueError, match="route is 0 .. 3"):
        ft.srv6_ev(4)
    with pytest.raises(ValueError, match="routing is one of"):
        FatTree(sim, 4, None, routing="ospf")


def test_sequence_takes_each_plane_in_profile_order_from_a_drawn_start():
    sp = _spray(SprayMode.SEQUENCE, n=8)
    picks = [sp.pick([0, 1]) for _ in range(24)]
    assert [i % 2 for i in picks] == [0, 1] * 12                   # planes in turn
    for plane in (0, 1):
        mine = [i for i in picks if i % 2 == plane]
        ring = list(range(plane, 8, 2))
        k = ring.index(mine[0])
        assert mine == (ring[k:] + ring[:k]) * 3, f"plane {plane}: {mine}"
    # the first entry is drawn: QPs that start together are not in step
    firsts = {Spray(list(range(8)), [0] * 8, list(range(8)), SprayMode.SEQUENCE,
                    random.Random(seed)).pick([0]) for seed in range(20)}
    assert len(firsts) > 2, firsts
    # a SKIP is passed over, the others keep their order behind it
    sp = _spray(SprayMode.SEQUENCE, n=8)
    first = sp.pick([0])
    ring = [(first + 2 * j) % 8 for j in range(4)]
    sp.update(ring[2], EvState.SKIP)
    assert [sp.pick([0]) for _ in range(5)] == [ring[1], ring[3], ring[0], ring[1], ring[3]]


def _spray(mode=SprayMode.ROUNDS, n=8):
    return Spray(list(range(100, 100 + n)), [i % 2 for i in range(n)], [i // 2 for i in range(n)],
                 mode, random.Random(5))


def test_rounds_use_every_good_ev_once_planes_in_turn():
    sp = _spray()
    picks = [sp.pick([0, 1]) for _ in range(8)]
    assert sorted(picks) == list(range(8))
    assert [sp.plane_of[i] for i in picks] == [0, 1] * 4
    # only plane 1 ready: its EVs alone
    assert {sp.pick([1]) for _ in range(8)} == {1, 3, 5, 7}


def test_skip_lasts_as_the_gateware_keeps_it_and_a_held_path_is_passed_over():
    """A SKIP: the rest of the rotation (8 grants here) and the next; a trim's: the rest of
    its period of trim_rounds rotations and the next; GOOD ends either."""
    sp = _spray()
    for _ in range(3):
        sp.pick([0, 1])
    sp.update(2, EvState.SKIP)
    assert 2 not in [sp.pick([0, 1]) for _ in range(5 + 7)] and sp.skipped(2)
    assert sp.pick([0, 1]) != 2 and not sp.skipped(2)          # (the rotation's last grant)
    assert 2 in [sp.pick([0, 1]) for _ in range(8)]
    tr = Spray(list(range(100, 108)), [i % 2 for i in range(8)], [i // 2 for i in range(8)],
               SprayMode.ROUNDS, random.Random(5), trim_rounds=2)
    for _ in range(3):
        tr.pick([0, 1])
    tr.update(2, EvState.SKIP, trim=True)
    tr.update(4, EvState.SKIP)
    assert 2 not in [tr.pick([0, 1]) for _ in range(13 + 15)] and tr.skipped(2)
    assert not tr.skipped(4)
    assert tr.pick([0, 1]) != 2 and not tr.skipped(2)
    assert 2 in [tr.pick([0, 1]) for _ in range(16)]
    tr.update(2, EvState.SKIP, trim=True)
    tr.update(2, EvState.GOOD)
    assert not tr.skipped(2)
    # path 1 holds entries 2 and 3: passed over while their planes have another
    assert not {2, 3} & {sp.pick([0, 1], held={1}) for _ in range(16)}
    # retry: not on the entry that lost it, unless nothing else is left
    assert 4 not in {sp.pick([0], avoid=4) for _ in range(12)}


def test_a_retired_path_takes_its_evs_but_never_the_last():
    sp = _spray()
    sp.update(0, EvState.ASSUMED_BAD)
    sp.retire_path(2)                      # its path holds entries 2 and 3
    assert sp.bad() == [0, 2, 3]
    assert 0 not in {sp.pick([0, 1]) for _ in range(24)}
    assert sp.next_probe() == 0 and sp.next_probe() == 2
    lone = Spray([1, 2], [0, 0], [0, 0], SprayMode.ROUNDS, random.Random(1))
    lone.retire_path(0)
    assert lone.bad() == []                # it would leave the QP none


def test_what_ifs_recycle_clean_evs_and_skip_trimmed_ones_longer():
    """The scale model's what-ifs, not the NIC's rules: an entry whose SACK came back clean
    goes again before the rounds (the latest ``recycle`` kept), and a SACK's SKIP may last
    several rotations."""
    sp = Spray(list(range(100, 108)), [i % 2 for i in range(8)], [i // 2 for i in range(8)],
               SprayMode.ROUNDS, random.Random(5), recycle=2)
    for i in (5, 6, 7):
        sp.clean(i)
    assert [sp.pick([0, 1]) for _ in range(2)] == [6, 7]      # (5 fell out)
    sp.clean(3)
    assert sp.pick([0]) != 3                                  # not on a plane that is ready
    sk = Spray(list(range(100, 108)), [i % 2 for i in range(8)], [i // 2 for i in range(8)],
               SprayMode.ROUNDS, random.Random(5), mark_rounds=3)
    sk.update(2, EvState.SKIP)              # (at a rotation's start: 3 whole rotations and 3)
    assert 2 not in [sk.pick([0, 1]) for _ in range(48)] and not sk.skipped(2)
    off = _spray()
    off.clean(5)
    assert sorted(off.pick([0, 1]) for _ in range(8)) == list(range(8))
    r = scale_model.FatTreeRun(k=4, size=100_000, degraded=2, recycle=4, trim_rounds=1,
                               mark_rounds=2)
    assert r.whatif() == ("recycle 4 EVs, tx.trim_rounds 1, a SACK's skip lasts 2 "
                          "rotations")
    assert scale_model.FatTreeRun().whatif() == ""
    assert scale_model.FatTreeRun(cc_fair=512, cc_md=3, avoid_slow=True).whatif() == (
        "rel.cc_fair 512, rel.cc_md 3, EVs through a slow link left out (a bound)")
    assert scale_model._fattree_config(scale_model.FatTreeRun(cc_fair=300, cc_md=5)).cc.fair \
        == 300
    assert scale_model.FatTreeRun(target_rtt=3).whatif() == "NSCC's target 3 base RTTs"
    # the window's top, in bandwidth-delay products of the first window's
    top, wide = (scale_model._fattree_config(scale_model.FatTreeRun(cwnd_max_bdp=m)).cc
                 for m in (scale_model.FATTREE_CWND_MAX_BDP, 4.0))
    assert top.cwnd_max == pytest.approx(scale_model.FATTREE_CWND_MAX_BDP * top.cwnd_init, abs=1)
    assert wide.cwnd_max == pytest.approx(4 * wide.cwnd_init, abs=1)
    assert scale_model.FatTreeRun(cwnd_max_bdp=4.0).whatif() == "the window's top 4 BDP"
    base, later = (scale_model._fattree_config(scale_model.FatTreeRun(target_rtt=t)).cc.target_rtt
                   for t in (1.5, 3))
    assert later == pytest.approx(2 * base, abs=1)
    with pytest.raises(ValueError, match="target_rtt"):
        scale_model.FatTreeRun(target_rtt=0.5)
    out = scale_model.run_fattree(r, "mrc", 1)
    assert len(out["fct_us"]) == 16 and out["fct_max_us"] >= out["ideal_us"] * 0.99


def test_what_ifs_run_beside_the_nic_and_stay_out_of_its_figures():
    tasks = scale_sweep.tasks_for(["fattree"], ["mrc", "spray"], [1, 2], [0, 8], [0.1, 0.25],
                                  [1000], 16, None, [dict(trim_rounds=2)])
    extra = [t for t in tasks if t.run.whatif()]
    assert [(t.transport, t.seed, t.run.degraded, t.run.ratio) for t in extra] == \
        [("mrc", 1, 8, 0.1), ("mrc", 2, 8, 0.1)]
    assert len(tasks) == 2 * 3 + 2       # (on SRv6 routes, the default, MRC alone)
    assert extra[0].fabric() == "8 core links at 10%, what-if: tx.trim_rounds 2"
    runs = [{"task": t.__dict__ | {"run": t.run.__dict__}, "error": None,
             "tail_over_ideal": 9.0 if t.run.whatif() else 1.5}
            for t in scale_sweep.tasks_for(["fattree"], ["mrc"], [1], [8], [0.1], [2_000_000],
                                           16, None, [dict(recycle=8)])]
    assert scale_sweep.goals(runs) == {"tail_fct_ratio_mrc_fattree1024_degraded": 1.5}


def test_the_goal_is_the_median_over_its_seeds_with_the_worst_beside_it():
    """On SRv6 routes MRC alone, with its what-ifs and goal seeds; on ECMP routes every
    transport once a state, each figure named for its routing."""
    tasks = scale_sweep.tasks_for(["fattree"], ["mrc", "spray"], [1], [0, 8], [0.1], [1000],
                                  16, None, [dict(avoid_slow=True)], goal_seeds=(1, 2, 3),
                                  routings=("srv6", "ecmp"))
    assert sorted((t.transport, t.run.routing, t.seed, t.run.degraded, t.run.avoid_slow)
                  for t in tasks) == [
        ("mrc", "ecmp", 1, 0, False), ("mrc", "ecmp", 1, 8, False),
        ("mrc", "srv6", 1, 0, False), ("mrc", "srv6", 1, 8, False), ("mrc", "srv6", 1, 8, True),
        ("mrc", "srv6", 2, 8, False), ("mrc", "srv6", 3, 8, False),
        ("spray", "ecmp", 1, 0, False), ("spray", "ecmp", 1, 8, False)]
    tails = {1: 1.5, 2: 1.3, 3: 1.4}
    runs = [{"task": t.__dict__ | {"run": t.run.__dict__ | {"size": 2_000_000}}, "error": None,
             "tail_over_ideal": 9.0 if t.run.whatif() else
             tails[t.seed] + (t.transport == "spray") + 0.5 * (t.run.routing == "ecmp")}
            for t in tasks]
    assert scale_sweep.goals(runs) == {
        "tail_fct_ratio_mrc_fattree1024": 1.5, "tail_fct_ratio_mrc_fattree1024_ecmp": 2.0,
        "tail_fct_ratio_spray_fattree1024_ecmp": 3.0,
        "tail_fct_ratio_mrc_fattree1024_degraded": 1.4,
        "tail_fct_ratio_mrc_fattree1024_degraded_worst": 1.5,
        "tail_fct_ratio_mrc_fattree1024_degraded_ecmp": 2.0,
        "tail_fct_ratio_spray_fattree1024_degraded_ecmp": 3.0}


def test_the_bound_leaves_out_every_ev_whose_path_crosses_a_slow_link():
    """``avoid_slow`` is no NIC's rule but a bound: the profiles keep only EVs whose route
    misses the degraded links, and without it some writes into pod 0 have such EVs."""
    def crossing(r):
        pairs = scale_model.permutation(r.hosts(), 1)
        _, net, run = scale_model._fattree_system(r, "mrc", 1, pairs,
                                                  scale_model._fattree_config(r))
        slow = set(net.core_downlinks(0, 0)[:r.degraded])
        evs = {src: run.nics[src].tx[0].spray.evs for src, _ in pairs}
        return (sum(not slow.isdisjoint(net.route(src, dst, e, 0))
                    for src, dst in pairs for e in evs[src]),
                sum(len(v) for v in evs.values()))
    r = scale_model.FatTreeRun(k=4, size=50_000, degraded=2, evs=32)
    assert crossing(r)[0] > 0 and crossing(r)[1] == 16 * 32
    bound, kept = crossing(replace(r, avoid_slow=True))
    assert bound == 0 and kept < 16 * 32


def test_random_spraying_ignores_ev_health():
    sp = Spray(list(range(8)), [0] * 8, list(range(8)), SprayMode.RANDOM, random.Random(2),
               health=False)
    sp.update(3, EvState.ASSUMED_BAD)
    assert sp.bad() == [] and 3 in {sp.pick([0]) for _ in range(100)}


def test_the_receivers_sacks_are_the_reorder_trackers():
    """Every arrival SACKed (coalesce 1), in a shuffled order with duplicates: each SACK's
    cumulative PSN, offset and bitmap are what rx_model's reorder tracker gives."""
    sim = Sim()
    net, layout = _leafspine(sim)
    cfg = NicConfig(coalesce=1, window=256, nic_delay_ns=0)
    nic = ScaleNic(sim, net, 1, 2, {}, {}, transport("mrc"), cfg, 1, layout=layout)
    replies = []
    net.send = replies.append              # what the NIC sends, as it sends it
    ref = ReorderModel(256)
    ref.init(0, 0)
    rng = random.Random(3)
    order = list(range(200))
    rng.shuffle(order)
    order += rng.sample(range(200), 20)            # duplicates
    order = order[:150] + sorted(order[150:])
    for i, psn in enumerate(order):
        sim.at(i * 1000.0, nic._take, Packet(DATA, 0, 1, 0, psn, 0, 1200))
    sim.run(until=len(order) * 1000.0)
    assert len(replies) == len(order)
    for psn, got in zip(order, replies, strict=True):
        want = ref.arrive(0, psn)
        assert got.kind == ACK and got.psn == psn
        cack, off, bitmap, m, pr, _ = got.ack
        assert (cack, off, bitmap) == (want["cack"], want["sack_offset"], want["sack_bitmap"]), \
            f"PSN {psn}: model ({cack}, {off}, {bitmap:#x}), tracker {want}"
        assert m == wire.SackMark.NONE and pr == 0


def test_the_rtl_cases_run_on_the_model():
    """The comparison's link-down case: MRC sends fewer packets onto the dead path than blind
    spraying, and single-path RoCE the most; every write completes."""
    got = {t: scale_model.run_rtl_case("linkdown", t, 1) for t in ("mrc", "spray", "roce")}
    dead = {t: r["dead_path_packets"] for t, r in got.items()}
    assert 0 < dead["mrc"] < dead["spray"] < dead["roce"], dead
    assert got["mrc"]["fct_p99_us"] < got["roce"]["fct_p99_us"] / 5
    assert got["mrc"]["base_rtt_us"] == pytest.approx(12.112, abs=0.05)   # the RTL's ping


def test_packets_onto_dead_paths_are_those_sent_while_they_were_down():
    """The figure the model and the RTL comparison both report: a data packet counts if it
    left while its path was down, on a path that was down (an outage with no end lasts)."""
    layout = EvLayout(2, 4)
    ev = {(pl, sp): layout.make(pl, sp, 0x1234) for pl in range(2) for sp in range(4)}
    outages = [(10.0, 20.0, [(0, 1)]), (15.0, None, [(1, 3), (1, 2)])]
    sends = [(9.9, ev[0, 1]), (10.0, ev[0, 1]), (19.9, ev[0, 1]), (20.0, ev[0, 1]),
             (12.0, ev[1, 3]), (15.0, ev[1, 3]), (1e9, ev[1, 2]), (16.0, ev[0, 2])]
    assert scenarios.onto_dead_paths(layout, outages, sends) == 4
    assert scenarios.onto_dead_paths(layout, [], sends) == 0


def test_a_small_fat_tree_permutation_completes_on_every_transport():
    r = scale_model.FatTreeRun(k=4, size=100_000, degraded=2)
    for t in ("mrc", "spray", "roce"):
        out = scale_model.run_fattree(r, t, 1)
        assert len(out["fct_us"]) == 16
        assert out["fct_max_us"] >= out["ideal_us"] * 0.99
        # (k=4: 4 hosts a pod, each the destination of one write of the permutation)
        into, rest = out["into_pod0"], out["elsewhere"]
        assert (into["writes"], rest["writes"]) == (4, 12)
        assert max(into["max_over_ideal"], rest["max_over_ideal"]) == pytest.approx(
            out["tail_over_ideal"])
    with pytest.raises(ValueError, match="degraded"):
        scale_model.run_fattree(scale_model.FatTreeRun(k=4, degraded=3), "mrc", 1)


def test_a_sweep_runs_on_dask_with_progress():
    lines = []
    tasks = [scale_sweep.Task("fattree", t, 1, run=scale_model.FatTreeRun(k=4, size=50_000))
             for t in ("mrc", "roce")]
    runs = scale_sweep.sweep(tasks, workers=1, progress=lines.append)
    assert [r["task"]["transport"] for r in runs] == ["mrc", "roce"]
    assert all(r["error"] is None for r in runs)
    assert len(lines) == 2 and all("fattree16 healthy" in line for line in lines)


def test_a_sweep_runs_on_the_cluster_its_scheduler_names():
    from dask.distributed import LocalCluster
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster:
        task = scale_sweep.Task("fattree", "spray", 2, run=scale_model.FatTreeRun(k=4, size=50_000))
        runs = scale_sweep.sweep([task],
                                 scheduler=cluster.scheduler_address, progress=lambda line: None)
    assert runs[0]["error"] is None and runs[0]["seed"] == 2


@pytest.mark.parametrize("argv, message", [
    (["--ratios", "0"], "fractions"),
    (["--transports", "tcp"], "transports"),
    (["--what", "both"], "--what"),
    (["--k", "5"], "even"),
    (["--seeds", "x"], "seed"),
])
def test_bad_sweep_arguments_are_refused(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        scale_sweep.main(argv)
    assert e.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["fattree", "--ratio", "0"], "fraction"),
    (["fattree", "--k", "4", "--degraded", "5"], "Agg 0 has 2"),
    (["fattree", "--k", "7"], "even"),
    (["fattree", "--size", "0"], "at least 1 byte"),
    (["rtl", "bogus"], "no case"),
    (["fattree", "--recycle", "-1"], "recycle keeps 0 or more"),
    (["fattree", "--trim-rounds", "0"], "trim_rounds is 1 .. 15"),
    (["fattree", "--trim-rounds", "16"], "trim_rounds is 1 .. 15"),
    (["fattree", "--mark-rounds", "0"], "mark_rounds is 1 or more"),
    (["fattree", "--cwnd-bdp", "0"], "cwnd_bdp is above 0"),
    (["fattree", "--cwnd-bdp", "1.5"], "at most cwnd_max_bdp 1.25"),
    (["fattree", "--cwnd-max-bdp", "0.5"], "cwnd_max_bdp is 1 .. 4"),
    (["fattree", "--cwnd-max-bdp", "5"], "cwnd_max_bdp is 1 .. 4"),
    (["fattree", "--cc-md", "0"], "cc_md is 1 .. 15"),
    (["fattree", "--cc-fair", "65536"], "cc_fair is 0 .. 65535"),
])
def test_bad_model_arguments_are_refused(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        scale_model.main(argv)
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_the_tolerances_say_what_agrees():
    assert scale_sweep.within("goodput_gbps", 10.9, 10.0)
    assert not scale_sweep.within("goodput_gbps", 11.1, 10.0)
    assert scale_sweep.within("retransmissions", 25, 10)          # within 20
    assert not scale_sweep.within("retransmissions", 200, 100)    # beyond half
    assert scale_sweep.within("victim_share", 0.88, 0.97)
