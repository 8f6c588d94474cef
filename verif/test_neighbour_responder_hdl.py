"""The neighbour responder under Verilator, at the boards' 64 bits."""

from mrcnic.hdl.neighbour_responder import NeighbourResponder
from mrcnic.verif import harness
from mrcnic.verif.toplevel import AxisTop


def test_neighbour_responder():
    b = harness.build(lambda width: AxisTop(NeighbourResponder(width)), {"width": 64},
                      "neighbour_responder_w64")
    harness.run(b, "mrcnic.verif.tb_neighbour_responder")
