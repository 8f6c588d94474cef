"""Management port: a board's address on the network, answering neighbour discovery and the
board management protocol from the frames of one Ethernet port."""

from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from mrcnic import mgmt, regmap

from .csr_bus import CSRBus
from .frame_merge import FrameMerge
from .mgmt_server import MgmtServer
from .neighbour_responder import NeighbourResponder
from .stream import PacketStream, check_width

__all__ = ["ManagementPort", "MGMT_PORT_COUNTERS"]

#: The counters, as the register map names them: the neighbour responder's, then the server's.
MGMT_PORT_COUNTERS = tuple(regmap.MGMT_COUNTERS)


class ManagementPort(wiring.Component):
    """Watches every frame on ``i`` (all are taken at once, so it can listen beside the NIC on a
    port they share) and answers on ``o``: ARP and IPv6 neighbour solicitations for its
    addresses (:class:`NeighbourResponder`) and management requests (:class:`MgmtServer`),
    carried out on ``bus``. Replies leave whole, one at a time, the two blocks taking turns.

    Attributes
    ----------
    i : In(PacketStream(width));  o : Out(PacketStream(width));  bus : Out(CSRBus(addr_width))
    mac : In(48);  ipv4 : In(32);  ipv6 : In(128)
    arp_replies, nd_replies, nd_bad, nd_missed : Out(1), events (:attr:`events`): the
        responder's, ``bad`` and ``missed`` renamed
    executed, replayed, refused, dropped, missed : Out(1), events: the server's
    """

    def __init__(self, width=64, clients=mgmt.BOARD_CLIENTS, port=mgmt.DEFAULT_PORT,
                 registers=regmap.REGISTERS, addr_width=regmap.ADDR_WIDTH):
        self._width = check_width(width)
        self._server = MgmtServer(width, clients, port, registers, addr_width)
        super().__init__({"i": In(PacketStream(width)), "o": Out(PacketStream(width)),
                          "bus": Out(CSRBus(addr_width)),
                          "mac": In(48), "ipv4": In(32), "ipv6": In(128),
                          **{name: Out(1) for name in MGMT_PORT_COUNTERS}})

    @property
    def events(self):
        """The counters' event outputs, for the register bank to count."""
        return MGMT_PORT_COUNTERS

    def elaborate(self, platform):
        m = Module()
        m.submodules.responder = nd = NeighbourResponder(self._width)
        m.submodules.server = srv = self._server
        for block in (nd, srv):
            m.d.comb += [block.i.valid.eq(self.i.valid), block.i.payload.eq(self.i.payload),
                         block.mac.eq(self.mac), block.ipv4.eq(self.ipv4),
                         block.ipv6.eq(self.ipv6)]
        m.d.comb += self.i.ready.eq(1)      # both blocks always are
        wiring.connect(m, srv.bus, wiring.flipped(self.bus))
        m.d.comb += [self.arp_replies.eq(nd.arp_replies), self.nd_replies.eq(nd.nd_replies),
                     self.nd_bad.eq(nd.bad), self.nd_missed.eq(nd.missed)]
        for name in ("executed", "replayed", "refused", "dropped", "missed"):
            m.d.comb += getattr(self, name).eq(getattr(srv, name))

        # The replies leave whole, one at a time.
        m.submodules.merge = merge = FrameMerge(self._width)
        wiring.connect(m, nd.o, merge.i0)
        wiring.connect(m, srv.o, merge.i1)
        wiring.connect(m, merge.o, wiring.flipped(self.o))
        return m
