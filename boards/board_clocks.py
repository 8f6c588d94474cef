"""A board's clocks from its oscillator: one ECP5 PLL (EHXPLLL) making the 125 MHz RGMII
transmit clock, the same shifted for the TXC pin, and the core clock."""

from __future__ import annotations

from amaranth import Instance, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["BoardClocks", "core_clocks", "pll_plan"]

TX_HZ = 125_000_000             # RGMII at 1 Gb/s
# The EHXPLLL's limits (ECP5 sysCLOCK guide): VCO, phase detector, dividers.
VCO_HZ = (400e6, 800e6)
PFD_HZ = (3.125e6, 400e6)
MAX_DIV = 128


def _vcos():
    """The VCO frequencies the transmit clock divides exactly from, lowest first."""
    return [TX_HZ * k for k in range(1, MAX_DIV + 1) if VCO_HZ[0] <= TX_HZ * k <= VCO_HZ[1]]


def core_clocks(lo=10e6, hi=TX_HZ) -> list[float]:
    """Every core clock the PLL makes exactly beside the transmit clock, from ``lo`` to ``hi``."""
    return sorted({vco / d for vco in _vcos() for d in range(1, MAX_DIV + 1)
                   if lo <= vco / d <= hi})


def pll_plan(osc_hz: float, core_hz: float, tx_phase: int) -> dict:
    """The EHXPLLL's dividers and phases: the transmit clock (CLKOP, also the feedback) at
    125 MHz, CLKOS the same ``tx_phase`` degrees later, CLKOS2 at ``core_hz``. A ValueError
    says why not, naming the core clocks that can be had."""
    if not 0 <= tx_phase < 360:
        raise ValueError(f"the TX clock's phase must be 0 .. 359 degrees, not {tx_phase!r}")
    for vco in _vcos():
        core_div = round(vco / core_hz)
        if not 1 <= core_div <= MAX_DIV or abs(vco / core_div - core_hz) > 1:
            continue
        tx_div = int(vco // TX_HZ)
        # Feedback from CLKOP: the phase detector compares osc / CLKI_DIV with TX / CLKFB_DIV.
        for in_div in range(1, MAX_DIV + 1):
            pfd = osc_hz / in_div
            fb_div = TX_HZ / pfd
            if PFD_HZ[0] <= pfd <= PFD_HZ[1] and fb_div == int(fb_div) and 1 <= fb_div <= 80:
                # Phases count eighths of a VCO period; an output's zero is its divider - 1.
                eighths = round(tx_phase / 360 * tx_div * 8)
                return {"vco": vco, "CLKI_DIV": in_div, "CLKFB_DIV": int(fb_div),
                        "CLKOP_DIV": tx_div, "CLKOP_CPHASE": tx_div - 1, "CLKOP_FPHASE": 0,
                        "CLKOS_DIV": tx_div, "CLKOS_CPHASE": tx_div - 1 + eighths // 8,
                        "CLKOS_FPHASE": eighths % 8,
                        "CLKOS2_DIV": core_div, "CLKOS2_CPHASE": core_div - 1,
                        "CLKOS2_FPHASE": 0,
                        "tx_phase": eighths * 360 / (tx_div * 8), "core_hz": vco / core_div}
        raise ValueError(f"no PLL set-up makes {TX_HZ / 1e6:g} MHz from a {osc_hz / 1e6:g} MHz "
                         "oscillator")
    near = sorted(core_clocks(), key=lambda f: abs(f - core_hz))[:6]
    raise ValueError(f"the PLL cannot make a {core_hz / 1e6:g} MHz core clock beside the "
                     f"125 MHz TX clock; near it: "
                     f"{', '.join(f'{f / 1e6:g}' for f in sorted(near))} MHz")


class BoardClocks(wiring.Component):
    """The PLL, from the oscillator ``osc`` (``osc_hz``), and the clocks it makes, each
    constrained for nextpnr:

    * ``core``, the core clock, at ``core_hz``;
    * ``tx``, the RGMII transmit clock (125 MHz), which the MACs' TX side and the TXD/TX_CTL
      output registers run in;
    * ``txc``, the same clock ``tx_phase`` degrees later, for the TXC pin's output register
      (RGMII's receiver samples TXD at TXC's edges: 90 degrees centres them).

    ``locked`` is the PLL's lock: the board top holds its domains in reset until it is set.

    Attributes
    ----------
    osc : In(1);  core, tx, txc, locked : Out(1)
    """

    def __init__(self, osc_hz: float, core_hz: float, tx_phase: int):
        self._plan = pll_plan(osc_hz, core_hz, tx_phase)
        self._osc_hz = osc_hz
        super().__init__({"osc": In(1), "core": Out(1), "tx": Out(1), "txc": Out(1),
                          "locked": Out(1)})

    @property
    def plan(self) -> dict:
        return dict(self._plan)

    @property
    def core_hz(self) -> float:
        return self._plan["core_hz"]

    def elaborate(self, platform):
        m = Module()
        plan = self._plan
        tx, txc, core = self.tx, self.txc, self.core
        outputs = {name: {"ENABLE": "ENABLED", **{k: plan[f"{name}_{k}"]
                                                  for k in ("DIV", "CPHASE", "FPHASE")}}
                   for name in ("CLKOP", "CLKOS", "CLKOS2")}
        m.submodules.pll = Instance(
            "EHXPLLL",
            # nextpnr derives the outputs' constraints from these; the filter settings are the
            # ones Lattice's tools choose for this PLL.
            a_FREQUENCY_PIN_CLKI=str(self._osc_hz / 1e6),
            a_FREQUENCY_PIN_CLKOP=str(TX_HZ / 1e6), a_FREQUENCY_PIN_CLKOS=str(TX_HZ / 1e6),
            a_FREQUENCY_PIN_CLKOS2=str(plan["core_hz"] / 1e6),
            a_ICP_CURRENT="12", a_LPF_RESISTOR="8", a_MFG_ENABLE_FILTEROPAMP="1",
            a_MFG_GMCREF_SEL="2",
            p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
            p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA", p_OUTDIVIDER_MUXB="DIVB",
            p_OUTDIVIDER_MUXC="DIVC", p_OUTDIVIDER_MUXD="DIVD",
            p_CLKI_DIV=plan["CLKI_DIV"], p_CLKFB_DIV=plan["CLKFB_DIV"], p_FEEDBK_PATH="CLKOP",
            **{f"p_{name}_{k}": v for name, params in outputs.items() for k, v in params.items()},
            p_CLKOS3_ENABLE="DISABLED",
            i_CLKI=self.osc, i_CLKFB=tx, i_RST=0, i_STDBY=0, i_PHASESEL0=0, i_PHASESEL1=0,
            i_PHASEDIR=0, i_PHASESTEP=0, i_PHASELOADREG=0, i_PLLWAKESYNC=0,
            i_ENCLKOP=0, i_ENCLKOS=0, i_ENCLKOS2=0, i_ENCLKOS3=0,
            o_CLKOP=tx, o_CLKOS=txc, o_CLKOS2=core, o_LOCK=self.locked)
        if platform is not None:
            platform.add_clock_constraint(core, plan["core_hz"])
            platform.add_clock_constraint(tx, TX_HZ)
            platform.add_clock_constraint(txc, TX_HZ)
        return m
