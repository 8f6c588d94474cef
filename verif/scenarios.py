"""The named end-to-end scenarios: who writes what to whom, what the network does to it, and
what must hold afterwards beyond "every byte lands, every message completes once" (which the
testbench checks for all of them). ``make demo`` runs one; the end-to-end tests run them all;
the benches take their figures from them."""

from __future__ import annotations

from dataclasses import dataclass, field

from mrcnic import wire
from mrcnic.verif.network import Failure, LinkConfig, Network
from mrcnic.verif.tbkit import CLOCK_NS

__all__ = ["Scenario", "SCENARIOS"]

KIB = 1024


@dataclass
class Scenario:
    """Two hosts; every QP of each writes to the same QP of the other."""
    name = "clean"
    about = "no failure: a clean network"
    hosts: int = 2
    #: the QPs that carry data on every host (QP 2 is the EV-probe QP on the wire)
    qps: tuple = (0, 1, 3)
    mtu: int = 1024
    #: message sizes, dealt to (host, QP) streams in turn
    sizes: tuple = (1, 7, 256, 1000, 4096, 10000, 64 * KIB, 256 * KIB)
    #: when the failure strikes, and ends, as a fraction of the clean transfer's time
    at: float = 0.3
    back: float | None = 0.6
    timeout_us: float = 5000.0
    settle_us: float = 500.0      # how long after the transfer the EVs may take to be GOOD
    report_us: float = 25.0
    reliability: dict = field(default_factory=lambda: dict(
        reorder=8, rto_min=4000, rto_max=16384, probe_interval=1500, status_interval=0))
    ack_policy: tuple = (4, 256)

    def link(self, a, b) -> LinkConfig:
        """The link from node ``a`` to node ``b`` ((kind, plane, number) each)."""
        return LinkConfig()

    def peers(self, h: int) -> list[int]:
        """The host each QP of host ``h`` talks to."""
        return [1 - h] * 8

    def writes(self) -> list[tuple[int, int, int]]:
        """(host, QP, bytes) of every write, in posting order."""
        streams = [(h, q) for q in self.qps for h in range(self.hosts)]
        return [(*streams[i % len(streams)], size) for i, size in enumerate(self.sizes)]

    def transfer_us(self) -> float:
        """About how long the clean transfer takes: the busiest host's bytes at its port rate
        (the 64-bit datapath at 250 MHz sends 16 Gb/s over all its planes together)."""
        per_host = [0] * self.hosts
        for h, _, size in self.writes():
            per_host[h] += size
        return max(per_host) * 8 / (64 / CLOCK_NS) / 1000

    def base_rtt_us(self) -> float:
        """A full data packet out and its SACK back over four links each way, unloaded."""
        cfg = self.link(("leaf", 0, 0), ("spine", 0, 0))
        wire_us = 4 * cfg.latency_ns / 1000
        data = 4 * (self.mtu + 150) * 8 / cfg.gbps / 1000
        ack = 4 * (130 + 24) * 8 / cfg.gbps / 1000
        return 2 * wire_us + data + ack

    def failures(self, net: Network, t0_ns: float) -> list[Failure]:
        return []

    def recovers(self) -> bool:
        """Whether every EV should be GOOD again at the end (the tests wait for it)."""
        return False

    def snapshots(self, t0_ns: float) -> list[tuple[float, str]]:
        """When to read every EV's state, besides at the end: (time ns, label)."""
        return []

    def _when(self, t0_ns, fraction):
        return t0_ns + fraction * self.transfer_us() * 1000

    def check(self, results: dict) -> None:
        """What must hold beyond every byte landing once."""


@dataclass
class Lossy(Scenario):
    name = "lossy"
    about = "10% random loss on the spine links, 2% duplication, 10% reordering"
    sizes: tuple = (1, 7, 256, 1000, 4096, 10000, 32 * KIB, 64 * KIB)

    def link(self, a, b):
        if "spine" in (a[0], b[0]):
            return LinkConfig(loss=0.10, dup=0.02, reorder=0.10)
        return LinkConfig()

    def check(self, results):
        rtx = sum(c["rtx_sack"] + c["rtx_trim"] + c["rtx_timeout"] for c in results["rel"])
        assert rtx > 0, "10% loss and nothing was retransmitted"


@dataclass
class LinkDown(Scenario):
    name = "linkdown"
    about = "the plane 0 link between spine 1 and host 1's leaf dies mid-transfer, then returns"
    plane: int = 0
    spine: int = 1
    leaf: int = 1

    def failures(self, net, t0_ns):
        return [Failure(net.spine_link(self.plane, self.spine, self.leaf),
                        self._when(t0_ns, self.at),
                        None if self.back is None else self._when(t0_ns, self.back),
                        f"plane {self.plane} spine {self.spine} - leaf {self.leaf}",
                        paths=[[self.plane, self.spine]], hosts=list(range(self.hosts)))]

    def snapshots(self, t0_ns):
        # While the link is down (just before it returns, or the transfer would end).
        end = self.back if self.back is not None else 1.0
        return [(self._when(t0_ns, end) - 1000, "link down")]

    def recovers(self) -> bool:
        return self.back is not None

    def check(self, results):
        # An entry on the dead path that carried two new data packets after the link died
        # lost both, each a SACK hole: it is ASSUMED_BAD just before the link returns.
        f = results["failures"][0]
        t0 = results["t0_us"]
        data = {int(op) for op in wire.DATA_OPCODES}
        down = results["ev_states"]["link down"]
        checked = 0
        for key, evs in results["profiles"].items():
            h, q = (int(x) for x in key.split("."))
            for i, ev in enumerate(evs):
                if (i % results["planes"], (i // results["planes"]) % results["spines"]) != (
                        self.plane, self.spine):
                    continue
                # (sent while the link was down, early enough for the loss to be seen)
                after = sum(1 for t, _, e, op, dqp, rtx in results["sent"][str(h)]
                            if e == ev and op in data and dqp == q and not rtx
                            and f["at_us"] <= t + t0
                            < results["snapshot_us"]["link down"] - 3 * results["base_rtt_us"])
                if after >= 2:
                    checked += 1
                    assert down[key][i][2] == "ASSUMED_BAD", (
                        f"host {h} QP {q} entry {i}: {after} packets lost on the dead path, "
                        f"and it is {down[key][i][2]}")
        # (a transfer too small to reach the dead link checks none: the tests make sure theirs
        # does)
        results["dead_entries_checked"] = checked
        if self.back is not None:
            for key, entries in results["ev_states"]["end"].items():
                bad = [(p, sp, s) for p, sp, s in entries if s == "ASSUMED_BAD"]
                assert not bad, f"QP {key}: EVs still ASSUMED_BAD after the link came back: {bad}"


@dataclass
class PlaneDown(LinkDown):
    name = "planedown"
    about = "plane 1 dies whole mid-transfer (every NIC's port on it loses its link)"
    plane: int = 1
    back: float | None = None

    def failures(self, net, t0_ns):
        return [Failure(net.plane_links(self.plane), self._when(t0_ns, self.at), None,
                        f"plane {self.plane}", paths=[[self.plane, s] for s in range(net.spines)],
                        hosts=list(range(self.hosts)),
                        ports=[(h, self.plane) for h in range(self.hosts)])]

    def snapshots(self, t0_ns):
        return []

    def check(self, results):
        sent = sum(c["status_sent"] for c in results["rel"])
        got = sum(c["status_received"] for c in results["rel"])
        assert sent > 0 and got > 0, f"port status sent {sent}, received {got}"


SCENARIOS = {s.name: s for s in (Scenario, Lossy, LinkDown, PlaneDown)}
