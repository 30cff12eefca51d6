"""The engines' elementwise arithmetic, and the tensor type kernels see (:class:`NkiTensor`).

The Vector, Scalar and GpSimd engines compute in float32 and cast each result to the output tile's
dtype (NKI ISA: "the engine casts input data types to float32 and performs the operation in float32
math"); integer operands of integer arithmetic are computed exactly, as GpSimd's native int32 path
does. Operators are named once here (``add``, ``exp``, ...) and reached from the ``nl`` functions,
numpy's ufuncs and Python's operators alike.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from nki import errors
from nki._core import dtypes, scope
from nki._core.index import IndexExpr
from nki._core.memory import MemoryRegion, Storage, check_on_chip_allocation, psum, sbuf
from nki._core.tensor import TensorBase, as_mask, cast

F32 = jnp.float32


def _mod(a, b):
    return a - jnp.floor(a / b) * b if jnp.issubdtype(a.dtype, jnp.floating) else jnp.mod(a, b)


def _right_shift(a, b):
    return jnp.right_shift(a, b)


#: Binary ALU operators (``op=`` of nisa instructions, nl binary functions): name -> (kind, fn).
#: Comparisons and logical operators give 1 or 0 in the output dtype.
ALU: dict[str, tuple[str, Callable[[Any, Any], Any]]] = {
    "add": ("arith", jnp.add),
    "subtract": ("arith", jnp.subtract),
    "multiply": ("arith", jnp.multiply),
    # Integer operands divide rounding toward zero (GpSimd's native int32 division, and float32
    # division followed by the truncating cast to an integer dtype alike), not floor division.
    "divide": ("arith", lambda a, b: jnp.divide(a, b) if jnp.issubdtype(a.dtype, jnp.floating) else jax.lax.div(a, b)),
    "maximum": ("arith", jnp.maximum),
    "minimum": ("arith", jnp.minimum),
    "power": ("arith", jnp.power),
    "mod": ("arith", _mod),
    "fmod": ("arith", jnp.fmod),
    "abs_max": ("arith", lambda a, b: jnp.maximum(jnp.abs(a), jnp.abs(b))),
    "abs_min": ("arith", lambda a, b: jnp.minimum(jnp.abs(a), jnp.abs(b))),
    "equal": ("compare", jnp.equal),
    "not_equal": ("compare", jnp.not_equal),
    "less": ("compare", jnp.less),
    "less_equal": ("compare", jnp.less_equal),
    "greater": ("compare", jnp.greater),
    "greater_equal": ("compare", jnp.greater_equal),
    "logical_and": ("logical", lambda a, b: jnp.logical_and(a != 0, b != 0)),
    "logical_or": ("logical", lambda a, b: jnp.logical_or(a != 0, b != 0)),
    "logical_xor": ("logical", lambda a, b: jnp.logical_xor(a != 0, b != 0)),
    "bitwise_and": ("bitvec", jnp.bitwise_and),
    "bitwise_or": ("bitvec", jnp.bitwise_or),
    "bitwise_xor": ("bitvec", jnp.bitwise_xor),
    "left_shift": ("bitvec", jnp.left_shift),
    "right_shift": ("bitvec", _right_shift),
}

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + jnp.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x**3)))


def _gelu_dx(x):
    cdf = 0.5 * (1.0 + jax.lax.erf(x / math.sqrt(2.0)))
    return cdf + x * jnp.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


def _gelu_sigmoid_dx(x):
    s = jax.nn.sigmoid(1.702 * x)
    return s + 1.702 * x * s * (1.0 - s)


def _silu_dx(x):
    s = jax.nn.sigmoid(x)
    return s * (1.0 + x * (1.0 - s))


#: Unary functions (``op=`` of nisa.activation, nl unary functions), computed in float32.
ACTIVATION: dict[str, Callable[[Any], Any]] = {
    "copy": lambda x: x,
    "exp": jnp.exp,
    "log": jnp.log,
    "sqrt": jnp.sqrt,
    "rsqrt": jax.lax.rsqrt,
    "reciprocal": lambda x: 1.0 / x,
    "tanh": jnp.tanh,
    "sigmoid": jax.nn.sigmoid,
    "relu": jax.nn.relu,
    "gelu": lambda x: jax.nn.gelu(x, approximate=False),
    "gelu_apprx_tanh": _gelu_tanh,
    "gelu_apprx_sigmoid": lambda x: x * jax.nn.sigmoid(1.702 * x),
    "gelu_dx": _gelu_dx,
    "gelu_apprx_sigmoid_dx": _gelu_sigmoid_dx,
    "silu": jax.nn.silu,
    "silu_dx": _silu_dx,
    "softplus": jax.nn.softplus,
    "mish": lambda x: x * jnp.tanh(jax.nn.softplus(x)),
    "erf": jax.lax.erf,
    "erf_dx": lambda x: 2.0 / math.sqrt(math.pi) * jnp.exp(-x * x),
    "sin": jnp.sin,
    "cos": jnp.cos,
    "tan": jnp.tan,
    "arctan": jnp.arctan,
    "square": jnp.square,
    "abs": jnp.abs,
    "negative": jnp.negative,
    "sign": jnp.sign,
    "ceil": jnp.ceil,
    "floor": jnp.floor,
    "trunc": jnp.trunc,
}

#: Operators of integer-only (bit pattern) arithmetic on integer tiles.
INTEGER_UNARY = {"invert": jnp.invert, "logical_not": lambda x: x == 0}

_NUMPY_NAMES = {
    np.add: "add",
    np.subtract: "subtract",
    np.multiply: "multiply",
    np.divide: "divide",
    np.true_divide: "divide",
    np.maximum: "maximum",
    np.minimum: "minimum",
    np.power: "power",
    np.mod: "mod",
    np.fmod: "fmod",
    np.equal: "equal",
    np.not_equal: "not_equal",
    np.less: "less",
    np.less_equal: "less_equal",
    np.greater: "greater",
    np.greater_equal: "greater_equal",
    np.logical_and: "logical_and",
    np.logical_or: "logical_or",
    np.logical_xor: "logical_xor",
    np.bitwise_and: "bitwise_and",
    np.bitwise_or: "bitwise_or",
    np.bitwise_xor: "bitwise_xor",
    np.left_shift: "left_shift",
    np.right_shift: "right_shift",
    np.exp: "exp",
    np.log: "log",
    np.sqrt: "sqrt",
    np.tanh: "tanh",
    np.square: "square",
    np.abs: "abs",
    np.negative: "negative",
    np.sign: "sign",
    np.ceil: "ceil",
    np.floor: "floor",
    np.trunc: "trunc",
    np.sin: "sin",
    np.cos: "cos",
    np.tan: "tan",
    np.arctan: "arctan",
    np.reciprocal: "reciprocal",
    np.invert: "invert",
    np.logical_not: "logical_not",
    np.max: "maximum",
    np.min: "minimum",
    np.amax: "maximum",
    np.amin: "minimum",
    np.sum: "add",
    np.prod: "multiply",
}


def op_name(op: Any) -> str:
    """The operator an ``op=`` argument names: an nl function (``nl.add``, ``nl.exp``), a numpy
    ufunc (``np.add``) or the operator's name.

    Raises:
        TypeError: ``op`` is none of these.
    """
    name = getattr(op, "nki_op", None)
    if name is None and isinstance(op, str):
        name = op
    if name is None:
        try:
            name = _NUMPY_NAMES.get(op)
        except TypeError:
            name = None
    if name is None:
        raise TypeError(f"{op!r} is not an NKI operator; pass an nl function such as nl.add or nl.exp")
    return name


class NkiTensor(TensorBase):
    """A tensor inside an NKI kernel: an HBM tensor (a kernel argument, an output) or an on-chip tile
    (SBUF, PSUM), with NumPy-style indexing and the arithmetic operators of the compute engines."""

    __slots__ = ()

    # arithmetic: a new SBUF tile, as the nl functions give
    def __add__(self, other):
        return elementwise("add", "add", [self, other])

    def __radd__(self, other):
        return elementwise("add", "add", [other, self])

    def __sub__(self, other):
        return elementwise("subtract", "subtract", [self, other])

    def __rsub__(self, other):
        return elementwise("subtract", "subtract", [other, self])

    def __mul__(self, other):
        return elementwise("multiply", "multiply", [self, other])

    def __rmul__(self, other):
        return elementwise("multiply", "multiply", [other, self])

    def __truediv__(self, other):
        return elementwise("divide", "divide", [self, other])

    def __rtruediv__(self, other):
        return elementwise("divide", "divide", [other, self])

    def __pow__(self, other):
        return elementwise("power", "power", [self, other])

    def __rpow__(self, other):
        return elementwise("power", "power", [other, self])

    def __mod__(self, other):
        return elementwise("mod", "mod", [self, other])

    def __neg__(self):
        return unary("negative", "negative", self)

    def __abs__(self):
        return unary("abs", "abs", self)

    def __invert__(self):
        return unary("invert", "invert", self)

    def __and__(self, other):
        return elementwise("bitwise_and", "bitwise_and", [self, other])

    def __or__(self, other):
        return elementwise("bitwise_or", "bitwise_or", [self, other])

    def __xor__(self, other):
        return elementwise("bitwise_xor", "bitwise_xor", [self, other])

    def __lshift__(self, other):
        return elementwise("left_shift", "left_shift", [self, other])

    def __rshift__(self, other):
        return elementwise("right_shift", "right_shift", [self, other])

    def __lt__(self, other):
        return elementwise("less", "less", [self, other])

    def __le__(self, other):
        return elementwise("less_equal", "less_equal", [self, other])

    def __gt__(self, other):
        return elementwise("greater", "greater", [self, other])

    def __ge__(self, other):
        return elementwise("greater_equal", "greater_equal", [self, other])

    def __eq__(self, other):  # type: ignore[override]
        return elementwise("equal", "equal", [self, other])

    def __ne__(self, other):  # type: ignore[override]
        return elementwise("not_equal", "not_equal", [self, other])

    __hash__ = object.__hash__

    # in place: the result is written back into this tile (PSUM accumulation: psum += matmul)
    def _inplace(self, name: str, other: Any) -> NkiTensor:
        scope.require(name)
        tile = as_tile(self, "self", name)
        tile.write(combine(name, [tile, other], result=tile.dtype))
        return self

    def __iadd__(self, other):
        return self._inplace("add", other)

    def __isub__(self, other):
        return self._inplace("subtract", other)

    def __imul__(self, other):
        return self._inplace("multiply", other)

    def __itruediv__(self, other):
        return self._inplace("divide", other)

    def __setitem__(self, key: Any, value: Any) -> None:
        scope.require("__setitem__")
        assign(self[key], value, "a[...] = b")

    def astype(self, dtype: Any) -> NkiTensor:
        """A copy of the tile in ``dtype`` (a new SBUF tile)."""
        return unary("copy", "astype", self, dtype=dtypes.as_dtype(dtype))

    def broadcast_to(self, shape: Any) -> NkiTensor:
        """A new SBUF tile of ``shape`` holding this tile broadcast by NumPy's rules (the partition
        dimension included)."""
        return broadcast_tile(self, tuple(shape), "broadcast_to")


def new_storage(shape: Any, dtype: Any, region: MemoryRegion, name: str = "") -> Storage:
    """An allocation of ``shape`` (``nl.par_dim`` marks the partition dimension of on-chip memory),
    checked against the platform's limits."""
    from nki._core.index import par_dim

    ctx = scope.require("ndarray")
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    markers = [i for i, s in enumerate(shape) if isinstance(s, par_dim)]
    par_axis = markers[0] if markers else 0
    dtype = dtypes.as_dtype(dtype)
    storage = Storage(tuple(int(s) for s in shape), dtype, region, name, par_axis=par_axis)
    if region.on_chip:
        check_on_chip_allocation(storage, ctx.platform)
    return storage


