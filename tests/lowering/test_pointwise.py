"""Elementwise ops on neuron against CPU: special values (NaN, infinities, signed zeros), integer
powers, 16-bit results computed in float32, and dtype conversions."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import torch_neuronx
from tests.utils import assert_matches_cpu

NAN, INF = float("nan"), float("inf")
FLOAT_DTYPES = [torch.float32, torch.bfloat16, torch.float16]
SIGNED_DTYPES = [torch.int64, torch.int32, torch.int16, torch.int8]
#: Special values every floating test covers.
SPECIAL = [NAN, INF, -INF, 0.0, -0.0, 1.0, -2.5, 3.0]


def _special(dtype: torch.dtype) -> torch.Tensor:
    return torch.tensor(SPECIAL).to(dtype)


# --- integer powers -------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", SIGNED_DTYPES, ids=str)
def test_integer_pow_with_negative_tensor_exponents_matches_cpu(dtype):
    """PyTorch's powi: 1 for base 1, +-1 for base -1, 0 for every other base (0 included)."""
    base = torch.tensor([-3, -2, -1, 0, 1, 2, 3], dtype=dtype)[:, None]
    exponent = torch.tensor([-3, -2, -1, 0, 1, 2, 3], dtype=dtype)
    assert_matches_cpu(torch.pow, base, exponent)


@pytest.mark.parametrize("base", [2, -1, 1, 0, -3])
def test_number_to_integer_tensor_power_matches_cpu(base):
    exponent = torch.tensor([-3, -2, -1, 0, 1, 2, 7])
    assert_matches_cpu(lambda e: base**e, exponent)


@pytest.mark.parametrize("dtype", [torch.int8, torch.int32, torch.int64, torch.uint8], ids=str)
def test_integer_pow_with_positive_exponents_wraps_as_cpu(dtype):
    base = torch.tensor([0, 1, 2, 3, 5, 7, 100], dtype=dtype)
    assert_matches_cpu(lambda b: (b**3, torch.pow(b, torch.tensor(5, dtype=dtype).to(b.device))), base)


@pytest.mark.parametrize(
    "dtype",
    [
        torch.int64,
        torch.int32,
        torch.bool,
        torch.uint8,
    ],
    ids=str,
)
def test_integer_tensor_to_negative_number_raises_at_the_call_as_cpu(dtype):
    message = "^Integers to negative integer powers are not allowed.$"
    x = torch.tensor([2, 1, 0], dtype=dtype)
    with pytest.raises(RuntimeError, match=message):
        x**-1
    on_device = x.to("neuron")
    torch.testing.assert_close((on_device**2).cpu(), x**2)  # the executable of this signature exists
    with pytest.raises(RuntimeError, match=message):
        on_device**-1  # the same executable: its runtime exponent is checked before the launch


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64], ids=str)
def test_integer_pow_with_exponents_past_six_bits_wraps_as_cpu(dtype):
    # JAX's traced integer pow squares for 6 exponent bits only: 3 ** 300 in int32 was 51933809.
    base = torch.tensor([-3, -2, -1, 0, 1, 2, 3, 5, 7]).to(dtype)[:, None]
    exponent = torch.tensor([0, 1, 63, 64, 65, 127]).to(dtype)
    if dtype.itemsize > 1:
        exponent = torch.cat([exponent, torch.tensor([300, 1001]).to(dtype)])
    assert_matches_cpu(lambda b, e: (b**e, b**127), base, exponent)


@pytest.mark.parametrize(
    ("dtype", "exponent"), [(torch.int8, 300), (torch.int32, 2**40), (torch.float16, 1e10)], ids=str
)
def test_pow_of_an_exponent_the_result_dtype_cannot_hold_raises_as_cpu(dtype, exponent):
    x = torch.tensor([1, 2, 3], dtype=dtype)
    with pytest.raises(RuntimeError) as cpu_error:
        x**exponent
    with pytest.raises(RuntimeError, match=f"^{re.escape(str(cpu_error.value))}$"):
        x.to("neuron") ** exponent


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_floating_pow_matches_cpu(dtype):
    base = torch.tensor([0.5, 2.0, 3.0, -2.0, 0.0]).to(dtype)
    assert_matches_cpu(lambda b: (b**-1, b**2.5, torch.pow(2, b), torch.pow(b, b)), base)


# --- special values -------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize(
    "kwargs", [{}, {"nan": 1.5, "posinf": 7.0, "neginf": -7.0}, {"posinf": 1e39}], ids=["defaults", "given", "huge"]
)
def test_nan_to_num_matches_cpu(dtype, kwargs):
    """The default replacements of infinities are the result dtype's extremes (not float32's)."""
    assert_matches_cpu(lambda x: torch.nan_to_num(x, **kwargs), _special(dtype))


@pytest.mark.parametrize("dtype", [*FLOAT_DTYPES, torch.int32, torch.int64, torch.bool], ids=str)
@pytest.mark.parametrize("op", [torch.sign, torch.sgn], ids=["sign", "sgn"])
def test_sign_of_special_values_matches_cpu(op, dtype):
    """NaN gives 0 and -0.0 gives +0.0, as PyTorch's (x > 0) - (x < 0)."""
    x = _special(dtype) if dtype.is_floating_point else torch.tensor([-3, 0, 2, 1]).to(dtype)
    result = assert_matches_cpu(op, x).cpu()
    torch.testing.assert_close(torch.signbit(result), torch.signbit(op(x)))


def test_sgn_of_complex_special_values_matches_cpu():
    x = torch.tensor([complex(NAN, 0), complex(0, NAN), complex(3, 4), 0j, complex(-0.0, 0), complex(1e30, -1e30)])
    assert_matches_cpu(torch.sgn, x.to(torch.complex64))


@pytest.mark.parametrize("dtype", [*FLOAT_DTYPES, torch.int64], ids=str)
@pytest.mark.parametrize("value", [0.5, NAN, -1.0], ids=["half", "nan", "minus_one"])
def test_heaviside_matches_cpu(dtype, value):
    """NaN inputs give 0 ((x > 0) is false), zeros give ``values``."""
    x = _special(dtype) if dtype.is_floating_point else torch.tensor([-3, 0, 2])
    values = torch.tensor([value if dtype.is_floating_point else 7]).to(dtype)
    assert_matches_cpu(torch.heaviside, x, values)


