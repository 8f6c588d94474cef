"""A management port in front of a register bank: what a board's management path is, without
the NIC around the bank, for the management port's testbench."""

from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import Flow, In, Out

from mrcnic import mgmt
from mrcnic.hdl.management_port import MGMT_PORT_COUNTERS, ManagementPort
from mrcnic.hdl.register_bank import RegisterBank
from mrcnic.hdl.stream import PacketStream

__all__ = ["MgmtBank"]


class MgmtBank(wiring.Component):
    """:class:`ManagementPort` on the CSR bus of a :class:`RegisterBank` built with ``constants``
    and ``limits``. Its ports: the management port's streams, addresses and counters, and every
    port of the bank but its bus."""

    def __init__(self, width=64, constants=None, limits=None, clients=mgmt.BOARD_CLIENTS):
        self._port = ManagementPort(width, clients)
        self._bank = RegisterBank(constants, limits)
        bank = {name: member for name, member in self._bank.signature.members.items()
                if name != "bus"}
        super().__init__({"i": In(PacketStream(width)), "o": Out(PacketStream(width)),
                          "mac": In(48), "ipv4": In(32), "ipv6": In(128),
                          **{name: Out(1) for name in MGMT_PORT_COUNTERS}, **bank})

    @property
    def events(self):
        """The counters' event outputs, for the register bank to count."""
        return MGMT_PORT_COUNTERS

    def elaborate(self, platform):
        m = Module()
        m.submodules.port = port = self._port
        m.submodules.bank = bank = self._bank
        wiring.connect(m, port.bus, bank.bus)
        wiring.connect(m, wiring.flipped(self.i), port.i)
        wiring.connect(m, port.o, wiring.flipped(self.o))
        m.d.comb += [port.mac.eq(self.mac), port.ipv4.eq(self.ipv4), port.ipv6.eq(self.ipv6)]
        m.d.comb += [getattr(self, n).eq(getattr(port, n)) for n in MGMT_PORT_COUNTERS]
        for name, member in bank.signature.members.items():
            if name == "bus":
                continue
            ours, theirs = getattr(self, name), getattr(bank, name)
            if not member.is_port:
                wiring.connect(m, theirs, wiring.flipped(ours))
            elif member.flow == Flow.Out:
                m.d.comb += ours.eq(theirs)
            else:
                m.d.comb += theirs.eq(ours)
        return m
