"""Vector, Scalar and GpSimd Engine instructions: elementwise, per-partition scalar, reduction,
activation, copy, memset, iota, select. Each takes the destination first (current NKI) or returns a
new tile (legacy NKI); see nki/isa/binding.py."""

from __future__ import annotations

import enum
import operator
from typing import Any

import jax.numpy as jnp
import numpy as np

from nki import errors
from nki._core import compute, dtypes, scope
from nki._core.compute import ACTIVATION, ALU, NkiTensor, op_name
from nki._core.index import IndexExpr, MaskExpr
from nki._core.memory import psum, sbuf
from nki._core.tensor import as_mask, cast
from nki.isa.binding import instruction
from nki.language.reduction import free_axes, reduce_value, reduced_mask, reduced_shape

__all__ = [
    "activation",
    "activation_reduce",
    "affine_select",
    "iota",
    "memset",
    "reciprocal",
    "ReduceCmd",
    "reduce_cmd",
    "tensor_copy",
    "tensor_reduce",
    "tensor_scalar",
    "tensor_tensor",
]


class ReduceCmd(enum.Enum):
    """``nisa.reduce_cmd``: how an instruction uses the engine's accumulator registers."""

    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3
    load_reduce = 4


reduce_cmd = ReduceCmd


def _elements_per_partition(tile: NkiTensor) -> int:
    return int(np.prod(tile.shape[1:])) if tile.ndim > 1 else 1


def _destination(
    dst: NkiTensor | None, shape: tuple[int, ...], dtype: Any, default: Any, api: str, regions=(sbuf, psum)
) -> NkiTensor:
    """``dst`` checked as an output tile, or a new SBUF tile of ``shape`` (legacy form)."""
    if dst is None:
        return compute.new_tile(shape, dtype if dtype is not None else default)
    return compute.as_tile(dst, "dst", api, regions)


def _fit(out: NkiTensor, value: jnp.ndarray, api: str, source: str) -> jnp.ndarray:
    """``value`` shaped as ``out``: the same partitions and elements per partition (NKI's rule for
    ISA operands; the free dimensions may be shaped differently)."""
    if tuple(value.shape) == out.shape:
        return value
    if value.shape[0] != out.shape[0]:
        errors.num_partition_mismatch(api, [("dst", out.shape), (source, tuple(value.shape))])
    if int(np.prod(value.shape)) != out.size:
        errors.param_shape_mismatch(api, [("dst", out.shape), (source, tuple(value.shape))])
    return value.reshape(out.shape)


def _alu(op: Any, api: str) -> str:
    name = op_name(op)
    if name not in ALU:
        errors.instruction_unsupported_op(name, api)
    return name


@instruction(tensors=("data1", "data2"))
def tensor_tensor(
    dst: NkiTensor | None,
    data1: Any,
    data2: Any,
    op: Any,
    engine: Any = None,
    name: str | None = None,
    dtype: Any = None,
    mask: Any = None,
    **kwargs: Any,
) -> NkiTensor:
    """``dst = data1 <op> data2`` elementwise on the Vector (or GpSimd) Engine: two tiles with the same
    partitions and elements per partition, not both in PSUM; float32 math (int32 for integer tiles).

    Raises:
        NKI's err_num_partition_mismatch, err_param_shape_mismatch, err_unsupported_memory,
        err_instruction_unsupported_op, err_bitvec_operand_must_be_integer.
    """
    a = compute.as_tile(data1, "data1", "tensor_tensor")
    b = compute.as_tile(data2, "data2", "tensor_tensor")
    if a.shape[0] != b.shape[0]:
        errors.num_partition_mismatch("tensor_tensor", [("data1", a.shape), ("data2", b.shape)])
    if a.size != b.size:
        errors.param_shape_mismatch("tensor_tensor", [("data1", a.shape), ("data2", b.shape)])
    if a.buffer is psum and b.buffer is psum:
        errors.unsupported_memory("data2", "tensor_tensor", "sbuf", "psum")
    opname = _alu(op, "tensor_tensor")
    masked = as_mask(mask, a.shape)
    out = _destination(dst, a.shape, dtype, dtypes.promote([a.dtype, b.dtype]), "tensor_tensor")
    value = compute.combine(opname, [a, b.reshape(a.shape) if b.shape != a.shape else b], masked, out.dtype)
    out.write(cast(_fit(out, value, "tensor_tensor", "data1"), out.dtype), as_mask(mask, out.shape))
    return out


