"""Runs a function in several processes that form one torch.distributed job, with a hard deadline.

``spawn(worker, world_size=2)`` starts ``world_size`` fresh processes (multiprocessing's ``spawn``
start method: a forked child could not use the device), each with ``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``MASTER_ADDR`` and a free ``MASTER_PORT`` in its environment, calls
``worker(rank, world_size, *args)`` there and returns what each returned, by rank. Any exception in
a worker is raised in the test with that worker's traceback; a job that runs past ``timeout``
seconds raises ``TimeoutError``. Either way every process still alive is killed, so nothing is left
behind and no peer waits for a dead rank.

``torchrun(script, nproc=2)`` runs a script under ``python -m torch.distributed.run`` the same way.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import queue
import socket
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

__all__ = ["free_port", "spawn", "torchrun"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _entry(worker: Callable[..., Any], rank: int, world_size: int, args: tuple, results: Any) -> None:
    try:
        results.put((rank, True, worker(rank, world_size, *args)))
    except BaseException:
        results.put((rank, False, traceback.format_exc()))


@contextlib.contextmanager
def _environment(values: dict[str, str]):
    """``os.environ`` with ``values`` while the block runs (spawned children copy it as they start)."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def spawn(
    worker: Callable[..., Any],
    world_size: int = 2,
    args: tuple = (),
    timeout: float = 120.0,
    env: dict[str, dict[str, str]] | dict[str, str] | None = None,
    expect_failure: set[int] | None = None,
) -> dict[int, Any]:
    """Runs ``worker(rank, world_size, *args)`` in ``world_size`` processes; returns {rank: result}.

    Args:
        worker: a module-level function (the children import it by name).
        timeout: seconds the whole job may take.
        env: extra environment for every rank, or {rank: environment} per rank (keys are ints).
        expect_failure: ranks that are meant to die (their exit is not an error, and they return
            nothing).

    Raises:
        AssertionError: a worker raised (its traceback is the message).
        TimeoutError: the job did not finish within ``timeout`` seconds.
    """
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    port = str(free_port())
    expect_failure = expect_failure or set()
    processes = []
    try:
        for rank in range(world_size):
            values = {
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": port,
                "RANK": str(rank),
                "WORLD_SIZE": str(world_size),
                "LOCAL_RANK": str(rank),
            }
            if env:
                per_rank = env.get(rank) if all(isinstance(key, int) for key in env) else env
                values.update(per_rank or {})
            with _environment(values):
                process = context.Process(target=_entry, args=(worker, rank, world_size, args, results), daemon=True)
                process.start()
            processes.append(process)
        outcome: dict[int, Any] = {}
        deadline = time.monotonic() + timeout
        waiting = set(range(world_size)) - expect_failure
        while waiting:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"ranks {sorted(waiting)} did not finish within {timeout} s")
            try:
                rank, ok, value = results.get(timeout=min(remaining, 1.0))
            except queue.Empty:
                dead = [r for r in waiting if processes[r].exitcode is not None]
                if dead:
                    # It may have put its result just before exiting: look once more.
                    with contextlib.suppress(queue.Empty):
                        rank, ok, value = results.get(timeout=1.0)
                        if not ok:
                            raise AssertionError(f"rank {rank} raised:\n{value}") from None
                        outcome[rank] = value
                        waiting.discard(rank)
                        continue
                    raise AssertionError(
                        f"rank {dead[0]} exited with code {processes[dead[0]].exitcode} without a result"
                    ) from None
                continue
            if not ok:
                raise AssertionError(f"rank {rank} raised:\n{value}")
            outcome[rank] = value
            waiting.discard(rank)
        return outcome
    finally:
        for process in processes:
            process.join(timeout=5)
        for process in processes:
            if process.is_alive():
                process.kill()
                process.join(timeout=5)


def torchrun(
    script: str, nproc: int = 2, args: tuple[str, ...] = (), timeout: float = 120.0, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Runs ``script`` under ``python -m torch.distributed.run --nproc-per-node nproc`` on a free
    port; returns the finished process (stdout and stderr as text).

    Raises:
        AssertionError: torchrun exited with an error (its output is the message).
        subprocess.TimeoutExpired: it ran past ``timeout`` (the whole process group is killed).
    """
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc-per-node={nproc}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint=127.0.0.1:{free_port()}",
        script,
        *args,
    ]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {})},
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)
        process.communicate()
        raise
    if process.returncode != 0:
        raise AssertionError(f"torchrun exited with {process.returncode}:\n{output}")
    return subprocess.CompletedProcess(command, process.returncode, output, "")