def new_tile(shape: tuple[int, ...], dtype: Any, region: MemoryRegion = sbuf, name: str = "") -> NkiTensor:
    return NkiTensor.whole(new_storage(shape, dtype, region, name))


def as_tile(x: Any, name: str, api: str, regions: tuple[MemoryRegion, ...] = (sbuf, psum)) -> NkiTensor:
    """``x`` as an operand of a compute instruction: an on-chip tile whose first dimension is its
    partition dimension, with at most 128 partitions.

    Raises:
        NKI's err_unsupported_memory (another memory), err_failed_to_infer_tile_from_local_tensor
        (the partition dimension is not first), err_num_partition_exceed_arch_limit.
    """
    if not isinstance(x, NkiTensor):
        raise TypeError(f"'{name}' of '{api}' must be an NKI tensor, got {type(x).__name__}")
    if x.buffer not in regions:
        expected = "|".join(sorted(r.address_space for r in regions))
        errors.unsupported_memory(name, api, expected, x.buffer.address_space)
    partition = x.partition_view_dim()
    if partition not in (None, 0):
        errors.failed_to_infer_tile_from_local_tensor(x.name or name, x.shape)
    limit = scope.require(api).platform.partitions
    if x.ndim and x.shape[0] > limit:
        errors.num_partition_exceed_arch_limit(x.shape[0], limit)
    return x


