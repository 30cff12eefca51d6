"""Foreach ops (``torch._foreach_*``), the fused multi-tensor kernels of torch.optim and clip_grad_norm_.

A ``_foreach_X`` call over N tensors runs as one executable: its lowering applies the elementwise
op's own lowering (``aten.X``) to each element through :func:`engine.lower_op`, so every element gets
exactly the promotion, opmath and result dtype PyTorch gives ``torch.X`` on it (the semantics of
PyTorch's per-tensor "slow path", which CPU runs). The in-place forms (``_foreach_X_``) are derived
by the eager layer from these functional lowerings, except ``_foreach_mul_`` with scalars, which the
CPU computes otherwise (its lowering rounds the scalar).

Argument shapes follow the schemas: ``Tensor[]`` arguments give one element per tensor, ``Scalar``
and ``Tensor`` arguments are shared, ``Scalar[]`` arguments give one scalar per tensor.
``_foreach_addcmul/addcdiv.Tensor`` take their scalars as a CPU tensor (PyTorch's meta kernel insists
on it), so they keep PyTorch's composite kernel: one addcmul/addcdiv executable per tensor.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import torch

from torch_neuronx._compat.torch_internals import OpOverload, SchemaArgument, overload_name, schema_of
from torch_neuronx.lowering import pointwise, reduction
from torch_neuronx.lowering.engine import lower_op, schema_values
from torch_neuronx.lowering.registry import lowering
from torch_neuronx.runtime.arguments import ArgumentType, argument_type
from torch_neuronx.runtime.dtypes import TORCH_DTYPE, convert

aten = torch.ops.aten

# The family modules whose lowerings the foreach ops apply (imported for their registrations).
_ELEMENTWISE_FAMILIES = (pointwise, reduction)


def _meta(value: Any, argument: SchemaArgument) -> Any:
    """``value`` (a JAX array or Python value) as PyTorch's meta kernel for ``argument`` sees it."""
    if isinstance(value, jax.Array):
        if argument_type(argument) is ArgumentType.TENSOR:
            return torch.empty(value.shape, dtype=TORCH_DTYPE[jnp.dtype(value.dtype)], device="meta")
        return _python_number(value)
    return value


def _python_number(value: jax.Array) -> bool | int | float | complex:
    """A runtime scalar's Python kind (what PyTorch's type promotion looks at), not its value."""
    if value.dtype == jnp.bool_:
        return True
    if jnp.issubdtype(value.dtype, jnp.integer):
        return 1
    if jnp.issubdtype(value.dtype, jnp.complexfloating):
        return 1j
    return 1.0


def elementwise(op: OpOverload, *args: Any, layouts: Sequence[Any] | None = None, **kwargs: Any) -> Any:
    """``op`` (a lowered ATen overload) applied at trace time to JAX arrays, with PyTorch's semantics
    for them: promotion, result dtype, shape checks (errors are its meta kernel's). ``layouts``
    (``op``'s schema order): the arguments as PyTorch sees them where known, so a tensor keeps its
    strides (a lowering that follows the CPU's loop over them reads those); else contiguous."""
    values = schema_values(op, args, kwargs)
    metas = [_meta(v, a) for v, a in zip(values, schema_of(op).arguments, strict=True)]
    if layouts is not None:  # the op's defaults, past the foreach's arguments, have none
        metas = [
            known if isinstance(known, torch.Tensor) and isinstance(meta, torch.Tensor) else meta
            for meta, known in itertools.zip_longest(metas, layouts)
        ]
    positional = [m for m, a in zip(metas, schema_of(op).arguments, strict=True) if not a.kwarg_only]
    keywords = {a.name: m for m, a in zip(metas, schema_of(op).arguments, strict=True) if a.kwarg_only}
    return lower_op(op, values, metas, op(*positional, **keywords))


#: Each foreach overload lowered per element -> (the per-element overload, the foreach arguments
#: that give its arguments, in its schema order).
_ELEMENT_OPS: dict[OpOverload, tuple[OpOverload, tuple[str, ...]]] = {}


def _elements(foreach: OpOverload, names: Sequence[str], values: Sequence[Any]) -> list[list[Any]]:
    """The per-element argument lists of a ``foreach`` call given its ``values`` (schema order): the
    foreach arguments ``names``, a list argument contributing its i-th item."""
    given = dict(zip([a.name for a in schema_of(foreach).arguments], values, strict=True))
    lists = {
        a.name
        for a in schema_of(foreach).arguments
        if argument_type(a) in (ArgumentType.TENSOR_LIST, ArgumentType.NUMBER_LIST)
    }
    count = len(next(given[name] for name in names if name in lists))
    if any(len(given[name]) != count for name in names if name in lists):
        return []  # lists of other lengths: the foreach op's own check refuses them
    return [[given[name][i] if name in lists else given[name] for name in names] for i in range(count)]


