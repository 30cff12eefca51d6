"""Private PyTorch APIs the backend relies on, each with the reason it is needed."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections.abc import Callable, Iterator
from typing import Any

import torch

# Overloads and their packets (``torch.ops.aten.add.Tensor``, ``torch.ops.aten.add``): PyTorch names
# their types only in torch._ops.
from torch._ops import OpOverload, OpOverloadPacket

# Elementwise type promotion exactly as PyTorch's references compute it; the layout test that ATen's
# memory-overlap checks (MemoryOverlap.cpp) decide with; ATen's Context::alertNotDeterministic in its
# words (it raises, or warns under use_deterministic_algorithms(True, warn_only=True)); TensorIterator's
# choice of a result's strides from its operands'; ATen's Tensor::suggest_memory_format.
from torch._prims_common import (
    ELEMENTWISE_TYPE_PROMOTION_KIND,
    alert_not_deterministic,
    compute_elementwise_output_strides,
    elementwise_dtypes,
    is_non_overlapping_and_dense_or_false,
    suggest_memory_format,
)

# Graph capture of a decomposition (decision 5: ops without a lowering are traced into the same
# executable through PyTorch's decompositions).
from torch.fx.experimental.proxy_tensor import make_fx as _make_fx

# Nested containers of tensors (flatten, map): PyTorch 2.13 has no public pytree module.
from torch.utils import _device as _device_mode
from torch.utils import _pytree as pytree

#: The Python files between a Tensor operator and the op it calls: torch/_tensor.py (the reflected
#: operators, ``__rsub__``, ``__rpow__``, ..., in a wrapper that turns a TypeError into
#: NotImplemented as the C operators do, and ``Tensor.__torch_function__``), torch/overrides.py
#: (``handle_torch_function``) and torch/utils/_device.py (the mode of ``torch.set_default_device``
#: and ``with torch.device(...)``).
TENSOR_DISPATCH_FILES = frozenset(
    os.path.abspath(module.__file__) for module in (torch._tensor, torch.overrides, _device_mode)
)

#: The type of an argument of an operator schema (``schema_of(op).arguments[i]``).
SchemaArgument = torch._C.Argument

__all__ = [
    "ELEMENTWISE_TYPE_PROMOTION_KIND",
    "version_counter_kept",
    "OpOverload",
    "OpOverloadPacket",
    "SchemaArgument",
    "alert_not_deterministic",
    "skip_meta_alerts",
    "compute_elementwise_output_strides",
    "suggest_memory_format",
    "aot_autograd",
    "default_partition",
    "aot_input_mutations",
    "forget_aot_metadata",
    "call_composite_explicit",
    "assumes_static_shapes_by_default",
    "infer_size",
    "is_fallthrough",
    "mark_boxed",
    "op_name",
    "overload_name",
    "pytree",
    "TENSOR_DISPATCH_FILES",
    "requested_dynamic_dims",
    "schema_of",
    "storage_identity",
    "decomposition_table",
    "register_fake_tensor_meta",
    "check_before_fake_impl",
    "dynamo_disabled",
    "without_aot_first_call_analysis",
    "elementwise_dtypes",
    "format_values_on_host",
    "grad_scaler_without_fp64",
    "has_kernel",
    "is_non_overlapping_and_dense_or_false",
    "keep_dynamo_out_of",
    "linear_cross_entropy_accumulates_in_float32",
    "make_fx",
    "fake_like",
    "fake_in_active_mode",
    "run_on_fakes",
    "register_device_module",
    "route_default_compiler",
    "dispatch_keys_for_tracing",
    "as_nested_tensor_cpu_kernel",
]


def make_fx(fn: Callable[..., Any], **kwargs: Any) -> Callable[..., torch.fx.GraphModule]:
    """PyTorch's ``make_fx``, tracing under Dynamo's compile lock: FX tracing keeps global state
    (``torch.fx._symbolic_trace``'s patcher), so two threads must not trace at once, and Dynamo and
    AOTAutograd trace under that lock."""
    traced = _make_fx(fn, **kwargs)

    def trace(*args: Any) -> torch.fx.GraphModule:
        from torch._dynamo.convert_frame import compile_lock

        with compile_lock:
            return traced(*args)

    return trace


def same_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors (real or fake) are views of one storage."""
    return a.untyped_storage()._cdata == b.untyped_storage()._cdata


def fake_result(op: OpOverload, *args: Any, **kwargs: Any) -> Any:
    """What ``op`` returns for arguments that are fake tensors (their own mode computes it) or hold
    no tensor (a factory: ``aten.rand.default([4], device=...)``), computed in a fresh
    ``FakeTensorMode``: never a real call, which would allocate and draw random numbers."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    if any(isinstance(leaf, torch.Tensor) for leaf in pytree.tree_leaves((args, kwargs))):
        return op(*args, **kwargs)
    with FakeTensorMode():
        return op(*args, **kwargs)


def fake_like(values: list[Any]) -> list[Any]:
    """The tensors of ``values`` as fake tensors (sizes, strides, dtype and device, no storage) of one
    ``torch._subclasses.FakeTensorMode``, other values as they are: inputs for
    ``make_fx(..., tracing_mode="fake")``, which traces in the inputs' mode."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    return [
        mode.from_tensor(value, static_shapes=True) if isinstance(value, torch.Tensor) else value for value in values
    ]


