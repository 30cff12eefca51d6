"""The lowering registry: ATen overload -> pure JAX function with PyTorch semantics (decision 5).

A lowering is defined and registered in one place, keyed by its exact overload::

    @lowering(aten.atan2.default, promotion=Promotion.INT_TO_FLOAT)
    def atan2(self, other):
        return jnp.arctan2(self, other)

Shared semantics are applied here, once, and declared per op (STYLE.md, principle 3):

- *Promotion*: with a ``promotion`` kind, the participating arguments (every Tensor and Scalar
  argument, or those named in ``promote``) are cast to the computation dtype PyTorch's
  ``elementwise_dtypes`` gives for them (float32 "opmath" for 16-bit floats, as CPU kernels do), and
  so are all other runtime scalars. Without one, arguments arrive as they are.
- *Result dtype*: every result is cast to the dtype PyTorch's meta kernel reports, and its shape must
  equal the meta kernel's (a mismatch is a lowering bug and raises).
- *Scalars*: a Python number in a Scalar/float position arrives as a 0-d traced array (it is a
  runtime input of the executable) unless the lowering lists it in ``static``.
- *Random ops* (``random=True``) receive ``rng_key=``, a JAX PRNG key derived from the generator's
  (seed, offset) for this op.
- ``uncast`` names arguments that take part in promotion but reach the lowering as they are (an
  exponent whose sign matters even when the computation dtype is unsigned).
- ``checked`` names Scalar arguments that PyTorch's kernels convert with c10's ``checked_convert``
  (fill values, clamp bounds): a number that does not fit the result's dtype is a device fault
  with c10's "value cannot be converted to type int8_t without overflow", not a wrapped value.
- ``dtype_rule`` is a function of the arguments as PyTorch sees them (by name) that raises the ATen
  kernel's error for operand dtypes it refuses: checked when the call is traced, before any
  promotion. :func:`same_dtype` makes the common rule (no promotion at all).
- ``result_dtype=True`` passes ``result_dtype=``, the JAX dtype of the (first) result, to lowerings
  that must accumulate in it (integer sums accumulate in int64).
- ``metas=True`` passes ``metas=``, the arguments as PyTorch sees them (meta tensors with the
  inputs' strides), to lowerings whose PyTorch kernel depends on the layout (``_linalg_det``
  factors the transpose of a contiguous input, and its backward relies on that).

The in-place and ``out=`` forms are derived from the functional lowering by the eager layer.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import threading
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import torch
from torch._ops import OpOverload

from torch_neuronx._compat.torch_internals import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes
from torch_neuronx.runtime.dtypes import aten_name, convert, jax_dtype


class Promotion(enum.Enum):
    """PyTorch's elementwise type-promotion kinds (``torch._prims_common``)."""

    DEFAULT = ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT
    NO_OPMATH = ELEMENTWISE_TYPE_PROMOTION_KIND.NO_OPMATH
    INT_TO_FLOAT = ELEMENTWISE_TYPE_PROMOTION_KIND.INT_TO_FLOAT
    ALWAYS_BOOL = ELEMENTWISE_TYPE_PROMOTION_KIND.ALWAYS_BOOL
    COMPLEX_TO_FLOAT = ELEMENTWISE_TYPE_PROMOTION_KIND.COMPLEX_TO_FLOAT
    BOOL_TO_LONG = ELEMENTWISE_TYPE_PROMOTION_KIND.BOOL_TO_LONG


@dataclasses.dataclass(frozen=True)
class Lowering:
    """One registered lowering; see the module docstring for the meaning of each field."""

    op: OpOverload
    fn: Callable[..., Any]
    promotion: Promotion | None
    promote: tuple[str, ...] | None
    static: frozenset[str]
    random: bool
    result_dtype: bool
    uncast: frozenset[str] = frozenset()
    metas: bool = False
    checked: frozenset[str] = frozenset()
    dtype_rule: Callable[[dict[str, Any]], None] | None = None


LOWERINGS: dict[OpOverload, Lowering] = {}

#: ``dtype_rule``s of ops that run as PyTorch's decomposition (no lowering of their own): the eager
#: kernel checks them on the call's metas before tracing the decomposition, which would promote.
DECOMPOSED_DTYPE_RULES: dict[OpOverload, Callable[[dict[str, Any]], None]] = {}


def check_decomposed_dtypes(op: OpOverload, metas: Sequence[Any]) -> None:
    """Applies the ``dtype_rule`` of ``op`` (an op that runs as its decomposition), if any, to its
    arguments as PyTorch sees them (schema order)."""
    rule = DECOMPOSED_DTYPE_RULES.get(op)
    if rule is not None:
        rule(dict(zip([argument.name for argument in op._schema.arguments], metas, strict=True)))


