"""Activations, softmax and their backward ops.

Promotion is PyTorch's DEFAULT kind: 16-bit floats compute in float32 (as the CPU kernels do) and
round once to the result dtype; runtime scalars (slopes, thresholds, alpha) arrive in that dtype.
Formulas follow PyTorch's CPU kernels (``aten/src/ATen/native/cpu/Activation.cpp``,
``SoftMaxKernel.cpp``) and ``torch/_decomp/decompositions.py``.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import jax.scipy.special as jsp
import numpy as np
import torch

from torch_neuronx.lowering.exact_division import divided_by
from torch_neuronx.lowering.promotion import c10_rounding, cpu_16_bit_vector_elements, opmath_dtype
from torch_neuronx.lowering.registry import Promotion, lowering
from torch_neuronx.runtime.dtypes import aten_name
from torch_neuronx.runtime.host_threads import cpu_thread_count

aten = torch.ops.aten

_SQRT1_2 = 1 / math.sqrt(2)
_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)
_TANH_BETA = math.sqrt(2 / math.pi)
_TANH_KAPPA = 0.044715


def _axis(dim: int, rank: int) -> int | None:
    """PyTorch's ``dim`` as a JAX axis; a 0-d tensor (where PyTorch accepts dim 0 or -1) has none."""
    return dim % rank if rank else None


# --- forward ----------------------------------------------------------------------------------


@lowering(aten.relu.default, promotion=Promotion.DEFAULT)
def relu(self):
    """torch.relu: max(self, 0); NaN propagates; integers stay integers."""
    return jnp.maximum(self, 0)


@lowering(aten.leaky_relu.default, promotion=Promotion.DEFAULT, checked=("negative_slope",), checked_in_opmath=True)
def leaky_relu(self, negative_slope=0.01):
    """F.leaky_relu: self if self > 0 else self * negative_slope."""
    return jnp.where(self > 0, self, self * negative_slope)


@lowering(aten.gelu.default, promotion=Promotion.DEFAULT, static=("approximate",))
def gelu(self, *, approximate="none"):
    """F.gelu: x * Phi(x) with the exact normal CDF (``approximate="none"``) or PyTorch's tanh
    approximation 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))."""
    if approximate == "tanh":
        inner = _TANH_BETA * (self + _TANH_KAPPA * self * self * self)
        return 0.5 * self * (1 + jnp.tanh(inner))
    return self * 0.5 * (1 + jsp.erf(self * _SQRT1_2))


@lowering(aten.silu.default, promotion=Promotion.DEFAULT)
def silu(self):
    """F.silu: x * sigmoid(x)."""
    return self * jax.nn.sigmoid(self)


@lowering(aten.mish.default, promotion=Promotion.DEFAULT)
def mish(self):
    """F.mish: x * tanh(softplus(x)), with a softplus that does not overflow."""
    return self * jnp.tanh(jax.nn.softplus(self))


@lowering(
    aten.elu.default,
    promotion=Promotion.DEFAULT,
    checked=("alpha", "scale", "input_scale"),
    checked_in_opmath=True,
)
def elu(self, alpha=1, scale=1, input_scale=1):
    """F.elu (and selu/celu, which call it): scale * x for x > 0, else
    scale * alpha * expm1(x * input_scale)."""
    return jnp.where(self > 0, self * scale, jnp.expm1(self * input_scale) * alpha * scale)


@lowering(
    aten.hardtanh.default,
    promotion=Promotion.DEFAULT,
    promote=("self",),
    checked=("min_val", "max_val"),
    checked_in_opmath=True,
)
def hardtanh(self, min_val=-1, max_val=1):
    """F.hardtanh (and relu6): clamp(self, min_val, max_val); the bounds take self's dtype, as the
    CPU kernel converts them; NaN propagates."""
    return jnp.minimum(jnp.maximum(self, min_val), max_val)


@lowering(aten.hardswish.default, promotion=Promotion.DEFAULT)
def hardswish(self):
    """F.hardswish: x * relu6(x + 3) / 6."""
    return divided_by(self * jnp.clip(self + 3, 0, 6), 6)


