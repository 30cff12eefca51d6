"""Pooling lowerings (max/avg/adaptive pooling with their backward ops) against CPU PyTorch.

bfloat16 reference: CPU PyTorch on float32 copies of the same bfloat16 values, rounded once to
bfloat16. PyTorch's CPU bfloat16 pooling backward kernels accumulate overlapping-window gradients in
bfloat16 (rounding at every add, up to ~2% off), and avg_pool3d has no CPU bfloat16 kernel; neuron
accumulates in float32 as CUDA does, so the float32 result rounded once is the value to match (within
assert_close's bfloat16 defaults). avg_pool2d's backward and the adaptive average pools, whose CPU
kernels round each step far outside those defaults, match the CPU's 16-bit kernels bit for bit.
"""

from __future__ import annotations

import copy
import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torch_neuronx
from tests.utils import assert_matches_cpu, to_neuron

aten = torch.ops.aten

DTYPES = [torch.float32, torch.bfloat16]


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def _first(value):
    return value[0] if isinstance(value, tuple) else value


def _assert_matches(fn, x, grad=True, cpu_16_bit=False):
    """``fn(x)`` (a tensor or a (values, indices) pair) and, with ``grad``, the gradient of its first
    result with respect to ``x`` match CPU; nothing falls back. With ``cpu_16_bit``, a bfloat16 ``x``
    is compared with the CPU's own bfloat16 kernels, bit for bit, instead of float32's."""
    reference = x.float() if x.dtype == torch.bfloat16 and not cpu_16_bit else x
    exact = {"atol": 0, "rtol": 0} if cpu_16_bit and x.dtype == torch.bfloat16 else {}
    cpu = reference.clone().requires_grad_(grad)
    expected = fn(cpu)
    torch_neuronx.clear_op_tracking()
    dev = to_neuron(x).requires_grad_(grad)
    actual = fn(dev)
    pairs = zip(
        actual if isinstance(actual, tuple) else (actual,),
        expected if isinstance(expected, tuple) else (expected,),
        strict=True,
    )
    for got, want in pairs:
        torch.testing.assert_close(got.cpu(), want.detach().to(got.dtype), equal_nan=True, **exact)
    if grad:
        grad_output = torch.randn(_first(expected).shape).to(x.dtype)
        _first(expected).backward(grad_output.to(reference.dtype))
        _first(actual).backward(grad_output.to("neuron"))
        torch.testing.assert_close(dev.grad.cpu(), cpu.grad.to(x.dtype), **exact)
    assert torch_neuronx.get_fallback_ops() == {}


MAX_POOL_2D = {
    "k2": {"kernel_size": 2},
    "k3-s2-p1": {"kernel_size": 3, "stride": 2, "padding": 1},
    "rect-ceil": {"kernel_size": (2, 3), "stride": (1, 2), "padding": (1, 0), "ceil_mode": True},
    "dilated-ceil": {"kernel_size": 3, "stride": 2, "padding": 1, "dilation": 2, "ceil_mode": True},
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(MAX_POOL_2D))
def test_max_pool2d_values_indices_and_grad(name, dtype):
    x = torch.randn(2, 3, 9, 8).to(dtype)
    _assert_matches(lambda t: F.max_pool2d(t, return_indices=True, **MAX_POOL_2D[name]), x, cpu_16_bit=True)


@pytest.mark.parametrize("dtype", DTYPES)
def test_max_pool1d_and_3d(dtype):
    x = torch.randn(2, 3, 6, 7, 5).to(dtype)
    _assert_matches(lambda t: F.max_pool1d(t[0, 0], 3, 2, 1, return_indices=True), x, cpu_16_bit=True)
    _assert_matches(lambda t: F.max_pool3d(t, 3, 2, 1, ceil_mode=True, return_indices=True), x, cpu_16_bit=True)


