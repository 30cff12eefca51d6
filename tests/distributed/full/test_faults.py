"""Faults and launchers: a rank that dies or never arrives, and real ``torchrun`` jobs."""

from __future__ import annotations

import os
import pathlib
import time

import torch.distributed as dist

from tests.distributed import checks, harness

SCRIPT = pathlib.Path(__file__).with_name("torchrun_job.py")
EXIT_SCRIPT = pathlib.Path(__file__).with_name("exit_job.py")


def _survivor(rank: int, world_size: int, fault: str) -> tuple[str, float]:
    checks.init(rank, world_size, backend="neuron", timeout=5)
    import torch

    tensor = torch.ones(4, device="neuron")
    if rank == 1:
        if fault == "dies":
            os._exit(3)
        time.sleep(30)  # never arrives within the group's 5 s timeout
        os._exit(0)
    started = time.monotonic()
    try:
        dist.all_reduce(tensor)
    except RuntimeError as error:
        return str(error), time.monotonic() - started
    return "no error", time.monotonic() - started


def test_a_dead_rank_makes_the_others_raise():
    outcome = harness.spawn(_survivor, 2, args=("dies",), timeout=90, expect_failure={1})
    message, seconds = outcome[0]
    # gloo words a dead peer by how its socket ended: closed (FIN) or reset (RST), as timing has it.
    assert any(words in message for words in ("Connection closed by peer", "Connection reset by peer", "Timed out")), (
        message
    )
    assert seconds < 15


def test_a_rank_that_never_arrives_makes_the_others_raise_within_the_timeout():
    outcome = harness.spawn(_survivor, 2, args=("late",), timeout=90, expect_failure={1})
    message, seconds = outcome[0]
    assert "Timed out" in message or "timeout" in message.lower(), message
    assert 4 <= seconds < 15, seconds


def test_torchrun_maps_local_rank_to_a_core():
    result = harness.torchrun(str(SCRIPT), nproc=2, timeout=180)
    assert "rank 0 on neuron:0 all_reduce 3.0" in result.stdout, result.stdout
    assert "rank 1 on neuron:1 all_reduce 3.0" in result.stdout, result.stdout


def test_torchrun_with_one_visible_core_per_process():
    result = harness.torchrun(str(SCRIPT), nproc=2, timeout=180, env={"NEURON_RT_VISIBLE_CORES": "1"})
    assert "rank 0 on neuron:0 all_reduce 3.0" in result.stdout, result.stdout
    assert "rank 1 on neuron:0 all_reduce 3.0" in result.stdout, result.stdout


def test_a_job_ending_with_work_in_flight_exits_cleanly():
    # Before the group drained callbacks and unwaited sends and receives at exit, 4 of 4 such jobs
    # aborted (torchrun raises on a non-zero exit).
    result = harness.torchrun(str(EXIT_SCRIPT), nproc=2, timeout=180)
    assert "rank 0 done" in result.stdout and "rank 1 done" in result.stdout, result.stdout
    assert "terminate called" not in result.stdout, result.stdout