@lowering(aten.hardsigmoid.default, promotion=Promotion.DEFAULT)
def hardsigmoid(self):
    """F.hardsigmoid: relu6(x + 3) / 6."""
    return divided_by(jnp.clip(self + 3, 0, 6), 6)


@lowering(aten.softplus.default, promotion=Promotion.DEFAULT, checked=("beta", "threshold"), checked_in_opmath=True)
def softplus(self, beta=1, threshold=20):
    """F.softplus: log1p(exp(beta * x)) / beta, reverting to x where beta * x > threshold."""
    scaled = self * beta
    return jnp.where(scaled > threshold, self, divided_by(jnp.log1p(jnp.exp(scaled)), beta))


@lowering(aten.threshold.default, promotion=Promotion.DEFAULT, promote=("self",), checked=("threshold", "value"))
def threshold(self, threshold, value):
    """F.threshold: value where self <= threshold, else self (NaN stays); the scalars take self's
    dtype, as the CPU kernel converts them."""
    return jnp.where(self <= threshold, value, self)


@lowering(aten.hardshrink.default, promotion=Promotion.DEFAULT, checked=("lambd",))
def hardshrink(self, lambd=0.5):
    """F.hardshrink: 0 where -lambd <= x <= lambd, else x (NaN stays)."""
    return jnp.where((self >= -lambd) & (self <= lambd), 0, self)


@lowering(aten.softshrink.default, promotion=Promotion.DEFAULT, static=("lambd",))
def softshrink(self, lambd=0.5):
    """F.softshrink: x - lambd above lambd, x + lambd below -lambd, else 0 (NaN stays, as the CPU
    kernel's x * 0). ``lambd`` is static, so that the meta kernel's range check of it runs for
    each value, as ATen's does on every call."""
    return jnp.where(self > lambd, self - lambd, jnp.where(self < -lambd, self + lambd, self * 0))


@lowering(
    aten.logit.default, promotion=Promotion.INT_TO_FLOAT, uncast=("self",), checked=("eps",), checked_in_opmath=True
)
def logit(self, eps=None):
    """torch.logit: log(x / (1 - x)), with x clamped to [eps, 1 - eps] when ``eps`` is given and not
    negative (a negative eps, -1e-10 included, clamps nothing: 1 - eps rounds to 1), as the CPU's
    and CUDA's kernels clamp: ``x < lo ? lo : (x > hi ? hi : x)`` with lo = eps and hi = 1 - lo,
    so a NaN eps clamps nothing and an eps above 0.5 maps x below it to lo and x above it to hi
    (``jnp.clip`` gave NaN, and hi for both). A 16-bit input computes in its dtype as the CPU's
    ``logit_kernel`` does (UnaryOpsKernel.cpp): eps, 1 - eps and each operator's result rounded to
    it; computing in float32 and rounding once, as CUDA does, differed in half of the elements, by
    up to 18 times assert_close's float16 tolerance. Integer input computes in float32."""
    dtype = self.dtype if jnp.issubdtype(self.dtype, jnp.floating) else jnp.float32
    rounded, x = c10_rounding(dtype), self.astype(opmath_dtype(dtype))
    if eps is not None:
        low = rounded(jnp.asarray(eps, x.dtype))
        high = rounded(1 - low)
        clamped = jnp.where(x < low, low, jnp.where(x > high, high, x))
        x = jnp.where(low < 0, x, clamped)  # the kernels' ``eps < 0`` branch: no clamp
    return rounded(jnp.log(rounded(x / rounded(1 - x))))


@lowering(aten.glu.default, promotion=Promotion.DEFAULT, static=("dim",))
def glu(self, dim=-1):
    """F.glu: a * sigmoid(b), where a and b are the halves of ``dim`` (PyTorch checks the size is even)."""
    a, b = jnp.split(self, 2, axis=_axis(dim, self.ndim))
    return a * jax.nn.sigmoid(b)


