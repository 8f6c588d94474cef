"""The RGMII MAC under Verilator, at RGMII pins through DDR buffer models, against
cocotbext-eth's RGMII source and sink; the core clock at 250 MHz and at a board's 62.5 MHz."""

import pytest

from mrcnic.verif import harness
from mrcnic.verif.rgmii_pins import RgmiiPins
from mrcnic.verif.toplevel import AxisTop

# A send buffer smaller than the largest frame, so that cut-through (and its underrun) is reached.
BUILD = {"width": 64, "max_frame": 2000, "tx_depth": 64}


def _build():
    return harness.build(lambda **kw: AxisTop(RgmiiPins(**kw), domains=("eth_rx", "eth_tx")),
                         BUILD, "eth_mac_w64")


@pytest.mark.parametrize("core_ns", [4, 16])
def test_eth_mac(core_ns, seed_for, volume):
    harness.run(_build(), "mrcnic.verif.tb_eth_mac",
                {"seed": seed_for(core_ns), "core_ns": core_ns, "count": 40 * volume,
                 "max_frame": BUILD["max_frame"], "tx_depth": BUILD["tx_depth"]},
                tag=f"core{core_ns}")
