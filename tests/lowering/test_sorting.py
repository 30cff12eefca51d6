"""Sorting lowerings (torch_neuronx/lowering/sorting.py) against CPU PyTorch."""

from __future__ import annotations

import pytest
import torch
from torch.testing import make_tensor

from tests.utils import assert_matches_cpu

DTYPES = [torch.float32, torch.bfloat16, torch.int64, torch.int32, torch.bool]
NAN = float("nan")


def _with_ties(dtype, shape=(3, 8)):
    """Values with many ties (and, for floats, NaN, infinities and both zeros)."""
    if dtype == torch.bool:
        return make_tensor(shape, dtype=dtype, device="cpu")
    x = make_tensor(shape, dtype=dtype, device="cpu", low=-3, high=3)
    if dtype.is_floating_point:
        x = x.round()
        x.view(-1)[:6] = torch.tensor([NAN, -0.0, float("inf"), 0.0, NAN, -float("inf")], dtype=dtype)
    return x


def _distinct(dtype, shape=(3, 8)):
    return torch.randperm(shape[0] * shape[1]).reshape(shape).to(dtype) - 7


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("stable", [None, True])
def test_sort_matches_values_and_indices(dtype, descending, stable):
    """CPU sorts stably in both directions with NaN largest: values and indices match exactly."""
    x = _with_ties(dtype)
    assert_matches_cpu(lambda x: torch.sort(x, stable=stable, descending=descending), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_sort_dims(dtype):
    x = _with_ties(dtype, (4, 3, 5))
    assert_matches_cpu(lambda x: torch.sort(x, dim=0, descending=True), x)
    assert_matches_cpu(lambda x: torch.sort(x[:, 1], dim=-1), x)  # a strided view


@pytest.mark.parametrize("stable", [None, True])
def test_sort_out(stable):
    x = _with_ties(torch.float32, (4, 3, 5))
    out = (torch.empty(4, 3, 5), torch.empty(4, 3, 5, dtype=torch.int64))
    if stable is None:
        assert_matches_cpu(lambda x, values, indices: torch.sort(x, 1, out=(values, indices)), x, *out)
    else:
        assert_matches_cpu(
            lambda x, values, indices: torch.sort(x, dim=1, stable=stable, out=(values, indices)), x, *out
        )


def test_sort_edge_shapes():
    assert_matches_cpu(torch.sort, torch.tensor(3.0))
    assert_matches_cpu(torch.sort, torch.empty(2, 0))
    assert_matches_cpu(lambda x: torch.sort(x, dim=0), torch.randn(1, 4))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
@pytest.mark.parametrize("descending", [False, True])
def test_argsort_and_msort(dtype, descending):
    x = _with_ties(dtype)
    assert_matches_cpu(lambda x: torch.argsort(x, descending=descending), x)
    assert_matches_cpu(lambda x: torch.argsort(x, dim=0, stable=True, descending=descending), x)
    assert_matches_cpu(torch.msort, x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dim", [-1, 0])
def test_topk_distinct_values(dtype, largest, dim):
    x = _distinct(dtype)
    assert_matches_cpu(lambda x: torch.topk(x, 3, dim=dim, largest=largest), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
@pytest.mark.parametrize("largest", [True, False])
def test_topk_ties_and_nan(dtype, largest):
    """Values match CPU exactly (NaN largest); among tied values PyTorch leaves the index unspecified,
    so each index is checked to point at its value."""
    x = _with_ties(dtype, (4, 9))
    want = torch.topk(x, 5, largest=largest)
    got = torch.topk(x.to("neuron"), 5, largest=largest)
    torch.testing.assert_close(got.values.cpu(), want.values, equal_nan=True)
    torch.testing.assert_close(x.gather(-1, got.indices.cpu()), want.values, equal_nan=True)


def test_topk_unsorted_and_out():
    x = _distinct(torch.float32)
    got = torch.topk(x.to("neuron"), 4, sorted=False)
    want = torch.topk(x, 4, sorted=False)
    torch.testing.assert_close(got.values.cpu().sort().values, want.values.sort().values)
    torch.testing.assert_close(x.gather(-1, got.indices.cpu()), got.values.cpu())
    assert_matches_cpu(lambda x: torch.topk(x, 2, out=(x.new_empty(0), x.new_empty(0, dtype=torch.int64))), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
@pytest.mark.parametrize("keepdim", [False, True])
def test_kthvalue(dtype, keepdim):
    x = _distinct(dtype)
    assert_matches_cpu(lambda x: torch.kthvalue(x, 3, keepdim=keepdim), x)
    assert_matches_cpu(lambda x: torch.kthvalue(x, 2, dim=0, keepdim=keepdim), x)


def test_kthvalue_ties_nan_and_out():
    x = _with_ties(torch.float32, (3, 9))
    for k in (1, 5, 9):
        want = torch.kthvalue(x, k)
        got = torch.kthvalue(x.to("neuron"), k)
        torch.testing.assert_close(got.values.cpu(), want.values, equal_nan=True)
        torch.testing.assert_close(x.gather(-1, got.indices.cpu()[:, None])[:, 0], want.values, equal_nan=True)
    x = _distinct(torch.float32)
    assert_matches_cpu(lambda x: torch.kthvalue(x, 4, out=(x.new_empty(0), x.new_empty(0, dtype=torch.int64))), x)


SEARCHES = {
    "left": lambda s, v, o: torch.searchsorted(s, v),
    "right": lambda s, v, o: torch.searchsorted(s, v, right=True),
    "side_right_int32": lambda s, v, o: torch.searchsorted(s, v, side="right", out_int32=True),
    "sorter": lambda s, v, o: torch.searchsorted(s[o.argsort()], v, sorter=o.argsort().argsort()),
    "rows": lambda s, v, o: torch.searchsorted(s.expand(3, -1).contiguous(), v.reshape(3, -1)),
    "scalar": lambda s, v, o: torch.searchsorted(s, 2),
    "out": lambda s, v, o: torch.searchsorted(s, v, out=s.new_empty(0, dtype=torch.int64)),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
@pytest.mark.parametrize("form", SEARCHES)
def test_searchsorted(dtype, form):
    sequence = torch.tensor([-3, -1, -1, 0, 2, 2, 2, 5, 7], dtype=dtype)
    values = torch.tensor([[-4, -1, 0, 1, 2, 3], [5, 6, 7, 8, -3, 2], [2, 2, -1, 9, 0, 4]], dtype=dtype)
    order = torch.randperm(sequence.numel())
    assert_matches_cpu(SEARCHES[form], sequence, values, order)


def test_searchsorted_mixed_dtypes_and_nan():
    sequence = torch.tensor([-1.0, 0.5, 2.0, NAN])
    assert_matches_cpu(lambda s, v: torch.searchsorted(s, v), sequence, torch.tensor([NAN, 0.5, 3.0, -2.0]))
    assert_matches_cpu(lambda s, v: torch.searchsorted(s, v, right=True), sequence, torch.tensor([NAN, 0.5, 3.0]))
    assert_matches_cpu(lambda s, v: torch.searchsorted(s, v), torch.tensor([1, 3, 5]), torch.tensor([2.5, 3.0]))
    assert_matches_cpu(lambda s: torch.searchsorted(s, 2.5), torch.tensor([1, 3, 5]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int32])
@pytest.mark.parametrize("op", [torch.cummax, torch.cummin])
def test_cummax_cummin(dtype, op):
    """Values and indices match CPU: ties take the latest index, NaN propagates with the latest NaN's."""
    x = _with_ties(dtype, (3, 7))
    assert_matches_cpu(lambda x: op(x, 1), x)
    assert_matches_cpu(lambda x: op(x, 0, out=(x.new_empty(0), x.new_empty(0, dtype=torch.int64))), x)


GRADIENTS = {
    "sort": lambda x: torch.sort(x, dim=1, descending=True).values,
    "topk": lambda x: torch.topk(x, 2, dim=0).values,
    "kthvalue": lambda x: torch.kthvalue(x, 2).values,
    "cummax": lambda x: torch.cummax(x, 1).values,
}


@pytest.mark.parametrize("op", GRADIENTS)
def test_gradients_match_cpu(op):
    x = _distinct(torch.float32, (4, 5))
    grads = []
    for device in ["cpu", "neuron"]:
        leaf = x.detach().to(device).requires_grad_()
        out = GRADIENTS[op](leaf)
        weights = torch.arange(out.numel(), dtype=out.dtype).reshape(out.shape).to(device)
        (out * weights).sum().backward()
        grads.append(leaf.grad.cpu())
    torch.testing.assert_close(grads[1], grads[0])


@pytest.mark.parametrize("right", [False, True])
def test_bucketize_of_tensors_and_numbers_matches_cpu(right):
    boundaries = torch.tensor([-2.0, 0.0, 0.0, 1.5, 4.0])
    values = torch.tensor([[-3.0, 0.0, 1.5], [4.0, 5.0, -2.0]])

    def run(values, boundaries):
        return (
            torch.bucketize(values, boundaries, right=right),
            torch.bucketize(values, boundaries, right=right, out_int32=True),
            torch.bucketize(0.0, boundaries, right=right),
            torch.bucketize(7, boundaries, right=right),
        )

    assert_matches_cpu(run, values, boundaries)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
@pytest.mark.parametrize(("elements", "tests"), [(20, 6), (6, 40)])  # PyTorch compares directly, or sorts
@pytest.mark.parametrize("invert", [False, True])
def test_isin_matches_cpu(dtype, elements, tests, invert):
    """torch.isin runs natively through PyTorch's decomposition (sort, searchsorted, prims.where)."""
    values, test_values = _with_ties(dtype, (elements,)), _with_ties(dtype, (tests,))
    assert_matches_cpu(lambda e, t: torch.isin(e, t, invert=invert), values, test_values)
    assert_matches_cpu(
        lambda e, t: torch.isin(e, t, assume_unique=True, invert=invert), values.unique(), test_values.unique()
    )


def test_isin_compares_with_ieee_equality():
    """NaN is in nothing; -0.0 and 0.0 are in each other; inf is found among NaN test elements."""
    elements = torch.tensor([0.0, -0.0, NAN, float("inf"), 1.0, -float("inf")])
    tests = torch.tensor([-0.0, float("inf"), NAN, NAN, 2.0, *range(40)])  # long enough to sort on CPU
    assert_matches_cpu(torch.isin, elements, tests)
    assert_matches_cpu(torch.isin, elements, tests[:4])
    assert_matches_cpu(lambda e, t: torch.isin(e, t, invert=True), elements, tests)
    with pytest.raises(RuntimeError, match="Unsupported input type encountered for isin"):  # as on CPU
        torch.isin(torch.tensor([True], device="neuron"), torch.tensor([True], device="neuron"))
    assert_matches_cpu(torch.isin, torch.arange(6).reshape(2, 3), torch.tensor([], dtype=torch.int64))


def test_isin_with_a_scalar():
    x = torch.tensor([1, 4, 2, 4])
    assert_matches_cpu(lambda x: torch.isin(x, 4), x)
    assert_matches_cpu(lambda x: torch.isin(2, x, invert=True), x)


@pytest.mark.parametrize("scalar", [False, True])
def test_searchsorted_refuses_a_sorter_that_is_not_int64(scalar):
    """ATen's searchsorted_pre_check (CPU and CUDA alike); neuron gathered with the int32 sorter."""
    for device in ("cpu", "neuron"):
        sorted_sequence = torch.tensor([3.0, 1.0, 2.0], device=device)
        values = 2.5 if scalar else torch.tensor([1.5, 2.5], device=device)
        sorter = torch.tensor([1, 2, 0], dtype=torch.int32, device=device)
        with pytest.raises(RuntimeError, match="sorter must be a tensor of long dtype but got dtype Int"):
            torch.searchsorted(sorted_sequence, values, sorter=sorter)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"side": "middle"}, "^torch.searchsorted\\(\\): side can only be 'left' or 'right' but got middle$"),
        ({"side": "left", "right": True}, "^torch.searchsorted\\(\\): side and right can't be set to opposites"),
    ],
    ids=["unknown-side", "opposite-side-and-right"],
)
def test_searchsorted_refuses_a_side_as_aten(options, message):
    """ATen's searchsorted_pre_check; neuron computed with side="middle" as if it were "left"."""
    for device in ("cpu", "neuron"):
        sorted_sequence = torch.tensor([1.0, 2.0, 3.0], device=device)
        with pytest.raises(RuntimeError, match=message):
            torch.searchsorted(sorted_sequence, torch.tensor([2.0], device=device), **options)


#: Calls ATen's searchsorted_pre_check refuses by shape (PyTorch's meta kernel checks none: 0-dim
#: boundaries failed with an IndexError, a number with 2-d boundaries with an AttributeError).
SEARCHSORTED_SHAPE_ERRORS = {
    "0d_boundaries": lambda d: torch.searchsorted(torch.tensor(1.0, device=d), torch.tensor([0.5], device=d)),
    "number_with_2d_boundaries": lambda d: torch.searchsorted(torch.ones(2, 3, device=d), 0.5),
    "0d_value_with_2d_boundaries": lambda d: torch.searchsorted(
        torch.ones(2, 3, device=d), torch.tensor(0.5, device=d)
    ),
    "leading_dims_differ": lambda d: torch.searchsorted(torch.ones(2, 3, device=d), torch.ones(3, 2, device=d)),
    "sorter_shape": lambda d: torch.searchsorted(
        torch.ones(3, device=d), torch.ones(2, device=d), sorter=torch.tensor([0, 1], device=d)
    ),
}


@pytest.mark.parametrize("case", SEARCHSORTED_SHAPE_ERRORS)
def test_searchsorted_refuses_shapes_as_aten(case):
    call = SEARCHSORTED_SHAPE_ERRORS[case]
    with pytest.raises(RuntimeError) as on_cpu:
        call("cpu")
    with pytest.raises(RuntimeError) as on_neuron:
        call("neuron")
    assert str(on_neuron.value) == str(on_cpu.value)


def test_searchsorted_refuses_a_sorter_out_of_range_at_the_call():
    # ATen reads the sorter's range back before searching; neuron searched with clipped indices.
    sorted_sequence, values = torch.tensor([1.0, 2.0, 3.0], device="neuron"), torch.ones(2, device="neuron")
    with pytest.raises(RuntimeError, match="torch.searchsorted\\(\\): sorter index out of range"):
        torch.searchsorted(sorted_sequence, values, sorter=torch.tensor([0, 1, 5], device="neuron"))