def element_calls(foreach: OpOverload, values: Sequence[Any]) -> list[tuple[OpOverload, list[Any]]] | None:
    """The per-element calls ``(op, arguments in op's schema order)`` that a ``foreach`` call with
    ``values`` (schema order) makes, as PyTorch's per-tensor slow path makes them, or None if
    ``foreach`` is not lowered per element. CUDA's fast path hands every dtype its kernels refuse to
    that slow path, so each element's call raises the per-tensor op's error."""
    entry = _ELEMENT_OPS.get(foreach)
    if entry is None:
        return None
    op, names = entry
    defaults = [a.default_value for a in schema_of(op).arguments[len(names) :]]
    return [(op, [*arguments, *defaults]) for arguments in _elements(foreach, names, values)]


def _per_element(op: OpOverload, foreach: OpOverload, names: Sequence[str]) -> Callable[..., list[Any]]:
    """The lowering of ``foreach``: ``op`` applied to each element, its arguments taken from the
    foreach arguments ``names`` (in ``op``'s schema order; a list argument contributes its i-th item)."""
    keyword = {a.name for a in schema_of(op).arguments if a.kwarg_only}
    targets = [a.name for a in schema_of(op).arguments]

    def lower(*args: Any, metas: list[Any], **kwargs: Any) -> list[Any]:
        results = []
        calls = _elements(foreach, names, schema_values(foreach, args, kwargs))
        for values, layouts in zip(calls, _elements(foreach, names, metas), strict=True):
            positional = [v for v, t in zip(values, targets, strict=False) if t not in keyword]
            keywords = {t: v for v, t in zip(values, targets, strict=False) if t in keyword}
            results.append(elementwise(op, *positional, layouts=layouts, **keywords))
        return results

    lower.__doc__ = (
        f"torch.{schema_of(foreach).name[6:]}: aten.{schema_of(op).name[6:]} on each tensor, in one executable."
    )
    lower.__qualname__ = lower.__name__ = f"{schema_of(foreach).name[6:]}_{overload_name(foreach)}"
    return lower


def _register(foreach: OpOverload, op: OpOverload, *names: str, static: Sequence[str] = ()) -> None:
    _ELEMENT_OPS[foreach] = (op, names)
    lowering(foreach, static=static, metas=True)(_per_element(op, foreach, names))


# --- binary ops: List / Scalar / ScalarList / Tensor overloads -----------------------------------

for _name in ("add", "sub"):
    _packet, _op = getattr(aten, f"_foreach_{_name}"), getattr(aten, _name)
    _register(_packet.List, _op.Tensor, "self", "other", "alpha")
    _register(_packet.Scalar, _op.Scalar, "self", "scalar")
    _register(_packet.ScalarList, _op.Scalar, "self", "scalars")
_register(aten._foreach_add.Tensor, aten.add.Tensor, "self", "other", "alpha")

for _name in ("mul", "div"):
    _packet, _op = getattr(aten, f"_foreach_{_name}"), getattr(aten, _name)
    _register(_packet.List, _op.Tensor, "self", "other")
    _register(_packet.Scalar, _op.Scalar, "self", "scalar")
    _register(_packet.ScalarList, _op.Scalar, "self", "scalars")
    _register(_packet.Tensor, _op.Tensor, "self", "other")


def _multiply_in_place(foreach: OpOverload) -> Callable[..., list[Any]]:
    """The lowering of the in-place ``foreach`` (``_foreach_mul_.Scalar``/``.ScalarList``): each
    tensor times its scalar, the scalar first rounded to a 16-bit tensor's dtype. The CPU's in-place
    foreach kernel multiplies by the scalar held in the tensor's dtype, where ``_foreach_mul`` and
    ``Tensor.mul_`` use its value (bfloat16 ``x * 0.3`` uses 0.30078125 in place); the rounding
    overflows to inf as the CPU's does (float16 ``1e6``)."""

    def lower(self: list[Any], given: Any) -> list[Any]:
        results = []
        for i, tensor in enumerate(self):
            scalar = given[i] if isinstance(given, (list, tuple)) else given
            if tensor.dtype in (jnp.bfloat16, jnp.float16) and not jnp.iscomplexobj(jnp.asarray(scalar)):
                scalar = convert(scalar, tensor.dtype)
                results.append(elementwise(aten.mul.Tensor, tensor, scalar))
            else:
                results.append(elementwise(aten.mul.Scalar, tensor, scalar))
        return results

    lower.__qualname__ = lower.__name__ = f"foreach_mul__{overload_name(foreach)}"
    return lower


for _overload, _scalar_name in (("Scalar", "scalar"), ("ScalarList", "scalars")):
    _foreach = getattr(aten._foreach_mul_, _overload)
    _ELEMENT_OPS[_foreach] = (aten.mul.Scalar, ("self", _scalar_name))
    lowering(_foreach)(_multiply_in_place(_foreach))