def _scalar_operand(operand: Any, data: NkiTensor, name: str, api: str) -> Any:
    """A per-partition scalar: a number, or a ``[P, 1]`` tile (P the partitions of ``data``)."""
    if isinstance(operand, NkiTensor):
        tile = compute.as_tile(operand, name, api)
        if tile.shape[0] != data.shape[0] or tile.size != data.shape[0]:
            errors.activation_scale_scalar_or_vector(api, name, tile.shape, data.shape[0])
        return compute.read_operand(tile).reshape((data.shape[0],) + (1,) * (data.ndim - 1))
    if isinstance(operand, (int, float, np.number)) and not isinstance(operand, bool):
        return operand
    raise TypeError(
        f"'{name}' of '{api}' must be a number or a [{data.shape[0]}, 1] tile, got {type(operand).__name__}"
    )


def _is_float(value: Any) -> bool:
    return isinstance(value, float) or (hasattr(value, "dtype") and dtypes.is_float(np.dtype(value.dtype)))


def _apply(name: str, value: Any, operand: Any, reverse: bool, result: Any) -> Any:
    """``value <name> operand`` (swapped with ``reverse``) in float32 math, or int32 where both and
    the ``result`` dtype are integers (:func:`compute.compute_dtype`), or as bit patterns."""
    kind, fn = ALU[name]
    floating = _is_float(value) or _is_float(operand) or dtypes.is_float(np.dtype(result))
    work = jnp.float32 if kind != "bitvec" and floating else jnp.int32
    left = value.astype(work)
    right = operand.astype(work) if hasattr(operand, "astype") else jnp.asarray(operand, work)
    result = fn(right, left) if reverse else fn(left, right)
    return result.astype(work) if kind in ("compare", "logical") else result


@instruction(tensors=("data",))
def tensor_scalar(
    dst: NkiTensor | None,
    data: Any,
    op0: Any,
    operand0: Any,
    reverse0: bool = False,
    op1: Any = None,
    operand1: Any = None,
    reverse1: bool = False,
    engine: Any = None,
    name: str | None = None,
    dtype: Any = None,
    mask: Any = None,
    **kwargs: Any,
) -> NkiTensor:
    """``dst = (data <op0> operand0) <op1> operand1``, each operand a number or a ``[P, 1]`` tile
    broadcast along the free dimensions (``reverse0``/``reverse1`` swap the sides of an operator).

    Raises:
        NKI's err_activation_scale_scalar_or_vector (an operand of another shape),
        err_instruction_unsupported_op.
    """
    tile = compute.as_tile(data, "data", "tensor_scalar")
    first = _alu(op0, "tensor_scalar")
    masked = as_mask(mask, tile.shape)
    out = _destination(dst, tile.shape, dtype, tile.dtype, "tensor_scalar")
    value = _apply(
        first,
        compute.read_operand(tile, masked),
        _scalar_operand(operand0, tile, "operand0", "tensor_scalar"),
        reverse0,
        out.dtype,
    )
    if op1 is not None:
        second = _alu(op1, "tensor_scalar")
        operand = _scalar_operand(operand1, tile, "operand1", "tensor_scalar")
        value = _apply(second, value, operand, reverse1, out.dtype)
    out.write(
        cast(_fit(out, jnp.broadcast_to(value, tile.shape), "tensor_scalar", "data"), out.dtype),
        as_mask(mask, out.shape),
    )
    return out


