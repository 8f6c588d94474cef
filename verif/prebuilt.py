"""A component emitted once as a Verilog module of its own and instantiated by name.

A simulation that holds several copies of one block (the NIC systems hold two to eight NICs)
would otherwise have each copy emitted as Verilog modules of its own, which Verilator compiles
once per copy. A :class:`Prebuilt` stands in for the block with the block's own signature and
elaborates to an ``Instance`` of one module, ``<name>_<key>``, whose Verilog :func:`harness.build
<mrcnic.verif.harness.build>` converts (and caches) once and adds to every build that uses it
as a Verilator hierarchical block: one library for all the copies, which builds that share the
block also share through the compiler cache.

Under waves and coverage the block is elaborated inline as before, so that every signal and
coverage point keeps the design's hierarchy.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json

from amaranth import ClockSignal, Elaboratable, Instance, Module, ResetSignal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import Flow

__all__ = ["Prebuilt", "collecting", "silence"]

_used: contextvars.ContextVar[dict | None] = contextvars.ContextVar("prebuilt_used", default=None)


@contextlib.contextmanager
def collecting(inline: bool = False):
    """While converting a design: yields a dict, module name -> :class:`Prebuilt`, of every
    prebuilt module the design instantiates. ``inline`` elaborates each block in place instead
    (then none is collected)."""
    used = {"inline": inline, "modules": {}}
    token = _used.set(used)
    try:
        yield used["modules"]
    finally:
        _used.reset(token)


def silence(obj, _seen=None) -> None:
    """Marks ``obj`` and every elaboratable it holds (a block builds its sub-blocks when it is
    constructed) as meant to go unused: one constructed only for its signature or a cache key
    is never elaborated, and would otherwise warn when collected."""
    seen = _seen if _seen is not None else set()
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, Elaboratable):
        obj._MustUse__silence = True
    if isinstance(obj, (list, tuple, set)):
        for x in obj:
            silence(x, seen)
    elif isinstance(obj, dict):
        for x in obj.values():
            silence(x, seen)
    elif isinstance(obj, Elaboratable):
        for x in vars(obj).values():
            if isinstance(x, (Elaboratable, list, tuple, set, dict)):
                silence(x, seen)


def _signature(factory, params: dict) -> wiring.Signature:
    """The block's signature, from an instance that is then dropped."""
    key = (factory, json.dumps(params, sort_keys=True))
    if key not in _signatures:
        block = factory(**params)
        silence(block)
        _signatures[key] = block.signature
    return _signatures[key]


_signatures: dict = {}


class Prebuilt(wiring.Component):
    """``factory(**params)``, instantiated as module ``<name>_<key>`` (``key`` a hash of the
    parameters): same signature, same ports, same behaviour."""

    def __init__(self, factory, params: dict, name: str):
        self.factory, self.params, self.name = factory, dict(params), name
        key = hashlib.sha256(json.dumps(self.params, sort_keys=True).encode()).hexdigest()[:8]
        self.module = f"{name}_{key}"
        super().__init__(_signature(factory, self.params))

    def make(self):
        """A new instance of the block (for its own conversion, or to elaborate in place)."""
        return self.factory(**self.params)

    def elaborate(self, platform):
        m = Module()
        used = _used.get()
        if used is None or used["inline"]:
            # Outside harness.build (a plain conversion, a formal check), or waves or coverage.
            m.submodules.inner = inner = self.make()
            wiring.connect(m, wiring.flipped(self), inner)
            return m
        used["modules"][self.module] = self
        ports = {"i_clk": ClockSignal(), "i_rst": ResetSignal()}
        for path, member, value in self.signature.flatten(self):
            kind = "o_" if member.flow == Flow.Out else "i_"
            ports[kind + "__".join(map(str, path))] = Value.cast(value)
        m.submodules.inst = Instance(self.module, **ports)
        return m
