"""PyTorch's elementwise type promotion, applied to a lowering's arguments at trace time.

A lowering registered with a ``promotion`` kind receives its participating arguments (every Tensor
and Scalar argument, or those it names in ``promote``) cast to the computation dtype PyTorch's
``elementwise_dtypes`` gives for them (float32 "opmath" for 16-bit floats, as CPU kernels compute),
and so are all other runtime scalars. A Python number operand of a 16-bit computation (float16,
bfloat16, complex32) is rounded to the operands' dtype first, as TensorIterator wraps it in a 0-dim
tensor of that dtype, except in the kernels that read the number's original value. complex32
computes in complex64 (``elementwise_dtypes``' opmath), its result rounded by the engine.
"""

from __future__ import annotations

import enum
import functools
import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import torch

from torch_neuronx._compat.torch_internals import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes, schema_of
from torch_neuronx.runtime.arguments import ArgumentType, argument_type
from torch_neuronx.runtime.dtypes import COMPLEX32, convert, jax_dtype, view_dtype


class Promotion(enum.Enum):
    """PyTorch's elementwise type-promotion kinds (``torch._prims_common``)."""

    DEFAULT = ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT
    NO_OPMATH = ELEMENTWISE_TYPE_PROMOTION_KIND.NO_OPMATH
    INT_TO_FLOAT = ELEMENTWISE_TYPE_PROMOTION_KIND.INT_TO_FLOAT
    ALWAYS_BOOL = ELEMENTWISE_TYPE_PROMOTION_KIND.ALWAYS_BOOL
    COMPLEX_TO_FLOAT = ELEMENTWISE_TYPE_PROMOTION_KIND.COMPLEX_TO_FLOAT
    BOOL_TO_LONG = ELEMENTWISE_TYPE_PROMOTION_KIND.BOOL_TO_LONG


#: Kernels that compute with a Python number's original value rather than the number rounded to a
#: 16-bit operand dtype (ATen's BinaryOpsKernel.cpp: mul, div and its rounding modes read
#: ``original_scalar_value``).
_ORIGINAL_SCALAR_OPS = frozenset(
    {
        torch.ops.aten.mul.Tensor,
        torch.ops.aten.mul.Scalar,
        torch.ops.aten.div.Tensor,
        torch.ops.aten.div.Scalar,
        torch.ops.aten.div.Tensor_mode,
        torch.ops.aten.div.Scalar_mode,
        torch.ops.aten.floor_divide.default,
        torch.ops.aten.floor_divide.Scalar,
    }
)
#: Schema names of operands: a number there is a wrapped 0-dim tensor. Numbers in other positions
#: (alpha, value, weight, negative_slope, beta ...) are kernel parameters, used at their value.
_OPERAND_NAMES = frozenset({"self", "other", "exponent"})
#: Kernel parameters a 16-bit computation sees rounded to the 16-bit dtype all the same: add's and
#: sub's alpha, which ATen's vectorized kernel holds as a ``Vectorized<scalar_t>`` (ufunc/add.h;
#: bfloat16 ``add(x, y, alpha=0.3)`` uses 0.30078125).
_ROUNDED_PARAMETERS = dict.fromkeys(
    (
        torch.ops.aten.add.Tensor,
        torch.ops.aten.add.Scalar,
        torch.ops.aten.sub.Tensor,
        torch.ops.aten.sub.Scalar,
        torch.ops.aten.rsub.Tensor,
        torch.ops.aten.rsub.Scalar,
    ),
    "alpha",
)


def is_number(value: object) -> bool:
    """Whether ``value`` is a Python number (bool, int, float or complex)."""
    return isinstance(value, (bool, int, float, complex)) and not isinstance(value, torch.Tensor)


def promotes(argument: Any) -> bool:
    """Whether a number in this schema position takes part in type promotion: a Scalar or float
    argument, or a Tensor one (a Python number PyTorch wrapped, as in ``x * 0.5``). int and bool
    arguments (dims, flags, sizes) never do."""
    return argument_type(argument) in (ArgumentType.NUMBER, ArgumentType.TENSOR)