@pytest.mark.parametrize("dtype", [*FLOAT_DTYPES, torch.int64], ids=str)
def test_digamma_at_zero_and_poles_matches_cpu(dtype):
    """digamma(+0) = -inf, digamma(-0) = +inf, NaN at negative integers."""
    values = [0.0, -0.0, -1.0, -2.5, 1.0, 10.5, INF] if dtype.is_floating_point else [0, 1, -1, 5]
    assert_matches_cpu(torch.digamma, torch.tensor(values).to(dtype))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_nextafter_steps_in_the_result_dtype(dtype):
    """A bfloat16 nextafter moves by a bfloat16 ulp (float32's is lost when rounding back)."""
    x = torch.tensor([1.0, 0.0, -1.0, 0.0, -0.0, 2.0, INF, NAN, 1.0, 65504.0]).to(dtype)
    y = torch.tensor([2.0, 1.0, -2.0, -1.0, 0.0, 2.0, 0.0, 1.0, NAN, INF]).to(dtype)
    result = assert_matches_cpu(torch.nextafter, x, y, atol=0, rtol=0)
    assert result.cpu()[0] > 1


# --- dtype conversions -----------------------------------------------------------------------------


@pytest.mark.parametrize("source", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize(
    "target",
    [
        torch.float8_e5m2,
        torch.int64,
        torch.int32,
        torch.int16,
        torch.int8,
        torch.uint8,
        torch.float8_e4m3fn,
    ],
    ids=str,
)
def test_floating_conversion_of_special_values_matches_cpu(source, target):
    x = torch.tensor([NAN, INF, -INF, -1.0, 300.0, -129.0, 470.0, -1000.0, 2.0**40, 0.7, -0.7]).to(source)

    def convert(t: torch.Tensor) -> torch.Tensor:
        result = t.to(target)
        return result.float() if target.is_floating_point else result

    assert_matches_cpu(convert, x)


@pytest.mark.parametrize("source", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("target", [torch.float8_e5m2, torch.float8_e4m3fn], ids=str)
def test_float8_conversion_keeps_the_cpus_nan_bits(source, target):
    # c10 makes a NaN 0x7F with the NaN's sign; XLA's e5m2 NaN was 0x7E, unsigned from 16 bits.
    x = torch.tensor([NAN, -NAN, INF, 1e6, -3.0]).to(source)
    expected = x.to(target).view(torch.uint8)
    assert torch.equal(x.to("neuron").to(target).cpu().view(torch.uint8), expected)


@pytest.mark.parametrize(
    "fn",
    [
        torch.mul,
        lambda b, y: y * b.to(y.dtype),
        torch.xlogy,
        lambda b, y: torch.compile(lambda b, y: b.float() * y, backend="neuron")(b, y),
    ],
    ids=["mul", "converted_mul", "xlogy", "compiled_converted_mul"],
)
def test_false_times_a_non_finite_value_is_nan_as_on_cpu(fn):
    # XLA's simplifier rewrites convert(b) * y as select(b, y, 0): 0 where the CPU's 0 * inf is NaN.
    b = torch.tensor([False, False, True, True])
    y = torch.tensor([NAN, INF, NAN, -INF])
    assert_matches_cpu(fn, b, y, atol=0, rtol=0)


def test_full_with_a_value_the_dtype_cannot_hold_raises_as_cpu():
    message = "value cannot be converted to type int8_t without overflow"
    with pytest.raises(RuntimeError, match=message):
        torch.full((2,), 300, dtype=torch.int8)
    with pytest.raises(RuntimeError, match=message):
        torch.full((2,), 300, dtype=torch.int8, device="neuron").cpu()


# c10's checked conversion of add's and sub's alpha and lerp's weight. An integer alpha converts to
# the result's dtype on CPU and CUDA (sub converts -alpha); a 16-bit float's and complex32's convert
# to their opmath type on CUDA (Scalar::to<opmath_t>), where the CPU converts to the 16-bit type.
SCALAR_OVERFLOWS = {
    "add int8": (lambda x: torch.add(x, x, alpha=300), torch.int8, "int8_t"),
    "add_ int8": (lambda x: x.clone().add_(x, alpha=-129), torch.int8, "int8_t"),
    "sub int16 -alpha": (lambda x: torch.sub(x, x, alpha=-32768), torch.int16, "int16_t"),
    "rsub uint8": (lambda x: torch.rsub(x, x, alpha=-256), torch.uint8, "uint8_t"),
    "add float16": (lambda x: torch.add(x, x, alpha=1e39), torch.float16, "float"),
    "add complex64": (lambda x: torch.add(x, x, alpha=1e39j), torch.complex64, r"c10::complex<float>"),
    "lerp bfloat16": (lambda x: torch.lerp(x, x, 1e39), torch.bfloat16, "float"),
    "lerp complex64": (lambda x: torch.lerp(x, x, 1e39), torch.complex64, r"c10::complex<float>"),
}


@pytest.mark.parametrize("case", SCALAR_OVERFLOWS)
def test_scalar_parameter_that_does_not_fit_raises_as_cuda(case):
    fn, dtype, cpp_type = SCALAR_OVERFLOWS[case]
    x = torch.ones(3, dtype=dtype, device="neuron")
    message = f"value cannot be converted to type {cpp_type} without overflow"
    with pytest.raises(RuntimeError, match=message):
        fn(x).cpu()
    with pytest.raises(RuntimeError, match=message):
        torch.compile(fn, backend="neuron")(x).cpu()


#: The same conversion in the eager kernels of activations, pointwise ops, the addmm family and pad
#: with a Scalar parameter: a float32 result converts to float on CPU and CUDA, a 16-bit one to
#: CUDA's type (the opmath float; the 16-bit type for hardshrink, multi_margin_loss and addr).
#: Compiled graphs hold PyTorch's decompositions of most of them, which convert nothing (as
#: inductor's on CUDA), so only eager calls are checked.
EAGER_SCALAR_OVERFLOWS = {
    "hardshrink float32": (lambda x, v: F.hardshrink(x, v), torch.float32, "float", 0.5, 1e308),
    "hardshrink float16": (lambda x, v: F.hardshrink(x, v), torch.float16, r"c10::Half", 0.5, 1e5),
    "leaky_relu float32": (lambda x, v: F.leaky_relu(x, v), torch.float32, "float", 0.1, 1e308),
    "elu bfloat16": (lambda x, v: F.elu(x, alpha=v), torch.bfloat16, "float", 1.0, 1e39),
    "celu float32": (lambda x, v: F.celu(x, alpha=v), torch.float32, "float", 1.0, 1e-50),  # 1 / alpha
    "softplus float32": (lambda x, v: F.softplus(x, beta=v), torch.float32, "float", 2.0, 1e308),
    "hardtanh float32": (lambda x, v: F.hardtanh(x, -v, v), torch.float32, "float", 2.0, 1e308),
    # 7e4 is beyond float16 but within float: the CPU raises "c10::Half", CUDA's kernel computes
    "clamp float16": (lambda x, v: torch.clamp(x, max=v), torch.float16, "float", 7e4, 1e39),
    "addcmul float32": (lambda x, v: torch.addcmul(x, x, x, value=v), torch.float32, "float", 2.0, 1e308),
    "addcdiv float16": (lambda x, v: torch.addcdiv(x, x, x, value=v), torch.float16, "float", 2.0, 1e39),
    "logit float32": (lambda x, v: torch.logit(x, v), torch.float32, "float", 0.1, 1e308),
    "histc float32": (lambda x, v: torch.histc(x, 4, 0, v), torch.float32, "float", 2.0, 1e308),
    "addmm alpha float32": (
        lambda x, v: torch.addmm(x.diag(), x.diag(), x.diag(), alpha=v),
        torch.float32,
        "float",
        2.0,
        1e308,
    ),
    "baddbmm beta float32": (
        lambda x, v: torch.baddbmm(x[None, :, None], x[None, :, None], x[None, None, :1], beta=v),
        torch.float32,
        "float",
        2.0,
        1e308,
    ),
    "addmv beta float16": (lambda x, v: torch.addmv(x, x.diag(), x, beta=v), torch.float16, "float", 2.0, 1e39),
    "addr alpha float16": (lambda x, v: torch.addr(x.diag(), x, x, alpha=v), torch.float16, r"c10::Half", 2.0, 1e5),
    "pad value float32": (lambda x, v: F.pad(x, (1, 1), value=v), torch.float32, "float", 2.0, 1e308),
    "multi_margin_loss float32": (
        lambda x, v: F.multi_margin_loss(x.reshape(1, 3), torch.tensor([0], device=x.device), margin=v),
        torch.float32,
        "float",
        1.0,
        1e308,
    ),
}


@pytest.mark.parametrize("case", EAGER_SCALAR_OVERFLOWS)
def test_eager_scalar_parameter_that_does_not_fit_raises_as_cuda(case):
    fn, dtype, cpp_type, valid, overflowing = EAGER_SCALAR_OVERFLOWS[case]
    x = torch.ones(3, dtype=dtype, device="neuron")
    fn(x, valid).cpu()  # the executable is built; the scalar stays a runtime input of it
    with pytest.raises(RuntimeError, match=f"^value cannot be converted to type {cpp_type} without overflow$"):
        fn(x, overflowing).cpu()


def test_scalar_parameters_at_the_limits_compute():
    # In range for the conversion each kernel makes: alpha 32767 is -32767 for sub, uint8 takes
    # integers down to -255, and float16 alpha 7e4 is a float on CUDA: 1 + 7e4 * -1 is -69999,
    # rounded once to float16's -inf, never 1 - inf * 1.
    ones = torch.ones(3, dtype=torch.int16)
    assert_matches_cpu(lambda x: torch.sub(x, x, alpha=32767), ones, atol=0, rtol=0)
    assert_matches_cpu(lambda x: torch.add(x, x, alpha=-255), ones.to(torch.uint8), atol=0, rtol=0)
    # c10 negates an integer Scalar as an int64, which wraps: -(-2**63) is -2**63 and fits
    assert_matches_cpu(lambda x: torch.sub(x, x, alpha=-(2**63)), ones.to(torch.int64), atol=0, rtol=0)
    x = torch.tensor([1.0, -1.0, 0.5], dtype=torch.float16)
    y = torch.tensor([-1.0, 1e-3, -1e-4], dtype=torch.float16)
    expected = (x.float() + 7e4 * y.float()).half()
    actual = torch.add(x.to("neuron"), y.to("neuron"), alpha=7e4).cpu()
    torch.testing.assert_close(actual, expected, atol=0, rtol=0)
    assert_matches_cpu(lambda a, b: torch.lerp(a, b, 7e4), x, y, atol=0, rtol=0)


@pytest.mark.parametrize("fn", [torch.sgn, torch.sign, torch.floor], ids=["sgn", "sign", "floor"])
def test_zero_gradients_stay_on_the_device(fn):
    # Their autograd formulas return at::_efficientzerotensor, which must be a neuron tensor.
    def run(x):
        return torch.autograd.grad(fn(x).sum(), x)

    assert_matches_cpu(run, torch.randn(4, requires_grad=True))


def test_erfinv_near_plus_and_minus_one_matches_cpu():
    x = torch.tensor([-0.9999, -0.9987144, -0.5, -0.01, 0.0, 0.3, 0.999, 0.9999, 0.99999994, 1.0, -1.0])
    assert_matches_cpu(torch.erfinv, x)


@pytest.mark.parametrize(
    "divide",
    [
        lambda x, y: x / 22.0,
        lambda x, y: x / y,
        lambda x, y: torch.div(x, 22.0, rounding_mode="floor"),
        lambda x, y: torch.floor(x / y[:1]),
        lambda x, y: torch.addcdiv(x, x, y[:1], value=0.5),
    ],
    ids=["by_number", "by_row", "floor_mode", "floor_of_quotient", "addcdiv"],
)
def test_division_by_a_broadcast_divisor_is_exact_as_on_cpu(divide):
    # XLA would multiply by the divisor's reciprocal: 44 * (1 / 22) rounds to 1.9999999.
    x = torch.arange(1.0, 2001.0).reshape(-1, 4)
    y = torch.tensor([22.0, 7.0, 13.0, 3.0])
    assert_matches_cpu(divide, x, y, atol=0, rtol=0)


# A Python number operand of a 16-bit float op is a wrapped 0-dim tensor of the operands' dtype:
# the CPU rounds it to that dtype first (bf16 0.7 == 0.7 is True). mul and div read the number's
# original value instead (ATen's BinaryOpsKernel.cpp, original_scalar_value).
NUMBER_OPERANDS = {
    "eq": lambda x, s: x == s,
    "lt": lambda x, s: x < s,
    "ge": lambda x, s: x >= s,
    "add": lambda x, s: x + s,
    "rsub": lambda x, s: s - x,
    "remainder": lambda x, s: x % s,
    "fmod": lambda x, s: torch.fmod(x, s),
    "rpow": lambda x, s: s**x,
    "pow": lambda x, s: x**s,  # the CPU kernel converts the exponent to the tensor's dtype
    "where": lambda x, s: torch.where(x > 1, x, s),
    "add_": lambda x, s: x.clone().add_(s),
    "mul_original_value": lambda x, s: x * s,
    "div_original_value": lambda x, s: x / s,
    "addcmul_value": lambda x, s: torch.addcmul(x, x, x, value=s),
}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("number", [0.7, 0.1, 1 / 3])
@pytest.mark.parametrize("op", NUMBER_OPERANDS)
def test_number_operands_of_16_bit_ops_are_rounded_as_on_cpu(op, number, dtype):
    x = torch.cat([torch.rand(500, generator=torch.Generator().manual_seed(0)) * 4, torch.tensor([0.7, 0.1, 1 / 3])])
    x = x.to(dtype)
    expected = NUMBER_OPERANDS[op](x, number)
    actual = NUMBER_OPERANDS[op](x.to("neuron"), number).cpu()
    torch.testing.assert_close(actual, expected, rtol=0, atol=0)


#: ATen's CPU kernels that round a product and a sum once: lerp's and add's ``vec::fmadd`` and
#: addcmul's ``self + value * t1 * t2``, which the compiler of the vectorized kernels contracts. The
#: device's XLA has no FMA instructions (runtime/xla_flags.py); lowering/fused_multiply_add.py fuses.
FUSED_MULTIPLY_ADDS = {
    "addcmul": lambda x, y, w: torch.addcmul(x, y, w, value=0.7),
    "addcmul value 1": lambda x, y, w: torch.addcmul(x, y, w),
    "lerp tensor weight": torch.lerp,
    "lerp small weight": lambda x, y, w: torch.lerp(x, y, 0.37),
    "lerp large weight": lambda x, y, w: torch.lerp(x, y, 0.77),
    # vec::fmadd(other, alpha, self) in ATen's add (ufunc/add.h); sub adds -alpha
    "add alpha": lambda x, y, w: torch.add(x, y, alpha=0.3),
    "sub alpha": lambda x, y, w: torch.sub(x, y, alpha=0.3),
    "add alpha, broadcast row": lambda x, y, w: torch.add(x.view(64, 64), y[:64], alpha=-1.7),
    "add_ alpha": lambda x, y, w: x.clone().add_(y, alpha=0.9),
    # not a fused multiply-add: (value * t1) / t2, then the sum, in this order
    "addcdiv": lambda x, y, w: torch.addcdiv(x, y, w + 0.5, value=-0.37),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("op", FUSED_MULTIPLY_ADDS)
def test_fused_multiply_adds_of_cpu_kernels_match_bit_for_bit(op, dtype):
    generator = torch.Generator().manual_seed(0)
    x, y = (torch.randn(4096, generator=generator) * 3).to(dtype), torch.randn(4096, generator=generator).to(dtype)
    weight = torch.rand(4096, generator=generator).to(dtype)
    expected = FUSED_MULTIPLY_ADDS[op](x, y, weight)
    actual = FUSED_MULTIPLY_ADDS[op](x.to("neuron"), y.to("neuron"), weight.to("neuron"))
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0)


#: 16-bit add/sub with an alpha over layouts the CPU runs as one loop in memory order: its vector
#: body fuses, the last ``numel % 32`` elements of each thread's range (AVX-512) go one by one in
#: c10::Half/BFloat16 arithmetic, rounding ``alpha * other`` first.
SCALAR_TAILS = {
    "add 1-d": ((1000,), lambda x, y: torch.add(x, y, alpha=2.5)),
    "sub, all tail": ((31,), lambda x, y: torch.sub(x, y, alpha=0.3)),
    "rsub": ((100,), lambda x, y: torch.rsub(x, y, alpha=-0.37)),
    "add_ in place": ((1000,), lambda x, y: x.clone().add_(y, alpha=-1e-3)),
    "add number": ((100,), lambda x, y: torch.add(x, 1.5, alpha=2.5)),
    "add 0-dim": ((100,), lambda x, y: torch.add(x, y[0], alpha=2.5)),
    "add two threads' ranges": ((70001,), lambda x, y: torch.add(x, y, alpha=2.5)),
    "add transposed": ((40, 33), lambda x, y: torch.add(x.t(), y.t(), alpha=0.3)),
    # strided inner steps: the CPU's basic loop, one by one everywhere; foreach as its slow path
    "add strided": ((22, 22), lambda x, y: torch.add(x[::2, ::2], y[::2, ::2], alpha=2.5)),
    "foreach strided": ((22, 22), lambda x, y: torch._foreach_add([x[::2, ::2], x], [y[::2, ::2], y], alpha=2.5)),
    "add channels-last": (
        (2, 3, 5, 7),
        lambda x, y: torch.add(*(t.contiguous(memory_format=torch.channels_last) for t in (x, y)), alpha=2.5),
    ),
}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", SCALAR_TAILS)
def test_16_bit_add_with_alpha_rounds_as_the_cpus_loop_tail(case, dtype):
    shape, op = SCALAR_TAILS[case]
    generator = torch.Generator().manual_seed(0)
    x, y = (torch.randn(shape, generator=generator).to(dtype) for _ in range(2))
    actual = op(x.to("neuron"), y.to("neuron"))
    actual = [t.cpu() for t in actual] if isinstance(actual, (list, tuple)) else actual.cpu()
    torch.testing.assert_close(actual, op(x, y), rtol=0, atol=0)


def test_addcmul_rounds_once_at_ties_infinities_and_nans():
    # (1 + 2**-12) ** 2 lies half an ulp above 1 + 2**-11: rounded once it keeps 2**-24 after the
    # subtraction, rounded twice it is 0; inf * 1 - inf is NaN, 1e30 * 1e30 - inf is -inf.
    tie = 1 + 2**-12
    self = torch.tensor([-(1 + 2**-11), -float("inf"), 1.0, -float("inf"), -0.0])
    tensor1 = torch.tensor([tie, float("inf"), float("nan"), 1e30, 0.0])
    tensor2 = torch.tensor([tie, 1.0, 1.0, 1e30, -0.0])
    expected = torch.addcmul(self, tensor1, tensor2)
    assert expected[0].item() == 2**-24
    actual = torch.addcmul(self.to("neuron"), tensor1.to("neuron"), tensor2.to("neuron"))
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("value", [2.5, -2.5, 3])
def test_addcmul_of_integers_truncates_a_float_value_as_on_cpu(value):
    a = torch.tensor([1, 2, 3, -4])
    assert_matches_cpu(lambda x: torch.addcmul(x, x, x, value=value), a)


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8])
@pytest.mark.parametrize("rounding_mode", ["trunc", "floor"])
def test_integer_division_at_the_dtypes_limits_matches_cpu(dtype, rounding_mode):
    # |min| does not fit the dtype: a trunc division through abs() flipped the sign of min // 2.
    info = torch.iinfo(dtype)
    x = torch.tensor([info.min, info.min, info.min + 1, info.max, info.max, info.min, 7], dtype=dtype)
    y = torch.tensor([2, 3, 2, 2, 3, 1, 7], dtype=dtype)
    if dtype != torch.uint8:
        x, y = (
            torch.cat([x, torch.tensor([info.max, -7], dtype=dtype)]),
            torch.cat([y, torch.tensor([-2, 2], dtype=dtype)]),
        )
    if dtype in (torch.int8, torch.int16):  # min // -1 wraps; in 32 and 64 bits the CPU traps (SIGFPE)
        x, y = torch.cat([x, torch.tensor([info.min], dtype=dtype)]), torch.cat([y, torch.tensor([-1], dtype=dtype)])
    expected = torch.div(x, y, rounding_mode=rounding_mode)
    actual = torch.div(x.to("neuron"), y.to("neuron"), rounding_mode=rounding_mode).cpu()
    torch.testing.assert_close(actual, expected, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex32])
