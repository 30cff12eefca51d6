"""Elementwise ops: unary, binary and ternary math, comparisons, logical and bitwise ops.

Promotion, scalar wrapping and the in-place/``out=`` forms come from the registry; bodies only do the
math, on arguments already in the computation dtype (float32 for 16-bit floats, as CPU kernels
compute them).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import jax.scipy.special as jsp
import numpy as np
import torch

from torch_neuronx.lowering import complex_math, exponential, log_gamma, registry
from torch_neuronx.lowering.fused_multiply_add import fused_multiply_add
from torch_neuronx.lowering.promotion import c10_rounding
from torch_neuronx.lowering.registry import Promotion, lowering, same_dtype
from torch_neuronx.runtime.dtypes import aten_name, jax_dtype
from torch_neuronx.runtime.host_threads import cpu_thread_count
from torch_neuronx.runtime.tracing import device_check

aten = torch.ops.aten

_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)


def _register_all(table: dict, promotion: Promotion, dtype_rules: dict | None = None) -> None:
    for op, fn in table.items():
        lowering(op, promotion=promotion, dtype_rule=(dtype_rules or {}).get(op))(fn)


def floating_result(kernel: str):
    """A ``dtype_rule`` of a binary op whose CUDA kernel dispatches floating (and complex) dtypes only:
    an integer or bool result dtype raises CUDA's NotImplementedError naming ``kernel``."""

    def rule(arguments: dict) -> None:
        dtype = torch.result_type(arguments["self"], arguments["other"])
        if not (dtype.is_floating_point or dtype.is_complex):
            raise NotImplementedError(f"\"{kernel}\" not implemented for '{aten_name(dtype)}'")

    return rule


def _integral_only(kernel: str, bool_too: bool = True, unsigned_too: bool = True):
    """A ``dtype_rule`` of a bitwise op: CUDA's kernel dispatches integer dtypes (and bool, but for
    the shifts; BinaryBitwiseOpsKernels.cu, BinaryShiftOpsKernels.cu, UnaryOpsKernel.cu), so a
    floating or complex result raises its NotImplementedError, as the CPU's does in its own name.
    JAX's TypeError leaked before, which also turned ``float_tensor & 1`` into Python's
    "unsupported operand type(s) for &". The shifts' AT_DISPATCH_INTEGRAL_TYPES leaves out uint16,
    uint32 and uint64 too (``not unsigned_too``; "rshift_cpu" refuses them as well)."""

    def rule(arguments: dict) -> None:
        self = arguments["self"]
        dtype = torch.result_type(self, arguments["other"]) if "other" in arguments else self.dtype
        if (
            dtype.is_floating_point
            or dtype.is_complex
            or (dtype == torch.bool and not bool_too)
            or (dtype in (torch.uint16, torch.uint32, torch.uint64) and not unsigned_too)
        ):
            raise NotImplementedError(f"\"{kernel}\" not implemented for '{aten_name(dtype)}'")

    return rule


def _real_only(name: str):
    """A ``dtype_rule``: ``self`` is not complex, else ATen's NotImplementedError (floor, ceil and
    trunc's structured metas in UnaryOps.cpp, on CPU and CUDA alike)."""

    def rule(arguments: dict) -> None:
        if arguments["self"].dtype.is_complex:
            raise NotImplementedError(f"{name} is not supported for complex inputs")

    return rule


# --- unary ------------------------------------------------------------------------------------


def _behind_barriers(fn: Callable, inputs: bool = False, result: bool = False) -> Callable:
    """``fn`` with its input or result behind an optimization barrier, for the ops XLA's algebraic
    simplifier rewrites across by real-number algebra, which IEEE arithmetic does not allow, in
    compiled graphs and adaptive-eager traces: ``log(exp(100.))`` to 100 (the CPU: inf),
    ``exp(x) / exp(x)`` to 1 (NaN where exp overflows), ``exp(a) * exp(b)`` to ``exp(a + b)``,
    ``log(pow(x, y))`` to ``y * log|x|`` (``log(pow(10., 100.))`` gave 230 for inf,
    ``log((-2.) ** 3.)`` 2.08 for NaN), ``log(exp2(x))`` to ``x * log(2)``, ``log(sqrt(x))`` to
    ``log(x) / 2``, ``exp2(a) * exp2(b)`` to ``exp2(a + b)``, ``reciprocal(reciprocal(x))`` to
    ``x``."""

    def barriered(self):
        value = fn(jax.lax.optimization_barrier(self) if inputs else self)
        return jax.lax.optimization_barrier(value) if result else value

    barriered.__doc__ = fn.__doc__
    return barriered


_FLOAT_UNARY: dict = {  # PyTorch INT_TO_FLOAT: integer inputs compute in the default float dtype
    aten.exp.default: _behind_barriers(jnp.exp, result=True),
    aten.exp2.default: _behind_barriers(exponential.exp2, result=True),
    aten.expm1.default: jnp.expm1,
    aten.log.default: _behind_barriers(jnp.log, inputs=True),
    aten.log2.default: _behind_barriers(jnp.log2, inputs=True),
    aten.log10.default: _behind_barriers(jnp.log10, inputs=True),
    aten.log1p.default: jnp.log1p,
    aten.sqrt.default: _behind_barriers(jnp.sqrt, result=True),
    aten.rsqrt.default: _behind_barriers(jax.lax.rsqrt, result=True),
    aten.sin.default: jnp.sin,
    aten.cos.default: jnp.cos,
    aten.tan.default: jnp.tan,
    aten.asin.default: jnp.arcsin,
    aten.acos.default: jnp.arccos,
    aten.atan.default: jnp.arctan,
    aten.sinh.default: exponential.sinh,
    aten.cosh.default: exponential.cosh,
    aten.tanh.default: jnp.tanh,
    aten.asinh.default: jnp.arcsinh,
    aten.acosh.default: jnp.arccosh,
    aten.atanh.default: jnp.arctanh,
    aten.sigmoid.default: jax.nn.sigmoid,
    aten.erf.default: jsp.erf,
    aten.erfc.default: exponential.erfc,
    aten.lgamma.default: log_gamma.lgamma,
    aten.reciprocal.default: _behind_barriers(jnp.reciprocal, result=True),
    aten.sinc.default: jnp.sinc,
    aten.i0.default: jnp.i0,
}


