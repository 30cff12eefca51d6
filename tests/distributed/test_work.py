"""The neuron group's work objects in one process: ``wait(timeout)`` bounds the wait as NCCL's does."""

from __future__ import annotations

import datetime
import time

import pytest
import torch
import torch.distributed as dist

from torch_neuronx.distributed.process_group import CollectiveWork


def test_wait_with_a_timeout_raises_once_it_passes_and_the_work_carries_on():
    future = torch.futures.Future()
    work = CollectiveWork(future, [])
    started = time.monotonic()
    with pytest.raises(dist.DistBackendError, match=r"timed out in blocking wait \(timeout=50 ms\)"):
        work.wait(datetime.timedelta(milliseconds=50))
    assert 0.05 <= time.monotonic() - started < 5
    assert not work.is_completed()
    future.set_result([])
    assert work.wait(datetime.timedelta(milliseconds=50)) and work.is_success()


def test_wait_without_a_limit_raises_the_collectives_error():
    future = torch.futures.Future()
    future.set_exception(RuntimeError("gloo: connection closed"))
    work = CollectiveWork(future, [])
    for timeout in (None, datetime.timedelta(0), datetime.timedelta(seconds=1)):
        with pytest.raises(RuntimeError, match="connection closed"):
            work.wait(timeout) if timeout is not None else work.wait()
    assert not work.is_success()
