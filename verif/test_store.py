"""The NIC's store (sw/store.py): documents written to store.data and read back whole, a
full store and a torn or foreign one refused, and the codec that names every class."""

import enum
import json
from dataclasses import dataclass

import pytest

from mrcnic import regmap, store
from mrcnic.regclient import RegisterClient, RegisterError, read_words, write_words
from mrcnic.verif.test_regmap import FakeBus


class Colour(enum.Enum):
    RED = 1


@dataclass(frozen=True)
class Point:
    x: int
    tag: bytes = b""


def test_objects_come_back_as_they_went():
    value = {"a": [Point(1, b"\x00\x01"), (2, 3.5, None)], 7: frozenset({Colour.RED}),
             (1, 2): {"deep": True}}
    data = store.encode(value)
    assert store.decode(data, (Point, Colour)) == value


def test_only_the_classes_given_are_made():
    data = store.encode(Point(1))
    with pytest.raises(store.StoreError, match="'Point'"):
        store.decode(data, (Colour,))
    with pytest.raises(store.StoreError, match="cannot read back"):
        store.decode({"@class": "Point", "y": 1}, (Point,))
    with pytest.raises(TypeError, match="cannot hold a object"):
        store.encode(object())


def test_a_document_is_saved_and_loaded_whole():
    bus = FakeBus()
    regs = RegisterClient(bus)
    assert regs.run(store.load()) == (0, None)            # a NIC just reset
    assert regs.run(store.generation()) == 0
    doc = {"ctl": {"profiles": list(range(300))}, "app": "x" * 100}
    regs.run(store.save(doc, 1))
    assert regs.run(store.generation()) == 1
    assert regs.run(store.load()) == (1, doc)
    base = regmap.by_name("store.data").offset
    assert bus.words[base] == store.MAGIC and bus.words[base + 4] == store.FORMAT
    regs.run(store.clear())
    assert regs.run(store.load()) == (0, None)


def test_a_document_too_large_is_refused_with_nothing_written():
    bus = FakeBus()
    regs = RegisterClient(bus)
    big = {"noise": [hash((i, "x")) for i in range(2000)]}   # does not compress
    with pytest.raises(store.StoreFull) as e:
        regs.run(store.save(big, 1))
    assert e.value.needed > store.CAPACITY and bus.writes == []


def test_a_torn_or_foreign_store_is_refused(monkeypatch):
    monkeypatch.setattr(store.time, "sleep", lambda s: None)
    bus = FakeBus()
    regs = RegisterClient(bus)
    regs.run(store.save({"a": 1}, 4))
    base = regmap.by_name("store.data").offset
    bus.words[base + 4 * store.HEADER_WORDS] ^= 1               # the payload, not the header
    with pytest.raises(store.StoreError, match="CRC"):
        regs.run(store.load())
    regs.run(store.save({"a": 1}, 5))
    bus.words[base + 4] = store.FORMAT + 1
    with pytest.raises(store.StoreError, match="format 2"):
        regs.run(store.load())
    bus.words[base + 4], bus.words[base + 12] = store.FORMAT, 4 * regmap.STORE_WORDS
    with pytest.raises(store.StoreError, match="claims"):
        regs.run(store.load())


class BurstBus(FakeBus):
    """A transport with bursts, as the management client has."""

    def __init__(self):
        super().__init__()
        self.bursts = []

    def read_burst(self, addr, count):
        self.bursts.append(("r", addr, count))
        return [self.words[addr + 4 * k] for k in range(count)]

    def write_burst(self, addr, words):
        self.bursts.append(("w", addr, len(words)))
        for k, w in enumerate(words):
            self.words[addr + 4 * k] = w


def test_words_move_in_bursts_of_at_most_256_where_the_transport_has_them():
    bus = BurstBus()
    regs = RegisterClient(bus)
    base = regmap.by_name("store.data").offset
    regs.run(write_words("store.data", 3, range(600)))
    assert bus.bursts == [("w", base + 12, 256), ("w", base + 12 + 1024, 256),
                          ("w", base + 12 + 2048, 88)]
    assert regs.run(read_words("store.data", 3, 600)) == list(range(600))
    assert bus.writes == []                                  # no word alone
    for first, count in ((0, regmap.STORE_WORDS + 1), (regmap.STORE_WORDS, 1), (-1, 1)):
        with pytest.raises(RegisterError, match="words 0 .. 1023"):
            regs.run(read_words("store.data", first, count))
    with pytest.raises(RegisterError, match="not MEM"):
        regs.run(read_words("global.scratch", 0, 1))
    with pytest.raises(RegisterError, match="32-bit words"):
        regs.run(write_words("store.data", 0, [1 << 32]))
    with pytest.raises(RegisterError, match="written alone"):
        regs.write("store.data", 1)


def test_the_cli_shows_and_clears_the_store(monkeypatch, capsys):
    from mrcnic.ctl import Controller
    from mrcnic.verif.test_cli import run_cli
    from mrcnic.verif.test_ctl import FakeNic, srv6_format
    nic = FakeNic()
    status, out, _ = run_cli(monkeypatch, capsys, nic, "store", "show")
    assert status == 0 and out.startswith("empty")
    srv6_format(Controller(RegisterClient(nic)))
    status, out, _ = run_cli(monkeypatch, capsys, nic, "store", "show")
    lines = out.splitlines()
    assert status == 0 and lines[0].startswith("generation 2: ") and lines[1].split()[0] == "ctl"
    status, out, _ = run_cli(monkeypatch, capsys, nic, "store", "show", "-j")
    shown = json.loads(out)
    assert shown["generation"] == 2 and set(shown["document"]) == {"ctl"}
    assert run_cli(monkeypatch, capsys, nic, "store", "clear")[0] == 0
    assert RegisterClient(nic).run(store.load()) == (0, None)
    # a store this software cannot read: one line, exit 1
    monkeypatch.setattr(store.time, "sleep", lambda s: None)
    RegisterClient(nic).run(store.save({"a": 1}, 1))
    nic.words[regmap.by_name("store.data").offset + 4 * store.HEADER_WORDS] ^= 1
    status, out, err = run_cli(monkeypatch, capsys, nic, "store", "show")
    assert status == 1 and out == "" and len(err.splitlines()) == 1 and "CRC" in err
