"""A real Linux SRv6 uN fabric: the multi-plane leaf-spine network of verif/fabric.py, built from
network namespaces, so that the kernel (not a model of it) forwards the NIC's frames.

Why: the network model (verif/network.py) and the NIC's route format are checked against what
an independent uN implementation does with the same frames (RFC 9800 NEXT-CSID in Linux's
seg6local). Each leaf and spine is a Linux router in its own namespace; each NIC port is a TAP
device in its leaf's namespace that a testbench (in this process or another) reads and writes.

Layout (plane ``p``, host ``h``, spine ``s``; uSIDs, addresses and port MACs are verif/fabric.py's,
imported from there, so the model and the kernel are cabled alike):

* leaf ``h`` owns ``p << 12 | 0x20 + h``, spine ``s`` owns ``p << 12 | 0x10 + s``, the NIC of
  host ``h`` owns ``p << 12 | 0x30 + h`` (the host is the last SR node).
* every switch routes its own uSID with ``seg6local action End flavors next-csid`` (uN) on an
  always-up ``ifb`` device (``lo`` would make it a reject route, and an uplink would take the
  route with it when the link goes down); a plain route per neighbour's uSID prefix points at
  the link to it, through a static neighbour entry. No ND, no DAD, no addresses at all, ports
  with multicast off: the routers put nothing on the links but forwarded frames (no ND, MLD
  or RS, and no ICMP errors, having no source address for them).
* a leaf routes its host's uSID prefix to the TAP, next hop the NIC's MAC (a permanent
  neighbour entry: the simulated NIC never answers ND).

Opening a port from another process (e.g. a cocotb testbench): the TAPs are persistent and
live in the leaf namespaces from the start; :func:`open_tap` (given :meth:`LinuxFabric.port_spec`)
enters that namespace with setns(2) (via ctypes: Python 3.11 has no ``os.setns``) just long
enough to open ``/dev/net/tun``, attaches with TUNSETIFF by name and returns to its own
namespace; the fd keeps working from there. A TAP takes one fd at a time: close the builder's
own :meth:`LinuxFabric.port` first (:meth:`LinuxFabric.close_port`). An open fd keeps its
namespace alive (invisibly) after teardown until it is closed.

Observation: one TPACKET_V2 ring per namespace. The ring copies a frame when the kernel taps it,
before the next switch's seg6local rewrites the shared buffer in place (a plain packet socket
can show the already-shifted address). A link's frames are the sender's outgoing frames on its
end (for the host-to-leaf link: the frames the leaf's TAP receives).
"""

from __future__ import annotations

import atexit
import ctypes
import fcntl
import ipaddress
import itertools
import mmap
import os
import random
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from mrcnic.verif.fabric import (
    BLOCK,
    BLOCK_BITS,
    FORMATS,
    host_usid,
    leaf_usid,
    neighbours,
    nic_mac,
    node_usid,
    port_mac,
    spine_usid,
)

# (FORMATS and the uSID numbering are fabric.py's, exported here too for the fabric's users)
__all__ = ["FORMATS", "COMMON_PREFIX", "FabricUnavailable", "unsupported", "LinuxFabric", "TapPort",
           "open_tap", "in_netns", "Hop", "Trace", "observe", "node_name", "link_name",
           "leaf_usid", "spine_usid", "host_usid", "remove_stale", "default_nic_mac", "nic_frame"]

#: every name a fabric makes starts with this, then its pid in hex, "x", a per-process count
COMMON_PREFIX = "mrcf"
_NAME_RE = re.compile(rf"^{COMMON_PREFIX}([0-9a-f]+)x[0-9a-f]+")
_RUNS = itertools.count()
_LIVE: set[str] = set()          # this process's fabrics' prefixes

# Linux ABI numbers
_CLONE_NEWNET = 0x40000000
_TUNSETIFF = 0x400454CA
_IFF_TAP, _IFF_NO_PI = 0x0002, 0x1000
_SIOCGIFFLAGS, _IFF_RUNNING = 0x8913, 0x40
_SOL_PACKET, _PACKET_VERSION, _PACKET_RX_RING, _PACKET_STATISTICS = 263, 10, 5, 6
_TPACKET_V2, _TP_STATUS_USER = 1, 1
_ETH_P_ALL = 0x0003
_PACKET_OUTGOING = 4

#: snmp6 counters that say why a router dropped a packet
_DROP_COUNTERS = {
    "Ip6InHdrErrors": "hop limit exceeded (or a bad header)",
    "Ip6InNoRoutes": "no route for the destination",
    "Ip6InAddrErrors": "destination not acceptable",
    "Ip6InDiscards": "discarded on input",
    "Ip6OutNoRoutes": "no route on output",
    "Ip6OutDiscards": "discarded on output",
    "Ip6InTooBigErrors": "too big for the next link",
    "Ip6InTruncatedPkts": "truncated",
}