def promote(entry: Any, args: list[Any], metas: list[Any]) -> list[Any]:
    """``args`` (schema order, at trace time) cast as ``entry``'s promotion kind says.

    Args:
        entry: a registry ``Lowering`` with a ``promotion`` kind.
        args: the op's arguments; tensors as JAX arrays, runtime scalars as 0-d arrays.
        metas: the same arguments as PyTorch sees them (meta tensors, Python numbers).
    """
    schema = schema_of(entry.op)
    names = [argument.name for argument in schema.arguments]
    args = list(args)
    if entry.promote is not None:
        chosen = [i for i, name in enumerate(names) if name in entry.promote]
    else:
        chosen = [
            i
            for i, meta in enumerate(metas)
            if isinstance(meta, torch.Tensor)
            or (is_number(meta) and names[i] not in entry.static and promotes(schema.arguments[i]))
        ]
    participants = [metas[i] for i in chosen if metas[i] is not None]
    computation, _ = elementwise_dtypes(*participants, type_promotion_kind=entry.promotion.value)
    target = jax_dtype(computation)
    # TensorIterator wraps a Python number as a 0-dim tensor of the operands' common dtype: a
    # 16-bit computation sees the number rounded to it (bf16(0.7) == 0.7 is True on the CPU),
    # except in the kernels that read the scalar's original value (_ORIGINAL_SCALAR_OPS).
    _, common = elementwise_dtypes(*participants, type_promotion_kind=Promotion.DEFAULT.value)
    # So is a 0-dim tensor of a wider dtype (float32 beside a float16 tensor: TensorIterator reads it
    # as a scalar of the common dtype; float16 [1.] + tensor(2049.) is 2048).
    scalar_dtype = view_dtype(common) if common in (torch.bfloat16, torch.float16, torch.complex32) else None
    for i, (arg, meta) in enumerate(zip(args, metas, strict=True)):
        if arg is None or names[i] in entry.static:
            continue
        wider_tensor = isinstance(meta, torch.Tensor) and meta.dim() == 0 and meta.dtype != common
        # A wider 0-dim tensor is an iterator operand wherever it stands (addcmul's tensor1/tensor2);
        # a number only in an operand's position.
        number_operand = is_number(meta) and names[i] in _OPERAND_NAMES
        # The kernels of _ORIGINAL_SCALAR_OPS read a single-element second operand (a number, a
        # 0-dim or a one-element tensor: TensorIterator's is_scalar(2)) at its own value; the first
        # is cast to the common dtype (2049 * float16 is 2048 * it, float16 * [2049] is not).
        original = (
            entry.op in _ORIGINAL_SCALAR_OPS
            and names[i] == "other"
            and (is_number(meta) or (isinstance(meta, torch.Tensor) and meta.numel() == 1))
        )
        rounded_operand = scalar_dtype is not None and (wider_tensor or number_operand) and not original
        if names[i] in entry.uncast:  # reaches the lowering as it is, rounded as an operand would be
            if rounded_operand:
                args[i] = convert(arg, scalar_dtype).astype(target)
            continue
        if rounded_operand and i in chosen:
            args[i] = convert(arg, scalar_dtype).astype(target)
        elif (
            scalar_dtype is not None
            and names[i] == _ROUNDED_PARAMETERS.get(entry.op)
            and is_number(meta)
            # a runtime scalar's meta is its kind (1.0), not its value (a foreach op's alpha)
            and (isinstance(arg, jax.Array) or meta != 1)
        ):
            args[i] = _rounded_where_it_fits(arg, scalar_dtype)
        elif i in chosen or (is_number(meta) and isinstance(arg, jax.Array)):
            value = jnp.asarray(arg)
            if (
                scalar_dtype is not None
                and isinstance(meta, torch.Tensor)
                and meta.dim()
                and meta.dtype != common
                and not original
            ):
                # TensorIterator casts each operand to the common dtype before the kernel widens it:
                # int32 2049 beside float16 is 2048 (mul gave 2051 for 2049 * 1.001). (A 0-dim one
                # is a scalar, rounded or not above.)
                value = convert(value, scalar_dtype)
            args[i] = convert(value, target) if value.dtype == jnp.bool_ else value.astype(target)
    return args


def _rounded_where_it_fits(value: Any, dtype: Any) -> jax.Array:
    """A 16-bit computation's kernel parameter (add's alpha) in its opmath dtype (float32, complex64),
    holding ``value`` rounded to ``dtype`` as ATen's vectorized CPU kernel holds it, or the value
    itself where the rounding overflows: the CPU refuses such a value, and CUDA's kernel computes
    with it unrounded (``Scalar::to<opmath_t>``), so float16 ``add(x, y, alpha=7e4)`` is
    ``x + 70000 * y`` rounded once, never ``x + inf * y``."""
    wide = jnp.asarray(value).astype(jnp.complex64 if np.dtype(dtype) == COMPLEX32 else jnp.float32)
    rounded = convert(value, dtype).astype(wide.dtype)

    def part(rounded_part, wide_part):
        return jnp.where(jnp.isinf(rounded_part) & jnp.isfinite(wide_part), wide_part, rounded_part)

    if jnp.issubdtype(wide.dtype, jnp.complexfloating):
        return jax.lax.complex(part(jnp.real(rounded), jnp.real(wide)), part(jnp.imag(rounded), jnp.imag(wide)))
    return part(rounded, wide)


def opmath_dtype(dtype: Any) -> Any:
    """The JAX dtype a lowering computes a ``dtype`` value in: float32 for bfloat16 and float16
    (PyTorch's ``opmath_type``, ATen/OpMathType.h), the dtype itself otherwise."""
    return jnp.float32 if dtype in (jnp.bfloat16, jnp.float16) else dtype


def in_opmath(fn):
    """``fn`` of one array computed in :func:`opmath_dtype` and rounded once to the input's dtype, as
    ATen's 16-bit float kernels compute in float and round their result."""

    @functools.wraps(fn)
    def computed(x: jax.Array) -> jax.Array:
        return fn(x.astype(opmath_dtype(x.dtype))).astype(x.dtype)

    return computed


