"""A board NIC built without the NIC (``make bitstream``'s bring-up configuration) at its RGMII
pins under Verilator: reachable on port 0, its own registers read, the NIC's refused, port 1
counting what it receives (verif/tb_board_bringup.py)."""

from mrcnic.boards.addresses import BOARD_ADDRESSES
from mrcnic.verif import harness
from mrcnic.verif.board_pins import BoardPins, board_domains
from mrcnic.verif.toplevel import AxisTop

MEM_SIZE = 1 << 16


def test_bringup_board_answers_at_its_pins():
    b = harness.build(lambda **kw: AxisTop(BoardPins(**kw), domains=board_domains(2)),
                      {"width": 64, "planes": 2, "nic": None, "mem_size": MEM_SIZE,
                       "max_frame": 2048, **BOARD_ADDRESSES}, "board_bringup")
    harness.run(b, "mrcnic.verif.tb_board_bringup",
                {"mem_size": MEM_SIZE, "mac": BOARD_ADDRESSES["mac"],
                 "ipv4": BOARD_ADDRESSES["ipv4"]})
