"""Eager ops from several Python threads at once (data loaders, serving threads, background builds)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable

import pytest
import torch

from torch_neuronx.runtime import spans, storage_writes, tracing


def test_trace_contexts_are_per_thread():
    """An executable another thread is tracing is not the one this thread's lowerings report to."""
    entered, release = threading.Event(), threading.Event()

    def trace_and_hold() -> None:
        with tracing.tracing(tracing.TraceContext()):
            entered.set()
            release.wait()

    other = threading.Thread(target=trace_and_hold)
    other.start()
    entered.wait()
    try:
        with pytest.raises(RuntimeError, match="lowerings run only while an executable is traced"):
            tracing.active_context()
    finally:
        release.set()
        other.join()


def _work(seed: int) -> list[torch.Tensor]:
    """Ops with random draws, device checks and decompositions (traced with FX), on a shape of their
    own (new executables)."""
    generator = torch.Generator(device="neuron").manual_seed(seed)
    x = torch.rand(seed + 3, 5, device="neuron", generator=generator)
    mask = torch.bernoulli(torch.full_like(x, 0.5), generator=generator)
    index = torch.arange(seed + 3, device="neuron").flip(0)
    permutation = torch.randperm(seed + 7, device="neuron", generator=generator)
    padded = torch.nn.functional.pad(x[None], (1, 2), mode="reflect")
    return [x, mask, torch.index_select(x, 0, index).cumsum(0), permutation, padded]


def test_eager_ops_in_threads_match_the_same_ops_run_in_turn():
    """Threads tracing executables at once: each op's random stream and checks stay its own."""
    seeds = range(100, 103)  # shapes no other test uses, so every executable is traced in the threads
    results: dict[int, list[torch.Tensor]] = {}
    errors: list[BaseException] = []

    def run(seed: int) -> None:
        try:
            results[seed] = _work(seed)
        except BaseException as error:  # noqa: BLE001 - reported in the main thread below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(seed,)) for seed in seeds]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for seed in seeds:
        for got, want in zip(results[seed], _work(seed), strict=True):
            torch.testing.assert_close(got.cpu(), want.cpu(), rtol=0, atol=0)


def _add_one_in_place(row: torch.Tensor) -> None:
    row.add_(1)


_compiled_add_one_in_place = torch.compile(_add_one_in_place, backend="neuron", dynamic=False)


