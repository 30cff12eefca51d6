"""Order statistics, counting and data-dependent shapes against the CPU: median, nanmedian, mode
(lowering/sorting.py), histc, histogram, histogramdd, segment_reduce (lowering/reduction.py) and
unique, unique_consecutive, bincount, repeat_interleave (eager/host_ops.py)."""

from __future__ import annotations

import re

import pytest
import torch
from torch.utils import _pytree as pytree

import torch_neuronx
from tests.utils import assert_matches_cpu

NAN = float("nan")


def _to_neuron(value):
    return pytree.tree_map_only(torch.Tensor, lambda t: t.to("neuron"), value)


def _run(fn, *inputs, **kwargs):
    """fn on the CPU inputs and on their neuron copies; no op may fall back to the CPU."""
    expected = fn(*inputs, **kwargs)
    torch_neuronx.clear_op_tracking()
    actual = fn(*_to_neuron(inputs), **_to_neuron(kwargs))
    actual = pytree.tree_map_only(torch.Tensor, lambda t: t.cpu(), actual)
    assert torch_neuronx.get_fallback_ops() == {}
    return actual, expected


def _values(*shape, dtype, low=0, high=4, nan_at=None):
    torch.manual_seed(0)
    x = torch.randint(low, high, shape).to(dtype)
    if nan_at is not None:
        x[nan_at] = NAN
    return x


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.uint8])
@pytest.mark.parametrize("op", [torch.median, torch.nanmedian])
def test_median_of_all_elements(op, dtype):
    x = _values(5, 6, dtype=dtype)
    actual, expected = _run(op, x)
    torch.testing.assert_close(actual, expected, atol=0, rtol=0)


@pytest.mark.parametrize("op", [torch.median, torch.nanmedian])
@pytest.mark.parametrize("keepdim", [False, True])
def test_median_dim_values_and_nan_rules(op, keepdim):
    x = _values(4, 7, dtype=torch.float32, nan_at=(1, 2))
    x[3] = NAN  # an all-NaN row: NaN for both, index of a NaN
    (values, indices), (want_values, want_indices) = _run(op, x, 1, keepdim=keepdim)
    torch.testing.assert_close(values, want_values, atol=0, rtol=0, equal_nan=True)
    # indices may differ among equal values (unspecified in PyTorch) but must select the median
    picked = torch.take_along_dim(x, indices if keepdim else indices[:, None], 1)
    torch.testing.assert_close(picked.reshape(values.shape), want_values, atol=0, rtol=0, equal_nan=True)
    if op is torch.median:  # a row holding NaN reports its first NaN, as on CPU
        assert indices.reshape(-1)[1] == want_indices.reshape(-1)[1] == 2


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_mode_picks_smallest_most_frequent_value(dtype):
    x = _values(3, 9, dtype=dtype, high=3)
    (values, indices), (want_values, _) = _run(torch.mode, x, 1)
    torch.testing.assert_close(values, want_values, atol=0, rtol=0)
    torch.testing.assert_close(torch.take_along_dim(x, indices[:, None], 1)[:, 0], want_values, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("bins, low, high", [(7, -2, 3), (5, 0, 0), (4, 1, 1), (1, -10, 10)])
def test_histc(dtype, bins, low, high):
    torch.manual_seed(0)
    x = (torch.randn(40) * 3).to(dtype)
    actual, expected = _run(torch.histc, x, bins=bins, min=low, max=high)
    torch.testing.assert_close(actual, expected, atol=0, rtol=0)


@pytest.mark.parametrize(
    ("dtype", "data", "low", "high"),
    [
        # max - min overflows: the CPU's linspace edges are NaN and it counts nothing; neuron counted
        # every element in bin 0.
        (torch.float32, [1.0, 2.0, -3e38, 3e38], -3e38, 3e38),
        (torch.float32, [1.0, 2.0, -3e38, 3e38], 0, 0),  # the data's range
        (torch.bfloat16, [1.0, 2.0, -3e38, 3e38], 0, 0),
        (torch.float16, [1.0, 2.0, -6e4, 6e4], -6e4, 6e4),
        # only (value - min) * bins overflows: the CPU's int64 cast of inf lands in bin 0; neuron
        # counted float16 ones in the last bin.
        (torch.float16, [3e4, 0.0, -3e4, 1.5e4, -1e4], -3e4, 3e4),
        (torch.float32, [1e38, 0.0, -2e38, 5e37, -1e38], -2e38, 1e38),
    ],
)
@pytest.mark.parametrize("bins", [1, 3, 100])
def test_histc_of_ranges_that_overflow_the_dtype_matches_cpu(dtype, data, low, high, bins):
    x = torch.tensor(data).to(dtype)
    actual, expected = _run(torch.histc, x, bins=bins, min=low, max=high)
    torch.testing.assert_close(actual, expected, atol=0, rtol=0)


def test_histc_of_float16_subnormal_data_matches_cpu():
    # The bin edges of a float16 range below 2**-14 were flushed to zero: every count was 0.
    x = torch.tensor([1e-6, 2e-6, 3e-6, 5e-6], dtype=torch.float16)
    actual, expected = _run(torch.histc, x, bins=3, min=0, max=4e-6)
    torch.testing.assert_close(actual, expected, atol=0, rtol=0)


@pytest.mark.parametrize("bins", [7, 13, 22, 100])
def test_histc_of_values_on_bin_edges_matches_cpu(bins):
    # XLA multiplied by the reciprocal of the broadcast max - min: 18 of these values fell a bin low
    # for bins=100.
    x = torch.linspace(-5, 5, 1001)
    actual, expected = _run(torch.histc, x, bins=bins, min=-5, max=5)
    torch.testing.assert_close(actual, expected, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int32, torch.int64])
