"""``mrcnic sim serve``: two NICs, the whole gateware each, joined by the system testbench's
network, each NIC's registers served on a loopback UDP port until Ctrl-C or SIGTERM.

Three processes. The command (:func:`serve`, which the CLI imports only for this verb) starts a
worker (``python -m mrcnic.verif.sim_server``, :func:`main`) in a session of its own: it builds
the two-NIC system (cached, the build the system tests use) and runs verif/tb_sim_server.py on it
under Verilator. The worker and the simulator are out of the terminal's reach, so Ctrl-C reaches
only the command, which closes the pipe that is the simulator's standard input: the simulation
sees it end, closes its ports, and ends; so it does when the command dies any other way. Once
the ports listen, the command prints each NIC's target URL, a line each.

Everything a run leaves is under ``build/serve/<pid>/``: the worker's log, and the simulation's
run directory (``sim/``: ``sim.log``, ``progress.jsonl``); removed when the server stops cleanly.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

from mrcnic.verif import builds, harness

__all__ = ["NICS", "WIDTH", "serve", "main"]

NICS = 2
WIDTH = 64
STOP_WAIT = 30.0     # seconds the simulation gets to stop before it is killed
HOME = harness.BUILD / "serve"
READY = "ready.json"  # what the simulation writes once its ports listen: {"ports": [...], ...}


def _busy(ports: list[int]) -> str | None:
    """The first of ``ports`` that is not free on the loopback address, as a sentence."""
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError as e:
                return f"UDP port {port} on 127.0.0.1 is not free ({e.strerror})"
    return None


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"


def serve(port: int | None = None, seed: int = 1, prog: str = "mrcnic sim serve") -> int:
    """Runs the server until SIGINT or SIGTERM; returns the exit status. ``port``: NIC ``i``'s
    registers on UDP port ``port + i``; None: ports the system picks."""
    if port is not None and not 1 <= port <= 65536 - NICS:
        print(f"{prog}: --port {port}: the base port must be 1 .. {65536 - NICS} ({NICS} NICs "
              "take consecutive ports)", file=sys.stderr)
        return 2
    ports = [port + i for i in range(NICS)] if port is not None else [0] * NICS
    busy = _busy(ports) if port is not None else None
    if busy:
        print(f"{prog}: {busy}: give another --port, or none", file=sys.stderr)
        return 2
    home = HOME / str(os.getpid())
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    print(f"{prog}: {NICS} NICs, {builds.NIC_CONFIG['planes']} planes x "
          f"{builds.NIC_CONFIG['spines']} spines; building (cached after the first time) and "
          f"starting; Ctrl-C stops it", file=sys.stderr, flush=True)
    # Without pytest's variable: cocotb's runner would take the simulation for a pytest test
    # of its own (as when the tests start this command).
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    try:
        with open(home / "worker.log", "w") as log:
            worker = subprocess.Popen(
                [sys.executable, "-m", __name__, "--dir", str(home), "--seed", str(seed),
                 "--ports", ",".join(map(str, ports))],
                stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, env=env,
                start_new_session=True)
        ready = None
        while worker.poll() is None and not stop.wait(0.1):
            if ready is None and (home / READY).exists():
                ready = json.loads((home / READY).read_text())
                try:
                    for p in ready["ports"]:
                        print(f"sim://127.0.0.1:{p}", flush=True)
                except BrokenPipeError:      # whoever read the lines has gone: serve on
                    sys.stdout = open(os.devnull, "w")
        if worker.poll() is None:           # told to stop
            if ready is None:
                # Still building or starting: nothing to stop cleanly, and a half-made build
                # is made again next time.
                os.killpg(worker.pid, signal.SIGTERM)
            worker.stdin.close()
            try:
                worker.wait(STOP_WAIT)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait()
                print(f"{prog}: the simulation did not stop within {STOP_WAIT:g} s and was "
                      f"killed; its logs are in {home}", file=sys.stderr)
                return 1
            if ready is None or worker.returncode == 0:
                shutil.rmtree(home, ignore_errors=True)
                print(f"{prog}: stopped" + (" before it was ready" if ready is None else ""),
                      file=sys.stderr)
                return 0
        what = "failed to stop" if stop.is_set() else "ended by itself"
        print(f"{prog}: the simulation {what} (exit {worker.returncode}): "
              f"{_tail(home / 'worker.log')} (logs in {home})", file=sys.stderr)
        return 1
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def main(argv=None) -> int:
    """The worker: builds the two-NIC system and runs the served simulation on it."""
    ap = argparse.ArgumentParser(prog="python -m mrcnic.verif.sim_server",
                                 description="the worker of mrcnic sim serve (run that)")
    ap.add_argument("--dir", type=Path, required=True, help="where the run's files go")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ports", required=True, help="a UDP port per NIC, 0: any free one")
    a = ap.parse_args(argv)
    ports = [int(p) for p in a.ports.split(",")]
    b = builds.nic_system(WIDTH, NICS)
    print(f"build {b.directory} ({'cached' if b.cached else f'{b.seconds:.0f} s'})", flush=True)
    params = builds.system_params(WIDTH, "clean", a.seed, pcaps=False, ports=ports,
                                  ready=str(a.dir / READY))
    try:
        harness.run(b, "mrcnic.verif.tb_sim_server", params, run_dir=a.dir / "sim")
    except harness.SimulationFailed as e:
        print(e, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
