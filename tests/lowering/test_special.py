"""Special functions on neuron against CPU: Bessel, gamma and error-function families, orthogonal
polynomials (degrees given as tensors, negative, fractional and non-finite), the domain edges
(NaN, infinities, poles), and the remaining pointwise ops (angle, frexp, gcd/lcm, complex, polar,
logspace, hash_tensor)."""

from __future__ import annotations

import math

import mpmath
import pytest
import torch

from tests.utils import assert_matches_cpu

NAN, INF = float("nan"), float("inf")
#: Special values and each branch of the piecewise approximations (2, 2.09, 5, 8 and beyond).
EDGES = [NAN, INF, -INF, 0.0, -0.0, 1e-6, 0.5, -0.5, 1.0, -1.0, 2.0, 2.5, -2.5, 5.0, 7.5, 8.0, 9.5, -9.5, 30.0, -60.0]


def _values(dtype: torch.dtype) -> torch.Tensor:
    """Every edge plus a dense sweep of [-12, 12], in ``dtype`` (integers: the integers of the sweep)."""
    if not dtype.is_floating_point:
        return torch.arange(-12, 13).to(dtype) if dtype != torch.uint8 else torch.arange(0, 25).to(dtype)
    return torch.cat([torch.tensor(EDGES), torch.linspace(-12, 12, 241)]).to(dtype)


UNARY = [
    "i0e",
    "i1",
    "i1e",
    "ndtri",
    "log_ndtr",
    "erfcx",
    "entr",
    "airy_ai",
    "bessel_j0",
    "bessel_j1",
    "bessel_y0",
    "bessel_y1",
    "modified_bessel_i0",
    "modified_bessel_i1",
    "modified_bessel_k0",
    "modified_bessel_k1",
    "scaled_modified_bessel_k0",
    "scaled_modified_bessel_k1",
    "spherical_bessel_j0",
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool], ids=str)
@pytest.mark.parametrize("name", UNARY)
def test_unary_special_function_matches_cpu(name, dtype):
    """Integers and bools compute in float32 (INT_TO_FLOAT); the edge values pick each branch."""
    x = _values(dtype) if dtype != torch.bool else torch.tensor([True, False])
    if name == "ndtri" and dtype == torch.float32:
        x = torch.cat([x, torch.rand(64), torch.tensor([1e-30, 1 - 1e-7])])
    assert_matches_cpu(getattr(torch.special, name), x)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("name", ["i0e", "i1", "i1e", "entr"])
def test_unary_special_function_in_16_bit_floats_matches_cpu(name, dtype):
    assert_matches_cpu(getattr(torch.special, name), _values(dtype))


def test_erfcx_beyond_float32_erfc_underflow_matches_cpu():
    """jax's exp(x**2) erfc(x) is 0 once erfc underflows (x > 9.19 in float32); PyTorch's is not."""
    x = torch.cat([torch.linspace(4, 12, 801), torch.logspace(1, 30, 60)])
    assert_matches_cpu(lambda t: (torch.special.erfcx(t), torch.special.log_ndtr(-t * 2**0.5)), x)


def test_airy_ai_far_from_zero_matches_cpu():
    """The oscillating expansion's phase 2/3 |x|**1.5 must divide by 3 exactly (XLA would multiply by
    a rounded 1/3), or the phase is an ulp off for large |x|."""
    assert_matches_cpu(torch.special.airy_ai, torch.linspace(-400, 110, 5101))