def test_complex_pow_of_small_numbers_is_computed_as_atens_products(dtype):
    # ATen's pow_tensor_scalar_kernel computes x ** 2 as x * x and x ** -1 as 1 / x (3, 0.5, -0.5 and
    # -2 likewise); XLA's complex pow, through exp(log), was off by up to 1.4e-6 in complex64 (a
    # float16 step in complex32) for x ** 2 and square(). The square is compared with the CPU's
    # product: XLA's own complex product may differ from it in the last bit, depending on fusion.
    x = torch.randn(257, dtype=torch.complex64, generator=torch.Generator().manual_seed(0)).to(dtype)
    on_neuron = x.to("neuron")
    bits = torch.int32 if dtype == torch.complex64 else torch.int16

    def same_bits(a, b):
        return torch.equal(a.cpu().view(bits), b.cpu().view(bits))

    assert same_bits(on_neuron**2, x * x)
    assert same_bits(on_neuron.square(), x * x)
    assert same_bits(on_neuron**-1, 1 / on_neuron)
    wide = x.to(torch.complex64)
    for exponent in (2, 3, 0.5, -0.5, -1, 1.7):
        torch.testing.assert_close(
            (on_neuron**exponent).cpu().to(torch.complex64),
            (wide**exponent).to(dtype).to(torch.complex64),
            rtol=4e-3 if dtype == torch.complex32 else 1.3e-6,
            atol=1e-5,
        )