def test_max_pool_index_rules():
    """Ties pick the first maximum in row-major window order; a window with NaNs picks its last NaN;
    an all -inf window picks its first position inside the input."""
    ties = torch.randint(0, 3, (1, 2, 7, 7)).float()
    _assert_matches(lambda t: F.max_pool2d(t, 3, 2, 1, return_indices=True), ties)
    special = torch.tensor([[[[1.0, float("nan"), 3.0, float("nan")], [float("-inf")] * 4]]])
    _assert_matches(lambda t: F.max_pool2d(t, (1, 4), return_indices=True), special, grad=False)
    _assert_matches(lambda t: F.max_pool2d(t, 3, 1, 1, return_indices=True), torch.full((1, 1, 3, 3), float("-inf")))


def test_max_pool2d_integer():
    x = torch.randint(-50, 50, (2, 3, 6, 6))
    _assert_matches(lambda t: F.max_pool2d(t, 3, 2, 1, return_indices=True), x, grad=False)


def test_max_pool1d_of_integers_refuses_without_indices_as_cpu_and_cuda():
    # It computed through max_pool1d_with_indices (upstream test_dtypes_nn_functional_max_pool1d);
    # with indices it computes, as on the CPU.
    x = torch.randint(-50, 50, (2, 3, 8))
    with pytest.raises(
        NotImplementedError, match=re.escape("\"max_pool2d_with_indices_out_cuda_frame\" not implemented for 'Long'")
    ):
        F.max_pool1d(x.to("neuron"), 2)
    _assert_matches(lambda t: F.max_pool1d(t, 3, 2, 1, return_indices=True), x, grad=False)
    with pytest.raises(RuntimeError, match="kernel_size must be greater than zero"):  # its argument checks first
        F.max_pool1d(x.to("neuron"), 0)


AVG_POOL_2D = {
    "k2": {"kernel_size": 2},
    "k3-s2-p1": {"kernel_size": 3, "stride": 2, "padding": 1},
    "ceil-exclude-pad": {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False},
    "ceil-include-pad": {"kernel_size": (3, 2), "stride": 2, "padding": 1, "ceil_mode": True},
    "divisor": {"kernel_size": 3, "stride": 2, "padding": 1, "divisor_override": 5},
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(AVG_POOL_2D))
def test_avg_pool2d(name, dtype):
    # The CPU's 16-bit backward divides each output's gradient in the dtype and adds it to each
    # input of its window in the dtype, window by window (float32 once: up to 16.5x tolerance off).
    x = torch.randn(2, 3, 9, 8).to(dtype)
    _assert_matches(lambda t: F.avg_pool2d(t, **AVG_POOL_2D[name]), x, cpu_16_bit=True)


@pytest.mark.parametrize("dtype", DTYPES)
def test_avg_pool1d_and_3d(dtype):
    x = torch.randn(2, 3, 6, 7, 5).to(dtype)
    _assert_matches(lambda t: F.avg_pool1d(t[0, 0], 3, 2, 1, count_include_pad=False), x, cpu_16_bit=True)
    # The CPU has no 16-bit avg_pool3d: CUDA's float32, rounded once.
    _assert_matches(lambda t: F.avg_pool3d(t, 2, 2, 1, ceil_mode=True, count_include_pad=False), x)