@pytest.mark.parametrize("name", ["xlog1py", "zeta"])
@pytest.mark.parametrize("form", ["tensors", "number_first", "number_second"])
def test_binary_special_function_matches_cpu(name, form):
    """xlog1py: 0 where self is 0 unless other is NaN. zeta: inf at x = 1 and at non-positive
    integer q, NaN for x < 1 and for non-integer x with q < 0."""
    op = getattr(torch.special, name)
    x = torch.tensor([0.0, 0.0, 1.0, 2.0, 2.5, 3.0, 0.5, NAN, 4.0, 2.0, 3.0, -1.0])
    y = torch.tensor([NAN, -1.0, 0.0, -2.0, -1.5, 0.5, 2.0, 1.0, INF, -0.5, 7.0, -0.9])
    if form == "tensors":
        assert_matches_cpu(op, x, y)
    elif form == "number_first":
        assert_matches_cpu(lambda t: op(3.0, t), y)
    else:
        assert_matches_cpu(lambda t: op(t, 2.0), x)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=str)
def test_polygamma_matches_cpu(n, dtype):
    """For n = 1 the negative non-integers are left to the mpmath test: PyTorch's trigamma reflects
    with sin(pi x) of the unreduced float x, 7e-6 off at x = -11.9 and 50% off 2e-7 from a pole."""
    x = _values(dtype)
    if n == 1:
        x = x[~(x < 0) | (x == x.floor())]
    assert_matches_cpu(lambda t: (torch.polygamma(n, t), torch.special.polygamma(n, t)), x)


@pytest.mark.parametrize("n", [12, 16, 20, 32, 34, 35, 40, 60])
def test_polygamma_whose_zeta_sum_underflows_or_factorial_overflows_is_exact(n):
    # XLA flushes the subnormal terms the CPU keeps to a few bits: polygamma(20, 60.) was 20% low,
    # (20, 100.) -0.0 for -1.3e-23; float32's n! is inf from n = 35, where the CPU gives inf or NaN
    # for finite values ((40, 10.) is -8.3e6). neuron's are mpmath's within float32 (the CPU's are
    # 10-50% off for (12, 4400.) and (32, 22.7)).
    x = torch.tensor([2.5, 10.0, 18.7, 22.7, 60.0, 100.0, 500.0, 4400.0])
    expected = _mpmath_polygamma(n, x)
    tiny = torch.finfo(torch.float32).tiny  # a subnormal result is flushed (docs/usage.md)
    torch.testing.assert_close(torch.polygamma(n, x.to("neuron")).cpu(), expected, rtol=2e-6, atol=tiny)


def test_zeta_whose_terms_are_subnormal_follows_the_cpu():
    # zeta(2., 1e20) was 0 for 1e-20: each term (k + q)**-2 is a subnormal XLA flushes.
    x, q = torch.tensor([21.0, 30.0, 2.0, 10.0, 1.5]), torch.tensor([60.0, 10.0, 1e20, 5.0, 3.0])
    expected = torch.special.zeta(x, q)
    torch.testing.assert_close(torch.special.zeta(x.to("neuron"), q.to("neuron")).cpu(), expected, rtol=3e-7, atol=0)


def test_polygamma_of_negative_order_raises_as_cpu():
    with pytest.raises(RuntimeError, match="polygamma"):
        torch.polygamma(-1, torch.ones(2, device="neuron")).cpu()


def _mpmath_polygamma(n: int, x: torch.Tensor) -> torch.Tensor:
    """psi^(n) of each float32 value of ``x`` by mpmath, rounded to float32 (+-inf beyond its range).
    mpmath sums zeta(n + 1, x) too, whose terms for x < 0 cancel to about (2 |x| + 4)**-(n+1) of
    their size: the precision covers that with 30 digits to spare (checked against 40 more)."""
    values = []
    for value in x.tolist():
        digits = 30 + int((n + 1) * math.log10(2 * abs(value) + 4))
        with mpmath.workdps(digits):
            exact = mpmath.polygamma(n, mpmath.mpf(value))
        with mpmath.workdps(digits + 40):
            assert abs(exact - mpmath.polygamma(n, mpmath.mpf(value))) <= abs(exact) * 1e-20
        values.append(float(exact) if abs(exact) < 1e300 else math.copysign(INF, exact))
    return torch.tensor(values, dtype=torch.float64).to(torch.float32)


