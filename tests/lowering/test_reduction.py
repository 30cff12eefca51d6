"""Reductions on neuron against CPU: values, dtypes, dims/keepdim, NaN and tie rules, empty inputs,
out= and in-place forms, and gradients."""

from __future__ import annotations

import math
import re
import warnings

import pytest
import torch
from torch.testing import make_tensor

import torch_neuronx
from tests.utils import assert_matches_cpu, to_neuron

ALL_DTYPES = [torch.float32, torch.bfloat16, torch.int64, torch.int32, torch.bool]
ORDERED_DTYPES = [torch.float32, torch.bfloat16, torch.int64, torch.int32]
FLOAT_DTYPES = [torch.float32, torch.bfloat16]

# Every dtype, including bool (which sums and multiplies in int64).
ARITHMETIC = {
    "sum": lambda x: x.sum(),
    "sum_dim": lambda x: x.sum(1),
    "sum_dims_keepdim": lambda x: x.sum((0, -1), keepdim=True),
    "nansum_dim": lambda x: x.nansum(-1),
    "prod": lambda x: x.prod(),
    "prod_dim_keepdim": lambda x: x.prod(1, keepdim=True),
    "cumsum": lambda x: x.cumsum(1),
    "cumprod": lambda x: x.cumprod(-1),
    "count_nonzero": lambda x: torch.count_nonzero(x),
    "count_nonzero_dims": lambda x: torch.count_nonzero(x, (0, 2)),
    "any": lambda x: x.any(),
    "any_dim": lambda x: x.any(1),
    "any_dims_keepdim": lambda x: x.any((0, 1), keepdim=True),
    "all": lambda x: x.all(),
    "all_dim": lambda x: x.all(-1),
}

# Ordered dtypes: extrema and their indices.
ORDERED = {
    "amax": lambda x: x.amax(),
    "amax_dims": lambda x: x.amax((0, 2)),
    "amin_dim_keepdim": lambda x: x.amin(1, keepdim=True),
    "max": lambda x: x.max(),
    "min": lambda x: x.min(),
    "max_dim": lambda x: x.max(1),
    "min_dim_keepdim": lambda x: x.min(-1, keepdim=True),
    "argmax": lambda x: x.argmax(),
    "argmax_dim": lambda x: x.argmax(1),
    "argmin_dim_keepdim": lambda x: x.argmin(0, keepdim=True),
    "aminmax": lambda x: torch.aminmax(x),
    "aminmax_dim": lambda x: torch.aminmax(x, dim=2, keepdim=True),
}

# Floating point only.
FLOATING = {
    "mean": lambda x: x.mean(),
    "mean_dims": lambda x: x.mean((0, 2), keepdim=True),
    "var": lambda x: x.var(),
    "var_dim_unbiased": lambda x: x.var(1, correction=0),
    "std_dim": lambda x: x.std(-1, keepdim=True),
    "var_mean": lambda x: torch.var_mean(x, 1),
    "std_mean": lambda x: torch.std_mean(x, (0, 2), correction=0),
    "norm": lambda x: x.norm(),
    "norm_p1_dim": lambda x: x.norm(p=1, dim=1),
    "logsumexp": lambda x: x.logsumexp(1),
    "logsumexp_dims": lambda x: x.logsumexp((0, 2), keepdim=True),
    "logcumsumexp": lambda x: x.logcumsumexp(2),
    "renorm": lambda x: x.renorm(2, 1, 2.0),
    "renorm_inf": lambda x: x.renorm(float("inf"), -1, 1.0),
}


def _input(dtype, shape=(2, 3, 4)):
    if dtype.is_floating_point:
        return make_tensor(shape, dtype=dtype, device="cpu", low=-2, high=2)
    return make_tensor(shape, dtype=dtype, device="cpu", low=-3, high=3)


def _tolerances(dtype):
    return (1.6e-2, 1e-2) if dtype == torch.bfloat16 else (None, None)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("name", ARITHMETIC)
def test_arithmetic_reductions_match_cpu(name, dtype):
    atol, rtol = _tolerances(dtype)
    assert_matches_cpu(ARITHMETIC[name], _input(dtype), atol=atol, rtol=rtol)


@pytest.mark.parametrize("dtype", ORDERED_DTYPES)
@pytest.mark.parametrize("name", ORDERED)
def test_extrema_match_cpu(name, dtype):
    assert_matches_cpu(ORDERED[name], _input(dtype))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", FLOATING)