#: Complex parts covering zeros of both signs, infinities, NaN, overflow and underflow of exp(log).
#: Exponents stay below 1e30, whose powers need the sine of numbers near 1e30 (its sign differs).
COMPLEX_PARTS = [0.0, -0.0, 1.0, -2.5, 0.5, 3.0, INF, -INF, NAN, 1e30, -1e-30]
EXPONENT_PARTS = [*COMPLEX_PARTS[:-2], 40.0, -1e-30]
TINY = torch.finfo(torch.float32).tiny


def _complex_grid() -> tuple[torch.Tensor, torch.Tensor]:
    bases = torch.tensor([complex(a, b) for a in COMPLEX_PARTS for b in COMPLEX_PARTS])
    exponents = torch.tensor([complex(a, b) for a in EXPONENT_PARTS for b in EXPONENT_PARTS])
    return bases.repeat_interleave(len(exponents)), exponents.repeat(len(bases))


def test_complex_pow_of_special_values_matches_cpu():
    # The CPU's complex pow is glibc's cpow, cexp(exponent * clog(base)). XLA's special-cases a zero
    # base: 0 ** 0 (any signs) was 1 + 0j where the CPU gives NaN + NaN i, 0 ** (1 + 1j) NaN where it
    # gives 0, and 0 ** -1 NaN where it gives inf + NaN i; and 4,500 of these 14,641 pairs with an
    # infinite or NaN part (1j ** inf i: 0 on the CPU) came out NaN + NaN i.
    base, exponent = _complex_grid()
    assert_matches_cpu(torch.pow, base, exponent, atol=TINY, rtol=1e-5)  # subnormals flush (usage.md)
    zero = torch.zeros(4, dtype=torch.complex64)
    assert_matches_cpu(lambda b: (b**b, torch.pow(0j, b), torch.pow(0, b), b ** torch.tensor(0j)), zero, atol=0, rtol=0)