def _complex_by(complex_fn: Callable, real_fn: Callable) -> Callable:
    """A unary lowering computing complex inputs with ``complex_fn`` (complex_math's, the CPU's
    values at branch cuts and non-finite parts) and real ones with ``real_fn``."""

    def fn(self):
        if jnp.issubdtype(self.dtype, jnp.complexfloating):
            return complex_fn(self)
        return real_fn(self)

    fn.__doc__ = (
        f"jnp's {getattr(real_fn, '__name__', 'function')}; complex inputs by complex_math.{complex_fn.__name__}."
    )
    return fn


_COMPLEX_UNARY: dict = {  # the CPU's complex values (glibc's C99 functions, c10's formulas)
    aten.exp.default: complex_math.exp,
    aten.exp2.default: complex_math.exp2,
    aten.expm1.default: complex_math.expm1,
    aten.log.default: complex_math.log,
    aten.log2.default: complex_math.log2,
    aten.log10.default: complex_math.log10,
    aten.log1p.default: complex_math.log1p,
    aten.sqrt.default: complex_math.sqrt,
    aten.rsqrt.default: complex_math.rsqrt,
    aten.sin.default: complex_math.sin,
    aten.cos.default: complex_math.cos,
    aten.tan.default: complex_math.tan,
    aten.asin.default: complex_math.asin,
    aten.acos.default: complex_math.acos,
    aten.atan.default: complex_math.atan,
    aten.sinh.default: complex_math.sinh,
    aten.cosh.default: complex_math.cosh,
    aten.tanh.default: complex_math.tanh,
    aten.asinh.default: complex_math.asinh,
    aten.acosh.default: complex_math.acosh,
    aten.atanh.default: complex_math.atanh,
    aten.sigmoid.default: complex_math.sigmoid,
    aten.reciprocal.default: complex_math.reciprocal,
    aten.sinc.default: complex_math.sinc,
}
_FLOAT_UNARY.update({op: _complex_by(fn, _FLOAT_UNARY[op]) for op, fn in _COMPLEX_UNARY.items()})
_register_all(_FLOAT_UNARY, Promotion.INT_TO_FLOAT)


@lowering(aten.erfinv.default, promotion=Promotion.INT_TO_FLOAT)
def erfinv(self):
    """torch.erfinv: XLA's approximation refined by one Newton step on erf(|y|) = |x|, written for
    |x| >= 0.5 as (1 - |x|) - erfc(|y|) = 0 so that no digits cancel near |x| = 1. This brings the
    float32 error there (tens of ulp in XLA's approximation) down to the CPU's, about an ulp."""
    y = jsp.erfinv(self)
    magnitude = jnp.abs(y)
    target = jnp.abs(self)
    residual = jnp.where(target < 0.5, jsp.erf(magnitude) - target, (1 - target) - jsp.erfc(magnitude))
    step = residual / (_TWO_OVER_SQRT_PI * jnp.exp(-magnitude * magnitude))
    refined = jnp.sign(y) * (magnitude - step)
    return jnp.where(jnp.isfinite(y) & jnp.isfinite(step), refined, y)


_SAME_DTYPE_UNARY: dict = {  # PyTorch DEFAULT: integers stay integers
    aten.neg.default: lambda self: (
        complex_math.neg(self) if jnp.issubdtype(self.dtype, jnp.complexfloating) else jnp.negative(self)
    ),
    aten.floor.default: jnp.floor,
    aten.ceil.default: jnp.ceil,
    aten.trunc.default: jnp.trunc,
    aten.frac.default: lambda self: self - jnp.trunc(self),
    aten.bitwise_not.default: lambda self: jnp.logical_not(self) if self.dtype == jnp.bool_ else jnp.invert(self),
}
_register_all(
    _SAME_DTYPE_UNARY,
    Promotion.DEFAULT,
    {
        **{
            op: _real_only(op.__name__.split(".")[0])
            for op in (aten.floor.default, aten.ceil.default, aten.trunc.default)
        },
        aten.bitwise_not.default: _integral_only("bitwise_not_cuda", unsigned_too=False),
    },
)


@lowering(aten.abs.default, promotion=Promotion.COMPLEX_TO_FLOAT)
def abs(self):
    """torch.abs; complex inputs give their magnitude (float), +inf when a part is infinite."""
    if jnp.issubdtype(self.dtype, jnp.complexfloating):
        return complex_math.absolute(self)
    if jnp.issubdtype(self.dtype, jnp.signedinteger):
        # abs(INT_MIN) wraps to INT_MIN, as in C++; XLA's simplifier takes an integer abs to be
        # non-negative and folded abs(x) < 0 to False, abs(x).sign() to 0/1 in compiled graphs.
        return jnp.where(self < 0, -self, self)
    return jnp.abs(self)


def _sign_check(arguments: dict) -> None:
    """sign's structured meta (UnaryOps.cpp, CPU and CUDA alike), which PyTorch's Python meta lacks."""
    if arguments["self"].dtype.is_complex:
        raise NotImplementedError(
            "Unlike NumPy, torch.sign is not intended to support complex numbers. Please use torch.sgn instead."
        )


@lowering(aten.sign.default, promotion=Promotion.DEFAULT, dtype_rule=_sign_check)
def sign(self):
    """torch.sign: (x > 0) - (x < 0), as PyTorch computes it: -1, 0 or 1, NaN gives 0 and -0.0 gives
    +0.0; bool stays bool."""
    if self.dtype == jnp.bool_:
        return self
    return (self > 0).astype(self.dtype) - (self < 0).astype(self.dtype)


@lowering(aten.sgn.default, promotion=Promotion.DEFAULT)
def sgn(self):
    """torch.sgn: torch.sign for real inputs; z / |z| (0 at 0) for complex ones, as the CPU's
    vectorised kernel computes it."""
    if jnp.issubdtype(self.dtype, jnp.complexfloating):
        return complex_math.sgn(self)
    return sign(self)


def _not_complex(arguments: dict) -> None:
    """round's dtype rule: CPU and CUDA have no complex kernel (NotImplementedError, CUDA's dispatch
    macro's "round_cuda" not implemented for 'ComplexFloat', UnaryFractionKernels.cu)."""
    dtype = arguments["self"].dtype
    if dtype.is_complex:
        raise NotImplementedError(f"\"round_cuda\" not implemented for '{aten_name(dtype)}'")


