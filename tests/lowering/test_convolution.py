"""Convolution lowerings (aten.convolution, aten.convolution_backward) against CPU PyTorch."""

from __future__ import annotations

import copy
import re

import jax
import jax.numpy as jnp
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torch_neuronx
from tests.utils import assert_matches_cpu, to_neuron

DTYPES = [torch.float32, torch.bfloat16]


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


# (spatial dims, C_in, C_out, kernel, stride, padding, dilation, groups, transposed, output_padding)
CONFIGS = {
    "1d": (1, 3, 4, 3, 1, 0, 1, 1, False, 0),
    "1d-strided-padded": (1, 4, 6, 5, 2, 2, 1, 2, False, 0),
    "2d": (2, 3, 4, 3, 1, 1, 1, 1, False, 0),
    "2d-stride-dilation": (2, 4, 4, (3, 2), (2, 1), (1, 0), (2, 1), 1, False, 0),
    "2d-groups": (2, 4, 6, 3, 1, 1, 1, 2, False, 0),
    "2d-depthwise": (2, 4, 8, 3, 2, 1, 1, 4, False, 0),
    "3d": (3, 2, 3, 2, (1, 2, 1), 1, 1, 1, False, 0),
    "transposed-1d": (1, 4, 3, 3, 2, 1, 1, 1, True, 1),
    "transposed-2d": (2, 4, 6, 3, 2, 1, 1, 2, True, (1, 0)),
    "transposed-2d-dilated": (2, 3, 2, 3, 1, 2, 2, 1, True, 0),
    "transposed-3d": (3, 2, 2, 2, 2, 0, 1, 1, True, 1),
}


def _inputs(config, dtype, bias):
    nd, c_in, c_out, kernel, stride, padding, dilation, groups, transposed, output_padding = config
    kernel = (kernel,) * nd if isinstance(kernel, int) else kernel
    spatial = ((9,), (7, 6), (5, 4, 3))[nd - 1]
    x = torch.randn(2, c_in, *spatial).to(dtype)
    shape = (c_in, c_out // groups, *kernel) if transposed else (c_out, c_in // groups, *kernel)
    w = torch.randn(shape).to(dtype)
    b = torch.randn(c_out).to(dtype) if bias else None

    def conv(x, w, b):
        args = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}
        if not transposed:
            return (F.conv1d, F.conv2d, F.conv3d)[nd - 1](x, w, b, **args)
        return (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[nd - 1](
            x, w, b, output_padding=output_padding, **args
        )

    return conv, x, w, b


def _assert_grads_match(fn, *tensors, requires_grad=None):
    """Runs ``fn`` forward and backward (with one random grad_output) on CPU and neuron; asserts the
    outputs and the gradients of every tensor that requires grad match and nothing fell back."""
    requires_grad = requires_grad or [t is not None for t in tensors]
    cpu = [t.clone().requires_grad_(r) if t is not None else None for t, r in zip(tensors, requires_grad, strict=True)]
    expected = fn(*cpu)
    grad_output = torch.randn(expected.shape).to(expected.dtype)
    expected.backward(grad_output)
    torch_neuronx.clear_op_tracking()
    dev = [to_neuron(t) for t in cpu]
    actual = fn(*dev)
    actual.backward(grad_output.to("neuron"))
    assert torch_neuronx.get_fallback_ops() == {}
    torch.testing.assert_close(actual.cpu(), expected.detach())
    for d, c in zip(dev, cpu, strict=True):
        if c is not None and c.requires_grad:
            torch.testing.assert_close(d.grad.cpu(), c.grad)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(CONFIGS))
def test_convolution_forward_backward(name, dtype, request):
    if (name, dtype) == ("2d-stride-dilation", torch.bfloat16) and torch.backends.cpu.get_cpu_capability() != "AVX512":
        # On an AVX2 host (2026-12-07; earlier hosts were AVX-512) oneDNN's bfloat16 backward for
        # this case rounds otherwise: 11 of 336 weight-gradient elements beyond bfloat16 tolerance.
        request.applymarker(
            pytest.mark.xfail(reason="oneDNN's AVX2 bfloat16 convolution backward (not yet modelled)", strict=False)
        )
    conv, x, w, b = _inputs(CONFIGS[name], dtype, bias=True)
    _assert_grads_match(conv, x, w, b)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("name", [name for name in CONFIGS if name.startswith("transposed")])
