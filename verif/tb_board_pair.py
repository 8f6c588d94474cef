"""cocotb test of two board NICs cabled to each other, set up by a Linux host through their
management ports, running an MRC write that the receiving board's checker verifies.

Port 0 of each board is bridged to a TAP on a Linux bridge in the host's namespace (a real
switch, carrying both the host's management traffic and plane 0's MRC frames); port 1 is a
cable straight from one board to the other (cocotbext-eth's RGMII sink on one end, its source on
the other). Boards of one port (``planes`` 1, as the ECPIX-5) have no cable: their MRC frames
cross the bridge. The host's driver (RegisterClient over MgmtClient, in a thread) configures
both NICs, fills the source region with the pattern generator, posts the write, waits for its
completion and runs the checker on the destination. Parameters: ``netns``, ``taps``,
``planes`` (2 unless said).
"""

from __future__ import annotations

import ipaddress
import random

import cocotb
from cocotbext.eth import GmiiFrame

from mrcnic import driver
from mrcnic.enums import RelMode
from mrcnic.evmap import EvLayout, UsidTemplate
from mrcnic.regclient import RegisterClient
from mrcnic.verif.builds import BOARD_ADDRESSES, BOARD_B_ADDRESSES
from mrcnic.verif.fabric import BLOCK, BLOCK_BITS, host_usid, nic_ip, nic_mac, sid
from mrcnic.verif.linux_fabric import open_tap
from mrcnic.verif.tb_board import HostLink, Wires, client, phy_models, run_beside, start
from mrcnic.verif.tbkit import params
from mrcnic.wire import ETH_FCS_BYTES, ETH_MIN_FRAME

SPINES = 4
QP, MTU = 0, 1024
SRC, DST, REGION = 0x1000, 0x8000, 0x8000     # the source region on a, b's memory region
LENGTH = 10_000


class Cable:
    """Port ``port`` of board ``a`` to the same port of board ``b``, both ways, frame by frame
    (the RGMII sink on one end hands each frame to the source on the other)."""

    def __init__(self, dut, port: int):
        self.ends = [phy_models(dut, f"{b}_", port) for b in "ab"]
        self.frames = [0, 0]
        self.bad_fcs = 0

    def step(self) -> None:
        for k, (_, out) in enumerate(self.ends):
            into, _ = self.ends[1 - k]
            while not out.empty():
                f = out.recv_nowait()
                if not f.check_fcs():
                    self.bad_fcs += 1
                    continue
                into.send_nowait(GmiiFrame.from_payload(
                    bytes(f.get_payload()), min_len=ETH_MIN_FRAME - ETH_FCS_BYTES))
                self.frames[k] += 1


def configure(regs: RegisterClient, me: int, peer: int, layout: EvLayout, seed: int) -> None:
    """NIC ``me`` (0: a, 1: b) with its QP talking to ``peer``'s, every EV straight to it."""
    rng = random.Random(f"{seed}-{me}")
    planes = layout.planes
    regs.run(driver.identify())
    regs.run(driver.set_addresses(nic_mac(me), nic_ip(me)))
    for pl in range(planes):
        # No switch routes: each frame goes to the peer's MAC on the peer's own SID.
        regs.run(driver.set_plane_addresses(pl, next_hop=0,
                                            sid=sid(host_usid(pl, me), BLOCK, BLOCK_BITS)))
    regs.run(driver.write_template(0, UsidTemplate(BLOCK, (0x30 + peer,), spine_index=0,
                                                   block_bits=BLOCK_BITS)))
    psn = [random.Random(f"{seed}-psn-{k}").getrandbits(24) for k in range(2)]
    msn = [random.Random(f"{seed}-msn-{k}").getrandbits(16) for k in range(2)]
    regs.run(driver.configure_qp(QP, driver.QpConfig(
        dqp=QP, dst_mac=nic_mac(peer), dst_ip=nic_ip(peer), template=0, mtu=MTU,
        next_psn=psn[me], msn=msn[me], rkey=0x100 + me, mr_va=DST, mr_length=REGION,
        rx_psn=psn[peer], rx_msn=msn[peer])))
    evs = regs.read("global.evs")
    regs.run(driver.load_ev_profile(QP, [layout.make(i % planes, 0, rng.getrandbits(32))
                                         for i in range(evs)], layout))
    regs.run(driver.set_reliability(RelMode.SELECTIVE))
    regs.run(driver.route_completions(send=True, recv=False))
    regs.run(driver.set_enabled(True))


@cocotb.test()
async def two_boards_run_a_write_the_checker_verifies(dut):
    p = params()
    netns, taps = p["netns"], p["taps"]
    seed = p.get("seed", 1)
    planes = p.get("planes", 2)
    await start(dut, boards=("a_", "b_"), planes=planes)
    host = [HostLink(dut, open_tap(netns, tap), board) for tap, board in zip(taps, ("a_", "b_"),
                                                                               strict=True)]
    # A board of one port has no cable: its MRC frames cross the host's bridge with the rest.
    cable = Cable(dut, 1) if planes > 1 else None
    wires = Wires(*host, *([cable] if cable else []))
    addrs = [str(ipaddress.IPv4Address(x["ipv4"])) for x in (BOARD_ADDRESSES, BOARD_B_ADDRESSES)]
    regs = [RegisterClient(client(a, netns, timeout=0.5)) for a in addrs]
    layout = EvLayout(planes, SPINES)
    pattern_seed = random.Random(seed).getrandbits(32)

    def setup():
        for me in range(2):
            configure(regs[me], me, 1 - me, layout, seed)
    await run_beside(dut, wires, setup)

    def write():
        a, b = regs
        for reg, addr in ((a, SRC), (b, DST)):
            block = "gen" if reg is a else "chk"
            reg.write(f"{block}.addr", addr)
            reg.write(f"{block}.length", LENGTH)
            reg.write(f"{block}.seed", pattern_seed)
        a.command("gen.start", 1)
        assert a.read("gen.error") == 0
        a.run(driver.post_write(QP, 0x77, SRC, DST, 0x100 + 1, LENGTH))
        for _ in range(2000):
            done = a.run(driver.poll_cq(4))
            if done:
                break
        else:
            raise AssertionError("no completion for the write")
        b.command("chk.start", 1)
        return (done, b.read("chk.error"), b.read("chk.bad"),
                {n: b.read(f"rx.outcome_{n}") for n in ("placed", "duplicate")})
    done, error, bad, outcomes = await run_beside(dut, wires, write)
    assert [(c.wr_id, c.status.name) for c in done] == [(0x77, "OK")], done
    assert (error, bad) == (0, 0), f"the checker found {bad} bytes that differ (error {error})"
    packets = -(-LENGTH // MTU)
    assert outcomes["placed"] == packets, outcomes
    if cable:
        assert cable.frames[0] > 0, "nothing went over port 1: the write did not spray"
        assert cable.bad_fcs == 0
    assert all(h.bad_fcs == 0 for h in host)
