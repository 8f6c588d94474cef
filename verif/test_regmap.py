"""The register map: generated docs are current, the client refuses bad accesses."""

import pytest

from mrcnic import docgen, regmap
from mrcnic.regclient import RegisterClient, RegisterError


def test_generated_docs_are_current():
    for name, gen in docgen.GENERATED.items():
        path = docgen.DOCS / name
        assert path.exists() and path.read_text() == gen(), (
            f"docs/{name} is stale: run `python -m mrcnic.docgen` and commit it")


def test_stale_doc_is_detected(tmp_path, monkeypatch):
    monkeypatch.setattr(docgen, "DOCS", tmp_path)
    assert docgen.main([]) == 0
    assert docgen.main(["--check"]) == 0
    (tmp_path / "registers.md").write_text("old")
    assert docgen.main(["--check"]) == 1


class FakeBus:
    """A word-addressed store standing in for the CSR bus (commands are taken at once)."""

    def __init__(self):
        self.words = {r.offset + 4 * k: (r.reset >> (32 * k)) & 0xFFFF_FFFF
                      for r in regmap.REGISTERS for k in range(r.words)}
        for r in regmap.REGISTERS:
            if r.access is regmap.Access.CMD:
                self.words[r.offset] = 0
        self.writes = []

    def read(self, offset):
        return self.words[offset]

    def write(self, offset, value):
        self.writes.append((offset, value))
        r = regmap.by_offset(offset)
        if r.access is not regmap.Access.CMD:
            self.words[offset] = value


def test_client_reads_and_writes_by_name():
    bus = FakeBus()
    c = RegisterClient(bus)
    c.write("global.scratch", 0xCAFE)
    assert bus.writes == [(0x010, 0xCAFE)]
    assert c.read("global.scratch") == 0xCAFE
    assert c.read("global.id") == regmap.MRCNIC_ID
    assert set(c.dump()) == {r.path for r in regmap.NIC_REGISTERS
                             if r.access not in (regmap.Access.CMD, regmap.Access.MEM)}


def test_wide_registers_take_consecutive_words_low_first():
    bus = FakeBus()
    c = RegisterClient(bus)
    c.write("tx.src_ip", 0x0011_2233_4455_6677_8899_AABB_CCDD_EEFF)
    base = regmap.by_name("tx.src_ip").offset
    assert bus.writes == [(base, 0xCCDD_EEFF), (base + 4, 0x8899_AABB), (base + 8, 0x4455_6677),
                          (base + 12, 0x0011_2233)]
    assert c.read("tx.src_ip") == 0x0011_2233_4455_6677_8899_AABB_CCDD_EEFF
    assert regmap.by_offset(base + 12).path == "tx.src_ip"


def test_command_waits_and_gives_up_on_a_stuck_one():
    bus = FakeBus()
    c = RegisterClient(bus)
    c.command("qp.write", 1)
    assert bus.writes == [(regmap.by_name("qp.write").offset, 1)]
    bus.words[regmap.by_name("qp.write").offset] = 1          # never taken
    with pytest.raises(RegisterError, match="still pending"):
        c.command("qp.write", 1)
    with pytest.raises(RegisterError, match="not a command"):
        c.command("qp.dqp", 1)


def test_register_table_is_consistent():
    offsets = [r.offset + 4 * k for r in regmap.REGISTERS for k in range(r.words)]
    assert len(offsets) == len(set(offsets))
    for r in regmap.REGISTERS:
        assert r.reset <= r.max_value, r.path
        assert regmap.by_name(r.path) is r
    bad = regmap.Register("x", "y", 0x10, 64, regmap.Access.RW, 0, "", limit=3)
    with pytest.raises(ValueError, match="limit"):
        regmap._check([bad])
    with pytest.raises(ValueError, match="share offset"):
        regmap._check([regmap.by_name("tx.src_ip"),
                       regmap.Register("x", "y", 0x30C, 32, regmap.Access.RW, 0, "")])


@pytest.mark.parametrize("path,value,match", [
    ("global.control", 2, "1 bits wide"), ("global.scratch", -1, "does not fit"),
    ("global.id", 0, "CONST"), ("icrc.frames", 0, "RO"), ("qp.mtu", 5, "0 .. 4"),
    ("ev.load", 3, "0 .. 2"),
])
def test_client_refuses_bad_writes(path, value, match):
    bus = FakeBus()
    with pytest.raises(RegisterError, match=match):
        RegisterClient(bus).write(path, value)
    assert bus.writes == []


def test_unknown_register_names_the_form():
    with pytest.raises(KeyError, match="block.name"):
        regmap.by_name("scratch")
