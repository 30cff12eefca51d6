"""What the profiler records of the device's work: the hooks of the launch path (decision 16).

A torch.profiler session with ``ProfilerActivity.PrivateUse1`` starts the C++ Kineto session
(``csrc/profiler``), which calls :func:`start` and :func:`stop` here (through
runtime/callbacks.py). While a session runs, :data:`active` is True and the launch path reports
every launch: an executable's (runtime/executable.py, the view programs of runtime/buffers.py), a
copy's (runtime/buffers.py), a collective's (:func:`collective`, for torch_neuronx.distributed),
and the runtime's host-side events (:func:`runtime_event`: compilations, CPU fallbacks,
synchronisations, event records and waits). The records live in the C++ launch recorder
(``csrc/profiler/NeuronLaunchRecorder.h``, which states the timing model); this module adds what
only Python sees: when an output becomes ready (one watcher thread per core waits for the outputs
in launch order) and which executables ran, for the cost analysis of the profiling layer's tables.

Profiling off costs the launch path one module attribute read (``launch_records.active``) per launch.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import enum
import itertools
import threading
import time
import warnings
import weakref
from collections.abc import Iterator
from typing import Any

from torch_neuronx import _C

#: True while a profiling session records device work: the one check the launch path makes.
active = False

#: The profiler's clock, nanoseconds since the Unix epoch (CLOCK_REALTIME, as PyTorch's events).
now = time.time_ns


class Work(enum.IntEnum):
    """What a device record is (``DeviceWork`` in NeuronLaunchRecorder.h)."""

    EXECUTABLE = 0
    COPY = 1
    COLLECTIVE = 2


# Plain ints for the recording calls: an enum member costs an attribute lookup and a conversion.
_EXECUTABLE, _COPY, _COLLECTIVE = int(Work.EXECUTABLE), int(Work.COPY), int(Work.COLLECTIVE)


@dataclasses.dataclass(frozen=True)
class RecordingOptions:
    """What a session records, carried from ``NeuronConfig`` to the C++ session in the trace's
    ``custom_profiler_config`` string.

    Attributes:
        device: record device activity (each launch on its core's track).
        runtime: record runtime activity (dispatches, compilations, fallbacks, synchronisations).
        cores: the cores whose work is recorded; empty: every core.
        max_events_per_core: device records kept per core; 0: no limit.
        correlate: link each activity to the op that launched it.
    """

    device: bool = True
    runtime: bool = True
    cores: tuple[int, ...] = ()
    max_events_per_core: int = 0
    correlate: bool = True

    #: Kineto's config parser splits lines on ``=`` and drops what follows ``#``: the string uses
    #: neither (``torch_neuronx;device:1;runtime:1;cores:0,1;max_events:0;correlate:1``).
    PREFIX = "torch_neuronx"

    def to_config(self) -> str:
        """The ``custom_profiler_config`` string of these options."""
        cores = ",".join(str(core) for core in self.cores)
        return (
            f"{self.PREFIX};device:{int(self.device)};runtime:{int(self.runtime)};cores:{cores};"
            f"max_events:{self.max_events_per_core};correlate:{int(self.correlate)}"
        )

    @classmethod
    def from_config(cls, text: str) -> RecordingOptions:
        """The options a ``custom_profiler_config`` string carries; the defaults when it carries
        none (a plain ``torch.profiler.profile``).

        Raises:
            ValueError: the string starts as ours but is malformed.
        """
        if not text.startswith(cls.PREFIX):
            return cls()
        fields = dict(part.split(":", 1) for part in text.split(";")[1:])
        try:
            return cls(
                device=fields["device"] == "1",
                runtime=fields["runtime"] == "1",
                cores=tuple(int(core) for core in fields["cores"].split(",") if core),
                max_events_per_core=int(fields["max_events"]),
                correlate=fields["correlate"] == "1",
            )
        except (KeyError, ValueError) as error:
            raise ValueError(f"neuron profiler: malformed custom_profiler_config {text!r}") from error


@dataclasses.dataclass
class ExecutableInfo:
    """An executable that ran during the session: what the profiling layer's per-executable table
    describes. ``arguments`` are the shapes and dtypes of its first profiled launch's inputs
    (``jax.ShapeDtypeStruct``, or the value of a Python scalar), from which a program that is not
    compiled ahead of time is lowered again for its cost analysis."""

    id: int
    name: str
    kind: str
    device: int
    program: Any
    arguments: list[Any]


#: The executables of the current (or last) session, by id.
executables: dict[int, ExecutableInfo] = {}
_ids = itertools.count(1)
# Executable ids of the cached programs that have no Executable (view programs); weak, so that a
# program evicted from its cache is not kept alive by its id.
_program_ids: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()


def new_executable_id() -> int:
    """A fresh executable id (``Executable`` takes one when it is built)."""
    return next(_ids)


def program_id(program: Any) -> int:
    """The executable id of a cached program that has no ``Executable`` (a view program)."""
    found = _program_ids.get(program)
    if found is None:
        found = _program_ids[program] = next(_ids)
    return found


class _ThreadState(threading.local):
    #: When the last JAX compilation on this thread ended (:data:`now`), 0 for none.
    compiled_until = 0


_thread = _ThreadState()


def _note_compilation(event: str, duration_s: float, **kwargs: Any) -> None:
    # JAX reports each tracing, lowering and compilation step as it ends, on the compiling thread:
    # a launch that compiled its executable first cannot have started on the device before then.
    if active:
        _thread.compiled_until = now()


_listening: list[bool] = []


def install() -> None:
    """Listens to JAX's compilation events (runtime.start calls this once JAX is configured)."""
    if not _listening:
        import jax.monitoring

        jax.monitoring.register_event_duration_secs_listener(_note_compilation)
        _listening.append(True)


class _Watcher:
    """Waits for one core's recorded outputs in launch order and reports when each became ready."""

    def __init__(self, device: int) -> None:
        self.pending: collections.deque[tuple[int, Any]] = collections.deque()
        self.ready = threading.Condition()
        thread = threading.Thread(target=self._run, name=f"neuron-profiler-core-{device}", daemon=True)
        thread.start()

    def put(self, token: int, output: Any) -> None:
        with self.ready:
            self.pending.append((token, output))
            self.ready.notify()

    def _run(self) -> None:
        while True:
            with self.ready:
                while not self.pending:
                    self.ready.wait()
                token, output = self.pending.popleft()
            try:
                output.block_until_ready()
            except Exception:
                # The execution ended (failed): its error is raised at the synchronisation point
                # that waits for it (runtime/faults.py, PJRT); the watcher only times it.
                pass
            _C._profiler_observe_ready(token)

    def drain(self) -> None:
        """Reports the waiting outputs that are ready now, and forgets the rest (still running)."""
        with self.ready:
            waiting = list(self.pending)
            self.pending.clear()
        for token, output in waiting:
            if output.is_ready():
                _C._profiler_observe_ready(token)


_watchers: dict[int, _Watcher] = {}
_watchers_lock = threading.Lock()


def _watch(device: int, token: int, output: Any) -> None:
    watcher = _watchers.get(device)
    if watcher is None:
        with _watchers_lock:  # threads may launch on a new core at the same time
            watcher = _watchers.get(device)
            if watcher is None:
                watcher = _watchers[device] = _Watcher(device)
    watcher.put(token, output)


def start(config: str) -> tuple[list[int], int, bool, bool, bool]:
    """Starts recording for a session (the C++ session calls this). Returns the session's
    (cores, max events per core, device activity, runtime activity, correlate)."""
    global active
    options = RecordingOptions.from_config(config)
    executables.clear()
    active = True
    return list(options.cores), options.max_events_per_core, options.device, options.runtime, options.correlate


def stop() -> None:
    """Stops recording (the C++ session calls this, then computes the device intervals)."""
    global active
    active = False
    for watcher in list(_watchers.values()):
        watcher.drain()


def stopped(dropped_over_limit: int, dropped_unfinished: int) -> None:
    """Warns of the launches the session left out (the C++ session calls this once it has ended)."""
    if dropped_unfinished:
        warnings.warn(
            f"neuron profiler: {dropped_unfinished} launches had not been seen to finish when the profiler "
            "stopped and are not in the trace; call torch.neuron.synchronize() before the profiled region ends",
            stacklevel=2,
        )
    if dropped_over_limit:
        warnings.warn(
            f"neuron profiler: {dropped_over_limit} launches were not recorded because their core reached "
            "max_events_per_nc; raise it in NeuronConfig",
            stacklevel=2,
        )


def _describe(value: Any) -> Any:
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        import jax

        return jax.ShapeDtypeStruct(value.shape, value.dtype)
    return value


def _dispatch_begin(dispatched: int) -> int:
    return max(dispatched, _thread.compiled_until)


def launched(
    executable_id: int,
    name: str,
    kind: str,
    device: int,
    program: Any,
    inputs: list[Any],
    dispatched: int,
    output: Any,
) -> None:
    """An executable launch on ``neuron:device``, dispatched at ``dispatched`` (:data:`now`), whose
    outputs become ready with ``output``."""
    ready = output.is_ready()
    begin = max(dispatched, _thread.compiled_until)
    token = _C._profiler_record_device(_EXECUTABLE, name, device, executable_id, begin, 0, ready)
    if token < 0:
        return
    if executable_id not in executables:
        executables[executable_id] = ExecutableInfo(
            executable_id, name, kind, device, program, [_describe(value) for value in inputs]
        )
    if not ready:
        _watch(device, token, output)


def copied(name: str, device: int, dispatched: int, output: Any, nbytes: int) -> None:
    """A copy of ``nbytes`` onto (or off) ``neuron:device``: ``Memcpy HtoD``, ``DtoH``, ``DtoD``."""
    ready = output is None or output.is_ready()
    token = _C._profiler_record_device(_COPY, name, device, -1, _dispatch_begin(dispatched), nbytes, ready)
    if token >= 0 and not ready:
        _watch(device, token, output)


@contextlib.contextmanager
def _collective(name: str, device: int, nbytes: int) -> Iterator[None]:
    begin = now()
    yield
    _C._profiler_record_device(_COLLECTIVE, name, device, -1, begin, nbytes, True)


def collective(name: str, device: int, nbytes: int) -> contextlib.AbstractContextManager[None]:
    """Records the collective or point-to-point operation the ``with`` block runs on
    ``neuron:device`` as one device event on its core's current stream.

    For torch_neuronx.distributed: wrap the host-staged part of a collective (its copies and the
    gloo call) once it is known to run::

        with launch_records.collective("all_reduce", device, tensor.nbytes):
            ...

    Args:
        name: the collective, as NCCL's kernels are named by theirs (``all_reduce``, ``send``).
        device: the core whose tensors it reads and writes.
        nbytes: the bytes each rank contributes (the tensor, or the list of tensors).

    Costs nothing when no profiling session runs.
    """
    if not active:
        return contextlib.nullcontext()
    return _collective(name, device, nbytes)


@contextlib.contextmanager
def ops_unrecorded() -> Iterator[None]:
    """ATen ops run on this thread inside are not seen by profilers' op observers (RecordFunction):
    building an executable traces the op's lowering or decomposition on meta and fake tensors, whose
    ``aten::``/``prims::`` calls are no ops of the user's (a first ``gelu`` counted ``aten::gelu``
    twice and ``prims::mul`` three times). The build shows as its ``neuronCacheMiss`` event."""
    previous = _C._set_record_function_enabled(False)
    try:
        yield
    finally:
        _C._set_record_function_enabled(previous)


def runtime_event(name: str, device: int, start_ns: int, nbytes: int = 0, detail: str = "") -> None:
    """A host-side runtime event on this thread, from ``start_ns`` to now (``device``: the core it
    concerns, or -1). Callers check :data:`active` first."""
    _C._profiler_record_runtime(name, device, start_ns, now(), nbytes, detail)


def synchronized(device: int, start_ns: int, name: str, detail: str) -> None:
    """The host waited for every launch on ``neuron:device`` from ``start_ns`` to now: a runtime
    event, and a bound on when those launches finished."""
    _C._profiler_bound(device)
    runtime_event(name, device, start_ns, 0, detail)