def symint_hint(value: torch.SymInt | torch.SymFloat) -> int | float:
    """The value a SymInt (or SymFloat) had in the example that made it, without the guard
    ``int(value)`` adds (which would specialise the graph on it)."""
    from torch.fx.experimental.symbolic_shapes import optimization_hint

    if isinstance(value, torch.SymFloat):
        return value.node.hint
    return optimization_hint(value)


def unbacked_symbols(value: Any) -> set[Any]:
    """The data-dependent size symbols (``u0``: sizes ``nonzero`` or boolean indexing produce) in
    the sizes and numbers of ``value`` (a tree of fake tensors and SymInts)."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    symbolic = (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool)
    return set(free_unbacked_symbols([leaf for leaf in pytree.tree_leaves(value) if isinstance(leaf, symbolic)]))


def is_fake(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` is a ``FakeTensor`` (torch.compile's tracing values: no storage; their
    ``data_ptr`` warns and reads 0)."""
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(tensor, FakeTensor)


def fake_in_active_mode(value: torch.Tensor) -> torch.Tensor:
    """``value`` as a fake tensor of the ``FakeTensorMode`` that is active (inside :func:`run_on_fakes`):
    for real tensors a graph holds as attributes, which the mode would otherwise let in-place ops
    write."""
    mode = torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE)
    return mode.from_tensor(value, static_shapes=True)


def _fake_limits() -> tuple[type[Exception], ...]:
    """What a fake run raises where it cannot know the eager result (data-dependent output values
    and shapes, ops it cannot run on fakes), as opposed to an op's argument errors."""
    from torch._subclasses import fake_tensor
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    return (
        NotImplementedError,  # no meta kernel: eager falls back to the CPU
        fake_tensor.DataDependentOutputException,
        fake_tensor.DynamicOutputShapeException,
        fake_tensor.UnsupportedOperatorException,
        fake_tensor.UnsupportedFakeTensorException,
        fake_tensor.MetadataMismatchError,
        GuardOnDataDependentSymNode,
    )


def augment_memory_snapshot_stack_traces(snapshot: dict[str, Any]) -> dict[str, Any]:
    """``torch.cuda.memory._snapshot(augment_with_fx_traces=True)``'s step (device-independent):
    frames of FX-generated code gain the original source's trace."""
    from torch._utils import _augment_memory_snapshot_stack_traces

    return _augment_memory_snapshot_stack_traces(snapshot)


def is_wrapper_subclass(value: Any) -> bool:
    """Whether ``value`` is a tensor subclass that wraps inner tensors (DTensor, a FakeTensor-backed
    DTensor of Dynamo's example inputs), which a plain fake tensor of its shape would not stand for."""
    from torch.utils._python_dispatch import is_traceable_wrapper_subclass

    return is_traceable_wrapper_subclass(value)