#: Negative non-integers: near the poles (-k +- 1e-3, -13 + 2**-20), at and near the half-integers
#: (where psi^(n) of even n crosses zero: PyTorch's zeta sum cancels most there), and far out.
NEGATIVE_NON_INTEGERS = [-0.3, -0.999, -1e-6, -1.5, -2.7, -7.25, -20.5, -100.5, -100.37, -1000.25, -0.5, -3.5 + 2**-20,
                         -19.5 - 1e-3, -5 + 1e-3, -5 - 1e-3, -20 + 1e-3, -13 + 2**-20, -33.3, -0.49, -2.51]  # fmt: skip


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 10, 19, 20, 25, 30, 40])
def test_polygamma_of_negative_non_integers_matches_mpmath(n):
    """The reflection formula gives the exact value within an ulp (rtol 2.4e-7 allows 2 to 4) for
    every order; the zeta sum's relative error reached 2e31 at n = 30 (the CPU's 6e54), PyTorch's
    trigamma's 2e-3 near the poles (-20 + 1e-3). Odd n >= 29 overflow at all these x: inf."""
    x = torch.tensor(NEGATIVE_NON_INTEGERS)
    expected = _mpmath_polygamma(n, x)
    torch.testing.assert_close(torch.polygamma(n, x.to("neuron")).cpu(), expected, rtol=2.4e-7, atol=0)
    torch.testing.assert_close(torch.special.polygamma(n, x.to("neuron")).cpu(), expected, rtol=2.4e-7, atol=0)


@pytest.mark.parametrize(
    ("n", "x"),
    [
        (200, [-1.5, -0.3, -73.5 + 2**-16, -73.5, -72.5]),
        (201, [-0.3, -2.5]),
        (30, [-2 + 1e-3, -2 - 1e-3]),
        (60, [-25.5]),
    ],
)
def test_polygamma_of_negative_non_integers_beyond_float32_is_infinite_with_its_sign(n, x):
    """Values beyond float32's range are inf with the exact value's sign, never NaN (the zeta sum gave
    NaN for polygamma(200, -1.5), whose value is -8.1e294); orders whose n! overflows a double keep
    their finite values (polygamma(200, -73.5) = -0.0421)."""
    x = torch.tensor(x)
    torch.testing.assert_close(torch.polygamma(n, x.to("neuron")).cpu(), _mpmath_polygamma(n, x), rtol=2.4e-7, atol=0)


@pytest.mark.parametrize("op", [torch.igamma, torch.igammac], ids=["igamma", "igammac"])
def test_incomplete_gamma_matches_cpu(op):
    """Edges follow SciPy: NaN for negative arguments, a = 0 gives 1 (or 0) for x > 0, x = 0 gives
    0 (or 1), infinite a gives 0 (or 1) unless x is infinite too."""
    a = torch.tensor([0.0, 0.0, 1.0, INF, INF, 2.0, -1.0, 2.0, 0.5, 30.0, 250.0, 3.0, NAN])
    x = torch.tensor([1.0, 0.0, 0.0, 2.0, INF, INF, 1.0, -1.0, 0.3, 50.0, 600.0, 0.01, 1.0])
    assert_matches_cpu(op, a, x)
    assert_matches_cpu(op, torch.rand(50) * 10, torch.rand(50) * 10)


@pytest.mark.parametrize("op", [torch.igamma, torch.igammac], ids=["igamma", "igammac"])
@pytest.mark.parametrize(("a", "x"), [(30.0, 31.0), (250.0, 260.0)])
def test_incomplete_gamma_in_the_asymptotic_band_raises(op, a, x):
    """a > 20 with x near a: float32 series lose ~1e-4 there, so neuron raises instead of a wrong value."""
    with pytest.raises(RuntimeError, match=f"{op.__name__} on neuron: an element has a > 20"):
        op(torch.tensor([1.0, a], device="neuron"), torch.tensor([1.0, x], device="neuron")).cpu()


