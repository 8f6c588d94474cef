"""The control window of a simulated NIC system: registers a ``sim://`` target serves beside its
NIC's own, to read the simulation and to take links of its network down and up.

``mrcnic sim serve`` (verif/sim_server.py) serves them on every NIC's management port, in
:data:`BASE` .. :data:`BASE` + 0xFFFF, far above the NIC's 4 KiB register window; a board has
nothing there (its management answers BAD_ADDRESS), so ``sim.id`` tells a simulation from a
board. The registers are :class:`mrcnic.regmap.Register` entries of block ``sim``, accessed over
the management protocol (sw/mgmt.py) like the NIC's.

A spine link is named by its plane, its spine and its leaf; leaf ``h`` is where NIC ``h`` is
cabled (verif/network.py). :class:`SimClient` is the host's side.

The window also reaches the simulated host's own memory (what the NIC's memory ports read and
write), as an application reads and writes its buffers on a host: ``sim.host_addr`` and the
1 KiB aperture ``sim.host_data``, which a READ_BURST or WRITE_BURST covers whole. It is the
fast way to fill and check large buffers; the NIC's own window (``mem.*``) reaches the same
bytes, as it would a board's memory, 32 at a time.
"""

from __future__ import annotations

from .mgmt import MgmtClient, Status, StatusError
from .regmap import Access, Register
from .transports import flow_path

__all__ = ["BASE", "SIM_ID", "MAX_PLANES", "HOST_WORDS", "SEND_BASE", "RECV_BASE", "REGION",
           "entry_path",
           "profile_paths",
           "REGISTERS", "by_name", "link_word",
           "down_bit", "NotSimulation", "SimClient"]

BASE = 0xFFFF_0000
SIM_ID = 0x5349_4D31           # "SIM1"
MAX_PLANES = 8                 # sim.down_p<n> exists for this many
HOST_WORDS = 256               # sim.host_data: one burst's worth

# The simulated hosts' memory: what exists there (anything else is refused, by the NIC's
# memory ports and the window alike), and how the simulation sets its QPs up.
SEND_BASE = 0x1000_0000        # a send buffer of 16 MiB per host
RECV_BASE = 0x4000_0000        # QP q's receive region: RECV_BASE + q * REGION, R_Key 0x100 + q
REGION = 1 << 24


