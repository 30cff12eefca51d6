"""Runners of eager calls that do not simply launch an executable.

A runner is what an eager kernel caches per call signature (runtime/executable.py's ``Runner``). Most
are an executable's launch; the ones here resize ``out=`` tensors first, resize an in-place
``self`` as a few CPU kernels do, run the call on the CPU, or check runtime scalars on the host
before each launch.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from torch_neuronx._compat.torch_internals import OpOverload, schema_of
from torch_neuronx.eager import fallback, memory_formats
from torch_neuronx.eager.plan import Plan, call, split
from torch_neuronx.lowering import overflow, registry
from torch_neuronx.runtime import arguments
from torch_neuronx.runtime.executable import Runner

aten = torch.ops.aten

#: In-place overloads whose CPU and CUDA kernels resize ``self`` to the result's shape (through
#: their ``out=`` form, without a warning) instead of refusing a ``self`` the result does not fit.
RESIZES_SELF = frozenset({aten.addbmm_.default})


def resize_self_runner(plan: Plan) -> Runner:
    """An overload of :data:`RESIZES_SELF` whose result does not fit ``self``: the functional form
    computes it from ``self`` broadcast, then ``self`` takes the result's shape and values."""

    def run(inputs, device, slot_tensors, generator, values):
        result = call(plan.functional, plan.functional_args(values))
        target = values[plan.writes[0]]
        target.resize_(result.shape)
        target.copy_(result)
        return target

    return run


#: ATen's in-place samplers that return an empty ``self`` unchanged once their Scalar arguments pass
#: their checks, before any dtype dispatch (``CHECK_EMPTY_AND_RETURN`` in DistributionTemplates.h,
#: shared by the CPU and CUDA): ``torch.randn(0, dtype=torch.int8)`` is an empty tensor, not
#: "normal_kernel_cuda" not implemented for 'Char'. (``uniform_`` and ``cauchy_`` check the dtype first.)
RETURNS_EMPTY_SELF = frozenset(
    {
        aten.normal_.default,
        aten.log_normal_.default,
        aten.exponential_.default,
        aten.geometric_.default,
        aten.random_.default,
    }
)


def empty_self_runner(plan: Plan) -> Runner:
    """An op of :data:`RETURNS_EMPTY_SELF` on an empty ``self``: the lowering's scalar checks (a
    sampler's ``std``, made on each call's values), then ``self`` as it is."""
    entry = registry.LOWERINGS.get(plan.functional)
    scalar_checks = entry.scalar_checks if entry is not None else ()
    names = [argument.name for argument in schema_of(plan.functional).arguments]

    def run(inputs, device, slot_tensors, generator, values):
        by_name = dict(zip(names, plan.functional_args(values), strict=False))
        for check in scalar_checks:
            check.check_number(by_name[check.argument])
        return values[plan.writes[0]]

    return run


_PACKAGE = str(Path(__file__).resolve().parents[1])


def _caller_stacklevel() -> int:
    """``warnings.warn``'s stacklevel of the first frame outside torch_neuronx that called into it,
    so a warning points at the user's call whatever wrappers the kernel has (math_bits, kernel)."""
    level, frame = 2, sys._getframe(2)  # 1 is the caller of this function
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        level, frame = level + 1, frame.f_back
    return level


def resize_output(out: torch.Tensor, shape: Sequence[int]) -> None:
    """ATen's ``resize_output``: resizes ``out`` to ``shape``, warning in ATen's words, at the user's
    line, when an ``out`` with elements changes shape."""
    if list(out.shape) == list(shape):
        return
    if out.numel() != 0:
        warnings.warn(
            f"An output with one or more elements was resized since it had shape {list(out.shape)}, "
            f"which does not match the required output shape {list(shape)}. This behavior is deprecated, "
            "and in a future PyTorch release outputs will not be resized unless they have zero "
            "elements. You can explicitly reuse an out tensor t by resizing it, inplace, to zero "
            "elements with t.resize_(0).",
            stacklevel=_caller_stacklevel(),
        )
    out.resize_(shape)


