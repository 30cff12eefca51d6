"""Complex functions at branch cuts, signed zeros, infinities and NaNs against CPU
(torch_neuronx/lowering/complex_math.py).

Every point of a grid of special parts (``+-0``, ``+-1``, ``+-4``, ``+-inf``, NaN, ``+-1e30``,
``+-1e-30``) goes through each complex op on both devices; the results must be equal, NaNs equal,
and zeros of the same sign. The CPU's vectorised kernels (what a contiguous tensor of 16 or more
elements takes) are the reference: where its scalar loop differs (``neg``, ``sgn``, ``mul`` of
infinities), the vectorised value is the one most tensors get. Subnormal parts are left out: XLA's
CPU runtime flushes them (docs/usage.md).
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch

import torch_neuronx

INF, NAN = math.inf, math.nan
PARTS = [0.0, -0.0, 1.0, -1.0, 4.0, -4.0, 0.5, INF, -INF, NAN, 1e30, -1e30, 1e-30, -1e-30]


def _grid() -> torch.Tensor:
    """Every (real, imag) pair of PARTS as complex64, padded to a multiple of 16 elements so the
    CPU takes its vectorised loop for all of them."""
    pairs = torch.tensor(list(itertools.product(PARTS, PARTS)), dtype=torch.float32)
    grid = torch.complex(pairs[:, 0], pairs[:, 1])
    return torch.cat([grid, grid[: (-grid.numel()) % 16]])


def _assert_same(got: torch.Tensor, want: torch.Tensor, inputs: tuple[torch.Tensor, ...]) -> None:
    """Values close (NaNs equal) and, where both are zero, the sign of each part equal. Complex
    results compare part by part: as complex numbers, ``inf + 0.6821882j`` and ``inf + 0.6821881j``
    differ by NaN."""
    assert got.dtype == want.dtype
    if want.is_complex():
        torch.testing.assert_close(torch.view_as_real(got), torch.view_as_real(want), equal_nan=True)
    else:
        torch.testing.assert_close(got, want, equal_nan=True)
    parts = (got.real, want.real, got.imag, want.imag) if want.is_complex() else (got, want)
    for name, g, w in zip(("real", "imag"), parts[::2], parts[1::2], strict=False):
        zero = (g == 0) & (w == 0)
        differs = zero & (torch.signbit(g) != torch.signbit(w))
        where = differs.nonzero().flatten()[:5].tolist()
        assert not where, f"sign of the zero {name} part differs at inputs " + ", ".join(
            f"{tuple(x[i].item() for x in inputs)}: neuron {got[i].item()}, cpu {want[i].item()}" for i in where
        )


UNARY = [
    "exp",
    "exp2",
    "expm1",
    "log",
    "log2",
    "log10",
    "log1p",
    "sqrt",
    "rsqrt",
    "sin",
    "cos",
    "tan",
    "asin",
    "acos",
    "atan",
    "sinh",
    "cosh",
    "tanh",
    "asinh",
    "acosh",
    "atanh",
    "sigmoid",
    "reciprocal",
    "sgn",
    "neg",
    "abs",
    "angle",
    "square",
    "sinc",
]


@pytest.mark.parametrize("name", UNARY)
def test_unary_special_values_match_cpu(name):
    fn = getattr(torch, name)
    z = _grid()
    torch_neuronx.clear_op_tracking()
    got = fn(z.to("neuron")).cpu()
    assert torch_neuronx.get_fallback_ops() == {}
    _assert_same(got, fn(z), (z,))


@pytest.mark.parametrize("exponent", [0.5, -0.5, -1, 2, 3, -2, 1.5, 0.5 + 0.5j])
def test_power_of_a_number_at_special_values_matches_cpu(exponent):
    z = _grid()
    _assert_same((z.to("neuron") ** exponent).cpu(), z**exponent, (z,))


def _sub_complex_alpha(left, right):
    return torch.sub(left, right, alpha=1 + 0j)


def _add_alpha(left, right):
    return torch.add(left, right, alpha=0.5 - 2j)


@pytest.mark.parametrize("op", [torch.div, torch.mul, torch.pow, torch.add, torch.sub, _add_alpha, _sub_complex_alpha])
def test_binary_special_values_match_cpu(op):
    z = _grid()
    left, right = (t.flatten() for t in torch.meshgrid(z, z, indexing="ij"))
    _assert_same(op(left.to("neuron"), right.to("neuron")).cpu(), op(left, right), (left, right))


def test_negative_zero_imaginary_part_selects_the_lower_side_of_the_cut():
    """The user's report: sqrt(-4 - 0j) is -2j on the CPU (C99's csqrt), +2j before."""
    z = torch.tensor([-4 + 0j]).conj().resolve_conj()
    for fn in (torch.sqrt, torch.acos, torch.asin, torch.acosh, torch.log, lambda t: t**0.5, lambda t: t**-0.5):
        _assert_same(fn(z.to("neuron")).cpu(), fn(z), (z,))
    assert torch.sqrt(z.to("neuron")).cpu().imag.item() == -2.0


def test_complex_infinity_to_the_minus_one_is_nan_as_on_cpu():
    z = torch.tensor([complex(INF, INF)] * 16)
    for fn in (torch.reciprocal, lambda t: t**-1, lambda t: 1 / t, lambda t: torch.ones_like(t) / t):
        got = fn(z.to("neuron")).cpu()
        _assert_same(got, fn(z), (z,))
        assert got.real.isnan().all() and got.imag.isnan().all()


def test_division_whose_intermediates_are_subnormal_is_not_flushed():
    """c10 multiplies by 1 / denominator, which is subnormal past 2 ** 126, and by the ratio of the
    divisor's parts, subnormal when they are 2 ** 126 apart; XLA flushes subnormals."""
    dividend = torch.tensor([complex(1, 1e38), complex(-3e38, 1e38), complex(INF, 1), complex(-INF, -4)] * 4)
    divisor = torch.tensor([complex(1e38, 1e38), complex(2e38, -1e38), complex(1e38, 1), complex(1, -1e38)] * 4)
    _assert_same((dividend.to("neuron") / divisor.to("neuron")).cpu(), dividend / divisor, (dividend, divisor))