def run_on_fakes(
    fn: Callable[..., Any],
    inputs: list[Any],
    observe: Callable[[OpOverload, tuple, dict, Any], None],
    refused: Callable[[OpOverload, Exception], None] = lambda op, error: None,
) -> None:
    """Runs ``fn`` on fresh fake tensors shaped as ``inputs`` (real or fake tensors; other values as
    they are) and calls ``observe(op, args, kwargs, result)`` for each ATen op that reaches the
    Python dispatch key, as a device's kernels would receive it: no Python dispatcher, so ops that
    PyTorch decomposes only for tracing (``py_impl(DispatchKey.Autograd)``) arrive whole. An ATen op
    whose meta kernel raises an argument error (RuntimeError, TypeError, ValueError or IndexError,
    not a fake run's own limit such as a data-dependent shape) calls ``refused(op, error)`` first.
    Exceptions of ``fn``, ``observe`` and ``refused`` propagate."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._python_dispatch import TorchDispatchMode

    limits = _fake_limits()

    class Observer(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
            kwargs = kwargs or {}
            try:
                result = func(*args, **kwargs)
            except limits:
                raise
            except (RuntimeError, TypeError, ValueError, IndexError) as error:
                # ATen's meta kernels check arguments as its device kernels do; a custom op's fake
                # kernel may see fakes differently (an NKI op's aliasing check of fake storage).
                if isinstance(func, OpOverload) and func.namespace == "aten":
                    refused(func, error)
                raise
            if isinstance(func, OpOverload):
                observe(func, args, kwargs, result)
            return result

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    with mode:
        fakes = [
            torch.empty_strided(
                value.shape, value.stride(), dtype=value.dtype, device=value.device, requires_grad=value.requires_grad
            )
            if isinstance(value, torch.Tensor)
            else value
            for value in inputs
        ]
    # FakeTensorMode logs each meta kernel's exception at error level before raising it: the caller
    # reports the refusal itself.
    fake_log = logging.getLogger("torch._subclasses.fake_tensor")
    level = fake_log.level
    fake_log.setLevel(logging.CRITICAL)
    try:
        with mode, Observer():
            fn(*fakes)
    finally:
        fake_log.setLevel(level)


def schema_of(op: OpOverload) -> torch._C.FunctionSchema:
    """The schema of an overload (its arguments, returns and alias annotations): PyTorch offers it
    only as ``op._schema``."""
    return op._schema


def op_name(op: OpOverload) -> str:
    """``aten::add.Tensor`` for ``aten.add.Tensor``, ``aten::relu.default`` for ``aten.relu.default``:
    the name under which the backend reports an overload (op tracking, errors, faults)."""
    return f"{op._schema.name}.{op._overloadname}"


def overload_name(op: OpOverload) -> str:
    """The overload's name within its packet: ``Tensor`` for ``aten.add.Tensor``, ``default``."""
    return op._overloadname


def storage_identity(tensor: torch.Tensor) -> int:
    """The address of ``tensor``'s c10 StorageImpl: equal for two live tensors exactly when they share
    one storage (``set_``, views), as ATen's ``storage().unsafeGetStorageImpl()`` comparisons decide.
    Data pointers do not tell: every empty storage has address 0."""
    return tensor.untyped_storage()._cdata


def has_kernel(op: OpOverload, dispatch_key: str) -> bool:
    """Whether ``op`` has a kernel registered for ``dispatch_key`` (e.g. "CompositeImplicitAutograd")."""
    return torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), dispatch_key)


def is_fallthrough(op: OpOverload, dispatch_key: str) -> bool:
    """Whether ``op``'s kernel for ``dispatch_key`` (e.g. "Conjugate") is a fallthrough: the dispatcher
    passes the call on to the next key."""
    return has_kernel(op, dispatch_key) and torch._C._dispatch_kernel_for_dispatch_key_is_fallthrough(
        op.name(), getattr(torch._C.DispatchKey, dispatch_key)
    )


def call_composite_explicit(op: OpOverload, *args: Any) -> Any:
    """Calls ``op``'s CompositeExplicitAutograd kernel (PyTorch's own), bypassing the backend kernel
    that wraps it: the dispatcher's keysets are private (``torch._C.DispatchKeySet``)."""
    return op.redispatch(torch._C.DispatchKeySet(torch._C.DispatchKey.CompositeExplicitAutograd), *args)


