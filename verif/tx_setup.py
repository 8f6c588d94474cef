"""Configuring a simulated NIC the way its host does, through the register map with the
driver: uSID templates, QP contexts and EV profiles, with the host-memory model behind it.
Shared by the TX testbench, the TX line-rate bench and the demo."""

from __future__ import annotations

from dataclasses import dataclass, field

from scapy.compat import raw
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from mrcnic import driver
from mrcnic import layers as L
from mrcnic.evmap import EvLayout, UsidTemplate, ev_split
from mrcnic.hdl.qp_context import MTU_CODES, QpState, SrMode
from mrcnic.hdl.retransmit_tracker import RelMode
from mrcnic.regclient import AsyncRegisterClient
from mrcnic.verif.host_memory import HostMemory
from mrcnic.verif.packets import encapsulate
from mrcnic.verif.tbkit import CsrBus, setup
from mrcnic.verif.tx_model import QueuePair
from mrcnic.wire import IPPROTO_UDP

__all__ = ["TxConfig", "configure", "BASE", "SRC_MAC", "SRC_IP", "OUTER_SRC", "sent_ev",
           "reference_frame"]

BASE = 0x1_0000_0000
SRC_MAC, SRC_IP = "02:00:00:00:00:01", (0xFD00 << 112) | 1
OUTER_SRC = "fd00::1"


@dataclass
class TxConfig:
    layout: EvLayout
    mem: HostMemory
    templates: dict = field(default_factory=dict)
    qps: dict = field(default_factory=dict)
    modes: dict = field(default_factory=dict)
    profiles: dict = field(default_factory=dict)
    next_hops: dict = field(default_factory=dict)     # plane -> the MAC its frames go to
    regs: AsyncRegisterClient | None = None


