"""Random ops, from the per-core generator's (seed, offset) (decision 11).

Values follow each op's distribution, drawn with JAX's counter-based PRNG keyed by the generator's
state, so they are reproducible under ``torch.manual_seed`` but differ from the CPU's mt19937 stream
(as CUDA's Philox stream differs). Each lowering receives one PRNG key, ``rng_key`` (``random=True``); the eager
kernel advances the generator's offset by the number of elements the op produces.

Floating-point samples are drawn in float32 (16-bit outputs round once at the end, as the CPU's
kernels compute in float for them); uniform samples lie on the CPU's grid of multiples of 2**-24.
Parameter checks PyTorch makes on the host raise the same errors: at trace time for static
arguments, at the next synchronisation for runtime scalars and tensors (device checks).
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import torch

from torch_neuronx._compat.aten_checks import stream_text
from torch_neuronx._compat.torch_internals import infer_size
from torch_neuronx.lowering.registry import ScalarCheck, lowering
from torch_neuronx.runtime.dtypes import JAX_DTYPE, TORCH_DTYPE, TYPE_META_NAMES, aten_name, convert
from torch_neuronx.runtime.tracing import active_context, device_check

aten = torch.ops.aten


def _sample_dtype(dtype) -> jnp.dtype:
    """The dtype samples are drawn in: float32 for 16-bit floats and integer outputs."""
    return jnp.float32 if dtype in (jnp.bfloat16, jnp.float16) or not jnp.issubdtype(dtype, jnp.inexact) else dtype


def flat(shape: tuple[int, ...], draw: Callable[[tuple[int]], jax.Array]) -> jax.Array:
    """``draw((n,))`` reshaped to ``shape`` of n elements: the values ``draw(shape)`` gives (threefry
    counts elements in row-major order; parameter arrays are flattened alike), in an executable
    that compiles in a time that does not grow with the rank: XLA's CPU compile of threefry does
    (normal_ of a 7-d tensor of 181,440 elements, 3-5 s; drawn flat, 0.3 s)."""
    return draw((math.prod(shape),)).reshape(shape)


def _uniform(rng_key, shape) -> jax.Array:
    """U[0, 1) in float32 as PyTorch's uniform_real draws it for float: k / 2**24, k uniform in [0, 2**24)."""
    bits = flat(shape, lambda n: jax.random.bits(rng_key, n, jnp.uint32))
    return (bits >> 8).astype(jnp.float32) * np.float32(2.0**-24)


def _scalar(value, dtype) -> jax.Array:
    """A runtime scalar (0-d array, or Python number) in the sample dtype."""
    return jnp.asarray(value).astype(dtype)


# --- the dtypes CUDA's kernels take ---------------------------------------------------------------
#
# Each random op refuses the dtypes its CUDA kernel does not dispatch, with CUDA's exception and
# message (ATen's DistributionTemplates.h and cuda/DistributionTemplates.h, torch 2.13), as its
# lowering's ``dtype_rule``. The Python meta kernels of some (torch/_refs: exponential, cauchy,
# log_normal, geometric) refuse a dtype first in their own words; eager/errors.py then raises the
# rule's error instead.

#: AT_DISPATCH_FLOATING_TYPES_AND2(Half, BFloat16): float8 and complex tensors are refused.
_FLOATING = frozenset((torch.float32, torch.float64, torch.float16, torch.bfloat16))
#: AT_DISPATCH_FLOATING_TYPES: float32 and float64 only.
_FLOATING_ONLY = frozenset((torch.float32, torch.float64))
#: AT_DISPATCH_ALL_TYPES_AND2(Half, BFloat16): no bool, uint16/32/64, float8 or complex.
_ALL_TYPES = _FLOATING | {torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64}
#: AT_DISPATCH_ALL_TYPES_AND3(Half, BFloat16, Bool).
_ALL_TYPES_AND_BOOL = _ALL_TYPES | {torch.bool}


def _check_dispatched(kernel: str, dtype: torch.dtype, dtypes: frozenset[torch.dtype]) -> None:
    """CUDA's AT_DISPATCH of ``kernel`` over ``dtypes``: NotImplementedError for any other dtype."""
    if dtype not in dtypes:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{aten_name(dtype)}'")


def _dispatched(kernel: str, dtypes: frozenset[torch.dtype]) -> Callable[[dict[str, Any]], None]:
    """A ``dtype_rule``: ``self``'s dtype is one CUDA's ``kernel`` dispatches (see _check_dispatched)."""
    return lambda arguments: _check_dispatched(kernel, arguments["self"].dtype, dtypes)


def _continuous(name: str, kernel: str, type_meta: bool = False) -> Callable[[dict[str, Any]], None]:
    """A ``dtype_rule``: ATen's "{name} distribution is a continuous probability distribution"
    RuntimeError for a non-floating ``self`` (its dtype as a ScalarType, or with ``type_meta`` as
    the TypeMeta cauchy_ prints), then CUDA's dispatch of ``kernel`` (which refuses float8)."""

    def rule(arguments: dict[str, Any]) -> None:
        dtype = arguments["self"].dtype
        if not dtype.is_floating_point:
            shown = TYPE_META_NAMES[dtype] if type_meta else aten_name(dtype)
            raise RuntimeError(
                f"{name} distribution is a continuous probability distribution. "
                f"dtype must be a floating point but you specified {shown}"
            )
        if arguments["self"].numel():  # CHECK_EMPTY_AND_RETURN comes before the kernel's dispatch
            _check_dispatched(kernel, dtype, _FLOATING)

    return rule


def _real_view_dispatched(
    kernel: str, name: str = "self", *, empty_returns_first: bool = False
) -> Callable[[dict[str, Any]], None]:
    """A ``dtype_rule`` of uniform_ and normal_ (``uniform_impl_``, ``normal_impl_``): a complex
    tensor (argument ``name``; torch.normal's result takes that argument's dtype) draws into its real
    view; any other dtype is CUDA's dispatch of ``kernel`` over the floating dtypes. With
    ``empty_returns_first`` (normal_impl_; uniform_impl_ dispatches its bounds check first), an
    empty result is returned before that dispatch."""

    def rule(arguments: dict[str, Any]) -> None:
        dtype = arguments[name].dtype
        if dtype.is_complex or (empty_returns_first and _result_is_empty(arguments)):
            return
        _check_dispatched(kernel, dtype, _FLOATING)

    return rule


