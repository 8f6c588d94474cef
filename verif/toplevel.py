"""A simulation top-level that gives a component's streams AXI-stream names.

cocotbext-axi's models find a stream by prefix (``<name>_tdata``, ``_tkeep``, ``_tlast``,
``_tuser``, ``_tvalid``, ``_tready``), so every ``amaranth.lib.stream`` member of the component
becomes such a bundle: payload member ``data`` -> tdata, ``keep`` -> tkeep, ``last`` -> tlast,
any others (in layout order) concatenated -> tuser; a payload that is not a packet becomes tdata
as a whole. Plain ports keep their names (``__`` between the levels of nested interfaces).

A component's event outputs (the port names in its ``events``: each cycle's increment of a
counter the register bank keeps) become 32-bit counts of the same names, counted here as the
bank counts them, so a testbench reads a block's counters as registers.
"""

from amaranth import Cat, ClockDomain, Elaboratable, Module, Shape, Signal, Value
from amaranth.lib import data, stream
from amaranth.lib.wiring import Flow

__all__ = ["AxisTop", "user_fields"]


def _packet_fields(layout):
    if isinstance(layout, data.StructLayout):
        names = [n for n, _ in layout]
        if "data" in names and "last" in names:
            return [n for n in names if n not in ("data", "keep", "last")]
    return None


def user_fields(layout):
    """[(name, width)] packed into tuser, lowest bits first."""
    extra = _packet_fields(layout)
    return [(n, layout[n].width) for n in extra] if extra else []


class AxisTop(Elaboratable):
    """``component`` with AXI-stream names; ``domains`` names its clock domains besides ``sync``,
    each given ports ``<name>_clk`` and ``<name>_rst``."""

    def __init__(self, component, domains=()):
        self.component = component
        # The clock and reset are always ports, even of a purely combinational component: the
        # testbench drives them and its models sample on them.
        self.clk, self.rst = Signal(name="clk"), Signal(name="rst")
        self.ports = [self.clk, self.rst]
        self._domains = {d: (self._port(f"{d}_clk", 1), self._port(f"{d}_rst", 1))
                         for d in domains}
        self._stmts = []
        self._counts = []
        self._events = set(getattr(component, "events", ()))
        for name, member in component.signature.members.items():
            self._bind([name], member, getattr(component, name), False)

    def _port(self, name, width):
        s = Signal(width, name=name)
        self.ports.append(s)
        return s

    def _bind(self, path, member, value, flipped):
        name = "__".join(path)
        if member.is_port and name in self._events:
            s = self._port(name, 32)
            self._counts.append(s.eq(s + Value.cast(value)))
            return
        if member.is_port:
            out = (member.flow == Flow.Out) != flipped
            s = self._port(name, Shape.cast(member.shape).width)
            v = Value.cast(value)
            self._stmts.append(s.eq(v) if out else v.eq(s))
            return
        # member.signature is already oriented (flipped for an In member), so nested members'
        # flows are the component's own view.
        sig = member.signature
        if isinstance(sig, stream.Signature):
            is_sink = flipped != (sig.members["payload"].flow == Flow.In)
            layout = sig.members["payload"].shape
            extra = _packet_fields(layout)
            payload = value.payload
            if extra is None:
                # A record per beat: whole bytes for cocotbext-axi, each beat a frame of its own.
                v = Value.cast(payload)
                s = self._port(f"{name}_tdata", len(v) + (-len(v) % 8))
                self._stmts.append(v.eq(s[:len(v)]) if is_sink else s.eq(v))
                if not is_sink:
                    self._stmts.append(self._port(f"{name}_tlast", 1).eq(1))
                parts = {}
            else:
                parts = {"tdata": payload.data, "tlast": payload.last}
                if "keep" in dict(iter(layout)):
                    parts["tkeep"] = payload.keep
                if extra:
                    parts["tuser"] = Cat(*[payload[n] for n in extra])
            for suffix, v in list(parts.items()) + [("tvalid", value.valid)]:
                s = self._port(f"{name}_{suffix}", len(v))
                self._stmts.append(v.eq(s) if is_sink else s.eq(v))
            if not is_sink and sig.always_ready:
                return                    # no tready: whatever watches it takes every beat
            r = self._port(f"{name}_tready", 1)
            self._stmts.append(r.eq(value.ready) if is_sink else value.ready.eq(r))
            return
        for sub, submember in sig.members.items():
            self._bind(path + [sub], submember, getattr(value, sub), flipped)

    def elaborate(self, platform):
        m = Module()
        m.domains.sync = sync = ClockDomain("sync")
        m.d.comb += [sync.clk.eq(self.clk), sync.rst.eq(self.rst)]
        for name, (clk, rst) in self._domains.items():
            cd = ClockDomain(name)
            m.domains += cd
            m.d.comb += [cd.clk.eq(clk), cd.rst.eq(rst)]
        m.submodules.dut = self.component
        m.d.comb += self._stmts
        m.d.sync += self._counts
        return m