@instruction(tensors=("data",))
def tensor_reduce(
    dst: NkiTensor | None,
    op: Any,
    data: Any,
    axis: Any,
    negate: bool = False,
    keepdims: bool = False,
    name: str | None = None,
    dtype: Any = None,
    mask: Any = None,
    **kwargs: Any,
) -> NkiTensor:
    """``dst = reduce(op, data, axis)`` over free dimensions (the last contiguous ones) on the Vector
    Engine; float32 math for arithmetic operators (``negate`` multiplies the result by -1), bit
    patterns for bitvec operators on integer tiles.

    Raises:
        ValueError: the partition dimension or non-trailing axes; NKI's err_instruction_unsupported_op,
        err_reduce_unsupported_negate.
    """
    tile = compute.as_tile(data, "data", "tensor_reduce")
    opname = op_name(op)
    if opname not in ("add", "multiply", "maximum", "minimum", "bitwise_and", "bitwise_or", "bitwise_xor"):
        errors.instruction_unsupported_op(opname, "tensor_reduce")
    if negate and opname.startswith("bitwise"):
        errors.reduce_unsupported_negate(opname)
    axes = free_axes(axis, tile.ndim, "tensor_reduce")
    shape = reduced_shape(tile.shape, axes, keepdims)
    valid = as_mask(mask, tile.shape)
    value = reduce_value(opname, compute.read_operand(tile, valid), axes, valid)
    value = -value if negate else value
    out = _destination(dst, shape, dtype, tile.dtype, "tensor_reduce")
    written = reduced_mask(valid, axes, shape)
    out.write(
        cast(_fit(out, value.reshape(shape), "tensor_reduce", "reduce(data)"), out.dtype),
        None if written is None else written.reshape(out.shape),
    )
    return out


def _activation_value(api: str, op: Any, tile: NkiTensor, bias: Any, scale: Any, masked: Any) -> jnp.ndarray:
    name = op_name(op)
    if name not in ACTIVATION:
        errors.instruction_unsupported_op(name, api)
    value = compute.read_operand(tile, masked).astype(jnp.float32)
    if isinstance(scale, NkiTensor):
        if scale.dtype != dtypes.float32:
            errors.activation_scale_invalid_type(api, scale.dtype)
    value = value * _scalar_operand(scale, tile, "scale", api)
    if bias is not None:
        if isinstance(bias, NkiTensor) and bias.dtype not in (dtypes.float32, dtypes.float16, dtypes.bfloat16):
            errors.activation_bias_invalid_type(api, bias.dtype)
        value = value + _scalar_operand(bias, tile, "bias", api)
    return ACTIVATION[name](value)


def _reduce_registers(
    api: str,
    tile: NkiTensor,
    activated: jnp.ndarray,
    reduce_op: Any,
    reduce_res: Any,
    command: Any,
    valid: np.ndarray | None,
) -> None:
    """The Scalar Engine's per-partition accumulator registers (``reduce_cmd``), accumulating the
    elements of ``valid`` (the instruction's mask) alone."""
    ctx = scope.require(api)
    command = command if isinstance(command, ReduceCmd) else ReduceCmd[getattr(command, "name", command)]
    registers = ctx.registers.get("scalar")
    if registers is None or registers.shape[0] != tile.shape[0] or command in (ReduceCmd.reset, ReduceCmd.reset_reduce):
        registers = jnp.zeros((tile.shape[0],), jnp.float32)
    if command in (ReduceCmd.reduce, ReduceCmd.reset_reduce) or (reduce_res is not None and command is ReduceCmd.idle):
        if reduce_op is not None and op_name(reduce_op) != "add":
            errors.instruction_unsupported_op(op_name(reduce_op), api + " reduce_op")
        registers = registers + _partition_sums(activated, valid)
    ctx.registers["scalar"] = registers
    if reduce_res is not None:
        result = compute.as_tile(reduce_res, "reduce_res", api)
        result.write(cast(registers.reshape(result.shape), result.dtype))


def _partition_sums(value: jnp.ndarray, valid: np.ndarray | None) -> jnp.ndarray:
    """Each partition's sum over its free elements, of the masked ones alone with ``valid``."""
    axes = tuple(range(1, value.ndim))
    if not axes:
        return value.astype(jnp.float32)
    return reduce_value("add", value, axes, valid).reshape(value.shape[0])


@instruction(tensors=("data",))
def activation(
    dst: NkiTensor | None,
    op: Any,
    data: Any,
    bias: Any = None,
    scale: Any = 1.0,
    reduce_op: Any = None,
    reduce_res: Any = None,
    reduce_cmd: Any = ReduceCmd.idle,
    name: str | None = None,
    dtype: Any = None,
    mask: Any = None,
    **kwargs: Any,
) -> NkiTensor:
    """``dst = op(data * scale + bias)`` on the Scalar Engine (float32 math), ``scale`` a number or a
    float32 ``[P, 1]`` tile, ``bias`` a ``[P, 1]`` tile (float32/float16/bfloat16) or a number. With
    ``reduce_res``, the sum over the free dimensions of the result (accumulated in the engine's
    registers as ``reduce_cmd`` says) is written there.

    Raises:
        NKI's err_activation_scale_invalid_type, err_activation_bias_invalid_type,
        err_activation_scale_scalar_or_vector, err_instruction_unsupported_op.
    """
    tile = compute.as_tile(data, "data", "activation")
    masked = as_mask(mask, tile.shape)
    value = _activation_value("activation", op, tile, bias, scale, masked)
    out = _destination(dst, tile.shape, dtype, tile.dtype, "activation")
    out.write(cast(_fit(out, value, "activation", "data"), out.dtype), as_mask(mask, out.shape))
    if reduce_res is not None or reduce_cmd is not ReduceCmd.idle:
        _reduce_registers("activation", tile, value, reduce_op, reduce_res, reduce_cmd, masked)
    return out