def _result_is_empty(arguments: dict[str, Any]) -> bool:
    """Whether a sampler's result is empty: ``self`` (in place), or torch.normal's broadcast of
    ``mean`` and ``std``. ATen's samplers return an empty result before their kernel dispatches its
    dtype (``CHECK_EMPTY_AND_RETURN``, CPU and CUDA alike), so that
    ``torch.normal(torch.empty(0, dtype=torch.int8), 1.0)`` is an empty int8 tensor."""
    tensors = [value for value in arguments.values() if isinstance(value, torch.Tensor)]
    return any(tensor.numel() == 0 for tensor in tensors)


# --- continuous distributions ------------------------------------------------------------------


def _check_uniform_bounds(from_: float, to: float, dtype: torch.dtype) -> None:
    """ATen's uniform_ checks (``uniform_impl_``, the same on CPU and CUDA) for a tensor of the
    floating ``dtype``: both bounds within its range, from <= to, and to - from within its range."""
    info = torch.finfo(dtype)
    for value, name in ((from_, "from"), (to, "to")):
        if not info.min <= value <= info.max:
            raise RuntimeError(f"{name} is out of bounds for {TYPE_META_NAMES[dtype]}")
    if from_ > to:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found from={from_:g} > to={to:g}")
    if to - from_ > info.max:
        raise RuntimeError(
            f"uniform_ expects to-from <= std::numeric_limits<{aten_name(dtype)}>::max(), but found to={to:g} "
            f"and from={from_:g} which result in to-from to exceed the limit"
        )


def _uniform_in(rng_key, shape, from_: float, to: float, dtype) -> jax.Array:
    """U[from, to) in the real ``dtype`` as CPU and CUDA compute it: the bounds rounded to ``dtype``,
    U[0, 1) * (to - from) + from in float32 (for 16-bit dtypes too), rounded to ``dtype``; a value
    that rounds up to ``to`` becomes ``from`` (CUDA's uniform kernel maps, rounds and then checks the
    upper bound), so every result lies in [from, to)."""
    low, high = _scalar(from_, dtype), _scalar(to, dtype)
    sample = _sample_dtype(dtype)
    value = (_uniform(rng_key, shape) * (high.astype(sample) - low.astype(sample)) + low.astype(sample)).astype(dtype)
    return jnp.where(value == high, low, value)


@lowering(
    aten.uniform.default,
    random=True,
    static=("from", "to"),
    metas=True,
    dtype_rule=_real_view_dispatched("check_uniform_bounds"),
)
def uniform(self, from_=0.0, to=1.0, *, generator=None, rng_key, metas):
    """torch.Tensor.uniform_ (and torch.rand, rand_like): samples in [from, to) of ``self``'s dtype
    (see :func:`_uniform_in`). A complex tensor draws its real and imaginary parts each in
    [from, to), as ATen draws into ``view_as_real(self)``; complex32's parts are float16 samples, so
    they stay below ``to`` after the float16 rounding. The bounds are part of the executable (calls
    use few distinct ones: nn.init's per layer), so ATen's bounds checks raise at the call with its
    messages; integer tensors are rejected as on CPU and CUDA."""
    dtype = metas[0].dtype
    if dtype.is_complex:
        if self.size == 0:  # uniform_impl_ returns an empty complex tensor before the bounds checks
            return self
        part = torch.float16 if dtype == torch.complex32 else torch.float32
        _check_uniform_bounds(from_, to, part)
        parts = _uniform_in(rng_key, (*self.shape, 2), from_, to, JAX_DTYPE[part]).astype(jnp.float32)
        return jax.lax.complex(parts[..., 0], parts[..., 1])
    _check_uniform_bounds(from_, to, dtype)
    return _uniform_in(rng_key, self.shape, from_, to, self.dtype)


#: ATen's checks of the samplers' Scalar arguments (DistributionTemplates.h, CPU and CUDA alike):
#: made on each call's value in double precision (a float32 check refused lambda=1e-50).
_NORMAL_STD = ScalarCheck("std", lambda std: std >= 0, "normal expects std >= 0.0, but found std {double}")
_EXPONENTIAL_LAMBDA = ScalarCheck(
    "lambd", lambda lambd: lambd > 0, "exponential_ expects lambda > 0.0, but found lambda={double}"
)
_LOG_NORMAL_STD = ScalarCheck("std", lambda std: std > 0, "log_normal_ expects std > 0.0, but found std={double}")
_CAUCHY_SIGMA = ScalarCheck("sigma", lambda sigma: sigma > 0, "cauchy_ expects sigma > 0.0, but found sigma={double}")
_GEOMETRIC_P = ScalarCheck("p", lambda p: (p > 0) & (p < 1), "geometric_ expects p to be in (0, 1), but got p={double}")


@lowering(
    aten.normal_functional.default,
    aten.normal_.default,
    random=True,
    dtype_rule=_real_view_dispatched("normal_kernel_cuda", empty_returns_first=True),
    scalar_checks=(_NORMAL_STD,),
)
def normal(self, mean=0.0, std=1.0, *, generator=None, rng_key):
    """torch.Tensor.normal_ (and torch.randn): N(mean, std**2). A complex tensor's real and
    imaginary parts are each N(mean, std**2 / 2), as ATen draws into ``view_as_real(self)`` with
    std / sqrt(2): both parts are shifted by ``mean``. std < 0 raises as on CPU."""
    dtype = _sample_dtype(self.dtype)
    real = jnp.finfo(dtype).dtype
    std = _scalar(std, real)
    mean = _scalar(mean, real)
    if jnp.issubdtype(dtype, jnp.complexfloating):
        mean = jax.lax.complex(mean, mean)
    return mean + std * flat(self.shape, lambda n: jax.random.normal(rng_key, n, dtype))


def _check_tensor_std(std: jax.Array) -> None:
    """ATen's ``CHECK_NORMAL_TENSOR_STD`` (CPU and CUDA): ``std.min().ge(0).item()``, read back at the
    call (a NaN fails it too, where ``any(std < 0)`` passed it)."""
    if std.size:
        device_check(~(jnp.min(std) >= 0), 0, "normal expects all elements of std >= 0.0", synchronous=True)


def _normal_tensors(mean, std, shape, rng_key):
    if math.prod(shape) == 0:  # normal_impl_ returns an empty result before its kernel, in any dtype
        return jnp.zeros(shape, jnp.float32)
    dtype = jnp.result_type(_sample_dtype(jnp.asarray(mean).dtype), _sample_dtype(jnp.asarray(std).dtype))
    return mean.astype(dtype) + std.astype(dtype) * flat(shape, lambda n: jax.random.normal(rng_key, n, dtype))


