"""cocotb test of the send window: every cycle, random PSN windows, congestion windows, gate
requests, sends, acknowledgements, restarts and busy QPs; the gate's answer, every QP's
readiness and every QP's bytes in flight checked against a model of the rules (a send and an
acknowledgement count from the cycle after the next; a restart empties its QP and forgets a
send for it in its cycle, and bytes acknowledged in its cycle or the one before)."""

import random

import cocotb
from amaranth.lib.data import ArrayLayout
from cocotb.triggers import FallingEdge, RisingEdge, Timer

from mrcnic.hdl.congestion_window import CWND_BITS
from mrcnic.hdl.reorder_tracker import PSN_BITS
from mrcnic.hdl.send_window import FLIGHT_BITS
from mrcnic.verif.layouts import as_int, decode
from mrcnic.verif.tbkit import params, setup

PSN_MOD, FLIGHT_MOD = 1 << PSN_BITS, 1 << FLIGHT_BITS


def may_send(q, psn, una, flight, cwnd, unlimited, busy, qp, window):
    """Whether QP ``q`` may send ``psn``, and the three tests' results."""
    in_psns = (psn - una[q]) % PSN_MOD < window
    in_bytes = unlimited or flight[q] < cwnd[q]
    shut = busy and q == qp
    return in_psns and in_bytes and not shut, (in_psns, in_bytes, shut)


@cocotb.test()
async def the_gate_follows_both_windows(dut):
    p = params()
    rng = random.Random(p["seed"])
    qps, window = p["qps"], p["window"]
    psns, windows = ArrayLayout(PSN_BITS, qps), ArrayLayout(CWND_BITS, qps)
    flights = ArrayLayout(FLIGHT_BITS, qps)
    await setup(dut)
    flight = [0] * qps
    took = None                      # last cycle's send: (qp, length)
    acks = (0, 0)                    # last cycle's acknowledged bytes: (qp, length)
    una = [rng.randrange(PSN_MOD) for _ in range(qps)]
    seen = {"open": 0, "shut_psn": 0, "shut_bytes": 0, "shut_busy": 0, "restart": 0}
    for cycle in range(p["cycles"]):
        await FallingEdge(dut.clk)
        # PSNs: una moves on now and then, nxt up to a little past the window (wrapping)
        una = [(u + rng.randrange(3)) % PSN_MOD if rng.random() < 0.2 else u for u in una]
        nxt = [(u + rng.randrange(window + 4)) % PSN_MOD for u in una]
        cwnd = [rng.choice([0, 4096, 65536, rng.randrange(1 << CWND_BITS)]) for _ in range(qps)]
        unlimited = rng.random() < 0.1
        qp, busy = rng.randrange(qps), rng.random() < 0.3
        acked = rng.randrange(min(flight[qp], 8191) + 1) if rng.random() < 0.3 else 0
        restart, restart_qp = rng.random() < 0.03, rng.randrange(qps)
        gate_qp = rng.randrange(qps)
        gate_psn = (una[gate_qp] + rng.randrange(window + 4) - 2) % PSN_MOD
        gate_length = rng.randrange(1 << 13)
        # the TX side passes at most one packet in two cycles
        take = took is None and rng.random() < 0.5
        for name, value in (("una", as_int(psns, una)), ("nxt", as_int(psns, nxt)),
                            ("cwnd", as_int(windows, cwnd)), ("unlimited", int(unlimited)),
                            ("qp", qp), ("busy", int(busy)), ("acked_len", acked),
                            ("restart", int(restart)), ("restart_qp", restart_qp),
                            ("gate_qp", gate_qp), ("gate_psn", gate_psn),
                            ("gate_length", gate_length), ("gate_take", int(take))):
            getattr(dut, name).value = value
        await Timer(1, "ns")
        got = decode(flights, int(dut.flight.value))
        assert got == flight, f"cycle {cycle}: bytes in flight {got}, not {flight}"

        now = {"una": una, "flight": flight, "cwnd": cwnd, "unlimited": unlimited,
               "busy": busy, "qp": qp, "window": window}
        want, (in_psns, in_bytes, shut) = may_send(gate_qp, gate_psn, **now)
        assert int(dut.gate_open.value) == int(want), \
            f"cycle {cycle}: QP {gate_qp} PSN {gate_psn}: gate_open {int(dut.gate_open.value)}"
        seen["open" if want else "shut_busy" if shut else "shut_psn" if not in_psns
             else "shut_bytes"] += 1
        ready = sum(int(may_send(q, nxt[q], **now)[0]) << q for q in range(qps))
        assert int(dut.gate_ready.value) == ready, \
            f"cycle {cycle}: gate_ready {int(dut.gate_ready.value):0{qps}b}, not {ready:0{qps}b}"
        await RisingEdge(dut.clk)
        # the last cycle's send and acknowledgement, then this cycle's restart
        new = list(flight)
        aq, alen = acks
        if took is not None:
            tq, tlen = took
            new[tq] = (flight[tq] + tlen - (alen if aq == tq else 0)) % FLIGHT_MOD
        if took is None or took[0] != aq:
            new[aq] = (flight[aq] - alen) % FLIGHT_MOD
        if restart:
            new[restart_qp] = 0
            seen["restart"] += 1
        flight = new
        took = (gate_qp, gate_length) if take and not (restart and gate_qp == restart_qp) else None
        acks = (qp, 0 if restart and restart_qp == qp else acked)
    assert all(seen.values()), f"cases never seen: {seen}"
