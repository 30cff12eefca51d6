"""Starts a group of worker processes the way torchrun does, with a hard time limit.

Each worker is ``python -m tests.distributed.stack_checks SUITE OUT_DIR`` with torchrun's
environment (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``), so the
c10d backend maps ``LOCAL_RANK`` to a NeuronCore exactly as under torchrun. Every worker writes
one JSON file of per-check results; the launcher kills the whole group (each worker is the leader
of its own session) when one fails early or the time runs out, so no process outlives a test.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]


def free_port() -> int:
    """A TCP port on localhost that nothing listens on now (the store binds it moments later)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _kill(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    for proc in procs:
        proc.wait()


def run_group(
    module: str,
    args: list[str],
    world_size: int,
    out_dir: pathlib.Path,
    timeout_s: float,
    extra_env: dict[str, str] | None = None,
) -> list[dict]:
    """Runs ``python -m module *args`` as ranks 0..world_size-1 and returns each rank's results.

    ``module`` writes ``out_dir/rank{N}.json`` (a dict of check name to ``None`` or a traceback).
    Raises ``TimeoutError`` (with every rank's output) when the group is not done in
    ``timeout_s`` seconds, and ``RuntimeError`` when a worker exits with a non-zero status.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    procs, logs = [], []
    for rank in range(world_size):
        env = dict(os.environ)
        env.update(extra_env or {})
        env.update(
            RANK=str(rank),
            LOCAL_RANK=str(rank),
            WORLD_SIZE=str(world_size),
            LOCAL_WORLD_SIZE=str(world_size),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
            PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]),
        )
        log = open(out_dir / f"rank{rank}.log", "w+b")  # noqa: SIM115 - closed below
        logs.append(log)
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", module, *args, str(out_dir)],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )
    deadline = time.monotonic() + timeout_s
    try:
        while any(proc.poll() is None for proc in procs):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{module} {args} did not finish in {timeout_s} s\n{_outputs(logs)}")
            if any(proc.poll() not in (None, 0) for proc in procs):
                time.sleep(2.0)  # the other ranks' tracebacks, if they come
                break
            time.sleep(0.1)
    finally:
        _kill(procs)
    failed = [rank for rank, proc in enumerate(procs) if proc.returncode != 0]
    if failed:
        raise RuntimeError(f"{module} {args}: ranks {failed} exited with an error\n{_outputs(logs)}")
    for log in logs:
        log.close()
    return [json.loads((out_dir / f"rank{rank}.json").read_text()) for rank in range(world_size)]


def check_failures(results: list[dict], check: str) -> str:
    """Every rank's traceback of ``check`` (or that it did not run), one after the other; empty when it passed."""
    failures = [f"rank {rank}:\n{ranked.get(check, 'did not run')}" for rank, ranked in enumerate(results)]
    return "\n".join(failure for ranked, failure in zip(results, failures, strict=True) if ranked.get(check, True))


def _outputs(logs: list) -> str:
    parts = []
    for rank, log in enumerate(logs):
        log.flush()
        log.seek(0)
        parts.append(f"--- rank {rank} ---\n{log.read().decode(errors='replace')[-6000:]}")
        log.close()
    return "\n".join(parts)