#: CUDA's dispatch of a normal sample that takes the mean's dtype.
_normal_of_mean_dispatched = _real_view_dispatched("normal_kernel_cuda", "mean", empty_returns_first=True)


@lowering(
    aten.normal.Tensor_float,
    random=True,
    dtype_rule=_normal_of_mean_dispatched,
    scalar_checks=(_NORMAL_STD,),
)
def normal_tensor_float(mean, std=1.0, *, generator=None, rng_key):
    """torch.normal(mean: Tensor, std: float): one sample per element of ``mean``."""
    return _normal_tensors(mean, jnp.asarray(std), mean.shape, rng_key)


@lowering(
    aten.normal.float_Tensor,
    random=True,
    dtype_rule=_real_view_dispatched("normal_kernel_cuda", "std", empty_returns_first=True),
    checked=("mean",),
)
def normal_float_tensor(mean, std, *, generator=None, rng_key):
    """torch.normal(mean: float, std: Tensor): one sample per element of ``std``. ATen makes
    ``mean`` a tensor of std's dtype with ``at::full``, whose conversion is checked: a mean that
    overflows the dtype raises c10's error (CUDA in every dtype; the CPU's 16-bit fill does not)."""
    _check_tensor_std(std)
    return _normal_tensors(jnp.asarray(mean), std, std.shape, rng_key)


def _normal_of_tensors_dtypes(arguments: dict[str, Any]) -> None:
    """torch.normal(mean, std)'s ``normal_impl``: the broadcast of the two shapes, with ATen's
    ``infer_size`` error (PyTorch's meta kernel words it otherwise); the result takes mean's dtype;
    an empty one returns from the sampler before its dtype dispatch and is then multiplied by
    ``std`` in place, which refuses a dtype it cannot cast to (an int8 mean with a float std)."""
    mean, std = arguments["mean"], arguments["std"]
    infer_size(mean.shape, std.shape)
    _normal_of_mean_dispatched(arguments)
    if std.is_complex():  # CHECK_NORMAL_TENSOR_STD refuses it first, in the lowering
        return
    result = torch.result_type(torch.empty(0, dtype=mean.dtype), std)
    if not torch.can_cast(result, mean.dtype):
        raise RuntimeError(
            f"result type {aten_name(result)} can't be cast to the desired output type {aten_name(mean.dtype)}"
        )


@lowering(aten.normal.Tensor_Tensor, random=True, dtype_rule=_normal_of_tensors_dtypes, rule_first=True)
def normal_tensor_tensor(mean, std, *, generator=None, rng_key):
    """torch.normal(mean: Tensor, std: Tensor): one sample per element of their broadcast shape."""
    _check_tensor_std(std)
    return _normal_tensors(mean, std, jnp.broadcast_shapes(mean.shape, std.shape), rng_key)


@lowering(
    aten.exponential.default,
    random=True,
    dtype_rule=_continuous("Exponential", "exponential_cuda"),
    scalar_checks=(_EXPONENTIAL_LAMBDA,),
)
def exponential(self, lambd=1.0, *, generator=None, rng_key):
    """torch.Tensor.exponential_: -log(1 - U) / lambd, in [0, inf); lambd <= 0 raises as on CPU."""
    dtype = _sample_dtype(self.dtype)
    rate = _scalar(lambd, dtype)
    return -jnp.log1p(-_uniform(rng_key, self.shape)) / rate


@lowering(
    aten.log_normal.default,
    random=True,
    dtype_rule=_dispatched("log_normal_cuda", _FLOATING),
    scalar_checks=(_LOG_NORMAL_STD,),
)
def log_normal(self, mean=1.0, std=2.0, *, generator=None, rng_key):
    """torch.Tensor.log_normal_: exp(N(mean, std**2)); std <= 0 raises as on CPU."""
    dtype = _sample_dtype(self.dtype)
    mean, std = _scalar(mean, dtype), _scalar(std, dtype)
    return jnp.exp(mean + std * flat(self.shape, lambda n: jax.random.normal(rng_key, n, dtype)))


@lowering(
    aten.cauchy.default,
    random=True,
    dtype_rule=_continuous("Cauchy", "cauchy_cuda", type_meta=True),
    scalar_checks=(_CAUCHY_SIGMA,),
)
def cauchy(self, median=0.0, sigma=1.0, *, generator=None, rng_key):
    """torch.Tensor.cauchy_: median + sigma * tan(pi * (U - 1/2)); sigma <= 0 raises as on CPU."""
    if self.size == 0:  # cauchy_impl_ returns an empty self before its kernel, float8 included
        return self
    dtype = _sample_dtype(self.dtype)
    median, sigma = _scalar(median, dtype), _scalar(sigma, dtype)
    return median + sigma * jnp.tan(jnp.pi * (_uniform(rng_key, self.shape) - 0.5))


# --- discrete distributions ----------------------------------------------------------------------


def _rrelu_dtypes(arguments: dict[str, Any]) -> None:
    """CUDA's rrelu_with_noise: training dispatches ``rrelu_with_noise_out_cuda``, evaluation is a
    leaky ReLU (``leaky_relu_cuda``), both over the floating dtypes."""
    kernel = "rrelu_with_noise_out_cuda" if arguments["training"] else "leaky_relu_cuda"
    _check_dispatched(kernel, arguments["self"].dtype, _FLOATING)