@instruction(tensors=("data",))
def activation_reduce(
    dst: NkiTensor | None,
    op: Any,
    data: Any,
    reduce_op: Any,
    reduce_res: Any,
    bias: Any = None,
    scale: Any = 1.0,
    name: str | None = None,
    dtype: Any = None,
    mask: Any = None,
    **kwargs: Any,
) -> NkiTensor:
    """:func:`activation` that also writes the sum of its result over the free dimensions into
    ``reduce_res`` (``[P, 1]``)."""
    tile = compute.as_tile(data, "data", "activation_reduce")
    masked = as_mask(mask, tile.shape)
    value = _activation_value("activation_reduce", op, tile, bias, scale, masked)
    out = _destination(dst, tile.shape, dtype, tile.dtype, "activation_reduce")
    out.write(cast(_fit(out, value, "activation_reduce", "data"), out.dtype), as_mask(mask, out.shape))
    if op_name(reduce_op) != "add":
        errors.instruction_unsupported_op(op_name(reduce_op), "activation_reduce reduce_op")
    result = compute.as_tile(reduce_res, "reduce_res", "activation_reduce")
    result.write(cast(_partition_sums(value, masked).reshape(result.shape), result.dtype))
    return out


@instruction(tensors=("src",))
def tensor_copy(
    dst: NkiTensor | None,
    src: Any,
    engine: Any = None,
    name: str | None = None,
    dtype: Any = None,
    mask: Any = None,
    **kwargs: Any,
) -> NkiTensor:
    """Copies an on-chip tile into ``dst`` (same partitions and elements per partition), cast to its
    dtype; without ``dst`` into a new SBUF tile (PSUM -> SBUF)."""
    tile = compute.as_tile(src, "src", "tensor_copy")
    masked = as_mask(mask, tile.shape)
    value = compute.read_operand(tile, masked)
    out = _destination(dst, tile.shape, dtype, tile.dtype, "tensor_copy")
    out.write(cast(_fit(out, value, "tensor_copy", "src"), out.dtype), as_mask(mask, out.shape))
    return out


@instruction()
def memset(
    dst: NkiTensor | None,
    value: Any = 0,
    engine: Any = None,
    name: str | None = None,
    shape: Any = None,
    dtype: Any = None,
    mask: Any = None,
    **kwargs: Any,
) -> NkiTensor:
    """Fills ``dst`` with the constant ``value``; legacy form ``memset(shape, value, dtype)`` fills a
    new SBUF tile."""
    if dst is None:
        legacy_shape = shape
        if legacy_shape is None and isinstance(value, (tuple, list)):  # memset(shape, value, dtype)
            legacy_shape, value = value, engine
            dtype = dtype if dtype is not None else name
        if legacy_shape is None or dtype is None:
            raise TypeError("memset needs dst=, or (shape, value, dtype) in the legacy form")
        dst = compute.new_tile(tuple(legacy_shape), dtype)
    out = compute.as_tile(dst, "dst", "memset")
    out.write(cast(value, out.dtype), as_mask(mask, out.shape))
    return out


@instruction(tensors=("data",))
def reciprocal(
    dst: NkiTensor | None, data: Any, name: str | None = None, dtype: Any = None, mask: Any = None, **kwargs: Any
) -> NkiTensor:
    """``dst = 1 / data`` on the Vector Engine (float32 math)."""
    tile = compute.as_tile(data, "data", "reciprocal")
    masked = as_mask(mask, tile.shape)
    value = 1.0 / compute.read_operand(tile, masked).astype(jnp.float32)
    out = _destination(dst, tile.shape, dtype, tile.dtype, "reciprocal")
    out.write(cast(_fit(out, value, "reciprocal", "data"), out.dtype), as_mask(mask, out.shape))
    return out