def test_division_is_the_cpus_to_the_bit_unless_an_input_or_the_result_is_subnormal():
    """Every pair of 289 complex numbers made of ordinary, tiny, huge, infinite and NaN parts. c10's
    intermediates (the ratio of the divisor's parts, 1 / denominator, x * ratio + y) can be subnormal
    where the quotient is not: XLA flushed them, and ``-1e-30j / (1e-20 - 1e-30j)`` lost its real
    part 1e-20 (935 of 46,682 such pairs differed). Subnormal inputs and results are the device's
    flush to zero (docs/usage.md)."""
    parts = torch.tensor([0.0, -0.0, 1, -1, 0.5, -2, 3, 1e-20, -1e-30, 1.2e-38, 1e-40, 1e38, -3.4e38, INF, -INF, NAN])
    z = torch.complex(parts.repeat_interleave(len(parts)), parts.repeat(len(parts)))
    dividend, divisor = (t.flatten() for t in torch.meshgrid(z, z, indexing="ij"))
    want = torch.view_as_real(dividend / divisor)
    got = torch.view_as_real((dividend.to("neuron") / divisor.to("neuron")).cpu())

    def subnormal(t):
        return ((t != 0) & (t.abs() < torch.finfo(torch.float32).tiny)).reshape(len(t), -1).any(-1)

    kept = ~(subnormal(torch.view_as_real(dividend)) | subnormal(torch.view_as_real(divisor)) | subnormal(want))
    assert kept.sum() > 40_000
    torch.testing.assert_close(got[kept], want[kept], rtol=0, atol=0, equal_nan=True)
    got, want = got[kept], want[kept]
    signed = ~want.isnan()  # a NaN's sign is not a value
    assert torch.equal(torch.signbit(got[signed]), torch.signbit(want[signed]))


@pytest.mark.parametrize(
    "fn",
    [lambda a, b: a / b, lambda a, b: torch.reciprocal(b), lambda a, b: torch.abs(a), lambda a, b: torch.sgn(a)],
    ids=["divide", "reciprocal", "abs", "sgn"],
)
def test_ordinary_quotients_and_magnitudes_are_the_cpus_to_the_bit(fn):
    """The CPU's compiled c10 division contracts ``x * ratio + y`` into fused multiply-adds, and its
    |z| is SLEEF's hypot (0.5 ulp): with two roundings, or XLA's abs, 1,546 of 4,096 quotients and
    2,720 signs differed in the last bit."""
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(4096, dtype=torch.complex64, generator=generator) * 1e3
    b = torch.randn(4096, dtype=torch.complex64, generator=generator) + 2
    got, want = fn(a.to("neuron"), b.to("neuron")).cpu(), fn(a, b)
    as_real = torch.view_as_real if want.is_complex() else (lambda t: t)
    torch.testing.assert_close(as_real(got), as_real(want), rtol=0, atol=0)


@pytest.mark.parametrize("name", ["sqrt", "acos", "atanh", "reciprocal", "log1p", "sigmoid"])
def test_complex32_takes_the_same_path(name):
    """complex32 is read as complex64 and rounded (runtime/layout.py), so it gets the same values;
    the CPU has no complex32 kernel for these, so its complex64 values rounded are the reference."""
    fn = getattr(torch, name)
    z = _grid()
    half = z.to(torch.complex32)
    got = fn(half.to("neuron")).cpu()
    assert got.dtype == torch.complex32
    want = fn(half.to(torch.complex64)).to(torch.complex32)
    _assert_same(got.to(torch.complex64), want.to(torch.complex64), (z,))


@pytest.mark.parametrize("name", ["log10", "log2"])
def test_log10_and_log2_divide_as_the_cpu_at_infinite_magnitudes(name):
    # Each part of log(z) divided by log(10): XLA multiplied by the rounded reciprocal, an ulp off,
    # which beside an infinite real part makes the complex difference NaN (PyTorch's
    # test_reference_numerics_extremal compares the numbers, not their parts).
    z = torch.tensor([complex(-INF, 0), complex(INF, INF), complex(-INF, -INF), complex(1, INF), 1j])
    fn = getattr(torch, name)
    torch.testing.assert_close(fn(z.to("neuron")).cpu(), fn(z), rtol=0, atol=0)