def lowering(
    *ops: OpOverload,
    promotion: Promotion | None = None,
    promote: Sequence[str] | None = None,
    static: Sequence[str] = (),
    random: bool = False,
    result_dtype: bool = False,
    uncast: Sequence[str] = (),
    metas: bool = False,
    checked: Sequence[str] = (),
    dtype_rule: Callable[[dict[str, Any]], None] | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Registers the decorated function as the lowering of each overload in ``ops``.

    Raises:
        RuntimeError: an overload already has a lowering (registering twice is a bug).
    """

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        for op in ops:
            if not isinstance(op, OpOverload):
                raise TypeError(f"lowering() takes OpOverloads such as aten.add.Tensor, got {op!r}")
            if op in LOWERINGS:
                raise RuntimeError(f"{op} already has a lowering ({LOWERINGS[op].fn.__qualname__})")
            LOWERINGS[op] = Lowering(
                op,
                fn,
                promotion,
                tuple(promote) if promote else None,
                frozenset(static),
                random,
                result_dtype,
                frozenset(uncast),
                metas,
                frozenset(checked),
                dtype_rule,
            )
        return fn

    return register


class TraceContext:
    """State of one executable being traced: the random key source and the device checks.

    A random op draws its key with :meth:`next_key`; the eager kernel or graph passes the generator's
    (seed, offset) as runtime inputs, and each random op in the trace folds in its own index, so one
    executable holding several random ops gives each a distinct stream.
    """

    def __init__(self, seed: jax.Array | None = None, offset: jax.Array | None = None) -> None:
        self._seed = seed
        self._offset = offset
        self.random_elements = 0
        self.checks: list[tuple[jax.Array, jax.Array, str, type[Exception]]] = []
        #: The op whose ``checked`` runtime scalars the caller checks on the host before each launch
        #: (the eager kernel of a lowered op), so the executable need not.
        self.host_checked: OpOverload | None = None

    def next_key(self, elements: int) -> jax.Array:
        if self._seed is None:
            raise RuntimeError("neuron: a random op was traced without generator inputs")
        base = jax.random.key(jnp.asarray(self._seed, jnp.uint64).astype(jnp.uint32))
        base = jax.random.fold_in(base, (jnp.asarray(self._seed, jnp.uint64) >> 32).astype(jnp.uint32))
        offset = jnp.asarray(self._offset, jnp.uint64) + self.random_elements
        key = jax.random.fold_in(base, (offset & 0xFFFFFFFF).astype(jnp.uint32))
        key = jax.random.fold_in(key, (offset >> 32).astype(jnp.uint32))
        self.random_elements += max(int(elements), 1)
        return key

    def check(self, failed: jax.Array, detail: jax.Array, message: str, error: type[Exception]) -> None:
        """Records a device-side assertion: when ``failed`` (bool scalar) is true, ``error(message)``
        is raised at the next synchronisation point; ``detail`` (an int64 scalar, e.g. the offending
        index) is formatted into the message as ``{detail}``."""
        self.checks.append((failed, detail, message, error))


class _Active(threading.local):
    """The contexts of the executables this thread is tracing, innermost last: per thread, because
    several threads may trace at once (user threads running eager ops, background graph builds)."""

    def __init__(self) -> None:
        self.stack: list[TraceContext] = []


_active = _Active()


def active_context() -> TraceContext:
    if not _active.stack:
        raise RuntimeError("neuron: lowerings run only while an executable is traced")
    return _active.stack[-1]


#: Kernels that compute with a Python number's original value rather than the number rounded to a
#: 16-bit operand dtype (ATen's BinaryOpsKernel.cpp: mul, div and its rounding modes read
#: ``original_scalar_value``).
_ORIGINAL_SCALAR_OPS: frozenset[OpOverload] = frozenset(
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


def _host_checked_op() -> OpOverload | None:
    return _active.stack[-1].host_checked if _active.stack else None


class tracing:
    """``with tracing(ctx):`` makes ``ctx`` the context this thread's lowerings report to."""

    def __init__(self, context: TraceContext) -> None:
        self.context = context

    def __enter__(self) -> TraceContext:
        _active.stack.append(self.context)
        return self.context

    def __exit__(self, *exc_info: object) -> None:
        _active.stack.pop()


def device_check(failed: jax.Array, detail: jax.Array, message: str, error: type[Exception] = RuntimeError) -> None:
    """For lowerings: report a device-side fault (see :meth:`TraceContext.check`)."""
    active_context().check(jnp.asarray(failed, jnp.bool_), jnp.asarray(detail, jnp.int64), message, error)


#: c10's names of the types in "value cannot be converted to type X without overflow".
_C10_NAMES = {
    np.dtype(jnp.int8): "int8_t",
    np.dtype(jnp.uint8): "uint8_t",
    np.dtype(jnp.int16): "int16_t",
    np.dtype(jnp.int32): "int",
    np.dtype(jnp.int64): "int64_t",
    np.dtype(jnp.float16): "c10::Half",
    np.dtype(jnp.bfloat16): "c10::BFloat16",
    np.dtype(jnp.float32): "float",
}


def c10_type_name(dtype: Any) -> str | None:
    """c10's name of a dtype in conversion errors (``int8_t``, ``c10::Half``); None for the others."""
    return _C10_NAMES.get(np.dtype(dtype))


def check_fits(value: Any, dtype: Any) -> None:
    """c10's overflow check of a Scalar converted to ``dtype`` (c10/util/TypeCast.h ``checked_convert``):
    integer targets reject NaN, infinities and values outside [lowest, max] (an integer may go down to
    -max for an unsigned type); floating targets reject finite values beyond their range.

    A concrete value (a Python number: a static argument, a graph constant) raises now, as on the CPU.
    A traced one (a runtime scalar of the executable) is checked inside it and raised at the next
    synchronisation point; the eager kernel checks its runtime scalars on the host instead
    (:func:`raise_if_overflows`, before each launch), so eager calls raise at the call.

    Raises:
        RuntimeError: c10's "value cannot be converted to type int8_t without overflow".
    """
    dtype = np.dtype(dtype)
    name = _C10_NAMES.get(dtype)
    if is_number(value) or isinstance(value, np.generic):
        raise_if_overflows(value, dtype)
        return
    value = jnp.asarray(value)
    if name is None or jnp.issubdtype(value.dtype, jnp.complexfloating) or value.dtype == jnp.bool_:
        return
    if jnp.issubdtype(dtype, jnp.integer):
        info = jnp.iinfo(dtype)
        lowest = -float(info.max) if info.min == 0 and jnp.issubdtype(value.dtype, jnp.integer) else float(info.min)
        wide = value.astype(jnp.float64)
        failed = jnp.isnan(wide) | (wide < lowest) | (wide > float(info.max))
    else:
        limit = float(jnp.finfo(dtype).max)
        wide = value.astype(jnp.float64)
        failed = jnp.isfinite(wide) & (jnp.abs(wide) > limit)
    device_check(failed, jnp.int64(0), _overflow_message(name), RuntimeError)


def raise_if_overflows(value: Any, dtype: Any) -> None:
    """:func:`check_fits` for a concrete number, on the host (exact for integers of any size)."""
    dtype = np.dtype(dtype)
    name = _C10_NAMES.get(dtype)
    if name is None or isinstance(value, (bool, np.bool_, complex, np.complexfloating)):
        return
    if np.issubdtype(dtype, np.integer):
        info = jnp.iinfo(dtype)
        integral = isinstance(value, (int, np.integer))
        if not integral and not math.isfinite(float(value)):
            raise RuntimeError(_overflow_message(name))
        lowest = -int(info.max) if info.min == 0 and integral else int(info.min)
        number = int(value) if integral else float(value)
        failed = number < lowest or number > int(info.max)
    else:
        wide = float(value)
        failed = math.isfinite(wide) and abs(wide) > float(jnp.finfo(dtype).max)  # NumPy lacks bfloat16's
    if failed:
        raise RuntimeError(_overflow_message(name))


def _overflow_message(name: str) -> str:
    return f"value cannot be converted to type {name} without overflow"


def same_dtype(names: Sequence[str], message: str) -> Callable[[dict[str, Any]], None]:
    """A ``dtype_rule``: the tensor arguments ``names`` (those given) share one dtype, else
    ``RuntimeError(message)`` formatted with their ATen dtype names in ``names``' order."""
    names = tuple(names)

    def rule(arguments: dict[str, Any]) -> None:
        dtypes = [arguments[name].dtype for name in names if isinstance(arguments.get(name), torch.Tensor)]
        if len(set(dtypes)) > 1:
            raise RuntimeError(message.format(*(aten_name(dtype) for dtype in dtypes)))

    return rule


def _promotes(argument: torch._C.Argument) -> bool:
    """Whether a number in this schema position takes part in type promotion: a Scalar or float
    argument, or a Tensor one (a Python number PyTorch wrapped, as in ``x * 0.5``). int and bool
    arguments (dims, flags, sizes) never do."""
    return str(argument.type) in (
        "number",
        "Optional[number]",
        "float",
        "Optional[float]",
        "Tensor",
        "Optional[Tensor]",
    )


def is_number(value: object) -> bool:
    return isinstance(value, (bool, int, float, complex)) and not isinstance(value, torch.Tensor)


def apply(
    entry: Lowering,
    args: list[Any],
    metas: list[Any],
    result_meta: Any,
) -> Any:
    """Runs ``entry`` at trace time.

    Args:
        args: the op's arguments in schema order; tensors as JAX arrays, runtime scalars as 0-d
            arrays, everything else as Python values.
        metas: the same arguments as PyTorch sees them: meta tensors (or 0-dim CPU tensors),
            Python numbers, Python values.
        result_meta: PyTorch's meta result (a tensor or a tuple/list of them).

    Returns:
        The result(s), cast to ``result_meta``'s dtypes; a tuple/list when the op returns several.
    """
    schema = entry.op._schema
    names = [argument.name for argument in schema.arguments]
    args = list(args)
    if entry.dtype_rule is not None:
        entry.dtype_rule(dict(zip(names, metas, strict=True)))
    if entry.checked and _host_checked_op() is not entry.op:  # c10 converts to the result's dtype
        first = result_meta[0] if isinstance(result_meta, (tuple, list)) else result_meta
        for arg, meta, name in zip(args, metas, names, strict=True):
            if name in entry.checked and is_number(meta):
                check_fits(arg, jax_dtype(first.dtype))
    if entry.promotion is not None:
        if entry.promote is not None:
            chosen = [i for i, name in enumerate(names) if name in entry.promote]
        else:
            chosen = [
                i
                for i, meta in enumerate(metas)
                if isinstance(meta, torch.Tensor)
                or (is_number(meta) and names[i] not in entry.static and _promotes(schema.arguments[i]))
            ]
        participants = [metas[i] for i in chosen if metas[i] is not None]
        computation, _ = elementwise_dtypes(*participants, type_promotion_kind=entry.promotion.value)
        target = jax_dtype(computation)
        # TensorIterator wraps a Python number as a 0-dim tensor of the operands' common dtype: a
        # 16-bit computation sees the number rounded to it (bf16(0.7) == 0.7 is True on the CPU),
        # except in the kernels that read the scalar's original value (_ORIGINAL_SCALAR_OPS).
        _, common = elementwise_dtypes(*participants, type_promotion_kind=Promotion.DEFAULT.value)
        scalar_dtype = (
            jax_dtype(common)
            if common in (torch.bfloat16, torch.float16) and entry.op not in _ORIGINAL_SCALAR_OPS
            else None
        )
        for i, (arg, meta) in enumerate(zip(args, metas, strict=True)):
            if arg is None or names[i] in entry.static:
                continue
            if names[i] in entry.uncast:  # reaches the lowering as it is, rounded as an operand would be
                if is_number(meta) and scalar_dtype is not None and names[i] in _OPERAND_NAMES:
                    args[i] = jnp.asarray(arg).astype(scalar_dtype).astype(target)
                continue
            if is_number(meta) and scalar_dtype is not None and i in chosen and names[i] in _OPERAND_NAMES:
                args[i] = jnp.asarray(arg).astype(scalar_dtype).astype(target)
            elif i in chosen or (is_number(meta) and isinstance(arg, jax.Array)):
                args[i] = jnp.asarray(arg).astype(target)
    kwargs = {}
    positional = []
    for argument, arg in zip(schema.arguments, args, strict=True):
        if argument.kwarg_only:
            kwargs[argument.name] = arg
        else:
            positional.append(arg)
    results = result_meta if isinstance(result_meta, (tuple, list)) else (result_meta,)
    if entry.random:
        context = active_context()
        kwargs["rng_key"] = context.next_key(sum(r.numel() for r in results if isinstance(r, torch.Tensor)))
    if entry.result_dtype:
        kwargs["result_dtype"] = jax_dtype(results[0].dtype)
    if entry.metas:
        kwargs["metas"] = metas
    value = entry.fn(*positional, **kwargs)
    values = value if isinstance(value, (tuple, list)) else (value,)
    if len(values) != len(results):
        raise RuntimeError(
            f"lowering of {entry.op} returned {len(values)} results, PyTorch's meta kernel {len(results)}"
        )
    cast = []
    for produced, expected in zip(values, results, strict=True):
        if expected is None or not isinstance(expected, torch.Tensor):
            cast.append(produced)
            continue
        produced = jnp.asarray(produced)
        if tuple(produced.shape) != tuple(expected.shape):
            raise RuntimeError(
                f"lowering of {entry.op} returned shape {tuple(produced.shape)}, PyTorch's meta kernel "
                f"says {tuple(expected.shape)}"
            )
        cast.append(convert(produced, jax_dtype(expected.dtype)))
    if isinstance(result_meta, (tuple, list)):
        return type(result_meta)(cast)
    return cast[0]