def infer_size(a: torch.Size, b: torch.Size) -> torch.Size:
    """The broadcast shape of two shapes, with ATen's error (ExpandUtils.cpp ``infer_size``: "The size
    of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 0");
    ``torch.broadcast_shapes`` words it differently."""
    return torch._C._infer_size(a, b)


def aot_autograd(**kwargs: Any) -> Callable[..., Any]:
    """Dynamo's AOTAutograd backend factory (``torch._dynamo.backends.common.aot_autograd``)."""
    from torch._dynamo.backends.common import aot_autograd as factory

    return factory(**kwargs)


def default_partition(joint: torch.fx.GraphModule, joint_inputs: Any, **kwargs: Any) -> Any:
    """AOTAutograd's default split of a joint forward-backward graph into a forward graph and a
    backward graph (``torch._functorch.partitioners.default_partition``): its saved values are
    what the backward reads of the forward."""
    from torch._functorch.partitioners import default_partition as partition

    return partition(joint, joint_inputs, **kwargs)


def forget_aot_metadata() -> None:
    """Clears the ``ViewAndMutationMeta`` a previous graph of the same frame left in the tracing
    context, so that :func:`aot_input_mutations` after the next compilation reads that graph's own
    or nothing."""
    from torch._guards import TracingContext

    context = TracingContext.try_get()
    if context is not None:
        context.fw_metadata = None


def aot_input_mutations(graph: torch.fx.GraphModule) -> tuple[list[bool], int] | None:
    """What the graph AOTAutograd just compiled mutates: one flag per input of AOTAutograd's
    (the data, the metadata or the storage mutated) and how many of those inputs are ``graph``'s
    lifted parameters and buffers, which come before the Dynamo graph's own inputs. Read from the
    ``ViewAndMutationMeta`` AOTAutograd leaves in the tracing context (``TracingContext.fw_metadata``),
    whose inputs differ from the graph's when AOTAutograd merged aliased inputs into a synthetic
    base. None when it left no metadata."""
    from torch._guards import TracingContext

    metadata = getattr(TracingContext.try_get(), "fw_metadata", None)
    if metadata is None:
        return None
    lifted = len(list(graph.named_parameters(remove_duplicate=False))) + len(
        list(graph.named_buffers(remove_duplicate=False))
    )
    flags = [
        info.mutates_data or info.mutates_metadata or info.mutates_storage_metadata for info in metadata.input_info
    ]
    return flags, lifted


def mark_boxed(compiled: Any) -> None:
    """Tells AOTAutograd that ``compiled`` takes its inputs as one list it may clear (the boxed calling
    convention, so inputs can be freed early): an instance attribute, which Dynamo's wrapper around
    backward compilers copies."""
    compiled._boxed_call = True


def assumes_static_shapes_by_default() -> bool:
    """Dynamo's ``assume_static_by_default``: False under ``torch.compile(dynamic=True)``."""
    import torch._dynamo.config as dynamo_config

    return dynamo_config.assume_static_by_default


def requested_dynamic_dims(example: Any) -> set[int]:
    """The dimensions of a graph input's example tensor that ``torch._dynamo.mark_dynamic`` marked."""
    return set(getattr(example, "_dynamo_dynamic_indices", set()))


def decomposition_table() -> dict[OpOverload, Callable[..., Any]]:
    """PyTorch's registered decompositions (``torch._decomp.decomposition_table``)."""
    from torch._decomp import decomposition_table as table

    return dict(table)


def register_fake_tensor_meta(op: OpOverload, kernel: Callable[..., Any]) -> None:
    """Makes FakeTensorMode (Dynamo, AOTAutograd) compute ``op``'s result with ``kernel`` rather than
    with PyTorch's decomposition of it: an entry in ``torch._decomp.meta_table`` is what
    ``FakeTensorMode._dispatch_impl`` checks before it prefers a decomposition."""
    from torch._decomp import meta_table

    meta_table[op] = kernel