@lowering(aten.round.default, promotion=Promotion.DEFAULT, dtype_rule=_not_complex)
def round_(self):
    """torch.round: half to even; integers unchanged."""
    return jnp.round(self)


@lowering(aten.round.decimals, promotion=Promotion.DEFAULT, static=("decimals",), dtype_rule=_not_complex)
def round_decimals(self, *, decimals):
    """torch.round(decimals=d): scales by 10**|d|, rounds half to even, scales back, as PyTorch does.
    Past a double's range 10**|d| is inf, as the CPU's ``std::pow`` gives (every value then NaN)."""
    exponent = -decimals if decimals < 0 else decimals  # this module defines its own abs
    with np.errstate(over="ignore"):  # 10**39 and up are inf in float32, as in the CPU's opmath
        ten_pow = np.float32(math.inf if exponent > _MAX_DOUBLE_POWER_OF_TEN else 10.0**exponent)
    if decimals >= 0:
        return true_divide(jnp.round(self * ten_pow.item()), jnp.asarray(ten_pow, self.dtype))
    return jnp.round(true_divide(self, jnp.asarray(ten_pow, self.dtype))) * ten_pow.item()


#: The largest power of ten a double holds (1e308).
_MAX_DOUBLE_POWER_OF_TEN = 308


_PREDICATES: dict = {
    aten.isnan.default: jnp.isnan,
    aten.isinf.default: jnp.isinf,
    aten.isposinf.default: jnp.isposinf,
    aten.isneginf.default: jnp.isneginf,
    aten.signbit.default: jnp.signbit,
    aten.logical_not.default: jnp.logical_not,
}
for _op, _fn in _PREDICATES.items():
    lowering(_op)(_fn)


@lowering(aten.nan_to_num.default, promotion=Promotion.DEFAULT, static=("nan", "posinf", "neginf"), result_dtype=True)
def nan_to_num(self, nan=None, posinf=None, neginf=None, *, result_dtype):
    """torch.nan_to_num: NaN -> nan (0 by default), +-inf -> posinf/neginf, by default the largest and
    lowest finite values of the result dtype (bfloat16's for bfloat16, not those of the float32 it
    computes in); integers are unchanged."""
    if not jnp.issubdtype(self.dtype, jnp.inexact):
        return self
    info = jnp.finfo(result_dtype)
    nan = 0.0 if nan is None else nan
    posinf = float(info.max) if posinf is None else posinf
    neginf = float(info.min) if neginf is None else neginf
    if jnp.issubdtype(self.dtype, jnp.complexfloating):  # each part on its own, as the CPU's kernel
        return jax.lax.complex(nan_to_num(self.real, nan, posinf, neginf, result_dtype=info.dtype),
                               nan_to_num(self.imag, nan, posinf, neginf, result_dtype=info.dtype))  # fmt: skip
    # Each element's replacement is chosen by its own value: jnp.nan_to_num replaces in turn, so a NaN
    # replaced by inf became posinf. A replacement beyond the dtype is inf, as the CPU's cast makes it.
    with np.errstate(over="ignore"):
        nan, posinf, neginf = (np.asarray(value, self.dtype) for value in (nan, posinf, neginf))
    return jnp.where(
        jnp.isnan(self), nan, jnp.where(self == jnp.inf, posinf, jnp.where(self == -jnp.inf, neginf, self))
    )


# --- binary -----------------------------------------------------------------------------------


def _category(value) -> int:
    """0 bool, 1 integer, 2 floating, 3 complex: of a tensor's dtype or a Python number. The result of
    an elementwise op is of its operands' highest category (the dimension rules pick only the width)."""
    dtype = value.dtype if isinstance(value, torch.Tensor) else None
    if dtype == torch.bool or isinstance(value, bool):
        return 0
    if (dtype is not None and dtype.is_complex) or isinstance(value, complex):
        return 3
    if (dtype is not None and dtype.is_floating_point) or isinstance(value, float):
        return 2
    return 1


def _alpha_check(arguments: dict) -> None:
    """ATen's ``alpha_check`` (BinaryOps.h) on the dtype add/sub compute in, in its order: a bool alpha
    only for bool results, a float or complex alpha for no integral or bool result, a complex one only
    for complex results. torch/_refs checks the integer case only, in its own words."""
    alpha = arguments.get("alpha", 1)
    if alpha is None or isinstance(alpha, torch.Tensor):
        return
    category = max(_category(arguments["self"]), _category(arguments["other"]))
    if isinstance(alpha, bool) and category != 0:
        raise RuntimeError("Boolean alpha only supported for Boolean results.")
    if isinstance(alpha, (float, complex)) and category < 2:
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")
    if isinstance(alpha, complex) and category != 3:
        raise RuntimeError("For non-complex input tensors, argument alpha must not be a complex number.")


@lowering(
    aten.add.Tensor,
    aten.add.Scalar,
    promotion=Promotion.DEFAULT,
    promote=("self", "other"),
    checked=("alpha",),
    checked_in_opmath=True,
    dtype_rule=_alpha_check,
    metas=True,
)
def add(self, other, alpha=1, *, metas):
    """torch.add: self + alpha * other (bool: logical or; complex: as the CPU's vectorised kernel,
    :func:`complex_math.add`)."""
    if self.dtype == jnp.bool_:
        return jnp.logical_or(self, jnp.logical_and(other, alpha))
    return _scaled_sum(self, other, alpha, metas[0], metas[1])


