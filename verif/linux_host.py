"""A Linux host on a simulated board's port: a network namespace whose TAP carries the host's
IPv4 and IPv6 addresses, so that the kernel (ARP, neighbour discovery, IP, UDP) and the real host
tools talk to the board's management port as they would over a cable.

The pytest process makes the namespace (:class:`LinuxHost`); the simulation opens its TAP with
:func:`mrcnic.verif.linux_fabric.open_tap` and makes its sockets inside it with
:func:`mrcnic.verif.linux_fabric.in_netns`. The namespace is named like the Linux fabric's, so
:func:`~mrcnic.verif.linux_fabric.remove_stale` clears what a killed run left.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess

from mrcnic.verif.linux_fabric import COMMON_PREFIX, remove_stale

__all__ = ["LinuxHost", "unsupported", "HOST_MAC", "HOST_IPV4", "HOST_IPV6", "TAP"]

HOST_MAC, HOST_IPV4, HOST_IPV6 = "02:00:00:00:aa:01", "192.168.7.1", "fd00:7::1"
TAP = "tap0"
_RUNS = itertools.count()


def unsupported() -> str | None:
    """Why this process cannot make a host namespace (None: it can)."""
    if os.geteuid() != 0:
        return f"a host namespace needs root (CAP_NET_ADMIN); this process runs as uid {os.geteuid()}"
    if shutil.which("ip") is None:
        return "iproute2's ip is not installed"
    if not os.path.exists("/dev/net/tun"):
        return "/dev/net/tun is missing (no TUN/TAP support)"
    return None


def _ip(*args: str) -> None:
    p = subprocess.run(["ip", *args], capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError(f"ip {' '.join(args)} failed: {p.stderr.strip()}")


class LinuxHost:
    """A namespace with the host's addresses (``mac``, ``ipv4``/24 and ``ipv6``/64, no duplicate
    address detection) on the TAP :data:`TAP`, for the life of the ``with`` block; with
    ``ports`` > 1, on a Linux bridge (a real switch) whose ports are the TAPs ``taps``."""

    def __init__(self, mac: str = HOST_MAC, ipv4: str = HOST_IPV4, ipv6: str = HOST_IPV6,
                 ports: int = 1):
        self.mac, self.ipv4, self.ipv6 = mac, ipv4, ipv6
        self.netns = f"{COMMON_PREFIX}{os.getpid():x}xh{next(_RUNS):x}"
        self.taps = [TAP] if ports == 1 else [f"tap{k}" for k in range(ports)]
        self._bridged = ports > 1

    def __enter__(self) -> LinuxHost:
        remove_stale()
        _ip("netns", "add", self.netns)
        try:
            n = ("-n", self.netns)
            _ip(*n, "link", "set", "lo", "up")
            own = "br0" if self._bridged else TAP
            if self._bridged:
                _ip(*n, "link", "add", own, "type", "bridge")
            for tap in self.taps:
                _ip(*n, "tuntap", "add", "dev", tap, "mode", "tap")
                if self._bridged:
                    _ip(*n, "link", "set", tap, "master", own, "up")
            _ip(*n, "link", "set", own, "address", self.mac, "up")
            _ip(*n, "addr", "add", f"{self.ipv4}/24", "dev", own)
            _ip(*n, "-6", "addr", "add", f"{self.ipv6}/64", "dev", own, "nodad")
        except Exception:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        subprocess.run(["ip", "netns", "del", self.netns], capture_output=True)

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        """A command inside the namespace (its output captured)."""
        return subprocess.run(["ip", "netns", "exec", self.netns, *args], capture_output=True,
                              text=True, timeout=timeout)
