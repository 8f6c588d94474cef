"""EV event queue: the EV state changes a controller subscribed to, for it to read through
registers."""

from amaranth import Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from mrcnic.enums import EvState
from mrcnic.regmap import EVQ_ENTRY, EVQ_OTHERS, by_name

from .register_queue import RegisterQueue, packed

__all__ = ["EvEventQueue"]

ENTRY_BITS = by_name("evq.entry").width


def change_layout(qps, evs):
    """A change, as the spray scheduler reports it."""
    return data.StructLayout({"qp": range(qps), "index": range(evs), "state": EvState,
                              "management": 1, "replaced": 1, "others": evs})


class EvEventQueue(wiring.Component):
    """Each change whose new state has its bit set in ``mask`` becomes an event laid out as
    ``regmap.EVQ_ENTRY`` says and waits in a :class:`RegisterQueue`; one that finds it full is
    lost and counted exactly.

    Parameters
    ----------
    qps, evs : the NIC's (``evs`` at most ``regmap.EVQ_OTHERS``, the entry's ``others``);
    depth : events the queue holds.

    Attributes
    ----------
    changed : In(stream, always ready), the spray scheduler's changes
    mask : In(4), bit s: state s is subscribed
    count, entry, pop, overflows : as :class:`RegisterQueue`'s
    """

    def __init__(self, qps=16, evs=64, depth=64):
        if evs > EVQ_OTHERS:
            raise ValueError(f"evs {evs}: an EV event names the other entries of a path in "
                             f"{EVQ_OTHERS} bits, so a profile may have at most {EVQ_OTHERS}")
        self._queue = RegisterQueue(ENTRY_BITS, depth, by_name("evq.count").width)
        super().__init__({
            "changed": In(stream.Signature(change_layout(qps, evs), always_ready=True)),
            "mask": In(4),
            "count": Out(by_name("evq.count").width), "entry": Out(ENTRY_BITS),
            "pop": In(stream.Signature(1)), "overflows": Out(1),
        })

    @property
    def events(self):
        """The counters' event outputs, for the register bank to count."""
        return ("overflows",)

    def elaborate(self, platform):
        m = Module()
        m.submodules.queue = queue = self._queue
        c = self.changed.payload
        entry = packed(m, EVQ_ENTRY, ENTRY_BITS, {name: getattr(c, name) for name in EVQ_ENTRY})
        m.d.comb += [queue.i.payload.eq(entry),
                     queue.i.valid.eq(self.changed.valid & self.mask.bit_select(c.state, 1)),
                     self.count.eq(queue.count), self.entry.eq(queue.entry),
                     self.overflows.eq(queue.overflows)]
        wiring.connect(m, wiring.flipped(self.pop), queue.pop)
        return m