def test_complex32_pow_of_zeros_is_nan_as_in_complex64():
    # The CPU has no complex32 pow (CUDA has): complex32 computes as complex64, whose 0 ** 0 is NaN.
    base = torch.tensor([0j, 0j, 1j, 0j], dtype=torch.complex32)
    exponent = torch.tensor([0j, -0.0 + 0j, 0j, 2 + 1j], dtype=torch.complex32)
    expected = (base.to(torch.complex64) ** exponent.to(torch.complex64)).to(torch.complex32)
    actual = (base.to("neuron") ** exponent.to("neuron")).cpu()
    assert actual.dtype == torch.complex32
    torch.testing.assert_close(actual.to(torch.complex64), expected.to(torch.complex64), equal_nan=True)


@pytest.mark.parametrize("number", [0, 1, 0j, 1 + 0j, 1.7, -3, 2 + 1j, INF, NAN], ids=repr)
def test_complex_pow_of_a_number_matches_cpu(number):
    # ATen's pow_out fills 1 for an exponent of 0 and copies the base for 1, and fills 1 for a base of
    # 1: XLA's pow gave (-2.5 + 1e-30i) ** 1 as -2.5 - 2.2e-7i and (inf i) ** 1 as NaN + NaN i.
    base, exponent = _complex_grid()
    assert_matches_cpu(lambda b: b**number, base[::11], atol=TINY, rtol=1e-5)
    assert_matches_cpu(lambda e: torch.pow(number, e), exponent[:121], atol=TINY, rtol=1e-5)


SHIFTS = {
    "lshift-tensor": lambda a, s: a << s,
    "rshift-tensor": lambda a, s: a >> s,
    "lshift-scalar": lambda a, s: a << 3,
    "rshift-scalar": lambda a, s: a >> 2,
    "ilshift": lambda a, s: a.clone().__ilshift__(1),
    "irshift": lambda a, s: a.clone().__irshift__(s),
}


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int32, torch.int64])
@pytest.mark.parametrize("case", SHIFTS)
def test_shift_operators_run_natively_and_match_cpu(case, dtype):
    """``x << y`` and ``x <<= y`` (``__lshift__``, ``__ilshift__``) fell back to the CPU; shifts by the
    bit width or more give 0 (sign bits for >> of negatives), as on the CPU."""
    a = torch.tensor([1, -3, 5, 127, 0, -128, 64, 7]).to(dtype)
    s = torch.tensor([0, 1, 2, 7, 8, 9, 63, 64]).to(dtype)
    torch_neuronx.clear_op_tracking()
    assert_matches_cpu(SHIFTS[case], a, s)
    assert torch_neuronx.get_fallback_ops() == {}


BITWISE_OF_FLOATS = {
    "bitwise_and": (lambda f: torch.bitwise_and(f, f), "bitwise_and"),
    "and-operator": (lambda f: f & 1, "bitwise_and"),
    "or-int-float": (lambda f: torch.bitwise_or(f.int(), f), "bitwise_or"),
    "xor-operator": (lambda f: f ^ 1, "bitwise_xor"),
    "bitwise_not": (lambda f: torch.bitwise_not(f), "bitwise_not"),
    "lshift": (lambda f: f << 1, "lshift"),
    "rshift": (lambda f: torch.bitwise_right_shift(f, f), "rshift"),
    "complex": (lambda f: f.to(torch.complex64) & 1, "bitwise_and"),
}


@pytest.mark.parametrize("case", BITWISE_OF_FLOATS)
def test_bitwise_ops_of_floats_raise_cudas_error(case):
    """JAX's TypeError leaked (and turned ``f & 1`` into Python's "unsupported operand type")."""
    make, kernel = BITWISE_OF_FLOATS[case]
    with pytest.raises(NotImplementedError, match=f'^"{kernel}_cpu" not implemented for'):
        make(torch.ones(3))
    with pytest.raises(NotImplementedError, match=f'^"{kernel}_cuda" not implemented for'):
        make(torch.ones(3, device="neuron"))