def restride_fake_result(op: OpOverload, memory_format: Callable[..., torch.memory_format | None]) -> None:
    """Lays out FakeTensorMode's result of ``op`` (a single tensor, from its own implementation in
    ``fake_impls``, which it prefers to any meta kernel) in ``memory_format(*args, **kwargs)`` where
    that gives one: convolution's picks channels-last for CPU and CUDA inputs only."""
    from torch._subclasses import fake_impls
    from torch._subclasses.fake_tensor import FakeTensor, in_kernel_invocation_manager

    implementation = fake_impls.op_implementations_dict.get(op)
    if implementation is None:
        return

    def restrided(fake_mode: Any, func: OpOverload, *args: Any, **kwargs: Any) -> Any:
        result = implementation(fake_mode, func, *args, **kwargs)
        layout = memory_format(*args, **kwargs)
        if layout is None or not isinstance(result, FakeTensor) or result.is_contiguous(memory_format=layout):
            return result
        with in_kernel_invocation_manager(fake_mode):
            meta = torch.empty_like(result, memory_format=layout)
        return FakeTensor(fake_mode, meta, result.fake_device)

    fake_impls.op_implementations_dict[op] = restrided


def check_before_fake_impl(op: OpOverload, check: Callable[..., None]) -> None:
    """Runs ``check`` before FakeTensorMode's own implementation of ``op``, where it has one
    (``fake_impls.register_op_impl``: native_layer_norm, slice_scatter, diagonal_scatter), which it
    prefers to any meta kernel."""
    from torch._subclasses import fake_impls

    implementation = fake_impls.op_implementations_dict.get(op)
    if implementation is None:
        return

    def checked(fake_mode: Any, func: OpOverload, *args: Any, **kwargs: Any) -> Any:
        check(*args, **kwargs)
        return implementation(fake_mode, func, *args, **kwargs)

    fake_impls.op_implementations_dict[op] = checked


def register_device_module(name: str, module: object) -> None:
    """Makes ``module`` available as ``torch.<name>`` (what torch.cuda is to CUDA)."""
    torch._register_device_module(name, module)


def skip_meta_alerts(skipped: Callable[[str], bool]) -> None:
    """Wraps ``torch._prims_common.alert_not_deterministic``, which PyTorch's Python meta kernels and
    decompositions call through that module, so that it returns without alerting for the callers
    ``skipped`` names (their words: "_histc_cuda with floating point input"). Once per process: a
    second call keeps the first filter."""
    original = torch._prims_common.alert_not_deterministic
    if getattr(original, "neuron_skipped", None) is not None:
        return

    def alert(caller: str) -> None:
        if not skipped(caller):
            original(caller)

    alert.neuron_skipped = skipped  # type: ignore[attr-defined]
    torch._prims_common.alert_not_deterministic = alert


def format_values_on_host() -> None:
    """Formats the values of printed neuron tensors from a host copy.

    ``torch/_tensor_str.py`` formats a device tensor's values on the device after converting them
    to float64 (``tensor_totype``), and sends only XLA-like devices to the CPU first. Neuron has no
    FP64 (decision 8), so its values are formatted from a CPU copy, as XLA's are; the rest of the
    repr (``device='neuron:0'``, dtype, grad_fn) still comes from the neuron tensor.
    """
    import torch._tensor_str as tensor_str

    if getattr(tensor_str._tensor_str, "_neuron_host_copy", False):
        return
    format_values = tensor_str._tensor_str

    def format_neuron_values_on_host(self: torch.Tensor, indent: int) -> str:
        if self.device.type == "neuron":
            self = self.cpu()
        return format_values(self, indent)

    format_neuron_values_on_host._neuron_host_copy = True  # type: ignore[attr-defined]
    tensor_str._tensor_str = format_neuron_values_on_host


def grad_scaler_without_fp64() -> None:
    """Lets ``torch.amp.GradScaler("neuron")`` unscale without FP64 on the device.

    ``GradScaler.unscale_`` computes the inverse scale as ``scale.double().reciprocal().float()`` on
    the scale's device, except on MPS, which has no FP64 either. For neuron the same float64
    computation runs on a host copy of the scale (the exact value PyTorch intends); everything else
    in ``unscale_`` is unchanged and runs on the device.
    """
    from torch.amp import grad_scaler

    unscale = grad_scaler.GradScaler.unscale_
    if getattr(unscale, "_neuron_host_fp64", False):
        return

    def unscale_(self: grad_scaler.GradScaler, optimizer: torch.optim.Optimizer) -> None:
        # A disabled scaler (enabled=False, any device) has no _scale at all: PyTorch's own
        # unscale_ returns for it at once.
        scale = getattr(self, "_scale", None)
        if scale is None or scale.device.type != "neuron":
            return unscale(self, optimizer)
        self._scale = scale.cpu()
        try:
            return unscale(self, optimizer)
        finally:
            self._scale = scale

    unscale_._neuron_host_fp64 = True  # type: ignore[attr-defined]
    grad_scaler.GradScaler.unscale_ = unscale_


