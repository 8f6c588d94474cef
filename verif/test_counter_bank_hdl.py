"""The counter bank under Verilator: event counters and a wide one, a narrow bank that wraps."""

import pytest

from mrcnic.hdl.counter_bank import CounterBank
from mrcnic.verif import harness
from mrcnic.verif.toplevel import AxisTop


@pytest.mark.parametrize("steps,width", [((1, 1, 14, 1, 3, 1, 1), 64), ((1, 8), 12), ((2,), 32)])
def test_counter_bank(steps, width, seed_for, volume):
    name = f"counter_bank_{'_'.join(map(str, steps))}_w{width}"
    b = harness.build(lambda steps, width: AxisTop(CounterBank(steps, width)),
                      {"steps": list(steps), "width": width}, name)
    harness.run(b, "mrcnic.verif.tb_counter_bank",
                {"seed": seed_for(name), "steps": list(steps), "width": width,
                 "cycles": 3000 * volume})
