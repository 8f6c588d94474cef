"""Where the host tools find a NIC: a target URL, and a connection that has identified the NIC.

``udp://ADDR[:PORT]`` is a board's management port (sw/mgmt.py; port 19783 unless given);
``sim://HOST:PORT`` is a NIC that ``mrcnic sim serve`` serves, over the same protocol, so one
client drives both. The command line takes ``--target URL``, or the ``MRCNIC_TARGET``
environment variable.

:class:`Device` connects: it reads the NIC's identification (every CONST register of the
``global`` block, :mod:`mrcnic.regmap`) and refuses anything but an mrcnic whose register-map
version this host knows (:data:`KNOWN_VERSIONS`), before anything is written. Nothing here
imports the gateware: the host tools run without it.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
from dataclasses import dataclass

from . import regclient, regmap
from .mgmt import DEFAULT_PORT, DEFAULT_RETRIES, DEFAULT_TIMEOUT, MgmtClient, StatusError
from .regmap import Access

__all__ = ["ENV", "SCHEMES", "KNOWN_VERSIONS", "FORMS", "TargetError", "Target", "parse", "from_env",
           "version_text", "Device"]

ENV = "MRCNIC_TARGET"
#: scheme -> its default port (None: it must be given, as mrcnic sim serve picks free ones)
SCHEMES = {"udp": DEFAULT_PORT, "sim": None}
#: register-map versions (global.version) this host's register map describes
KNOWN_VERSIONS = (regmap.MRCNIC_VERSION,)
#: what a target URL may be, for the messages
FORMS = (f"udp://ADDR[:PORT] (a board; port {DEFAULT_PORT} unless given) or sim://HOST:PORT "
         "(a NIC of mrcnic sim serve)")

_LABEL = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


class TargetError(Exception):
    """A target that cannot be used: a bad URL, a host name that does not resolve, or a device
    that is not an mrcnic this host knows. The message is one sentence naming it."""


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str       # a host name, an IPv4 address or an IPv6 address (without brackets)
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    @property
    def simulated(self) -> bool:
        return self.scheme == "sim"


def _host(text: str) -> str | None:
    """The host part as an address or a name, or None if it is neither."""
    if text.startswith("[") and text.endswith("]"):
        try:
            return str(ipaddress.IPv6Address(text[1:-1]))
        except ValueError:
            return None
    if re.fullmatch(r"[0-9.]+", text):
        try:
            return str(ipaddress.IPv4Address(text))
        except ValueError:
            return None
    labels = text.split(".")
    if len(text) <= 253 and all(_LABEL.fullmatch(x) for x in labels):
        return text
    return None


def parse(url: str) -> Target:
    """The target a URL names. Raises :class:`TargetError` saying what is wrong with it and
    what is allowed."""
    def bad(what: str) -> TargetError:
        return TargetError(f"target {url!r}: {what}; a target is {FORMS}")

    m = re.fullmatch(r"([A-Za-z][A-Za-z0-9+.-]*)://(.*)", url)
    if m is None:
        raise bad("not a URL (SCHEME://HOST[:PORT])")
    scheme, rest = m.group(1).lower(), m.group(2)
    if scheme not in SCHEMES:
        raise bad(f"unknown scheme {scheme!r}")
    if any(c in rest for c in "/?#@"):
        raise bad("only a host and a port may follow the scheme")
    hm = re.fullmatch(r"(\[[^\]]*\]|[^:\[\]]*)(?::([^:]*))?", rest)
    if hm is None:
        raise bad(f"{rest!r} is not HOST[:PORT] (an IPv6 address goes in brackets)")
    host_text, port_text = hm.group(1), hm.group(2)
    if not host_text:
        raise bad("no host")
    host = _host(host_text)
    if host is None:
        raise bad(f"bad host {host_text!r} (a name, an IPv4 address, or an IPv6 address in "
                  "brackets)")
    default = SCHEMES[scheme]
    if port_text is None:
        if default is None:
            raise bad(f"{scheme}:// needs a port (mrcnic sim serve prints each NIC's)")
        return Target(scheme, host, default)
    if not re.fullmatch(r"[0-9]{1,5}", port_text) or not 1 <= int(port_text) <= 65535:
        raise bad(f"bad port {port_text!r} (1 .. 65535)")
    return Target(scheme, host, int(port_text))


def from_env(url: str | None = None) -> Target | None:
    """``url`` if given, else ``$MRCNIC_TARGET`` if set, parsed; None if neither."""
    url = url if url is not None else os.environ.get(ENV) or None
    return None if url is None else parse(url)


def version_text(version: int) -> str:
    """global.version as major.minor."""
    return f"{version >> 16}.{version & 0xFFFF}"


class Device:
    """A connected NIC: the management client (:attr:`client`), a register client over it for
    the driver's programs (:attr:`regs`: ``dev.regs.run(driver.identify())``), and the
    identification read on connecting (:attr:`info`: the ``global`` block's CONST registers by
    name, ``id`` and ``version`` first).

    Parameters
    ----------
    target : Target or str
    timeout, retries
        The client's (sw/mgmt.py): an unreachable target is reported after
        ``timeout * (retries + 1)`` seconds, 2 s by default.

    Raises
    ------
    TargetError
        A bad URL, a host name that does not resolve, or no mrcnic of a known version there.
    mrcnic.mgmt.Unreachable
        No reply.
    """

    def __init__(self, target: Target | str, timeout: float = DEFAULT_TIMEOUT,
                 retries: int = DEFAULT_RETRIES):
        self.target = target if isinstance(target, Target) else parse(target)
        try:
            self.client = MgmtClient(self.target.host, self.target.port, timeout, retries)
        except socket.gaierror as e:
            raise TargetError(f"target {self.target}: cannot resolve {self.target.host!r} "
                              f"({e.strerror})") from None
        self.regs = regclient.RegisterClient(self.client)
        try:
            self.info = self._identify()
        except BaseException:
            self.client.close()
            raise

    def _identify(self) -> dict[str, int]:
        try:
            nic_id = self.read("global.id")
        except StatusError as e:
            raise TargetError(f"target {self.target} answers, but refuses global.id "
                              f"({e.status.name}): not an mrcnic") from None
        if nic_id != regmap.MRCNIC_ID:
            raise TargetError(f"target {self.target}: global.id reads {nic_id:#010x}, not "
                              f"{regmap.MRCNIC_ID:#010x} ('MRC1'): not an mrcnic")
        version = self.read("global.version")
        if version not in KNOWN_VERSIONS:
            raise TargetError(f"target {self.target} is register-map version "
                              f"{version_text(version)} ({version:#x}); this mrcnic knows "
                              + ", ".join(version_text(v) for v in KNOWN_VERSIONS)
                              + ": use the host tools that match its gateware")
        info = {"id": nic_id, "version": version}
        for reg in regmap.REGISTERS:
            if reg.block == "global" and reg.access is Access.CONST and reg.name not in info:
                info[reg.name] = self.read(reg.path)
        return info

    def read(self, path: str) -> int:
        """A register's value, read whole in one access (a wide counter reads consistently)."""
        reg = regmap.by_name(path)
        return self.client.read(reg.offset, reg.width)

    def write(self, path: str, value: int) -> None:
        """Writes a register in one access, checked against the register map first (raising
        :class:`mrcnic.regclient.RegisterError` with nothing sent); a command is then read back
        until the NIC has taken it."""
        reg = regclient.check_write(path, value)
        if reg.access is Access.CMD:
            self.regs.command(path, value)
        else:
            self.client.write(reg.offset, value, reg.width)

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> Device:
        return self

    def __exit__(self, *exc):
        self.close()