@pytest.mark.parametrize("write", ["in_place", "copy", "out", "compiled"])
def test_threads_writing_parts_of_one_storage_keep_every_write(write):
    """Two threads writing disjoint rows of one tensor, as an async collective's copy back on gloo's
    thread and an in-place op on the caller's do: every write lands (a storage's buffer is read and
    its successor bound under one lock; without it, most runs lost writes)."""
    rows, steps = 4, 60
    base = torch.zeros(rows, 256, device="neuron")
    if write == "compiled":  # compiled before the threads start: Dynamo's own compile is not the test
        for row in range(rows):
            _compiled_add_one_in_place(base[row])
        base.zero_()
    errors: list[BaseException] = []
    start = threading.Barrier(rows)

    def write_row(row: int) -> None:
        try:
            start.wait()
            for step in range(steps):
                if write == "in_place":
                    base[row].add_(1)
                elif write == "copy":
                    base[row].copy_(torch.full((256,), float(step + 1)))
                elif write == "out":
                    torch.add(base[row], 1, out=base[row])
                else:
                    _compiled_add_one_in_place(base[row])
        except BaseException as error:  # noqa: BLE001 - reported in the main thread below
            errors.append(error)

    threads = [threading.Thread(target=write_row, args=(row,)) for row in range(rows)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    torch.testing.assert_close(base.cpu(), torch.full((rows, 256), float(steps)))


def _add_one_to_row_one(base: torch.Tensor) -> None:
    base[1] += 1


_compiled_add_one_to_row_one = torch.compile(_add_one_to_row_one, backend="neuron", dynamic=False)


def _land_later(write: storage_writes.AsyncWrite, land: Callable[[], object], delay: float = 0.2) -> threading.Thread:
    """A thread that makes an announced write ``delay`` seconds from now, as gloo's thread makes an
    async collective's copy back."""

    def copy_back() -> None:
        time.sleep(delay)
        with storage_writes.landing_async_writes.raised():
            land()
        write.landed()

    thread = threading.Thread(target=copy_back)
    thread.start()
    return thread


def test_a_compiled_mutation_waits_for_a_write_announced_into_its_input():
    """A thread announces a write into row 0 (as an async collective does for its copy back) and
    makes it 0.2 s later; a compiled function adding to row 1 meanwhile returns only after it: its
    graph read the whole tensor, and AOTAutograd's write-back of it would undo the copy."""
    base = torch.zeros(2, 256, device="neuron")
    _compiled_add_one_to_row_one(base)  # compiled before the test
    base.zero_()
    landed = threading.Event()
    write = storage_writes.begin_async_write([spans.span_of(base[0])])
    thread = _land_later(write, lambda: (base[0].copy_(torch.full((256,), 7.0)), landed.set()))
    _compiled_add_one_to_row_one(base)
    assert landed.is_set()
    thread.join()
    torch.testing.assert_close(base.cpu(), torch.stack([torch.full((256,), 7.0), torch.ones(256)]))


def test_eager_work_on_announced_bytes_runs_after_the_write():
    """As work on a CUDA stream synchronised with a collective: a read of the announced bytes (an
    op, a host copy) sees the write, made 0.2 s after the announcement by another thread."""
    base = torch.zeros(2, 256, device="neuron")
    write = storage_writes.begin_async_write([spans.span_of(base[0])])
    thread = _land_later(write, lambda: base[0].copy_(torch.full((256,), 7.0)))
    doubled = base[0] * 2
    torch.testing.assert_close(base[0].cpu(), torch.full((256,), 7.0))
    thread.join()
    torch.testing.assert_close(doubled.cpu(), torch.full((256,), 14.0))


def test_eager_work_on_other_bytes_of_the_storage_does_not_wait():
    """NCCL's stream touches only the collective's bytes: row 1 is written while row 0's announced
    write is still to come (it never lands here), and the write of row 1 is kept."""
    base = torch.zeros(2, 256, device="neuron")
    write = storage_writes.begin_async_write([spans.span_of(base[0])])
    try:
        base[1].add_(1)
        torch.testing.assert_close(base[1].cpu(), torch.ones(256))
    finally:
        write.landed()


def test_columns_are_bytes_apart():
    """A column's announced write, and its failure, leave the other column alone: its bytes lie
    between the written ones (the first byte-to-last range of the written column covered them,
    helper-82)."""
    base = torch.zeros(4, 2, device="neuron")
    write = storage_writes.begin_async_write([spans.span_of(base[:, 0])])
    write.failed(RuntimeError("neuron all_reduce: the copy back failed"), [base])
    try:
        torch.testing.assert_close(base[:, 1].add_(1).cpu(), torch.ones(4))
        with pytest.raises(RuntimeError, match="the copy back failed"):
            base[:, 0].cpu()
    finally:
        write.acknowledge()


def test_work_on_the_bytes_of_a_failed_write_raises_until_acknowledged():
    base = torch.zeros(4, device="neuron")
    write = storage_writes.begin_async_write([spans.span_of(base)])
    write.failed(RuntimeError("neuron all_reduce: the copy back failed"), [base])
    with pytest.raises(RuntimeError, match="the copy back failed"):
        base.add_(1)
    with pytest.raises(RuntimeError, match="the copy back failed"):
        base.cpu()
    write.acknowledge()
    torch.testing.assert_close(base.cpu(), torch.zeros(4))
    assert not storage_writes.active


def test_a_compiled_mutation_waits_for_no_write_into_another_storage():
    base, other = torch.zeros(2, 256, device="neuron"), torch.zeros(2, 256, device="neuron")
    _compiled_add_one_to_row_one(other)
    write = storage_writes.begin_async_write([spans.span_of(base)])
    try:
        thread = threading.Thread(target=_compiled_add_one_to_row_one, args=(other,))
        thread.start()
        thread.join(timeout=60)
        assert not thread.is_alive(), "the call waited for a write into another tensor's storage"
    finally:
        write.landed()
        thread.join()
    torch.testing.assert_close(other[1].cpu(), torch.full((256,), 2.0))


def test_threads_launching_at_once_keep_the_cores_queue_consistent():
    """Two threads launching ops on one core: the queue of launches in flight is shared, and a
    thread switch between its ready check and its release popped an empty deque (IndexError in
    about half the runs of helper-75's repro, 500 adds per thread)."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # a thread switch at nearly every bytecode, as under load
    errors: list[BaseException] = []
    tensors = [torch.zeros(4096, device="neuron") for _ in range(2)]

    def add(x: torch.Tensor) -> None:
        try:
            for _ in range(300):
                x + 1
        except BaseException as error:  # noqa: BLE001 - reported in the main thread below
            errors.append(error)

    try:
        for _ in range(4):
            threads = [threading.Thread(target=add, args=(x,)) for x in tensors]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            torch.neuron.synchronize()
    finally:
        sys.setswitchinterval(interval)
    assert not errors, errors


def test_spans_of_interleaved_and_ranged_views_overlap_exactly():
    # Interleaved columns of a 1 MiB buffer meet nowhere (listing and intersecting their bytes took
    # 0.6 s, helper-85); a range over 1 MiB against a strided view's elements is exact too.
    columns = torch.empty(128, 2048, device="neuron")
    assert not spans.span_of(columns[:, 0::2]).overlaps(spans.span_of(columns[:, 1::2]))
    assert spans.span_of(columns[:, 0::2]).overlaps(spans.span_of(columns[:, 2::2]))
    rows = torch.empty(1026, 1024, device="neuron")
    around = rows.as_strided((2, 128, 4), (1025 * 1024, 4, 1))  # rows 0 and 1025 only
    assert not spans.span_of(around).overlaps(spans.span_of(rows[1:1025]))
    assert spans.span_of(around).overlaps(spans.span_of(rows[1024:1026]))
