"""The receive half of the NIC: every plane's frames in; placed data, completions and
acknowledgements out."""

from amaranth import Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from mrcnic.regmap import RX_EVENTS, RX_FRONT_DROPS, RX_OUTCOMES

from .host_memory import MemWritePort
from .qp_context import static_layout
from .rx_event import RxOutcome, ack_layout, completion_layout
from .rx_front import FRONT_EVENTS, FRONT_STATS, RxFront, drop_reasons
from .rx_transport import RX_COUNTERS, RxTransport, init_layout
from .stream import PacketStream, check_width
from .transport_parser import transport_layout

__all__ = ["RxPipeline", "rx_counter_names"]


def rx_counter_names():
    """Every counter the receive side keeps, by port name."""
    return (["frames"] + [f"drop_{r}" for r in drop_reasons()]
            + [f"outcome_{o.name.lower()}" for o in RxOutcome] + list(RX_COUNTERS))


class RxPipeline(wiring.Component):
    """:class:`RxFront` (ingress, parser, SRv6 decapsulation, ICRC) -> :class:`RxTransport`
    (judge, place, complete, acknowledge).

    Parameters
    ----------
    width, planes, max_frame, timeout, max_segments : as :class:`RxFront`.
    qps, window, messages : as :class:`RxTransport`.

    Attributes
    ----------
    plane0 .. plane<N-1> : In(PacketStream(width))
    ctx_addr, ctx, init, mem, cpl, ack, feedback, coalesce, timeout, share_period : as
        :class:`RxTransport`
    frames, drop_<reason>, outcome_<name>, ooo, completions, sacks, nacks, place_errors :
        Out(1), the events (:attr:`events`) of the counters of :func:`rx_counter_names`
    icrc_frames, icrc_bad, parser_frames, parser_errors, parser_last_error : the front end's
    """

    def __init__(self, width=64, planes=2, qps=16, window=256, messages=512, max_frame=9600,
                 timeout=1024, max_segments=4):
        # The register map names the counters; they must be the gateware's, in its order.
        for mine, theirs in ((drop_reasons(), RX_FRONT_DROPS),
                             ([o.name.lower() for o in RxOutcome], RX_OUTCOMES),
                             (list(RX_COUNTERS), RX_EVENTS)):
            if list(mine) != list(theirs):
                raise ValueError(f"the gateware counts {mine}, the register map {list(theirs)}")
        self._width = check_width(width)
        self._planes = planes
        L = width // 8
        self._front = RxFront(width, planes, max_frame, timeout, max_segments)
        depth = 1 << (2 * (-(-max_frame // L) + 1)).bit_length()
        self._transport = RxTransport(width, planes, qps, window, messages, depth)
        front_sig = self._front.signature.members
        super().__init__({
            **{f"plane{p}": In(PacketStream(width)) for p in range(planes)},
            "ctx_addr": Out(range(qps)), "ctx": In(static_layout()),
            "init": In(stream.Signature(init_layout(qps))),
            "mem": Out(MemWritePort(width)),
            "cpl": Out(stream.Signature(completion_layout(qps))),
            "ack": Out(stream.Signature(ack_layout(qps))),
            "feedback": Out(stream.Signature(transport_layout(planes))),
            "coalesce": In(8), "timeout": In(32), "share_period": In(16),
            "sid": In(data.ArrayLayout(128, planes)),
            **{name: Out(1) for name in rx_counter_names()},
            **{name: front_sig[name] for name in FRONT_STATS},
        })

    @property
    def events(self):
        """The counters' event outputs, for the register bank to count."""
        return (*rx_counter_names(), *FRONT_EVENTS)

    def elaborate(self, platform):
        m = Module()
        front, tr = self._front, self._transport
        m.submodules.front, m.submodules.transport = front, tr
        flip = wiring.flipped
        for p in range(self._planes):
            wiring.connect(m, flip(getattr(self, f"plane{p}")), getattr(front, f"plane{p}"))
        wiring.connect(m, front.o, tr.i)
        for name in ("init", "mem", "cpl", "ack", "feedback"):
            wiring.connect(m, flip(getattr(self, name)), getattr(tr, name))
        m.d.comb += [self.ctx_addr.eq(tr.ctx_addr), tr.ctx.eq(self.ctx),
                     tr.coalesce.eq(self.coalesce), tr.timeout.eq(self.timeout),
                     tr.share_period.eq(self.share_period),
                     front.sid.eq(self.sid)]
        for name in rx_counter_names():
            src = front if name == "frames" or name.startswith("drop_") else tr
            m.d.comb += getattr(self, name).eq(getattr(src, name))
        for name in FRONT_STATS:
            m.d.comb += getattr(self, name).eq(getattr(front, name))
        return m
