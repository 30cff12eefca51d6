"""Eager kernels: every op call runs one cached executable (decision 6).

The fast path of a call is: the C++ core turns the arguments into a cache key and the executable's
inputs (``CallSignature.prepare``), and the cached runner launches the executable
(runtime/executable.py), which binds its outputs to new tensors or rebinds them to the storages the
op writes. No FX work, no meta kernel, no Python loop over arguments.

On a cache miss the kernel describes the call (``CallSignature.describe``), runs PyTorch's meta
kernel for it (so shape, dtype and argument errors are PyTorch's own, worded as the CPU's:
eager/errors.py), checks TensorIterator's rules (eager/rules.py), and builds the executable of its
plan (eager/plan.py): the op's lowering, or its decomposition's graph, traced over the storages'
flat buffers. Calls that resize ``out=`` tensors or fall back to the CPU get other runners
(eager/runners.py).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import Any

import torch

from torch_neuronx._compat.torch_internals import dynamo_disabled, op_name, pytree, schema_of
from torch_neuronx.eager import (
    determinism,
    dispatched_dtypes,
    errors,
    fallback,
    list_items,
    memory_formats,
    rules,
    runners,
    tracking,
)
from torch_neuronx.eager.math_bits import resolve_math_bits
from torch_neuronx.eager.plan import Plan, call, results_of_in_place, returns
from torch_neuronx.lowering import engine, registry
from torch_neuronx.runtime import arguments, executable, launch_records, storage_writes
from torch_neuronx.runtime.dtypes import aten_name
from torch_neuronx.runtime.executable_cache import EXECUTABLES, with_thread_count

#: The warning that Python meta kernels give for an ``out=`` tensor they resize (torch._prims_common
#: ``_maybe_resize_out``); the runner that resizes it gives ATen's own (eager/runners.py), once.
_META_RESIZE_WARNING = "An output with one or more elements was resized"


def _empty_outs(op: Any, metas: list[Any]) -> None:
    """Gives each ``out=`` tensor (a keyword-only written argument) of ``metas`` 0 elements before
    ``op``'s meta kernel resizes it: a C++ meta kernel resizes a wrong-shaped one with ATen's
    warning, which the dispatcher hands to Python only when the user's call returns, past any filter
    here, so it came twice with the runner's own. The meta kernel resizes an out= of any shape, so
    which shape it had does not change what the meta kernel accepts; the resized one is compared
    with the argument's description (``rules.resized_outputs``)."""
    for i, argument in enumerate(schema_of(op).arguments):
        written = argument.alias_info is not None and argument.alias_info.is_write
        if written and argument.kwarg_only and isinstance(metas[i], torch.Tensor) and metas[i].numel():
            metas[i] = metas[i].new_empty(0)


@contextlib.contextmanager
def _meta_resize_warnings_silenced() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_META_RESIZE_WARNING)
        yield


#: Descriptions of arguments whose values change between calls of one executable.
_RUNTIME_SCALARS = (arguments.NumberArg, arguments.NumberListArg, arguments.HostScalarArg)