@lowering(aten.rrelu_with_noise_functional.default, random=True, static=("lower", "upper"), dtype_rule=_rrelu_dtypes)
def rrelu_with_noise_functional(self, noise, lower=0.125, upper=1.0 / 3.0, training=False, generator=None, *, rng_key):
    """F.rrelu (randomized leaky ReLU, Xu et al. 2015), returning (output, noise).

    Training: each element ``x <= 0`` is scaled by ``r ~ U[lower, upper)`` drawn in float32 (the
    product rounds once to ``self``'s dtype, as CUDA's kernel computes in its accumulate type) and
    ``noise`` records ``r``, elsewhere 1 (what the backward multiplies by). Evaluation: a leaky ReLU
    of slope ``(lower + upper) / 2``, ``noise`` unchanged. Checks and errors are the CPU kernel's,
    dtype refusals CUDA's."""
    if tuple(noise.shape) != tuple(self.shape):
        raise RuntimeError(
            "noise tensor shape must match self tensor shape. "
            f"Got self.shape = {list(self.shape)} noise.shape = {list(noise.shape)}"
        )
    if not training:
        slope = _scalar((lower + upper) / 2, _sample_dtype(self.dtype))
        scaled = (self.astype(slope.dtype) * slope).astype(self.dtype)
        return jnp.where(self > 0, self, scaled), noise
    if lower > upper:
        raise RuntimeError("Expected from <= to to be true, but got false.")
    dtype = _sample_dtype(self.dtype)
    low, high = _scalar(lower, dtype), _scalar(upper, dtype)
    slopes = _uniform(rng_key, self.shape) * (high - low) + low
    negative = self <= 0
    output = jnp.where(negative, (self.astype(dtype) * slopes).astype(self.dtype), self)
    return output, jnp.where(negative, slopes, 1).astype(noise.dtype)


def _bernoulli(rng_key, shape, p) -> jax.Array:
    """1 with probability ``p`` (broadcast to ``shape``), else 0, as bool."""
    return _uniform(rng_key, shape) < p.astype(jnp.float32)


def _check_p_range(p: float) -> None:
    if not 0 <= p <= 1:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={stream_text(p)}")


def _check_bernoulli_p(arguments: dict[str, Any]) -> None:
    """``bernoulli_impl_(self, double p)``'s order: p in [0, 1], an empty ``self`` returned, then
    CUDA's dispatch of ``self``'s dtype (uint16 with p = 1.5 named the dtype)."""
    _check_p_range(arguments["p"])
    if arguments["self"].numel():
        _check_dispatched("bernoulli_scalar_cuda_", arguments["self"].dtype, _ALL_TYPES_AND_BOOL)


@lowering(
    aten.bernoulli.p,
    aten.bernoulli_.float,
    random=True,
    static=("p",),
    dtype_rule=_check_bernoulli_p,
)
def bernoulli_p(self, p=0.5, *, generator=None, rng_key):
    """torch.bernoulli(input, p) and Tensor.bernoulli_(p): 0/1 in ``self``'s dtype, 1 with probability
    ``p``. ``p`` is a compile-time constant, so that ATen's host check of it (``bernoulli_impl_``,
    CPU and CUDA alike) raises at the call: outside [0, 1] or NaN (:func:`_check_bernoulli_p`). Then,
    as there, an empty ``self`` returns as it is, whatever its dtype."""
    _check_p_range(p)  # a compiled graph's call, which makes no dtype rule's checks
    if self.size == 0:
        return self
    return _bernoulli(rng_key, self.shape, jnp.asarray(p))


def _outside_unit_interval(p: jax.Array) -> jax.Array:
    """Whether any probability is outside [0, 1], NaN included."""
    return jnp.any(~((p >= 0) & (p <= 1)))


def _bernoulli_tensor_dtypes(arguments: dict[str, Any]) -> None:
    """CUDA's bernoulli_kernel(self, p): floating probabilities, then its dispatch of ``self``."""
    if arguments["self"].numel() == 0:  # bernoulli_impl_ returns an empty self before any check
        return
    p = arguments.get("p", arguments["self"])
    if not p.dtype.is_floating_point:
        raise RuntimeError(f"expected probabilities tensor to have floating type, got {aten_name(p.dtype)}")
    try:  # expand_inplace(self, p): ATen's expand errors (a p of 2 beside a self of 3 raised JAX's)
        torch.empty(p.shape, device="meta").expand(arguments["self"].shape)
    except RuntimeError as error:
        raise RuntimeError(re.sub(r"Meta(\w+)Type", r"torch.neuron.\1Tensor", str(error))) from None
    _check_dispatched("bernoulli_tensor_cuda_self_", arguments["self"].dtype, _ALL_TYPES_AND_BOOL)


@lowering(aten.bernoulli.Tensor, random=True, dtype_rule=_bernoulli_tensor_dtypes)
def bernoulli_tensor(self, p, *, generator=None, rng_key):
    """Tensor.bernoulli_(p: Tensor): 1 with probability p (broadcast to ``self``), in ``self``'s dtype.
    An empty ``self`` returns before ``p`` is read, as ``bernoulli_impl_`` does (its values were
    checked, and faulted at the next synchronisation)."""
    if self.size == 0:
        return self
    device_check(_outside_unit_interval(p), 0, "Expected p_in >= 0 && p_in <= 1 to be true, but got false.")
    return _bernoulli(rng_key, self.shape, jnp.broadcast_to(p, self.shape))


@lowering(aten.bernoulli.default, random=True, dtype_rule=_bernoulli_tensor_dtypes)
def bernoulli(self, *, generator=None, rng_key):
    """torch.bernoulli(input): 1 with probability input[i], in ``input``'s dtype."""
    if self.size == 0:
        return self
    device_check(_outside_unit_interval(self), 0, "Expected p_in >= 0 && p_in <= 1 to be true, but got false.")
    return _bernoulli(rng_key, self.shape, self)


@lowering(
    aten.geometric.default,
    random=True,
    dtype_rule=_dispatched("geometric_cuda", _ALL_TYPES),
    scalar_checks=(_GEOMETRIC_P,),
)
def geometric(self, p, *, generator=None, rng_key):
    """torch.Tensor.geometric_: trials until the first success, ceil(log(1 - U) / log(1 - p)) >= 1;
    p outside (0, 1) raises as on CPU."""
    p = _scalar(p, jnp.float32)
    trials = jnp.ceil(jnp.log1p(-_uniform(rng_key, self.shape)) / jnp.log1p(-p))
    return jnp.maximum(trials, 1)


def _digits(dtype) -> int | None:
    """Mantissa digits of a floating dtype (std::numeric_limits<T>::digits), None for integers."""
    if not jnp.issubdtype(dtype, jnp.floating):
        return None
    return int(jnp.finfo(dtype).nmant) + 1


def _integer_max(dtype) -> int:
    digits = _digits(dtype)
    if digits is not None:
        return 1 << digits
    if dtype == jnp.bool_:
        return 1
    return int(jnp.iinfo(dtype).max)


