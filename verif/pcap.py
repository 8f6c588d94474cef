"""The pcap files the testbenches and the network model write: Ethernet frames stamped with
simulated time, readable by tshark, Wireshark and ``mrcnic decode`` even while being written."""

from __future__ import annotations

from pathlib import Path

from scapy.utils import PcapWriter

#: above any frame the NIC sends (jumbo MTU 9000 with its headers)
SNAPLEN = 65535


class Pcap:
    """A classic pcap (nanosecond stamps, LINKTYPE_ETHERNET) at ``path``. The file header is
    written at once: scapy's ``write_packet`` never writes it, and its ``close`` would append it
    after the records. ``sync``: every record reaches the file as written (a run that fails
    leaves a readable file)."""

    def __init__(self, path: str | Path, sync: bool = False):
        self.path = Path(path)
        self._w = PcapWriter(str(self.path), linktype=1, snaplen=SNAPLEN, sync=sync, nano=True)
        self._w.write_header(None)
        self.frames = 0

    def write(self, frame: bytes, ns: float) -> None:
        """One frame, seen ``ns`` nanoseconds into the simulation."""
        ns = int(ns)
        self._w.write_packet(bytes(frame), sec=ns // 1_000_000_000, usec=ns % 1_000_000_000)
        self.frames += 1

    def close(self) -> None:
        self._w.close()
