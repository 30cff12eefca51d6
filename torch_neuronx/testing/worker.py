"""A spawned worker process for sweeps: a task that crashes the process or hangs is recorded, and the
sweep carries on in a fresh worker.

The worker imports a function by its dotted name and calls it for each task it is sent; the function
yields events (picklable values) that stream back to the parent as they happen, so that a crash or a
timeout can be blamed on the step that was running. The OpInfo sweep (:mod:`.sweep`) and the model
sweep (:mod:`.model_sweep`) share the memory checks that decide when a worker is replaced.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["Worker", "mappings_full", "resident_bytes"]

#: Seconds a spawned worker may take to import torch (and what its function imports at start).
STARTUP_TIMEOUT = 300.0


def resident_bytes(pid: int) -> int | None:
    """Resident memory of process ``pid`` (Linux ``/proc``), or None where it cannot be read."""
    try:
        with open(f"/proc/{pid}/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def mappings_full(share: float) -> bool:
    """Whether this process holds more than ``share`` of the memory mappings the kernel allows
    (``vm.max_map_count``): every XLA executable maps memory of its own, and past the limit LLVM fails
    to compile the next one ("Cannot allocate memory") long before memory runs out."""
    try:
        with open("/proc/sys/vm/max_map_count") as limit, open("/proc/self/maps") as maps:
            allowed = int(limit.read())
            return sum(1 for _ in maps) > share * allowed
    except (OSError, ValueError):
        return False


def _function(name: str) -> Callable[[Any], Iterator[Any]]:
    module, _, attribute = name.rpartition(".")
    return getattr(importlib.import_module(module), attribute)


def _serve(function_name: str, tasks: Any, results: Any) -> None:
    """The worker process: runs ``function(task)`` for each task until it gets None, streaming each
    event it yields, then ``("done", None)``. ``results`` is a pipe, written synchronously: an event
    sent before a crash has reached the parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops the worker
    function = _function(function_name)
    results.send(("ready", None))
    for task in iter(tasks.get, None):
        for event in function(task):
            results.send(("event", event))
        results.send(("done", None))


class Worker:
    """Runs tasks through ``function_name`` (a generator function ``task -> events``, importable in a
    fresh process) in a spawned worker; a crash or a task past ``timeout`` seconds kills the worker,
    and the next task starts a fresh one. A worker past ``memory_limit`` resident bytes after a task
    is replaced too (its executable cache grows with every graph it has run)."""

    def __init__(self, function_name: str, timeout: float, memory_limit: int = 3 << 30) -> None:
        self.function_name = function_name
        self.timeout = timeout
        self.memory_limit = memory_limit
        self.context = multiprocessing.get_context("spawn")
        self.process: Any = None

    def _start(self) -> None:
        self.tasks = self.context.Queue()
        self.results, sender = self.context.Pipe(duplex=False)
        self.process = self.context.Process(
            target=_serve, args=(self.function_name, self.tasks, sender), daemon=True, name="sweep-worker"
        )
        self.process.start()
        sender.close()  # the worker holds the only writing end: its death ends the pipe
        try:
            ready = self.results.poll(STARTUP_TIMEOUT) and self.results.recv()
        except EOFError:
            ready = None
        if not ready:
            self.close()
            raise RuntimeError(
                f"the sweep worker did not start within {STARTUP_TIMEOUT:g} s; run in-process to see its error"
            )

    def close(self) -> None:
        """Stops the worker (politely, then by force)."""
        if self.process is None:
            return
        if self.process.is_alive():
            self.tasks.put(None)
            self.process.join(timeout=10)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.process = None

    def run(self, task: Any, on_event: Callable[[Any], None]) -> str | None:
        """Runs ``task``, calling ``on_event`` for every event as it arrives. Returns None when the
        task finished, else why it did not: ``the process crashed (SIGSEGV)`` or ``timed out after
        S s (the process was killed)``."""
        if self.process is None:
            self._start()
        self.tasks.put(task)
        started = time.monotonic()
        while True:
            try:
                kind, event = self.results.recv() if self.results.poll(1.0) else (None, None)
            except EOFError:  # the worker died; its last events were read before
                self.process.join(timeout=5)
                kind = None
            if kind is None:
                failure = self._failure(started)
                if failure is not None:
                    self.close()
                    return failure
                continue
            if kind == "done":
                resident = resident_bytes(self.process.pid)
                if resident is not None and resident > self.memory_limit:
                    self.close()
                return None
            on_event(event)

    def _failure(self, started: float) -> str | None:
        if not self.process.is_alive():
            code = self.process.exitcode
            name = signal.Signals(-code).name if code is not None and code < 0 else f"exit code {code}"
            return f"the process crashed ({name})"
        if time.monotonic() - started > self.timeout:
            self.process.kill()
            self.process.join()
            return f"timed out after {self.timeout:g} s (the process was killed)"
        return None