async def configure(dut, p, rng, *, mtu_code=None, modes=None, not_ready=(), latency=(2, 10),
                    gap=0.1, receive=None, states=None, reliability=None,
                    congestion=None) -> TxConfig:
    """Resets the NIC and sets it up the way a host does, through its registers with the
    driver: addresses, uSID templates, QP contexts and EV profiles (``p`` holds the build
    parameters). ``receive`` ({qp: RxQp}) gives QPs their receive side (memory region, first
    PSN and MSN expected), mapped in host memory behind the NIC's write port too; ``states``
    ({qp: QpState}) overrides a QP's state. ``reliability`` ({mode, reorder, rto_min,
    rto_max, ...}, as :func:`driver.set_reliability`) sets the reliability engine; without
    ``mode`` it is OFF, as no peer answers what these tests send, and without
    ``status_interval`` the port status is sent only when a port changes. ``congestion``
    ({target_rtt, cwnd_init, ...}, as :func:`driver.set_congestion`) is set before any QP
    starts."""
    Q, E, P, S, T = (p[k] for k in ("qps", "evs", "planes", "spines", "templates"))
    layout = EvLayout(P, S)
    await setup(dut)
    dut.port_ready.value = (1 << P) - 1
    receive = receive or {}
    mem = HostMemory(dut, read="mem", write="rx_mem" if receive else None, rng=rng,
                     latency=latency, gap=gap)
    mem.map(BASE, 1 << 26)
    for r in receive.values():
        if r.mr_length:
            mem.map(r.mr_va, r.mr_length)
    cfg = TxConfig(layout, mem)
    regs = cfg.regs = AsyncRegisterClient(CsrBus(dut))

    info = await regs.run(driver.identify())
    assert (info["qps"], info["evs"], info["planes"]) == (Q, E, P), info
    await regs.run(driver.set_addresses(SRC_MAC, SRC_IP))
    if congestion:
        await regs.run(driver.set_congestion(**congestion))
    for t in range(T):
        hops = (3, 9, 14, 5)[t % 4]
        block, bits = ((0xFCBB, 16), (0xFCBBBB00, 32))[t // 2 % 2]      # F1616, F3216
        cfg.templates[t] = UsidTemplate(block, tuple(rng.randrange(0x20, 0x1000) & ~0xF
                                                     for _ in range(hops)), rng.randrange(hops),
                                        block_bits=bits)
        await regs.run(driver.write_template(t, cfg.templates[t]))
    # The last plane sends to a router port, the others to each QP's own destination.
    cfg.next_hops = {P - 1: "02:00:00:00:0e:01"}
    for pl, mac in cfg.next_hops.items():
        await regs.run(driver.set_plane_addresses(pl, next_hop=mac))
    modes = modes or (SrMode.USID, SrMode.USID_SRH, SrMode.PLAIN, SrMode.USID)
    for q in range(Q):
        code = rng.choice(sorted(MTU_CODES)) if mtu_code is None else mtu_code
        cfg.qps[q] = QueuePair(dqp=0x200 + q, src_mac=SRC_MAC, dst_mac=f"02:00:00:00:01:{q:02x}",
                               src_ip=SRC_IP, dst_ip=(0xFD00 << 112) | (0x100 + q),
                               mtu=MTU_CODES[code],
                               next_psn=(1 << 24) - 2 if q == 0 else rng.getrandbits(24),
                               msn=rng.getrandbits(16))
        cfg.modes[q] = modes[q % len(modes)]
        state = QpState.INIT if q in not_ready else QpState.RTS
        state = (states or {}).get(q, state)
        r = receive.get(q)
        rx = dict(rkey=r.rkey, mr_va=r.mr_va, mr_length=r.mr_length, rx_psn=r.rx_psn,
                  rx_msn=r.rx_msn) if r else {}
        await regs.run(driver.configure_qp(q, driver.QpConfig(
            dqp=cfg.qps[q].dqp, dst_mac=cfg.qps[q].dst_mac, dst_ip=cfg.qps[q].dst_ip,
            template=q % T, mtu=MTU_CODES[code], mode=cfg.modes[q],
            state=state, next_psn=cfg.qps[q].next_psn, msn=cfg.qps[q].msn, **rx)))
        # A full profile, EVs in random order: the driver puts each on its own plane's entries.
        evs = [layout.make(i % P, rng.randrange(S), rng.getrandbits(32)) for i in range(E)]
        rng.shuffle(evs)
        cfg.profiles[q] = await regs.run(driver.load_ev_profile(q, evs, layout))
    # The port status is repeated only where a test asks: a stray ERTH would be an unexpected
    # frame to every test that counts what the NIC sends.
    await regs.run(driver.set_reliability(**{"mode": RelMode.OFF, "status_interval": 0,
                                             **(reliability or {})}))
    assert await regs.read("global.bus_errors") == 0, "the driver's set-up was refused"
    await regs.run(driver.set_enabled(True))
    return cfg


def sent_ev(frame: bytes) -> int:
    """The EV a frame the TX pipeline sent carries (inner UDP source port and flow label)."""
    pkt = Ether(frame)
    inner = pkt.getlayer(IPv6, nb=2) if pkt[IPv6].nh != IPPROTO_UDP else pkt[IPv6]
    return (inner[UDP].sport << 16) | (inner.fl & 0xFFFF)


def reference_frame(want, frame: bytes, template, layout, mode, next_hops=None) -> bytes:
    """What the TX pipeline must send for the reference sender's packet ``want``, given the EV
    and TSETH timestamp it chose (read from ``frame``): the packet on that EV, encapsulated per
    ``mode``, ICRC included, to its plane's next hop if ``next_hops`` ({plane: MAC}) has one."""
    ev = sent_ev(frame)
    w = want.copy()
    w[UDP].sport, w[IPv6].fl = ev_split(ev)
    w[L.TSETH].tx_timestamp = Ether(frame)[L.TSETH].tx_timestamp
    w[L.BTH].icrc = None
    w = Ether(raw(w))
    if mode is not SrMode.PLAIN:
        w = encapsulate(w, template, layout, ev, src=OUTER_SRC,
                        force_srh=mode is SrMode.USID_SRH)
    hop = (next_hops or {}).get(layout.plane(ev))
    if hop is not None:
        w[Ether].dst = hop
    return raw(w)
