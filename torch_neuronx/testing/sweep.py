"""The OpInfo sweep: many ops, every dtype and sample, within a time budget, in a worker process.

The samples run in a spawned worker process, so that a sample that crashes the process (a
segmentation fault) or hangs is recorded as an ``error`` and the sweep carries on in a fresh worker
from the next sample. Each op gets an equal share of the budget that is left when it starts; its
samples run round robin over its dtypes and phases (sample 0 of each first), so a tight budget still
covers every dtype of every op.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import math
import multiprocessing
import queue
import signal
import time
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from torch_neuronx.testing import argument_errors, cuda_dtypes, opinfo, tables
from torch_neuronx.testing.conformance import OUTCOMES, SampleOutcome, family, make_row, run_sample, samples
from torch_neuronx.testing.worker import mappings_full as _mappings_full
from torch_neuronx.testing.worker import resident_bytes as _resident_bytes

__all__ = ["run_conformance"]

logger = logging.getLogger(__name__)

#: (dtype name, phase, sample index): one sample of an op.
Key = tuple[str, str, int]

#: Seconds a spawned worker may take to import torch and the OpInfo database.
_STARTUP_TIMEOUT = 300.0

#: A worker whose resident memory passes this many bytes after an op is replaced by a fresh one: its
#: executable cache grows with every op, dtype and shape it has run.
_WORKER_MEMORY_LIMIT = 3 << 30

#: The share of the kernel's limit on memory mappings (``vm.max_map_count``) past which a worker is
#: replaced after its current sample: every XLA executable maps memory of its own, and past the limit
#: LLVM fails to compile the next one ("Cannot allocate memory") long before memory runs out.
_WORKER_MAPPINGS_SHARE = 0.5


@dataclasses.dataclass(frozen=True)
class _Options:
    dtypes: tuple[torch.dtype, ...]
    backward: bool
    limit: int | None
    mappings_share: float
    in_place: bool = True
    cuda_only: bool = True
    all_dtypes: bool = True
    wrong_arguments: bool = True


@dataclasses.dataclass
class _Queue:
    """The samples of one (op, dtype, phase) still to run."""

    dtype: torch.dtype
    phase: str
    samples: Iterator[Any]
    next_index: int = 0


def _queues(op: Any, options: _Options) -> tuple[list[_Queue], list[SampleOutcome]]:
    """The sample queues of ``op`` and the rows for what will not run (dtypes, OpInfo skips)."""
    run, lacking = opinfo.device_dtypes(op, options.dtypes)
    rows = [make_row(op, dtype, -1, "forward", "skipped", reason) for dtype, reason in lacking.items()]
    queues = []
    for dtype in run:
        phases = ["forward"]
        if options.backward and dtype == torch.float32 and op.supports_autograd:
            phases.append("backward")
        if options.in_place and dtype == torch.float32 and op.inplace_variant is not None:
            phases.append("inplace")
        reason = opinfo.opinfo_skip(op, dtype)
        for phase in phases:
            if reason is not None:
                rows.append(make_row(op, dtype, -1, phase, "skipped", reason))
                continue
            try:
                made = samples(op, dtype, phase == "backward", options.limit)
            except Exception as err:  # a broken OpInfo must not stop the sweep
                detail = f"OpInfo sample_inputs raised {type(err).__name__}: {err}"
                rows.append(make_row(op, dtype, -1, phase, "skipped", detail))
                continue
            queues.append(_Queue(dtype, phase, iter(made)))
    if options.cuda_only:
        # A refusal is the dtype's: one sample of a pair both CUDA and the CPU refuse shows it.
        for phase, dtypes, limit in (
            (cuda_dtypes.PHASE, cuda_dtypes.cuda_only_dtypes(op), options.limit),
            (cuda_dtypes.REFUSED_PHASE, cuda_dtypes.cuda_refused_dtypes(op), 1),
        ):
            for dtype in dtypes:
                if not options.all_dtypes and dtype not in options.dtypes:
                    continue
                reason = opinfo.opinfo_skip(op, dtype)
                if reason is not None:
                    rows.append(make_row(op, dtype, -1, phase, "skipped", reason))
                    continue
                try:
                    made = samples(op, dtype, False, limit)
                except Exception as err:  # a broken OpInfo must not stop the sweep
                    detail = f"OpInfo sample_inputs raised {type(err).__name__}: {err}"
                    rows.append(make_row(op, dtype, -1, phase, "skipped", detail))
                    continue
                queues.append(_Queue(dtype, phase, iter(made)))
    if options.wrong_arguments and argument_errors.DTYPE in run:
        reason = opinfo.opinfo_skip(op, argument_errors.DTYPE)
        if reason is not None:
            rows.append(make_row(op, argument_errors.DTYPE, -1, argument_errors.PHASE, "skipped", reason))
        else:
            try:
                made = samples(op, argument_errors.DTYPE, False, 1)  # the first sample: many calls each
            except Exception as err:  # a broken OpInfo must not stop the sweep
                detail = f"OpInfo sample_inputs raised {type(err).__name__}: {err}"
                rows.append(make_row(op, argument_errors.DTYPE, -1, argument_errors.PHASE, "skipped", detail))
            else:
                queues.append(_Queue(argument_errors.DTYPE, argument_errors.PHASE, iter(made)))
    return queues, rows


def _op_events(op: Any, options: _Options, op_deadline: float, done: frozenset[Key]) -> Iterator[tuple[str, Any]]:
    """Runs the samples of ``op`` not in ``done``, round robin over its dtypes and phases, until they
    or the op's share of the budget run out. Yields ``("start", key)`` before each sample and
    ``("row", outcome)`` for every result."""
    queues, rows = _queues(op, options)
    if not done:
        yield from (("row", row) for row in rows)
    while queues:
        for q in list(queues):
            if q.next_index > 0 and time.monotonic() > op_deadline:
                detail = f"not run: the op's share of the time budget was spent (samples {q.next_index} on)"
                yield "row", make_row(op, q.dtype, -1, q.phase, "skipped", detail)
                queues.remove(q)
                continue
            sample, host_leaves = next(q.samples, (None, None))
            if sample is None:
                queues.remove(q)
                continue
            index, q.next_index = q.next_index, q.next_index + 1
            key = (str(q.dtype).removeprefix("torch."), q.phase, index)
            if key in done:
                continue
            yield "start", key
            if q.phase == cuda_dtypes.PHASE:
                yield "row", cuda_dtypes.run_cuda_sample(op, sample, q.dtype, index)
            elif q.phase == cuda_dtypes.REFUSED_PHASE:
                yield "row", cuda_dtypes.run_refused_sample(op, sample, q.dtype, index)
            elif q.phase == argument_errors.PHASE:
                yield "row", argument_errors.run_mutated_sample(op, sample, index, host_leaves)
            else:
                yield "row", run_sample(op, sample, q.dtype, q.phase, index, host_leaves)


def _worker(tasks: Any, results: Any, options: _Options) -> None:
    """The worker process: runs the ops it is sent, streaming events back, until it gets None."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops the worker
    ops = {opinfo.full_name(op): op for op in opinfo.op_db()}
    results.put(("ready", None))
    checked = -math.inf
    for name, op_deadline, done in iter(tasks.get, None):
        for event in _op_events(ops[name], options, op_deadline, done):
            results.put(event)
            # After a sample that ran (so every worker makes progress), at most every 0.5 s (reading
            # the mappings costs milliseconds).
            if event[0] == "row" and event[1].sample_index >= 0 and time.monotonic() - checked > 0.5:
                checked = time.monotonic()
                if _mappings_full(options.mappings_share):
                    results.put(("full", name))  # the parent replaces this worker; the op resumes
                    return
        results.put(("done", name))