def cpu_16_bit_vector_elements() -> int:
    """Elements of ATen's ``Vectorized<BFloat16>``/``Vectorized<Half>`` in this host's CPU kernels
    (32 on AVX-512 builds, else 16): where their loops leave whole vectors for a scalar tail."""
    return 32 if torch.backends.cpu.get_cpu_capability() == "AVX512" else 16


def c10_rounding(dtype: Any) -> Any:
    """A function that rounds a float32 value to ``dtype``'s precision and range, keeping float32,
    where ``dtype`` is float16 or bfloat16: one step of C++'s ``c10::Half``/``c10::BFloat16``
    arithmetic, whose operators compute in float and round their result (c10/util/Half.h). The
    identity for other dtypes. An explicit ``reduce_precision``, because XLA's CPU code for a
    fusion of 16-bit ops may keep float32 between them (on hosts with AVX-512, ``(x * 6) - 1`` in
    float16 then differs from PyTorch's in 10% of elements). XLA's ``reduce_precision`` flushes
    float16's subnormals (below 2**-14) to zero; they are rounded to multiples of 2**-24 instead,
    half to even, as the conversion rounds them."""
    if dtype not in (jnp.bfloat16, jnp.float16):
        return lambda value: value
    info = jnp.finfo(dtype)
    normal = functools.partial(jax.lax.reduce_precision, exponent_bits=info.nexp, mantissa_bits=info.nmant)
    if info.minexp <= jnp.finfo(jnp.float32).minexp:  # bfloat16: float32's range, its subnormals too
        return normal
    smallest_normal, quantum = float(info.smallest_normal), float(info.smallest_subnormal)

    def rounded(value):
        subnormal = jnp.round(value / quantum) * quantum  # exact: scaled by powers of two
        return jnp.where(jnp.abs(value) < smallest_normal, subnormal.astype(value.dtype), normal(value))

    return rounded


def sum_runs_in_order(
    values: Any, runs: Sequence[tuple[np.ndarray, np.ndarray]], *, labels: Any = None, targets: Any = None
) -> Any:
    """Sums of runs of ``values`` along its last ``len(runs)`` dims, rounding each addition to
    ``values.dtype`` (16-bit) as a C++ kernel's ``scalar_t`` accumulator does. ``runs`` holds, per
    dim, ``(sources, count)``: ``sources[i]`` lists (ascending, padded) the positions summed into
    position ``i``, of which the first ``count[i]`` count. Result ``[..., i, j]`` adds
    ``values[..., sources_0[i, a], sources_1[j, b]]`` in row-major (a, b) order: the order of a
    kernel that walks its outputs, or its windows, row by row. Float32 results. One loop step per
    offset of the longest runs: every sum adds its element at that offset, or nothing where its run
    is shorter (adding nothing keeps a rounded value). :func:`contiguous_runs` makes ``runs`` of
    windows. With ``labels`` (integers, of ``values``' shape) and ``targets`` (of the result's
    trailing shape), an element counts only where its label is its sum's target: a scatter to the
    position an index names, as max pooling's gradient goes to its window's maximum."""
    rounded, lead, rank = c10_rounding(values.dtype), values.ndim - len(runs), len(runs)
    longest = tuple(max(int(count.max()), 1) if count.size else 1 for _, count in runs)
    values = values.astype(jnp.float32)

    def along(dim: int) -> list[int]:
        shape = [1] * rank
        shape[dim] = -1
        return shape

    def add_at_offset(k, total):
        element, label, present = values, labels, True
        for dim, ((sources, count), offset) in enumerate(zip(runs, jnp.unravel_index(k, longest), strict=True)):
            table = jnp.asarray(np.pad(sources, [(0, 0), (0, max(0, longest[dim] - sources.shape[1]))]))
            element = jnp.take(element, table[:, offset], axis=lead + dim, mode="clip")
            if labels is not None:
                label = jnp.take(label, table[:, offset], axis=lead + dim, mode="clip")
            present = present & (offset < jnp.asarray(count)).reshape(along(dim))
        if labels is not None:
            present = present & (label == targets)
        return rounded(total + jnp.where(present, element, 0))

    shape = (*values.shape[:lead], *(len(sources) for sources, _ in runs))
    return jax.lax.fori_loop(0, math.prod(longest), add_at_offset, jnp.zeros(shape, jnp.float32))


def contiguous_runs(first: np.ndarray, count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`sum_runs_in_order`'s ``(sources, count)`` for runs of ``count[i]`` consecutive
    positions from ``first[i]``."""
    longest = max(int(count.max()), 1) if count.size else 1
    return first[:, None] + np.arange(longest)[None, :], count


def runs_of(copies: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`sum_runs_in_order`'s ``(sources, count)`` from a boolean ``copies[i, o]`` table (output
    ``o`` is summed into position ``i``), sources ascending."""
    count = copies.sum(axis=1)
    longest = max(int(count.max()), 1) if count.size else 1
    order = np.argsort(~copies, axis=1, kind="stable")[:, :longest]  # the true columns first, ascending
    return order, count