POLYNOMIALS = [
    "chebyshev_polynomial_t",
    "chebyshev_polynomial_u",
    "chebyshev_polynomial_v",
    "chebyshev_polynomial_w",
    "shifted_chebyshev_polynomial_t",
    "shifted_chebyshev_polynomial_u",
    "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w",
    "hermite_polynomial_h",
    "hermite_polynomial_he",
    "laguerre_polynomial_l",
    "legendre_polynomial_p",
]


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomial_with_tensor_degrees_matches_cpu(name):
    """Degrees broadcast against x: negative (0), fractional (truncated), the closed forms above
    degree 4-8 inside [-1, 1], the recurrence outside it, and x at the edges 0 and +-1."""
    x = torch.tensor([-1.5, -1.0, -0.7, 0.0, 0.3, 0.5, 1.0, 1.2, 3.0, NAN])[:, None]
    n = torch.tensor([-2.0, 0.0, 1.0, 2.0, 2.7, 3.0, 5.0, 7.0, 9.0, 12.0])
    assert_matches_cpu(getattr(torch.special, name), x, n, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomial_recurrences_round_as_the_cpu_kernels_bit_for_bit(name):
    """Below the closed forms' degrees each step ``a * q - b`` is one fused multiply-add on the CPU
    (its compiler contracts Math.h's recurrences); neuron's XLA has no FMA (runtime/xla_flags.py)."""
    x = torch.rand(2000, generator=torch.Generator().manual_seed(0)) * 2.4 - 1.2
    n = torch.tensor([2.0, 3.0, 4.0])[:, None]
    assert_matches_cpu(getattr(torch.special, name), x, n, atol=0, rtol=0)


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomial_of_high_degree_matches_cpu(name):
    """Degree 40: the closed forms cos((n + 1/2) acos x) multiply an ulp of acos by n, so the
    tolerance is 1e-4; outside [-1, 1] the recurrence overflows to inf or NaN as on the CPU."""
    x = torch.tensor([-3.0, -0.9, -0.3, 0.05, 0.3, 0.6, 0.99, 1.5])
    n = torch.tensor([40.0, 41.0, 100.0])[:, None]
    assert_matches_cpu(getattr(torch.special, name), x, n, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", POLYNOMIALS)
@pytest.mark.parametrize("dtype", [torch.int64, torch.uint8], ids=str)
def test_polynomial_of_integer_tensors_and_numbers_matches_cpu(name, dtype):
    """Integer x and n compute in float32; a Python number may stand for either argument."""
    op = getattr(torch.special, name)
    x = torch.tensor([0, 1, 2, 3]).to(dtype)[:, None]
    n = torch.tensor([0, 1, 2, 5, 9]).to(dtype)
    assert_matches_cpu(lambda a, b: (op(a, b), op(a, 3), op(0.25, b)), x, n)


@pytest.mark.parametrize("name", ["hermite_polynomial_h", "hermite_polynomial_he"])
def test_hermite_above_the_float32_degree_limit_is_nan_as_cpu(name):
    x = torch.tensor([0.5, 2.0])
    n = torch.tensor([128.0, 129.0, INF, NAN])[:, None]
    assert_matches_cpu(getattr(torch.special, name), x, n, atol=0, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool, torch.complex64], ids=str)
def test_angle_matches_cpu(dtype):
    if dtype == torch.complex64:
        x = torch.tensor([complex(1, 1), complex(-1, 0), complex(-1, -0.0), complex(NAN, 1), 0j])
    elif dtype == torch.float32:
        x = torch.tensor([NAN, -INF, INF, -0.0, 0.0, -2.0, 3.0])
    else:
        x = torch.tensor([-3, 0, 2]).to(dtype)
    assert_matches_cpu(torch.angle, x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_frexp_matches_cpu_bit_for_bit(dtype):
    """Subnormals included (jnp.frexp flushes them to the smallest normal's exponent)."""
    tiny = torch.finfo(dtype).tiny
    x = torch.tensor([NAN, INF, -INF, 0.0, -0.0, 3.5, -7.0, 1e-3, 65000.0, tiny, tiny / 8, -tiny / 64]).to(dtype)
    assert_matches_cpu(torch.frexp, torch.cat([x, torch.randn(50).to(dtype) * 100]), atol=0, rtol=0)


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64], ids=str)
def test_gcd_and_lcm_match_cpu(dtype):
    """lcm multiplies 8- and 16-bit operands as int32 and wraps the absolute value into the dtype."""
    low = 0 if dtype == torch.uint8 else -100
    a = torch.randint(low, 100, (200,)).to(dtype)
    b = torch.randint(low, 100, (200,)).to(dtype)
    a[:3] = torch.tensor([0, 0, 12]).to(dtype)
    b[:3] = torch.tensor([0, 7, 0]).to(dtype)
    assert_matches_cpu(lambda x, y: (torch.gcd(x, y), torch.lcm(x, y)), a, b)