@lowering(aten.log_sigmoid_forward.default, promotion=Promotion.DEFAULT)
def log_sigmoid_forward(self):
    """F.logsigmoid: (min(x, 0) - log1p(exp(-|x|)), buffer); the buffer holds exp(-|x|), as on CPU
    (PyTorch's meta kernel gives it the input's shape)."""
    z = jnp.exp(-jnp.abs(self))
    return jnp.minimum(self, 0) - jnp.log1p(z), z


def _softmax_input(self, dim: int):
    """Softmax over ``dim`` of a tensor of any rank (a 0-d tensor is a single element). An empty
    input reduces over nothing, so its max starts from -inf."""
    return (self.reshape(1), 0) if self.ndim == 0 else (self, dim % self.ndim)


def _max(x, axis: int):
    return jnp.max(x, axis=axis, keepdims=True, initial=-jnp.inf)


@lowering(aten._softmax.default, promotion=Promotion.DEFAULT, uncast=("self",), static=("dim", "half_to_float"))
def softmax(self, dim, half_to_float):
    """torch.softmax: exp(x - max) / sum(exp(x - max)) along ``dim``, computed in float32 for
    16-bit floats; ``half_to_float`` returns float32 (the registry casts to the meta dtype).

    Over a dimension other than the last, the CPU's 16-bit kernel (``_vec_softmax``,
    SoftMaxKernel.cpp) computes most positions in float vectors, rounding once, and the rest in a
    scalar tail that stores ``exp(x - max)`` in the dtype before dividing it by the float sum
    (:func:`_cpu_softmax_scalar_tail`): rounding once everywhere differed in 3% of elements, which
    the gradient, computed from the output, carried beyond tolerance."""
    x, axis = _softmax_input(self, dim)
    dtype = x.dtype
    x = x.astype(opmath_dtype(dtype))
    shifted = x - _max(x, axis)
    exp = jnp.exp(shifted)
    total = jnp.sum(exp, axis=axis, keepdims=True)
    out = exp / total
    if dtype in (jnp.bfloat16, jnp.float16) and axis != x.ndim - 1 and not half_to_float and x.size:
        outer, inner = math.prod(x.shape[:axis]), math.prod(x.shape[axis + 1 :])
        tail = _cpu_softmax_scalar_tail(outer, inner).reshape(*x.shape[:axis], 1, *x.shape[axis + 1 :])
        rounded = c10_rounding(dtype)
        out = jnp.where(jnp.asarray(tail), rounded(exp) / total, out)
    return out.reshape(self.shape)