def _check_in_range(value: int, name: str, dtype) -> None:
    """PyTorch's check_from_to_in_range for one bound, with its words (the dtype's TypeMeta name)."""
    shown = TYPE_META_NAMES[TORCH_DTYPE[jnp.dtype(dtype)]]
    digits = _digits(dtype)
    if digits is not None:
        info = jnp.finfo(dtype)
        if not float(info.min) <= value <= float(info.max):
            raise RuntimeError(f"{name} is out of bounds for {shown}")
        if not -(1 << digits) <= value <= (1 << digits):
            warnings.warn(
                f"{name} is out of bounds [-(2^{digits}), 2^{digits}]. Due to precision limitations {shown} can "
                "support discrete uniform distribution only within this range. This warning will become an error "
                "in version 1.7 release, please fix the code in advance",
                stacklevel=2,
            )
        return
    low, high = (0, 1) if dtype == jnp.bool_ else (int(jnp.iinfo(dtype).min), int(jnp.iinfo(dtype).max))
    if not low <= value <= high:
        raise RuntimeError(f"{name} is out of bounds for {shown}")


def _integers(rng_key, shape, low: int, count: int) -> jax.Array:
    """Integers low, ..., low + count - 1 (count <= 2**64) as int64, uniform up to the modulo bias
    PyTorch's kernels also have."""
    bits = flat(shape, lambda n: jax.random.bits(rng_key, n, jnp.uint64))
    if count == 1 << 64:
        return jax.lax.bitcast_convert_type(bits, jnp.int64)
    return (bits % np.uint64(count)).astype(jnp.int64) + np.int64(low)


def _random_from_to_dtypes(arguments: dict[str, Any]) -> None:
    """random_from_to_impl's dtype checks, in its order (an empty range raises first, in the lowering)."""
    dtype, start, to = arguments["self"].dtype, arguments.get("from", 0), arguments.get("to")
    if to is not None and start >= to:
        return
    if to is None and start == -(1 << 63):
        _check_dispatched("random_full_64_bits_range_kernel_cuda", dtype, _ALL_TYPES | {torch.bfloat16})
        if dtype not in (torch.int64, torch.float64, torch.float32, torch.bfloat16):
            raise RuntimeError("random_full_64_bits_range_kernel_cuda handles only int64, double, float and bfloat16")
    elif dtype.is_floating_point:
        _check_dispatched("random_update_from_to" if to is not None else "random_from_to_range_calc", dtype, _FLOATING)
    elif dtype.is_complex:
        where = "check_random_bounds" if to is not None else "random_from_to_impl"
        raise RuntimeError(f"{where} handles only integral, floating-point and boolean types")


@lowering(aten.random.default, random=True, dtype_rule=_dispatched("random_kernel_cuda", _ALL_TYPES_AND_BOOL))
def random(self, *, generator=None, rng_key):
    """torch.Tensor.random_(): integers in [0, 2**digits] for floating dtypes (every integer the
    dtype represents exactly), [0, max] for integer dtypes, {0, 1} for bool."""
    return _integers(rng_key, self.shape, 0, _integer_max(self.dtype) + 1)


@lowering(aten.random.to, random=True, dtype_rule=_random_from_to_dtypes)
def random_to(self, to, *, generator=None, rng_key):
    """torch.Tensor.random_(to): integers in [0, to)."""
    return random_from(self, 0, to, rng_key=rng_key)


@lowering(getattr(aten.random, "from"), random=True, dtype_rule=_random_from_to_dtypes)
def random_from(self, from_, to=None, *, generator=None, rng_key):
    """torch.Tensor.random_(from, to): integers in [from, to); ``to=None`` means up to the dtype's
    largest (2**digits for floating dtypes); bounds are checked as PyTorch checks them."""
    if to is not None:
        if from_ >= to:
            raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={from_} >= to={to}")
        last = to - 1
    elif from_ == -(1 << 63) and self.dtype == jnp.int64:
        return _integers(rng_key, self.shape, from_, 1 << 64)
    else:
        last = _integer_max(self.dtype)
        if from_ > last:
            raise RuntimeError(
                f"random_ expects 'from' casted to dtype to be less than or equal to 'to_inc' casted to dtype, "
                f"but got from={from_} > to_inc={last}"
            )
    _check_in_range(from_, "from", self.dtype)
    _check_in_range(last, "to - 1", self.dtype)
    return _integers(rng_key, self.shape, from_, last - from_ + 1)


def _dropout_dtypes(arguments: dict[str, Any]) -> None:
    """CUDA's native_dropout: a training call with 0 <= p < 1 on a non-empty input dispatches
    ``fused_dropout`` over the floating dtypes (evaluation clones, p == 1 gives zeros, any dtype)."""
    if arguments["train"] is not False and arguments["p"] != 1 and arguments["input"].numel() > 0:
        _check_dispatched("fused_dropout", arguments["input"].dtype, _FLOATING)


def _dropout_draws(arguments: dict[str, Any]) -> bool:
    """CUDA's native_dropout draws only when training with p != 1 (its short-cuts return first)."""
    return arguments["train"] is not False and arguments["p"] != 1


@lowering(aten.native_dropout.default, static=("p", "train"), random=_dropout_draws, dtype_rule=_dropout_dtypes)
def native_dropout(input, p, train, *, rng_key):
    """torch.nn.functional.dropout's kernel: (input * mask / (1 - p), mask) with mask ~ Bernoulli(1 - p)
    when training; (input * 0, all False) for p == 1 and (input, all True) otherwise, drawing
    nothing, as CUDA's kernel does (the generator does not advance). ``p`` is a compile-time constant,
    checked as the CPU's kernel checks it (its ``bernoulli_(1 - p)``); CUDA's does not check and
    computes values of no meaning."""
    if train is False:
        return input, jnp.ones(input.shape, jnp.bool_)
    if p == 1:  # input * 0, as F.dropout computes it (NaN stays NaN): what graphs decompose it from
        dtype = _sample_dtype(input.dtype)
        return input.astype(dtype) * jnp.zeros((), dtype), jnp.zeros(input.shape, jnp.bool_)
    if not 0 <= 1 - p <= 1:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={stream_text(1 - p)}")
    dtype = _sample_dtype(input.dtype)
    keep = 1 - _scalar(p, dtype)
    scale = jnp.where(keep == 0, jnp.zeros((), dtype), 1 / keep)
    mask = _uniform(rng_key, input.shape) < keep
    return input.astype(dtype) * convert(mask, dtype) * scale, mask


@lowering(aten.native_dropout_backward.default)
def native_dropout_backward(grad_output, mask, scale):
    """Gradient of native_dropout: grad_output * mask * scale."""
    dtype = _sample_dtype(grad_output.dtype)
    return grad_output.astype(dtype) * convert(mask, dtype) * _scalar(scale, dtype)