def test_complex_and_polar_match_cpu():
    re = torch.tensor([1.0, -2.0, 0.0, NAN, INF])
    im = torch.tensor([0.5, 3.0, -0.0, 1.0, 2.0])
    assert_matches_cpu(lambda r, i: (torch.complex(r, i), torch.polar(r.abs(), i)), re, im)


@pytest.mark.parametrize("op", [torch.complex, torch.polar], ids=["complex", "polar"])
@pytest.mark.parametrize(
    ("first", "second"),
    [(torch.float16, torch.float32), (torch.float32, torch.float16), (torch.bfloat16, torch.float32)],
    ids=str,
)
def test_complex_parts_of_two_dtypes_raise_atens_error(op, first, second):
    # complex_check_dtype runs before the dispatch: polar(float16, float32) said CUDA's kernel's
    # "polar_cuda" not implemented for 'Half' where CPU and CUDA name the mismatch.
    with pytest.raises(RuntimeError) as expected:
        op(torch.ones(2, dtype=first), torch.ones(2, dtype=second))
    with pytest.raises(RuntimeError) as actual:
        op(torch.ones(2, dtype=first, device="neuron"), torch.ones(2, dtype=second, device="neuron"))
    assert str(actual.value) == str(expected.value)


@pytest.mark.parametrize(
    "dtype",
    [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int8, torch.uint8, torch.complex64],
    ids=str,
)
@pytest.mark.parametrize(
    ("start", "end", "steps", "base"), [(0, 3, 4, 10.0), (1.2, 4, 7, 2.0), (2, 0.5, 5, 1.1), (0, 2, 1, 5.0)]
)
def test_logspace_matches_cpu(dtype, start, end, steps, base):
    """Integer results truncate the float64 powers (10**3 must come out as exactly 1000)."""
    expected = torch.logspace(start, end, steps, base, dtype=dtype)
    actual = torch.logspace(start, end, steps, base, dtype=dtype, device="neuron")
    torch.testing.assert_close(actual.cpu(), expected)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int32], ids=str)
@pytest.mark.parametrize(("start", "end", "steps"), [(-1, 1.5, 4), (5, -1, 4), (-2, 2, 1)])
def test_integer_logspace_wraps_a_negative_start_and_truncates_a_fractional_end_as_cpu(dtype, start, end, steps):
    # c10 converts the bounds to the dtype first: -1 into uint8 is 255 and 1.5 is 1, so CPU's
    # logspace(-1, 1.5, 4, dtype=uint8) is [0, 0, 0, 10]; neuron refused -1 ("type uint8").
    expected = torch.logspace(start, end, steps, dtype=dtype)
    actual = torch.logspace(start, end, steps, dtype=dtype, device="neuron")
    torch.testing.assert_close(actual.cpu(), expected)


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize(
    ("start", "end", "steps", "base", "dtype"),
    [(-1, 1, 5, 0.0, torch.float32), (0, 40, 5, 10.0, torch.int32), (0, 400, 5, 10.0, torch.float32)],
    ids=["zero-base", "int32-past", "float32-past"],
)
def test_logspace_of_infinities_and_wrapped_integers_warns_as_little_as_cpu(start, end, steps, base, dtype):
    """numpy's "divide by zero encountered in power" leaked from the host computation."""
    expected = torch.logspace(start, end, steps, base, dtype=dtype)
    actual = torch.logspace(start, end, steps, base, dtype=dtype, device="neuron")
    torch.testing.assert_close(actual.cpu(), expected)