SHIFT_OPERATORS_AS_ATEN = {
    # ``x << y`` is bitwise_left_shift in ATen; PyTorch's Python meta of __lshift__ refused bool
    # tensors (which ATen shifts into int64) and worded float shifts its own way.
    "bool-lshift-number": lambda b, t: b << 3,
    "bool-rshift-tensor": lambda b, t: b >> t,
    "int-lshift-float": lambda b, t: t << 2.5,
    "bool-ilshift": lambda b, t: b.clone().__ilshift__(3),
    "int-irshift": lambda b, t: t.clone().__irshift__(1),
}


@pytest.mark.parametrize("case", SHIFT_OPERATORS_AS_ATEN)
def test_shift_operators_compute_and_refuse_as_aten(case):
    make = SHIFT_OPERATORS_AS_ATEN[case]
    b, t = torch.tensor([True, False, True]), torch.tensor([1, 2, 3])
    try:
        expected = make(b, t)
    except (RuntimeError, NotImplementedError) as cpu_error:
        with pytest.raises(type(cpu_error)) as neuron_error:
            make(b.to("neuron"), t.to("neuron"))
        assert str(neuron_error.value) == str(cpu_error).replace("_cpu", "_cuda")
        return
    torch.testing.assert_close(make(b.to("neuron"), t.to("neuron")).cpu(), expected)


SHARED_META_REFUSALS = {
    # ATen's structured metas, shared by CPU and CUDA, that PyTorch's Python meta kernels lack or
    # cannot make (they see a Python number where ATen sees a wrapped tensor of its dtype).
    "bool-minus-number": lambda b, c: b - 1,
    "number-minus-bool": lambda b, c: 1 - b,
    "int-minus-True": lambda b, c: b.long() - True,
    "bool-sub-bool": lambda b, c: torch.sub(b, b),
    "rsub-bool": lambda b, c: torch.rsub(b, 2),
    "sign-complex": lambda b, c: torch.sign(c),
    "heaviside-complex": lambda b, c: torch.heaviside(c, c),
    "heaviside-into-complex-out": lambda b, c: torch.heaviside(c.real, c.real, out=torch.empty_like(c)),
}


@pytest.mark.parametrize("case", SHARED_META_REFUSALS)
def test_refusals_of_atens_shared_metas_raise_as_cpu(case):
    make = SHARED_META_REFUSALS[case]
    b, c = torch.tensor([True, False]), torch.tensor([1 + 2j, 0j])
    with pytest.raises((RuntimeError, NotImplementedError)) as cpu_error:
        make(b, c)
    with pytest.raises(type(cpu_error.value)) as neuron_error:
        make(b.to("neuron"), c.to("neuron"))
    assert str(neuron_error.value) == str(cpu_error.value)
    assert not getattr(neuron_error.value, "__notes__", None)  # raised before tracing: no JAX notes


def test_shifts_of_bools_raise_as_on_cpu_and_cuda():
    b = torch.ones(3, dtype=torch.bool, device="neuron")
    with pytest.raises(NotImplementedError, match="\"lshift_cuda\" not implemented for 'Bool'"):
        torch.bitwise_left_shift(b, b)


SCALAR_FIRST_BITWISE = {
    "and": lambda x: torch.bitwise_and(3, x),
    "or": lambda x: torch.bitwise_or(4, x),
    "xor": lambda x: torch.bitwise_xor(5, x),
    "lshift": lambda x: torch.bitwise_left_shift(3, x),
    "rshift-operator": lambda x: 300 >> x,
    "lshift-tensor-scalar": lambda x: torch.bitwise_left_shift(x, 2),
}


@pytest.mark.parametrize(
    ("case", "dtype"),
    [
        (case, dtype)
        for case in SCALAR_FIRST_BITWISE
        for dtype in (torch.int8, torch.int64, torch.bool)
        if not (dtype == torch.bool and "shift" in case)  # shifts of bool are refused, tested above
    ],
)
def test_bitwise_ops_of_a_scalar_and_a_tensor_match_cpu(case, dtype):
    """Their composite kernels wrap the scalar in a 0-dim CPU tensor, which the meta call could not
    pass back to a Tensor argument ("Expected a value of type 'Tensor' for argument 'self'")."""
    assert_matches_cpu(SCALAR_FIRST_BITWISE[case], torch.tensor([1, 2, 3, 0]).to(dtype))


_TRANSPOSED_WITH_BROADCAST = {
    "copysign": torch.copysign,
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "floor_divide": torch.floor_divide,
    "heaviside": torch.heaviside,
    "logaddexp": torch.logaddexp,
    "logical_and": torch.logical_and,
    "logical_xor": torch.logical_xor,
    "xlogy": torch.xlogy,
    "pow_scalar_base": lambda a, b: torch.pow(2, a),
    "add": torch.add,
}


@pytest.mark.parametrize("case", _TRANSPOSED_WITH_BROADCAST)
def test_result_strides_are_tensor_iterators(case):
    # Their Python meta kernels are compositions whose strides follow the broadcast operand: the
    # result was contiguous where CPU and CUDA keep the transposed operand's layout (or, for
    # pow(scalar, tensor), allocate a contiguous one where the Python meta kept the layout).
    fn = _TRANSPOSED_WITH_BROADCAST[case]
    a, b = torch.rand(5, 10).t() + 0.5, torch.rand(5) + 0.5
    expected = fn(a, b)
    actual = fn(a.to("neuron"), b.to("neuron"))
    assert actual.stride() == expected.stride()
    torch.testing.assert_close(actual.cpu(), expected)


_UNARY_INTO_OUTS = {
    "add": (lambda x, outs: torch.add(x, 1, out=outs[0]), [torch.float32]),
    "abs": (lambda x, outs: torch.abs(x, out=outs[0]), [torch.float32]),
    "frexp": (lambda x, outs: torch.frexp(x, out=tuple(outs)), [torch.float32, torch.int32]),
}


