"""Target URLs and connecting to a NIC (mrcnic.target), against stand-in boards served with the
management protocol's own server on loopback; the served simulation is verif/test_sim_serve.py's."""

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from mrcnic import mgmt, regmap, target
from mrcnic.mgmt import AccessError, MgmtServer, Status, UdpEndpoint
from mrcnic.target import Device, Target, TargetError, parse, version_text
from mrcnic.verif.cli_helpers import mrcnic

#: the register-map version this host knows, as the tools print it
KNOWN = version_text(regmap.MRCNIC_VERSION)

BUILD = {"data_width": 64, "planes": 2, "qps": 4, "evs": 16, "templates": 4, "max_usids": 14,
         "spines": 4, "spares": 2, "cc_profiles": 4}


class Board:
    """A stand-in board: the register map's reset values and a build's parameters, any word
    or whole register readable; writes refused where the map says so."""

    def __init__(self, **globals_):
        self.words = {r.offset + 4 * k: (r.reset >> (32 * k)) & 0xFFFF_FFFF
                      for r in regmap.REGISTERS for k in range(r.words)}
        for name, value in {**BUILD, **globals_}.items():
            self.words[regmap.by_name(f"global.{name}").offset] = value
        self.writes = []

    def read(self, addr, width):
        if addr not in self.words:
            raise KeyError(addr)
        return sum(self.words[addr + 4 * k] << (32 * k) for k in range(-(-width // 32)))

    def write(self, addr, width, value):
        reg = regmap.by_offset(addr)
        if reg is None:
            raise KeyError(addr)
        if reg.access not in (regmap.Access.RW, regmap.Access.CMD):
            raise AccessError(Status.DENIED)
        self.writes.append((addr, width, value))
        for k in range(-(-width // 32)):
            self.words[addr + 4 * k] = (value >> (32 * k)) & 0xFFFF_FFFF


@pytest.fixture
def board():
    """A Board served on a loopback port, and its udp:// URL."""
    b = Board()
    with UdpEndpoint(MgmtServer(b), port=0) as endpoint:
        yield b, f"udp://127.0.0.1:{endpoint.address[1]}"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]   # free once closed: nothing listens there


@pytest.mark.parametrize("url,want", [
    ("udp://192.0.2.7", Target("udp", "192.0.2.7", mgmt.DEFAULT_PORT)),
    ("udp://192.0.2.7:4000", Target("udp", "192.0.2.7", 4000)),
    ("UDP://board-3.lab.example", Target("udp", "board-3.lab.example", mgmt.DEFAULT_PORT)),
    ("udp://[fd00::1]:7", Target("udp", "fd00::1", 7)),
    ("sim://127.0.0.1:40000", Target("sim", "127.0.0.1", 40000)),
    ("sim://localhost:65535", Target("sim", "localhost", 65535)),
])
def test_target_urls_name_a_host_and_a_port(url, want):
    got = parse(url)
    assert got == want
    assert parse(str(got)) == got


@pytest.mark.parametrize("url,fragment", [
    ("http://192.0.2.7", "unknown scheme 'http'"),
    ("192.0.2.7:4000", "not a URL"),
    ("udp://", "no host"),
    ("udp://bad_host", "bad host 'bad_host'"),
    ("udp://300.1.1.1", "bad host '300.1.1.1'"),
    ("udp://[fd00::g]", "bad host '[fd00::g]'"),
    ("udp://fd00::1", "not HOST[:PORT]"),
    ("udp://192.0.2.7:0", "bad port '0'"),
    ("udp://192.0.2.7:65536", "bad port '65536'"),
    ("udp://192.0.2.7:x", "bad port 'x'"),
    ("udp://192.0.2.7:", "bad port ''"),
    ("udp://192.0.2.7/regs", "only a host and a port"),
    ("sim://127.0.0.1", "sim:// needs a port"),
])
def test_a_bad_url_is_refused_naming_what_is_wrong_and_what_is_allowed(url, fragment):
    with pytest.raises(TargetError) as info:
        parse(url)
    text = str(info.value)
    assert fragment in text and "udp://ADDR[:PORT]" in text and "sim://HOST:PORT" in text, text


def test_the_environment_names_the_target_when_the_option_does_not(monkeypatch):
    monkeypatch.setenv(target.ENV, "sim://127.0.0.1:4000")
    assert target.from_env() == Target("sim", "127.0.0.1", 4000)
    assert target.from_env("udp://192.0.2.1") == Target("udp", "192.0.2.1", mgmt.DEFAULT_PORT)
    monkeypatch.delenv(target.ENV)
    assert target.from_env() is None


def test_connecting_reads_the_identification(board):
    b, url = board
    with Device(url) as dev:
        assert dev.info == {"id": regmap.MRCNIC_ID, "version": regmap.MRCNIC_VERSION, **BUILD}
        assert list(dev.info)[:2] == ["id", "version"]
        dev.write("global.scratch", 0x5A5A)
        dev.write("qp.mr_va", 0x1_2345_6789)
        assert dev.read("qp.mr_va") == 0x1_2345_6789
    # each register in one access of its own width
    assert b.writes == [(0x010, 32, 0x5A5A), (regmap.by_name("qp.mr_va").offset, 64, 0x1_2345_6789)]


@pytest.mark.parametrize("globals_,fragment", [
    ({"version": 0x0002_0000}, "register-map version 2.0 (0x20000); this mrcnic knows " + KNOWN),
    ({"version": regmap.MRCNIC_VERSION + 1},
     f"register-map version 1.{(regmap.MRCNIC_VERSION & 0xFFFF) + 1}"),
    ({"id": 0x1234_5678}, "global.id reads 0x12345678, not 0x4d524331 ('MRC1'): not an mrcnic"),
])
def test_a_nic_this_host_does_not_know_is_refused(globals_, fragment):
    b = Board(**globals_)
    with UdpEndpoint(MgmtServer(b), port=0) as endpoint:
        url = f"udp://127.0.0.1:{endpoint.address[1]}"
        with pytest.raises(TargetError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
            Device(url)
        r = mrcnic("--target", url, "regs", "set", "global.scratch", "1")
    assert r.returncode == 2 and r.stdout == "" and len(r.stderr.splitlines()) == 1, r
    assert fragment in r.stderr
    assert b.writes == []


def test_a_server_without_the_nic_registers_is_no_mrcnic():
    class Empty:
        def read(self, addr, width):
            raise KeyError(addr)
    with UdpEndpoint(MgmtServer(Empty()), port=0) as endpoint:
        with pytest.raises(TargetError, match="refuses global.id .BAD_ADDRESS.: not an mrcnic"):
            Device(f"udp://127.0.0.1:{endpoint.address[1]}")


def test_an_unreachable_target_is_reported_within_about_two_seconds():
    url = f"udp://127.0.0.1:{free_port()}"
    start = time.monotonic()
    with pytest.raises(mgmt.Unreachable):
        Device(url)
    assert 1.9 <= time.monotonic() - start < 3.0
    r = mrcnic("--target", url, "dev", "show")
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, r
    assert r.stderr.startswith(f"mrcnic dev show: target {url} unreachable: no reply")
    assert "after 8 attempts in 2." in r.stderr, r.stderr


def test_verbs_that_act_on_a_nic_need_a_target():
    env = {k: v for k, v in os.environ.items() if k != target.ENV}
    for verb in (["dev", "show"], ["regs", "show"], ["sim", "link", "show"]):
        r = mrcnic(*verb, env=env)
        assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, r
        assert f"no target: give --target URL or set {target.ENV}" in r.stderr


def test_dev_show_over_the_cli_and_without_the_gateware(board):
    b, url = board
    r = mrcnic("-j", "dev", "show", "--target", url)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"target": url, "id": regmap.MRCNIC_ID, "version": KNOWN, **BUILD}
    # the host tools run where the gateware's stack is not installed
    code = (f"import sys; from mrcnic import cli; cli.main(['--target', {url!r}, 'regs', 'show', "
            "'global']); print([m for m in sys.modules if m.startswith(('mrcnic.hdl', "
            "'mrcnic.verif', 'amaranth', 'cocotb'))])")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.splitlines()[-1] == "[]", r
