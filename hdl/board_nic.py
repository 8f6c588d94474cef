"""Board NIC: everything a board without a host holds around the NIC, from the DDR buffers of
its RGMII ports inward: a MAC per port, on-chip memory for host memory, the test pattern's
writer and checker, and the management port on port 0. Built without the NIC, it is what
brings a board up: reachable, its registers and memory at hand, its ports counting."""

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from mrcnic import mgmt, regmap

from .eth_mac import MAC_COUNTERS, EthMac
from .frame_merge import FrameMerge
from .management_port import MGMT_PORT_COUNTERS, ManagementPort
from .memory_share import MemoryShare
from .nic import Nic
from .onchip_memory import OnChipMemory
from .pattern_checker import PatternChecker
from .pattern_writer import PatternWriter
from .register_bank import RegisterBank

__all__ = ["BoardNic", "board_window"]


def board_window() -> tuple[int, int]:
    """The CSR offsets (first, past the last) that the board's registers own."""
    first = min(r.offset for r in regmap.BOARD_REGISTERS)
    end = max(r.offset + 4 * r.words for r in regmap.BOARD_REGISTERS)
    inside = [r.path for r in regmap.NIC_REGISTERS if first <= r.offset < end]
    if inside:
        raise ValueError(f"the board's registers ({first:#x} .. {end:#x}) surround NIC "
                         f"registers: {', '.join(inside)}")
    return first, end


