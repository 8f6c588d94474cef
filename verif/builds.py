"""The simulation builds every testbench, bench and demo shares: one name and parameter set per
configuration, so each is built by Verilator once and reused by all of them."""

from mrcnic.boards.addresses import BOARD_ADDRESSES, BOARD_B_ADDRESSES
from mrcnic.hdl.header_parser import HeaderParser
from mrcnic.hdl.icrc_checker import IcrcChecker
from mrcnic.hdl.icrc_inserter import IcrcInserter
from mrcnic.hdl.nic import Nic
from mrcnic.hdl.register_bank import RegisterBank
from mrcnic.hdl.rx_front import RxFront
from mrcnic.verif import harness
from mrcnic.verif.prebuilt import Prebuilt
from mrcnic.verif.toplevel import AxisTop

PARSER_MAX_SEGMENTS = 4
PARSER_MAX_FRAME = 2048


def icrc_inserter(width):
    return harness.build(lambda width: AxisTop(IcrcInserter(width)), {"width": width},
                         f"icrc_inserter_w{width}")


def icrc_checker(width):
    return harness.build(lambda width: AxisTop(IcrcChecker(width)), {"width": width},
                         f"icrc_checker_w{width}")


def header_parser(width):
    return harness.build(lambda **kw: AxisTop(HeaderParser(**kw)),
                         {"width": width, "max_segments": PARSER_MAX_SEGMENTS,
                          "max_frame": PARSER_MAX_FRAME}, f"header_parser_w{width}")


#: The register bank's build: its build parameters and the limits they set.
BANK_CONSTANTS = {"global.data_width": 64, "global.planes": 2, "global.qps": 4}
BANK_LIMITS = {"qp.write": 3, "ev.index": 15}
BANK_PLANES = BANK_CONSTANTS["global.planes"]
#: read a cycle late, as the NIC reads its EV table's block RAM
BANK_LATE = ("ev.entry",)


def register_bank():
    return harness.build(
        lambda constants, limits, planes, late: AxisTop(RegisterBank(constants, limits,
                                                                     planes=planes, late=late)),
        {"constants": BANK_CONSTANTS, "limits": BANK_LIMITS, "planes": BANK_PLANES,
         "late": BANK_LATE},
        "register_bank")


def mgmt_bank():
    """The management port on a register bank (verif/mgmt_bank.py), at 64 bits."""
    from mrcnic.verif.mgmt_bank import MgmtBank
    return harness.build(lambda **kw: AxisTop(MgmtBank(**kw)),
                         {"width": 64, "constants": BANK_CONSTANTS, "limits": BANK_LIMITS},
                         "mgmt_bank_w64")


def board_pair(planes=2):
    """Two board NICs (verif/board_pair.py) in the boards' NIC configuration: ``a`` at
    BOARD_ADDRESSES, ``b`` at BOARD_B_ADDRESSES."""
    from mrcnic.boards.synth import BOARD_NIC
    from mrcnic.verif.board_pair import BoardPair, pair_domains
    return harness.build(
        lambda common, a, b: AxisTop(BoardPair(common, a, b),
                                     domains=pair_domains(common["planes"])),
        {"common": {"width": 64, "planes": planes, "nic": BOARD_NIC, "mem_size": 1 << 16,
                    "max_frame": BOARD_NIC["max_frame"]},
         "a": BOARD_ADDRESSES, "b": BOARD_B_ADDRESSES}, f"board_pair_p{planes}")


#: The NIC configuration the tests, the bench and the demo share.
NIC_CONFIG = dict(qps=4, evs=16, planes=2, spines=4, templates=4, max_usids=14, max_frame=4400)


def nic(width, **config):
    """The NIC at ``width``, in NIC_CONFIG with ``config`` changing any of it."""
    unknown = set(config) - set(NIC_CONFIG)
    if unknown:
        raise ValueError(f"no NIC parameter(s) {sorted(unknown)}")
    return harness.build(lambda **kw: AxisTop(Prebuilt(Nic, {**kw, "backups": 2}, "mrc_nic")),
                         {"width": width, **NIC_CONFIG, **config}, f"nic_w{width}")


def nic_system(width, nics=2, **config):
    """``nics`` NICs at ``width`` in one simulation (verif/nic_system.py), each in NIC_CONFIG
    with ``config`` changing any of it."""
    from mrcnic.verif.nic_system import NicSystem
    unknown = set(config) - set(NIC_CONFIG) - {"window"}
    if unknown:
        raise ValueError(f"no NIC parameter(s) {sorted(unknown)}")
    return harness.build(lambda **kw: AxisTop(NicSystem(**kw, backups=2)),
                         {"width": width, "nics": nics, **NIC_CONFIG, **config},
                         f"nics{nics}_w{width}")


#: The full-size incast: eight NICs, each with a QP and a template for every other. Four NICs
#: (a 3:1 incast) fit NIC_CONFIG, and so share the two-NIC system's NIC module.
INCAST_NICS = 8
INCAST_CONFIG = dict(qps=8, templates=8)


def incast_config(nics: int) -> dict:
    """What an incast of ``nics`` NICs changes of NIC_CONFIG: a QP and a template for every
    other NIC (QP 2 is the probe QP)."""
    return {} if nics <= min(NIC_CONFIG["templates"], NIC_CONFIG["qps"]) else INCAST_CONFIG


def incast_system(width, nics=INCAST_NICS):
    return nic_system(width, nics, **incast_config(nics))


#: The reorder window the NIC is built with by default, which the system testbench is told.
SYSTEM_WINDOW = 256


def system_params(width, scenario, seed, options=None, **extra):
    """The system testbench's parameters (verif/tb_system.py) for ``scenario`` on the build
    :func:`nic_system` (or :func:`incast_system`, for the incast) makes at ``width``;
    ``extra`` adds to them or changes any (e.g. the demo's planes and spines)."""
    options = options or {}
    config = incast_config(options.get("hosts", INCAST_NICS)) if scenario == "incast" else {}
    return {"width": width, **NIC_CONFIG, **config, "window": SYSTEM_WINDOW,
            "scenario": scenario, "seed": seed, "options": options, **extra}


#: The RX front end's configuration, shared by its test and the bench: frames up to 4096 bytes of
#: payload under SRv6 with an SRH.
RX_FRONT_CONFIG = dict(planes=2, max_frame=4400, timeout=64, max_segments=4)


def rx_front(width):
    return harness.build(lambda **kw: AxisTop(RxFront(**kw)), {"width": width, **RX_FRONT_CONFIG},
                         f"rx_front_w{width}")


#: The receive side's configuration, shared by its tests and the bench.
RX_CONFIG = dict(planes=2, qps=4, window=256, messages=512, max_frame=4400, timeout=64,
                 max_segments=4)


def rx(width):
    from mrcnic.verif.rx_dut import RxDut
    return harness.build(lambda **kw: AxisTop(RxDut(**kw)), {"width": width, **RX_CONFIG},
                         f"rx_w{width}")
