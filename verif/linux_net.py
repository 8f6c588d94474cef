"""The system testbench's network when the fabric is Linux's: each simulated NIC port is a TAP
device in its leaf's namespace (verif/linux_fabric.py), so the kernel, not a model of it,
forwards every frame the NICs send.

Two halves, for the two processes involved:

* :func:`spec` (in the process that built the fabric, as root): what the simulation needs to
  reach it, as plain data for the testbench's parameters: each port's namespace and TAP, the
  leaf port MAC each NIC must send to, and the ``ip`` commands that take each spine link down
  and bring it back.
* :class:`LinuxNetwork` (in the simulation): the interface verif/network.py's
  :class:`~mrcnic.verif.network.Network` offers the testbench (``attach``, ``inject``,
  ``spine_link``, ``schedule``, ``totals``), over the TAPs. It polls every port each
  ``poll_ns`` of simulated time. The kernel forwards in real time, far faster than the
  simulation runs, so in simulated time the fabric has no latency and no queues: this is a
  test of what the routers do with the NIC's packets, not of timing (the model does timing).
  The fabric writes the captures (every link, both directions, wall-clock stamps).
"""

from __future__ import annotations

import subprocess
from collections import Counter

import cocotb
from cocotb.triggers import Timer

from mrcnic.verif.network import Network

__all__ = ["spec", "LinuxNetwork"]


def spec(fabric) -> dict:
    """What a simulation needs to use ``fabric`` (a built LinuxFabric), JSON-ready."""
    ports, macs, links = {}, {}, {}
    for h in range(fabric.hosts):
        for p in range(fabric.planes):
            ports[f"{h},{p}"] = list(fabric.port_spec(h, p))
            macs[f"{h},{p}"] = fabric.leaf_port_mac(h, p)
    for p in range(fabric.planes):
        for s in range(fabric.spines):
            for leaf in range(fabric.hosts):
                links[f"{p},{s},{leaf}"] = fabric.link_commands(p, s, leaf)
    return {"ports": ports, "leaf_macs": macs, "links": links, "planes": fabric.planes,
            "spines": fabric.spines, "hosts": fabric.hosts, "block": fabric.block,
            "block_bits": fabric.block_bits}


def _ip(commands) -> None:
    """Runs ``[(namespace, [batch lines])]`` with ``ip -n NS -batch -``."""
    for ns, lines in commands:
        r = subprocess.run(["ip", "-n", ns, "-batch", "-"], input="\n".join(lines) + "\n",
                           capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(f"ip -n {ns}: {r.stderr.strip() or r.stdout.strip()}")


class _Cable:
    """A spine-leaf cable of the Linux fabric, as a Failure's link: ``set_down`` runs the ``ip``
    commands that take both ends down, or bring them back with their routes."""

    def __init__(self, commands: dict):
        self.commands = commands
        self.down = False

    def set_down(self, down: bool) -> None:
        if down != self.down:
            _ip(self.commands["down" if down else "up"])
            self.down = down


class LinuxNetwork:
    """The testbench's network over the Linux fabric ``spec`` describes (see :func:`spec`)."""

    schedule = Network.schedule        # the same timetable of failures, on these cables

    def __init__(self, spec: dict, poll_ns: float = 100.0):
        from mrcnic.verif.linux_fabric import open_tap
        self.spec = spec
        self.planes, self.spines, self.hosts = spec["planes"], spec["spines"], spec["hosts"]
        self.block, self.block_bits = spec["block"], spec["block_bits"]
        self.taps = {tuple(int(x) for x in k.split(",")): open_tap(*v)
                     for k, v in spec["ports"].items()}
        self.cables = {tuple(int(x) for x in k.split(",")): _Cable(v)
                       for k, v in spec["links"].items()}
        self.ports: dict[tuple, object] = {}
        self.count = Counter()
        self.poll_ns = poll_ns
        cocotb.start_soon(self._poll())

    def leaf_mac(self, host: int, plane: int) -> str:
        """The MAC of the leaf port the NIC of ``host`` is cabled to on ``plane``."""
        return self.spec["leaf_macs"][f"{host},{plane}"]

    def attach(self, host: int, plane: int, send, mac=None) -> None:
        # (the fabric was told the NICs' MACs when it was built)
        self.ports[(host, plane)] = send

    def inject(self, host: int, plane: int, frame: bytes) -> None:
        self.taps[(host, plane)].send(frame)
        self.count["sent"] += 1

    async def _poll(self):
        while True:
            await Timer(round(self.poll_ns * 1000), "ps")
            for key, tap in self.taps.items():
                for frame in tap.recv():
                    send = self.ports.get(key)
                    if send is None:
                        self.count["arrived at an unattached port"] += 1
                        continue
                    self.count["delivered"] += 1
                    send(frame)

    def spine_link(self, plane: int, spine: int, leaf: int) -> list:
        return [self.cables[(plane, spine, leaf)]]

    def totals(self) -> Counter:
        return Counter({"delivered": self.count["delivered"], "sent": self.count["sent"]})

    def close(self) -> None:
        for tap in self.taps.values():
            tap.close()
        # (a link this run took down comes back: the fabric outlives the simulation)
        for cable in self.cables.values():
            cable.set_down(False)