@pytest.mark.parametrize("dtype", DTYPES)
def test_adaptive_avg_pool(dtype):
    x = torch.randn(2, 3, 7, 9, 5).to(dtype)
    _assert_matches(lambda t: F.adaptive_avg_pool2d(t[0], (4, 5)), x, cpu_16_bit=True)
    _assert_matches(lambda t: F.adaptive_avg_pool1d(t[0, 0], 3), x, cpu_16_bit=True)
    if dtype == torch.float32:  # 16-bit: the test below
        _assert_matches(lambda t: F.adaptive_avg_pool3d(t, (3, 4, 2)), x)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize(
    "shape, output_size", [((2, 3, 7, 9, 5), (3, 4, 2)), ((3, 3, 3, 2), (5, 4, 3))], ids=["down", "up"]
)
def test_16_bit_adaptive_avg_pool3d_sums_in_the_dtype_as_the_cpu(dtype, shape, output_size):
    # The CPU's kernels sum each window (or, backward, each input's gradient) in the 16-bit dtype,
    # rounding every addition and division; averaging in float32 and rounding once differed in 75%
    # of bfloat16 elements, by up to 132x assert_close's tolerance.
    x = (torch.randn(shape) * 3 + 1).to(dtype).requires_grad_()
    grad_output = torch.randn(*shape[:-3], *output_size).to(dtype)
    expected = F.adaptive_avg_pool3d(x, output_size)
    (expected_grad,) = torch.autograd.grad(expected, x, grad_output)
    dev = x.detach().to("neuron").requires_grad_()
    actual = F.adaptive_avg_pool3d(dev, output_size)
    (actual_grad,) = torch.autograd.grad(actual, dev, grad_output.to("neuron"))
    torch.testing.assert_close(actual.cpu(), expected, atol=0, rtol=0)
    torch.testing.assert_close(actual_grad.cpu(), expected_grad, atol=0, rtol=0)


OVERLAPPING_MAX_POOLS = {
    "2d": lambda t: F.max_pool2d(t, 3, 1),
    "2d-dilated-ceil": lambda t: F.max_pool2d(t, (3, 2), (1, 2), padding=1, dilation=(2, 1), ceil_mode=True),
    "2d-channels-last": lambda t: F.max_pool2d(t.contiguous(memory_format=torch.channels_last), 3, 2, padding=1),
    "1d": lambda t: F.max_pool1d(t.flatten(2), 4, 1, dilation=2),
    "3d": lambda t: F.max_pool3d(t.reshape(2, 3, 4, 6, 6), 2, 1, padding=1, ceil_mode=True),
    "adaptive-2d": lambda t: F.adaptive_max_pool2d(t[..., :7, :9], (5, 4)),
    "adaptive-3d": lambda t: F.adaptive_max_pool3d(t.reshape(2, 3, 4, 6, 6), (3, 4, 5)),
}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("name", list(OVERLAPPING_MAX_POOLS))
def test_16_bit_max_pool_gradient_adds_in_output_order_as_the_cpu(name, dtype):
    # cpu_max_pool_backward adds each output's gradient into a 16-bit buffer in output order:
    # where windows overlap, float32 rounded once was beyond tolerance. Integer inputs tie often,
    # so that one input takes several gradients.
    def gradient(x, grad_output):
        x = x.requires_grad_()
        return torch.autograd.grad(OVERLAPPING_MAX_POOLS[name](x), x, grad_output)[0]

    x = torch.randn(2, 3, 12, 12).round().to(dtype)
    grad_output = torch.randn(OVERLAPPING_MAX_POOLS[name](x).shape).mul(10).to(dtype)
    assert_matches_cpu(gradient, x, grad_output, atol=0, rtol=0)


def test_16_bit_max_pool_backward_of_indices_outside_their_windows_adds_them_as_the_cpu():
    # A direct call may name any input: such a gradient is not dropped (it is summed in float32).
    def backward(grad_output, x, indices):
        return torch.ops.aten.max_pool2d_with_indices_backward(
            grad_output, x, [2, 2], [2, 2], [0, 0], [1, 1], False, indices
        )

    indices = torch.tensor([[[[35, 0, 35], [1, 35, 2], [35, 35, 35]]]])
    grad_output, x = torch.randn(1, 1, 3, 3).bfloat16(), torch.randn(1, 1, 6, 6).bfloat16()
    assert_matches_cpu(backward, grad_output, x, indices)


