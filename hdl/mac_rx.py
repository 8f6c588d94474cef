"""MAC receive, in the core clock: frames from the PHY's clock are kept until their last beat says
whether they are good, and only good ones go on."""

from amaranth import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from mrcnic.regmap import MAC_COUNTER_STEPS, MAC_COUNTERS
from mrcnic.wire import ETH_FCS_BYTES, ETH_MIN_FRAME

from .rgmii_rx import RxError, rx_beat_layout
from .stream import PacketStream, check_width, keep_count, packet_layout

__all__ = ["MacRx", "MAC_RX_COUNTERS"]

#: what MacRx counts, each an event output: the register map's receive counters
MAC_RX_COUNTERS = tuple(n.removeprefix("rx_") for n in MAC_COUNTERS if n.startswith("rx_"))


class MacRx(wiring.Component):
    """Store and forward: a frame from ``i`` is written to block RAM as it comes and handed to
    ``o`` once its last beat has arrived and it is good; a bad one is taken back out of the
    buffer, whole, and counted by its reason (the first that applies):

    * ``phy_errors``: marked PHY (RX_ER, no preamble and SFD);
    * ``overflows``: marked OVERFLOW (lost in the crossing), or the buffer had no room for it
      because ``o`` has not taken what is before it;
    * ``oversize``: longer than ``max_frame`` bytes (FCS not counted);
    * ``runts``: shorter than the least frame, 60 bytes without its FCS;
    * ``fcs_errors``: marked FCS.

    ``frames`` and ``bytes`` count the good frames. ``i`` is always ready, since the PHY cannot
    wait.

    Parameters
    ----------
    width : data width in bits;  max_frame : the longest frame taken, in bytes without FCS;
    depth : beats of buffer, a power of two holding at least one longest frame (by default two).

    Attributes
    ----------
    i : In(stream rx_beat_layout(width));  o : Out(PacketStream(width))
    frames, bytes, fcs_errors, phy_errors, runts, oversize, overflows : events (:attr:`events`),
        at a frame's end: a good frame and its bytes, or one dropped for that reason
    """

    def __init__(self, width=64, max_frame=9600, depth=None):
        self._width = check_width(width)
        lanes = width // 8
        if not isinstance(max_frame, int) or max_frame < ETH_MIN_FRAME - ETH_FCS_BYTES:
            raise ValueError(f"max_frame must be an integer of at least "
                             f"{ETH_MIN_FRAME - ETH_FCS_BYTES}, not {max_frame!r}")
        beats = -(-max_frame // lanes)
        if depth is None:
            depth = 1 << (2 * beats - 1).bit_length()
        if not isinstance(depth, int) or depth < beats or depth & (depth - 1):
            raise ValueError(f"depth must be a power of two of at least {beats} beats (one "
                             f"frame of {max_frame} bytes), not {depth!r}")
        if max_frame >= 1 << MAC_COUNTER_STEPS["rx_bytes"]:
            raise ValueError(f"max_frame must be below {1 << MAC_COUNTER_STEPS['rx_bytes']}"
                             f" bytes (the register map's mac.rx_bytes counts whole frames), "
                             f"not {max_frame}")
        self._max, self._depth = max_frame, depth
        super().__init__({
            "i": In(stream.Signature(rx_beat_layout(width), always_ready=True)),
            "o": Out(PacketStream(width)),
            **{name: Out(range(max_frame + 1) if name == "bytes" else 1)
               for name in MAC_RX_COUNTERS},
        })

    @property
    def events(self):
        """The counters' event outputs, for the register bank to count."""
        return MAC_RX_COUNTERS

    def elaborate(self, platform):
        m = Module()
        lanes = self._width // 8
        depth = self._depth
        ptr = depth.bit_length()          # one bit more than an address: full and empty differ
        m.submodules.mem = mem = Memory(shape=packet_layout(self._width), depth=depth, init=[])
        wr = mem.write_port()
        rd = mem.read_port(transparent_for=())

        head = Signal(ptr)                # where the next frame will start (after the good ones)
        wp = Signal(ptr)                  # where the frame coming in writes its next beat
        rp = Signal(ptr)                  # the next beat to read for ``o``
        length = Signal(range(self._max + lanes + 1))
        refused = Signal()                # this frame is already dropped: oversize or no room
        refused_full = Signal()

        i = self.i
        n = keep_count(m, i.payload.keep)
        total = Signal.like(length)
        m.d.comb += total.eq(length + n)
        full = Signal()
        m.d.comb += full.eq((wp - rp)[:ptr] == depth)
        over = Signal()
        m.d.comb += over.eq(total > self._max)

        def count(name, by=1):
            m.d.comb += getattr(self, name).eq(by)

        with m.If(i.valid):
            m.d.sync += length.eq(total)
            take = Signal()
            m.d.comb += take.eq(~refused & ~full & ~over)
            with m.If(take):
                m.d.comb += [wr.addr.eq(wp[:-1]), wr.en.eq(1), wr.data.data.eq(i.payload.data),
                             wr.data.keep.eq(i.payload.keep), wr.data.last.eq(i.payload.last)]
                m.d.sync += wp.eq(wp + 1)
            with m.Elif(~refused):
                m.d.sync += [refused.eq(1), refused_full.eq(~over)]
            with m.If(i.payload.last):
                m.d.sync += [length.eq(0), refused.eq(0), wp.eq(head)]
                no_room = (refused & refused_full) | (~refused & ~over & full)
                with m.If(i.payload.error == RxError.PHY):
                    count("phy_errors")
                with m.Elif((i.payload.error == RxError.OVERFLOW) | no_room):
                    count("overflows")
                with m.Elif(refused | over):
                    count("oversize")
                with m.Elif(total < ETH_MIN_FRAME - ETH_FCS_BYTES):
                    count("runts")
                with m.Elif(i.payload.error == RxError.FCS):
                    count("fcs_errors")
                with m.Else():
                    # Good: the frame, its last beat included, is now the reader's.
                    m.d.sync += [head.eq(wp + 1), wp.eq(wp + 1)]
                    count("frames")
                    count("bytes", total)

        # The reader: a registered read, so ``o`` holds its beat while not taken.
        o = self.o
        advance = Signal()
        m.d.comb += [advance.eq(~o.valid | o.ready), rd.en.eq(advance), rd.addr.eq(rp[:-1]),
                     o.payload.eq(rd.data)]
        with m.If(advance):
            m.d.sync += o.valid.eq(rp != head)
            with m.If(rp != head):
                m.d.sync += rp.eq(rp + 1)
        return m