class BoardNic(wiring.Component):
    """A :class:`Nic` with ``planes`` RGMII ports, host memory in block RAM and a management
    port, for a board with no host.

    * Port ``p`` is an :class:`EthMac` in clock domains ``eth<p>_rx`` and ``eth<p>_tx``.
    * Port 0 is shared: the NIC and the :class:`ManagementPort` both see every frame it
      receives (the NIC drops, and counts, what is not MRC; the management port ignores what
      is not for its addresses), and their frames leave it whole, taking turns.
    * The management port's register accesses reach the NIC's registers and the board's
      (``regmap.BOARD_REGISTERS``: memory size, pattern writer and checker, the MACs' and the
      management port's counters), which a second :class:`RegisterBank` holds.
    * ``mem_size`` bytes of :class:`OnChipMemory` from address 0 serve the NIC's host-memory
      ports, shared with the pattern writer (``gen.*``) and checker (``chk.*``): a command
      starts one and stays pending until it is done.
    * Without a NIC (``nic=None``) port 0's frames go to the management port alone, port 1's
      MAC takes every frame it receives and drops it (its counters count it) and sends none,
      and the management port knows only the board's registers: a request for any other word
      is answered BAD_ADDRESS, as for any word the register map does not have.

    Parameters
    ----------
    width : the datapath width;  planes : ports, 1 .. ``regmap.BOARD_PLANES``
    nic : {parameter: value} for :class:`Nic` (its ``width`` and ``planes`` are these), or
        None for a board without the NIC
    mem_size : bytes of on-chip memory;  max_frame : the MACs' largest frame, FCS not counted
    mac, ipv4, ipv6 : the management port's addresses (ints, first byte highest; 0: none)
    make_nic : what makes the NIC from its parameters: :class:`Nic`, or something with its
        signature (a simulation of two boards has both share one compiled NIC)

    Attributes
    ----------
    ddr<p>_rx_data : In(8);  ddr<p>_rx_ctl : In(2);  ddr<p>_tx_data : Out(8);
    ddr<p>_tx_ctl : Out(2), port ``p``'s DDR buffers (see :class:`EthMac`)
    link : In(planes), each port's link is up
    """

    def __init__(self, width=64, planes=2, nic=None, mem_size=1 << 16, max_frame=2048,
                 mac=0x02_4D_52_43_00_01, ipv4=0, ipv6=0,
                 clients=mgmt.BOARD_CLIENTS, make_nic=Nic):
        if not isinstance(planes, int) or not 1 <= planes <= regmap.BOARD_PLANES:
            raise ValueError(f"planes must be 1 .. {regmap.BOARD_PLANES}, not {planes!r}")
        for name, value, bits in (("mac", mac, 48), ("ipv4", ipv4, 32), ("ipv6", ipv6, 128)):
            if not isinstance(value, int) or not 0 <= value < 1 << bits:
                raise ValueError(f"{name} must be a {bits}-bit number, not {value!r}")
        if not ipv4 and not ipv6:
            raise ValueError("the management port needs an IPv4 or an IPv6 address")
        self._width, self._planes = width, planes
        self._addr = (mac, ipv4, ipv6)
        self._window = board_window()
        self._nic = None if nic is None else make_nic(width=width, planes=planes, **nic)
        self._macs = [EthMac(width, max_frame, rx_domain=f"eth{p}_rx", tx_domain=f"eth{p}_tx")
                      for p in range(planes)]
        # Without the NIC its registers do not exist: the management port's ROM says so.
        self._mgmt = ManagementPort(width, clients, mgmt.DEFAULT_PORT,
                                    regmap.REGISTERS if nic is not None else regmap.BOARD_REGISTERS)
        self._memory = OnChipMemory(width, mem_size)
        self._bank = RegisterBank({"board.mem_size": mem_size}, registers=regmap.BOARD_REGISTERS,
                                  planes=planes)
        members = {}
        for p in range(planes):
            members |= {f"ddr{p}_rx_data": In(8), f"ddr{p}_rx_ctl": In(2),
                        f"ddr{p}_tx_data": Out(8), f"ddr{p}_tx_ctl": Out(2)}
        super().__init__({**members, "link": In(planes)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.mgmt = port = self._mgmt
        m.submodules.bank = bank = self._bank
        m.submodules.memory = memory = self._memory
        m.submodules.writer = writer = PatternWriter(self._width)
        m.submodules.checker = checker = PatternChecker(self._width)
        for p, mac in enumerate(self._macs):
            m.submodules[f"mac{p}"] = mac
            m.d.comb += [mac.ddr_rx_data.eq(getattr(self, f"ddr{p}_rx_data")),
                         mac.ddr_rx_ctl.eq(getattr(self, f"ddr{p}_rx_ctl")),
                         getattr(self, f"ddr{p}_tx_data").eq(mac.ddr_tx_data),
                         getattr(self, f"ddr{p}_tx_ctl").eq(mac.ddr_tx_ctl)]
            for name in MAC_COUNTERS:
                m.d.comb += getattr(bank, f"mac_{name}_p{p}").eq(getattr(mac, name))
        mac_addr, ipv4, ipv6 = self._addr
        m.d.comb += [port.mac.eq(mac_addr), port.ipv4.eq(ipv4), port.ipv6.eq(ipv6)]
        for name in MGMT_PORT_COUNTERS:
            m.d.comb += getattr(bank, f"mgmt_{name}").eq(getattr(port, name))
        if self._nic is None:
            self._without_nic(m, port, bank, memory, writer, checker)
        else:
            self._with_nic(m, port, bank, memory, writer, checker)

        self._run(m, bank, "gen", writer, lambda done: [bank.gen_error.eq(done.payload.error)])
        self._run(m, bank, "chk", checker, lambda done: [bank.chk_error.eq(done.payload.error),
                                                         bank.chk_bad.eq(done.payload.bad)])
        return m

    def _with_nic(self, m, port, bank, memory, writer, checker):
        m.submodules.nic = nic = self._nic
        m.submodules.share = share = MemoryShare(self._width)
        m.d.comb += nic.port_ready.eq(self.link)

        # Port 0: the NIC and the management port see the same frames, at the NIC's pace (the
        # management port always takes them); their frames leave whole, taking turns.
        mac0 = self._macs[0]
        m.d.comb += [nic.rx_plane0.valid.eq(mac0.rx.valid),
                     nic.rx_plane0.payload.eq(mac0.rx.payload),
                     mac0.rx.ready.eq(nic.rx_plane0.ready),
                     port.i.valid.eq(mac0.rx.valid & nic.rx_plane0.ready),
                     port.i.payload.eq(mac0.rx.payload)]
        m.submodules.merge0 = merge = FrameMerge(self._width)
        wiring.connect(m, nic.plane0, merge.i0)
        wiring.connect(m, port.o, merge.i1)
        wiring.connect(m, merge.o, mac0.tx)
        for p, mac in enumerate(self._macs[1:], start=1):
            wiring.connect(m, mac.rx, getattr(nic, f"rx_plane{p}"))
            wiring.connect(m, getattr(nic, f"plane{p}"), mac.tx)

        # Register accesses: the board's window to the board's bank, the rest to the NIC's.
        self._split_bus(m, port.bus, nic.bus, bank.bus)

        # Host memory: the NIC first, the pattern blocks beside it.
        wiring.connect(m, nic.mem, share.rd0)
        wiring.connect(m, nic.rx_mem, share.wr0)
        wiring.connect(m, checker.mem, share.rd1)
        wiring.connect(m, writer.mem, share.wr1)
        wiring.connect(m, share.rd, memory.rd)
        wiring.connect(m, share.wr, memory.wr)
        # No work requests but those posted through registers; completions go to the
        # completion queue the registers read (cq.route), or are let go.
        m.d.comb += [nic.wr.valid.eq(0), nic.cpl.ready.eq(1), nic.rx_cpl.ready.eq(1)]

    def _without_nic(self, m, port, bank, memory, writer, checker):
        # Port 0 is the management port's alone; the other ports take what they receive (their
        # MACs count it) and send nothing.
        mac0 = self._macs[0]
        wiring.connect(m, mac0.rx, port.i)
        wiring.connect(m, port.o, mac0.tx)
        for mac in self._macs[1:]:
            m.d.comb += [mac.rx.ready.eq(1), mac.tx.valid.eq(0)]
        # The management port's ROM holds the board's registers only: every access it makes is
        # the board bank's.
        wiring.connect(m, port.bus, bank.bus)
        # The memory is the pattern blocks' alone.
        wiring.connect(m, checker.mem, memory.rd)
        wiring.connect(m, writer.mem, memory.wr)

    def _split_bus(self, m, bus, nic_bus, board_bus):
        first, end = self._window
        ours = Signal()
        m.d.comb += ours.eq((bus.addr >= first) & (bus.addr < end))
        was_ours = Signal()        # whose answer the last access gets
        with m.If(bus.r_stb | bus.w_stb):
            m.d.sync += was_ours.eq(ours)
        for target, sel in ((nic_bus, ~ours), (board_bus, ours)):
            m.d.comb += [target.addr.eq(bus.addr), target.w_data.eq(bus.w_data),
                         target.r_stb.eq(bus.r_stb & sel), target.w_stb.eq(bus.w_stb & sel)]
        with m.If(was_ours):
            m.d.comb += [bus.r_data.eq(board_bus.r_data), bus.refused.eq(board_bus.refused)]
        with m.Else():
            m.d.comb += [bus.r_data.eq(nic_bus.r_data), bus.refused.eq(nic_bus.refused)]

    @staticmethod
    def _run(m, bank, block, unit, record):
        """``<block>.start`` starts ``unit`` on the region and seed its registers hold, and is
        taken (no longer pending) once the unit is done; ``record`` keeps the outcome."""
        cmd = getattr(bank, f"{block}_start")
        running = Signal(name=f"{block}_running")
        m.d.comb += [unit.start.valid.eq(cmd.valid & ~running),
                     unit.start.payload.addr.eq(getattr(bank, f"{block}_addr")),
                     unit.start.payload.length.eq(getattr(bank, f"{block}_length")),
                     unit.start.payload.seed.eq(getattr(bank, f"{block}_seed")),
                     unit.done.ready.eq(1), cmd.ready.eq(unit.done.valid)]
        with m.If(unit.start.valid & unit.start.ready):
            m.d.sync += running.eq(1)
        with m.If(unit.done.valid):
            m.d.sync += [running.eq(0), *record(unit.done)]