def test_floating_reductions_match_cpu(name, dtype):
    atol, rtol = _tolerances(dtype)
    assert_matches_cpu(FLOATING[name], _input(dtype), atol=atol, rtol=rtol)


def test_complex_reductions_match_cpu():
    x = make_tensor((3, 4), dtype=torch.complex64, device="cpu")
    assert_matches_cpu(
        lambda t: (t.sum(1), t.mean(), t.prod(0), t.cumsum(1), torch.var_mean(t, 1), t.std(), t.norm(), t.norm(p=1)),
        x,
    )


def test_logsumexp_of_integers_is_float():
    assert_matches_cpu(lambda x: x.logsumexp(0), _input(torch.int64, (3, 4)))


def test_bool_extrema_match_cpu():
    x = torch.tensor([[True, False, True], [False, False, False]])
    assert_matches_cpu(lambda t: (t.amax(1), t.max(), t.max(1), torch.aminmax(t)), x)


def test_integer_reductions_accumulate_in_int64():
    x = torch.full((4,), 2**30, dtype=torch.int32)
    result = assert_matches_cpu(lambda t: (t.sum(), t.cumsum(0), t.prod()), x)
    assert all(r.dtype == torch.int64 for r in result)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.sum(dtype=torch.float32),
        lambda x: x.sum(1, dtype=torch.int32),
        lambda x: x.prod(1, dtype=torch.float32),
        lambda x: x.cumsum(0, dtype=torch.float32),
        lambda x: x.nansum(dtype=torch.float32),
        lambda x: x.float().mean(1, dtype=torch.bfloat16),
        lambda x: torch.linalg.vector_norm(x.bfloat16(), dtype=torch.float32),
    ],
    ids=["sum", "sum_dim", "prod_dim", "cumsum", "nansum", "mean", "vector_norm"],
)
def test_dtype_argument_matches_cpu(fn):
    assert_matches_cpu(fn, _input(torch.int32, (3, 4)), atol=1e-2, rtol=1e-2)


def test_bfloat16_sums_accumulate_in_float32():
    x = torch.full((4096,), 1.0, dtype=torch.bfloat16)
    assert_matches_cpu(lambda t: (t.sum(), t.mean(), t.cumsum(0)[-1]), x)


def test_nan_propagates_and_is_selected():
    x = torch.tensor([[1.0, float("nan"), 3.0, float("nan")], [2.0, 5.0, -1.0, 0.0]])
    assert_matches_cpu(
        lambda t: (
            t.amax(1),
            t.amin(1),
            t.max(),
            t.max(1),
            t.min(1),
            t.argmax(1),
            t.argmin(1),
            torch.aminmax(t, dim=1),
        ),
        x,
    )
    assert_matches_cpu(lambda t: (t.nansum(1), t.nanmean(1), t.sum(1)), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_ties_select_the_first_occurrence(dtype):
    x = torch.tensor([[3, 1, 3, 1], [0, 0, 0, 0], [2, 5, 5, 2]], dtype=dtype)
    assert_matches_cpu(lambda t: (t.argmax(1), t.argmin(1), t.max(1), t.min(1), t.argmax(), t.argmin()), x)


def test_non_contiguous_input_matches_cpu():
    x = _input(torch.float32, (4, 6))
    assert_matches_cpu(lambda t: (t.t().sum(0), t[:, ::2].amax(1), t.t().cumsum(0), t[1:].var(0)), x)


def test_zero_dim_input_matches_cpu():
    x = torch.tensor(2.5)
    assert_matches_cpu(lambda t: (t.sum(), t.sum(0), t.max(0), t.argmax(), t.cumsum(0), t.amax(), t.prod(0)), x)


@pytest.mark.parametrize("correction", [0, 1, 2.5, 4, 5])
def test_var_correction_matches_cpu(correction):
    x = _input(torch.float32, (3, 4))
    with pytest.warns(UserWarning, match="degrees of freedom") if correction >= 4 else _no_warning():
        assert_matches_cpu(lambda t: (t.var(1, correction=correction), torch.std_mean(t, 1, correction=correction)), x)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("op", [torch.var_mean, torch.std_mean], ids=["var_mean", "std_mean"])
@pytest.mark.parametrize(
    "dim, keepdim", [(None, False), (1, False), (0, True), ((0, 2), False)], ids=["all", "dim1", "dim0_keepdim", "dims"]
)
def test_var_mean_with_infinities_matches_cpu(op, dtype, dim, keepdim):
    """CPU's Welford mean is +-inf only when an infinity is the last and only non-finite element;
    an earlier infinity, two infinities or a NaN give NaN (torch.mean would give inf)."""
    inf, nan = float("inf"), float("nan")
    x = torch.tensor(
        [
            [[1.0, 2.0], [3.0, inf], [5.0, 6.0]],
            [[inf, 1.0], [2.0, 3.0], [4.0, -inf]],
            [[-inf, 1.0], [inf, 2.0], [nan, 3.0]],
            [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]],
        ]
    ).to(dtype)
    kwargs = {} if dim is None else {"dim": dim, "keepdim": keepdim}
    assert_matches_cpu(lambda t: op(t, **kwargs), x)
    assert_matches_cpu(lambda t: op(t, **kwargs), x[1:, 1:])


