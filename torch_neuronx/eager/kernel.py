"""Eager kernels: every op call runs one cached executable (decision 6).

The fast path of a call is: the C++ core turns the arguments into a cache key and the executable's
inputs (``CallSignature.prepare``), the executable runs, and its outputs are bound to new tensors or
rebound to the storages the op writes. No FX work, no meta kernel, no Python loop over arguments.

On a cache miss the kernel runs PyTorch's meta kernel for the call (so shape, dtype and argument
errors are PyTorch's own), traces the computation (the op's lowering, or its decomposition's graph)
into a JAX function over the storages' flat buffers, and keeps the jitted function. In-place and
``out=`` overloads compute their functional counterpart and write the results into the storages
they mutate.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from typing import Any, NoReturn

import jax
import torch
from torch._ops import OpOverload

from torch_neuronx import _C
from torch_neuronx._compat.torch_internals import dynamo_disabled
from torch_neuronx.eager import errors, fallback, tracking
from torch_neuronx.lowering import engine, registry
from torch_neuronx.runtime import arguments, cores, faults, layout, queue
from torch_neuronx.runtime.dtypes import CODE_OF, DTYPE_OF, aten_name, jax_dtype
from torch_neuronx.runtime.executable_cache import EXECUTABLES


def op_name(op: OpOverload) -> str:
    """``aten::add.Tensor`` for ``aten.add.Tensor``."""
    return f"{op._schema.name}.{op._overloadname}"


@dataclasses.dataclass(frozen=True)
class Plan:
    """How an overload is computed.

    ``functional`` computes the values. The first ``fresh`` of its results are returned as new
    tensors; the rest are written, in order, into the arguments at the schema positions ``writes``
    (in-place ``self``, ``out=`` tensors, running statistics). A functional plan has no writes and
    returns every result. ``decomposed`` marks a functional op computed through its decomposition.
    """

    op: OpOverload
    functional: OpOverload
    writes: tuple[int, ...]
    decomposed: bool
    fresh: int = 0


def _argument_kind(argument: torch._C.Argument, static: frozenset[str]) -> _C.ArgKind:
    text = str(argument.type)
    if text in ("Tensor", "Optional[Tensor]"):
        return _C.ArgKind.TENSOR
    if text in ("List[Tensor]", "List[Optional[Tensor]]"):
        return _C.ArgKind.TENSOR_LIST
    if text in ("number", "Optional[number]", "float", "Optional[float]") and argument.name not in static:
        return _C.ArgKind.SCALAR
    if text == "List[number]" and argument.name not in static:
        return _C.ArgKind.SCALAR_LIST
    if "Generator" in text:
        return _C.ArgKind.GENERATOR
    return _C.ArgKind.STATIC


def call_signature(
    op: OpOverload, static_scalars: bool, static: frozenset[str] = frozenset(), allow_cpu: frozenset[str] = frozenset()
) -> _C.CallSignature:
    """The C++ signature builder for ``op``. With ``static_scalars``, numbers are part of the key
    (decompositions capture them as constants)."""
    specs = []
    for argument in op._schema.arguments:
        kind = _argument_kind(argument, static)
        if static_scalars and kind in (_C.ArgKind.SCALAR, _C.ArgKind.SCALAR_LIST):
            kind = _C.ArgKind.STATIC
        has_default = argument.has_default_value()
        default = argument.default_value if has_default else None
        specs.append(
            _C.ArgSpec(argument.name, kind, argument.kwarg_only, has_default, default, argument.name in allow_cpu)
        )
    return _C.CallSignature(op_name(op), specs)


#: A compiled call: runner(inputs, device, slot_tensors, generator, values) -> the op's result.
Runner = Callable[[list[Any], int, list[Any], Any, list[Any]], Any]


def _executable_runner(
    name: str,
    executable: Callable[..., Any],
    random_elements: int,
    checks: list[tuple[str, type[Exception]]],
    outputs: Any,
    written_slots: list[int],
    written_codes: list[int],
    returns: Callable[[list[Any], list[Any]], Any],
) -> Runner:
    """The fast path of one call signature, specialised to what the executable needs.

    The executable returns the new tensors' buffers (``outputs``, an OutputLayout or None), then the
    new buffers of the written slots, then the (failed, detail) pair of each device check.
    """
    executed = tracking.executed
    note_launch = queue.note_launch
    if not random_elements and not written_slots and outputs is not None and returns is _single_output:
        allocate, bind = outputs.allocate, outputs.bind

        def run_functional(inputs, device, slot_tensors, generator, values):
            executed[name] += 1
            tensors = allocate(device)  # before the launch: an OOM raises here, with nothing in flight
            results = executable(*inputs)
            if checks:
                faults.record(device, name, results[-2 * len(checks) :], checks)
            note_launch(device, results[0])
            bind(tensors, results)
            return tensors[0]

        return run_functional

    fresh = outputs.count() if outputs is not None else 0

    def run(inputs, device, slot_tensors, generator, values):
        executed[name] += 1
        tensors = outputs.allocate(device) if fresh else []
        if random_elements:
            inputs = [*inputs, *_C._philox_inputs(generator, device, random_elements)]
        results = executable(*inputs)
        if checks:
            faults.record(device, name, results[-2 * len(checks) :], checks)
        note_launch(device, results[0])
        if fresh:
            outputs.bind(tensors, results)
        if written_slots:
            _C._rebind([slot_tensors[s] for s in written_slots], results[fresh:], written_codes)
        return returns(values, tensors)

    return run


def _resized_outputs(
    plan: Plan, values: list[Any], metas: list[Any], described: list[Any]
) -> list[tuple[int, list[int]]]:
    """The ``out=`` arguments the meta kernel resized, as (schema position, new shape).

    Raises:
        RuntimeError: an in-place ``self``, or the ``out=`` tensor of a pointwise op that is also one
            of its inputs, would have to be resized (TensorIterator's "output with shape [3] doesn't
            match the broadcast shape [2, 3]"); PyTorch's Python meta kernels resize them.
    """
    resized = []  # (position, the meta kernel's shape, the argument's shape)
    for i in plan.writes:
        for meta, description in zip(
            arguments.flat_tensors(metas[i]), arguments.tensor_descriptions(described[i]), strict=True
        ):
            if (
                description is not None
                and plan.functional is not plan.op
                and tuple(meta.shape) != tuple(description[3])
            ):
                resized.append((i, list(meta.shape), list(description[3])))
    for position, shape, target in resized:
        if not plan.op._schema.arguments[position].kwarg_only:  # in-place: never resized (some refs do)
            raise errors.output_shape_error(target, shape)
        if torch.Tag.pointwise in plan.functional.tags and _is_an_input(values, position):
            raise errors.output_shape_error(target, shape)  # TensorIterator: a read-write output
    return [(position, shape) for position, shape, _ in resized]


def _check_written_shapes(plan: Plan, described: list[Any], functional_result: Any) -> None:
    """A result is written into its argument whole, so it must have the argument's shape.

    Raises:
        RuntimeError: TensorIterator's "output with shape ... doesn't match the broadcast shape ...".
    """
    if plan.writes:
        targets = [d for i in plan.writes for d in arguments.tensor_descriptions(described[i])]
        results = arguments.flat_tensors(functional_result)[plan.fresh :]
        for value, target in zip(results, targets, strict=True):
            if target is None or not isinstance(value, torch.Tensor) or tuple(value.shape) == tuple(target[3]):
                continue
            raise errors.output_shape_error(target[3], value.shape)


def _check_no_partial_overlap(plan: Plan, values: list[Any]) -> None:
    """TensorIterator's memory-overlap check of a pointwise op: each written tensor against each input
    (errors.check_no_partial_overlap). Aliasing, offsets and strides are part of the call's cache key,
    so checking when an executable is built covers every call that reuses it."""
    written = [t for i in plan.writes for t in arguments.flat_tensors(values[i]) if isinstance(t, torch.Tensor)]
    if not written:
        return
    read = [
        t
        for i, value in enumerate(values)
        if i not in plan.writes or not plan.op._schema.arguments[i].kwarg_only  # an in-place self is read too
        for t in arguments.flat_tensors(value)
        if isinstance(t, torch.Tensor)
    ]
    for target in written:
        for source in read:
            errors.check_no_partial_overlap(target, source)


def _resize_self_runner(plan: Plan) -> Runner:
    """An overload of :data:`RESIZES_SELF` whose result does not fit ``self``: the functional form
    computes it from ``self`` broadcast, then ``self`` takes the result's shape and values."""

    def run(inputs, device, slot_tensors, generator, values):
        result = _call(plan.functional, _functional_args(plan, values))
        target = values[plan.writes[0]]
        target.resize_(result.shape)
        target.copy_(result)
        return target

    return run


def _is_an_input(values: list[Any], position: int) -> bool:
    """Whether the ``out=`` tensor at ``position`` is also one of the call's inputs (``mul(x, y,
    out=x)``, which ``ldexp_`` makes): TensorIterator does not resize such an output."""
    out = values[position]
    return any(value is out for i, value in enumerate(values) if i != position)


#: In-place overloads whose CPU and CUDA kernels resize ``self`` to the result's shape (through
#: their ``out=`` form, without a warning) instead of refusing a ``self`` the result does not fit.
RESIZES_SELF = frozenset({torch.ops.aten.addbmm_.default})


def _resize_runner(op: OpOverload, shapes: list[tuple[int, list[int]]], warn: bool = True) -> Runner:
    """An ``out=`` call whose ``out`` tensors have the wrong shape: resize them as PyTorch's
    ``resize_output`` does (warning when a non-empty tensor changes shape, unless ``warn`` is
    False), then call again."""

    def run(inputs, device, slot_tensors, generator, values):
        for position, shape in shapes:
            for tensor in arguments.flat_tensors(values[position]):
                if list(tensor.shape) != shape:
                    if warn and tensor.numel() != 0:
                        warnings.warn(
                            f"An output with one or more elements was resized since it had shape {list(tensor.shape)}, "
                            f"which does not match the required output shape {shape}. This behavior is deprecated, "
                            "and in a future PyTorch release outputs will not be resized unless they have zero "
                            "elements. You can explicitly reuse an out tensor t by resizing it, inplace, to zero "
                            "elements with t.resize_(0).",
                            stacklevel=4,
                        )
                    tensor.resize_(shape)
        return _call(op, values)

    return run


def _fallback_runner(op: OpOverload) -> Runner:
    """A call the device cannot compute (no meta kernel, or a decomposition with an unlowered op)."""

    def run(inputs, device, slot_tensors, generator, values):
        positional, keywords = _split(op, values)
        return fallback.run_on_cpu(op, tuple(positional), keywords)

    return run


class EagerKernel:
    """The PrivateUse1 kernel of one ATen overload (registered with torch.library)."""

    def __init__(self, plan: Plan, allow_cpu: frozenset[str] = frozenset()) -> None:
        self.plan = plan
        self.op = plan.op
        self.name = op_name(plan.op)
        lowering = registry.LOWERINGS.get(plan.functional)
        static = lowering.static if lowering is not None else frozenset()
        self.allow_cpu = allow_cpu
        self.signature = call_signature(plan.op, static_scalars=plan.decomposed, static=static, allow_cpu=allow_cpu)
        self.cache: dict[bytes, Runner] = {}  # bounded by runtime.executable_cache

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        key, inputs, device, slot_tensors, generator, values, _, needs_transfer = self.signature.prepare(args, kwargs)
        run = self.cache.get(key)
        if run is None:
            if needs_transfer:
                return self._with_cpu_tensors_moved(device, values)
            with dynamo_disabled():  # building and the first call trace and compile: keep Dynamo out
                run = self._build(args, kwargs)
                EXECUTABLES.admit(self.cache, key, run)
                return run(inputs, device, slot_tensors, generator, values)
        EXECUTABLES.touch(self.cache, key)
        return run(inputs, device, slot_tensors, generator, values)

    def _with_cpu_tensors_moved(self, device: int, values: list[Any]) -> Any:
        """CPU tensors where PyTorch accepts them (indices, as on CUDA) move to the op's core first."""
        target = torch.device("neuron", device)

        def move(value: Any) -> Any:
            if isinstance(value, torch.Tensor) and value.device.type == "cpu" and value.dim() > 0:
                return value.to(target)
            if isinstance(value, (list, tuple)):
                return type(value)(move(v) for v in value)
            return value

        moved = [
            move(v) if a.name in self.allow_cpu else v for a, v in zip(self.op._schema.arguments, values, strict=True)
        ]
        return _call(self.op, moved)

    def _build(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Runner:
        """Compiles the call (or decides that it resizes ``out=`` tensors, or falls back)."""
        _, _, device, _, _, values, description, _ = self.signature.prepare(args, kwargs, describe=True)
        described, slots, buffer_count, scalar_count = description
        plan = self.plan
        metas = arguments.meta_values(values, described)
        if plan.op in RESIZES_SELF:
            shape = list(_call(plan.functional, _functional_args(plan, metas)).shape)
            if shape != list(metas[plan.writes[0]].shape):
                return _resize_self_runner(plan)
        try:
            functional_metas = _functional_args(plan, metas)
            try:
                result_meta = _call(plan.op, metas)
                functional_result = (
                    result_meta if plan.functional is plan.op else _call(plan.functional, functional_metas)
                )
            except AssertionError as error:  # a Python meta kernel's assert where ATen has TORCH_CHECK
                raise errors.in_aten_words(RuntimeError(str(error))) from None
            except (RuntimeError, ValueError, IndexError, OverflowError) as error:
                _raise_as_cpu(self.name, plan, metas, described, error)
        except NotImplementedError:
            return _fallback_runner(plan.op)  # no meta kernel: PyTorch cannot describe the result
        resized = _resized_outputs(plan, values, metas, described)
        if resized:
            return _resize_runner(plan.op, resized)
        _check_written_shapes(plan, described, functional_result)
        if torch.Tag.pointwise in plan.functional.tags:
            _check_no_partial_overlap(plan, values)
        if plan.decomposed:
            registry.check_decomposed_dtypes(plan.functional, functional_metas)
            try:
                graph, positions = engine.trace_decomposition(plan.functional, functional_metas)
                random_elements = engine.random_elements(graph)
            except engine.Unsupported:
                return _fallback_runner(plan.op)
        else:
            graph, positions = None, []
            random_elements = _random_elements(registry.LOWERINGS[plan.functional], functional_result)
        # Results written into arguments: None where the argument is None (e.g. no running stats).
        write_targets = [d for i in plan.writes for d in arguments.tensor_descriptions(described[i])]
        written_slots = list(dict.fromkeys(d[1] for d in write_targets if d is not None))
        fresh = plan.fresh if plan.writes else len(arguments.flat_tensors(functional_result))
        checks: list[tuple[str, type[Exception]]] = []  # filled when the executable is traced
        fresh_metas = arguments.flat_tensors(functional_result)[:fresh]
        output_layouts = [_output_layout(t) for t in fresh_metas]
        flatteners = [None if layout_ is None else layout_[2] for layout_ in output_layouts]
        _check_dtypes(self.name, fresh_metas, arguments.flat_tensors(functional_result)[fresh:], write_targets)

        host_checks = [] if graph is not None else _host_checked_scalars(plan, values, functional_result)

        def compute(*flat_inputs: Any) -> tuple[Any, ...]:
            slot_arrays, jax_args, seed, offset = arguments.unpack(
                flat_inputs, described, slots, buffer_count, scalar_count, bool(random_elements)
            )
            functional_args = _functional_args(plan, jax_args)
            context = registry.TraceContext(seed, offset)
            if host_checks:
                context.host_checked = plan.functional
            with registry.tracing(context):
                if graph is not None:
                    leaves = jax.tree_util.tree_leaves(functional_args, is_leaf=lambda v: v is None)
                    results = engine.run_graph(graph, [leaves[i] for i in positions])
                else:
                    result = engine.lower_op(plan.functional, functional_args, functional_metas, functional_result)
                    results = arguments.flat_tensors(result)
            checks[:] = [(message, error) for _, _, message, error in context.checks]
            check_outputs = [x for failed, detail, _, _ in context.checks for x in (failed, detail)]
            for value, target in zip(results[fresh:], write_targets, strict=True):
                if target is not None:
                    _, slot, code, sizes, strides, start = target
                    view = layout.View(jax_dtype(DTYPE_OF[code]), tuple(sizes), tuple(strides), start)
                    slot_arrays[slot] = layout.write(slot_arrays[slot], slots[slot][2], value, view)
            # Optional results PyTorch leaves undefined (None, e.g. masked-out gradients) and integer
            # (SymInt) results are not device outputs: the meta kernel's values are returned for them.
            new_tensors = [
                flatten(r) for r, flatten in zip(results[:fresh], flatteners, strict=True) if flatten is not None
            ]
            return (*new_tensors, *[slot_arrays[s] for s in written_slots], *check_outputs)

        executable = jax.jit(compute, out_shardings=jax.sharding.SingleDeviceSharding(cores.core(device)))
        # A slot's buffer takes the dtype of the last view written into it.
        last_code = {d[1]: d[2] for d in write_targets if d is not None}
        codes = [last_code[s] for s in written_slots]
        outputs = None
        returns = _returns(plan)
        if fresh:
            outputs = _C.OutputLayout(
                [
                    (list(meta.shape), list(strides), CODE_OF[meta.dtype])
                    for meta, strides, _ in filter(None, output_layouts)
                ]
            )
            if not all(isinstance(t, torch.Tensor) for t in fresh_metas):
                returns = _with_undefined(returns, fresh_metas)
        runner = _executable_runner(
            self.name, executable, random_elements, checks, outputs, written_slots, codes, returns
        )
        return _with_host_checks(runner, host_checks) if host_checks else runner


def _host_checked_scalars(plan: Plan, values: list[Any], functional_result: Any) -> list[tuple[int, Any]]:
    """(position in the call, dtype) of each Python number the op's lowering lists as ``checked``:
    c10 converts it to the result's dtype, and an overflow raises at the call, as on the CPU, when
    the runner checks it on the host before each launch (a runtime scalar changes between calls)."""
    entry = registry.LOWERINGS.get(plan.functional)
    if entry is None or not entry.checked:
        return []
    first = arguments.flat_tensors(functional_result)[0]
    if not isinstance(first, torch.Tensor):
        return []
    names = [argument.name for argument in plan.op._schema.arguments]
    return [
        (i, jax_dtype(first.dtype))
        for i, name in enumerate(names)
        if name in entry.checked and registry.is_number(values[i])
    ]


def _with_host_checks(runner: Runner, host_checks: list[tuple[int, Any]]) -> Runner:
    def run(inputs, device, slot_tensors, generator, values):
        for position, dtype in host_checks:
            registry.raise_if_overflows(values[position], dtype)
        return runner(inputs, device, slot_tensors, generator, values)

    return run


def _output_layout(meta: Any) -> tuple[torch.Tensor, tuple[int, ...], Callable[[Any], Any]] | None:
    """How a new result is stored: (meta, strides, flatten) where flatten turns the result's value into
    its buffer. Dense layouts keep the strides PyTorch's meta kernel chose (a transposed or
    channels_last result stays so); anything else is stored contiguously. None for a non-tensor."""
    if not isinstance(meta, torch.Tensor):
        return None
    sizes, strides = tuple(meta.shape), tuple(meta.stride())
    order = layout.dense_order(sizes, strides)
    if order is None:
        return meta, layout.contiguous_strides(sizes), lambda value: value.reshape(-1)
    if order == tuple(range(len(sizes))):
        return meta, strides, lambda value: value.reshape(-1)
    return meta, strides, lambda value: jax.numpy.transpose(value, order).reshape(-1)


def _check_dtypes(name: str, fresh: list[Any], written: list[Any], targets: list[Any]) -> None:
    """PyTorch's dtype rules for results, which its meta kernels do not always apply.

    Raises:
        RuntimeError: an in-place or ``out=`` result cannot be cast to the tensor it is written to
            (TensorIterator's "result type ... can't be cast to the desired output type ...").
        TypeError: a new result would be float64/complex128, which neuron does not hold (decision 8).
    """
    for result, target in zip(written, targets, strict=True):
        if target is None or not isinstance(result, torch.Tensor):
            continue
        destination = DTYPE_OF[target[2]]
        if not torch.can_cast(result.dtype, destination):
            raise RuntimeError(
                f"result type {aten_name(result.dtype)} can't be cast to the desired output type "
                f"{aten_name(destination)}"
            )
    for result in fresh:
        if isinstance(result, torch.Tensor) and result.dtype in (torch.float64, torch.complex128):
            _C._check_dtype_supported(CODE_OF[result.dtype], name)


def _raise_cast_error_as_cpu(name: str, plan: Any, metas: list[Any], described: list[Any]) -> None:
    """Raises CPU's cast error when an in-place or ``out=`` call's meta kernel rejected it because its
    result cannot be cast into the written tensor: some meta kernels word that differently from
    TensorIterator ("Promotion of int.add/sub_(float) in in-place ops ...", "Attempting to cast
    from ... to out tensor ..."). Returns when that is not the reason (the caller re-raises)."""
    if not plan.writes or plan.functional is plan.op:
        return
    try:
        functional_result = _call(plan.functional, _functional_args(plan, metas))
    except RuntimeError:
        return  # the functional form fails too: the meta kernel's error is about something else
    written = arguments.flat_tensors(functional_result)[plan.fresh :]
    targets = [d for i in plan.writes for d in arguments.tensor_descriptions(described[i])]
    if len(written) == len(targets):
        _check_dtypes(name, [], written, targets)


def _raise_as_cpu(name: str, plan: Any, metas: list[Any], described: list[Any], error: Exception) -> NoReturn:
    """Raises the meta kernel's ``error`` as the CPU words it (eager/errors.py): TensorIterator's
    cast, broadcasting and Scalar conversion errors, ATen's sizes and dtype names."""
    if isinstance(error, RuntimeError):
        _raise_cast_error_as_cpu(name, plan, metas, described)
        _raise_broadcast_error_as_cpu(plan, metas, described, error)
    _raise_conversion_error_as_cpu(metas, error)
    worded = errors.in_aten_words(error)
    if worded is error:
        raise error
    raise worded from None


def _raise_conversion_error_as_cpu(metas: list[Any], error: Exception) -> None:
    """c10's error for a Scalar that does not fit ``self``'s dtype (masked_fill's Python meta kernel
    says "could not convert to type <class 'int'> without overflow", or lets Python's ``int()`` raise
    ValueError for NaN and infinities). Returns for other errors."""
    message = str(error)
    if not message.startswith(
        ("could not convert to type <class", "cannot convert float NaN to integer", "cannot convert float infinity")
    ):
        return
    target = next((m for m in metas if isinstance(m, torch.Tensor)), None)
    name = None if target is None else registry.c10_type_name(jax_dtype(target.dtype))
    if name is not None:
        raise RuntimeError(f"value cannot be converted to type {name} without overflow") from None


def _raise_broadcast_error_as_cpu(plan: Any, metas: list[Any], described: list[Any], error: RuntimeError) -> None:
    """Raises TensorIterator's broadcasting error for an elementwise call whose Python meta kernel
    (torch._refs) rejected it in its own words. Returns when that is not the reason."""
    message = str(error)
    if torch.Tag.pointwise not in plan.functional.tags or not message.startswith(
        ("Attempting to broadcast a dimension", "output with shape torch.Size")
    ):
        return
    inputs = [tuple(value.shape) for value in _functional_args(plan, metas) if isinstance(value, torch.Tensor)]
    in_place = [
        description[3]
        for position in plan.writes
        if not plan.op._schema.arguments[position].kwarg_only
        for description in arguments.tensor_descriptions(described[position])
        if description is not None
    ]
    errors.check_broadcast(inputs, in_place)


def _random_elements(lowering: registry.Lowering, result: Any) -> int:
    """Random draws of one op: one per element of its results (at least one), as the generator counts."""
    if not lowering.random:
        return 0
    return max(sum(t.numel() for t in arguments.flat_tensors(result) if isinstance(t, torch.Tensor)), 1)


def _split(op: OpOverload, values: list[Any]) -> tuple[list[Any], dict[str, Any]]:
    """Schema-ordered values as positional and keyword arguments."""
    arguments = op._schema.arguments
    positional = [v for a, v in zip(arguments, values, strict=True) if not a.kwarg_only]
    keywords = {a.name: v for a, v in zip(arguments, values, strict=True) if a.kwarg_only}
    return positional, keywords


def _call(op: OpOverload, values: list[Any]) -> Any:
    positional, keywords = _split(op, values)
    return op(*positional, **keywords)


def _functional_args(plan: Plan, values: list[Any]) -> list[Any]:
    """The functional overload's arguments: the op's, minus the ``out=`` tensors."""
    if plan.functional is plan.op:
        return list(values)
    by_name = {a.name: v for a, v in zip(plan.op._schema.arguments, values, strict=True)}
    # A factory's out= form has no dtype/device/... arguments: the functional defaults apply.
    return [by_name.get(a.name, a.default_value) for a in plan.functional._schema.arguments]


def _returns(plan: Plan) -> Callable[[list[Any], list[Any]], Any]:
    """How to build the op's return value from its arguments and new output tensors."""
    returns = plan.op._schema.returns
    if not returns:
        return lambda values, outputs: None
    if plan.writes and not plan.fresh:
        written = [plan.writes[0]] if len(returns) == 1 else list(plan.writes)
        if len(returns) == 1:
            position = written[0]
            return lambda values, outputs: values[position]
        return lambda values, outputs: tuple(values[i] for i in written)
    if len(returns) == 1:
        if str(returns[0].type).startswith("List"):
            return lambda values, outputs: list(outputs)
        return _single_output
    return lambda values, outputs: tuple(outputs)


def _with_undefined(
    returns: Callable[[list[Any], list[Any]], Any], metas: list[Any]
) -> Callable[[list[Any], list[Any]], Any]:
    """``returns`` for an op some of whose results are not tensors for this call: undefined (None)
    or integers (SymInt results such as SDPA's max_q), which take the meta kernel's values."""

    def assemble(values: list[Any], outputs: list[Any]) -> Any:
        produced = iter(outputs)
        return returns(values, [next(produced) if isinstance(m, torch.Tensor) else m for m in metas])

    return assemble


def _single_output(values: list[Any], outputs: list[Any]) -> Any:
    return outputs[0]