Node = tuple[str, int, int]          # (kind "host" | "leaf" | "spine", plane, number)


class FabricUnavailable(RuntimeError):
    """This machine (or user) cannot build the fabric; the message says exactly why."""


def node_name(node: Node) -> str:
    """``p0_leaf1``: the network model's name for a node (its pcap files use them)."""
    kind, plane, n = node
    return f"p{plane}_{kind}{n}"


def link_name(src: Node, dst: Node) -> str:
    """``p0_leaf1-p0_spine0``: one direction of a cable, as the model names its pcap."""
    return f"{node_name(src)}-{node_name(dst)}"


# --- namespaces --------------------------------------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _libc.setns(fd, _CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


@contextmanager
def in_netns(name: str) -> Iterator[None]:
    """The calling thread in network namespace ``name`` (as ``ip netns`` made it) for the block:
    sockets, TAP fds and /proc/sys/net files opened inside stay bound to it afterwards."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        target = os.open(f"/run/netns/{name}", os.O_RDONLY | os.O_CLOEXEC)
        try:
            _setns(target)
            try:
                yield
            finally:
                _setns(own)
        finally:
            os.close(target)
    finally:
        os.close(own)


def _run(args: list[str], stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run(args, input=stdin, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({p.returncode}): {p.stderr.strip()}"
                           + (f"\ncommands:\n{stdin}" if stdin else ""))
    return p


def _ip_batch(netns: str | None, lines: list[str], force: bool = False) -> None:
    """Many ``ip`` commands in one process (``ip -n NS -batch -``); ``force``: all of them,
    whatever fails (best effort, no error)."""
    args = ["ip"] + (["-n", netns] if netns else []) + (["-force"] if force else []) + ["-batch", "-"]
    _run(args, "\n".join(lines) + "\n", check=not force)


def _netns_list() -> list[str]:
    out = _run(["ip", "netns", "list"]).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _root_links() -> list[str]:
    out = _run(["ip", "-o", "link", "show"]).stdout
    return [m.group(1) for m in re.finditer(r"^\d+: ([^:@\s]+)", out, re.M)]


_UNSUPPORTED: list[str | None] = []


def unsupported() -> str | None:
    """Why this process cannot build a fabric (None: it can). Checked once: root, ``ip``,
    /dev/net/tun, ``ip netns``, and a uN (seg6local NEXT-CSID) route in a probe namespace."""
    if os.geteuid() != 0:
        return (f"the Linux fabric needs root (CAP_NET_ADMIN, to make network namespaces, "
                f"veths and TAPs); this process runs as uid {os.geteuid()}")
    if _UNSUPPORTED:
        return _UNSUPPORTED[0]
    reason = _probe()
    _UNSUPPORTED.append(reason)
    return reason


def _probe() -> str | None:
    if shutil.which("ip") is None:
        return "iproute2's ip is not installed"
    if not os.path.exists("/dev/net/tun"):
        return "/dev/net/tun is missing (no TUN/TAP support)"
    ns = f"{COMMON_PREFIX}{os.getpid():x}xfff-probe"
    p = _run(["ip", "netns", "add", ns], check=False)
    if p.returncode != 0:
        return f"ip netns add failed: {p.stderr.strip()}"
    try:
        cmds = [["link", "add", "pa", "type", "veth", "peer", "name", "pb"],
                ["link", "add", "pi", "type", "ifb"],
                ["link", "set", "pi", "up"],
                ["-6", "route", "add", "fcbb:bb00:20::/48", "encap", "seg6local", "action", "End",
                 "flavors", "next-csid", "lblen", "32", "nflen", "16", "count", "dev", "pi"]]
        for c in cmds:
            p = _run(["ip", "-n", ns] + c, check=False)
            if p.returncode != 0:
                return f"ip {' '.join(c)} failed here: {p.stderr.strip()}"
        out = _run(["ip", "-n", ns, "-6", "-d", "route", "show"]).stdout
        if "next-csid" not in out:
            return f"the kernel did not keep a seg6local next-csid route: {out.strip()!r}"
    finally:
        _run(["ip", "netns", "del", ns], check=False)
    return None


def _stale(name: str) -> bool:
    """A name of a fabric whose process is gone."""
    m = _NAME_RE.match(name)
    if not m:
        return False
    pid = int(m.group(1), 16)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError):
        return False
    return False


def remove_stale() -> list[str]:
    """Removes what earlier runs left (namespaces and root interfaces with the common prefix
    whose process is dead); live fabrics of other processes are left alone. Returns the names."""
    gone = []
    for ns in _netns_list():
        if _stale(ns):
            _run(["ip", "netns", "del", ns], check=False)
            gone.append(ns)
    for link in _root_links():
        if _stale(link):
            _run(["ip", "link", "del", link], check=False)
            gone.append(link)
    return gone


# --- TAP ports ---------------------------------------------------------------------------------

class TapPort:
    """A NIC port: a non-blocking TAP fd (IFF_TAP | IFF_NO_PI, whole Ethernet frames, no FCS)."""

    def __init__(self, fd: int, name: str):
        self.fd, self.name = fd, name

    def fileno(self) -> int:
        return self.fd

    def send(self, frame: bytes) -> None:
        os.write(self.fd, bytes(frame))

    def recv(self) -> list[bytes]:
        """Every frame waiting (none: an empty list); never blocks."""
        out = []
        while True:
            try:
                out.append(os.read(self.fd, 65536))
            except BlockingIOError:
                return out

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def open_tap(netns: str, ifname: str) -> TapPort:
    """Attaches to the persistent TAP ``ifname`` in namespace ``netns`` from any root process
    (one fd per TAP at a time: EBUSY otherwise)."""
    with in_netns(netns):
        try:
            socket.if_nametoindex(ifname)
        except OSError:
            # TUNSETIFF would make a new, unconnected TAP of that name instead
            raise FileNotFoundError(f"no TAP {ifname} in namespace {netns}") from None
        fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            fcntl.ioctl(fd, _TUNSETIFF, struct.pack("16sH22x", ifname.encode(), _IFF_TAP | _IFF_NO_PI))
            _wait_running(ifname)
        except OSError:
            os.close(fd)
            raise
    return TapPort(fd, ifname)


def _wait_running(ifname: str, timeout: float = 2.0) -> None:
    """Until the kernel has seen the TAP's carrier come up (it drops what it would send to a
    TAP without one: the qdisc is a no-op until then)."""
    with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
        end = time.monotonic() + timeout
        while True:
            ifr = fcntl.ioctl(s, _SIOCGIFFLAGS, struct.pack("16sH22x", ifname.encode(), 0))
            if struct.unpack_from("H", ifr, 16)[0] & _IFF_RUNNING:
                return
            if time.monotonic() > end:
                raise TimeoutError(f"TAP {ifname} has no carrier {timeout} s after it was opened")
            time.sleep(0.002)


# --- capture -----------------------------------------------------------------------------------

class _Ring:
    """A TPACKET_V2 receive ring on every interface of the namespace it is made in."""
    FRAME, BLOCK, BLOCKS = 1 << 14, 1 << 17, 4

    def __init__(self):
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(_ETH_P_ALL))
        self.sock.setsockopt(_SOL_PACKET, _PACKET_VERSION, _TPACKET_V2)
        self.n = self.BLOCK // self.FRAME * self.BLOCKS
        self.sock.setsockopt(_SOL_PACKET, _PACKET_RX_RING,
                             struct.pack("IIII", self.BLOCK, self.BLOCKS, self.FRAME, self.n))
        self.map = mmap.mmap(self.sock.fileno(), self.BLOCK * self.BLOCKS)
        self.i = 0

    def drain(self) -> list[tuple[int, int, int, bytes]]:
        """(ifindex, packet type, ns timestamp, frame) of each frame the ring holds."""
        out = []
        while True:
            base = self.i * self.FRAME
            if not struct.unpack_from("I", self.map, base)[0] & _TP_STATUS_USER:
                return out
            _, snap, mac, _, sec, nsec = struct.unpack_from("IIHHII", self.map, base + 4)
            _, _, ifindex, _, pkttype = struct.unpack_from("HHiHB", self.map, base + 32)
            out.append((ifindex, pkttype, sec * 1_000_000_000 + nsec,
                        bytes(self.map[base + mac:base + mac + snap])))
            struct.pack_into("I", self.map, base, 0)
            self.i = (self.i + 1) % self.n

    def drops(self) -> int:
        """Frames the ring had no room for since the last call."""
        _, dropped = struct.unpack("II", self.sock.getsockopt(_SOL_PACKET, _PACKET_STATISTICS, 8))
        return dropped

    def close(self):
        self.map.close()
        self.sock.close()


@dataclass
class _Record:
    src: Node
    dst: Node
    ns: int
    frame: bytes


class _Collector:
    """The records captured while it is open (see :meth:`LinuxFabric.capture`)."""

    def __init__(self, fabric: LinuxFabric):
        self.fabric = fabric
        self.records: list[_Record] = []
        self.lost = 0

    def wait_quiet(self, quiet: float = 0.05, timeout: float = 2.0) -> None:
        """Until no new frame has been captured for ``quiet`` seconds (or ``timeout`` passed)."""
        end = time.monotonic() + timeout
        seen, since = -1, time.monotonic()
        while time.monotonic() < end:
            self.fabric._drain()
            if len(self.records) != seen:
                seen, since = len(self.records), time.monotonic()
            elif time.monotonic() - since >= quiet:
                return
            time.sleep(min(0.005, quiet / 4))


# --- observation -------------------------------------------------------------------------------

def _upper(frame: bytes) -> tuple[int, int | None] | None:
    """(offset past the outer IPv6 header and its extension headers, offset of an SRH or None)."""
    if len(frame) < 54 or frame[12:14] != b"\x86\xdd":
        return None
    nh, at, srh = frame[20], 54, None
    while nh in (0, 43, 60) and at + 8 <= len(frame):
        if nh == 43:
            srh = at
        nh, at = frame[at], at + 8 + 8 * frame[at + 1]
    return at, srh


@dataclass(frozen=True)
class Hop:
    """A frame on one link: from node ``src`` to node ``dst``, with its outer destination, hop
    limit and SRH segments left (None: no SRH) as it was on that link."""
    src: Node
    dst: Node
    dst_addr: str
    hop_limit: int
    segments_left: int | None
    frame: bytes = field(repr=False)
    ns: int = field(default=0, repr=False)

    @staticmethod
    def of(rec: _Record) -> Hop:
        f = rec.frame
        up = _upper(f)
        sl = f[up[1] + 3] if up and up[1] is not None else None
        return Hop(rec.src, rec.dst, str(ipaddress.IPv6Address(f[38:54])), f[21], sl, f, rec.ns)

    def __str__(self):
        sl = "" if self.segments_left is None else f" SL={self.segments_left}"
        return f"{link_name(self.src, self.dst)} {self.dst_addr} hlim={self.hop_limit}{sl}"


@dataclass
class Trace:
    """What the fabric did with one frame: the links it crossed, in order, and where it ended:
    ``delivered`` to a (host, plane) NIC port, or ``dropped_at`` a switch, ``reason`` being
    the counters that moved there."""
    hops: list[Hop]
    delivered: tuple[int, int] | None = None
    dropped_at: Node | None = None
    reason: str = ""

    @property
    def nodes(self) -> list[Node]:
        """The nodes the frame reached, the sender first."""
        return [self.hops[0].src] + [h.dst for h in self.hops] if self.hops else []

    @property
    def path(self) -> list[str]:
        return [node_name(n) for n in self.nodes]

    def __str__(self):
        end = (f"delivered to host {self.delivered[0]} plane {self.delivered[1]}" if self.delivered
               else f"dropped at {node_name(self.dropped_at) if self.dropped_at else '?'}: {self.reason}")
        return "\n".join([str(h) for h in self.hops] + [end])


def observe(fabric: LinuxFabric, host: int, plane: int, frame: bytes, timeout: float = 2.0,
            quiet: float = 0.05) -> Trace:
    """Sends ``frame`` from host ``host``'s port on ``plane`` and follows it: every link it
    crossed (frames recognised by what follows the outer IPv6 header and its extension headers,
    which no switch changes) until the fabric is quiet, then where it ended."""
    frame = bytes(frame)
    up = _upper(frame)
    if up is None:
        raise ValueError("observe follows IPv6 frames only")
    key = frame[up[0]:]
    for h in range(fabric.hosts):               # attached, so that the leaves can deliver
        try:
            fabric.port(h, plane)
        except OSError:
            pass                                 # (EBUSY: another process holds it)
    before = {n: fabric.snmp(n) for n in fabric.switches(plane)}
    with fabric.capture() as cap:
        fabric.port(host, plane).send(frame)
        cap.wait_quiet(quiet, timeout)
    if cap.lost:
        raise RuntimeError(f"the capture rings lost {cap.lost} frames: the trace would be incomplete")
    hops = []
    for rec in cap.records:
        u = _upper(rec.frame)
        if u is not None and rec.frame[u[0]:] == key:
            hops.append(Hop.of(rec))
    hops.sort(key=lambda h: h.ns)
    trace = Trace(hops)
    if not hops:
        trace.reason = "never seen on the host's link"
        return trace
    last = hops[-1].dst
    if last[0] == "host":
        trace.delivered = (last[2], last[1])
        return trace
    trace.dropped_at = last
    after = fabric.snmp(last)
    why = [f"{k} ({_DROP_COUNTERS[k]})" for k in _DROP_COUNTERS
           if after.get(k, 0) > before.get(last, {}).get(k, 0)]
    moved = after.get("Ip6OutForwDatagrams", 0) - before.get(last, {}).get("Ip6OutForwDatagrams", 0)
    if moved and not why:
        why.append("forwarded, then lost at the output (a NIC port whose TAP no process holds has "
                   "no carrier)")
    sid = fabric.sid_errors_delta(last)
    if sid and why:
        why.append(f"SID error counter +{sid} (the forwarding after the uN shift failed)")
    elif sid:
        why.append(f"SID error counter +{sid} (uN found no uSID after its own and no SRH segment "
                   f"left: End cannot go on)")
    trace.reason = "; ".join(why) or "no counter moved"
    return trace


# --- the fabric --------------------------------------------------------------------------------

def default_nic_mac(host: int, plane: int) -> str:
    """A NIC port's MAC unless told otherwise: fabric.nic_mac's, the one the system testbench
    gives host ``host``'s NIC (on every plane)."""
    return nic_mac(host)