def test_var_of_constant_with_no_degrees_of_freedom_is_nan():
    x = torch.ones(2, 3)
    with pytest.warns(UserWarning, match="degrees of freedom"):
        assert_matches_cpu(lambda t: t.var(1, correction=3), x)


class _no_warning:
    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        return False


@pytest.mark.parametrize(
    "values",
    [[1e20, 2e20, 3e20], [1e20, 1e19], [1e-20, 2.0], [1e-30, 1e-30]],
    ids=["huge", "huge_pair", "tiny", "tinier"],
)
def test_vector_norm_of_a_negative_order_keeps_its_powers_in_range(values):
    # 1e20 ** -2 is a subnormal XLA flushes: the norm was inf (helper-55); 1e-20 ** -2 overflows (the
    # CPU's 0). The smallest magnitude is factored out there; float64 gives the reference.
    x = torch.tensor(values)
    expected = torch.linalg.vector_norm(x.double(), -2)
    torch.testing.assert_close(torch.linalg.vector_norm(x.to("neuron"), -2).cpu().double(), expected, rtol=2e-7, atol=0)


@pytest.mark.parametrize("ord", [50.0, 200.0])
def test_vector_norm_of_a_large_order_keeps_its_powers_in_range(ord):
    # 0.6 ** 200 is a subnormal XLA flushes: the norm of [0.5, 0.3, 0.6] was 0 (the CPU's 0.59995 is
    # its subnormal sum's rounding); 3 ** 200 overflows (the CPU's inf). Exact: 0.6 * (1 + ...) ** (1 / p).
    for values in ([0.5, 0.3, 0.6], [3.0, 2.0, 0.5]):
        x = torch.tensor(values)
        largest = x.abs().max().double()
        expected = largest * ((x.double().abs() / largest) ** ord).sum() ** (1 / ord)
        got = torch.linalg.vector_norm(x.to("neuron"), ord).cpu()
        torch.testing.assert_close(got.double(), expected, rtol=2e-7, atol=0)
    rows = torch.tensor([[0.5, 0.3, 0.6], [1.0, 2.0, 0.25]])
    got = torch.linalg.vector_norm(rows.to("neuron"), ord, dim=1, keepdim=True).cpu()
    assert got.shape == (2, 1) and torch.isfinite(got).all() and (got > 0).all()


@pytest.mark.parametrize("ord", [0, 1, 2, 3, 0.5, math.inf, -math.inf])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_vector_norm_orders_match_cpu(ord, dtype):
    x = _input(dtype, (3, 4))
    x[0, 0] = 0
    atol, rtol = _tolerances(dtype)
    assert_matches_cpu(
        lambda t: (torch.linalg.vector_norm(t, ord), torch.linalg.vector_norm(t, ord, dim=1, keepdim=True)),
        x,
        atol=atol,
        rtol=rtol,
    )


@pytest.mark.parametrize(
    ("shape", "dim", "keepdim"),
    [((), None, False), ((1,), None, False), ((3, 1), 1, False), ((3, 1), (1,), True), ((1, 1), [], False)],
)
@pytest.mark.parametrize("ord", [1000, -1000, 0, 2])
def test_vector_norm_over_dimensions_of_size_one_is_the_magnitude(shape, dim, keepdim, ord):
    # ATen's linalg_vector_norm_out takes |x| (x != 0 for ord 0): |x|**1000 overflowed to inf.
    x = torch.full(shape, -8.5)
    assert_matches_cpu(lambda t: torch.linalg.vector_norm(t, ord, dim, keepdim), x)


