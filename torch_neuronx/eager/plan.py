"""How an overload is computed (a :class:`Plan`), and calling overloads by their schema.

Every eager kernel has a plan: an overload is computed by its own lowering, by its functional form
(in-place and ``out=`` overloads compute the functional form's results and write them into the
arguments they mutate), or by PyTorch's decomposition. The helpers here move between an overload's
arguments in schema order and its functional form's, and build the value the overload returns.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from torch_neuronx._compat.torch_internals import OpOverload, overload_name, schema_of
from torch_neuronx.runtime import arguments
from torch_neuronx.runtime.arguments import ArgumentType, argument_type
from torch_neuronx.runtime.dtypes import DTYPE_OF, TORCH_DTYPE
from torch_neuronx.runtime.executable import first_result

aten = torch.ops.aten

#: Reductions whose ``out=`` form without ``dtype`` computes in the ``out`` tensor's dtype, as ATen's
#: structured kernels infer it (``infer_dtype_from_optional``, ``cumsum_out``): ``sum(x_float,
#: out=long_tensor)`` sums ``x`` converted to int64, where a pointwise op refuses to cast. (``mean``
#: and ``nansum`` refuse such an ``out``, as the CPU does.)
OUT_DTYPE_REDUCTIONS = frozenset(
    (
        aten.sum.IntList_out,
        aten.prod.int_out,
        aten.cumsum.out,
        aten.cumprod.out,
    )
)


def _dtype_of(value: Any) -> torch.dtype:
    """The torch dtype of a tensor, a tensor's description or a JAX array."""
    if isinstance(value, torch.Tensor):
        return value.dtype
    if isinstance(value, arguments.TensorArg):
        return DTYPE_OF[value.dtype_code]
    return TORCH_DTYPE[np.dtype(value.dtype)]


def _takes_dtype(op: OpOverload) -> bool:
    """Whether ``op`` takes the keyword-only ``dtype=`` of a factory (or a reduction)."""
    return any(a.name == "dtype" and a.kwarg_only for a in schema_of(op).arguments)


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

    def functional_args(self, values: list[Any]) -> list[Any]:
        """The functional overload's arguments from the op's (schema order): the op's, minus the
        ``out=`` tensors; a factory's ``out=`` form has no dtype/device/... arguments, so the
        functional form's defaults apply to those."""
        if self.functional is self.op:
            return list(values)
        by_name = {a.name: v for a, v in zip(schema_of(self.op).arguments, values, strict=True)}
        if (self.op in OUT_DTYPE_REDUCTIONS and by_name.get("dtype") is None) or (
            "dtype" not in by_name and "out" in by_name and _takes_dtype(self.functional)
        ):  # a factory's out= form makes its values in out's dtype (eye_out fills out; full_out too)
            by_name["dtype"] = _dtype_of(by_name["out"])
        return [by_name.get(a.name, a.default_value) for a in schema_of(self.functional).arguments]

    def is_in_place_self(self, position: int) -> bool:
        """Whether the written argument at ``position`` is an in-place ``self`` (positional), as
        opposed to an ``out=`` tensor (keyword-only)."""
        return not schema_of(self.op).arguments[position].kwarg_only


def results_of_in_place(op: OpOverload, metas: list[Any]) -> Any:
    """The results an in-place lowering that returns nothing (``_foreach_mul_.Scalar``) computes:
    its out-of-place overload's meta results (``_foreach_mul.Scalar``), whose dtypes the kernel
    checks against the written tensors (an integer list times 0.5 in place raises ATen's "result
    type Float can't be cast to the desired output type Long")."""
    packet_name, overload = schema_of(op).name.split("::")[1], overload_name(op)
    out_of_place = getattr(getattr(aten, packet_name.removesuffix("_")), overload)
    return call(out_of_place, metas)


def split(op: OpOverload, values: list[Any]) -> tuple[list[Any], dict[str, Any]]:
    """Schema-ordered values as positional and keyword arguments."""
    schema_arguments = schema_of(op).arguments
    positional = [v for a, v in zip(schema_arguments, values, strict=True) if not a.kwarg_only]
    keywords = {a.name: v for a, v in zip(schema_arguments, values, strict=True) if a.kwarg_only}
    return positional, keywords


def call(op: OpOverload, values: list[Any]) -> Any:
    """Calls ``op`` with its arguments in schema order."""
    positional, keywords = split(op, values)
    return op(*positional, **keywords)


def returns(plan: Plan) -> Callable[[list[Any], list[Any]], Any]:
    """How the op's return value is built from its arguments and its new results (the
    executable's ``returns``)."""
    schema_returns = schema_of(plan.op).returns
    if not schema_returns:
        return lambda values, outputs: None
    if plan.writes and not plan.fresh:
        if len(schema_returns) == 1:
            position = plan.writes[0]
            return lambda values, outputs: values[position]
        written = list(plan.writes)
        return lambda values, outputs: tuple(values[i] for i in written)
    if len(schema_returns) == 1:
        if argument_type(schema_returns[0]) is ArgumentType.TENSOR_LIST:
            return lambda values, outputs: list(outputs)
        return first_result
    return lambda values, outputs: tuple(outputs)
