"""Executables: the one path from a traced computation to work running on a NeuronCore.

Every program the device runs is built and launched here: an eager op's (eager/kernel.py), a
compiled graph's (dynamo/graph.py), and the small view programs that copies use
(runtime/buffers.py). Later features plug into the same two steps:

1. :func:`build` traces a computation over one call's storage slots (its
   :class:`~torch_neuronx.runtime.arguments.CallDescription`) into a JAX function, under a
   :class:`~torch_neuronx.runtime.tracing.TraceContext` that gives random ops their keys and collects
   device checks, and compiles it ahead of time for the call's core (:func:`jit_on_core`). The
   function reads its arguments' views from the slots' flat buffers, writes in-place results back
   into the slots they mutate, and returns the new results' buffers in the layouts their tensors
   take (:class:`ResultLayout`).
2. :meth:`Executable.launch` runs it for a call: it allocates the new tensors first (an
   out-of-memory error raises with nothing in flight), appends the generator's (seed, offset) for
   random work, calls the executable (asynchronously, PJRT's dispatch), records its device checks
   (runtime/faults.py) and the launch (runtime/queue.py, and runtime/launch_records.py while a
   profiling session runs), then binds the results: new buffers to the new tensors, rebinding the
   written slots.

The launch is specialised once per executable to what it needs, so the common case (one new
tensor, nothing written, no random draws) costs a handful of Python operations.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import jax
import torch

from torch_neuronx import _C
from torch_neuronx.runtime import arguments, compile_cache, cores, faults, launch_records, layout, queue, recording
from torch_neuronx.runtime.dtypes import CODE_OF
from torch_neuronx.runtime.tracing import TraceContext, tracing

#: What a call's cache holds: ``runner(inputs, device, slot_tensors, generator, values)`` returns the
#: call's result, where the first five are what ``CallSignature.prepare`` gave the call.
Runner = Callable[[list[Any], int, list[Any], Any, list[Any]], Any]

#: ``compute(context, arguments) -> results``: the traced computation, given the call's arguments
#: materialised from their descriptions (JAX arrays for tensors and runtime scalars, Python values
#: for the rest); returns the new results, then the values written into ``writes``, in order.
Compute = Callable[[TraceContext, list[Any]], Sequence[Any]]

#: ``returns(values, results) -> the call's result``, from its arguments and the new results.
Returns = Callable[[list[Any], list[Any]], Any]


def philox_inputs(generator: Any, device: int, random_elements: int) -> tuple[int, int]:
    """The generator's (seed, offset) as an executable's runtime inputs, advancing its offset by
    ``random_elements``. A seed is a uint64 (``torch.manual_seed`` takes any of them; DTensor's RNG
    tracker draws them at random), while the executables take int64 scalars: a seed of 2**63 or more
    goes in as the int64 with the same bits, which ``tracing.random_key`` reads back as that uint64."""
    seed, offset = _C._philox_inputs(generator, device, random_elements)
    return (seed - (1 << 64) if seed >= 1 << 63 else seed), offset


def jit_on_core(fn: Callable[..., Any], device: int) -> Any:
    """``jax.jit(fn)`` placing its results on ``neuron:device`` (inputs are already there)."""
    return jax.jit(fn, out_shardings=jax.sharding.SingleDeviceSharding(cores.core(device)))


@dataclasses.dataclass(frozen=True)
class ResultLayout:
    """How a new result tensor is stored: its sizes, strides (elements) and dtype, and the order of
    its dimensions in memory, outermost first (None: row-major, the value's own order)."""

    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: torch.dtype
    order: tuple[int, ...] | None

    @staticmethod
    def of(meta: torch.Tensor, keep_strides: bool = True) -> ResultLayout:
        """The layout of a result PyTorch describes as ``meta``. With ``keep_strides``, a dense layout
        keeps the strides PyTorch's meta kernel chose (a transposed or channels_last result stays
        so); any other layout, or ``keep_strides=False``, is stored contiguously."""
        sizes, strides = tuple(meta.shape), tuple(meta.stride())
        order = layout.dense_order(sizes, strides) if keep_strides else None
        if order is None:
            return ResultLayout(sizes, layout.contiguous_strides(sizes), meta.dtype, None)
        return ResultLayout(sizes, strides, meta.dtype, None if order == tuple(range(len(sizes))) else order)

    def flatten(self, value: jax.Array) -> jax.Array:
        """The buffer of a result's value (a JAX array of ``sizes``): its elements in memory order
        (a complex32 result's float16 pairs, see runtime/layout.py)."""
        if self.order is not None:
            value = jax.numpy.transpose(value, self.order)
        if self.dtype == torch.complex32:
            value = layout.complex32_pairs(value)
        return value.reshape(-1)


@dataclasses.dataclass(frozen=True)
class BuildTimes:
    """Seconds spent building one executable: tracing to StableHLO, and XLA compilation (small
    when the persistent cache had it, ``persistent_cache_hit``)."""

    lowering_s: float
    compile_s: float
    persistent_cache_hit: bool


class Executable:
    """A compiled program for one call signature on one core, and its launch.

    ``launch(inputs, device, slot_tensors, generator, values)`` is the :data:`Runner` of the call
    signature: it runs the program and returns ``returns(values, results)``, where results are the
    new tensors (and, at positions whose result is not a device tensor, the value given for it).
    ``id`` names it in profiles; ``kind`` says what it computes (``op``: an eager op, ``graph``: a
    compiled graph, ``nki``: a kernel).
    """

    def __init__(
        self,
        name: str,
        device: int,
        program: Any,
        traced: Callable[..., tuple[Any, ...]],
        checks: list[tuple[str, type[Exception], bool]],
        results: Sequence[Any],
        written_slots: list[int],
        written_codes: list[int],
        random_elements: int,
        returns: Returns,
        counter: Counter[str] | None,
        times: BuildTimes | None,
        kind: str = "op",
    ) -> None:
        self.id = launch_records.new_executable_id()
        self.kind = kind
        self.name = name
        self.device = device
        self.program = program
        #: The program's JAX function over its flat inputs (recorded traces compose it).
        self.traced = traced
        self.checks = checks
        self.results = list(results)
        self.written_slots = written_slots
        self.written_codes = written_codes
        self.random_elements = random_elements
        self.returns = returns
        self.counter = counter
        self.times = times
        #: The shapes and dtypes of the program's outputs (``jax.ShapeDtypeStruct``), once a
        #: recorder has traced it abstractly (runtime/recording.py); None before.
        self.output_avals: tuple[Any, ...] | None = None
        layouts = [r for r in self.results if isinstance(r, ResultLayout)]
        #: The new tensors' layout (allocates them), or None without new tensors.
        self.outputs = (
            _C.OutputLayout([(list(r.sizes), list(r.strides), CODE_OF[r.dtype]) for r in layouts]) if layouts else None
        )
        self.fresh = len(layouts)
        #: The launch that runs the program now, whatever recorder is installed.
        self.run: Runner = self._launcher(deferrable=False)
        #: The call signature's runner: the installed recorder's, when there is one, else ``run``.
        self.launch: Runner = self._launcher(deferrable=True)

    def assemble(self, tensors: list[Any]) -> list[Any]:
        """The results of a launch: the new tensors, with the given values at positions whose
        result is not a device tensor."""
        if self.fresh == len(self.results):
            return tensors
        produced = iter(tensors)
        return [next(produced) if isinstance(r, ResultLayout) else r for r in self.results]

    def _launcher(self, deferrable: bool) -> Runner:
        name, program, checks, returns, counter = self.name, self.program, self.checks, self.returns, self.counter
        random_elements, written_slots, written_codes = self.random_elements, self.written_slots, self.written_codes
        outputs, fresh, assemble = self.outputs, self.fresh, self.assemble
        note_launch, record = queue.note_launch, faults.record
        open_checks, note_written, poisoned, check_inputs = (
            faults.open_checks,
            faults.note_written,
            faults.poisoned,
            faults.check_inputs,
        )
        deferral = recording.state if deferrable else None
        executable = self
        executable_id, kind, launched = self.id, self.kind, launch_records.launched

        if (
            fresh
            and not random_elements
            and not written_slots
            and fresh == len(self.results)
            and returns is first_result
            and counter is not None
        ):
            allocate, bind = outputs.allocate, outputs.bind

            def launch_functional(inputs, device, slot_tensors, generator, values):
                if deferral is not None and deferral.recorder is not None:
                    return deferral.recorder(executable, inputs, device, slot_tensors, generator, values)
                counter[name] += 1
                if poisoned:
                    check_inputs(device, inputs)
                tensors = allocate(device)  # before the launch: an OOM raises here, with nothing in flight
                dispatched = launch_records.now() if launch_records.active else 0
                results = program(*inputs)
                own = (record(device, name, results[-2 * len(checks) :], checks),) if checks else ()
                if open_checks:
                    note_written(inputs, results, own)
                note_launch(device, results[0])
                if dispatched:
                    launched(executable_id, name, kind, device, program, inputs, dispatched, results[0])
                bind(tensors, results)
                return tensors[0]

            return launch_functional

        def launch(inputs, device, slot_tensors, generator, values):
            if deferral is not None and deferral.recorder is not None:
                return deferral.recorder(executable, inputs, device, slot_tensors, generator, values)
            if counter is not None:
                counter[name] += 1
            if poisoned:
                check_inputs(device, inputs)
            tensors = outputs.allocate(device) if fresh else []
            if random_elements:
                inputs = [*inputs, *philox_inputs(generator, device, random_elements)]
            dispatched = launch_records.now() if launch_records.active else 0
            results = program(*inputs)
            own = (record(device, name, results[-2 * len(checks) :], checks),) if checks else ()
            if open_checks:
                note_written(inputs, results, own)
            if results:
                note_launch(device, results[0])
                if dispatched:
                    launched(executable_id, name, kind, device, program, inputs, dispatched, results[0])
            if fresh:
                outputs.bind(tensors, results)
            if written_slots:
                _C._rebind([slot_tensors[s] for s in written_slots], results[fresh:], written_codes)
            return returns(values, assemble(tensors))

        return launch


def first_result(values: list[Any], results: list[Any]) -> Any:
    """The :data:`Returns` of an op with one result (the common case, which the launch inlines)."""
    return results[0]


def all_results(values: list[Any], results: list[Any]) -> list[Any]:
    """The default :data:`Returns`: the list of new results (a compiled graph's outputs)."""
    return results


def build(
    name: str,
    call: arguments.CallDescription,
    inputs: list[Any],
    compute: Compute,
    *,
    results: Sequence[Any],
    writes: Sequence[arguments.TensorArg | None] = (),
    random_elements: int = 0,
    host_checked: Any = None,
    returns: Returns = all_results,
    counter: Counter[str] | None = None,
    keep_text: Callable[[str], None] | None = None,
    ahead_of_time: bool = True,
    kind: str = "op",
) -> Executable:
    """Traces ``compute`` over the call ``call`` and compiles it for the call's core.

    Args:
        name: what the launch is recorded as (faults name it): ``aten::add.Tensor``, a graph's name.
        call: the call's description (``CallSignature.describe``).
        inputs: the call's executable inputs (``CallSignature.prepare``), for compiling ahead of time.
        compute: the computation (see :data:`Compute`).
        results: per new result, its :class:`ResultLayout`, or, for a result that is not a device
            tensor (None, an integer), the value to return in its place.
        writes: per written result, the tensor argument it is written into (None: not written, e.g.
            an absent running statistic).
        random_elements: the random elements the computation draws (0: it draws none); the
            generator advances by that many per launch.
        host_checked: set on the trace context (see ``TraceContext.host_checked``).
        returns: builds the call's result from its arguments and the new results.
        counter: counts each launch under ``name`` (op tracking), or None.
        keep_text: receives the StableHLO text of the program (ahead of time only), when given.
        ahead_of_time: trace and compile now, recording :class:`BuildTimes`; otherwise the first
            launch does (eager kernels: a jitted function's own call path costs about 0.7 us less
            per launch than an ahead-of-time ``Compiled``'s, measured on jax 0.10, and an eager call
            launches right after it is built anyway).
        kind: what the executable computes, for profiles: ``op``, ``graph`` or ``nki``.

    Raises:
        whatever tracing ``compute`` raises (a lowering's error, a dtype rule's error): here, or at
        the first launch when not ``ahead_of_time``.
    """
    start = time.perf_counter()
    written_slots = list(dict.fromkeys(target.slot for target in writes if target is not None))
    # A slot's buffer takes the dtype of the last view written into it.
    last_code = {target.slot: target.dtype_code for target in writes if target is not None}
    written_codes = [last_code[slot] for slot in written_slots]
    checks: list[tuple[str, type[Exception], bool]] = []
    input_layout = arguments.InputLayout.of(call)  # not `call`, which holds the call's tensors

    def traced(*flat_inputs: Any) -> tuple[Any, ...]:
        slot_arrays, scalars, args, seed, offset = arguments.unpack(flat_inputs, input_layout, bool(random_elements))
        context = TraceContext(seed, offset)
        context.host_checked = host_checked
        with tracing(context):
            values = list(compute(context, args))
        fresh = len(results)
        for value, target in zip(values[fresh:], writes, strict=True):
            if target is not None:
                nbytes = input_layout.slots[target.slot].nbytes
                slot_arrays[target.slot] = layout.write(
                    slot_arrays[target.slot], nbytes, value, arguments.view_of(target, scalars)
                )
        checks[:] = [(check.message, check.error, check.synchronous) for check in context.checks]
        new = [r.flatten(v) for r, v in zip(results, values[:fresh], strict=True) if isinstance(r, ResultLayout)]
        check_outputs = [x for check in context.checks for x in (check.failed, check.detail)]
        return (*new, *[slot_arrays[s] for s in written_slots], *check_outputs)

    device = call.device
    jitted = jit_on_core(traced, device)
    times = None
    if ahead_of_time:
        lowered = jitted.lower(*map(recording.abstract, inputs), *((0, 0) if random_elements else ()))
        lowered_at = time.perf_counter()
        hits_before = compile_cache.hits
        program = lowered.compile()
        times = BuildTimes(lowered_at - start, time.perf_counter() - lowered_at, compile_cache.hits > hits_before)
        if keep_text is not None:
            keep_text(lowered.as_text())
    else:
        program = jitted  # traced and compiled by its first launch
    return Executable(
        name,
        device,
        program,
        traced,
        checks,
        results,
        written_slots,
        written_codes,
        random_elements,
        returns,
        counter,
        times,
        kind,
    )