def read_operand(tile: NkiTensor, mask: np.ndarray | None = None) -> jnp.ndarray:
    """A tile's value as an engine reads it (ends PSUM accumulation of what it reads)."""
    value = tile.read(mask)
    tile.end_accumulation()
    return value


def compute_dtype(values: Sequence[Any], result: Any = None) -> np.dtype:
    """float32, unless every operand (tiles and Python ints) and the ``result`` dtype, when given, are
    integers, which compute as int32 (NKI: the engines compute in float32 unless all input and output
    tiles are integers; ``nl.divide`` of int32 tiles into a float32 tile is a true division)."""
    if result is not None and dtypes.is_float(np.dtype(result)):
        return dtypes.float32
    for v in values:
        if isinstance(v, float) or (hasattr(v, "dtype") and dtypes.is_float(np.dtype(v.dtype))):
            return dtypes.float32
    return dtypes.int32


def _operand_value(x: Any, mask: np.ndarray | None) -> Any:
    if isinstance(x, NkiTensor):
        return read_operand(x, mask if mask is not None and mask.shape == x.shape else None)
    if isinstance(x, IndexExpr):
        return jnp.asarray(np.broadcast_to(x.values(), x.shape), jnp.int32)
    if isinstance(x, (int, float, bool, np.number)):
        return x
    raise TypeError(f"an NKI operand must be a tile or a number, got {type(x).__name__}")


