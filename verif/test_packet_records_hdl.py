"""The packet records under Verilator."""

from mrcnic.hdl.packet_records import PacketRecords
from mrcnic.verif import harness
from mrcnic.verif.toplevel import AxisTop


def test_packet_records(seed_for, volume):
    params = {"qps": 3, "evs": 4, "window": 8}
    b = harness.build(lambda qps, evs, window: AxisTop(PacketRecords(qps, evs, window)),
                      params, "packet_records")
    harness.run(b, "mrcnic.verif.tb_packet_records",
                {"seed": seed_for("records"), **params, "cycles": 4000 * volume})