@pytest.mark.parametrize("index", [100, 36, -2])
@pytest.mark.parametrize("pool", ["max_pool2d", "adaptive_max_pool2d"])
def test_max_pool_backward_of_an_index_outside_the_plane_raises(pool, index):
    # ATen's kernels write outside the gradient there (the CPU's heap was corrupted); neuron dropped
    # or wrapped it.
    indices = torch.zeros(1, 1, 3, 3, dtype=torch.long)
    indices[0, 0, 1, 1] = index
    grad_output, x = torch.randn(1, 1, 3, 3).to("neuron"), torch.randn(1, 1, 6, 6).to("neuron")
    with pytest.raises(IndexError, match=f"index {index} is out of bounds for an input plane of 36 elements"):
        if pool == "max_pool2d":
            args = ([2, 2], [2, 2], [0, 0], [1, 1], False)
            torch.ops.aten.max_pool2d_with_indices_backward(grad_output, x, *args, indices.to("neuron")).cpu()
        else:
            torch.ops.aten.adaptive_max_pool2d_backward(grad_output, x, indices.to("neuron")).cpu()


@pytest.mark.parametrize("pool", ["max_pool2d", "adaptive_max_pool2d", "fractional_max_pool2d"])
def test_max_pool_backward_of_int32_indices_raises_as_the_cpu(pool):
    backward = {
        "max_pool2d": lambda g, x, i: aten.max_pool2d_with_indices_backward(
            g, x, [2, 2], [2, 2], [0, 0], [1, 1], False, i
        ),
        "adaptive_max_pool2d": lambda g, x, i: aten.adaptive_max_pool2d_backward(g, x, i),
        "fractional_max_pool2d": lambda g, x, i: aten.fractional_max_pool2d_backward(g, x, [2, 2], [2, 2], i),
    }[pool]
    arguments = (torch.randn(1, 2, 2, 2), torch.randn(1, 2, 4, 4), torch.zeros(1, 2, 2, 2, dtype=torch.int32))
    with pytest.raises(RuntimeError, match="^expected scalar type Long but found Int$"):
        backward(*arguments)
    with pytest.raises(RuntimeError, match="^expected scalar type Long but found Int$"):
        backward(*to_neuron(arguments))


def test_max_pool_backward_skips_an_index_of_minus_one_as_the_cpu():
    # -1 is the CPU kernel's mark for no input; neuron wrapped it to the plane's last element.
    def backward(grad_output, x, indices):
        return torch.ops.aten.max_pool2d_with_indices_backward(
            grad_output, x, [2, 2], [2, 2], [0, 0], [1, 1], False, indices
        )

    indices = torch.arange(0, 36, 4).reshape(1, 1, 3, 3)
    indices[0, 0, 1, 1] = -1
    assert_matches_cpu(backward, torch.randn(1, 1, 3, 3), torch.randn(1, 1, 6, 6), indices)


@pytest.mark.parametrize("dtype", DTYPES)
def test_adaptive_max_pool(dtype):
    x = torch.randn(2, 3, 7, 9, 5).to(dtype)
    _assert_matches(lambda t: F.adaptive_max_pool2d(t[0], (4, 5), return_indices=True), x, cpu_16_bit=True)
    _assert_matches(lambda t: F.adaptive_max_pool1d(t[0, 0], 3, return_indices=True), x, cpu_16_bit=True)
    _assert_matches(lambda t: F.adaptive_max_pool3d(t, (3, 4, 2), return_indices=True), x, cpu_16_bit=True)


def test_pooling_ops_reach_their_lowerings():
    x = torch.randn(1, 2, 6, 6)
    _assert_matches(lambda t: F.max_pool2d(t, 2) + F.avg_pool2d(t, 2) + F.adaptive_avg_pool2d(t, 3), x)
    executed = torch_neuronx.get_executed_ops()
    for op in (
        "aten::max_pool2d_with_indices.default",
        "aten::max_pool2d_with_indices_backward.default",
        "aten::avg_pool2d.default",
        "aten::avg_pool2d_backward.default",
        "aten::_adaptive_avg_pool2d.default",
        "aten::_adaptive_avg_pool2d_backward.default",
    ):
        assert executed.get(op) == 1, (op, executed)


def _pooling_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1),
        nn.MaxPool2d(2),
        nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False),
        nn.AdaptiveMaxPool2d((3, 3)),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
    )


