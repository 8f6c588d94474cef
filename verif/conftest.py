"""pytest set-up: the two tiers, their seeds, and the order the tests run in.

``make test`` runs every test not marked ``regress``, each with its own fixed seed: it proves
every block and scenario once, the same way every time. ``make regress`` (``pytest --regress``)
runs everything, the volume tier too, with seeds drawn fresh for the run from one run seed that
it prints; ``SEED=N`` replays a run. A test asks for its seed with the ``seed_for`` fixture and
for its volume with ``volume``.

The slowest tests start first, so that the two workers finish together, and the workers take
them a few at a time (``--dist loadgroup``: pytest-xdist's default hands each worker a run of
consecutive tests up front, which in this order gave one worker all the slowest while the
other sat idle for half the run). The order comes from
the durations the last run recorded (build/test-durations.json), or from those committed in
verif/test-durations.json on a fresh clone. That file holds what a fresh clone's run took (its
builds included, which is what orders a fresh run well): after adding or much changing a test,
copy build/test-durations.json from a run in a fresh clone over it.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
from pathlib import Path

import pytest

from mrcnic.verif.cli_helpers import Server

HERE = Path(__file__).resolve().parent
BUILD = Path(os.environ.get("MRCNIC_BUILD", HERE.parent / "build"))
RECORDED = BUILD / "test-durations.json"
COMMITTED = HERE / "test-durations.json"
#: what regress multiplies the random frames and transfers of the block tests by
REGRESS_VOLUME = 4


def _regress(config) -> bool:
    return config.getoption("--regress")


def pytest_addoption(parser):
    parser.addoption("--regress", action="store_true",
                     help="the volume tier: the tests marked regress too, and fresh seeds "
                          "(SEED=N replays a run)")


def pytest_configure(config):
    config.addinivalue_line("markers", "regress: the volume tier, run by make regress only")
    if _regress(config) and not os.environ.get("SEED"):
        # Drawn once, here, before pytest-xdist starts its workers, which inherit it.
        os.environ["SEED"] = str(random.SystemRandom().randrange(1, 1 << 31))
    seed = os.environ.get("SEED")
    if seed is not None and not seed.isdigit():
        raise pytest.UsageError(f"SEED must be a non-negative integer, not {seed!r}")


def pytest_report_header(config):
    if _regress(config):
        seed = os.environ["SEED"]
        return [f"regress: run seed {seed} (SEED={seed} make regress replays this run)"]
    return ["make test: every test with its own fixed seed (make regress draws fresh ones)"]


@pytest.hookimpl(tryfirst=True)            # (before pytest-xdist reads the groups)
def pytest_collection_modifyitems(session, config, items):
    if not _regress(config):
        skip = pytest.mark.skip(reason="volume tier: make regress runs it")
        for item in items:
            if "regress" in item.keywords:
                item.add_marker(skip)
    known = {}
    for path in (COMMITTED, RECORDED):     # the recorded ones, where there are any, win
        try:
            known.update(json.loads(path.read_text()))
        except (OSError, ValueError):
            pass
    # Unknown tests are taken as a minute long: a new simulation is rarely quick.
    def took(item):
        return known.get(item.nodeid, 60.0)

    # A module's tests on one `mrcnic sim serve` (the module-scoped ``served`` fixture) run
    # together on one worker (make test's --dist loadgroup), and take their place in the order
    # by their total: spread over the workers and among other modules' tests, each module
    # would start its server again every time its turn came back.
    group = {}
    for item in items:
        if "served" in item.fixturenames:
            group[item] = item.nodeid.split("::")[0]
            item.add_marker(pytest.mark.xdist_group(group[item]))
    total: dict[str, float] = {}
    for item, g in group.items():
        total[g] = total.get(g, 0.0) + took(item)
    items.sort(key=lambda item: (-(total[group[item]] if item in group else took(item)),
                                 group.get(item, "")))


_DURATIONS: dict[str, float] = {}


def pytest_runtest_logreport(report):
    # (in the controller, under pytest-xdist: the workers' reports reach it). Set-up and
    # tear-down count: a server's start is a test's cost too. (--dist loadgroup adds
    # "@group" to a grouped test's id.)
    # A skipped test's set-up does not pass: it records nothing.
    nodeid = report.nodeid.split("@")[0]
    if report.passed and report.when == "setup":
        _DURATIONS[nodeid] = report.duration
    elif report.passed and nodeid in _DURATIONS:
        _DURATIONS[nodeid] += report.duration


def pytest_sessionfinish(session, exitstatus):
    """Records how long each test took, for the next run's order."""
    if not _DURATIONS or hasattr(session.config, "workerinput"):
        return
    try:
        old = json.loads(RECORDED.read_text())
    except (OSError, ValueError):
        old = {}
    RECORDED.parent.mkdir(parents=True, exist_ok=True)
    RECORDED.write_text(json.dumps(old | {k: round(v, 1) for k, v in _DURATIONS.items()},
                                   indent=0, sort_keys=True))


@pytest.fixture
def seed_for(request):
    """``seed_for(default)``: the test's seed: ``default`` under make test; under make regress
    one drawn from the run seed and the test's name (so that SEED=N replays each test)."""
    def pick(default: int) -> int:
        if not _regress(request.config):
            return default
        digest = hashlib.sha256(f"{os.environ['SEED']}/{request.node.nodeid}".encode()).digest()
        seed = int.from_bytes(digest[:4], "big") & 0x7FFF_FFFF
        request.node.user_properties.append(("seed", seed))
        return seed
    return pick


@pytest.fixture
def volume(request) -> int:
    """How many times its base volume of random traffic a block test sends: 1 under make test,
    REGRESS_VOLUME under make regress."""
    return REGRESS_VOLUME if _regress(request.config) else 1


@pytest.fixture(scope="module")
def served():
    """``mrcnic sim serve`` running for a test module (verif/cli_helpers.py: its URLs in
    ``.urls``); stopped at the end, which must be clean."""
    server = Server()
    yield server
    # SIGTERM stops it as cleanly as Ctrl-C (test_ctrl_c_stops_the_server_cleanly)
    code, err = server.stop(signal.SIGTERM)
    assert code == 0 and err.strip().endswith("mrcnic sim serve: stopped"), (code, err)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    seeds = [v for k, v in item.user_properties if k == "seed"]
    if report.failed and seeds and call.when == "call":
        run = os.environ.get("SEED")
        report.sections.append(("seed", f"this test's seed: {seeds[-1]} (run seed {run}: "
                                        f"SEED={run} make regress replays it)"))