def _scaled_sum(self, other, alpha, self_meta, other_meta, sign=1):
    """``self + sign * alpha * other``; complex operands take the CPU's complex product with
    ``sign * alpha`` (sub passes ATen's ``-alpha``). A real float sum with an alpha other than the
    default is one fused multiply-add, ATen's vectorized ``vec::fmadd(other, alpha, self)``
    (ufunc/add.h; SGD's momentum and weight updates), but for the elements of a 16-bit result that
    the CPU's loop computes one by one (:func:`_cpu_scalar_tail`), where ``c10::Half``/``BFloat16``
    arithmetic rounds ``alpha * other`` and then the sum (``self_meta``/``other_meta``: the
    operands as PyTorch sees them, whose layout decides those elements); integers take the plain
    expression."""
    dtype = jnp.result_type(self, other)
    if jnp.issubdtype(dtype, jnp.complexfloating):
        return complex_math.add(jnp.asarray(self, dtype), jnp.asarray(other, dtype), alpha if sign == 1 else -alpha)
    default_alpha = isinstance(alpha, (int, float)) and alpha == 1
    if not (jnp.issubdtype(dtype, jnp.floating) and not default_alpha):
        return self + alpha * other if sign == 1 else self - alpha * other
    scaled = alpha if sign == 1 else -alpha
    fused = fused_multiply_add(other, scaled, self)
    if not isinstance(self_meta, torch.Tensor) or self_meta.numel() == 0:
        return fused
    result_dtype = torch.result_type(self_meta, other_meta)
    if result_dtype not in (torch.float16, torch.bfloat16):
        return fused
    rounded = c10_rounding(jax_dtype(result_dtype))
    one_by_one = rounded(self + rounded(scaled * other))
    if _strided_inner_loop(self_meta, other_meta):  # cpu_kernel_vec's basic loop: every element
        return jnp.broadcast_to(one_by_one, fused.shape)
    order = _one_dense_loop(self_meta, other_meta)
    if order is None:
        return fused
    in_memory = _cpu_scalar_tail(self_meta.numel()).reshape([self_meta.shape[d] for d in order])
    tail = jnp.transpose(in_memory, np.argsort(order)).reshape(fused.shape)
    return jnp.where(tail, one_by_one, fused)


def _strided_inner_loop(self_meta: torch.Tensor, other_meta: object) -> bool:
    """Whether TensorIterator's innermost dimension (``self``'s smallest stride among dimensions of
    more than one element) steps over elements of ``self`` or of a tensor ``other`` that is not
    broadcast along it (``x[::2]``): ``cpu_kernel_vec`` then runs its scalar lambda on every element."""
    dims = [d for d in range(self_meta.dim()) if self_meta.shape[d] > 1]
    if not dims:
        return False
    inner = min(dims, key=lambda d: (self_meta.stride(d), -d))
    if self_meta.stride(inner) != 1:
        return True
    if isinstance(other_meta, torch.Tensor) and other_meta.dim() > 0 and other_meta.shape == self_meta.shape:
        return other_meta.stride(inner) not in (0, 1)
    return False


def _one_dense_loop(self_meta: torch.Tensor, other_meta: object) -> tuple[int, ...] | None:
    """The dimensions of ``self``, outermost first in memory, where the CPU runs a binary op as one
    loop over every element in memory order (TensorIterator coalesces the dimensions of operands
    whose strides agree): ``self`` dense and non-overlapping (contiguous, channels-last, a
    transpose), ``other`` a number, a 0-dim tensor (TensorIterator's scalar operand) or a tensor of
    ``self``'s shape and strides. None for other layouts (broadcasts, gaps), which loop otherwise."""
    if isinstance(other_meta, torch.Tensor) and other_meta.dim() > 0:
        if other_meta.shape != self_meta.shape or other_meta.stride() != self_meta.stride():
            return None
    order = sorted(range(self_meta.dim()), key=lambda d: -self_meta.stride(d))
    expected = 1
    for d in reversed(order):
        if self_meta.shape[d] != 1 and self_meta.stride(d) != expected:
            return None
        expected *= self_meta.shape[d]
    return tuple(order)


#: ATen's grain of TensorIterator's loops: at::parallel_for splits fewer elements than this among
#: no threads (internal::GRAIN_SIZE).
_GRAIN_SIZE = 32768
#: Elements a 16-bit ``cpu_kernel_vec`` loop takes per vectorised step, measured on AVX-512 and AVX2
#: hosts alike (add with alpha, logit); not ``Vectorized<BFloat16>::size()``, which is 16 on AVX2.
_LOOP_STEP = 32