# maximum/minimum with a scalar are clamp_min/clamp_max, as in PyTorch's kernels.
for _name, _list_op, _scalar_op in (
    ("maximum", aten.maximum.default, aten.clamp_min.default),
    ("minimum", aten.minimum.default, aten.clamp_max.default),
    ("clamp_min", aten.clamp_min.Tensor, aten.clamp_min.default),
    ("clamp_max", aten.clamp_max.Tensor, aten.clamp_max.default),
):
    _packet = getattr(aten, f"_foreach_{_name}")
    _register(_packet.List, _list_op, "self", "other")
    _register(_packet.Scalar, _scalar_op, "self", "scalar")
    _register(_packet.ScalarList, _scalar_op, "self", "scalars")

_register(aten._foreach_pow.List, aten.pow.Tensor_Tensor, "self", "exponent")
_register(aten._foreach_pow.Scalar, aten.pow.Tensor_Scalar, "self", "exponent")
_register(aten._foreach_pow.ScalarList, aten.pow.Tensor_Scalar, "self", "exponent")
_register(aten._foreach_pow.ScalarAndTensor, aten.pow.Scalar, "self", "exponent")

# --- ternary ops ---------------------------------------------------------------------------------

for _name in ("addcmul", "addcdiv"):
    _packet, _op = getattr(aten, f"_foreach_{_name}"), getattr(aten, _name).default
    _register(_packet.Scalar, _op, "self", "tensor1", "tensor2", "value")
    _register(_packet.ScalarList, _op, "self", "tensor1", "tensor2", "scalars")

_register(aten._foreach_lerp.List, aten.lerp.Tensor, "self", "tensors1", "weights")
_register(aten._foreach_lerp.Scalar, aten.lerp.Scalar, "self", "tensors1", "weight")
_register(aten._foreach_lerp.ScalarList, aten.lerp.Scalar, "self", "tensors1", "weight")


# --- unary ops -------------------------------------------------------------------------------------

_UNARY = (
    "abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "erfc", "exp", "expm1", "floor", "frac",
    "lgamma", "log", "log10", "log1p", "log2", "neg", "reciprocal", "round", "rsqrt", "sigmoid", "sign",
    "sin", "sinh", "sqrt", "tan", "tanh", "trunc",
)  # fmt: skip
for _name in _UNARY:
    _register(getattr(aten, f"_foreach_{_name}").default, getattr(aten, _name).default, "self")


# --- reductions, copies ------------------------------------------------------------------------------


@lowering(aten._foreach_norm.Scalar, static=("ord",))
def foreach_norm(self, ord=2, dtype=None):
    """torch._foreach_norm: torch.linalg.vector_norm(t, ord, dtype=dtype) of each tensor."""
    return [elementwise(aten.linalg_vector_norm.default, t, ord, dtype=dtype) for t in self]


@lowering(aten._foreach_powsum.Scalar, static=("ord",))
def foreach_powsum(self, ord=2, dtype=None):
    """torch._foreach_powsum: sum(|t| ** ord) of each tensor (the norm before its root; ord 0 counts
    the non-zero elements)."""
    results = []
    for t in self:
        magnitude = jnp.abs(t)
        magnitude = magnitude.astype(jnp.float32) if magnitude.dtype in (jnp.bfloat16, jnp.float16) else magnitude
        powers = (
            (magnitude != 0).astype(magnitude.dtype) if ord == 0 else magnitude ** jnp.asarray(ord, magnitude.dtype)
        )
        results.append(jnp.sum(powers))
    return results


_ELEMENT_OPS[aten._foreach_max.default] = (aten.max.default, ("self",))


@lowering(aten._foreach_max.default)
def foreach_max(self):
    """torch._foreach_max: the largest element of each tensor (NaN propagates)."""
    return [elementwise(aten.max.default, t) for t in self]


_ELEMENT_OPS[aten._foreach_mm.default] = (aten.mm.default, ("self", "mat2"))


@lowering(aten._foreach_mm.default)
def foreach_mm(self, mat2):
    """torch._foreach_mm: torch.mm of each pair."""
    return [elementwise(aten.mm.default, a, b) for a, b in zip(self, mat2, strict=True)]


@lowering(aten._foreach_copy.default)
def foreach_copy(self, src, non_blocking=False):
    """torch._foreach_copy_: each src broadcast to its destination's shape, cast to its dtype."""
    return [jnp.broadcast_to(s, t.shape).astype(t.dtype) for t, s in zip(self, src, strict=True)]


@lowering(aten._foreach_zero.default)
def foreach_zero(self):
    """torch._foreach_zero_: zeros of each tensor's shape and dtype."""
    return [jnp.zeros(t.shape, t.dtype) for t in self]


@lowering(aten._foreach_clone.default)
def foreach_clone(self, *, memory_format=None):
    """torch._foreach_clone: a copy of each tensor."""
    return list(self)