def test_pooling_modules_train_step():
    model = _pooling_model()
    device_model = copy.deepcopy(model).to("neuron")
    x = torch.randn(2, 3, 10, 10)
    expected = model(x)
    grad_output = torch.randn(expected.shape)
    expected.backward(grad_output)
    torch_neuronx.clear_op_tracking()
    actual = device_model(x.to("neuron"))
    actual.backward(grad_output.to("neuron"))
    assert torch_neuronx.get_fallback_ops() == {}
    torch.testing.assert_close(actual.cpu(), expected.detach())
    for p, q in zip(model.parameters(), device_model.parameters(), strict=True):
        torch.testing.assert_close(q.grad.cpu(), p.grad)


def test_pooling_modules_bfloat16_forward():
    """A bfloat16 network rounds after every layer on both sides, so it is compared with CPU's own
    bfloat16 forward (gradients per op are covered above)."""
    model = _pooling_model().to(torch.bfloat16)
    x = torch.randn(2, 3, 10, 10).to(torch.bfloat16)
    with torch.no_grad():
        expected = model(x)
        actual = copy.deepcopy(model).to("neuron")(x.to("neuron"))
    torch.testing.assert_close(actual.cpu(), expected)


@pytest.mark.parametrize("divisor_override", [-2, 3])
@pytest.mark.parametrize("pool", [F.avg_pool2d, F.avg_pool3d], ids=["2d", "3d"])
def test_avg_pool_divides_by_any_nonzero_divisor_override_as_on_cpu(pool, divisor_override):
    x = torch.randn((1, 2) + (4,) * (3 if pool is F.avg_pool3d else 2), requires_grad=True)

    def run(x):
        y = pool(x, 2, divisor_override=divisor_override)
        return y, torch.autograd.grad(y.sum(), x)

    assert_matches_cpu(run, x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize(
    ("shape", "kernel", "out"),
    [
        ((2, 3, 11, 13), [2, 3], [5, 6]),
        ((3, 9, 9), [3, 3], [3, 4]),
        ((2, 2, 7, 8, 9), [2, 2, 3], [3, 5, 4]),
        ((2, 7, 8, 9), [2, 2, 2], [1, 6, 4]),
    ],
)
def test_fractional_max_pool_places_windows_as_the_cpu(shape, kernel, out, dtype):
    """The windows' starts come from each plane's random samples, computed in the input dtype as the
    CPU's generate_intervals does (16-bit floats round each step); values and indices to the bit, with
    ties (first maximum) and gradients. It ran on the CPU fallback."""
    nd = len(kernel)
    x = torch.randn(shape).to(dtype)
    x.view(-1)[::7] = x.view(-1)[3]
    planes = shape[-nd - 1]
    samples = torch.rand(shape[0] + 1 if len(shape) == nd + 2 else 1, planes, nd).to(dtype)
    op = torch.ops.aten.fractional_max_pool2d if nd == 2 else torch.ops.aten.fractional_max_pool3d
    expected = op(x, kernel, out, samples)
    torch_neuronx.clear_op_tracking()
    actual = op(x.to("neuron"), kernel, out, samples.to("neuron"))
    torch.testing.assert_close(actual[0].cpu(), expected[0], rtol=0, atol=0)
    assert torch.equal(actual[1].cpu(), expected[1])
    _assert_matches(lambda t: op(t, kernel, out, samples.float().to(t.device)), x.float())
    assert torch_neuronx.get_fallback_ops() == {}


def test_fractional_max_pool_takes_the_last_nan():
    x = torch.randn(1, 1, 6, 6)
    x[0, 0, 1, 1] = x[0, 0, 2, 2] = float("nan")
    samples = torch.rand(1, 1, 2)
    expected = torch.ops.aten.fractional_max_pool2d(x, [3, 3], [2, 2], samples)
    actual = torch.ops.aten.fractional_max_pool2d(x.to("neuron"), [3, 3], [2, 2], samples.to("neuron"))
    torch.testing.assert_close(actual[0].cpu(), expected[0], equal_nan=True)
    assert torch.equal(actual[1].cpu(), expected[1])


@pytest.mark.parametrize(
    ("nd", "shape", "kernel", "out", "samples"),
    [
        (2, (1, 1, 4, 10), [2, 8], [2, 4], (1, 1, 2)),  # PyTorch's meta kernel words it otherwise
        (2, (1, 1, 4, 10), [4, 2], [2, 4], (1, 1, 3)),  # the pool size first, then the samples
        (2, (1, 1, 2, 4, 4), [2, 2], [2, 2], (1, 1, 2)),
        (2, (1, 0, 4, 4), [2, 2], [2, 2], (1, 0, 2)),
        (2, (1, 1, 4, 4), [2, 2], [2, 2], (1, 1, 3)),
        (3, (1, 1, 4, 4, 4), [2, 2, 2], [2, 2, 2], (1, 1)),  # checked by the CPU kernel only
        (3, (1, 1, 4, 4, 4), [2, 2, 2], [2, 2, 2], (1, 1, 2)),  # read past the samples: was clamped
        (3, (2, 1, 4, 4, 4), [2, 2, 2], [2, 2, 2], (1, 1, 3)),
        (3, (1, 2, 4, 4, 4), [2, 2, 2], [2, 2, 2], (1, 1, 3)),
    ],
)
def test_fractional_max_pool_argument_errors_are_the_cpus(nd, shape, kernel, out, samples):
    op = torch.ops.aten.fractional_max_pool2d if nd == 2 else torch.ops.aten.fractional_max_pool3d
    with pytest.raises(RuntimeError) as cpu_error:
        op(torch.ones(shape), kernel, out, torch.rand(samples))
    with pytest.raises(RuntimeError) as neuron_error:
        op(torch.ones(shape, device="neuron"), kernel, out, torch.rand(samples, device="neuron"))
    assert str(neuron_error.value).splitlines()[0] == str(cpu_error.value).splitlines()[0]


@pytest.mark.parametrize(
    ("nd", "shape"),
    [(2, (0, 2, 5, 5)), (3, (0, 2, 5, 5, 5)), (2, (0, 5, 5)), (3, (0, 5, 5, 5))],
    ids=str,
)
def test_fractional_max_pool_of_an_empty_batch_or_unbatched_planes_as_the_cpu(nd, shape):
    # reshape(..., -1) of the empty batch divided by zero (ZeroDivisionError); PyTorch's meta kernel
    # refused an unbatched input without planes, which ATen does not check.
    pool = F.fractional_max_pool2d if nd == 2 else F.fractional_max_pool3d
    results = []
    for device in ("cpu", "neuron"):
        x = torch.rand(shape, device=device, requires_grad=True)
        values, indices = pool(x, 2, output_size=3, return_indices=True)
        values.sum().backward()
        results.append((values, indices, x.grad))
    for actual, expected in zip(results[1], results[0], strict=True):
        torch.testing.assert_close(actual.cpu(), expected)


@pytest.mark.parametrize(
    ("pool", "shape"),
    [
        (lambda x: F.adaptive_avg_pool2d(x, (3, 3)), (1, 1, 0, 8)),
        (lambda x: F.adaptive_avg_pool3d(x, (3, 3, 3)), (1, 1, 4, 0, 8)),
        (lambda x: F.adaptive_avg_pool1d(x, 3), (1, 1, 0)),
    ],
)
def test_adaptive_avg_pool_of_an_empty_window_raises_as_the_cpu(pool, shape):
    """An empty spatial dimension averaged empty windows to NaN; ATen refuses it (the 3-D pool in
    CUDA's words, adaptive_avg_pool3d_cuda(), docs/usage.md)."""
    with pytest.raises(RuntimeError) as cpu_error:
        pool(torch.randn(shape))
    with pytest.raises(RuntimeError) as neuron_error:
        pool(torch.randn(shape, device="neuron"))
    expected = str(cpu_error.value).splitlines()[0].replace("adaptive_avg_pool3d(", "adaptive_avg_pool3d_cuda(")
    assert str(neuron_error.value).splitlines()[0] == expected


def test_adaptive_avg_pool_of_no_channels_is_empty_as_the_cpu():
    assert F.adaptive_avg_pool2d(torch.randn(1, 0, 4, 8, device="neuron"), (3, 3)).shape == (1, 0, 3, 3)


@pytest.mark.parametrize(
    "pool",
    [
        lambda x: F.fractional_max_pool2d(x, 0, output_size=2),
        lambda x: F.fractional_max_pool2d(x, -1, output_size=2),
        lambda x: F.fractional_max_pool3d(x.unsqueeze(2).expand(1, 3, 8, 8, 8), (0, 2, 2), output_size=2),
    ],
)
def test_fractional_max_pool_of_no_window_raises_instead_of_returning_minus_infinity(pool):
    # The CPU returns -inf with indices outside the input for a kernel_size of 0 or less.
    with pytest.raises(RuntimeError, match=r"kernel_size must be greater than zero, but got \[-?[0-9], "):
        pool(torch.ones(1, 3, 8, 8, device="neuron"))


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: F.avg_pool2d(x, 3, stride=1),
        lambda x: F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False),
        lambda x: F.avg_pool1d(x.flatten(2), 5, stride=3),
        lambda x: F.adaptive_avg_pool1d(x.flatten(2), 10),
        lambda x: F.adaptive_avg_pool2d(x, (5, 3)),
        lambda x: F.adaptive_avg_pool2d(x.bfloat16(), (5, 3)),
        lambda x: F.adaptive_avg_pool3d(x.view(2, 3, 4, 8, 8), (3, 5, 3)),
    ],
    ids=[
        "avg_pool2d",
        "avg_pool2d-uncounted-padding",
        "avg_pool1d",
        "adaptive_avg_pool1d",
        "adaptive_avg_pool2d",
        "adaptive_avg_pool2d-bfloat16",
        "adaptive_avg_pool3d",
    ],
)
def test_window_averages_divide_as_the_cpu(fn):
    # The CPU divides each window's sum by its count; XLA turned the division by the constant
    # counts into a multiplication by their reciprocals, an ulp off in 11-20% of the elements. The
    # adaptive pools sum each window element by element (a window matrix product summed in the
    # order of XLA's dot, which depends on the host's vector width: 38 of 60 elements an ulp off on
    # an AVX-512 host) and divide by the extents in turn.
    x = torch.randn(2, 3, 16, 16)
    torch.testing.assert_close(fn(x.to("neuron")).cpu(), fn(x), rtol=0, atol=0)


@pytest.mark.parametrize(("kernel", "stride", "padding"), [(2560, None, 0), (8, None, 0), (4, 2, 2)])
def test_avg_pool_window_past_a_one_element_plane_matches_the_cpu(kernel, stride, padding):
    # EfficientNet's pooler (a 2560-wide ceil_mode window over a 1 x 1 plane of 2560 channels):
    # XLA's CPU backend (YNNPACK's reduce fusion) summed such padded windows wrongly after another op
    # in the graph (26228 for 0.69), and the backward built the 134 GB padded input.
    x = torch.randn(2, 2560, 1, 1)

    def pool(t):
        return F.avg_pool2d(t * 2, kernel, stride, padding, ceil_mode=True)

    compiled = torch.compile(pool, backend="neuron", fullgraph=True)
    torch.testing.assert_close(compiled(x.to("neuron")).cpu(), pool(x))
    on_device, on_cpu = x.to("neuron").requires_grad_(), x.clone().requires_grad_()
    pool(on_device).square().sum().backward()
    pool(on_cpu).square().sum().backward()
    torch.testing.assert_close(on_device.grad.cpu(), on_cpu.grad)
