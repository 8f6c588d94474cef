"""cocotb test of a board NIC built without the NIC (the ``bringup`` configuration of
``make bitstream``) at its RGMII pins: scapy-built management requests into port 0 are answered
for the board's registers and refused (BAD_ADDRESS) for the NIC's, which it does not have; a
frame into port 1 is taken, counted and answers nothing. Parameters: ``mem_size``, and the
board's ``mac`` and ``ipv4``."""

from __future__ import annotations

import cocotb
from cocotb.triggers import ClockCycles, with_timeout
from cocotbext.eth import GmiiFrame
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from mrcnic import mgmt, regmap
from mrcnic.verif.tb_board import phy_models, start
from mrcnic.verif.tbkit import params
from mrcnic.wire import ETH_FCS_BYTES, ETH_MIN_FRAME

HOST_MAC, HOST_IP, HOST_PORT = "02:00:00:00:00:99", "192.168.7.99", 40_000


def _mac(value: int) -> str:
    return ":".join(f"{b:02x}" for b in value.to_bytes(6, "big"))


def _ipv4(value: int) -> str:
    return ".".join(str(b) for b in value.to_bytes(4, "big"))


@cocotb.test()
async def a_bringup_board_answers_for_its_registers_only(dut):
    p = params()
    await start(dut)
    port0_in, port0_out = phy_models(dut, "", 0)
    port1_in, port1_out = phy_models(dut, "", 1)
    seq = 0

    async def read(path: str) -> mgmt.Packet:
        nonlocal seq
        seq += 1
        r = regmap.by_name(path)
        request = mgmt.Packet(mgmt.Opcode.READ, seq, r.offset, r.width, -(-r.width // 32))
        frame = (Ether(src=HOST_MAC, dst=_mac(p["mac"])) / IP(src=HOST_IP, dst=_ipv4(p["ipv4"]))
                 / UDP(sport=HOST_PORT, dport=mgmt.DEFAULT_PORT) / Raw(request.encode()))
        await port0_in.send(GmiiFrame.from_payload(bytes(frame),
                                                   min_len=ETH_MIN_FRAME - ETH_FCS_BYTES))
        got = await with_timeout(port0_out.recv(), 200, "us")
        assert got.check_fcs()
        reply = Ether(bytes(got.get_payload()))
        assert (reply[Ether].dst, reply[IP].dst, reply[UDP].dport) == \
            (HOST_MAC, HOST_IP, HOST_PORT), reply.summary()
        answer = mgmt.decode(reply[Raw].load)
        assert answer.reply and answer.seq == seq and answer.addr == r.offset, answer
        return answer

    answer = await read("board.mem_size")
    assert (answer.status, answer.value) == (mgmt.Status.OK, p["mem_size"]), answer
    # The NIC's registers are not there: the ROM says so, as for a word the map does not have.
    for path in ("global.id", "global.scratch", "wq.laddr"):
        answer = await read(path)
        assert (answer.status, answer.data) == (mgmt.Status.BAD_ADDRESS, ()), (path, answer)

    # Port 1 takes a frame, counts it and answers nothing.
    frame = Ether(src=HOST_MAC, dst="ff:ff:ff:ff:ff:ff", type=0x88B5) / Raw(bytes(range(100)))
    await port1_in.send(GmiiFrame.from_payload(bytes(frame)))
    await ClockCycles(dut.clk, 400)
    assert (await read("mac.rx_frames_p1")).value == 1
    assert (await read("mac.rx_bytes_p1")).value == len(frame)
    assert (await read("mac.tx_frames_p1")).value == 0
    assert port1_out.empty()
    # Every request was carried out; those for absent words answered, not dropped.
    assert (await read("mgmt.executed")).value == 7
    assert (await read("mgmt.dropped")).value == 0