def _cpu_scalar_tail(numel: int) -> jax.Array:
    """Which elements of a contiguous 16-bit TensorIterator loop over ``numel`` elements the CPU's
    ``cpu_kernel_vec`` computes one by one (its scalar lambda) rather than in vectors:
    ``at::parallel_for`` gives each of min(threads, ceil(numel / 32768)) tasks ceil(numel / tasks)
    elements; a task runs whole vectorised steps and the rest of its range element by element
    (measured: float16 and bfloat16 add with alpha differ from the fused body exactly from position
    ``numel - numel % 32`` on AVX-512 and AVX2 hosts alike, :data:`_LOOP_STEP`). Computed from an
    iota, not held as a constant; the thread count is read when the call is compiled (part of its
    cache key)."""
    step = _LOOP_STEP
    tasks = max(min(cpu_thread_count(), -(-numel // _GRAIN_SIZE)), 1)
    chunk = -(-numel // tasks)
    index = jnp.int64 if numel >= 2**31 else jnp.int32
    position = jax.lax.iota(index, numel)
    start = position // chunk * chunk
    length = jnp.minimum(start + chunk, numel) - start
    return position - start >= length // step * step


def _sub_check(arguments: dict) -> None:
    """ATen's ``sub_check`` (BinaryOps.h; sub's structured meta, rsub through it), then
    ``alpha_check``: no bool operand. A Python number is a wrapped tensor of its own dtype there, so
    ``bool_tensor - 1`` raises too (PyTorch's Python meta kernel sees the number and lets it pass)."""
    bools = [
        isinstance(value, bool) or (isinstance(value, torch.Tensor) and value.dtype == torch.bool)
        for value in (arguments["self"], arguments["other"])
    ]
    if all(bools):
        raise RuntimeError(
            "Subtraction, the `-` operator, with two bool tensors is not supported. "
            "Use the `^` or `logical_xor()` operator instead."
        )
    if any(bools):
        raise RuntimeError(
            "Subtraction, the `-` operator, with a bool tensor is not supported. "
            "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead."
        )
    _alpha_check(arguments)


@lowering(
    aten.sub.Tensor,
    aten.sub.Scalar,
    promotion=Promotion.DEFAULT,
    promote=("self", "other"),
    negated_checked=("alpha",),
    checked_in_opmath=True,
    dtype_rule=_sub_check,
    metas=True,
)
def sub(self, other, alpha=1, *, metas):
    """torch.sub: self - alpha * other, which ATen computes as self + (-alpha) * other."""
    return _scaled_sum(self, other, alpha, metas[0], metas[1], -1)


@lowering(
    aten.rsub.Tensor,
    aten.rsub.Scalar,
    promotion=Promotion.DEFAULT,
    promote=("self", "other"),
    negated_checked=("alpha",),
    checked_in_opmath=True,
    dtype_rule=_sub_check,
    metas=True,
)
def rsub(self, other, alpha=1, *, metas):
    """torch.rsub: other - alpha * self, which ATen computes as other + (-alpha) * self."""
    return _scaled_sum(other, self, alpha, metas[1], metas[0], -1)


@lowering(aten.mul.Tensor, aten.mul.Scalar, promotion=Promotion.DEFAULT)
def mul(self, other):
    """torch.mul (bool: logical and; complex: as the CPU's vectorised kernel, :func:`complex_math.multiply`)."""
    if self.dtype == jnp.bool_:
        return jnp.logical_and(self, other)
    if jnp.issubdtype(jnp.result_type(self, other), jnp.complexfloating):
        dtype = jnp.result_type(self, other)
        return complex_math.multiply(jnp.asarray(self, dtype), jnp.asarray(other, dtype))
    if self is other:
        # x * x behind a barrier: XLA's algebraic simplifier folds sqrt(x * x) to |x|, where IEEE
        # arithmetic overflows (sqrt(1e20 * 1e20) is inf) or underflows (1e-30 gives 0).
        return jax.lax.optimization_barrier(self * other)
    return self * other


def true_divide(dividend, divisor):
    """``dividend / divisor`` rounded once per element, as PyTorch's kernels divide.

    XLA's algebraic simplifier rewrites a division by a broadcast value into a multiplication by its
    reciprocal, one more rounding: ``44 * (1 / 22)`` is 1.9999999 in float32, so ``floor(x / 22)``
    would be off by one. A broadcast divisor is therefore materialised behind an optimization
    barrier, which keeps the division a division. Complex numbers divide as c10 does
    (:func:`complex_math.divide`).
    """
    shape = jnp.broadcast_shapes(jnp.shape(dividend), jnp.shape(divisor))
    if jnp.shape(divisor) != shape:
        divisor = jax.lax.optimization_barrier(jnp.broadcast_to(divisor, shape))
    if jnp.issubdtype(jnp.result_type(dividend, divisor), jnp.complexfloating):
        dtype = jnp.result_type(dividend, divisor)
        return complex_math.divide(jnp.asarray(dividend, dtype), jnp.asarray(divisor, dtype))
    return jax.lax.optimization_barrier(dividend / divisor)


@lowering(aten.div.Tensor, aten.div.Scalar, promotion=Promotion.INT_TO_FLOAT)
def div(self, other):
    """torch.div: true division; integers divide as floats."""
    return true_divide(self, other)


def _integer_division_check(self, other) -> None:
    """Faults when an element is divided by zero; an empty result divides nothing (as on CPU)."""
    by_zero = jnp.broadcast_to(other == 0, jnp.broadcast_shapes(jnp.shape(self), jnp.shape(other)))
    device_check(jnp.any(by_zero), jnp.int64(0), "ZeroDivisionError", RuntimeError)


@lowering(
    aten.div.Tensor_mode, aten.div.Scalar_mode, promotion=Promotion.DEFAULT, static=("rounding_mode",), metas=True
)
def div_mode(self, other, *, rounding_mode, metas):
    """torch.div with rounding_mode None (true division), "trunc" or "floor".

    Integer division by zero is a device fault raising ``RuntimeError: ZeroDivisionError``, the
    error PyTorch's CPU kernels raise.
    """
    if rounding_mode is None:
        return true_divide(self, other)
    if jnp.issubdtype(self.dtype, jnp.integer):
        _integer_division_check(self, other)
        safe = jnp.where(other == 0, 1, other)
        if rounding_mode == "floor":
            return jnp.floor_divide(self, safe)
        # XLA's integer division truncates, as C's does (abs() of the smallest integer overflows).
        return jax.lax.div(*jnp.broadcast_arrays(self, safe.astype(self.dtype)))
    # The CPU's 16-bit kernel rounds each step (c10::BFloat16/Half arithmetic); by a single-element
    # divisor (a number, a 0-dim or one-element tensor: is_scalar(2)) it computes in float with the
    # divisor's own value and rounds once.
    by_tensor = isinstance(metas[1], torch.Tensor) and metas[1].numel() != 1
    step = c10_rounding(jax_dtype(torch.result_type(*metas[:2]))) if by_tensor else (lambda value: value)
    if rounding_mode == "floor":
        return _div_floor_floating(self, other, step)
    return jnp.trunc(step(true_divide(self, other)))


def _div_floor_floating(a: jax.Array, b: jax.Array, step: Callable[[jax.Array], jax.Array]) -> jax.Array:
    """c10's ``div_floor_floating`` (generic_math.h, the CPU's scalar and vector kernels and CUDA's):
    Python's floor division through ``fmod``, not floor(a / b), whose rounded quotient can reach the
    next integer (1 // 0.1 is 9, floor(1 / 0.1) 10) or flush to 0 (1e-30 // -1e10 is -1). ``step``
    rounds each arithmetic result, as the CPU's 16-bit kernel computes in c10::BFloat16/Half
    (:func:`.promotion.c10_rounding`; in float32 and rounded once, 0.8% of bfloat16 quotients
    differed by a unit of the last place); by a single-element divisor it computes in float and rounds
    once."""
    mod = step(jnp.fmod(a, b))
    div = step(true_divide(step(a - mod), b))
    div = jnp.where((mod != 0) & ((b < 0) != (mod < 0)), step(div - 1), div)
    floored = jnp.floor(div)
    floored = jnp.where(step(div - floored) > 0.5, step(floored + 1), floored)
    quotient = true_divide(a, b)
    result = jnp.where(div != 0, floored, jnp.copysign(jnp.zeros_like(floored), quotient))
    return jnp.where(b == 0, quotient, result)


@lowering(aten.floor_divide.default, aten.floor_divide.Scalar, promotion=Promotion.DEFAULT, metas=True)
def floor_divide(self, other, *, metas):
    """torch.floor_divide: rounds the quotient down (Python semantics)."""
    return div_mode(self, other, rounding_mode="floor", metas=metas)


@lowering(aten.remainder.Tensor, aten.remainder.Scalar, aten.remainder.Scalar_Tensor, promotion=Promotion.DEFAULT)
def remainder(self, other):
    """torch.remainder: Python modulus, the result takes the sign of the divisor."""
    if jnp.issubdtype(self.dtype, jnp.integer):
        _integer_division_check(self, other)
        return jnp.remainder(self, jnp.where(other == 0, 1, other))
    return jnp.remainder(self, other)


@lowering(aten.fmod.Tensor, aten.fmod.Scalar, promotion=Promotion.DEFAULT)
def fmod(self, other):
    """torch.fmod: C fmod, the result takes the sign of the dividend."""
    if jnp.issubdtype(self.dtype, jnp.integer):
        _integer_division_check(self, other)
        return jnp.fmod(self, jnp.where(other == 0, 1, other))
    return jnp.fmod(self, other)


def _integer_power(base, exponent):
    """``base ** exponent`` for integer arrays and a non-negative exponent, wrapping on overflow as
    PyTorch's powi does: exponentiation by squaring over every bit of the exponent's dtype. JAX's
    traced integer pow stops after 6 bits (it assumes overflow beyond), so 3 ** 300 in int32 came
    out 51933809 where PyTorch gives -597940623.

    A loop that stops once every exponent's remaining bits are zero (later steps would change
    nothing): unrolled over 64 bits, int64 ``2 ** x`` took 3 s to compile for each shape."""

    def remaining(state):
        return jnp.any(state[2] != 0)

    def step(state):
        result, square, exponent = state
        result = jnp.where((exponent & 1) == 1, result * square, result)
        return result, square * square, exponent >> 1

    exponent = jnp.broadcast_to(jnp.asarray(exponent), base.shape)
    return jax.lax.while_loop(remaining, step, (jnp.ones_like(base), base, exponent))[0]


@lowering(aten.pow.Tensor_Tensor, promotion=Promotion.BOOL_TO_LONG)
def pow(self, exponent):
    """torch.pow (bool promotes to int64, as PyTorch does). Integer powers wrap on overflow; a
    negative integer exponent gives 1 for base 1, -1 or 1 for base -1 (odd or even exponent) and 0
    for every other base, 0 included, as PyTorch's integer kernel (powi) computes it. Complex
    powers are glibc's cpow, as on the CPU (:func:`complex_math.power`)."""
    if jnp.issubdtype(self.dtype, jnp.complexfloating):
        return complex_math.power(self, exponent)
    if not jnp.issubdtype(self.dtype, jnp.integer):
        return jax.lax.optimization_barrier(jnp.power(self, exponent))
    self, exponent = jnp.broadcast_arrays(self, exponent)
    power = _integer_power(self, jnp.maximum(exponent, 0))
    if jnp.issubdtype(self.dtype, jnp.unsignedinteger):
        return power
    odd = (exponent & 1) == 1
    reciprocal = jnp.where(jnp.abs(self) == 1, jnp.where(odd, self, jnp.ones_like(self)), jnp.zeros_like(self))
    return jnp.where(exponent < 0, reciprocal, power)


@lowering(aten.pow.Scalar, promotion=Promotion.BOOL_TO_LONG)
def pow_scalar(self, exponent):
    """torch.pow(number, tensor): ATen's ``pow_out`` fills the result with 1 for a base of 1 (1 **
    (NaN + NaN i) is 1, where cpow gives NaN) and computes any other base as torch.pow."""
    return jnp.where(self == 1, jnp.ones_like(exponent), pow(self, exponent))


def _no_negative_integer_power(arguments: dict) -> None:
    """pow(tensor, number)'s check in ATen's structured meta (Pow.cpp), shared by CPU and CUDA and
    made at the call: an integer or bool tensor to a negative integer number raises. The exponent
    is a runtime scalar, so the eager runner repeats this before every launch."""
    self, exponent = arguments["self"], arguments["exponent"]
    integral = not (self.dtype.is_floating_point or self.dtype.is_complex)
    if integral and isinstance(exponent, int) and exponent < 0:
        raise RuntimeError("Integers to negative integer powers are not allowed.")


@lowering(
    aten.pow.Tensor_Scalar,
    promotion=Promotion.BOOL_TO_LONG,
    uncast=("exponent",),
    checked=("exponent",),
    dtype_rule=_no_negative_integer_power,
)
def pow_tensor_scalar(self, exponent):
    """torch.pow(tensor, number): as torch.pow. The exponent is converted to the result's dtype
    with c10's overflow check (``int8 ** 300`` raises, as on CPU and CUDA)."""
    if jnp.issubdtype(self.dtype, jnp.complexfloating):
        return _complex_pow_number(self, exponent)
    if jnp.issubdtype(self.dtype, jnp.floating):
        return _float_pow_number(self, exponent)
    return pow(self, exponent)


def _float_pow_number(self, exponent):
    """A real float tensor to a number as ATen's CPU kernel computes it (PowKernel.cpp): 0.5, -0.5
    and -1 as sqrt, rsqrt and the reciprocal (``(-0.) ** 0.5`` is -0., ``(-inf) ** 0.5`` NaN); 2, 3
    and -2 as products (``pow_tensor_scalar_optimized_kernel``: ``x ** 2`` is ``x * x``, rounded
    once, where XLA's pow of a runtime exponent was one ulp off in some elements and ``x ** 3``
    in a quarter of them) for float32 (16-bit types go through ``std::pow`` there);
    ``pow_out`` fills 1 for 0 and copies the base for 1."""
    square = self * self
    special = [
        (0.5, lambda: jnp.sqrt(self)),
        (-0.5, lambda: jax.lax.rsqrt(self)),
        (-1, lambda: 1 / self),
        (1, lambda: self),
        (0, lambda: jnp.ones_like(self)),
    ]
    if self.dtype == jnp.float32:
        special += [(2, lambda: square), (3, lambda: square * self), (-2, lambda: 1 / square)]
    if isinstance(exponent, (int, float)):  # a graph's constant: one case
        computed = dict(special).get(exponent)
        return jax.lax.optimization_barrier(computed()) if computed else pow(self, exponent)
    exponent = jnp.asarray(exponent)
    result = pow(self, exponent.astype(self.dtype))
    for value, computed in special:
        result = jnp.where(exponent == value, computed(), result)
    return jax.lax.optimization_barrier(result)


def _complex_pow_number(self, exponent):
    """A complex tensor to a number as ATen computes it: ``pow_out`` fills 1 for an exponent of 0 and
    copies the base for 1 (XLA's pow gave -2.5 - 2.2e-7i for (-2.5 + 1e-30i) ** 1, and NaN for
    (inf i) ** 1); its CPU kernel (``pow_tensor_scalar_kernel`` in PowKernel.cpp) computes 2 and 3 as
    products, 0.5 as sqrt, -0.5 as rsqrt, -1 as the reciprocal and -2 as the reciprocal of the
    square, and any other exponent through cpow (:func:`complex_math.power`), with sqrt, the
    reciprocal and the division as the CPU's (:mod:`complex_math`). XLA's complex pow goes
    through exp(log), which is off by up to 1.4e-6 in complex64 for ``x ** 2`` (and ``square``)."""
    exponent = jnp.asarray(exponent)
    square = self * self
    result = complex_math.power(self, exponent.astype(self.dtype))
    root = complex_math.sqrt(self)
    # One reciprocal serves -0.5, -1 and -2 (the exponent is a runtime scalar: every case computes).
    reciprocal = complex_math.reciprocal(jnp.where(exponent == -0.5, root, jnp.where(exponent == -1, self, square)))
    special = ((2, square), (3, square * self), (0.5, root), (-0.5, reciprocal), (-1, reciprocal), (-2, reciprocal))
    for value, computed in (*special, (1, self), (0, jnp.ones_like(self))):
        result = jnp.where(exponent == value, computed, result)
    return result


_BINARY_SAME: dict = {
    aten.maximum.default: jnp.maximum,  # NaN propagates
    aten.minimum.default: jnp.minimum,
    aten.fmax.default: jnp.fmax,  # NaN ignored
    aten.fmin.default: jnp.fmin,
    aten.logaddexp2.default: jnp.logaddexp2,
}
_register_all(_BINARY_SAME, Promotion.DEFAULT, {aten.logaddexp2.default: floating_result("logaddexp2_cuda")})


@lowering(aten.nextafter.default, promotion=Promotion.NO_OPMATH)
def nextafter(self, other):
    """torch.nextafter: the next representable value after self towards other, stepping in the
    result dtype (a bfloat16 ulp for bfloat16, so no float32 opmath)."""
    return jnp.nextafter(self, other)


_heaviside_same_dtype = same_dtype(
    ("self", "values"), "heaviside is not yet implemented for tensors with different dtypes."
)


def _heaviside_check(arguments: dict) -> None:
    """heaviside's structured meta (BinaryOps.cpp, CPU and CUDA alike), in its order: no complex
    operand, then one dtype."""
    if any(isinstance(v, torch.Tensor) and v.dtype.is_complex for v in (arguments["self"], arguments["values"])):
        raise RuntimeError("heaviside is not yet implemented for complex tensors.")
    _heaviside_same_dtype(arguments)


@lowering(aten.heaviside.default, promotion=Promotion.DEFAULT, dtype_rule=_heaviside_check)
def heaviside(self, values):
    """torch.heaviside: values where self == 0, else (self > 0); NaN gives 0, as PyTorch computes it."""
    return jnp.where(self == 0, values, (self > 0).astype(self.dtype))


_BINARY_FLOAT: dict = {
    aten.atan2.default: jnp.arctan2,
    aten.hypot.default: jnp.hypot,
    aten.copysign.Tensor: jnp.copysign,
    aten.copysign.Scalar: jnp.copysign,
}
_register_all(_BINARY_FLOAT, Promotion.INT_TO_FLOAT)


@lowering(
    aten.xlogy.Tensor, aten.xlogy.Scalar_Self, aten.xlogy.Scalar_Other, promotion=Promotion.INT_TO_FLOAT, metas=True
)
def xlogy(self, other, *, metas):
    """torch.xlogy: self * log(other), 0 where self is 0, NaN where other is NaN. A 16-bit result
    rounds log(other) to its dtype before the product, as the CPU's kernel computes in
    c10::BFloat16/Half (in float32 once, 13% of bfloat16 results differed by an ulp)."""
    dtype = jax_dtype(torch.result_type(*metas[:2]))
    if dtype not in (jnp.bfloat16, jnp.float16):
        return jsp.xlogy(self, other)  # its log is the CPU's to the bit in float32; inlined, not always
    product = self * c10_rounding(dtype)(jnp.log(other))
    return jnp.where(jnp.isnan(other), jnp.nan, jnp.where(self == 0, 0.0, product)).astype(product.dtype)


def _bitwise(fn: Callable, logical: Callable) -> Callable:
    return lambda self, other: logical(self, other) if self.dtype == jnp.bool_ else fn(self, other)


#: op -> (lowering, CUDA's kernel name). The Scalar_Tensor overloads (``torch.bitwise_and(3, x)``,
#: ``3 << x``) have lowerings of their own: their composite kernels wrap the scalar in a 0-dim CPU
#: tensor, which the eager layer's meta call cannot pass back to a Tensor argument.
_BITWISE_KERNELS: dict = {
    **{
        overload: (_bitwise(fn, logical), f"{packet.__name__}_cuda")
        for packet, fn, logical in (
            (aten.bitwise_and, jnp.bitwise_and, jnp.logical_and),
            (aten.bitwise_or, jnp.bitwise_or, jnp.logical_or),
            (aten.bitwise_xor, jnp.bitwise_xor, jnp.logical_xor),
        )
        for overload in (packet.Tensor, packet.Scalar, packet.Scalar_Tensor)
    },
    **{
        overload: (shift, kernel)
        for packet, shift, kernel in (
            (aten.bitwise_left_shift, jnp.left_shift, "lshift_cuda"),
            (aten.bitwise_right_shift, jnp.right_shift, "rshift_cuda"),
        )
        for overload in (packet.Tensor, packet.Tensor_Scalar, packet.Scalar_Tensor)
    },
}
_register_all(
    {op: fn for op, (fn, _) in _BITWISE_KERNELS.items()},
    Promotion.DEFAULT,
    {
        op: _integral_only(
            kernel, bool_too=not kernel.endswith("shift_cuda"), unsigned_too=not kernel.endswith("shift_cuda")
        )
        for op, (_, kernel) in _BITWISE_KERNELS.items()
    },
)

_COMPARISONS: dict = {
    aten.eq.Tensor: jnp.equal,
    aten.eq.Scalar: jnp.equal,
    aten.ne.Tensor: jnp.not_equal,
    aten.ne.Scalar: jnp.not_equal,
    aten.lt.Tensor: jnp.less,
    aten.lt.Scalar: jnp.less,
    aten.le.Tensor: jnp.less_equal,
    aten.le.Scalar: jnp.less_equal,
    aten.gt.Tensor: jnp.greater,
    aten.gt.Scalar: jnp.greater,
    aten.ge.Tensor: jnp.greater_equal,
    aten.ge.Scalar: jnp.greater_equal,
    aten.logical_and.default: jnp.logical_and,
    aten.logical_or.default: jnp.logical_or,
    aten.logical_xor.default: jnp.logical_xor,
}
#: AT_DISPATCH_ALL_TYPES_AND3(Half, BFloat16, Bool): the dtypes CUDA's ordered comparisons take
#: (CompareKernels.cu, "compare_cuda"); complex numbers have no order, and uint16/32/64 no kernel.
_ORDERED_DTYPES = frozenset(
    {torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64}
    | {torch.float16, torch.bfloat16, torch.float32, torch.float64}
)


def _ordered(arguments: dict) -> None:
    """The ``dtype_rule`` of lt, le, gt and ge: their common dtype is one CUDA's kernel dispatches,
    else its NotImplementedError (the CPU refuses the same dtypes as "lt_cpu" and so on)."""
    dtype = torch.result_type(arguments["self"], arguments["other"])
    if dtype not in _ORDERED_DTYPES:
        raise NotImplementedError(f"\"compare_cuda\" not implemented for '{aten_name(dtype)}'")


_register_all(
    _COMPARISONS,
    Promotion.ALWAYS_BOOL,
    {op: _ordered for op in _COMPARISONS if op.overloadpacket in (aten.lt, aten.le, aten.gt, aten.ge)},
)


# --- ternary ----------------------------------------------------------------------------------


@lowering(aten.where.self, promotion=Promotion.DEFAULT, promote=("self", "other"))
def where(condition, self, other):
    """torch.where(condition, self, other); broadcasts all three."""
    return jnp.where(condition, self, other)


@lowering(torch.ops.prims.where.default)
def prims_where(pred, a, b):
    """prims.where, from PyTorch's reference decompositions (``_prelu_kernel_backward``'s): no
    promotion, the references have promoted ``a`` and ``b``; either may be a Python number."""
    return jnp.where(pred, a, b)


@lowering(
    aten.clamp.default, aten.clamp.Tensor, promotion=Promotion.DEFAULT, checked=("min", "max"), checked_in_opmath=True
)
def clamp(self, min=None, max=None):
    """torch.clamp: min(max(self, min), max); NaN propagates; min > max gives max everywhere."""
    if min is not None:
        self = jnp.maximum(self, min)
    if max is not None:
        self = jnp.minimum(self, max)
    return self


@lowering(
    aten.clamp_min.default, aten.clamp_min.Tensor, promotion=Promotion.DEFAULT, checked=("min",), checked_in_opmath=True
)
def clamp_min(self, min):
    return jnp.maximum(self, min)


@lowering(
    aten.clamp_max.default, aten.clamp_max.Tensor, promotion=Promotion.DEFAULT, checked=("max",), checked_in_opmath=True
)
def clamp_max(self, max):
    return jnp.minimum(self, max)


@lowering(aten.lerp.Scalar, aten.lerp.Tensor, promotion=Promotion.DEFAULT, checked=("weight",), checked_in_opmath=True)
def lerp(self, end, weight):
    """torch.lerp: self + weight * (end - self), computed as ATen's kernels do for accuracy (from
    ``end`` when |weight| >= 0.5), one fused multiply-add each, as their ``vec::fmadd``."""
    difference = end - self
    from_self = fused_multiply_add(weight, difference, self)
    from_end = fused_multiply_add(weight - 1, difference, end)
    return jnp.where(jnp.abs(weight) < 0.5, from_self, from_end)


@lowering(
    aten.addcmul.default,
    promotion=Promotion.DEFAULT,
    promote=("self", "tensor1", "tensor2"),
    checked=("value",),
    checked_in_opmath=True,
)
def addcmul(self, tensor1, tensor2, *, value=1):
    """torch.addcmul: self + value * tensor1 * tensor2. ``value`` takes no part in promotion: an
    integer computation uses it converted to its dtype (2.5 -> 2), as ATen's kernel does. Floats
    round ``value * tensor1`` and then add its product with ``tensor2`` in one fused multiply-add,
    as the compiler contracts ATen's vectorized ``self + value * t1 * t2``."""
    if jnp.issubdtype(self.dtype, jnp.integer):
        value = jnp.asarray(value).astype(self.dtype)
    return fused_multiply_add(value * tensor1, tensor2, self)


@lowering(
    aten.addcdiv.default,
    promotion=Promotion.DEFAULT,
    promote=("self", "tensor1", "tensor2"),
    checked=("value",),
    checked_in_opmath=True,
)
def addcdiv(self, tensor1, tensor2, *, value=1):
    """torch.addcdiv: self + value * tensor1 / tensor2 (PyTorch rejects integer division here), in
    the CPU kernel's order: ``(value * tensor1) / tensor2``, then the sum."""
    return self + true_divide(value * tensor1, tensor2)


def register_prims_fma() -> None:
    """Registers the lowering of ``prims.fma`` (torch/_inductor/inductor_prims.py) once the op
    exists: Dynamo imports it when it traces, and puts it in graphs for ``Tensor.add_(other,
    alpha=tensor)``. The neuron backend calls this before it compiles a graph."""
    op = getattr(getattr(torch.ops.prims, "fma", None), "default", None)
    if op is not None and op not in registry.LOWERINGS:
        lowering(op, promotion=Promotion.DEFAULT, result_dtype=True)(prims_fma)


def prims_fma(a, b, c, *, result_dtype):
    """prims.fma: ``a * b + c`` rounded once, as ATen's ``add_`` with a tensor alpha computes it
    (``vec::fmadd(other, alpha, self)``), which Dynamo rewrites into this op. The operands are held
    in the result's dtype first, as that kernel holds the alpha it reads from a float32 tensor
    (``Vectorized<BFloat16>``: 0.37 is 0.369140625)."""
    return fused_multiply_add(*(jnp.asarray(x).astype(result_dtype) for x in (a, b, c)))