# --- permutations and sampling -------------------------------------------------------------------


@lowering(aten.randperm.generator, random=True)
def randperm(n, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None, rng_key):
    """torch.randperm(n): a uniformly random permutation of 0..n-1."""
    return jax.random.permutation(rng_key, n)


#: The most categories ATen's multinomial takes: float32 counts every integer up to 2^24 exactly.
_MAX_CATEGORIES = 2**24


def _multinomial_arguments(arguments: dict[str, Any]) -> None:
    """ATen's multinomial checks (Distributions.cpp, CPU and CUDA alike), in its order: 1-D or 2-D
    floating probabilities, a positive sample count, at most 2^24 categories. They run before the
    meta kernel's own (which words the dimension check otherwise and refuses a negative count as a
    negative dimension)."""
    probabilities, samples = arguments["self"], arguments["num_samples"]
    if probabilities.dim() not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if not probabilities.dtype.is_floating_point:
        raise RuntimeError(
            f"multinomial only supports floating-point dtypes for input, got: {aten_name(probabilities.dtype)}"
        )
    if samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    if probabilities.shape[-1] > _MAX_CATEGORIES and (
        arguments.get("replacement") or samples <= probabilities.shape[-1]
    ):
        raise RuntimeError("number of categories cannot exceed 2^24")


@lowering(aten.multinomial.default, random=True, dtype_rule=_multinomial_arguments)
def multinomial(self, num_samples, replacement=False, *, generator=None, rng_key):
    """torch.multinomial: category indices drawn with probability proportional to each row of ``self``
    (1-D or 2-D). With replacement, independent categorical draws; without, the Gumbel top-k trick
    (categories of probability 0 come last, as on CPU). Negative, infinite or NaN weights, rows
    summing to 0 and more samples than categories without replacement raise as on CPU."""
    if not replacement and num_samples > self.shape[-1]:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    weights = self.astype(jnp.float32)
    invalid = jnp.any(~jnp.isfinite(weights) | (weights < 0))
    device_check(invalid, 0, "probability tensor contains either `inf`, `nan` or element < 0")
    device_check(
        ~invalid & jnp.any(jnp.sum(weights, axis=-1) <= 0),
        0,
        "invalid multinomial distribution (sum of probabilities <= 0)",
    )
    logits = jnp.log(weights)
    if self.shape[-1] == 0:  # no categories: every row sums to 0, which the check above reports
        return jnp.zeros((*self.shape[:-1], num_samples), jnp.int64)
    if replacement:
        shape = (*self.shape[:-1], num_samples)
        draws = jax.random.categorical(rng_key, logits[..., None, :], axis=-1, shape=shape)
        return draws
    perturbed = logits + flat(self.shape, lambda n: jax.random.gumbel(rng_key, n, jnp.float32))
    if math.prod(self.shape) == 0:
        return jnp.zeros((*self.shape[:-1], num_samples), jnp.int64)
    return jax.lax.top_k(perturbed, num_samples)[1]


# --- Poisson, gamma and binomial samplers (torch.poisson, torch.distributions) -------------------


@lowering(aten.poisson.default, random=True, dtype_rule=_dispatched("poisson_cuda", _FLOATING))
def poisson(self, generator=None, *, rng_key):
    """torch.poisson: one Poisson(rate) count per element of ``self``, in its floating dtype (JAX's
    samplers: Knuth's for small rates, transformed rejection for large ones, as the CPU's). A
    negative or NaN rate raises the CPU's error at the next synchronisation; an infinite rate
    gives inf (the CPU returns -2**63 there)."""
    rate = self.astype(jnp.float32)
    device_check(jnp.any(~(rate >= 0)), 0, "invalid Poisson rate, expected rate to be non-negative")
    drawn = jnp.where(jnp.isfinite(rate) & (rate >= 0), rate, 0)
    counts = flat(self.shape, lambda n: jax.random.poisson(rng_key, drawn.reshape(n), n))
    return jnp.where(jnp.isinf(rate), jnp.inf, counts.astype(jnp.float32)).astype(self.dtype)


@lowering(aten._standard_gamma.default, random=True, dtype_rule=_dispatched("gamma_cuda", _FLOATING))
def _standard_gamma(self, generator=None, *, rng_key):
    """torch._standard_gamma (Gamma(concentration, 1), under torch.distributions' Gamma, Beta,
    Dirichlet, Chi2, StudentT): drawn in float32 and, as the CPU's ``_s_gamma_cpu``, at least the
    dtype's smallest normal number (also for a concentration that is not positive, or NaN)."""
    alpha = self.astype(jnp.float32)
    concentration = jnp.where(alpha > 0, alpha, 1)
    sample = flat(self.shape, lambda n: jax.random.gamma(rng_key, concentration.reshape(n), n, jnp.float32))
    sample = sample.astype(self.dtype)
    tiny = jnp.asarray(jnp.finfo(self.dtype).tiny, self.dtype)
    return jnp.where(alpha > 0, jnp.maximum(sample, tiny), tiny)


def _binomial_dtypes(arguments: dict[str, Any]) -> None:
    """``_s_binomial_cuda``'s checks (as the CPU's, before the operands' same-dtype check): count and
    prob of floating dtypes, a ValueError naming the other; then CUDA's dispatch of the count."""
    for name in ("count", "prob"):
        dtype = arguments[name].dtype
        if not dtype.is_floating_point:
            raise ValueError(f"binomial only supports floating-point dtypes for {name}, got: {aten_name(dtype)}")
    _check_dispatched("binomial_cuda", arguments["count"].dtype, _FLOATING)


