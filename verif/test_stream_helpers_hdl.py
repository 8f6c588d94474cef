"""The register slice and the FIFO under Verilator, at 64 and 512 bits."""

import pytest

from mrcnic.hdl.stream import PacketFIFO, PacketRegSlice
from mrcnic.verif import harness
from mrcnic.verif.toplevel import AxisTop


@pytest.mark.parametrize("width", [64, 512])
def test_packet_reg_slice(width, seed_for, volume):
    b = harness.build(lambda width: AxisTop(PacketRegSlice(width)), {"width": width},
                      f"packet_reg_slice_w{width}")
    harness.run(b, "mrcnic.verif.tb_stream_helpers", {"seed": seed_for(width), "count": 200 * volume})


@pytest.mark.parametrize("width", [64, 512])
def test_packet_fifo(width, seed_for, volume):
    b = harness.build(lambda width, depth: AxisTop(PacketFIFO(width, depth)),
                      {"width": width, "depth": 16}, f"packet_fifo_w{width}")
    harness.run(b, "mrcnic.verif.tb_stream_helpers", {"seed": seed_for(width + 3), "count": 200 * volume})