def test_16_bit_transposed_convolution_is_the_cpus_bit_for_bit(name, dtype):
    # Where the CPU has no oneDNN kernel for the dtype (float16 without AVX-512 FP16) or the
    # output_padding reaches the stride, ATen's slow_conv_transpose kernels round the columns and
    # every overlapping addition to 16 bits: rounding float32 once differed by up to 9.7e3x
    # tolerance. Elsewhere oneDNN's values are float32's rounded once.
    conv, x, w, b = _inputs(CONFIGS[name], dtype, bias=True)
    assert_matches_cpu(conv, x, w, b, atol=0, rtol=0)
    big_output_padding = lambda x, w, b: F.conv_transpose2d(  # noqa: E731
        x, w, b, stride=(3, 2), padding=(1, 2), output_padding=(2, 3), groups=2, dilation=4
    )
    x, w, b = torch.randn(2, 2, 4, 4).to(dtype), torch.randn(2, 2, 4, 5).to(dtype), torch.randn(4).to(dtype)
    assert_matches_cpu(big_output_padding, x, w, b, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("channels_last", ["input", "weight"])
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_16_bit_transposed_convolution_of_a_channels_last_operand_is_the_cpus(dtype, channels_last, compiled):
    # The slow kernel runs channels-last when the input or the weight suggests it, and its col2im
    # then adds each output element's kernel offsets in the reverse order: in row-major order a
    # quarter of the elements differed beyond tolerance.
    def conv(x, w, b):
        return F.conv_transpose2d(x, w, b, stride=1, output_padding=1, dilation=2)

    x, w, b = torch.randn(2, 8, 9, 9).to(dtype), torch.randn(8, 6, 3, 3).to(dtype), torch.randn(6).to(dtype)
    if channels_last == "input":
        x = x.to(memory_format=torch.channels_last)
    else:
        w = w.to(memory_format=torch.channels_last)
    run = torch.compile(conv, backend="neuron", fullgraph=True) if compiled else conv
    # float16's gemm (and, compiled, XLA's) may sum the float32 columns in another order: an ulp in
    # an element or two.
    exact = {"atol": 0, "rtol": 0} if dtype == torch.bfloat16 and not compiled else {}
    torch.testing.assert_close(run(*to_neuron((x, w, b))).cpu(), conv(x, w, b), **exact)


@pytest.mark.parametrize("name", [name for name in CONFIGS if "dilat" not in name and name != "transposed-3d"])
def test_float16_convolution_gradients_are_the_cpus_slow_kernels(name):
    # Without oneDNN's float16 (no AVX-512 FP16 or AMX), slow_conv2d/3d's backward rounds the
    # columns and col2im's additions (grad_input) and adds each batch element's grad_weight into a
    # float16 buffer, as slow_conv_transpose's backward adds its grad_weight: float32 rounded once
    # differed by up to 25x tolerance. (transposed-3d's grad_input gemm sums in another order.)
    conv, x, w, b = _inputs(CONFIGS[name], torch.float16, bias=True)
    grad_output = torch.randn(conv(x, w, b).shape).to(torch.float16)

    def gradients(x, w, b, grad_output):
        x, w, b = (t.requires_grad_() for t in (x, w, b))
        return torch.autograd.grad(conv(x, w, b), (x, w, b), grad_output)

    exact = {} if torch.ops.mkldnn._is_mkldnn_fp16_supported() else {"atol": 0, "rtol": 0}
    assert_matches_cpu(gradients, x, w, b, grad_output, **exact)


@pytest.mark.parametrize("transposed", [False, True])
def test_convolution_without_bias(transposed):
    conv, x, w, _ = _inputs(CONFIGS["transposed-2d" if transposed else "2d-groups"], torch.float32, bias=False)
    _assert_grads_match(lambda x, w: conv(x, w, None), x, w)


def test_convolution_reaches_one_executable():
    conv, x, w, b = _inputs(CONFIGS["2d"], torch.float32, bias=True)
    assert_matches_cpu(conv, x, w, b)
    assert torch_neuronx.get_executed_ops().get("aten::convolution.default") == 1


def test_underscore_convolution():
    conv, x, w, b = _inputs(CONFIGS["2d"], torch.float32, bias=True)
    assert_matches_cpu(
        lambda x, w, b: torch.ops.aten._convolution(
            x, w, b, [2, 1], [1, 1], [1, 1], False, [0, 0], 1, False, False, True, True
        ),
        x,
        w,
        b,
    )


@pytest.mark.parametrize("wanted", ["input", "weight"])
def test_convolution_backward_partial_output_mask(wanted):
    conv, x, w, b = _inputs(CONFIGS["2d-groups"], torch.float32, bias=True)
    _assert_grads_match(conv, x, w, b, requires_grad=[wanted == "input", wanted == "weight", False])


@pytest.mark.parametrize("dtype", DTYPES)
def test_conv_modules(dtype):
    torch.manual_seed(0)
    modules = nn.Sequential(
        nn.Conv2d(3, 4, 3, padding="same", bias=False),
        nn.Conv2d(4, 4, 3, stride=2, padding=1, groups=2),
        nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1, output_padding=1),
    ).to(dtype)
    device_modules = copy.deepcopy(modules).to("neuron")
    x = torch.randn(2, 3, 8, 8).to(dtype).requires_grad_()
    expected = modules(x)
    grad_output = torch.randn(expected.shape).to(dtype)
    expected.backward(grad_output)
    torch_neuronx.clear_op_tracking()
    xn = to_neuron(x)
    actual = device_modules(xn)
    actual.backward(grad_output.to("neuron"))
    assert torch_neuronx.get_fallback_ops() == {}
    torch.testing.assert_close(actual.cpu(), expected.detach())
    torch.testing.assert_close(xn.grad.cpu(), x.grad)
    for (name, p), q in zip(modules.named_parameters(), device_modules.parameters(), strict=True):
        torch.testing.assert_close(q.grad.cpu(), p.grad, msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.parametrize(
    ("input_channels_last", "weight_channels_last"), [(True, False), (False, True), (True, True), (False, False)]
)
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("dims", [2, 3])
def test_convolution_keeps_the_channels_last_format_as_cpu(input_channels_last, weight_channels_last, transposed, dims):
    """The meta kernel's result is contiguous whatever the operands' format; CPU and CUDA return
    channels_last (channels_last_3d) when the input or the weight is, and so do the gradients."""
    channels_last = {2: torch.channels_last, 3: torch.channels_last_3d}[dims]
    x = torch.randn(2, 3, *[6] * dims)
    w = torch.randn(3 if transposed else 5, 3 if not transposed else 4, *[3] * dims)
    x = x.to(memory_format=channels_last) if input_channels_last else x
    w = w.to(memory_format=channels_last) if weight_channels_last else w
    conv = getattr(torch.nn.functional, f"conv_transpose{dims}d" if transposed else f"conv{dims}d")
    cpu_operands = [x.clone().requires_grad_(), w.clone().requires_grad_()]
    neuron_operands = [t.to("neuron").requires_grad_() for t in (x, w)]
    expected, result = conv(*cpu_operands), conv(*neuron_operands)
    expected.sum().backward()
    result.sum().backward()
    torch.testing.assert_close(result.detach().cpu(), expected.detach())
    assert result.stride() == expected.stride()
    for actual, wanted in zip(neuron_operands, cpu_operands, strict=True):
        torch.testing.assert_close(actual.grad.cpu(), wanted.grad)
        assert actual.grad.stride() == wanted.grad.stride()


def _aten_convolution(stride=(1,), padding=(0,), dilation=(1,), transposed=False, output_padding=(0,), groups=1):
    def run(x, weight, bias=None):
        return torch.ops.aten.convolution(
            x, weight, bias, stride, padding, dilation, transposed, output_padding, groups
        )

    return run


#: (call, input shape, weight shape, bias shape): convolutions ATen refuses in Convolution.cpp
#: (check_shape_forward, _convolution, expand_param_if_needed). PyTorch's meta kernel said "Invalid
#: channel dimensions" for the channel and group checks and let the rest through to JAX (a negative
#: padding computed, a zero stride divided by zero, a bias of the wrong size failed in a broadcast).
CONVOLUTION_ERRORS = {
    "input-channels": (_aten_convolution(), (1, 2, 5, 5), (4, 3, 3, 3), None),
    "grouped-input-channels": (_aten_convolution(groups=2), (1, 4, 5, 5), (4, 3, 3, 3), None),
    "weight-not-divisible-by-groups": (_aten_convolution(groups=2), (1, 2, 5, 5), (3, 1, 3, 3), None),
    "no-output-channels": (_aten_convolution(), (1, 3, 5, 5), (0, 3, 3, 3), None),
    "bias-size": (_aten_convolution(), (1, 3, 5, 5), (4, 3, 3, 3), (3,)),
    "negative-padding": (_aten_convolution(padding=(-1, 0)), (1, 3, 5, 5), (4, 3, 3, 3), None),
    "negative-output-padding": (
        _aten_convolution(stride=(2,), transposed=True, output_padding=(-1, 0)),
        (1, 3, 5, 5),
        (3, 4, 3, 3),
        None,
    ),
    # Sent to the slow transposed kernels (CPU and CUDA), which check it; neuron computed it.
    "output-padding-reaching-stride-and-dilation": (
        _aten_convolution(stride=(2, 1), transposed=True, output_padding=(0, 1)),
        (1, 3, 5, 5),
        (3, 4, 3, 3),
        None,
    ),
    "1d-output-padding-reaching-stride-and-dilation": (
        _aten_convolution(stride=(2,), dilation=(2,), transposed=True, output_padding=(2,)),
        (1, 3, 5),
        (3, 4, 3),
        None,
    ),
    "3d-output-padding-reaching-stride-and-dilation": (
        _aten_convolution(stride=(1, 2, 2), transposed=True, output_padding=(1, 0, 0)),
        (1, 3, 4, 4, 4),
        (3, 4, 2, 2, 2),
        None,
    ),
    "zero-stride": (_aten_convolution(stride=(0,)), (1, 3, 5, 5), (4, 3, 3, 3), None),
    "stride-length": (_aten_convolution(stride=(1, 1, 1)), (1, 3, 5, 5), (4, 3, 3, 3), None),
    "input-rank": (_aten_convolution(), (1, 3, 5, 5, 5), (4, 3, 3, 3), None),
    "weight-rank": (_aten_convolution(), (1, 3, 5, 5), (4, 3), None),
    "kernel-larger-than-input": (_aten_convolution(), (1, 3, 2, 5), (4, 3, 3, 3), None),
    "empty-spatial-input": (_aten_convolution(padding=(1,)), (1, 3, 0, 5), (4, 3, 1, 1), None),
    "transposed-input-channels": (_aten_convolution(transposed=True), (1, 2, 5, 5), (3, 4, 3, 3), None),
    "transposed-bias-size": (_aten_convolution(transposed=True), (1, 3, 5, 5), (3, 4, 3, 3), (3,)),
}


@pytest.mark.parametrize("case", list(CONVOLUTION_ERRORS))
def test_convolution_argument_errors_are_atens(case):
    run, input_shape, weight_shape, bias_shape = CONVOLUTION_ERRORS[case]
    tensors = [torch.rand(shape) if shape is not None else None for shape in (input_shape, weight_shape, bias_shape)]
    with pytest.raises(RuntimeError) as expected:
        run(*tensors)
    neuron = [t.to("neuron") if t is not None else None for t in tensors]
    with pytest.raises(RuntimeError, match=f"^{re.escape(str(expected.value))}$"):
        run(*neuron)


@pytest.mark.parametrize(
    ("make_input", "make_weight", "options"),
    [
        ((2, 6, 9), (6, 1, 4), {"padding": 3, "groups": 6}),  # a causal short convolution
        ((2, 3, 10), (6, 1, 3), {"stride": 2, "padding": 1, "dilation": 2, "groups": 3}),  # multiplier 2
        ((1, 4, 7, 6), (4, 1, 3, 2), {"stride": (2, 1), "padding": (1, 0), "groups": 4}),
        ((1, 2, 4, 5, 3), (4, 1, 2, 3, 2), {"padding": 1, "dilation": (1, 2, 1), "groups": 2}),
    ],
    ids=["1d-causal", "1d-multiplier", "2d", "3d"],
)
def test_depthwise_convolution_gradients_match_cpu(make_input, make_weight, options):
    # XLA's CPU weight gradient of a grouped convolution made a temporary that grows with the square
    # of the channels (a model's 24576-channel short convolution: 18 GiB, and the process was
    # killed); depthwise weight gradients are now summed over the kernel offsets.
    spatial = len(make_input) - 2
    conv = [F.conv1d, F.conv2d, F.conv3d][spatial - 1]
    x, w, b = torch.randn(make_input), torch.randn(make_weight), torch.randn(make_weight[0])
    _assert_grads_match(lambda x, w, b: conv(x, w, b, **options), x, w, b)
    _assert_grads_match(lambda x, w: conv(x, w, None, **options), x, w, requires_grad=[False, True])


def test_wide_depthwise_convolution_weight_gradient_compiles_small():
    from torch_neuronx.lowering import convolution

    x, w, g = (jnp.zeros(shape, jnp.float32) for shape in ((2, 24576, 8), (24576, 1, 4), (2, 24576, 11)))

    def gradients(x, w, g):
        return convolution.convolution_backward(g, x, w, [24576], [1], [3], [1], False, [0], 24576, [True, True, True])

    temporary = jax.jit(gradients).lower(x, w, g).compile().memory_analysis().temp_size_in_bytes
    assert temporary < 64 * 2**20, temporary  # 18 GiB through XLA's grouped-convolution transpose