@lowering(aten.binomial.default, random=True, dtype_rule=_binomial_dtypes, rule_first=True)
def binomial(count, prob, generator=None, *, rng_key):
    """torch.binomial (torch.distributions.Binomial.sample): successes of ``count`` trials each
    succeeding with ``prob``, in their floating dtype, with the edges in the order of the CPU's
    ``sample_binomial`` (Distributions.h): 0 for ``count <= 0`` or ``prob <= 0`` (a NaN in the other
    argument too), ``count`` for ``prob >= 1``, then NaN for a NaN probability or a NaN count (where
    the CPU's loop never ends). An infinite count gives NaN for ``prob > 0.5``, as the CPU's
    ``count - sample(1 - prob)`` always does, and infinity below, one of the two values the CPU's
    sampler returns there at random (about half each)."""
    n, p = jnp.broadcast_arrays(count.astype(jnp.float32), prob.astype(jnp.float32))
    ordinary = (n > 0) & (p > 0) & (p < 1) & jnp.isfinite(n)
    trials, chance = jnp.where(ordinary, n, 1), jnp.where(ordinary, p, 0.5)
    draws = flat(n.shape, lambda m: jax.random.binomial(rng_key, trials.reshape(m), chance.reshape(m), m))
    infinite = jnp.where(p > 0.5, jnp.nan, n)
    sampled = jnp.where(jnp.isnan(p) | jnp.isnan(n), jnp.nan, jnp.where(jnp.isinf(n), infinite, draws))
    return jnp.where((n <= 0) | (p <= 0), 0, jnp.where(p >= 1, n, sampled)).astype(count.dtype)


@lowering(aten._sample_dirichlet.default, random=True, dtype_rule=_dispatched("dirichlet_cuda", _FLOATING))
def _sample_dirichlet(self, generator=None, *, rng_key):
    """torch._sample_dirichlet (torch.distributions.Dirichlet.sample): Gamma(alpha) draws along the
    last dimension, normalised, as the CPU's ``_s_dirichlet_cpu``: the gammas drawn in float64 and at
    least its smallest normal number, each share clamped to [smallest normal, largest below 1] of
    the dtype (16-bit dtypes too, as CUDA's kernel takes them)."""
    alpha = self.astype(jnp.float64)
    concentration = jnp.where(alpha > 0, alpha, 1)
    gamma = flat(self.shape, lambda n: jax.random.gamma(rng_key, concentration.reshape(n), n, jnp.float64))
    gamma = jnp.where(alpha > 0, jnp.maximum(gamma, jnp.finfo(jnp.float64).tiny), jnp.finfo(jnp.float64).tiny)
    share = (gamma / jnp.sum(gamma, axis=-1, keepdims=True)).astype(self.dtype)
    largest = jnp.nextafter(jnp.asarray(1, self.dtype), jnp.asarray(0, self.dtype))
    return jnp.clip(share, jnp.asarray(jnp.finfo(self.dtype).tiny, self.dtype), largest)


@lowering(aten._standard_gamma_grad.default, dtype_rule=_dispatched("_standard_gamma_grad_cuda", _FLOATING))
def _standard_gamma_grad(self, output):
    """d sample / d concentration of Gamma(concentration, 1) samples (reparameterised gradients of
    torch.distributions' Gamma, Beta, Dirichlet): JAX's implicit derivative of the gamma CDF
    (``random_gamma_grad``) in float32, where the CPU's ``standard_gamma_grad_one`` uses series and
    asymptotic approximations: within 0.1% of each other (median 2e-5) for concentrations from 0.01
    to 20; below, the CPU's approximation drifts (0.9% at 0.001, where JAX's matches mpmath)."""
    alpha, sample = (value.astype(jnp.float32) for value in jnp.broadcast_arrays(self, output))
    return jax.lax.random_gamma_grad(alpha, sample).astype(self.dtype)