def linear_cross_entropy_accumulates_in_float32() -> None:
    """Lets ``F.linear_cross_entropy``'s ``"auto"`` options accumulate 16-bit inputs in float32 on
    neuron, as they do on CUDA and the CPU.

    ``torch/nn/modules/linear_cross_entropy_options.py`` resolves ``acc_policy="auto"`` and
    ``acc_dtype=None`` per device type: float32 accumulation for 16-bit inputs on CUDA and the CPU,
    the input dtype on any other device. On neuron that made the loss of bfloat16 inputs accumulate
    in bfloat16 (6% off in a sample of PyTorch's OpInfo database), while Trainium's matmuls
    accumulate in float32. Neuron takes the CPU's pick (``"accurate"``: float32 logits too, where
    CUDA's ``"compact"`` keeps float16 logits), so its values are the CPU's.
    """
    from torch.nn.modules import linear_cross_entropy_options as options

    cls = options.LinearCrossEntropyOptions
    resolve = cls._resolve_auto_acc_dtype
    if getattr(resolve, "_neuron_float32", False):
        return

    def resolve_auto_acc_dtype(dtype: torch.dtype, device: torch.device | None) -> torch.dtype | None:
        if device is not None and device.type == "neuron" and dtype in (torch.float16, torch.bfloat16):
            return torch.float32
        return resolve(dtype, device)

    resolve_auto_acc_dtype._neuron_float32 = True  # type: ignore[attr-defined]
    cls._resolve_auto_acc_dtype = staticmethod(resolve_auto_acc_dtype)
    for dtype in (torch.bfloat16, torch.float16):
        options._AUTO_DEFAULTS.setdefault(("neuron", dtype), options._AUTO_DEFAULTS[("cpu", dtype)])


def keep_dynamo_out_of(*modules: str) -> None:
    """Stops Dynamo from tracing into ``modules`` (the backend's own code, JAX).

    When a compiled function graph-breaks, the ops between graphs run eagerly; their kernels are
    Python functions that Dynamo's frame hook would otherwise try to compile, tracing into JAX.
    PyTorch keeps such third-party packages out through ``torch._dynamo.trace_rules``.
    """
    from torch._dynamo import trace_rules

    for module in modules:
        trace_rules.add(module)


class dynamo_disabled:
    """``with dynamo_disabled():`` runs a block with Dynamo's frame hook off, as ``torch._dynamo.disable``
    does, without importing Dynamo.

    The backend's cold paths (building an executable, its first call, which traces and compiles it)
    run Python code of JAX and the libraries under it; when they run inside a torch.compile'd frame
    (a graph break into eager kernels), Dynamo would otherwise try to compile those frames.
    """

    def __enter__(self) -> None:
        from torch._C._dynamo.eval_frame import set_eval_frame

        self._previous = set_eval_frame(None)

    def __exit__(self, *exc_info: object) -> None:
        from torch._C._dynamo.eval_frame import set_eval_frame

        set_eval_frame(self._previous)


@contextlib.contextmanager
def without_aot_first_call_analysis() -> Iterator[None]:
    """Runs a block outside the TorchDispatchMode AOTAutograd puts around a compiled function's first
    call (``_AnalyzeCustomOpInputOutputMode``, which checks that custom ops do not alias their inputs).

    The backend builds a graph's executable on that first call; under the mode, every meta-kernel call
    the lowering makes (each element of an optimizer's foreach op) went through the mode's Python
    ``__torch_dispatch__``: about 0.25 s of an AdamW step's first call. The block is the backend's
    own build, which runs no custom op; the graph's ops are analyzed by AOTAutograd as before.
    """
    from torch._functorch._aot_autograd.runtime_wrappers import _AnalyzeCustomOpInputOutputMode
    from torch.utils._python_dispatch import _get_current_dispatch_mode, _pop_mode_temporarily

    if isinstance(_get_current_dispatch_mode(), _AnalyzeCustomOpInputOutputMode):
        with _pop_mode_temporarily():
            yield
    else:
        yield