def entry_path(index: int, planes: int, spines: int) -> tuple[int, int]:
    """(plane, spine) of entry ``index`` of every QP's EV profile as the simulation loads it:
    planes in turn, then spines, so each path carries the same share."""
    return index % planes, (index // planes) % spines


def profile_paths(src_ip: int, dst_ip: int, qp: int, entries: int, planes: int, spines: int,
                  single_path: bool) -> list[tuple[int, int]]:
    """(plane, spine) of each entry of a QP's EV profile as the simulation loads it: for a
    single-path transport one entry, on the path a hash of the flow gives
    (:func:`mrcnic.transports.flow_path`); else ``entries``, each on :func:`entry_path`."""
    if single_path:
        path = flow_path(src_ip, dst_ip, qp, planes * spines)
        return [(path % planes, path // planes)]
    return [entry_path(i, planes, spines) for i in range(entries)]


def _r(name, offset, width, access, doc):
    return Register("sim", name, BASE + offset, width, Access(access), 0, doc)


REGISTERS: tuple[Register, ...] = (
    _r("id", 0x00, 32, "CONST", "Identification: 0x53494D31 ('SIM1')."),
    _r("nic", 0x04, 32, "CONST", "The NIC this port serves: its number in the system, which is "
                                 "also its leaf's."),
    _r("nics", 0x08, 32, "CONST", "NICs in the system."),
    _r("planes", 0x0C, 32, "CONST", "Network planes."),
    _r("spines", 0x10, 32, "CONST", "Spines per plane."),
    _r("time_ns", 0x18, 64, "RO", "Simulated time, in ns (reading the low word takes a snapshot "
                                  "that the high word then reads)."),
    _r("link_down", 0x20, 32, "CMD", "Write plane << 16 | spine << 8 | leaf: that spine link "
                                     "goes down, both directions; what is on it is lost. Reads 0."),
    _r("link_up", 0x24, 32, "CMD", "Write plane << 16 | spine << 8 | leaf: that spine link "
                                   "comes back. Reads 0."),
    *(_r(f"down_p{p}", 0x40 + 4 * p, 32, "RO", f"Bit spine x sim.nics + leaf: that spine link of "
                                               f"plane {p} is down.") for p in range(MAX_PLANES)),
    _r("host_addr", 0x80, 64, "RW", "Where sim.host_data starts in the simulated host's memory "
                                    "(any byte address)."),
    _r("host_data", 0x1000, 32 * HOST_WORDS, "RW",
       "Word k: the 4 bytes of the host's memory at sim.host_addr + 4k, the first in the low "
       "bits. An access that touches memory the host does not have is BAD_ADDRESS."),
)
_BY_NAME = {r.name: r for r in REGISTERS}


def by_name(name: str) -> Register:
    """A control register by its name without ``sim.``."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"no simulation register named {name!r}; they are "
                       + ", ".join(_BY_NAME)) from None


def link_word(plane: int, spine: int, leaf: int) -> int:
    """What sim.link_down and sim.link_up take."""
    return plane << 16 | spine << 8 | leaf


def down_bit(spine: int, leaf: int, nics: int) -> int:
    """The bit of sim.down_p<plane> that says whether that link is down."""
    return spine * nics + leaf


class NotSimulation(Exception):
    """The target answers, but not as a simulation does."""


class SimClient:
    """A simulation's control window, over a :class:`~mrcnic.mgmt.MgmtClient` of one of its
    NICs' ports. Constructing it reads the simulation's shape (:attr:`info`); it raises
    :class:`NotSimulation` for a target that has no control window."""

    def __init__(self, client: MgmtClient):
        self.client = client
        try:
            sim_id = self._read("id")
        except StatusError as e:
            if e.status is not Status.BAD_ADDRESS:
                raise
            raise NotSimulation(f"nothing at {by_name('id').offset:#x} (sim.id): a board, "
                                "not mrcnic sim serve") from None
        if sim_id != SIM_ID:
            raise NotSimulation(f"sim.id reads {sim_id:#010x}, not {SIM_ID:#010x}: not mrcnic "
                                "sim serve")
        #: nic, nics, planes, spines
        self.info = {k: self._read(k) for k in ("nic", "nics", "planes", "spines")}

    def _read(self, name: str) -> int:
        reg = by_name(name)
        return self.client.read(reg.offset, reg.width)

    def time_ns(self) -> int:
        return self._read("time_ns")

    def check_link(self, plane: int, spine: int, leaf: int) -> None:
        """Raises ValueError naming the first of the three that the network does not have."""
        for what, v, n, many in (("plane", plane, "planes", "planes"),
                                 ("spine", spine, "spines", "spines a plane"),
                                 ("leaf", leaf, "nics", "leaves a plane, one per NIC")):
            top = self.info[n]
            if not isinstance(v, int) or not 0 <= v < top:
                raise ValueError(f"{what} {v} does not exist: the network has {top} {many} "
                                 f"(0 .. {top - 1})")

    def links(self) -> list[dict]:
        """Every spine link: plane, spine, leaf and whether it is up."""
        out = []
        nics = self.info["nics"]
        for plane in range(self.info["planes"]):
            down = self._read(f"down_p{plane}")
            out += [{"plane": plane, "spine": s, "leaf": leaf,
                     "up": not down >> down_bit(s, leaf, nics) & 1}
                    for s in range(self.info["spines"]) for leaf in range(nics)]
        return out

    def _host_words(self, addr: int, length: int):
        """(address, words) of each burst covering ``length`` bytes from ``addr``."""
        if not isinstance(addr, int) or not 0 <= addr or addr + length > 1 << 64:
            raise ValueError(f"{length} bytes at {addr!r} are not in the 64-bit address space")
        step = 4 * HOST_WORDS
        for at in range(addr, addr + length, step):
            yield at, -(-min(step, addr + length - at) // 4)

    def host_read(self, addr: int, length: int) -> bytes:
        """``length`` bytes of the simulated host's memory from ``addr`` on."""
        out = bytearray()
        for at, words in self._host_words(addr, length):
            self.client.write(by_name("host_addr").offset, at, 64)
            got = self.client.read_burst(by_name("host_data").offset, words)
            out += b"".join(w.to_bytes(4, "little") for w in got)
        return bytes(out[:length])

    def host_write(self, addr: int, data: bytes) -> None:
        """Writes ``data`` to the simulated host's memory from ``addr`` on; the bytes after its
        end in its last word are read first and written back unchanged."""
        data = bytes(data)
        for at, words in self._host_words(addr, len(data)):
            chunk = data[at - addr:at - addr + 4 * words]
            if len(chunk) % 4:
                chunk += self.host_read(at + len(chunk), 4 - len(chunk) % 4)
            self.client.write(by_name("host_addr").offset, at, 64)
            self.client.write_burst(by_name("host_data").offset,
                                    [int.from_bytes(chunk[4 * k:4 * k + 4], "little")
                                     for k in range(words)])

    def set_link(self, plane: int, spine: int, leaf: int, up: bool) -> bool:
        """Takes a spine link down (``up`` False) or brings it back; returns whether it is up
        now, as the simulation reads it back."""
        self.check_link(plane, spine, leaf)
        reg = by_name("link_up" if up else "link_down")
        self.client.write(reg.offset, link_word(plane, spine, leaf), reg.width)
        down = self._read(f"down_p{plane}")
        return not down >> down_bit(spine, leaf, self.info["nics"]) & 1