def resize_runner(
    op: OpOverload,
    resized: list[tuple[int, int, list[int], list[int] | None]],
    written: Sequence[int],
    tensor_iterator: bool = False,
) -> Runner:
    """An ``out=`` call whose ``out`` tensors have the wrong shape (``resized``, as
    :func:`rules.resized_outputs` lists them; ``written``: the positions of every out= argument):
    resize them as PyTorch's ``resize_output`` does (warning when a non-empty tensor changes shape),
    restride each to the strides ``resized`` gives, then call again. A ``tensor_iterator`` op (a pointwise one) takes
    the layout TensorIterator computes from its inputs instead (``set_output_raw_strided``:
    ``add(xt, 1, out=torch.empty(0))`` keeps ``xt``'s transpose), which a Python meta kernel does not."""

    def run(inputs, device, slot_tensors, generator, values):
        for position, index, shape, meta_strides in resized:
            tensor = arguments.flat_tensors(values[position])[index]
            if list(tensor.shape) == shape:
                continue
            resize_output(tensor, shape)
            if tensor_iterator:
                operands = [value for i, value in enumerate(values) if i not in written]
                strides = memory_formats.tensor_iterator_strides(operands, shape)
            else:
                strides = meta_strides
            if strides is not None and tensor.numel() and list(tensor.stride()) != strides:
                tensor.as_strided_(shape, strides)
        return call(op, values)

    return run


def fallback_runner(op: OpOverload) -> Runner:
    """A call the device cannot compute (no meta kernel, or a decomposition with an unlowered op)."""

    def run(inputs, device, slot_tensors, generator, values):
        positional, keywords = split(op, values)
        return fallback.run_on_cpu(op, tuple(positional), keywords)

    return run


def host_checked_scalars(plan: Plan, values: list[Any], functional_result: Any) -> list[tuple[int, Any, bool]]:
    """(position in the call, dtype, whether negated) of each Python number the op's lowering lists as ``checked``:
    c10 converts it to the result's dtype, and an overflow raises at the call, as on the CPU, when
    the runner checks it on the host before each launch (a runtime scalar changes between calls)."""
    entry = registry.LOWERINGS.get(plan.functional)
    if entry is None or not entry.checked:
        return []
    first = arguments.flat_tensors(functional_result)[0]
    if not isinstance(first, torch.Tensor):
        return []
    names = [argument.name for argument in schema_of(plan.op).arguments]
    return [
        (i, overflow.checked_dtype(first.dtype, entry.checked_in_opmath), name in entry.negated_checked)
        for i, name in enumerate(names)
        if name in entry.checked and overflow.is_number(values[i])
    ]


def with_host_checks(runner: Runner, check: Callable[[list[Any]], None]) -> Runner:
    """``runner`` preceded by ``check`` (a :func:`host_checker`) of each call's values."""

    def run(inputs, device, slot_tensors, generator, values):
        check(values)
        return runner(inputs, device, slot_tensors, generator, values)

    return run


def with_call_warning(runner: Runner, plan: Plan) -> Runner:
    """``runner`` preceded by the lowering's ``call_warning`` of each call's values, warned at the
    user's line when it gives a text, as ATen's ``TORCH_WARN`` warns at every call."""
    warning = registry.LOWERINGS[plan.functional].call_warning
    names = [argument.name for argument in schema_of(plan.functional).arguments]

    def run(inputs, device, slot_tensors, generator, values):
        message = warning(dict(zip(names, plan.functional_args(values), strict=False)))
        if message is not None:
            warnings.warn(message, UserWarning, stacklevel=_caller_stacklevel())
        return runner(inputs, device, slot_tensors, generator, values)

    return run


def host_checker(host_checks: list[tuple[int, Any, bool]], plan: Plan) -> Callable[[list[Any]], None]:
    """The checks made on the host before a launch, as a function of the call's values: the
    lowering's dtype rule, which may refuse a runtime scalar's kind (index_fill: a complex value for a
    real tensor) and must come first, as in ATen, c10's overflow check of the numbers
    ``host_checks`` names, and the lowering's scalar checks (a sampler's ``lambd``), made in double
    precision, as ATen makes them. The function raises their RuntimeError."""
    entry = registry.LOWERINGS[plan.functional]
    dtype_rule, scalar_checks = entry.dtype_rule, entry.scalar_checks
    names = [argument.name for argument in schema_of(plan.functional).arguments]

    def check(values: list[Any]) -> None:
        if dtype_rule is not None or scalar_checks:
            by_name = dict(zip(names, plan.functional_args(values), strict=False))
            for scalar_check in scalar_checks:  # ATen checks the Scalar before it dispatches on the dtype
                scalar_check.check_number(by_name[scalar_check.argument])
            if dtype_rule is not None:
                dtype_rule(by_name)
        for position, dtype, negated in host_checks:
            overflow.raise_if_overflows(overflow.negated(values[position]) if negated else values[position], dtype)

    return check