def route_default_compiler(route: Callable[[Callable[..., Any], torch.fx.GraphModule, list[Any]], Any]) -> None:
    """Passes every graph that ``torch.compile``'s default backend is given (``torch.compile(model)``
    and ``backend="inductor"``) through ``route(inductor, graph, example_inputs)``, where
    ``inductor(graph, example_inputs)`` compiles it as PyTorch would. Installed once.

    Both spellings reach inductor through ``torch._TorchCompileInductorWrapper.__call__`` (PyTorch
    2.13), which imports ``compile_fx`` on its first graph; wrapping the method keeps that import (2 s)
    lazy.
    """
    wrapper = torch._TorchCompileInductorWrapper
    original = wrapper.__call__
    if getattr(original, "routed", False):
        return

    def call(self: Any, model: torch.fx.GraphModule, inputs: list[Any], **kwargs: Any) -> Any:
        return route(lambda graph, example_inputs: original(self, graph, example_inputs, **kwargs), model, inputs)

    call.routed = True  # type: ignore[attr-defined]
    wrapper.__call__ = call


#: Dispatch keys that tracing a decomposition (``torch.func.functionalize`` under ``make_fx``)
#: dispatches through. A tensor subclass's ``__torch_dispatch__`` calls ops with every key after
#: ``Python`` excluded in its thread (``after_Python_keyset``, c10's DispatchKeySet.h); a neuron op
#: called from one then traced its decomposition without functionalization's keys, and
#: ``_unwrap_functional_tensor`` dereferenced a null tensor (SIGSEGV, test_ops'
#: ``test_forward_ad_nn_functional_pixel_unshuffle``, CompositeCompliantTensor).
_TRACING_KEYS = tuple(
    key
    for key in (
        getattr(torch._C.DispatchKey, name, None)
        for name in (
            "Python",
            "PythonTLSSnapshot",
            "PreDispatch",
            "Functionalize",
            "FuncTorchDynamicLayerFrontMode",
            "FuncTorchDynamicLayerBackMode",
            "FuncTorchBatched",
            "FuncTorchVmapMode",
            "FuncTorchGradWrapper",
            "Batched",
            "BatchedNestedTensor",
            "VmapMode",
            "Conjugate",
            "Negative",
            "ZeroTensor",
            "Tracer",
            "DeferredInit",
        )
    )  # fmt: skip
    if key is not None
)


@contextlib.contextmanager
def dispatch_keys_for_tracing() -> Iterator[None]:
    """Runs a block with the dispatch keys decomposition tracing needs re-enabled in this thread
    (:data:`_TRACING_KEYS`), whatever its caller excluded; the thread's other excluded keys (autograd,
    autocast: the eager kernel runs below them) stay excluded."""
    exclude = torch._C._dispatch_tls_local_exclude_set()
    for key in _TRACING_KEYS:
        exclude = exclude.remove(key)
    with torch._C._ForceDispatchKeyGuard(torch._C._dispatch_tls_local_include_set(), exclude):
        yield


def as_nested_tensor_cpu_kernel(op: OpOverload) -> Callable[..., Any]:
    """A kernel that runs ``op`` as PyTorch's ``NestedTensorCPU`` kernel does, for registering on
    ``NestedTensorPrivateUse1``: the nested-tensor metadata ops read sizes, strides and offsets that
    the tensor holds on the host, whatever its device (eager/fallback.py, ``NESTED_METADATA``). Only
    ``OpOverload.redispatch`` with a dispatch key set reaches another key's kernel."""
    on_the_host = torch._C.DispatchKeySet(torch._C.DispatchKey.NestedTensorCPU)
    return functools.partial(op.redispatch, on_the_host)


def version_counter_kept(tensor: torch.Tensor) -> contextlib.AbstractContextManager[None]:
    """A block whose in-place writes into ``tensor`` leave its autograd version counter as it was
    (``torch.autograd._unsafe_preserve_version_counter``): for writes that c10d's backends make
    behind autograd's back, as gloo and NCCL write a collective's result."""
    return torch.autograd._unsafe_preserve_version_counter(tensor)
