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
    """A word-addressed store standing in for the CSR bus."""

    def __init__(self):
        self.words = {r.offset: r.reset for r in regmap.REGISTERS}
        self.writes = []

    def read(self, offset):
        return self.words[offset]

    def write(self, offset, value):
        self.writes.append((offset, value))
        self.words[offset] = value


def test_client_reads_and_writes_by_name():
    bus = FakeBus()
    c = RegisterClient(bus)
    c.write("global.scratch", 0xCAFE)
    assert bus.writes == [(0x010, 0xCAFE)]
    assert c.read("global.scratch") == 0xCAFE
    assert c.read("global.id") == regmap.MRCNIC_ID
    assert set(c.dump()) == {r.path for r in regmap.REGISTERS}


@pytest.mark.parametrize("path,value,match", [
    ("global.control", 2, "1 bits wide"), ("global.scratch", -1, "does not fit"),
    ("global.id", 0, "CONST"), ("icrc.frames", 0, "RO"),
])
def test_client_refuses_bad_writes(path, value, match):
    bus = FakeBus()
    with pytest.raises(RegisterError, match=match):
        RegisterClient(bus).write(path, value)
    assert bus.writes == []


def test_unknown_register_names_the_form():
    with pytest.raises(KeyError, match="block.name"):
        regmap.by_name("scratch")