def test_norm_variants_match_cpu():
    x = _input(torch.float32, (3, 4))
    assert_matches_cpu(lambda t: (t.norm(p=2, dim=(0, 1)), torch.norm(t, p=3, dim=0), t.norm(p=math.inf)), x)


def test_logsumexp_handles_infinities():
    inf = float("inf")
    x = torch.tensor([[-inf, -inf], [inf, 1.0], [1000.0, 1000.0], [float("nan"), 1.0]])
    assert_matches_cpu(lambda t: (t.logsumexp(1), t.logcumsumexp(1)), x)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.sum(0),
        lambda x: x.prod(0),
        lambda x: x.mean(0),
        lambda x: x.logsumexp(0),
        lambda x: x.any(0),
        lambda x: x.all(0),
        lambda x: x.count_nonzero(0),
        lambda x: x.amax(1),
        lambda x: x.cumsum(0),
    ],
    ids=["sum", "prod", "mean", "logsumexp", "any", "all", "count_nonzero", "amax_nonempty_dim", "cumsum"],
)
def test_empty_reductions_match_cpu(fn):
    assert_matches_cpu(fn, torch.empty(0, 3))


@pytest.mark.parametrize(
    "fn",
    [lambda x: x.max(), lambda x: x.min(), lambda x: x.amax(0), lambda x: x.argmax(), lambda x: torch.aminmax(x)],
    ids=["max", "min", "amax", "argmax", "aminmax"],
)
def test_empty_reductions_without_identity_raise(fn):
    # PyTorch's meta kernels (which neuron's errors come from) raise RuntimeError where CPU raises
    # IndexError for some of these.
    with pytest.raises((RuntimeError, IndexError)):
        fn(torch.empty(0, 3))
    with pytest.raises((RuntimeError, IndexError)):
        fn(torch.empty(0, 3, device="neuron")).cpu()


@pytest.mark.parametrize(("dtype", "name"), [(torch.int64, "Long"), (torch.bool, "Bool"), (torch.uint16, "UInt16")])
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_logcumsumexp_of_integers_raises_cudas_dispatch_error(dtype, name, compiled):
    # The CPU words it "logcumsumexp_out_cpu"; neuron named neither kernel.
    with pytest.raises(NotImplementedError):
        torch.ones(3, dtype=dtype).logcumsumexp(0)
    logcumsumexp = torch.compile(torch.logcumsumexp, backend="neuron") if compiled else torch.logcumsumexp
    with pytest.raises(NotImplementedError, match=f"^\"logcumsumexp_cuda\" not implemented for '{name}'"):
        logcumsumexp(torch.ones(3, dtype=dtype, device="neuron"), 0).cpu()


def _out_forms(x):
    values, indices = torch.empty(0, device=x.device), torch.empty(0, dtype=torch.long, device=x.device)
    return (
        torch.amax(x, 1, out=torch.empty(0, device=x.device)),
        torch.max(x, 1, out=(values, indices)),
        torch.argmax(x, 1, out=torch.empty(0, dtype=torch.long, device=x.device)),
        torch.var(x, 1, out=torch.empty(3, device=x.device)),
        torch.logsumexp(x, 1, out=torch.empty(3, device=x.device)),
        torch.any(x > 0, 1, out=torch.empty(3, dtype=torch.bool, device=x.device)),
    )


def test_out_forms_match_cpu():
    assert_matches_cpu(_out_forms, _input(torch.float32, (3, 4)))


@pytest.mark.filterwarnings("ignore:.*is not supported natively on neuron")
@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.sum(x, 1, out=torch.empty(3, device=x.device)),
        lambda x: torch.mean(x, 1, out=torch.empty(3, device=x.device)),
        lambda x: torch.cumsum(x, 1, out=torch.empty(3, 4, device=x.device)),
    ],
    ids=["sum", "mean", "cumsum"],
)
def test_out_forms_with_dtype_argument_match_cpu(fn):
    assert_matches_cpu(fn, _input(torch.float32, (3, 4)))