@pytest.mark.parametrize(("start", "end", "steps"), [(-1.5, 2, 3), (-256, 2, 3), (3, 5, 1)])
def test_integer_logspace_bounds_or_value_that_do_not_fit_raise_as_cpu(start, end, steps):
    message = "^value cannot be converted to type uint8_t without overflow"
    for device in ("cpu", "neuron"):
        with pytest.raises(RuntimeError, match=message):
            torch.logspace(start, end, steps, dtype=torch.uint8, device=device)


@pytest.mark.parametrize("dtype", [torch.int16, torch.bfloat16, torch.float32], ids=str)
def test_logspace_into_an_out_tensor_computes_in_its_dtype(dtype):
    # ATen's logspace.out computes in out's dtype (an int16 out was refused, a bfloat16 one rounded
    # otherwise than the functional form).
    expected = torch.logspace(0.3, 0.9, 137, out=torch.empty(0, dtype=dtype))
    actual = torch.logspace(0.3, 0.9, 137, out=torch.empty(0, dtype=dtype, device="neuron"))
    torch.testing.assert_close(actual.cpu(), expected, atol=0, rtol=0)


@pytest.mark.parametrize("op", [torch.linspace, torch.logspace], ids=["linspace", "logspace"])
def test_complex_endpoints_into_a_real_dtype_raise_as_cpu(op):
    name = op.__name__
    message = rf"^torch\.{name}\(\): inferred dtype c10::complex<float> can't be safely cast to passed dtype Float$"
    for device in ("cpu", "neuron"):
        with pytest.raises(RuntimeError, match=message):
            op(0, 1j, 5, dtype=torch.float32, device=device)


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int8, torch.int64, torch.bool], ids=str
)
@pytest.mark.parametrize(("dim", "keepdim"), [((), False), ((1,), False), ((0, 2), True), ((-1,), True)])
def test_hash_tensor_matches_cpu(dtype, dim, keepdim):
    """Floats hash the bits of their float64 value (subnormals included), integers sign-extend."""
    x = (torch.randn(3, 4, 5) * 50).to(dtype)
    if dtype.is_floating_point:
        x[0, 0, :3] = torch.tensor([NAN, -INF, torch.finfo(dtype).tiny / 4]).to(dtype)
        x[1, 1, 1] = -0.0
    assert_matches_cpu(lambda t: torch.hash_tensor(t, dim, keepdim=keepdim), x)


@pytest.mark.parametrize("n", [35, 100])
def test_polygamma_of_an_order_whose_factorial_overflows_float32_is_exact(n):
    # n! overflows float32 from n = 35 (the CPU's inf or NaN for finite values); it is taken in
    # float64, where Python's math.exp raised OverflowError for n = 171 and above.
    x = torch.tensor([0.5, 1.0, 2.0, 10.0, -0.5, 3.5])
    tiny = torch.finfo(torch.float32).tiny
    torch.testing.assert_close(
        torch.polygamma(n, x.to("neuron")).cpu(), _mpmath_polygamma(n, x), rtol=2e-6, atol=tiny, equal_nan=True
    )


def test_polygamma_of_an_order_beyond_a_doubles_factorial_does_not_raise():
    x = torch.tensor([0.5, 1.0, 2.0])
    expected = torch.polygamma(1000, x)
    torch.testing.assert_close(torch.polygamma(1000, x.to("neuron")).cpu(), expected, equal_nan=True)
