"""Two board NICs in one simulation, each at its pins (verif/board_pins.py), for the test that
cables them to each other: ports named ``a_<port>`` and ``b_<port>``."""

from amaranth import Module
from amaranth.hdl import DomainRenamer
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from mrcnic.hdl.nic import Nic
from mrcnic.verif.board_pins import BoardPins, board_domains
from mrcnic.verif.prebuilt import Prebuilt

__all__ = ["BoardPair", "pair_domains"]


def pair_domains(planes: int) -> tuple[str, ...]:
    return tuple(f"{b}_{d}" for b in "ab" for d in board_domains(planes))


class BoardPair(wiring.Component):
    """Boards ``a`` and ``b``: :class:`BoardPins` each, ``a`` with the parameters ``common`` and
    ``a``, ``b`` with ``common`` and ``b`` (their management addresses differ). Each board's
    clock domains are prefixed too: ``a_eth0_rx`` and so on; the core clock is shared."""

    def __init__(self, common: dict, a: dict, b: dict):
        # One NIC module for both boards: Verilator compiles it once.
        def make_nic(**params):
            return Prebuilt(Nic, params, "mrc_nic")
        self._boards = {name: BoardPins(**common, **addresses, make_nic=make_nic)
                        for name, addresses in (("a", a), ("b", b))}
        self._planes = common.get("planes", 2)
        members = {}
        for name, board in self._boards.items():
            members |= {f"{name}_{n}": m for n, m in board.signature.members.items()}
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        for name, board in self._boards.items():
            renamed = DomainRenamer({d: f"{name}_{d}" for d in board_domains(self._planes)})
            m.submodules[name] = renamed(board)
            for n, member in board.signature.members.items():
                ours, theirs = getattr(self, f"{name}_{n}"), getattr(board, n)
                m.d.comb += ours.eq(theirs) if member.flow == Out else theirs.eq(ours)
        return m