def _mac(node: Node, peer: Node) -> str:
    """The MAC of ``node``'s port toward ``peer``, as ``ip`` writes it: fabric.port_mac's, the
    one the network model gives that port (a frame the model forwards and the same frame the
    kernel forwards leave with the same Ethernet header)."""
    return ":".join(f"{b:02x}" for b in port_mac(node, peer).to_bytes(6, "big"))


class LinuxFabric:
    """``planes`` planes of ``hosts`` leaves (one host each) and ``spines`` spines, as Linux
    routers in namespaces. A context manager: ``with LinuxFabric(...) as fab:`` builds it (after
    removing stale leftovers) and always tears it down, on errors, Ctrl-C and SIGTERM too.

    Parameters
    ----------
    planes, spines, hosts : 1-4, 1-8, 2-8.
    block, block_bits : the locator block and its length, 16 (F1616) or 32 (F3216); see FORMATS.
    nic_macs : {(host, plane): MAC} of the NICs' ports (the leaves send them their frames);
        default :func:`default_nic_mac`.
    pcap_dir : if given, one pcap per link direction, ``p0_leaf0-p0_spine1.pcap`` and so on,
        stamped in wall-clock time, written as frames go by.
    mtu : every interface's MTU (jumbo by default: the NIC's 9000-byte packets plus the outer
        header fit).
    """

    def __init__(self, planes: int = 2, spines: int = 2, hosts: int = 2, block: int = BLOCK,
                 block_bits: int = BLOCK_BITS, nic_macs: dict | None = None,
                 pcap_dir: str | Path | None = None, mtu: int = 9216):
        for name, v, lo, hi in (("planes", planes, 1, 4), ("spines", spines, 1, 8),
                                ("hosts", hosts, 2, 8)):
            if not isinstance(v, int) or not lo <= v <= hi:
                raise ValueError(f"{name} must be an integer from {lo} to {hi}, not {v!r}")
        if block_bits not in (16, 32):
            raise ValueError(f"block_bits must be 16 (F1616) or 32 (F3216), not {block_bits}")
        if not 0 < block < 1 << block_bits:
            raise ValueError(f"block {block:#x} does not fit in {block_bits} bits")
        self.planes, self.spines, self.hosts = planes, spines, hosts
        self.block, self.block_bits, self.mtu = block, block_bits, mtu
        self._nic_macs = {(h, p): (nic_macs or {}).get((h, p), default_nic_mac(h, p))
                          for h in range(hosts) for p in range(planes)}
        self.pcap_dir = Path(pcap_dir) if pcap_dir is not None else None
        # <= 13 characters (pid < 2**22, run number < 256): interface names fit in 15
        self.prefix = next(p for p in (f"{COMMON_PREFIX}{os.getpid():x}x{next(_RUNS) % 256:x}"
                                       for _ in range(257)) if p not in _LIVE)
        self._ports: dict[tuple[int, int], TapPort] = {}
        self._rings: dict[str, _Ring] = {}
        self._snmp: dict[str, object] = {}
        self._ifmap: dict[tuple[str, int], tuple[Node, Node, bool]] = {}
        self._pcaps: dict[tuple[Node, Node], object] = {}
        self._collectors: list[_Collector] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._sid_errors: dict[Node, int] = {}
        self._down: set[tuple[int, int, int]] = set()
        self._built: list[str] = []
        self._old_handlers: dict[int, object] = {}

    # names and addresses

    def namespace(self, node: Node) -> str:
        """The namespace of a leaf or spine (a host's is its leaf's)."""
        kind, plane, n = node
        return f"{self.prefix}-{node_name(('leaf' if kind == 'host' else kind, plane, n))}"

    def _ifname(self, kind: str, n: int | None = None) -> str:
        # "s3": a leaf's port to spine 3; "l3": a spine's port to leaf 3; "h": the TAP; "i": ifb
        return f"{self.prefix}{kind}{'' if n is None else n}"

    def usid(self, node: Node) -> int:
        return node_usid(node)

    def addr(self, *usids: int) -> str:
        """The carrier address: the block, then ``usids``, zero-filled."""
        per = (128 - self.block_bits) // 16
        if len(usids) > per:
            raise ValueError(f"{len(usids)} uSIDs do not fit a carrier ({per} do)")
        a = self.block
        for u in usids:
            a = (a << 16) | u
        return str(ipaddress.IPv6Address(a << 16 * (per - len(usids))))

    def prefix_of(self, node: Node) -> str:
        """The uSID prefix a node owns: block:uSID::/(block_bits + 16)."""
        return f"{self.addr(self.usid(node))}/{self.block_bits + 16}"

    def leaf_port_mac(self, host: int, plane: int) -> str:
        """The MAC of the leaf's port that faces host ``host`` on ``plane``: where its NIC sends
        (fabric.port_mac(leaf, host), what the system testbench gives the NIC as its next hop)."""
        return _mac(("leaf", plane, host), ("host", plane, host))

    def nic_mac(self, host: int, plane: int) -> str:
        return self._nic_macs[(host, plane)]

    def set_nic_mac(self, host: int, plane: int, mac: str) -> None:
        """The NIC port's MAC changed: the leaf now sends it there."""
        self._nic_macs[(host, plane)] = mac
        if self._built:
            _ip_batch(self.namespace(("leaf", plane, host)),
                      [f"neigh replace fe80::1 lladdr {mac} dev {self._ifname('h')} nud permanent"])

    def port_spec(self, host: int, plane: int) -> tuple[str, str]:
        """(namespace, TAP name) of a NIC port: what :func:`open_tap` needs in another process."""
        return self.namespace(("leaf", plane, host)), self._ifname("h")

    def switches(self, plane: int | None = None) -> list[Node]:
        ps = range(self.planes) if plane is None else [plane]
        return ([("leaf", p, h) for p in ps for h in range(self.hosts)]
                + [("spine", p, s) for p in ps for s in range(self.spines)])

    def links(self) -> list[tuple[Node, Node]]:
        """Every link direction (src, dst)."""
        out = []
        for p in range(self.planes):
            for h in range(self.hosts):
                host, leaf = ("host", p, h), ("leaf", p, h)
                out += [(host, leaf), (leaf, host)]
                for s in range(self.spines):
                    out += [(leaf, ("spine", p, s)), (("spine", p, s), leaf)]
        return out

    # lifecycle

    def __enter__(self) -> LinuxFabric:
        reason = unsupported()
        if reason:
            raise FabricUnavailable(reason)
        remove_stale()
        self._hook_signals()
        atexit.register(self.close)
        _LIVE.add(self.prefix)
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _hook_signals(self):
        if threading.current_thread() is not threading.main_thread():
            return

        def stop(signum, _frame):
            raise SystemExit(128 + signum)     # unwinds through __exit__
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) is signal.SIG_DFL:
                self._old_handlers[sig] = signal.signal(sig, stop)

    def _build(self):
        spaces = [self.namespace(n) for n in self.switches()]
        _ip_batch(None, [f"netns add {ns}" for ns in spaces])
        self._built = spaces
        for ns in spaces:
            self._sysctls(ns)
        lb, mtu = self.block_bits, self.mtu
        uN = f"encap seg6local action End flavors next-csid lblen {lb} nflen 16 count dev {self._ifname('i')}"
        for p in range(self.planes):
            for h in range(self.hosts):
                leaf = ("leaf", p, h)
                tap = self._ifname("h")
                cmds = [*self._anchor(),
                        f"tuntap add dev {tap} mode tap",
                        f"link set {tap} address {self.leaf_port_mac(h, p)} mtu {mtu} multicast off up",
                        f"route add {self.prefix_of(leaf)} {uN}",
                        f"neigh add fe80::1 lladdr {self.nic_mac(h, p)} dev {tap} nud permanent",
                        f"route add {self.prefix_of(('host', p, h))} via fe80::1 dev {tap}"]
                for s in range(self.spines):
                    spine = ("spine", p, s)
                    cmds.append(
                        f"link add {self._ifname('s', s)} address {self._port_mac(leaf, spine)} "
                        f"mtu {mtu} type veth peer name {self._ifname('l', h)} "
                        f"address {self._port_mac(spine, leaf)} mtu {mtu} netns {self.namespace(spine)}")
                    cmds.append(f"link set {self._ifname('s', s)} multicast off up")
                    cmds += self._link_routes(leaf, spine)
                _ip_batch(self.namespace(leaf), cmds)
            for s in range(self.spines):
                spine = ("spine", p, s)
                cmds = [*self._anchor(),
                        f"route add {self.prefix_of(spine)} {uN}"]
                for h in range(self.hosts):
                    cmds.append(f"link set {self._ifname('l', h)} multicast off up")
                    cmds += self._link_routes(spine, ("leaf", p, h))
                _ip_batch(self.namespace(spine), cmds)
        for ns in spaces:
            self._sysctls(ns, forwarding=True)
        self._start_capture()

    def _sysctls(self, ns: str, forwarding: bool = False):
        """Before any interface exists, the defaults they will take (no DAD, no addresses, no
        RS); once they all exist (with multicast off), forwarding, which then joins no
        all-routers group, so the routers send no MLD reports."""
        if forwarding:
            values = {"all": {"forwarding": 1}}
        else:
            conf = {"accept_dad": 0, "dad_transmits": 0, "accept_ra": 0, "router_solicitations": 0,
                    "seg6_enabled": 1}
            values = {"all": conf, "default": conf | {"addr_gen_mode": 1}}
        with in_netns(ns):
            for which, kv in values.items():
                for k, v in kv.items():
                    with open(f"/proc/sys/net/ipv6/conf/{which}/{k}", "w") as f:
                        f.write(f"{v}\n")

    def _anchor(self) -> list[str]:
        return [f"link add {self._ifname('i')} type ifb", f"link set {self._ifname('i')} multicast off up"]

    def _port_mac(self, node: Node, peer: Node) -> str:
        return _mac(node, peer)

    def _port(self, node: Node, peer: Node) -> str:
        """The interface of ``node`` toward ``peer`` (a leaf's toward its host: the TAP)."""
        if node[0] == "leaf":
            return self._ifname("h") if peer[0] == "host" else self._ifname("s", peer[2])
        return self._ifname("l", peer[2])

    def _link_routes(self, node: Node, peer: Node) -> list[str]:
        dev = self._port(node, peer)
        return [f"neigh replace fe80::1 lladdr {self._port_mac(peer, node)} dev {dev} nud permanent",
                f"route replace {self.prefix_of(peer)} via fe80::1 dev {dev}"]

    def _start_capture(self):
        for node in self.switches():
            ns = self.namespace(node)
            with in_netns(ns):
                self._rings[ns] = _Ring()
                self._snmp[ns] = open("/proc/thread-self/net/snmp6")     # kept open: re-read
                for peer in neighbours(node, self.hosts, self.spines):
                    idx = socket.if_nametoindex(self._port(node, peer))
                    # outgoing frames: node -> peer; incoming ones only on the TAP: host -> leaf
                    self._ifmap[(ns, idx)] = (node, peer, peer[0] == "host")
        if self.pcap_dir is not None:
            # (imported here: scapy, which it needs, is slow to import for a process that only
            # opens a TAP)
            from mrcnic.verif.pcap import Pcap
            self.pcap_dir.mkdir(parents=True, exist_ok=True)
            for a, b in self.links():
                self._pcaps[(a, b)] = Pcap(self.pcap_dir / f"{link_name(a, b)}.pcap", sync=True)
        self._wake_r, self._wake_w = os.pipe()
        self._thread = threading.Thread(target=self._loop, name=f"{self.prefix}-capture", daemon=True)
        self._thread.start()

    def _loop(self):
        poller = select.poll()
        for ring in self._rings.values():
            poller.register(ring.sock, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        while not self._stop.is_set():
            poller.poll(200)
            self._drain()

    def _drain(self):
        """Moves what the rings hold to the open collectors and the pcaps."""
        with self._lock:
            if self._stop.is_set() and not self._rings:
                return
            for ns, ring in self._rings.items():
                lost = ring.drops()
                for c in self._collectors:
                    c.lost += lost
                for ifindex, pkttype, ns_time, frame in ring.drain():
                    where = self._ifmap.get((ns, ifindex))
                    if where is None:
                        continue
                    node, peer, tap = where
                    if pkttype == _PACKET_OUTGOING:
                        rec = _Record(node, peer, ns_time, frame)
                    elif tap:
                        rec = _Record(peer, node, ns_time, frame)
                    else:
                        continue                 # the sender's side already has it
                    for c in self._collectors:
                        c.records.append(rec)
                    pcap = self._pcaps.get((rec.src, rec.dst))
                    if pcap is not None:
                        pcap.write(frame, ns_time)

    @contextmanager
    def capture(self) -> Iterator[_Collector]:
        """Collects every link's frames while open: ``.records`` of (src, dst, ns, frame)."""
        c = _Collector(self)
        self._drain()                            # what came before is not this collector's
        with self._lock:
            self._collectors.append(c)
        try:
            yield c
        finally:
            self._drain()
            with self._lock:
                self._collectors.remove(c)

    def close(self) -> None:
        """Tears everything down (idempotent): ports, capture, pcaps, namespaces."""
        atexit.unregister(self.close)
        for sig, old in self._old_handlers.items():
            signal.signal(sig, old)
        self._old_handlers.clear()
        for port in self._ports.values():
            port.close()
        self._ports.clear()
        if self._thread is not None:
            self._stop.set()
            os.write(self._wake_w, b"x")
            self._thread.join()
            self._thread = None
            os.close(self._wake_r)
            os.close(self._wake_w)
        with self._lock:
            for ring in self._rings.values():
                ring.close()
            self._rings.clear()
            for f in self._snmp.values():
                f.close()
            self._snmp.clear()
            for pcap in self._pcaps.values():
                pcap.close()
            self._pcaps.clear()
        if self._built:
            _ip_batch(None, [f"netns del {ns}" for ns in self._built], force=True)
            self._built = []
        _LIVE.discard(self.prefix)

    # ports

    def port(self, host: int, plane: int) -> TapPort:
        """Host ``host``'s NIC port on ``plane``, opened in this process (once; kept open)."""
        key = (host, plane)
        if key not in self._ports:
            self._ports[key] = open_tap(*self.port_spec(host, plane))
        return self._ports[key]

    def close_port(self, host: int, plane: int) -> None:
        """Lets another process open that TAP."""
        port = self._ports.pop((host, plane), None)
        if port is not None:
            port.close()

    # failures

    def _spine_link(self, plane: int, spine: int, leaf: int):
        if not (0 <= plane < self.planes and 0 <= spine < self.spines and 0 <= leaf < self.hosts):
            raise ValueError(f"no link between spine {spine} and leaf {leaf} on plane {plane}")
        return ("leaf", plane, leaf), ("spine", plane, spine)

    def link_down(self, plane: int, spine: int, leaf: int) -> None:
        """Both ends of the spine-leaf cable down (the kernel then drops the routes over it)."""
        a, b = self._spine_link(plane, spine, leaf)
        for node, peer in ((a, b), (b, a)):
            _ip_batch(self.namespace(node), [f"link set {self._port(node, peer)} down"])
        self._down.add((plane, spine, leaf))

    def link_up(self, plane: int, spine: int, leaf: int) -> None:
        """Both ends up again, with the neighbour entries and routes the kernel removed."""
        a, b = self._spine_link(plane, spine, leaf)
        for node, peer in ((a, b), (b, a)):
            _ip_batch(self.namespace(node), [f"link set {self._port(node, peer)} up"]
                      + self._link_routes(node, peer))
        self._down.discard((plane, spine, leaf))

    def link_commands(self, plane: int, spine: int, leaf: int) -> dict:
        """What :meth:`link_down` and :meth:`link_up` run, as data another root process can
        run (``ip -n NS -batch -``): {"down": [(namespace, lines)], "up": [...]}."""
        a, b = self._spine_link(plane, spine, leaf)
        return {"down": [(self.namespace(n), [f"link set {self._port(n, p)} down"])
                         for n, p in ((a, b), (b, a))],
                "up": [(self.namespace(n), [f"link set {self._port(n, p)} up"]
                        + self._link_routes(n, p)) for n, p in ((a, b), (b, a))]}

    @property
    def down_links(self) -> frozenset[tuple[int, int, int]]:
        """(plane, spine, leaf) of the links :meth:`link_down` took down."""
        return frozenset(self._down)

    # counters

    def snmp(self, node: Node) -> dict[str, int]:
        """The node's /proc/net/snmp6 counters."""
        f = self._snmp[self.namespace(node)]
        f.seek(0)
        return {k: int(v) for k, v in (line.split() for line in f.read().splitlines() if line.strip())
                if v.lstrip("-").isdigit()}

    def sid_counters(self, node: Node) -> dict[str, int]:
        """packets, bytes, errors of the node's own uN SID (seg6local ``count``)."""
        out = _run(["ip", "-n", self.namespace(node), "-6", "-s", "route", "show",
                    self.prefix_of(node)]).stdout
        m = re.search(r"packets (\d+) bytes (\d+) errors (\d+)", out)
        if not m:
            raise RuntimeError(f"no seg6local counters for {node_name(node)}: {out!r}")
        return dict(zip(("packets", "bytes", "errors"), map(int, m.groups()), strict=True))

    def sid_errors_delta(self, node: Node) -> int:
        """How much the node's SID error counter moved since this was last asked (or since
        the build)."""
        now = self.sid_counters(node)["errors"]
        delta = now - self._sid_errors.get(node, 0)
        self._sid_errors[node] = now
        return delta


def nic_frame(fab: LinuxFabric, src: int, plane: int, outer_dst: str | None, *, seed: int = 0,
              hlim: int = 64, segments=None, plain_dst=None, mac=None,
              max_payload: int = 200) -> bytes:
    """An MRC packet (ICRC included) as host ``src``'s NIC sends it on ``plane``, to its leaf
    port's MAC (or ``mac``): IPv6-in-IPv6 to ``outer_dst``, with an SRH of ``segments``
    (carriers, first visited first) if given; ``outer_dst`` None: plain RoCEv2, the inner
    destination ``plain_dst`` if given. The tests' frames for the fabric."""
    from scapy.compat import raw
    from scapy.layers.inet6 import IPv6, IPv6ExtHdrSegmentRouting
    from scapy.layers.l2 import Ether

    from mrcnic.verif.packets import random_mrc
    inner = random_mrc(random.Random(seed), max_payload=max_payload)[IPv6]
    eth = Ether(src=fab.nic_mac(src, plane), dst=mac or fab.leaf_port_mac(src, plane))
    if outer_dst is None:
        inner.hlim = hlim
        if plain_dst is not None:
            inner.dst = plain_dst
        return raw(eth / inner)
    outer = IPv6(src=fab.addr(host_usid(plane, src)), dst=outer_dst, hlim=hlim, tc=inner.tc,
                 fl=inner.fl)
    if segments:
        outer = outer / IPv6ExtHdrSegmentRouting(
            addresses=list(reversed(segments)), segleft=len(segments) - 1,
            lastentry=len(segments) - 1, nh=41)
    else:
        outer.nh = 41
    return raw(eth / outer / inner)