def combine(name: str, operands: Sequence[Any], mask: np.ndarray | None = None, result: Any = None) -> jnp.ndarray:
    """Applies the ALU operator ``name`` to the operands' values (float32 math, or int32 where the
    operands and the ``result`` dtype are integers: :func:`compute_dtype`); the value still needs
    casting to the output dtype."""
    kind, fn = ALU[name]
    values = [_operand_value(x, mask) for x in operands]
    work = compute_dtype(values, result)
    if kind == "bitvec":
        for x, v in zip(operands, values, strict=True):
            if hasattr(v, "dtype") and not dtypes.is_int(np.dtype(v.dtype)):
                errors.bitvec_operand_must_be_integer(getattr(x, "name", "") or "operand", v.dtype)
        values = [v.astype(jnp.int32) if hasattr(v, "astype") else jnp.asarray(v, jnp.int32) for v in values]
    else:
        values = [v.astype(work) if hasattr(v, "astype") else jnp.asarray(v, work) for v in values]
    result = fn(*values)
    if kind in ("compare", "logical"):
        result = result.astype(work)
    return result


def result_dtype(operands: Sequence[Any], dtype: Any) -> np.dtype:
    """The output dtype of an nl function: ``dtype`` if given, else the operands' (dtypes.promote);
    a float number with integer tiles gives float32."""
    if dtype is not None:
        return dtypes.as_dtype(dtype)
    tile_dtypes = [x.dtype for x in operands if isinstance(x, NkiTensor)]
    if not tile_dtypes:
        return dtypes.float32
    result = dtypes.promote(tile_dtypes)
    if dtypes.is_int(result) and any(isinstance(x, float) for x in operands):
        return dtypes.float32
    return result


