"""A management backend (sw/mgmt.py) carried out inside a cocotb simulation.

A :class:`~mrcnic.mgmt.UdpEndpoint` answers requests in a thread of its own, but only the cocotb
scheduler's thread may drive the simulation. A :class:`Bridge` hands each access across: the
endpoint's thread queues it and waits for its outcome; a coroutine of the simulation calls
:meth:`Bridge.serve_queued` every so many clock cycles, which carries out everything queued, in
order, on the bridge's target, and hands each result (or refusal) back. The endpoint's thread
then sends the reply. Between polls the simulation runs on undisturbed.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future

from mrcnic.mgmt import AccessError, Status

__all__ = ["Bridge"]


class Bridge:
    """The :class:`~mrcnic.mgmt.Backend` of a management server, whose accesses ``target``
    carries out in the simulation: ``async read(addr, width)`` and ``async write(addr, width,
    value)``, raising :class:`~mrcnic.mgmt.AccessError` or ``KeyError`` to refuse, as a backend
    does.

    Parameters
    ----------
    target
    wait : float
        Seconds the endpoint's thread waits for the simulation to carry an access out before
        answering FAILED (the simulation has stopped or hangs).
    """

    def __init__(self, target, wait: float = 10.0):
        self.target, self.wait = target, wait
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()   # so no access is queued after close() drained them
        self._closed = False
        self.served = 0

    # --- the endpoint's thread ---------------------------------------------------------------

    def read(self, addr: int, width: int) -> int:
        return self._call(self.target.read, addr, width)

    def write(self, addr: int, width: int, value: int) -> None:
        self._call(self.target.write, addr, width, value)

    # A burst is carried out in one visit of the simulation's thread, word after word.

    def read_burst(self, addr: int, count: int) -> list[int]:
        async def burst():
            return [await self.target.read(addr + 4 * k, 32) for k in range(count)]
        return self._call(burst)

    def write_burst(self, addr: int, words: list[int]) -> None:
        async def burst():
            for k, word in enumerate(words):
                await self.target.write(addr + 4 * k, 32, word)
        self._call(burst)

    def _call(self, fn, *args):
        done: Future = Future()
        with self._lock:
            if self._closed:
                raise AccessError(Status.FAILED, "the simulation is stopping")
            self._queue.put((fn, args, done))
        try:
            return done.result(timeout=self.wait)
        except TimeoutError:
            raise AccessError(Status.FAILED, f"the simulation did not serve the access within "
                                             f"{self.wait} s") from None

    # --- the simulation's thread -------------------------------------------------------------

    async def serve_queued(self) -> None:
        """Carries out every access queued so far, in order."""
        while True:
            try:
                fn, args, done = self._queue.get_nowait()
            except queue.Empty:
                return
            if not done.set_running_or_notify_cancel():
                continue
            try:
                result = await fn(*args)
            except Exception as e:   # the target's refusal or fault: the server answers it
                done.set_exception(e)
            else:
                done.set_result(result)
            self.served += 1

    def close(self) -> None:
        """Refuses what is queued and anything after it: call it before closing the endpoint,
        whose thread may be waiting here."""
        with self._lock:
            self._closed = True
            while True:
                try:
                    _, _, done = self._queue.get_nowait()
                except queue.Empty:
                    break
                if done.set_running_or_notify_cancel():
                    done.set_exception(AccessError(Status.FAILED, "the simulation is stopping"))