def test_out_form_writes_into_a_view():
    x = _input(torch.float32, (3, 4))
    expected = torch.zeros(2, 3)
    torch.amax(x, 1, out=expected[1])
    actual = torch.zeros(2, 3, device="neuron")
    torch.amax(x.to("neuron"), 1, out=actual[1])
    torch.testing.assert_close(actual.cpu(), expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64, torch.bfloat16])
@pytest.mark.parametrize("op", ["cumsum", "cumprod", "logcumsumexp"])
def test_cumulative_ops_accumulate_as_the_cpu_to_the_bit(op, dtype):
    # The CPU's running sum is in at::acc_type (double for float): XLA's float32 parallel prefix
    # differed from it in 3,321 of 4,096 cumsum elements (logcumsumexp: 1,847).
    x = torch.randn(
        64, 64, generator=torch.Generator().manual_seed(0), dtype=torch.complex64 if dtype.is_complex else None
    )
    x = (x * 0.1 + 1).to(dtype)
    assert_matches_cpu(lambda t: getattr(t, op)(1), x, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_inplace_cumulative_ops_match_cpu(dtype):
    def fn(t):
        t = t.clone()
        t.cumsum_(1)
        t[:, :2].cumprod_(0)
        return t

    assert_matches_cpu(fn, _input(dtype, (3, 4)))


GRADIENTS = {
    "sum": lambda x: x.sum((0, 1)),
    "mean": lambda x: x.mean(1),
    "prod": lambda x: x.prod(1),
    "amax": lambda x: x.amax(1),
    "max": lambda x: x.max(),
    "var": lambda x: x.var(1),
    "std_mean": lambda x: torch.std_mean(x, 0)[0] * torch.std_mean(x, 0)[1],
    "norm": lambda x: x.norm(dim=1),
    "norm_inf": lambda x: torch.linalg.vector_norm(x, math.inf),
    "logsumexp": lambda x: x.logsumexp(1),
    "cumsum": lambda x: x.cumsum(1),
    "cumprod": lambda x: x.cumprod(1),
    "logcumsumexp": lambda x: x.logcumsumexp(1),
}


@pytest.mark.parametrize("name", GRADIENTS)
def test_gradients_match_cpu(name):
    x = _input(torch.float32, (3, 4)).requires_grad_()
    weights = _input(torch.float32, GRADIENTS[name](x).shape)
    (GRADIENTS[name](x) * weights).sum().backward()
    torch_neuronx.clear_op_tracking()
    y, w = to_neuron((x, weights))
    (GRADIENTS[name](y) * w).sum().backward()
    assert torch_neuronx.get_fallback_ops() == {}, torch_neuronx.get_fallback_ops()
    torch.testing.assert_close(y.grad.cpu(), x.grad)


def test_complex_logcumsumexp_starts_from_minus_infinity_as_the_cpu():
    """The CPU combines the first element with -inf + 0j too; neuron copied it (and crashed on an
    empty dimension)."""
    inf, nan = float("inf"), float("nan")
    for values in ([complex(-inf, 1.0)], [complex(1.0, nan)], [complex(2.0, 1.0), complex(-inf, 3.0)]):
        z = torch.tensor(values)
        expected, actual = torch.logcumsumexp(z, 0), torch.logcumsumexp(z.to("neuron"), 0).cpu()
        torch.testing.assert_close(torch.view_as_real(actual), torch.view_as_real(expected), equal_nan=True)
    empty = torch.zeros(0, 5, dtype=torch.complex64, device="neuron")
    assert torch.logcumsumexp(empty, 0).shape == (0, 5)


@pytest.mark.parametrize("dim", [0, 1])
def test_complex_logcumsumexp_keeps_the_cpus_imaginary_branch(dim):
    # log(exp(z)) is z only up to 2*pi*i; the CPU accumulates log1p(exp(min - max)) + max in order.
    z = torch.complex(torch.randn(4, 5) * 4, torch.randn(4, 5) * 4)
    z[0, 0] = complex(float("-inf"), 0.0)
    assert_matches_cpu(lambda z: torch.logcumsumexp(z, dim), z)


def test_complex_logsumexp_and_logaddexp_take_the_cpus_imaginary_branch():
    z = torch.complex(torch.randn(4, 5) * 4, torch.randn(4, 5) * 4)
    assert_matches_cpu(lambda z: (torch.logsumexp(z, 1), torch.logaddexp(z, z.flip(0))), z)


@pytest.mark.parametrize("op", [torch.ops.aten.any.dims, torch.ops.aten.all.dims], ids=["any", "all"])
@pytest.mark.parametrize("keepdim", [False, True])
def test_any_all_over_an_empty_dim_list_reduce_nothing_as_cpu(op, keepdim):
    x = torch.tensor([[True, False], [False, False]])
    torch.testing.assert_close(op(x.to("neuron"), [], keepdim).cpu(), op(x, [], keepdim))


EMPTY_REDUCTIONS = {
    "amax_dims": lambda x: torch.amax(x, dim=[2, 0]),
    "amin_negative_dim": lambda x: torch.amin(x, dim=-3),
    "amax_all": lambda x: torch.amax(x),
    "aminmax_dim": lambda x: torch.aminmax(x, dim=0),
    "aminmax_all": lambda x: torch.aminmax(x),
    "argmax_dim": lambda x: torch.argmax(x, 0),
    "argmin_all": lambda x: torch.argmin(x),
}


@pytest.mark.parametrize("case", EMPTY_REDUCTIONS)
def test_reductions_without_identity_over_an_empty_slice_raise_as_cpu(case):
    # Their Python meta kernels raise one RuntimeError for all; ATen words each op's (IndexError for
    # a named dimension of size 0, printed as given).
    fn = EMPTY_REDUCTIONS[case]
    with pytest.raises(Exception) as cpu:
        fn(torch.zeros(0, 2, 3))
    with pytest.raises(type(cpu.value), match=f"^{re.escape(str(cpu.value))}$"):
        fn(torch.zeros(0, 2, 3, device="neuron"))


@pytest.mark.parametrize("reduce", ["sum", "mean", "prod"])
def test_segment_reduce_of_float16_keeps_subnormal_results_as_the_cpu(reduce):
    # XLA's reduce_precision, which rounds each step to float16, flushed subnormals (below 2**-14)
    # to zero: these sums were all 0.
    data = torch.tensor([3e-6, 2e-6, 1e-7, 4e-6, 5e-5, 1e-6], dtype=torch.float16)
    lengths = torch.tensor([2, 1, 3])
    expected = torch.segment_reduce(data, reduce, lengths=lengths)
    actual = torch.segment_reduce(data.to("neuron"), reduce, lengths=lengths.to("neuron"))
    torch.testing.assert_close(actual.cpu(), expected, atol=0, rtol=0)


@pytest.mark.parametrize("reduce", ["amax", "amin"])
def test_segment_reduce_takes_atens_amax_and_amin_names(reduce):
    # ATen's get_reduction_enum takes "amax"/"amin" for max/min; neuron refused them.
    data, lengths = torch.randn(6, 3), torch.tensor([2, 4])
    expected_input = data.clone().requires_grad_()
    expected = torch.segment_reduce(expected_input, reduce, lengths=lengths)
    expected.sum().backward()
    actual_input = data.to("neuron").requires_grad_()
    actual = torch.segment_reduce(actual_input, reduce, lengths=lengths.to("neuron"))
    actual.sum().backward()
    torch.testing.assert_close(actual.cpu(), expected)
    torch.testing.assert_close(actual_input.grad.cpu(), expected_input.grad)


@pytest.mark.parametrize(
    "call",
    [
        lambda t: torch.std(t, dim=-1, correction=20),
        lambda t: torch.var(t, dim=-1, correction=19),
        lambda t: torch.var_mean(t, dim=(0, 1), correction=200),
        lambda t: torch.std_mean(t[:1], dim=0),
        lambda t: torch.var(t[0, 0]),
    ],
    ids=["std", "var, no warning", "var_mean", "std_mean of one row", "0-dim"],
)
def test_degrees_of_freedom_warning_at_every_call_as_aten(call):
    # ATen's warn_invalid_degrees_of_freedom warns at each call; neuron never did (v2.4.0's
    # test_warn_invalid_degrees_of_freedom).
    t = torch.randn(10, 20)
    for device_t in (t, t.to("neuron"), t.to("neuron")):  # the second neuron call hits the cache
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call(device_t)
        messages = [str(w.message).split(" (Triggered internally")[0] for w in caught]
        if device_t is t:
            expected = messages
        else:
            assert messages == expected