class _Isolated:
    """Runs ops in a spawned worker process; restarts it after a crash or a timeout."""

    def __init__(self, options: _Options, timeout: float) -> None:
        self.options = options
        self.timeout = timeout
        self.context = multiprocessing.get_context("spawn")
        self.process: Any = None

    def _start(self) -> None:
        self.tasks = self.context.Queue()
        self.results = self.context.Queue()
        self.process = self.context.Process(
            target=_worker, args=(self.tasks, self.results, self.options), daemon=True, name="conformance-worker"
        )
        self.process.start()
        try:
            self.results.get(timeout=_STARTUP_TIMEOUT)
        except queue.Empty:
            self.close()
            raise RuntimeError(
                f"the conformance worker did not start within {_STARTUP_TIMEOUT:g} s "
                f"(exit code {self.process.exitcode}); run with --in-process to see its error"
            ) from None

    def close(self) -> None:
        if self.process is None:
            return
        if self.process.is_alive():
            self.tasks.put(None)
            self.process.join(timeout=10)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.process = None

    def _failure(self, started: tuple[Key, float] | None) -> str | None:
        """Why the worker stopped answering (it died, or the sample ran past the timeout), or None."""
        if not self.process.is_alive():
            code = self.process.exitcode
            name = signal.Signals(-code).name if code is not None and code < 0 else f"exit code {code}"
            return f"the process crashed ({name})"
        if started is not None and time.monotonic() - started[1] > self.timeout:
            self.process.kill()
            self.process.join()
            return f"timed out after {self.timeout:g} s (the process was killed)"
        return None

    def run_op(self, op: Any, op_deadline: float) -> list[SampleOutcome]:
        """Every sample of ``op``: each crash or timeout becomes an ``error`` row for the sample that
        caused it, and the op resumes from its next sample in a fresh worker."""
        rows: list[SampleOutcome] = []
        done: set[Key] = set()
        while True:
            if self.process is None:
                self._start()
            self.tasks.put((opinfo.full_name(op), op_deadline, frozenset(done)))
            started: tuple[Key, float] | None = None
            while True:
                try:
                    kind, payload = self.results.get(timeout=1.0)
                except queue.Empty:
                    failure = self._failure(started)
                    if failure is None:
                        continue
                    self.close()
                    if started is None:
                        rows.append(make_row(op, torch.float32, -1, "forward", "error", failure + " preparing samples"))
                        return rows
                    (dtype, phase, index), since = started
                    row = make_row(op, getattr(torch, dtype), index, phase, "error", failure)
                    row.seconds = time.monotonic() - since
                    rows.append(row)
                    done.add(started[0])
                    break
                if kind == "start":
                    started = (payload, time.monotonic())
                elif kind == "row":
                    rows.append(payload)
                    if started is not None:
                        done.add(started[0])
                    started = None
                elif kind == "full":
                    self.close()
                    break
                else:
                    self._recycle_if_large()
                    return rows

    def _recycle_if_large(self) -> None:
        resident = _resident_bytes(self.process.pid)
        if resident is not None and resident > _WORKER_MEMORY_LIMIT:
            logger.debug("replacing the conformance worker (%d MiB resident)", resident >> 20)
            self.close()