@pytest.mark.parametrize("bins, low, high", [(7, -2, 3), (5, 0, 0), (4, 1, 1), (3, 0, 10), (8, 0, 7), (2, 2.9, 5.5)])
def test_histc_of_integers_as_cuda(dtype, bins, low, high):
    # The CPU has no integer kernel; CUDA truncates min/max to the input dtype and bins in integer
    # arithmetic, which the CPU's float64 kernel on the truncated bounds reproduces exactly here.
    torch.manual_seed(0)
    x = torch.randint(0 if dtype == torch.uint8 else -4, 9, (40,), dtype=dtype)
    expected = torch.histc(x.double(), bins=bins, min=int(low), max=int(high)).to(dtype)
    torch_neuronx.clear_op_tracking()
    actual = torch.histc(x.to("neuron"), bins=bins, min=low, max=high).cpu()
    assert torch_neuronx.get_fallback_ops() == {}
    torch.testing.assert_close(actual, expected, atol=0, rtol=0)


def test_histc_counts_tokens_per_expert_as_moe_routing_does():
    # transformers' MoE load-balancing loss on an accelerator: int32 expert ids, one bin per expert.
    torch.manual_seed(0)
    experts = torch.randint(0, 8, (16, 2), dtype=torch.int32)
    counts = torch.histc(experts.to("neuron"), bins=8, min=0, max=7).cpu()
    expected = torch.bincount(experts.reshape(-1), minlength=8).to(torch.int32)
    torch.testing.assert_close(counts, expected, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", [torch.int32, torch.float16, torch.int64])
def test_histc_copies_into_an_out_of_any_dtype_as_cuda(dtype):
    # CUDA's _histc_out_cuda computes, then copy_s into out= (the CPU refuses another dtype).
    values = torch.tensor([1.0, 2.0, 2.5, 3.0, 0.5])
    out = torch.empty(0, dtype=dtype, device="neuron")
    assert torch.histc(values.to("neuron"), bins=3, out=out) is out
    torch.testing.assert_close(out.cpu(), torch.histc(values, bins=3).to(dtype), rtol=0, atol=0)


@pytest.mark.parametrize(
    ("bins", "low", "high", "message"),
    [
        (0, 0, 0, "bins must be > 0"),
        (3, 2, 1, "max must be larger than min"),
        (3, float("nan"), 1, r"range of \[nan, 1\] is not finite"),
        (3, 0, float("inf"), r"range of \[0, inf\] is not finite"),
    ],
)
def test_histc_checks_its_arguments_in_cudas_words(bins, low, high, message):
    """CUDA's _histc_cuda_template (SummaryOps.cu): PyTorch's meta kernel called a NaN bound a
    reversed range and words the others as "histc(): ..."."""
    with pytest.raises(RuntimeError, match=f"^{message}$"):
        torch.histc(torch.ones(3, device="neuron"), bins=bins, min=low, max=high)


@pytest.mark.parametrize(("data", "shown"), [([1.0, float("inf")], "1, inf"), ([-float("inf"), 2.5], "-inf, 2.5")])
def test_histc_of_non_finite_data_raises_at_the_call_in_cudas_words(data, shown):
    # CUDA reads the data's range back before counting; neuron raised at the next synchronization.
    values = torch.tensor(data, device="neuron")
    with pytest.raises(RuntimeError, match=re.escape(f"range of [{shown}] is not finite")):
        torch.histc(values, bins=4)


@pytest.mark.parametrize(
    "call",
    [
        lambda d: torch.histogram(torch.tensor([1.0, float("nan"), 3.0], device=d), 4),
        lambda d: torch.histogram(torch.tensor([1.0, float("inf")], device=d), 4),
        lambda d: torch.histogramdd(torch.tensor([[1.0, 2.0], [3.0, -float("inf")]], device=d), [2, 2]),
    ],
    ids=["histogram-nan", "histogram-inf", "histogramdd-second-dimension"],
)
def test_histogram_of_non_finite_data_raises_at_the_call_in_the_cpus_words(call):
    # The CPU reads the data's range first; neuron raised "the range of the data is not finite" at the
    # next synchronization.
    with pytest.raises(RuntimeError) as expected:
        call("cpu")
    with pytest.raises(RuntimeError, match=re.escape(str(expected.value)) + "$"):
        call("neuron")


@pytest.mark.parametrize("density", [False, True])
@pytest.mark.parametrize(
    "call",
    [
        lambda x, w, density: torch.histogram(x, 5, density=density),
        lambda x, w, density: torch.histogram(x, 3, range=(-1.0, 2.0), weight=w[:, None].expand(8, 3), density=density),
        lambda x, w, density: torch.histogram(x, torch.tensor([-3.0, -1, 0, 2.5, 4], device=x.device), density=density),
        lambda x, w, density: torch.histogramdd(x, [4, 2, 3], weight=w, density=density),
        lambda x, w, density: torch.histogramdd(x, [torch.tensor([-3.0, 0, 2], device=x.device)] * 3, density=density),
    ],
    ids=["bin_ct", "range_weight", "edges", "dd_bin_cts", "dd_edges"],
)
def test_histogram(call, density):
    torch.manual_seed(0)
    x, w = torch.randn(8, 3) * 1.5, torch.rand(8)
    actual, expected = _run(call, x, w, density=density)
    torch.testing.assert_close(actual, expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
@pytest.mark.parametrize("dim", [None, 0, 1])
@pytest.mark.parametrize("op", [torch.unique, torch.unique_consecutive])
def test_unique(op, dim, dtype):
    x = _values(6, 4, dtype=dtype, high=2)
    x[1] = x[0]
    actual, expected = _run(op, x, return_inverse=True, return_counts=True, dim=dim)
    torch.testing.assert_close(actual, expected, atol=0, rtol=0)


@pytest.mark.parametrize("return_inverse", [False, True])
def test_legacy_unique_overload(return_inverse):
    """``torch._unique``, which index_fill's backward calls."""
    x = _values(3, 5, dtype=torch.int64, high=4)
    assert_matches_cpu(lambda x: torch._unique(x, return_inverse=return_inverse), x)


def test_index_fill_gradient_runs_natively():
    x, index = torch.randn(3, 4, requires_grad=True), torch.tensor([2, 0, 2])
    assert_matches_cpu(lambda x, i: torch.autograd.grad(x.index_fill(1, i, -1.0).sum(), x), x, index)


def test_unique_nan_elements_are_distinct():
    x = torch.tensor([NAN, NAN, 1.0, 1.0, NAN, 2.0])
    for op in (torch.unique, torch.unique_consecutive):
        actual, expected = _run(op, x, return_inverse=True, return_counts=True)
        torch.testing.assert_close(actual, expected, equal_nan=True)


@pytest.mark.parametrize(
    "x",
    [
        torch.tensor([NAN, 0, 0, NAN, NAN, 1]),  # PyTorch's test_unique_dim: the CPU keeps this order
        torch.tensor([[1.0, NAN], [1.0, NAN], [0.0, 2.0], [NAN, 1.0]]),
        torch.where(torch.arange(40 * 3).reshape(40, 3) % 7 == 0, NAN, torch.arange(40 * 3.0).reshape(40, 3) % 4),
    ],
    ids=["1d", "rows", "40_rows"],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_unique_dim_places_nan_slices_as_the_cpu_does(x, dtype):
    # ATen's std::sort compares slices in a way that is no order with NaN: the algorithm decides.
    for dim in range(x.dim()):
        actual, expected = _run(torch.unique, x.to(dtype), return_inverse=True, return_counts=True, dim=dim)
        torch.testing.assert_close(actual, expected, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.int64, torch.uint8, torch.int8])
@pytest.mark.parametrize("minlength", [0, 3, 12])
@pytest.mark.parametrize("weighted", [False, True])
def test_bincount(dtype, minlength, weighted):
    x = _values(9, dtype=dtype, high=6)
    weights = torch.randn(9) if weighted else None
    actual, expected = _run(torch.bincount, x, weights, minlength=minlength)
    torch.testing.assert_close(actual, expected)


@pytest.mark.parametrize(
    "x, weights, error, match",
    [
        (torch.tensor([1, -1]), None, RuntimeError, "non-negative"),
        (torch.tensor([[1]]), None, RuntimeError, "1-d"),
        (torch.tensor([1, 2]), torch.tensor([1.0]), RuntimeError, "same length"),
        (
            torch.tensor([1, 2]),
            torch.tensor([1, 2]),
            TypeError,
            r"no FP64 arithmetic\. Pass weights\.to\(torch\.float32\)",
        ),
    ],
)
def test_bincount_errors(x, weights, error, match):
    with pytest.raises(error, match=match):
        torch.bincount(*_to_neuron((x, weights)))


REPEAT_INTERLEAVES = {
    "indices": lambda r: torch.repeat_interleave(r),
    "output_size": lambda r: torch.repeat_interleave(r, output_size=int(r.sum())),
    "rows": lambda r: torch.arange(2.0 * len(r), device=r.device).reshape(-1, 2).repeat_interleave(r, dim=0),
    "columns": lambda r: torch.ones(2, len(r), device=r.device).cumsum(1).repeat_interleave(r, dim=1),
}


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
@pytest.mark.parametrize("form", REPEAT_INTERLEAVES)
def test_repeat_interleave_with_tensor_repeats(form, dtype):
    """The output size depends on the repeats: one synchronisation reads it, nothing runs on the CPU."""
    repeats = torch.tensor([2, 0, 3, 1], dtype=dtype)
    assert_matches_cpu(REPEAT_INTERLEAVES[form], repeats)
    assert_matches_cpu(torch.repeat_interleave, repeats[:0])


@pytest.mark.parametrize(
    "repeats, kwargs, match",
    [
        (torch.tensor([1, -1]), {}, "repeats can not be negative"),
        (torch.tensor([[1]]), {}, "only accept 1D vector as repeat"),
        (torch.tensor([2, 1]), {"output_size": 4}, "allocated size does not match required size"),
        (torch.tensor([3, -1]), {"output_size": 2}, "repeats can not be negative"),
    ],
)
def test_repeat_interleave_errors_match_cpu(repeats, kwargs, match):
    """With ``output_size`` nothing is read back, as on CUDA: the checks raise at the next
    synchronisation, here the copy to the CPU."""
    with pytest.raises(RuntimeError, match=match):
        torch.repeat_interleave(repeats, **kwargs)
    with pytest.raises(RuntimeError, match=match):
        torch.repeat_interleave(repeats.to("neuron"), **kwargs).cpu()


@pytest.mark.parametrize("output_size", [5, 2])
def test_a_wrong_output_size_raises_once_and_leaves_the_rows_unreadable(output_size):
    # helper-71: a too-large output_size made a second fault (the rows' index_select out of range),
    # raised by the next unrelated host read.
    x = torch.arange(6.0, device="neuron").reshape(2, 3)
    with pytest.raises(RuntimeError, match="allocated size does not match required size"):
        rows = x.repeat_interleave(torch.tensor([1, 2], device="neuron"), 0, output_size=output_size)
        torch.neuron.synchronize()
    assert (torch.ones(2, device="neuron") * 3).tolist() == [3.0, 3.0]
    with pytest.raises(RuntimeError, match="raised before"):
        rows.cpu()


def test_repeat_interleave_with_output_size_reads_nothing_back():
    repeats, x = torch.tensor([2, 0, 3]), torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    torch.neuron.set_sync_debug_mode("error")
    try:
        index = torch.repeat_interleave(repeats.to("neuron"), output_size=5)
        rows = x.to("neuron").repeat_interleave(repeats.to("neuron"), dim=0, output_size=5)
    finally:
        torch.neuron.set_sync_debug_mode("default")
    torch.testing.assert_close(index.cpu(), torch.repeat_interleave(repeats, output_size=5))
    torch.testing.assert_close(rows.cpu(), x.repeat_interleave(repeats, dim=0, output_size=5))


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
@pytest.mark.parametrize("initial", [None, 2.0])
@pytest.mark.parametrize("kind", ["lengths", "offsets"])
def test_segment_reduce_forward_and_backward(reduce, initial, kind):
    torch.manual_seed(0)
    data = torch.randn(6, 3)
    data[2, 1] = 0
    data[3, 0] = data[4, 0]
    lengths = torch.tensor([2, 0, 3, 1])
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
    segments = {"lengths": lengths} if kind == "lengths" else {"offsets": offsets}
    grad = torch.randn(4, 3)

    def forward_backward(data, grad, segments):
        data = data.clone().requires_grad_()
        output = torch.segment_reduce(data, reduce, initial=initial, **segments)
        output.backward(grad)
        return output.detach(), data.grad

    actual, expected = _run(forward_backward, data, grad, segments)
    torch.testing.assert_close(actual, expected, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_segment_reduce_rounds_each_step_as_cpu(dtype):
    torch.manual_seed(0)
    data = (torch.randn(12, 2) * 100).to(dtype)
    actual, expected = _run(torch.segment_reduce, data, "sum", lengths=torch.tensor([7, 5]))
    torch.testing.assert_close(actual, expected, atol=0, rtol=0)