def _beta_continued_fraction(a, b, x, terms):
    """The continued fraction ``1 / (1 + d1 / (1 + d2 / (1 + ...)))`` of the regularised incomplete
    beta function, ``I_x(a, b) = x**a (1 - x)**b / (a B(a, b))`` times it, elementwise to ``terms``
    partial denominators by the modified Lentz method (DLMF 8.17.22; it converges fast for
    ``x < (a + 1) / (a + b + 2)``)."""
    tiny = jnp.asarray(np.finfo(np.float64).tiny, x.dtype)

    def partial_numerator(k):
        m = (k // 2).astype(x.dtype)
        odd = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
        even = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        return jnp.where(k % 2 == 1, odd, even)

    def step(k, state):
        value, c, d = state
        numerator = partial_numerator(k)
        d = 1 + numerator * d
        d = 1 / jnp.where(jnp.abs(d) < tiny, tiny, d)
        c = 1 + numerator / c
        c = jnp.where(jnp.abs(c) < tiny, tiny, c)
        return value * c * d, c, d

    one = jnp.ones_like(x)
    value, _, _ = jax.lax.fori_loop(1, terms, step, (one, one, jnp.zeros_like(x)))
    return 1 / value


@lowering(
    aten._dirichlet_grad.default,
    dtype_rule=lambda arguments: _check_dispatched("_dirichlet_grad_cuda", arguments["x"].dtype, _FLOATING_ONLY),
)
def _dirichlet_grad(x, alpha, total):
    """The reparameterised gradient of Beta and Dirichlet samples (``rsample``'s backward): for ``x``
    drawn from Beta(alpha, beta = total - alpha), ``-(d/d alpha) I_x(alpha, beta) / pdf(x) / (1 - x)``
    at fixed beta (I the regularised incomplete beta function, the CDF). Computed in float64 from
    the continued fraction of ``I`` and its forward-mode derivative in alpha, with the CDF's prefactor
    cancelled against the density: mpmath's value to about 1e-13. The CPU's ``dirichlet_grad_one``
    approximates it (Taylor series near 0 and 1, a saddle point for alpha and beta above 6, a
    rational fit elsewhere): up to 0.3% off in float64 (the saddle point) and 0.6% in float32 (the
    series near 1); the median difference is 1e-6.

    Raises:
        NotImplementedError: a 16-bit ``x``, as CUDA's ``_dirichlet_grad_cuda`` (float32/64 only).
    """
    x, alpha, total = (value.astype(jnp.float64) for value in jnp.broadcast_arrays(x, alpha, total))
    beta = total - alpha
    # The fraction needs O(sqrt(a + b)) terms; 20 + 8 sqrt(max(a + b)) gives float64 accuracy, up to
    # 10,000 terms (totals to 1.5e6). Non-finite totals are left out: one NaN set every element's count.
    largest = jnp.max(jnp.where(jnp.isfinite(total), total, 0.0), initial=0.0)
    terms = jnp.minimum(20 + 8 * jnp.sqrt(largest), 10_000).astype(jnp.int32)
    # Each element's fraction converges fast in one form: I_x(alpha, beta) directly, or mirrored as
    # I_x(a, b) = 1 - I_{1-x}(b, a).
    direct = x < (alpha + 1) / (total + 2)

    def fraction_in(a):
        return _beta_continued_fraction(
            jnp.where(direct, a, beta), jnp.where(direct, beta, a), jnp.where(direct, x, 1 - x), terms
        )

    fraction, d_fraction = jax.jvp(fraction_in, (alpha,), (jnp.ones_like(alpha),))
    # d/d alpha of the log prefactor, without the 1/alpha of the direct form's.
    d_log_prefactor = jnp.log(x) - jax.scipy.special.digamma(alpha) + jax.scipy.special.digamma(total)
    gradient = jnp.where(
        direct,
        -((d_log_prefactor - 1 / alpha) * fraction + d_fraction) * x / alpha,
        (d_log_prefactor * fraction + d_fraction) * x / beta,
    )
    # Where it is undefined (x at 0 or 1, a NaN alpha) the CPU's series near 0 and 1 return 0; its
    # other branches keep NaN (a NaN or infinite total).
    boundary = total * x * (1 - x)
    series = ((x <= 0.5) & (boundary < 2.5)) | ((x >= 0.5) & (boundary < 0.75))
    return jnp.where(jnp.isnan(gradient) & series, jnp.zeros((), gradient.dtype), gradient)


# --- factories that draw: torch.rand, randn, randint and their _like forms -------------------------
#
# Eagerly each is PyTorch's composite, an empty tensor then uniform_, normal_ or random_ (so they
# keep no eager kernel of their own: eager/registration.py's KEEP_COMPOSITE). In a compiled graph
# they are lowered to those same draws, with the same checks, so that a graph keeps them rather than
# splitting around an eager op, and compiled values equal eager ones under one seed.


def _drawn_into(shape, result_dtype) -> tuple[jax.Array, torch.Tensor]:
    """The tensor a factory draws into, as the in-place sampler sees it: a JAX array and its meta."""
    dtype = TORCH_DTYPE[jnp.dtype(result_dtype)]
    return jnp.zeros(tuple(shape), result_dtype), torch.empty(tuple(shape), dtype=dtype, device="meta")


def _rand_into(shape, result_dtype, rng_key) -> jax.Array:
    self, meta = _drawn_into(shape, result_dtype)
    _real_view_dispatched("check_uniform_bounds")({"self": meta})
    return uniform(self, 0.0, 1.0, rng_key=rng_key, metas=[meta])


def _randn_into(shape, result_dtype, rng_key) -> jax.Array:
    self, meta = _drawn_into(shape, result_dtype)
    _real_view_dispatched("normal_kernel_cuda", empty_returns_first=True)({"self": meta})
    return normal(self, 0.0, 1.0, rng_key=rng_key)


def _randint_into(shape, result_dtype, low, high, rng_key) -> jax.Array:
    self, meta = _drawn_into(shape, result_dtype)
    _random_from_to_dtypes({"self": meta, "from": low, "to": high})
    return random_from(self, low, high, rng_key=rng_key)


_FACTORY_OPTIONS = ("dtype", "layout", "device", "pin_memory", "memory_format")


@lowering(aten.rand.default, random=True, result_dtype=True, static=("size", *_FACTORY_OPTIONS))
def rand(size, *, result_dtype, rng_key, **options):
    """torch.rand(size): U[0, 1), drawn as ``torch.empty(size).uniform_()`` draws it."""
    return _rand_into(size, result_dtype, rng_key)


@lowering(aten.rand_like.default, random=True, result_dtype=True, static=_FACTORY_OPTIONS)
def rand_like(self, *, result_dtype, rng_key, **options):
    """torch.rand_like(self): U[0, 1) in ``self``'s shape (the result's dtype)."""
    return _rand_into(self.shape, result_dtype, rng_key)


@lowering(aten.randn_like.default, random=True, result_dtype=True, static=_FACTORY_OPTIONS)
def randn_like(self, *, result_dtype, rng_key, **options):
    """torch.randn_like(self): N(0, 1), drawn as ``torch.empty_like(self).normal_()`` draws it."""
    return _randn_into(self.shape, result_dtype, rng_key)


@lowering(aten.randint.default, random=True, result_dtype=True, static=("high", "size", *_FACTORY_OPTIONS))
def randint(high, size, *, result_dtype, rng_key, **options):
    """torch.randint(high, size): integers in [0, high), as ``random_(0, high)`` draws them."""
    return _randint_into(size, result_dtype, 0, high, rng_key)


@lowering(aten.randint.low, random=True, result_dtype=True, static=("low", "high", "size", *_FACTORY_OPTIONS))
def randint_low(low, high, size, *, result_dtype, rng_key, **options):
    """torch.randint(low, high, size): integers in [low, high)."""
    return _randint_into(size, result_dtype, low, high, rng_key)


@lowering(aten.randint_like.default, random=True, result_dtype=True, static=("high", *_FACTORY_OPTIONS))
def randint_like(self, high, *, result_dtype, rng_key, **options):
    """torch.randint_like(self, high): integers in [0, high) in ``self``'s shape."""
    return _randint_into(self.shape, result_dtype, 0, high, rng_key)


@lowering(aten.randint_like.low_dtype, random=True, result_dtype=True, static=("low", "high", *_FACTORY_OPTIONS))
def randint_like_low(self, low, high, *, result_dtype, rng_key, **options):
    """torch.randint_like(self, low, high): integers in [low, high) in ``self``'s shape."""
    return _randint_into(self.shape, result_dtype, low, high, rng_key)


# --- the generator state a graph hands to another (activation checkpointing) ----------------------


@torch.library.custom_op("torch_neuronx::generator_state", mutates_args=())
def generator_state(device: torch.device) -> torch.Tensor:
    """The state of ``device``'s generator where the next random op draws, as a 16-byte torch.uint8
    tensor on ``device`` (seed, offset: ``torch.neuron.get_rng_state``'s layout).

    AOTAutograd saves a random op's state when activation checkpointing recomputes the op in the
    backward graph (``run_and_save_rng_state``, whose state is the CPU generator's on a device it
    does not know); dynamo/random_states.py puts this op in its place, and
    ``run_with_rng_state(state, op, ...)`` in the backward graph draws the same elements again.
    """
    return torch.neuron.get_rng_state(device).to(device)


@generator_state.register_fake
def _generator_state_meta(device: torch.device) -> torch.Tensor:
    return torch.empty(16, dtype=torch.uint8, device=device)


@lowering(torch.ops.torch_neuronx.generator_state.default, static=("device",))
def _generator_state(device):
    return active_context().generator_state()