class _InProcess:
    """Runs ops in this process (no protection against crashes and hangs; for debugging)."""

    def __init__(self, options: _Options) -> None:
        self.options = options

    def run_op(self, op: Any, op_deadline: float) -> list[SampleOutcome]:
        return [row for kind, row in _op_events(op, self.options, op_deadline, frozenset()) if kind == "row"]

    def close(self) -> None:
        pass


def _with_family(op: Any, rows: list[SampleOutcome]) -> list[SampleOutcome]:
    """Gives every row of ``op`` the family most of its samples were attributed to."""
    found = collections.Counter(row.family for row in rows if row.family)
    name = found.most_common(1)[0][0] if found else family(op)
    for row in rows:
        row.family = name
    return rows


def _not_run(op: Any, dtypes: Sequence[torch.dtype], detail: str) -> list[SampleOutcome]:
    run, lacking = opinfo.device_dtypes(op, dtypes)
    rows = [make_row(op, dtype, -1, "forward", "skipped", reason) for dtype, reason in lacking.items()]
    return rows + [make_row(op, dtype, -1, "forward", "skipped", detail) for dtype in run]


def run_conformance(
    ops: Sequence[str] | None = None,
    dtypes: Sequence[torch.dtype] | None = None,
    *,
    max_samples_per_op: int | None = None,
    budget_seconds: float | None = None,
    backward: bool = True,
    in_place: bool = True,
    cuda_only: bool = True,
    wrong_arguments: bool = True,
    timeout: float = 120.0,
    isolate: bool = True,
    progress: bool = True,
) -> list[SampleOutcome]:
    """Runs the OpInfo sweep and returns one :class:`SampleOutcome` per sample, plus one per
    (op, dtype, phase) that did not run, saying why.

    Args:
        ops: glob patterns of OpInfo names (``add``, ``linalg.*``, ``div.floor_rounding``); all when None.
        dtypes: dtypes to check, among :data:`tables.DEVICE_DTYPES` (all of them when None).
        max_samples_per_op: at most this many samples of each op in each dtype and phase.
        budget_seconds: stop cleanly when spent. Each op gets an equal share of what is left, which
            always covers its first sample in every dtype and phase; later samples run while it lasts.
        backward: also compare input gradients (float32, differentiable ops).
        in_place: also compare what the OpInfo's in-place variant leaves in its input (float32).
        cuda_only: also run the CUDA-dtype phases (:mod:`~torch_neuronx.testing.cuda_dtypes`): the
            dtypes CUDA computes the op in and the CPU does not (those among ``dtypes`` when given,
            complex32 included otherwise), against the CPU in a wider dtype; and, with one sample
            each, the dtypes both refuse, which neuron must refuse too.
        wrong_arguments: also run the argument-errors phase
            (:mod:`~torch_neuronx.testing.argument_errors`): the op's first float32 sample with one
            argument made wrong at a time, which must raise as on the CPU, in its words, or compute
            its values.
        timeout: seconds one sample may run before its worker is killed (with ``isolate``).
        isolate: run the samples in a worker process that a crash or a hang cannot take down.
        progress: show a progress bar on stderr.

    Raises:
        ValueError: a pattern matches no OpInfo, or a dtype the device lacks was requested.
    """
    from tqdm import tqdm

    selected = opinfo.select_ops(ops)
    wanted = tuple(dtypes or tables.DEVICE_DTYPES)
    for dtype in wanted:
        if dtype not in tables.DEVICE_DTYPES:
            raise ValueError(f"dtype {dtype} is not checked on neuron; choose from {tables.DEVICE_DTYPES}")
    options = _Options(
        wanted,
        backward,
        max_samples_per_op,
        _WORKER_MAPPINGS_SHARE,
        in_place,
        cuda_only,
        not dtypes,
        wrong_arguments,
    )
    runner = _Isolated(options, timeout) if isolate else _InProcess(options)
    deadline = time.monotonic() + budget_seconds if budget_seconds else math.inf
    rows: list[SampleOutcome] = []
    counts: collections.Counter[str] = collections.Counter()
    try:
        with tqdm(selected, unit="op", disable=not progress, dynamic_ncols=True) as bar:
            for position, op in enumerate(bar):
                now = time.monotonic()
                if now >= deadline:
                    rows += _with_family(op, _not_run(op, wanted, "not run: the time budget was spent"))
                    continue
                bar.set_description(opinfo.full_name(op)[:24].ljust(24))
                try:
                    op_rows = runner.run_op(op, now + (deadline - now) / (len(selected) - position))
                except KeyboardInterrupt:
                    logger.warning("interrupted at %s: the remaining ops are reported as not run", op.name)
                    runner.close()
                    deadline = now
                    op_rows = _not_run(op, wanted, "not run: the sweep was interrupted")
                rows += _with_family(op, op_rows)
                counts.update(row.outcome for row in op_rows if row.sample_index >= 0)
                bar.set_postfix({k: counts[k] for k in OUTCOMES[:4]}, refresh=False)
    finally:
        runner.close()
    return rows
