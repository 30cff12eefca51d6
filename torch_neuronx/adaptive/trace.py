"""Recorded traces: runs of launches fused into one executable (adaptive eager, decision 12).

While adaptive eager is on, the runtime hands every executable launch to :func:`record`
(runtime/recording.py). A launch is recorded instead of run: its random inputs are drawn from the
generator now (so the random stream is eager's), its new tensors are allocated now (so memory
statistics and out-of-memory errors are eager's), and each buffer it would produce, a new tensor's
or a written storage's, is a ``PendingBuffer`` bound to that storage. A later launch that reads
such a storage is wired to the recorded output instead of a buffer.

A flush (:func:`flush`) turns a core's trace into one JAX function that calls each recorded
executable's own traced function (``Executable.traced``) in order, so every op computes exactly as
its eager executable does and XLA fuses across them. It returns the buffers of the storages still
alive (a temporary that died before the flush costs nothing) and every op's device checks, is
compiled once per trace signature (the recorded executables, how their inputs are wired, which
outputs are alive) and kept in the bounded executable cache, so a training loop's steady state
replays cached executables. The real buffers are then bound to the storages that held the pending
ones, and each op's device checks are recorded under its own name, in launch order, so a fault is
raised at the next synchronisation naming the op that caused it; each output is noted with the
checks of the ops it was computed from, so a fault poisons what eager's would. A recorded op with a
synchronous check (made at the call in eager) runs its trace at once and raises there.
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from collections import Counter
from typing import Any

import jax

from torch_neuronx import _C, _config
from torch_neuronx.runtime import executable, faults, launch_records, queue, recording
from torch_neuronx.runtime.cores import device_entry_point
from torch_neuronx.runtime.dtypes import CODE_OF
from torch_neuronx.runtime.executable_cache import EXECUTABLES
from torch_neuronx.runtime.recording import PendingBuffer

_lock = threading.RLock()
#: NEURON_LAUNCH_BLOCKING=1 makes every launch synchronous, so nothing is recorded.
_LAUNCH_BLOCKING = _config.launch_blocking()


@dataclasses.dataclass
class Metrics:
    """What adaptive eager did since the last :func:`reset_metrics` (see ``metrics()``)."""

    ops_recorded: int = 0
    traces_run: int = 0
    fused_ops: Counter[int] = dataclasses.field(default_factory=Counter)  # ops per trace -> traces
    cache_hits: int = 0
    compiled: int = 0
    flush_reasons: Counter[str] = dataclasses.field(default_factory=Counter)
    plain_launches: int = 0


METRICS = Metrics()


@dataclasses.dataclass
class _Op:
    executable: executable.Executable
    wiring: tuple[Any, ...]  # per program input: None (an input of the trace) or (op, output)
    stack: str | None  # where it was launched (TORCH_NEURONX_ENABLE_STACK_TRACE=1, ops with checks)


@dataclasses.dataclass
class _Output:
    """A buffer a recorded op produces that some storage holds: its pending stand-in (weakly, so a
    storage freed before the flush drops it), the allocation holding it, and its dtype code."""

    pending: weakref.ref[PendingBuffer]
    address: int
    code: int
    op: int
    index: int


class _Trace:
    """The launches recorded on one core since its last flush."""

    def __init__(self, device: int) -> None:
        self.device = device
        self.ops: list[_Op] = []
        self.inputs: list[Any] = []  # buffers and runtime scalars, in wiring order
        self.outputs: list[_Output] = []
        #: How many of ``inputs`` were found free of poison at faults.generation ``poison_generation``.
        self.poison_scanned = 0
        self.poison_generation = -1


_traces: dict[int, _Trace] = {}
#: Fused executables by trace signature (bounded with every other executable).
_fused: dict[Any, Any] = {}
_flushing = threading.local()
_recording = [False]  # on, for every thread (the autograd engine's threads record too)
_max_ops = [512]  # TORCH_NEURONX_ADAPTIVE_EAGER_MAX_OPS, read when recording starts


def active() -> bool:
    """Whether launches are being recorded."""
    return _recording[0]


def set_active(on: bool) -> None:
    """Starts or stops recording; stopping flushes every core first. Under the trace lock, so that
    no thread records between the flush and the stop (its op would stay unrun, a pending buffer
    that a later plain launch cannot read)."""
    with _lock:
        if on == _recording[0]:
            return
        if on:
            _max_ops[0] = _config.adaptive_eager_max_ops()
            _recording[0] = True
            recording.install(record, flush)
        else:
            flush(None, "recording turned off")
            _recording[0] = False
            recording.uninstall()


#: Open ``adaptive_eager()`` blocks of every thread: (enabling, disabling), and the mode outside any
#: block (TORCH_NEURONX_ADAPTIVE_EAGER); recording is on while a block enables it and none disables.
_blocks = {"enabling": 0, "disabling": 0}
_outside = [False]


def enter_block(enabled: bool) -> None:
    """An ``adaptive_eager(enabled)`` block starts, in any thread: blocks of several threads that
    overlap combine (the last to leave does not restore what its own entry saw)."""
    with _lock:
        if not (_blocks["enabling"] or _blocks["disabling"]):
            _outside[0] = _recording[0]
        _blocks["enabling" if enabled else "disabling"] += 1
        _apply_blocks()


def leave_block(enabled: bool) -> None:
    """The ``adaptive_eager(enabled)`` block that :func:`enter_block` started ends."""
    with _lock:
        _blocks["enabling" if enabled else "disabling"] -= 1
        _apply_blocks()


def record_by_default() -> None:
    """``TORCH_NEURONX_ADAPTIVE_EAGER=1``, read when the device starts: recording becomes the mode
    outside any block. A block already open then still decides inside it (the device starts at the
    first op, which may run inside ``adaptive_eager(enabled=False)``)."""
    with _lock:
        _outside[0] = True
        _apply_blocks()


def _apply_blocks() -> None:
    if _blocks["disabling"]:
        set_active(False)
    elif _blocks["enabling"]:
        set_active(True)
    else:
        set_active(_outside[0])


def record(
    exe: executable.Executable,
    inputs: list[Any],
    device: int,
    slot_tensors: list[Any],
    generator: Any,
    values: list[Any],
) -> Any:
    """The recorder of every launch (runtime/recording.py): records it, or runs it after flushing
    when it must run now (recording off, deterministic algorithms, a launch made while flushing)."""
    import torch

    if (
        not _recording[0]
        or _LAUNCH_BLOCKING
        or getattr(_flushing, "on", False)
        or torch.are_deterministic_algorithms_enabled()
        or (faults.poisoned and _reads_poison(device, inputs))  # raises at the op, as eager
    ):
        return _run_now(exe, inputs, device, slot_tensors, generator, values)
    with _lock:
        if not _recording[0]:  # another thread stopped recording since the check above
            return _run_now(exe, inputs, device, slot_tensors, generator, values)
        avals = exe.output_avals
        if avals is None:
            extra = (0, 0) if exe.random_elements else ()
            avals = exe.output_avals = tuple(jax.eval_shape(exe.traced, *map(recording.abstract, inputs), *extra))
        trace = _traces.get(device)
        if trace is None:
            trace = _traces[device] = _Trace(device)
        op_index = len(trace.ops)
        wiring = []
        for value in inputs:
            if type(value) is PendingBuffer:
                if value.value is not None:  # computed already: its buffer is an input
                    wiring.append(None)
                    trace.inputs.append(value.value)
                    continue
                source_trace, source_op, source_output = value.source
                if source_trace is not trace:
                    raise RuntimeError("neuron adaptive eager: a pending buffer of another core's trace")
                wiring.append((source_op, source_output))
            else:
                wiring.append(None)
                trace.inputs.append(value)
        if exe.random_elements:
            trace.inputs.extend(executable.philox_inputs(generator, device, exe.random_elements))
            wiring += [None, None]
        if exe.counter is not None:
            exe.counter[exe.name] += 1
        tensors = exe.outputs.allocate(device) if exe.fresh else []
        layouts = [r for r in exe.results if isinstance(r, executable.ResultLayout)]
        for index, (tensor, layout) in enumerate(zip(tensors, layouts, strict=True)):
            _bind_pending(trace, op_index, index, tensor, avals[index], CODE_OF[layout.dtype])
        for position, slot in enumerate(exe.written_slots):
            index = exe.fresh + position
            _bind_pending(trace, op_index, index, slot_tensors[slot], avals[index], exe.written_codes[position])
        trace.ops.append(_Op(exe, tuple(wiring), faults.launch_stack() if exe.checks else None))
        METRICS.ops_recorded += 1
        if any(synchronous for _, _, synchronous in exe.checks):  # raised at the op, as eager's
            _flush_trace(trace, "a synchronous check", raise_at_last=True)
        elif len(trace.ops) >= _max_ops[0]:
            _flush_trace(trace, "size limit")
        return exe.returns(values, exe.assemble(tensors))


def _reads_poison(device: int, inputs: list[Any]) -> bool:
    """Whether a launch taking ``inputs`` reads a value a raised fault left undefined: a buffer, or
    a recorded op's result computed from one poisoned after the op was recorded (another core's
    fault). Then it runs now (:func:`_run_now`: the flush poisons that result, the launch raises)."""
    computed = [x.value if type(x) is PendingBuffer else x for x in inputs]
    if faults.poison_of(computed) is not None:
        return True
    trace = _traces.get(device)
    if trace is None or all(x is not None for x in computed):
        return False
    if trace.poison_generation != faults.generation:  # new poison: scan every input again
        trace.poison_generation, trace.poison_scanned = faults.generation, 0
    scanned, trace.poison_scanned = trace.poison_scanned, len(trace.inputs)
    return faults.poison_of(trace.inputs[scanned:]) is not None


def _bind_pending(trace: _Trace, op: int, index: int, tensor: Any, aval: Any, code: int) -> None:
    pending = PendingBuffer(trace.device, aval, (trace, op, index))
    address = _C._bind_stand_in(tensor, pending, code)
    if address:  # an empty storage holds no buffer
        trace.outputs.append(_Output(weakref.ref(pending), address, code, op, index))


def _run_now(
    exe: executable.Executable,
    inputs: list[Any],
    device: int,
    slot_tensors: list[Any],
    generator: Any,
    values: list[Any],
) -> Any:
    """Runs a launch directly, after every recorded one (whose values it may read)."""
    if _traces:
        flush(None, "a launch that runs now")
    if any(type(x) is PendingBuffer for x in inputs):
        inputs = [recording.resolved(x, "a launch that runs now") for x in inputs]
    METRICS.plain_launches += 1
    return exe.run(inputs, device, slot_tensors, generator, values)


@device_entry_point  # a synchronisation outside the eager kernels (an event, .synchronize()) runs it too
def flush(device: int | None, reason: str) -> None:
    """Runs the recorded trace of ``device`` (None: of every core)."""
    with _lock:
        for trace in list(_traces.values()) if device is None else [_traces.get(device)]:
            if trace is not None:
                _flush_trace(trace, reason)


def _flush_trace(trace: _Trace, reason: str, raise_at_last: bool = False) -> None:
    """Runs ``trace``; ``raise_at_last``: its last op has a synchronous check, made at the op's
    launch, so the earliest fault pending on the core is raised once the trace ran."""
    _traces.pop(trace.device, None)
    if not trace.ops:
        return
    METRICS.flush_reasons[reason] += 1
    METRICS.traces_run += 1
    METRICS.fused_ops[len(trace.ops)] += 1
    live = [(output, output.pending()) for output in trace.outputs]
    live = [(output, pending) for output, pending in live if pending is not None]
    key = (tuple((op.executable, op.wiring) for op in trace.ops), tuple((o.op, o.index) for o, _ in live))
    entry = _fused.get(key)
    if entry is None:
        entry = (_compile(trace, [(o.op, o.index) for o, _ in live]), launch_records.new_executable_id())
        EXECUTABLES.admit(_fused, key, entry)
        METRICS.compiled += 1
    else:
        EXECUTABLES.touch(_fused, key)
        METRICS.cache_hits += 1
    fused, fused_id = entry
    _flushing.on = True
    dispatched = launch_records.now() if launch_records.active else 0
    try:
        results = fused(*trace.inputs)
    finally:
        _flushing.on = False
    values, checks = results[: len(live)], results[len(live) :]
    for (output, pending), value in zip(live, values, strict=True):
        pending.value = value
        _C._rebind_held(output.address, pending, value, output.code)
    position, recorded, synchronous = 0, {}, None
    last = len(trace.ops) - 1
    for index, op in enumerate(trace.ops):
        count = 2 * len(op.executable.checks)
        if count:
            exe, outputs = op.executable, list(checks[position : position + count])
            at_launch = raise_at_last and index == last
            recorded[index] = faults.record(
                trace.device, exe.name, outputs, exe.checks, op.stack, at_launch=at_launch, wait=False
            )
            synchronous = recorded[index] if at_launch else None
            position += count
    if faults.open_checks or faults.poisoned:
        _note_dependencies(trace, [output.op for output, _ in live], values, recorded)
    if results:
        queue.note_launch(trace.device, results[0])
        if dispatched:
            name = f"adaptive eager trace ({len(trace.ops)} ops)"
            launch_records.launched(fused_id, name, "trace", trace.device, fused, trace.inputs, dispatched, results[0])
    if synchronous is not None:
        faults.raise_at_launch(trace.device, synchronous)


def _note_dependencies(trace: _Trace, producers: list[int], values: Any, recorded: dict[int, int]) -> None:
    """Notes what each buffer the trace produced depends on, as the op's own launch would have,
    through the trace's wiring: the pending checks of its op and of what the op read, so a fault
    poisons what was computed from the faulted op only, not every output of the executable it was
    fused into; and a fault that poisoned an input after the op was recorded (raised by another
    core's synchronisation), which poisons the op's outputs as eager's later launch would have
    raised it."""
    feed = iter(trace.inputs)
    depends: list[set[int]] = []
    poisons: list[tuple[type[Exception], str] | None] = []
    for index, op in enumerate(trace.ops):
        own = {recorded[index]} if index in recorded else set()
        read, poison = [], None
        for wire in op.wiring:
            if wire is None:
                read.append(next(feed))
            else:
                own |= depends[wire[0]]
                poison = poison or poisons[wire[0]]
        depends.append(own | faults.dependencies(read) if faults.open_checks else own)
        poisons.append(poison or (faults.poison_of(read) if faults.poisoned else None))
    for producer, value in zip(producers, values, strict=True):
        if faults.open_checks:
            faults.note_dependencies([value], depends[producer])
        if poisons[producer] is not None:
            faults.poison([value], poisons[producer])


def _compile(trace: _Trace, live: list[tuple[int, int]]) -> Any:
    ops = [(op.executable, op.wiring) for op in trace.ops]

    def fused(*flat_inputs: Any) -> tuple[Any, ...]:
        feed = iter(flat_inputs)
        produced: list[tuple[Any, ...]] = []
        for exe, wiring in ops:
            args = [next(feed) if w is None else produced[w[0]][w[1]] for w in wiring]
            produced.append(tuple(exe.traced(*args)))
        checks = []
        for (exe, _), results in zip(ops, produced, strict=True):
            if exe.checks:
                checks.extend(results[len(results) - 2 * len(exe.checks) :])
        return (*[produced[op][index] for op, index in live], *checks)

    return executable.jit_on_core(fused, trace.device)


def reset_metrics() -> None:
    """Starts the counts of :func:`metrics` again."""
    global METRICS
    METRICS = Metrics()