@pytest.mark.parametrize("case", _UNARY_INTO_OUTS)
@pytest.mark.parametrize("layout", ["transposed", "channels_last"])
def test_a_resized_out_takes_tensor_iterators_layout(layout, case):
    # TensorIterator restrides an out= tensor it resizes to its inputs' layout; neuron's stayed
    # contiguous (fresh-user trials: torch.add(xt, 1, out=torch.empty(0)), torch.abs), and frexp's
    # second empty out was read as an input, which raised an expand error (helper-27).
    x = (
        torch.randn(4, 3).t()
        if layout == "transposed"
        else torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    )
    fn, dtypes = _UNARY_INTO_OUTS[case]
    expected = [torch.empty(0, dtype=dtype) for dtype in dtypes]
    actual = [torch.empty(0, dtype=dtype, device="neuron") for dtype in dtypes]
    fn(x, expected)
    fn(x.to("neuron"), actual)
    assert [t.stride() for t in actual] == [t.stride() for t in expected]
    torch.testing.assert_close([t.cpu() for t in actual], expected)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize(
    "op", [torch.add, torch.mul, torch.div, torch.floor_divide, torch.pow, torch.atan2], ids=lambda op: op.__name__
)
def test_an_integer_tensor_beside_a_16_bit_one_is_rounded_to_it_first(op, dtype):
    """(The second operand of mul, div and floor_divide, when it has one element, is read at its own
    value: see the next test.)"""
    # TensorIterator casts each operand to the common dtype before the kernel widens it to float:
    # int32 2049 beside float16 is 2048; neuron widened the integer directly (13 of 60 products differed).
    integers = torch.arange(2040, 2100, dtype=torch.int32)
    assert_matches_cpu(op, integers, torch.full((60,), 1.0009765625, dtype=dtype), atol=0, rtol=0)


SINGLE_ELEMENT_OPERANDS = {
    "mul_int_0dim_first": lambda h: torch.mul(torch.tensor(2049, device=h.device), h),
    "true_divide_number_first": lambda h: torch.true_divide(2049, h),
    "mul_one_element_int_second": lambda h: h * torch.tensor([2049], dtype=torch.int32, device=h.device),
    "floor_divide_one_element_int_second": lambda h: h // torch.tensor([2049], device=h.device),
    "mul_float32_0dim_second": lambda h: h * torch.tensor(2049.0, device=h.device),
}


