"""RTT estimator: a QP's smoothed RTT and its variation after a sample, as TCP keeps them."""

from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from mrcnic.wire import TIME_BITS

__all__ = ["RttEstimator"]


def _signed(v, width):
    """``v`` (unsigned) as a signed value of ``width`` bits."""
    return Cat(v, Const(0, width - len(v))).as_signed()


class RttEstimator(wiring.Component):
    """The estimates after an RTT ``sample`` (RFC 6298's, with its gains as shifts): the first
    sample (``have_rtt`` 0) gives srtt = sample, rttvar = sample / 2; each later one
    srtt += err / 8 and rttvar += (|err| - rttvar) / 4, err = sample - srtt, in 16-bit
    arithmetic that wraps as the timestamps do. Combinational: the new estimates in the same
    cycle.

    Attributes
    ----------
    srtt, rttvar : In(16);  have_rtt : In(1), the QP's estimates and whether it has any.
    sample : In(16)
    srtt_next, rttvar_next : Out(16)
    """

    def __init__(self):
        super().__init__({
            "srtt": In(TIME_BITS), "rttvar": In(TIME_BITS), "have_rtt": In(1),
            "sample": In(TIME_BITS),
            "srtt_next": Out(TIME_BITS), "rttvar_next": Out(TIME_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        err = Signal(signed(TIME_BITS + 1))
        mag = Signal(TIME_BITS + 1)
        m.d.comb += [err.eq(_signed(self.sample, TIME_BITS + 1) - _signed(self.srtt, TIME_BITS + 1)),
                     mag.eq(Mux(err < 0, -err, err))]
        with m.If(~self.have_rtt):
            m.d.comb += [self.srtt_next.eq(self.sample), self.rttvar_next.eq(self.sample >> 1)]
        with m.Else():
            m.d.comb += [
                self.srtt_next.eq(self.srtt + (err >> 3)),
                self.rttvar_next.eq(self.rttvar + ((_signed(mag, TIME_BITS + 2)
                                                    - _signed(self.rttvar, TIME_BITS + 2)) >> 2)),
            ]
        return m