def _pattern_values(pattern: Any, partitions: int, offset: int, channel_multiplier: int) -> np.ndarray:
    """``offset + channel * channel_multiplier + sum(step * index)`` over ``[partitions, num...]``."""
    value = np.full((partitions, 1), int(offset), dtype=np.int64) + np.arange(partitions).reshape(-1, 1) * int(
        channel_multiplier
    )
    free = np.zeros((1,), dtype=np.int64)
    for step, num in pattern:
        free = (free[:, None] + np.arange(int(num)) * int(step)).reshape(-1)
    return value + free[None, :]


@instruction()
def iota(
    dst: NkiTensor | None,
    pattern: Any = None,
    offset: int = 0,
    channel_multiplier: int = 0,
    name: str | None = None,
    dtype: Any = None,
    mask: Any = None,
    **kwargs: Any,
) -> NkiTensor:
    """Generates integers into an SBUF tile: ``offset + p * channel_multiplier + sum(step * i)`` over
    ``pattern`` ``[[step, num], ...]`` (legacy form: ``iota(expr, dtype)``, the values of an
    ``nl.arange`` expression, or of an integer)."""
    if dst is None:
        expr = pattern
        if isinstance(expr, (int, np.integer)):
            expr = IndexExpr((1, 1), int(expr))
        if not isinstance(expr, IndexExpr) or dtype is None:
            raise TypeError("iota needs dst= and a pattern, or (expr, dtype) in the legacy form")
        shape = expr.shape if expr.ndim >= 2 else expr.shape + (1,) * (2 - expr.ndim)
        out = compute.new_tile(shape, dtype)
        values = np.broadcast_to(expr.values(), expr.shape).reshape(shape)
        out.write(cast(jnp.asarray(values, jnp.int32), out.dtype), as_mask(mask, shape))
        return out
    out = compute.as_tile(dst, "dst", "iota", (sbuf,))
    values = _pattern_values(pattern, out.shape[0], offset, channel_multiplier)
    if values.size != out.size:
        errors.param_shape_mismatch("iota", [("dst", out.shape), ("pattern", values.shape)])
    out.write(cast(jnp.asarray(values.reshape(out.shape), jnp.int32), out.dtype))
    return out


_COMPARE = {
    "equal": operator.eq,
    "not_equal": operator.ne,
    "less": operator.lt,
    "less_equal": operator.le,
    "greater": operator.gt,
    "greater_equal": operator.ge,
}


@instruction(tensors=("on_true_tile",))
def affine_select(
    dst: NkiTensor | None,
    pattern: Any = None,
    channel_multiplier: int = 0,
    on_true_tile: Any = None,
    on_false_value: Any = 0.0,
    cmp_op: Any = "equal",
    offset: int = 0,
    name: str | None = None,
    pred: Any = None,
    dtype: Any = None,
    mask: Any = None,
    **kwargs: Any,
) -> NkiTensor:
    """``dst = on_true_tile where predicate else on_false_value``. The predicate is
    ``cmp_op(offset + p * channel_multiplier + sum(step * i), 0)`` over ``pattern`` (current form), or
    a mask of ``nl.arange`` expressions (legacy form: ``affine_select(pred, on_true_tile,
    on_false_value)``)."""
    if dst is None and isinstance(pattern, MaskExpr):
        pred, pattern = pattern, None
    if dst is None and pred is not None and on_true_tile is None and isinstance(channel_multiplier, NkiTensor):
        on_true_tile, channel_multiplier = channel_multiplier, 0
    tile = compute.as_tile(on_true_tile, "on_true_tile", "affine_select")
    if pred is not None:
        condition = as_mask(pred, tile.shape)
    else:
        values = _pattern_values(pattern, tile.shape[0], offset, channel_multiplier)
        condition = _COMPARE[op_name(cmp_op)](values, 0).reshape(tile.shape)
    value = jnp.where(
        jnp.asarray(condition), compute.read_operand(tile).astype(jnp.float32), jnp.float32(on_false_value)
    )
    out = _destination(dst, tile.shape, dtype, tile.dtype, "affine_select")
    out.write(cast(_fit(out, value, "affine_select", "on_true_tile"), out.dtype), as_mask(mask, out.shape))
    return out