@pytest.mark.parametrize("case", SINGLE_ELEMENT_OPERANDS)
def test_a_single_element_operand_of_mul_and_div_is_read_as_the_cpu_reads_it(case):
    # ATen's mul/div kernels read a single-element second operand at its own value (is_scalar(2),
    # original_scalar_value); a first operand is cast to the 16-bit common dtype (helper-55).
    h = torch.tensor([-0.2080078125, 4.2578125, 4096.0], dtype=torch.float16)
    assert_matches_cpu(SINGLE_ELEMENT_OPERANDS[case], h, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize(
    "call",
    [lambda x, y: torch.xlogy(x, y), lambda x, y: torch.xlogy(x, 0.7), lambda x, y: torch.xlogy(0.7, y)],
    ids=["tensors", "number_other", "number_self"],
)
def test_16_bit_xlogy_rounds_the_logarithm_first_as_the_cpu(call, dtype):
    # The CPU's kernel computes x * std::log(y) in c10::BFloat16/Half: 13% of bfloat16 results
    # differed by an ulp in float32 once (helper-55).
    generator = torch.Generator().manual_seed(0)
    x, y = torch.rand(2000, generator=generator) * 10, torch.rand(2000, generator=generator) * 10
    x[:3], y[:3] = torch.tensor([0.0, 0.0, 1.0]), torch.tensor([0.0, float("nan"), 0.0])
    assert_matches_cpu(call, x.to(dtype), y.to(dtype), atol=0, rtol=0)


FLOOR_DIVISIONS = {
    "tensor": lambda a, b: torch.floor_divide(a, b),
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "python_number": lambda a, b: torch.floor_divide(a, 0.1),
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    # a single-element divisor is read at its own value, in float, once (is_scalar(2); helper-55)
    "0dim_float32_divisor": lambda a, b: a // torch.tensor(0.3, device=a.device),
    "one_element_divisor": lambda a, b: a // b[:1],
    "trunc_by_one_element": lambda a, b: torch.div(a, b[:1], rounding_mode="trunc"),
    # a number on the left is rounded to the 16-bit dtype first (0.1 // bf16(0.1) is 1)
    "number_dividend": lambda a, b: 0.7 // b,
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("case", FLOOR_DIVISIONS)
def test_floor_division_is_pythons_through_fmod_as_the_cpu(case, dtype):
    # c10's div_floor_floating: 1 // 0.1 is 9 (floor(1 / 0.1) is 10), 1e-30 // -1e10 is -1 (the
    # quotient flushed to -0); 16-bit tensors round each step, by a Python number once.
    generator = torch.Generator().manual_seed(0)
    a = torch.cat([torch.randn(4000, generator=generator) * 10, torch.tensor([1.0, 1e-30, 7.0, -0.0, 5.5, 0.0])])
    b = torch.cat([torch.randn(4000, generator=generator), torch.tensor([0.1, -1e10, 0.7, 3.0, 0.0, -2.0])])
    assert_matches_cpu(FLOOR_DIVISIONS[case], a.to(dtype), b.to(dtype), atol=0, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("op", [torch.add, torch.sub, torch.mul, torch.div, torch.maximum], ids=lambda op: op.__name__)
@pytest.mark.parametrize("other_dtype", [torch.float32, torch.int64], ids=str)
def test_a_wider_0dim_tensor_operand_is_rounded_to_the_16_bit_common_dtype(op, dtype, other_dtype):
    # TensorIterator reads a 0-dim operand as a scalar of the common dtype: float16 [1, 0] +
    # tensor(2049.) is [2048, 2048] on the CPU, as 2049 becomes 2048 first; neuron computed 2050
    # (helper-25's trial). mul and div read the scalar's own value, as for a Python number.
    x = torch.tensor([1.0, 0.0, 3.0], dtype=dtype)
    other = torch.tensor(2049, dtype=other_dtype) if other_dtype == torch.int64 else torch.tensor(2049.0)
    assert_matches_cpu(op, x, other, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize(
    "op",
    [
        lambda x, t, s: torch.addcmul(x, t, s),
        lambda x, t, s: torch.addcmul(x, s, t),
        lambda x, t, s: torch.addcdiv(x, t, s),
        lambda x, t, s: torch.lerp(x, t, s),
        lambda x, t, s: torch._foreach_addcmul([x], [t], [s])[0],
    ],
    ids=["addcmul_tensor2", "addcmul_tensor1", "addcdiv", "lerp_weight", "foreach_addcmul"],
)
def test_a_wider_0dim_tensor_in_any_operand_position_is_rounded(op, dtype):
    # Every tensor of a TensorIterator op is an operand, cast to the common dtype: addcmul's 0-dim
    # float32 tensor1/tensor2 (ASGD's eta) became bfloat16 0.333984375 on the CPU, where neuron
    # kept 1/3 (a twelfth of the elements differed; helper-49).
    x, t = torch.randn(64).to(dtype), torch.randn(64).to(dtype)
    assert_matches_cpu(op, x, t, torch.tensor(1 / 3), atol=0, rtol=0)


@pytest.mark.parametrize("exponent", [2, 3, -1, -2, 2.0, 0.5, -0.5, 0, 1])
def test_pow_of_a_number_computes_as_the_cpu_kernel(exponent):
    # ATen's CPU kernel computes 2, 3 and -2 as products, 0.5, -0.5 and -1 as sqrt, rsqrt and the
    # reciprocal; XLA's pow of the runtime exponent gave x ** 3 one ulp off in a quarter of randn's
    # float32 elements and (-0.) ** 0.5 +0 (helper-27's trial). The CPU's sqrt and rsqrt round
    # differently from XLA's in the last bit, so their values are compared at powers of 4.
    torch.manual_seed(0)
    x = torch.randn(4096) if exponent not in (0.5, -0.5) else 4.0 ** torch.arange(-20, 20.0)
    x = torch.cat([x, torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan")])])
    actual = (x.to("neuron") ** exponent).cpu()
    torch.testing.assert_close(actual, x**exponent, rtol=0, atol=0, equal_nan=True)
    assert torch.equal(actual.signbit() & ~actual.isnan(), (x**exponent).signbit() & ~actual.isnan())


@pytest.mark.parametrize("decimals", [1000, -1000, 309, 39, 38, -39, 3, -2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_round_with_decimals_past_a_doubles_range_is_nan_as_on_cpu(decimals, dtype):
    # 10**|decimals| is inf beyond 1e308 (the CPU's std::pow) and in float32 from 1e39; Python's
    # 10.0**1000 raised OverflowError.
    x = torch.tensor([1.5, 2.25, -0.0, 0.0, 123.456, 1e30], dtype=dtype)
    assert_matches_cpu(lambda t: torch.round(t, decimals=decimals), x)


@pytest.mark.parametrize(
    "replacements",
    [{"nan": 1e39, "posinf": -1e39}, {"nan": 1e39}, {"nan": float("inf"), "posinf": float("nan")}, {"neginf": 5.0}],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.complex64])
def test_nan_to_num_replaces_each_element_by_its_own_value(replacements, dtype):
    # jnp.nan_to_num replaced in turn: a NaN replaced by inf became posinf; a replacement beyond the
    # dtype saturated instead of becoming inf as the CPU's cast makes it.
    x = torch.tensor([float("nan"), float("inf"), -float("inf"), 1.0, -0.0])
    x = torch.complex(x, x.flip(0)) if dtype.is_complex else x.to(dtype)
    assert_matches_cpu(lambda t: torch.nan_to_num(t, **replacements), x)


# --- exp2, sinh, cosh: within an ulp or two of the CPU's Sleef kernels (lowering/exponential.py) --------

#: Two float32 ulps, relative: XLA's own exp2 was 67 ulps off at |x| = 100, its sinh/cosh 24 at 60.
TWO_ULPS = {"rtol": 2 * 2.0**-23, "atol": 0.0}


def test_exp2_of_integers_is_exact():
    # Normal results only: computations flush float32 subnormals (docs/usage.md).
    exponents = torch.arange(-126, 128, dtype=torch.float32)
    assert_close(torch.exp2(exponents.to("neuron")).cpu(), torch.exp2(exponents), rtol=0, atol=0)
    assert torch.exp2(torch.tensor([128.0, -150.0], device="neuron")).cpu().tolist() == [INF, 0.0]


@pytest.mark.parametrize("op", [torch.exp2, torch.sinh, torch.cosh], ids=lambda op: op.__name__)
def test_exponentials_are_within_two_ulps_of_cpu(op):
    # The CPU's vectorized sinh/cosh overflow from 88.72 (Sleef's range) where its scalar path and
    # CUDA's give the finite value up to 89.41: the grid stays below 88.
    x = torch.cat([torch.linspace(-88, 88, 40001), torch.linspace(-1, 1, 4001), torch.tensor([0.0, -0.0])])
    assert_close(op(x.to("neuron")).cpu(), op(x), **TWO_ULPS)
    assert_close(op(x.to("neuron").bfloat16()).cpu(), op(x.bfloat16()), rtol=0, atol=0)
    assert_close(op(x.to("neuron").half()).cpu(), op(x.half()), rtol=0, atol=0)
    assert_matches_cpu(op, _special(torch.float32))


@pytest.mark.parametrize("op", [torch.sinh, torch.cosh], ids=lambda op: op.__name__)
def test_sinh_cosh_stay_finite_until_their_own_overflow(op):
    # cosh(89.) is 2.2e38: exp(89.) overflows first. The CPU's scalar path (a short tensor) is the reference.
    x = torch.tensor([88.8, 89.0, -89.4, 89.5])
    assert_close(op(x.to("neuron")).cpu(), op(x), **TWO_ULPS)
    assert torch.isfinite(op(x.to("neuron"))[:3]).all()


@pytest.mark.parametrize("op", [torch.sinh, torch.cosh], ids=lambda op: op.__name__)
def test_complex_sinh_cosh_take_accurate_real_parts(op):
    # glibc's csinh/ccosh multiply sinh x and cosh x by cos y and sin y: XLA's real sinh/cosh made
    # them 1.6e-6 off at |x| ~ 60 (10x the float32 tolerance's share); now 1.6e-7.
    generator = torch.Generator().manual_seed(0)
    real = torch.empty(4096).uniform_(-80, 80, generator=generator)
    imag = torch.empty(4096).uniform_(-3, 3, generator=generator)
    z = torch.complex(real, imag)
    assert_close(op(z.to("neuron")).cpu(), op(z), rtol=4e-7, atol=0)


def test_erfc_tail_is_within_four_ulps_of_cpu():
    # XLA's erfc past 1 is exp(-x * x) times a rational function: the square's rounding made it up
    # to 64 ulps off at x = 8.5. Up to 9 (beyond, results are subnormal, flushed).
    x = torch.linspace(1, 9, 20001)
    assert_close(torch.special.erfc(x.to("neuron")).cpu(), torch.special.erfc(x), rtol=4 * 2.0**-23, atol=0)
    assert_matches_cpu(torch.special.erfc, torch.tensor(SPECIAL + [12.0, 1e20, -1e20, 3.4e38]))


def test_lgamma_is_within_a_few_ulps_of_cpu_on_positive_reals():
    # XLA's Lanczos values were 4.8e-7 at lgamma(1.) and lgamma(2.) (exactly 0), and up to 47 ulps
    # off in (3, 10] (lowering/log_gamma.py). Near the zeros the tolerance is absolute.
    x = torch.cat([torch.linspace(0.01, 10, 40001), torch.tensor([1.0, 2.0, 3.0, 1e-30, 1e4])])
    assert_close(torch.lgamma(x.to("neuron")).cpu(), torch.lgamma(x), rtol=3 * 2.0**-23, atol=1.2e-7)
    assert torch.lgamma(torch.tensor([1.0, 2.0], device="neuron")).cpu().tolist() == [0.0, 0.0]
    assert_matches_cpu(torch.lgamma, torch.tensor(SPECIAL + [-1.0, -2.0, 3e38]))
