"""Engines measured each in its own process, in alternating rounds.

A benchmark that runs several engines in one process handicaps some of them: JAX set up for the
emulated NeuronCores (several host devices, the device's XLA flags) runs a plain JAX model 2.2x
slower than a process of its own, and one engine's compiled caches, threads and memory stay in the
others' way. Here each engine is a worker process started with a clean environment (the parent's,
minus the variables listed in :data:`CLEANED`, plus the engine's own); the parent sends it commands
on stdin, one at a time, so only one engine runs at any moment, and reads one result line back.

Protocol (one line each way): the parent writes a command (a word and arguments); the worker
answers ``RESULT <json>``. Any other output of the worker goes to its stderr or is skipped.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

#: Variables not passed to workers: settings of the neuron device and of XLA that another engine
#: must not inherit from the parent's shell.
CLEANED = ("XLA_FLAGS", "JAX_PLATFORMS", "TORCH_NEURONX_ADAPTIVE_EAGER", "TORCH_NEURONX_ENABLE_NKI_SDPA")


class Worker:
    """One engine's process (``python -m <module> --worker <engine>``).

    Args:
        module: the benchmark module whose ``--worker`` mode serves commands.
        engine: the engine's name, passed to the worker.
        env: variables added to the cleaned environment.
        timeout: seconds a command may take before the worker is killed and TimeoutError raised.
    """

    def __init__(self, module: str, engine: str, env: dict[str, str], timeout: float) -> None:
        clean = {k: v for k, v in os.environ.items() if k not in CLEANED}
        self.engine = engine
        self.timeout = timeout
        self.process = subprocess.Popen(
            [sys.executable, "-m", module, "--worker", engine],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**clean, **env},
        )

    def ask(self, command: str) -> dict[str, Any]:
        """Sends ``command`` and returns the worker's result.

        Raises:
            TimeoutError: no result within the timeout (the worker is killed).
            RuntimeError: the worker exited without a result.
        """
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        while True:
            ready, _, _ = select.select([self.process.stdout], [], [], self.timeout)
            if not ready:
                self.close()
                raise TimeoutError(f"engine {self.engine!r}: no answer to {command!r} within {self.timeout:.0f} s")
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError(f"engine {self.engine!r} exited (status {self.process.wait()}) during {command!r}")
            if line.startswith("RESULT "):
                return json.loads(line[len("RESULT ") :])

    def close(self) -> None:
        """Ends the worker (killed if it does not exit within 10 s of closing its stdin)."""
        if self.process.poll() is None:
            with contextlib.suppress(BrokenPipeError, OSError):
                self.process.stdin.close()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@contextlib.contextmanager
def workers(module: str, engines: dict[str, dict[str, str]], timeout: float = 900) -> Iterator[dict[str, Worker]]:
    """A worker per engine (name -> extra environment), all ended on exit, errors included."""
    started: dict[str, Worker] = {}
    try:
        for name, env in engines.items():
            started[name] = Worker(module, name, env, timeout)
        yield started
    finally:
        for worker in started.values():
            worker.close()


def serve(commands: dict[str, Callable[..., dict[str, Any]]]) -> None:
    """The worker's side: runs each command read from stdin (``name arg ...``; arguments are passed
    as strings) and writes its result; returns at end of input. ``peak_rss_mb``, the process's peak
    resident memory, is added to every result."""
    import resource

    for line in sys.stdin:
        name, *args = line.split()
        result = commands[name](*args)
        result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        sys.stdout.write("RESULT " + json.dumps(result) + "\n")
        sys.stdout.flush()
