"""Activations and softmax on neuron against CPU: forward values, gradients, in-place and out= forms."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torch_neuronx
from tests.utils import assert_matches_cpu

aten = torch.ops.aten


@pytest.fixture(autouse=True)
def _seeded():
    torch.manual_seed(0)


ACTIVATIONS = {
    "relu": F.relu,
    "leaky_relu": lambda x: F.leaky_relu(x, 0.2),
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
    "mish": F.mish,
    "elu": lambda x: F.elu(x, alpha=0.5),
    "selu": F.selu,
    "celu": lambda x: F.celu(x, alpha=1.5),
    "hardtanh": lambda x: F.hardtanh(x, -0.5, 0.75),
    "relu6": F.relu6,
    "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid,
    "softplus": lambda x: F.softplus(x, beta=2.0, threshold=3.0),
    "threshold": lambda x: F.threshold(x, 0.1, -2.0),
    "glu": lambda x: F.glu(x, dim=1),
    "logsigmoid": F.logsigmoid,
    "softmax": lambda x: F.softmax(x, dim=1),
    "log_softmax": lambda x: F.log_softmax(x, dim=0),
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "hardshrink": lambda x: F.hardshrink(x, 1.0),
    "softshrink": lambda x: F.softshrink(x, 1.0),
}

#: The backend op each activation must reach (so a decomposition does not hide a missing lowering).
LOWERED = {
    "relu": "aten::relu.default",
    "gelu": "aten::gelu.default",
    "silu": "aten::silu.default",
    "mish": "aten::mish.default",
    "elu": "aten::elu.default",
    "hardtanh": "aten::hardtanh.default",
    "softplus": "aten::softplus.default",
    "glu": "aten::glu_backward.default",
    "logsigmoid": "aten::log_sigmoid_backward.default",
    "softmax": "aten::_softmax_backward_data.default",
    "log_softmax": "aten::_log_softmax_backward_data.default",
    "tanh": "aten::tanh_backward.default",
    "sigmoid": "aten::sigmoid_backward.default",
    "hardshrink": "aten::hardshrink_backward.default",
    "softshrink": "aten::softshrink_backward.default",
}


def _value_and_grad(fn):
    def run(x, grad):
        out = fn(x)
        (dx,) = torch.autograd.grad(out, x, grad)
        return out, dx

    return run


def _input(dtype: torch.dtype) -> torch.Tensor:
    x = torch.randn(4, 6, dtype=torch.float32) * 3
    x[0, :3] = torch.tensor([-3.0, 3.0, 0.0])  # the kinks of the piecewise activations
    return x.to(dtype).requires_grad_()


#: Activations whose 16-bit reference is CPU computing in float32, rounded once, because CPU's own
#: 16-bit kernel rounds an intermediate: glu_backward stores sigmoid(b) in 16 bits before computing
#: (1 - s) * s, which loses every digit where s is close to 1.
FLOAT32_REFERENCE = {"glu"}


def _cases():
    for name in ACTIVATIONS:
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            yield pytest.param(name, dtype, id=f"{name}-{dtype}")


@pytest.mark.parametrize("name, dtype", list(_cases()))
def test_activation_forward_and_backward_match_cpu(name, dtype):
    x = _input(dtype)
    grad = torch.randn_like(ACTIVATIONS[name](x.detach()))
    run = _value_and_grad(ACTIVATIONS[name])
    if name in FLOAT32_REFERENCE and dtype != torch.float32:
        expected = run(x.detach().float().requires_grad_(), grad.float())
        actual = run(x.detach().to("neuron").requires_grad_(), grad.to("neuron"))
        for got, want in zip(actual, expected, strict=True):
            torch.testing.assert_close(got.cpu(), want.to(dtype))
    else:
        assert_matches_cpu(run, x, grad)
    assert torch_neuronx.get_fallback_ops() == {}
    if name in LOWERED:
        assert LOWERED[name] in torch_neuronx.get_executed_ops()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize(
    "eps",
    [None, 0.2, float("nan"), 0.7, 1.0, -1e-10],
    ids=["no_eps", "eps", "nan_eps", "eps_above_half", "eps_1", "negative_eps"],
)
def test_logit_and_its_gradient_match_the_cpu_kernels(eps, dtype):
    """CPU's 16-bit logit kernels round eps, 1 - eps and each operator's result to 16 bits (bit for
    bit here; rounding once differed in half of the elements). A NaN eps clamps nothing, one above
    0.5 maps x below it to eps and x above it to 1 - eps, as the kernels'
    ``x < lo ? lo : (x > hi ? hi : x)`` does, and a negative one clamps nothing (1 + 1e-10 is 1)."""
    x = torch.linspace(-0.1, 1.1, 25).to(dtype).requires_grad_()
    grad = torch.linspace(-1, 1, 25).to(dtype)
    exact = {} if dtype == torch.float32 else {"atol": 0, "rtol": 0}
    if dtype == torch.float32 and math.isnan(eps or 0):
        # The CPU's float32 gradient with a NaN eps is 0 in its vectorised part (16 of these 25
        # elements on AVX2 hosts, none on AVX-512), CUDA's elsewhere: neuron gives CUDA's
        # (test_logit_gradient_with_a_nan_eps_is_cudas), so only the values compare here.
        assert_matches_cpu(lambda t: torch.logit(t, eps), x.detach())
        return
    run = _value_and_grad(lambda t: torch.logit(t, eps))
    assert_matches_cpu(run, x, grad, **exact)
    assert torch_neuronx.get_fallback_ops() == {}
    assert "aten::logit_backward.default" in torch_neuronx.get_executed_ops()


def test_logit_gradient_with_a_nan_eps_is_cudas():
    # The CPU's vectorised logit_backward gives 0 where its scalar tail and CUDA's kernel give the
    # gradient (``x_vec >= lo_vec`` is false for a NaN lo): 32 of 40 elements here.
    x = torch.linspace(0.1, 0.9, 40)
    expected = torch.ops.aten.logit_backward(torch.ones(40), x, None)
    actual = torch.ops.aten.logit_backward(torch.ones(40, device="neuron"), x.to("neuron"), float("nan"))
    torch.testing.assert_close(actual.cpu(), expected)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: F.relu(x, inplace=True),
        lambda x: F.leaky_relu(x, 0.3, inplace=True),
        lambda x: F.elu(x, inplace=True),
        lambda x: F.hardtanh(x, -0.2, 0.4, inplace=True),
        lambda x: F.silu(x, inplace=True),
        lambda x: F.hardswish(x, inplace=True),
        lambda x: F.threshold(x, 0.0, 5.0, inplace=True),
    ],
    ids=["relu", "leaky_relu", "elu", "hardtanh", "silu", "hardswish", "threshold"],
)
def test_inplace_activation_on_a_view_matches_cpu(fn):
    def run(x):
        x = x.clone()
        view = x.t()[1:]
        out = fn(view)
        assert out.data_ptr() == view.data_ptr()
        return x

    assert_matches_cpu(run, torch.randn(5, 4))


@pytest.mark.parametrize(
    "fn, backward",
    [
        (lambda y: F.elu(y, alpha=0.7, inplace=True), "aten::elu_backward.default"),
        (lambda y: F.leaky_relu(y, 0.1, inplace=True), "aten::leaky_relu_backward.default"),
        (lambda y: F.relu(y, inplace=True), "aten::threshold_backward.default"),
        (lambda y: F.hardtanh(y, inplace=True), "aten::hardtanh_backward.default"),
    ],
    ids=["elu", "leaky_relu", "relu", "hardtanh"],
)
def test_inplace_activation_gradient_from_its_result_matches_cpu(fn, backward):
    def run(x, grad):
        out = fn(x * 2)  # in place on a non-leaf: the backward sees the result (elu's is_result=True)
        (dx,) = torch.autograd.grad(out, x, grad)
        return out, dx

    assert_matches_cpu(run, torch.randn(3, 5, requires_grad=True), torch.randn(3, 5))
    assert backward in torch_neuronx.get_executed_ops()


@pytest.mark.parametrize(
    "op, args",
    [
        (aten.gelu.out, {"approximate": "tanh"}),
        (aten.silu.out, {}),
        (aten._softmax.out, {"dim": 1, "half_to_float": False}),
        (aten._log_softmax.out, {"dim": 0, "half_to_float": False}),
    ],
    ids=["gelu", "silu", "softmax", "log_softmax"],
)
def test_out_form_matches_cpu(op, args):
    def run(x, out):
        result = op(x, out=out, **args)
        assert result is out
        return out

    assert_matches_cpu(run, torch.randn(3, 5), torch.empty(3, 5))


def test_backward_out_form_matches_cpu():
    def run(grad, x, out):
        return aten.threshold_backward.grad_input(grad, x, 0.0, grad_input=out)

    assert_matches_cpu(run, torch.randn(3, 4), torch.randn(3, 4), torch.empty(3, 4))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_softmax_is_stable_and_handles_infinities(dtype):
    x = torch.tensor([[1000.0, 1001.0, -1000.0], [0.0, float("-inf"), 1.0], [-1e4, -1e4, -1e4]], dtype=dtype)
    assert_matches_cpu(lambda t: (torch.softmax(t, 1), torch.log_softmax(t, 1)), x)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_16_bit_log_softmax_rounds_as_the_cpu_kernels(dtype):
    # Over the last dim the CPU's kernel keeps the sum of exponentials and its log in 16-bit
    # buffers; rounding once instead differed in 7% of bfloat16 elements, by up to 378x tolerance.
    torch.manual_seed(0)
    x = (torch.randn(16, 37) * 4).to(dtype)
    for dim in (-1, 0):
        expected = torch.log_softmax(x, dim)
        torch.testing.assert_close(torch.log_softmax(x.to("neuron"), dim).cpu(), expected, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("shape, dim", [((2, 8, 6, 6), 1), ((4, 7, 33, 3), 2), ((5, 3, 100, 2), 0)])
def test_16_bit_softmax_over_another_dim_has_the_cpus_scalar_tail(dtype, shape, dim):
    # The CPU's kernel rounds exp(x - max) to the dtype before dividing in the positions its vector
    # loop leaves to a scalar tail (by row length, vector width and thread count): rounding once
    # everywhere differed in 3% of elements, and their gradient beyond tolerance.
    def softmax_and_gradient(x, grad):
        x = x.requires_grad_()
        out = torch.softmax(x, dim)
        return out, torch.autograd.grad(out, x, grad)[0]

    torch.manual_seed(0)
    x, grad = (torch.randn(*shape) * 3).to(dtype), torch.randn(*shape).to(dtype)
    assert_matches_cpu(softmax_and_gradient, x, grad, atol=0, rtol=0)


def test_softmax_of_zero_dim_tensor_matches_cpu():
    assert_matches_cpu(lambda t: (torch.softmax(t, 0), torch.log_softmax(t, -1)), torch.tensor(2.5))


def test_softplus_threshold_and_nan_propagation_match_cpu():
    x = torch.tensor([-100.0, -1.0, 0.0, 9.0, 11.0, 100.0, float("nan")])
    assert_matches_cpu(
        lambda t: (F.softplus(t, beta=2, threshold=20), F.relu(t), F.hardtanh(t), F.leaky_relu(t), F.mish(t)), x
    )


def test_integer_relu_and_threshold_keep_the_dtype():
    x = torch.arange(-4, 5, dtype=torch.int32)
    assert_matches_cpu(lambda t: (torch.relu(t), F.threshold(t, 1, 7)), x)


@pytest.mark.parametrize(
    "module",
    [
        lambda: nn.Sequential(nn.GELU(), nn.Softmax(dim=-1)),
        lambda: nn.Sequential(nn.SiLU(), nn.LogSoftmax(dim=1)),
        lambda: nn.Sequential(nn.Mish(), nn.ELU(), nn.Hardswish(), nn.Tanh()),
        lambda: nn.Sequential(nn.ReLU(), nn.Hardsigmoid(), nn.Softplus(), nn.Sigmoid()),
    ],
    ids=["gelu_softmax", "silu_logsoftmax", "mish_elu_hardswish_tanh", "relu_hardsigmoid_softplus_sigmoid"],
)
def test_activation_modules_match_cpu(module):
    def run(x, grad):
        out = module()(x)
        (dx,) = torch.autograd.grad(out, x, grad)
        return out, dx

    torch.manual_seed(0)
    assert_matches_cpu(run, torch.randn(3, 7, requires_grad=True), torch.randn(3, 7))


@pytest.mark.parametrize("fn", [torch.softmax, torch.log_softmax], ids=["softmax", "log_softmax"])
def test_softmax_over_an_empty_dim_is_empty_as_on_cpu(fn):
    assert_matches_cpu(lambda x: (fn(x, 1), fn(x, 0)), torch.randn(3, 0))


@pytest.mark.parametrize("weights", [1, 3])
def test_prelu_and_its_gradients_match_cpu(weights):
    x = _input(torch.float32).detach().reshape(2, 3, 4).requires_grad_()
    weight, grad = torch.rand(weights, requires_grad=True), torch.randn(2, 3, 4)

    def run(x, weight, grad):
        y = F.prelu(x, weight)
        return y, *torch.autograd.grad(y, (x, weight), grad)

    assert_matches_cpu(run, x, weight, grad)


@pytest.mark.parametrize("fn", [F.hardsigmoid, F.hardswish], ids=["hardsigmoid", "hardswish"])
def test_hard_activations_divide_by_six_as_the_cpu(fn):
    # The CPU divides by 6 (and hardswish's gradient by 3); XLA turned a division by a constant into
    # a multiplication by its rounded reciprocal, an ulp off in a quarter of the elements.
    x = torch.randn(4096) * 4
    on_device = x.to("neuron").requires_grad_()
    x.requires_grad_()
    fn(on_device).sum().backward()
    fn(x).sum().backward()
    torch.testing.assert_close(fn(on_device).detach().cpu(), fn(x).detach(), rtol=0, atol=0)
    torch.testing.assert_close(on_device.grad.cpu(), x.grad, rtol=0, atol=0)
