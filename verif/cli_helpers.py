"""The command line run as a user runs it, for the tests: a command in a subprocess, and
``mrcnic sim serve`` in the background with the target URLs it printed (the ``served`` fixture
of verif/conftest.py starts one per test module)."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import time

__all__ = ["READY_TIMEOUT", "NICS", "mrcnic", "sigint_default", "Server"]

#: a first run builds the two-NIC system under Verilator; later ones reuse it
READY_TIMEOUT = 900
#: the NICs mrcnic sim serve runs
NICS = 2


def mrcnic(*args, timeout=60, env=None) -> subprocess.CompletedProcess:
    """``mrcnic ARGS`` as a user runs it: a program of its own (``env``: its environment)."""
    return subprocess.run([sys.executable, "-m", "mrcnic.cli", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


def sigint_default() -> None:
    """For ``Popen``'s ``preexec_fn``: SIGINT (Ctrl-C) as a terminal's program gets it. A test
    run started in the background by a non-interactive shell hands its commands SIGINT
    ignored, and Python then raises no KeyboardInterrupt: a command a test stops with SIGINT
    would run on."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Server:
    """``mrcnic sim serve`` in a subprocess, and the target URLs it printed."""

    def __init__(self, *args):
        self.proc = subprocess.Popen([sys.executable, "-m", "mrcnic.cli", "sim", "serve", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [lines.put(x) for x in self.proc.stdout], daemon=True).start()
        self.urls = []
        deadline = time.monotonic() + READY_TIMEOUT
        while len(self.urls) < NICS:
            try:
                self.urls.append(lines.get(timeout=max(0.0, deadline - time.monotonic())).strip())
            except queue.Empty:
                self.stop(signal.SIGKILL)
                raise AssertionError(f"no ready lines: {self.proc.stderr.read()}") from None
        self.ports = [int(u.rpartition(":")[2]) for u in self.urls]

    def stop(self, sig=signal.SIGINT) -> tuple[int, str]:
        """Sends ``sig``; the exit status and what it said on stderr."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return self.proc.returncode, self.proc.stderr.read()