def broadcast_shapes(api: str, operands: Sequence[Any]) -> tuple[int, ...]:
    shapes = [(getattr(x, "name", "") or f"x{i}", x.shape) for i, x in enumerate(operands) if isinstance(x, NkiTensor)]
    try:
        return tuple(np.broadcast_shapes(*(s for _, s in shapes)))
    except ValueError:
        errors.param_shape_incompatible_with_numpy(api, shapes)


def elementwise(name: str, api: str, operands: Sequence[Any], dtype: Any = None, mask: Any = None) -> NkiTensor:
    """``nl.<api>`` of a binary operator over tiles and numbers: a new SBUF tile, operands broadcast by
    NumPy's rules; with ``mask``, only the masked elements are computed (the rest stay uninitialised)."""
    scope.require(api)
    for i, x in enumerate(operands):
        if isinstance(x, NkiTensor):
            as_tile(x, ["x", "y", "z"][i] if i < 3 else f"operand{i}", api)
    shape = broadcast_shapes(api, operands)
    out_dtype = result_dtype(operands, dtype)
    masked = as_mask(mask, shape)
    value = combine(name, operands, masked, out_dtype)
    out = new_tile(shape, out_dtype)
    out.write(cast(jnp.broadcast_to(value, shape), out_dtype), masked)
    return out


def apply_unary(name: str, value: jnp.ndarray) -> jnp.ndarray:
    if name in INTEGER_UNARY:
        return INTEGER_UNARY[name](value)
    return ACTIVATION[name](value.astype(F32))


def unary(name: str, api: str, x: Any, dtype: Any = None, mask: Any = None) -> NkiTensor:
    """``nl.<api>`` of a unary function: a new SBUF tile (float32 math, cast to ``dtype``, by default
    the input's dtype)."""
    scope.require(api)
    tile = as_tile(x, "x", api)
    masked = as_mask(mask, tile.shape)
    out_dtype = dtypes.as_dtype(dtype) if dtype is not None else tile.dtype
    value = read_operand(tile, masked)
    if name in INTEGER_UNARY and not dtypes.is_int(tile.dtype):
        errors.bitvec_operand_must_be_integer("x", tile.dtype)
    out = new_tile(tile.shape, out_dtype)
    out.write(cast(apply_unary(name, value), out_dtype), masked)
    return out


def broadcast_tile(x: NkiTensor, shape: tuple[int, ...], api: str, dtype: Any = None) -> NkiTensor:
    scope.require(api)
    tile = as_tile(x, "x", api)
    try:
        value = jnp.broadcast_to(read_operand(tile), shape)
    except ValueError:
        errors.param_shape_incompatible_with_numpy(api, [("x", tile.shape), ("shape", shape)])
    out_dtype = dtypes.as_dtype(dtype) if dtype is not None else tile.dtype
    out = new_tile(shape, out_dtype)
    out.write(cast(value, out_dtype))
    return out


def assign(dst: NkiTensor, value: Any, expression: str) -> None:
    """``dst[...] = value``: a tile, number or index expression written into ``dst`` (broadcast to
    it, or reshaped when the partitions and the elements per partition agree).

    Raises:
        NKI's err_store_dst_shape_smaller_than_other_shape: ``value`` is larger than ``dst``.
    """
    if isinstance(value, (int, float, bool, np.number)):
        dst.write(cast(value, dst.dtype))
        return
    if isinstance(value, IndexExpr):
        dst.write(cast(jnp.asarray(np.broadcast_to(value.values(), value.shape), jnp.int32), dst.dtype))
        return
    if not isinstance(value, NkiTensor):
        raise TypeError(f"cannot assign a {type(value).__name__} to an NKI tensor")
    data = read_operand(value)
    if data.shape != dst.shape:
        try:
            broadcasts = tuple(np.broadcast_shapes(value.shape, dst.shape)) == dst.shape
        except ValueError:
            broadcasts = False
        same_partitions = not dst.on_chip or (dst.ndim and value.ndim and dst.shape[0] == value.shape[0])
        if broadcasts:
            data = jnp.broadcast_to(data, dst.shape)
        elif value.size == dst.size and same_partitions:
            data = data.reshape(dst.shape)
        else:
            errors.store_dst_shape_smaller_than_other_shape(
                expression, dst.name or "a", dst.shape, errors.operand(value.name or "b", value.shape)
            )
    dst.write(cast(data, dst.dtype))