class EagerKernel:
    """The PrivateUse1 kernel of one ATen overload (registered with torch.library)."""

    def __init__(self, plan: Plan, allow_cpu: frozenset[str] = frozenset()) -> None:
        self.plan = plan
        self.op = plan.op
        self.name = op_name(plan.op)
        lowering = registry.LOWERINGS.get(plan.functional)
        static = lowering.static if lowering is not None else frozenset()
        self.allow_cpu = allow_cpu
        self.signature = arguments.call_signature(
            plan.op, static_scalars=plan.decomposed, static=static, allow_cpu=allow_cpu
        )
        self.cache: dict[bytes, executable.Runner] = {}  # bounded by runtime.executable_cache

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if storage_writes.active:  # an async collective's result still to land (runtime/storage_writes.py)
            storage_writes.wait_for_writes_into_arguments(args, kwargs)
        try:
            key, inputs, device, slot_tensors, generator, values, convert_first = self.signature.prepare(args, kwargs)
            key = with_thread_count(key)
        except RuntimeError:
            fallback.refuse_neuron_generator_for_cpu_tensors(args, kwargs)
            if list_items.spans_devices(self.op, args, kwargs):
                return list_items.run_per_item(self.op, self, args, kwargs)
            rules.check_shapes_before_devices(self.plan, engine.schema_values(self.op, args, kwargs))
            raise
        run = self.cache.get(key)
        if run is None:
            if convert_first:
                return self._with_arguments_converted(device, values)
            started = launch_records.now() if launch_records.active else 0
            with dynamo_disabled():  # building traces and compiles: keep Dynamo out
                with launch_records.ops_unrecorded():
                    run = self._build(args, kwargs, inputs)
                EXECUTABLES.admit(self.cache, key, run)
                result = run(inputs, device, slot_tensors, generator, values)
            if started:
                # The first run of a new executable traces and compiles it (or loads it from the
                # persistent cache): the event spans both, and the launch itself.
                launch_records.runtime_event("neuronCacheMiss", device, started, 0, self.name)
            return result
        EXECUTABLES.touch(self.cache, key)
        return run(inputs, device, slot_tensors, generator, values)

    def _with_arguments_converted(self, device: int, values: list[Any]) -> Any:
        """CPU tensors where PyTorch accepts them (indices, as on CUDA) move to the op's core first;
        a lazy conjugate/negative view is resolved (its storage holds other values)."""
        target = torch.device("neuron", device)

        def convert(value: Any, move: bool) -> Any:
            if isinstance(value, torch.Tensor):
                if move and value.device.type == "cpu" and value.dim() > 0:
                    return value.to(target)
                return resolve_math_bits(value)
            if isinstance(value, (list, tuple)):
                return type(value)(convert(v, move) for v in value)
            return value

        schema_arguments = schema_of(self.op).arguments
        converted = [convert(v, a.name in self.allow_cpu) for a, v in zip(schema_arguments, values, strict=True)]
        return call(self.op, converted)

    def _build(self, args: tuple[Any, ...], kwargs: dict[str, Any], inputs: list[Any]) -> executable.Runner:
        """The runner of this call signature: its executable's launch, or one that resizes ``out=``
        tensors or falls back to the CPU."""
        description = self.signature.describe(args, kwargs)
        described, values = list(description.arguments), list(description.values)
        plan = self.plan
        rules.check_written_on_device(self.name, plan, described, description.device)
        metas = arguments.meta_values(values, described)
        if plan.op in runners.RESIZES_SELF:
            shape = list(call(plan.functional, plan.functional_args(metas)).shape)
            if shape != list(metas[plan.writes[0]].shape):
                return runners.resize_self_runner(plan)
        registry.check_dim_in_range(plan.op, metas)
        rules.check_cat_operands(plan, metas)
        rules.check_argument_dtypes(self.name, plan, metas)
        functional_metas = plan.functional_args(metas)
        registry.check_scalar_values(plan.functional, functional_metas)
        if plan.op in runners.RETURNS_EMPTY_SELF and metas[plan.writes[0]].numel() == 0:
            return runners.empty_self_runner(plan)
        registry.check_rule_first(plan.functional, functional_metas)
        rules.check_argument_overlap(self.name, plan, values)
        list_items.check_item_overlap(plan, values)  # each item's TensorIterator: before shapes and dtypes
        refused = None
        try:
            try:
                with _meta_resize_warnings_silenced(), determinism.describing_neuron_tensors.raised():
                    _empty_outs(plan.op, metas)
                    result_meta = call(plan.op, metas)
                    if plan.functional is not plan.op:
                        functional_result = call(plan.functional, functional_metas)
                    elif plan.writes and not schema_of(plan.op).returns:  # an in-place lowering returning ()
                        functional_result = results_of_in_place(plan.op, metas)
                    else:
                        functional_result = result_meta
            except AssertionError as error:  # a Python meta kernel's assert where ATen has TORCH_CHECK
                refused = RuntimeError(str(error))
            except KeyError as error:  # a Python meta kernel's complex counterpart of a real dtype
                if not (error.args and isinstance(error.args[0], torch.dtype)):
                    raise
                # ATen's toComplexType (c10/core/ScalarType.h), which linalg_eig's meta calls first
                refused = RuntimeError(f"Unknown Complex ScalarType for {aten_name(error.args[0])}")
            except NotImplementedError:  # a RuntimeError too, handled below
                raise
            except TypeError:  # a Python meta kernel's own failure (torch.finfo of an integer)
                dispatched_dtypes.check_dispatched_dtype(plan.functional, functional_metas, None)
                raise
            except (RuntimeError, ValueError, IndexError, OverflowError) as error:
                refused = error
        except NotImplementedError:
            # CUDA's dispatch refuses a dtype before anything; else no meta kernel: PyTorch cannot
            # describe the result (or its meta kernel is the CPU's, refusing in the CPU's words).
            dispatched_dtypes.check_dispatched_dtype(plan.functional, functional_metas, None)
            return runners.fallback_runner(plan.op)
        if refused is not None:  # reworded outside: ATen's words may be a NotImplementedError
            rules.check_no_internal_overlap(plan, values)  # a meta kernel may restride first (sort)
            if isinstance(refused, ValueError):  # a Python reference's own check, not one of ATen's
                dispatched_dtypes.check_dispatched_dtype(plan.functional, functional_metas, None)
            if torch.Tag.pointwise in plan.functional.tags:
                rules.check_pointwise_overlap(plan, values)  # TensorIterator's first check, before dtypes
            errors.raise_as_cpu(self.name, plan, metas, described, refused)
        resized = rules.resized_outputs(plan, values, metas, described, functional_metas, functional_result)
        if resized:
            pointwise = torch.Tag.pointwise in plan.functional.tags
            return runners.resize_runner(plan.op, resized, plan.writes, tensor_iterator=pointwise)
        rules.check_written_shapes(plan, described, functional_result)
        if torch.Tag.pointwise in plan.functional.tags:
            rules.check_pointwise_overlap(plan, values)
        registry.check_dtype_rule(plan.functional, functional_metas)
        all_results = arguments.flat_tensors(functional_result)
        fresh = plan.fresh if plan.writes else len(all_results)
        fresh_metas = memory_formats.result_metas(plan.functional, functional_metas, all_results[:fresh])
        targets = rules.write_targets(plan, described)
        # TensorIterator checks that the result casts to an in-place/out= tensor before dispatching.
        rules.check_result_dtypes(self.name, fresh_metas, all_results[fresh:], targets)
        dispatched_dtypes.check_dispatched_dtype(plan.functional, functional_metas, functional_result)
        if list_items.items_share_memory(plan, values):
            return list_items.item_by_item_runner(plan, self)
        if plan.decomposed:
            try:
                graph, positions = engine.trace_decomposition(plan.functional, functional_metas)
            except engine.Unsupported:
                return runners.fallback_runner(plan.op)
            random_elements = engine.random_elements(graph)
        else:
            graph, positions = None, []
            random_elements = engine.op_random_elements(plan.functional, functional_result, values)
        host_checks = [] if graph is not None else runners.host_checked_scalars(plan, values, functional_result)
        lowered = registry.LOWERINGS.get(plan.functional) if graph is None else None
        checked_on_host = bool(host_checks) or (lowered is not None and bool(lowered.scalar_checks))
        check = runners.host_checker(host_checks, plan) if checked_on_host else None
        # Where every number is a constant of the executable (a default or a static argument), the
        # checks give the same answer at each call: they are made once, here, before compiling.
        checked_once = check is not None and not any(isinstance(d, _RUNTIME_SCALARS) for d in described)
        if checked_once:
            check(values)

        def compute(context: Any, args: list[Any]) -> list[Any]:
            functional_args = plan.functional_args(args)
            if graph is not None:
                leaves = pytree.tree_leaves(functional_args, is_leaf=lambda v: v is None)
                return engine.run_graph(graph, [leaves[i] for i in positions])
            result = engine.lower_op(plan.functional, functional_args, functional_metas, functional_result)
            return arguments.flat_tensors(result)

        # Optional results PyTorch leaves undefined (None, e.g. masked-out gradients) and integer
        # (SymInt) results are not device outputs: the meta kernel's values are returned for them.
        built = executable.build(
            self.name,
            description,
            inputs,
            compute,
            results=[executable.ResultLayout.of(m) if isinstance(m, torch.Tensor) else m for m in fresh_metas],
            writes=targets,
            random_elements=random_elements,
            host_checked=plan.functional if checked_on_host else None,
            returns=returns(plan),
            counter=tracking.executed,
            ahead_of_time=False,
        )
        launch = built.launch if check is None or checked_once else runners.with_host_checks(built.launch, check)
        if lowered is not None and lowered.call_warning is not None:
            launch = runners.with_call_warning(launch, plan)
        return launch


class WritingKernel(EagerKernel):
    """The kernel of an in-place or ``out=`` overload: it reads the buffers it writes and binds
    their successors under runtime/storage_writes.py's lock, so that another thread's write to the
    same storage is kept. Functional overloads, which bind only new storages, skip the lock."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if storage_writes.active:  # before the lock, which the writes' landing takes
            storage_writes.wait_for_writes_into_arguments(args, kwargs)
        with storage_writes.locked():
            return super().__call__(*args, **kwargs)


def eager_kernel(plan: Plan, allow_cpu: frozenset[str] = frozenset()) -> EagerKernel:
    """The PrivateUse1 kernel of ``plan``'s overload: a :class:`WritingKernel` for an overload that
    writes its arguments (its schema is mutable), else an :class:`EagerKernel`."""
    kind = WritingKernel if schema_of(plan.op).is_mutable else EagerKernel
    return kind(plan, allow_cpu)
