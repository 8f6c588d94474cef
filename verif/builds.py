"""The simulation builds every testbench, bench and demo shares: one name and parameter set per
configuration, so each is built by Verilator once and reused by all of them."""

from mrcnic.hdl.header_parser import HeaderParser
from mrcnic.hdl.icrc_checker import IcrcChecker
from mrcnic.hdl.icrc_inserter import IcrcInserter
from mrcnic.hdl.register_bank import RegisterBank
from mrcnic.hdl.tx_pipeline import TxPipeline
from mrcnic.verif import harness
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


def register_bank(data_width=64, planes=2):
    consts = {"global.data_width": data_width, "global.planes": planes}
    return harness.build(lambda **kw: AxisTop(RegisterBank(constants=kw)), consts,
                         "register_bank")


#: The TX pipeline configuration the tests, the bench and the demo share.
TX_CONFIG = dict(qps=4, evs=16, planes=2, spines=4, templates=4, max_usids=14)


def tx_pipeline(width, **config):
    """The TX pipeline at ``width``, in TX_CONFIG with ``config`` changing any of it."""
    unknown = set(config) - set(TX_CONFIG)
    if unknown:
        raise ValueError(f"no TX pipeline parameter(s) {sorted(unknown)}")
    return harness.build(lambda **kw: AxisTop(TxPipeline(**kw, backups=2)),
                         {"width": width, **TX_CONFIG, **config}, f"tx_pipeline_w{width}")