def _cpu_softmax_scalar_tail(outer: int, inner: int) -> np.ndarray:
    """Which of the ``outer * inner`` positions (a softmax's rows over a dimension other than the
    last) the CPU's 16-bit ``_vec_softmax`` computes in its scalar tail: ``at::parallel_for`` splits
    the positions into ``torch.get_num_threads()`` chunks of equal size; each chunk walks vectors of
    ``Vectorized<BFloat16/Half>::size()`` positions (32 on AVX-512 builds, else 16) while one fits
    in both the row of ``inner`` positions and the chunk; the rest of a row, or of the chunk, is
    the tail. The thread count is read when the call is compiled (as ``arange`` reads it)."""
    step = cpu_16_bit_vector_elements()
    total = outer * inner
    chunk = -(-total // max(cpu_thread_count(), 1))
    position = np.arange(total)
    chunk_start = position // chunk * chunk
    chunk_end = np.minimum(chunk_start + chunk, total)
    segment_start = np.maximum(chunk_start, position - position % inner)
    vectors = np.minimum((inner - segment_start % inner) // step, (chunk_end - segment_start) // step)
    return position - segment_start >= vectors * step


@lowering(aten._log_softmax.default, promotion=Promotion.NO_OPMATH, static=("dim", "half_to_float"))
def log_softmax(self, dim, half_to_float):
    """torch.log_softmax: (x - max) - log(sum(exp(x - max))) along ``dim``, in float32 for 16-bit
    floats. Over the last dimension of a 16-bit input the sum and its log are each rounded to the
    dtype before the subtraction, as the CPU's ``_vec_log_softmax_lastdim`` keeps them in
    ``scalar_t`` buffers (SoftMaxKernel.cpp; rounding once differed in 7% of bfloat16 elements, by
    up to 378 times assert_close's tolerance). Other dimensions, and ``half_to_float`` (CUDA only),
    round once, as the CPU's and CUDA's kernels do."""
    x, axis = _softmax_input(self, dim)
    compute = opmath_dtype(x.dtype)
    rounded = c10_rounding(x.dtype) if axis == x.ndim - 1 and not half_to_float else (lambda value: value)
    x = x.astype(compute)
    shifted = x - _max(x, axis)
    log_sum = rounded(jnp.log(rounded(jnp.sum(jnp.exp(shifted), axis=axis, keepdims=True))))
    return (shifted - log_sum).reshape(self.shape)


# --- backward ---------------------------------------------------------------------------------


@lowering(aten.threshold_backward.default, promotion=Promotion.DEFAULT)
def threshold_backward(grad_output, self, threshold):
    """Gradient of threshold/relu: 0 where self <= threshold, else grad_output."""
    return jnp.where(self <= threshold, 0, grad_output)


@lowering(aten.gelu_backward.default, promotion=Promotion.DEFAULT, static=("approximate",))
def gelu_backward(grad_output, self, *, approximate="none"):
    """Gradient of F.gelu: grad * (Phi(x) + x * phi(x)), or the derivative of the tanh form, as
    PyTorch's GeluBackwardKernel computes it."""
    if approximate == "tanh":
        x_sq = self * self
        tanh_inner = jnp.tanh(_TANH_BETA * (self + _TANH_KAPPA * x_sq * self))
        left_derivative = 0.5 * (1 + tanh_inner)
        right_derivative = 0.5 * self * (1 - tanh_inner * tanh_inner) * _TANH_BETA * (1 + 3 * _TANH_KAPPA * x_sq)
        return grad_output * (left_derivative + right_derivative)
    cdf = 0.5 * (1 + jsp.erf(self * _SQRT1_2))
    pdf = _INV_SQRT_2PI * jnp.exp(-0.5 * self * self)
    return grad_output * (cdf + self * pdf)


@lowering(aten.silu_backward.default, promotion=Promotion.DEFAULT)
def silu_backward(grad_output, self):
    """Gradient of F.silu: grad * s * (1 + x * (1 - s)), s = sigmoid(x)."""
    s = jax.nn.sigmoid(self)
    return grad_output * s * (1 + self * (1 - s))


@lowering(aten.mish_backward.default, promotion=Promotion.DEFAULT)
def mish_backward(grad_output, self):
    """Gradient of F.mish: grad * (t + x * sigmoid(x) * (1 - t^2)), t = tanh(softplus(x))."""
    t = jnp.tanh(jax.nn.softplus(self))
    return grad_output * (t + self * jax.nn.sigmoid(self) * (1 - t * t))


def _in_place_slope_check(flag: str, slope: str, name: str, tail: str = ""):
    """The structured metas' check of ``elu_backward`` and ``leaky_relu_backward`` (Activation.cpp,
    CPU and CUDA): a gradient taken from the result of an in-place forward (``flag``) with a
    negative ``slope`` cannot be recovered, and raises.

    Raises:
        RuntimeError: ATen's "In-place ... backward calculation is triggered with a negative slope".
    """

    def rule(arguments: dict) -> None:
        if arguments[flag] and float(arguments[slope]) < 0:
            raise RuntimeError(
                f"In-place {name} backward calculation is triggered with a negative slope which is not supported. "
                "This is caused by calling in-place forward function with a negative slope, please call out-of-place "
                "version instead." + tail
            )

    return rule


@lowering(
    aten.elu_backward.default,
    promotion=Promotion.DEFAULT,
    static=("is_result",),
    dtype_rule=_in_place_slope_check("is_result", "alpha", "elu"),
    rule_first=True,
)
def elu_backward(grad_output, alpha, scale, input_scale, is_result, self_or_result):
    """Gradient of F.elu from its input, or from its result when ``is_result`` (in-place elu_)."""
    if is_result:
        negative = grad_output * input_scale * (self_or_result + alpha * scale)
    else:
        negative = grad_output * input_scale * alpha * scale * jnp.exp(self_or_result * input_scale)
    return jnp.where(self_or_result <= 0, negative, grad_output * scale)


@lowering(
    aten.leaky_relu_backward.default,
    promotion=Promotion.DEFAULT,
    static=("self_is_result",),
    dtype_rule=_in_place_slope_check(
        "self_is_result",
        "negative_slope",
        "leakyReLu",
        " File an issue at https://github.com/pytorch/pytorch if you do require supporting in-place leakRelu "
        "backward calculation with negative slope",
    ),
    rule_first=True,
)
def leaky_relu_backward(grad_output, self, negative_slope, self_is_result):
    """Gradient of F.leaky_relu: grad where self > 0, else grad * negative_slope."""
    return jnp.where(self > 0, grad_output, grad_output * negative_slope)


@lowering(aten.hardtanh_backward.default, promotion=Promotion.DEFAULT)
def hardtanh_backward(grad_output, self, min_val, max_val):
    """Gradient of F.hardtanh: 0 where self <= min_val or self >= max_val, else grad."""
    return jnp.where((self <= min_val) | (self >= max_val), 0, grad_output)


@lowering(aten.hardswish_backward.default, promotion=Promotion.DEFAULT)
def hardswish_backward(grad_output, self):
    """Gradient of F.hardswish: 0 for x <= -3, grad * (x / 3 + 0.5) for -3 < x < 3, grad for x >= 3."""
    return jnp.where(self <= -3, 0, jnp.where(self < 3, grad_output * (divided_by(self, 3) + 0.5), grad_output))


@lowering(aten.hardsigmoid_backward.default, promotion=Promotion.DEFAULT)
def hardsigmoid_backward(grad_output, self):
    """Gradient of F.hardsigmoid: grad / 6 for -3 < x < 3, else 0."""
    return jnp.where((self > -3) & (self < 3), grad_output / 6, 0)


@lowering(aten.softplus_backward.default, promotion=Promotion.DEFAULT)
def softplus_backward(grad_output, self, beta, threshold):
    """Gradient of F.softplus: grad * sigmoid(beta * x), or grad where beta * x > threshold."""
    scaled = self * beta
    return jnp.where(scaled > threshold, grad_output, grad_output * jax.nn.sigmoid(scaled))


@lowering(aten.hardshrink_backward.default, aten.softshrink_backward.default, promotion=Promotion.DEFAULT)
def shrink_backward(grad_out, self, lambd):
    """Gradient of F.hardshrink and F.softshrink: 0 where -lambd <= x <= lambd, else grad."""
    return jnp.where((self >= -lambd) & (self <= lambd), 0, grad_out)


@lowering(aten.logit_backward.default, promotion=Promotion.NO_OPMATH)
def logit_backward(grad_output, self, eps=None):
    """Gradient of torch.logit: grad / (x * (1 - x)); outside [eps, 1 - eps] it is 0, and without
    ``eps`` (or with a negative one) it is NaN outside [0, 1], as PyTorch's kernels give. 16-bit
    operands compute in their dtype, each operator rounded, as the CPU's ``logit_backward_kernel``
    (BinaryOpsKernel.cpp; see :func:`logit`)."""
    rounded, compute = c10_rounding(self.dtype), opmath_dtype(self.dtype)
    x = self.astype(compute)
    grad = rounded(grad_output.astype(compute) / rounded(x * rounded(1 - x)))
    low = rounded(jnp.asarray(-1 if eps is None else eps, compute))
    high = rounded(1 - low)
    unclamped = jnp.where((x < 0) | (x > 1), jnp.nan, grad)
    return jnp.where(low < 0, unclamped, jnp.where((x < low) | (x > high), 0, grad))


@lowering(aten.glu_backward.default, promotion=Promotion.DEFAULT, static=("dim",))
def glu_backward(grad_output, self, dim):
    """Gradient of F.glu: (grad * s, grad * a * s * (1 - s)) for the halves (a, b), s = sigmoid(b)."""
    axis = _axis(dim, self.ndim)
    a, b = jnp.split(self, 2, axis=axis)
    s = jax.nn.sigmoid(b)
    return jnp.concatenate([grad_output * s, grad_output * a * s * (1 - s)], axis=axis)


@lowering(aten.log_sigmoid_backward.default, promotion=Promotion.DEFAULT)
def log_sigmoid_backward(grad_output, self, buffer):
    """Gradient of F.logsigmoid: grad * sigmoid(-x), computed from x (the buffer is not needed)."""
    return grad_output * jax.nn.sigmoid(-self)


def _softmax_backward_rule(arguments: dict) -> None:
    """CUDA's checks of ``_softmax_backward_data``/``_log_softmax_backward_data`` (SoftMax.cu): a
    gradient of another dtype than the forward input's must be float32 for a float16 input (the
    gradient is then float16), and the kernel reads ``output`` as the gradient's element type.
    Without them a bfloat16 output with a float32 gradient was computed (the CPU and CUDA raise).

    Raises:
        RuntimeError: "expected input and grad types to match, or input to be at::Half and grad to
            be at::Float", "expected scalar type Float but found BFloat16".
    """
    grad, output, input_dtype = arguments["grad_output"], arguments["output"], arguments["input_dtype"]
    if grad.dtype != input_dtype and not (grad.dtype == torch.float32 and input_dtype == torch.float16):
        raise RuntimeError("expected input and grad types to match, or input to be at::Half and grad to be at::Float")
    if output.dtype != grad.dtype:
        raise RuntimeError(f"expected scalar type {aten_name(grad.dtype)} but found {aten_name(output.dtype)}")


@lowering(
    aten._softmax_backward_data.default,
    promotion=Promotion.DEFAULT,
    uncast=("grad_output", "output"),
    static=("dim", "input_dtype"),
    dtype_rule=_softmax_backward_rule,
)
def softmax_backward_data(grad_output, output, dim, input_dtype):
    """Gradient of softmax from its output y: y * (grad - sum(grad * y)); the result takes
    ``input_dtype`` (the registry casts to PyTorch's meta dtype). Over a dimension other than the
    last, 16-bit operands sum ``grad * y`` in float32 one index of ``dim`` after another, as the
    CPU's ``_vec_softmax_backward`` does (a tree sum differed in 0.1% of float16 elements)."""
    axis = _axis(dim, output.ndim)
    ordered = output.dtype in (jnp.bfloat16, jnp.float16) and axis != output.ndim - 1
    grad_output, output = (t.astype(opmath_dtype(t.dtype)) for t in (grad_output, output))
    product = grad_output * output
    if not ordered:
        return product - output * jnp.sum(product, axis=axis, keepdims=True)
    terms = jnp.moveaxis(product, axis, 0)
    total = jax.lax.fori_loop(0, terms.shape[0], lambda d, acc: acc + terms[d], jnp.zeros(terms.shape[1:], terms.dtype))
    return output * (grad_output - jnp.expand_dims(total, axis))


@lowering(
    aten._log_softmax_backward_data.default,
    promotion=Promotion.DEFAULT,
    static=("dim", "input_dtype"),
    dtype_rule=_softmax_backward_rule,
)
def log_softmax_backward_data(grad_output, output, dim, input_dtype):
    """Gradient of log_softmax from its output y: grad - exp(y) * sum(grad)."""
    axis = _axis(dim, output.ndim)
    return grad_output - jnp.exp(output) * jnp.sum(grad_output, axis=axis, keepdims=True)


@lowering(aten.tanh_backward.default, promotion=Promotion.DEFAULT)
def tanh_backward(grad_output, output):
    """Gradient of tanh from its output y: grad * (1 - y^2) (conjugated for complex, as PyTorch does)."""
    return grad_output * jnp.conj(1 - output * output)


@lowering(aten.sigmoid_backward.default, promotion=Promotion.DEFAULT)
def sigmoid_backward(grad_output, output):
    """Gradient of sigmoid from its output y: grad * y * (1 - y) (conjugated for complex)."""
    return grad_output * jnp.conj((1 - output) * output)
