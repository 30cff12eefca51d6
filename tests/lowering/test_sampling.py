"""Interpolation and sampling lowerings (upsample_* and grid_sampler_2d, with backward) against CPU.

bfloat16 reference: CPU PyTorch on float32 copies of the same bfloat16 values, rounded once to
bfloat16. Neuron interpolates and accumulates gradients in float32 and rounds once (as CUDA's
``accscalar_t`` kernels do); PyTorch's CPU bfloat16 backward kernels accumulate in bfloat16.
"""

from __future__ import annotations

import math
import re

import pytest
import torch
import torch.nn.functional as F

import torch_neuronx
from tests.utils import assert_matches_cpu, to_neuron


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def _assert_matches(fn, *tensors, grad=True):
    """``fn(*tensors)`` and the gradients of every floating-point input match CPU; nothing falls back."""
    cpu = [t.float() if t.dtype == torch.bfloat16 else t for t in tensors]
    cpu = [t.clone().requires_grad_(grad and t.is_floating_point()) for t in cpu]
    expected = fn(*cpu)
    torch_neuronx.clear_op_tracking()
    dev = [to_neuron(t).requires_grad_(grad and t.is_floating_point()) for t in tensors]
    actual = fn(*dev)
    torch.testing.assert_close(actual.cpu(), expected.detach().to(actual.dtype))
    if grad:
        grad_output = torch.randn(expected.shape).to(actual.dtype)
        expected.backward(grad_output.to(expected.dtype))
        actual.backward(grad_output.to("neuron"))
        for d, c in zip(dev, cpu, strict=True):
            if c.requires_grad:
                torch.testing.assert_close(d.grad.cpu(), c.grad.to(d.dtype))
    assert torch_neuronx.get_fallback_ops() == {}


SHAPES = {1: (2, 3, 7), 2: (2, 3, 5, 7), 3: (1, 2, 3, 4, 5)}
MODES = [
    ("nearest", 1, None),
    ("nearest", 2, None),
    ("nearest", 3, None),
    ("nearest-exact", 1, None),
    ("nearest-exact", 2, None),
    ("nearest-exact", 3, None),
    *[
        (mode, nd, corners)
        for mode, nd in [("linear", 1), ("bilinear", 2), ("bicubic", 2), ("trilinear", 3)]
        for corners in (False, True)
    ],
]
SIZINGS = {
    "size": lambda shape: {"size": tuple(2 * s - 1 for s in shape[2:])},
    "scale": lambda shape: {"scale_factor": 1.7, "recompute_scale_factor": False},
    "down": lambda shape: {"scale_factor": 0.6},
}


def _id(mode):
    name, nd, corners = mode
    return f"{name}{nd}d" + ("" if corners is None else f"-corners{int(corners)}")


@pytest.mark.parametrize("sizing", list(SIZINGS))
@pytest.mark.parametrize("mode", MODES, ids=_id)
def test_interpolate(mode, sizing):
    name, nd, corners = mode
    x = torch.randn(SHAPES[nd])
    options = SIZINGS[sizing](SHAPES[nd])
    _assert_matches(lambda t: F.interpolate(t, mode=name, align_corners=corners, **options), x)


BFLOAT16_MODES = {
    "nearest2d",
    "nearest-exact1d",
    "linear1d-corners0",
    "bilinear2d-corners1",
    "bicubic2d-corners1",
    "trilinear3d-corners0",
}


@pytest.mark.parametrize("mode", [m for m in MODES if _id(m) in BFLOAT16_MODES], ids=_id)
def test_interpolate_bfloat16(mode):
    # Against the CPU's own bfloat16 kernels, which store linear and cubic weights in bfloat16 (and
    # weigh a small bilinear output's corners with float32 products): float32 weights differed by
    # up to 4x tolerance. The gradients, whose weights the CPU keeps in float32, are compared too.
    name, nd, corners = mode
    x = torch.randn(SHAPES[nd]).to(torch.bfloat16)
    options = SIZINGS["size"](SHAPES[nd])

    def run(t, grad_output):
        out = F.interpolate(t, mode=name, align_corners=corners, **options)
        return out, *torch.autograd.grad(out, t, grad_output)

    grad_output = torch.randn(F.interpolate(x, mode=name, align_corners=corners, **options).shape)
    assert_matches_cpu(run, x.requires_grad_(), grad_output.to(torch.bfloat16))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize(
    ("mode", "shape"), [("linear", (2, 3, 7)), ("trilinear", (1, 2, 3, 4, 5)), ("bicubic", (2, 3, 5, 7))]
)
def test_16_bit_linear_and_cubic_interpolation_weights_are_stored_in_the_dtype(mode, shape, dtype):
    # compute_source_index_and_lambda and the cubic coefficients are stored in the tensor's dtype
    # before the CPU's generic kernel interpolates in float32: bit for bit, but for float16 bicubic,
    # where the CPU's compiled sums of four products round differently in ~5% of elements (an ulp).
    x = torch.randn(shape).to(dtype)
    size = [s * 2 - 1 for s in shape[2:]]
    exact = {} if (mode, dtype) == ("bicubic", torch.float16) else {"atol": 0, "rtol": 0}
    assert_matches_cpu(lambda t: F.interpolate(t, size=size, mode=mode), x, **exact)


@pytest.mark.parametrize("mode", ["nearest", "bilinear", "bicubic"])
def test_interpolate_same_size_with_scale(mode):
    """Output size equal to the input size with a given scale: nearest 2d and the linear modes copy
    the dimension (as PyTorch's CPU kernels do), bicubic still interpolates with 1 / scale."""
    x = torch.randn(1, 2, 3, 4)
    _assert_matches(lambda t: F.interpolate(t, scale_factor=(1.3, 1.01), mode=mode, recompute_scale_factor=False), x)


@pytest.mark.parametrize("size", [(3, 4), (9, 11)], ids=["down", "up"])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("mode", ["bilinear", "bicubic", "lanczos"])
def test_interpolate_antialias(mode, align_corners, size):
    x = torch.randn(2, 3, 7, 9)
    if mode == "lanczos" and align_corners:  # F.interpolate refuses it; the ATen op computes it
        _assert_matches(lambda t: torch.ops.aten._upsample_lanczos2d_aa(t, size, True), x)
        return
    _assert_matches(lambda t: F.interpolate(t, size=size, mode=mode, align_corners=align_corners, antialias=True), x)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic", "lanczos"])
def test_interpolate_antialias_copies_a_dimension_of_unchanged_size(mode):
    """The CPU's forward copies a dimension whose size does not change whatever the scale (1.2 of 4
    rows is 4 rows); its backward interpolates it with 1 / 1.2. Neuron interpolated the forward too."""
    x = torch.randn(1, 2, 4, 9)
    _assert_matches(
        lambda t: F.interpolate(t, scale_factor=(1.2, 0.5), mode=mode, antialias=True, recompute_scale_factor=False), x
    )


@pytest.mark.parametrize(("size", "scale"), [((3, 5), None), ((17, 29), None), ((8, 8), None), (None, 0.37)])
def test_interpolate_lanczos_of_uint8_is_the_cpus_fixed_point(size, scale):
    """uint8 resamples with Pillow's int16 weights and a saturating shift per dimension, to the bit."""
    x = torch.randint(0, 256, (2, 3, 8, 13), dtype=torch.uint8)
    options = {"size": size} if size else {"scale_factor": scale, "recompute_scale_factor": False}
    _assert_matches(lambda t: F.interpolate(t, mode="lanczos", antialias=True, **options), x, grad=False)


@pytest.mark.parametrize("antialias", [False, True], ids=["plain", "antialias"])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize(("size", "channels_last"), [((5, 13), False), ((32, 3), True), ((1, 9), False)])
def test_interpolate_bilinear_and_bicubic_of_uint8_are_the_cpus_fixed_point(
    mode, align_corners, antialias, size, channels_last
):
    # They raised CUDA's refusal; the CPU computes them (torchvision's Resize of uint8 images, and
    # test_nn's 768 test_upsamplingBiMode2d_consistency tests). Without antialias the taps are the
    # float kernels' with their border weights summed, not normalised windows (bicubic with
    # align_corners was 2 off near the borders).
    x = torch.randint(0, 256, (2, 3, 9, 11), dtype=torch.uint8)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    options = {"size": size, "mode": mode, "align_corners": align_corners, "antialias": antialias}
    _assert_matches(lambda t: F.interpolate(t, **options), x, grad=False)


def test_interpolate_uint8_to_a_width_of_one_is_right_where_the_cpu_is_not():
    # The CPU's generic uint8 kernel (more than 4 contiguous channels), resizing both dimensions to a
    # width of 1, fills each output column with its first row's value; neuron gives the float
    # result's rounding, within 1 (the fixed point's rounding).
    x = torch.randint(0, 256, (1, 5, 16, 16), dtype=torch.uint8)
    expected = F.interpolate(x.float(), size=(9, 1), mode="bilinear").round()
    got = F.interpolate(x.to("neuron"), size=(9, 1), mode="bilinear").cpu()
    torch.testing.assert_close(got.float(), expected, rtol=0, atol=1)
    assert not torch.equal(F.interpolate(x, size=(9, 1), mode="bilinear").float(), expected)  # still wrong there


def test_interpolate_lanczos_refuses_other_integers_in_the_cpus_words():
    x = torch.ones(1, 1, 6, 6, dtype=torch.int32)
    for device in ("cpu", "neuron"):
        with pytest.raises(NotImplementedError, match="\"compute_index_ranges_weights\" not implemented for 'Int'"):
            F.interpolate(x.to(device), size=(3, 3), mode="lanczos", antialias=True)


@pytest.mark.parametrize("mode", ["bicubic", "lanczos"])
def test_interpolate_antialias_bfloat16(mode):
    x = torch.randn(1, 2, 8, 6).to(torch.bfloat16)
    _assert_matches(lambda t: F.interpolate(t, scale_factor=0.4, mode=mode, antialias=True), x)


@pytest.mark.parametrize(
    "shape,options",
    [
        ((1, 1, 2), {"size": 41, "mode": "nearest-exact"}),
        ((1, 1, 2, 3), {"size": (41, 3), "mode": "nearest-exact"}),
        ((1, 1, 2, 1, 3), {"size": (55, 1, 3), "mode": "nearest-exact"}),
        ((1, 1, 3), {"scale_factor": 2.1, "mode": "nearest", "recompute_scale_factor": False}),
        ((1, 1, 3, 2), {"scale_factor": (2.1, 1.3), "mode": "nearest", "recompute_scale_factor": False}),
    ],
)
def test_nearest_index_rounding(shape, options):
    """Source indices at float32 ties and PyTorch's 2d shortcuts (out == 2 * in, out == in) pick
    what each CPU kernel picks."""
    x = torch.arange(math.prod(shape), dtype=torch.float32).reshape(shape)
    _assert_matches(lambda t: F.interpolate(t, **options), x, grad=False)


def test_interpolate_integer_nearest():
    x = torch.randint(0, 100, (1, 2, 3, 4), dtype=torch.uint8)
    _assert_matches(lambda t: F.interpolate(t, size=(5, 9), mode="nearest"), x, grad=False)


@pytest.mark.parametrize(
    ("mode", "dtype"),
    [
        ("nearest", torch.int64),
        ("nearest-exact", torch.int8),
        ("bilinear", torch.int16),
        ("bicubic", torch.int32),
        ("linear", torch.uint8),
    ],
)
@pytest.mark.parametrize("antialias", [False, True])
def test_interpolation_dtypes_cuda_refuses_raise_its_dispatch_error(mode, dtype, antialias):
    # CUDA interpolates floating-point inputs, and uint8 in the nearest modes (the CPU also in
    # bilinear and bicubic, below); test_nn's test_upsamplingBiMode2d_nonsupported_dtypes expects
    # "not implemented for" for the rest.
    if antialias and mode not in ("bilinear", "bicubic"):
        pytest.skip("antialias is for bilinear and bicubic")
    shape = (1, 2, 6) if mode == "linear" else (1, 2, 6, 6)
    x = torch.ones(shape, dtype=dtype, device="neuron")
    with pytest.raises(NotImplementedError, match=r"\"\w+_out_frame\" not implemented for '\w+'"):
        F.interpolate(x, size=shape[2:] if antialias else (4,) * (len(shape) - 2), mode=mode, antialias=antialias)


#: (mode, antialias, spatial dimensions): every forward upsampling op.
EVERY_UPSAMPLING = [
    ("nearest", False, 1),
    ("nearest-exact", False, 2),
    ("nearest", False, 3),
    ("linear", False, 1),
    ("bilinear", False, 2),
    ("bicubic", False, 2),
    ("trilinear", False, 3),
    ("bilinear", True, 2),
    ("bicubic", True, 2),
]


@pytest.mark.parametrize(("mode", "antialias", "dims"), EVERY_UPSAMPLING, ids=str)
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_upsampling_of_an_empty_batch_as_cpu(mode, antialias, dims, compiled):
    # PyTorch's meta kernel of the nearest modes passed torch._check an int for an empty batch:
    # "TypeError: cond must be a bool" where the CPU returns an empty result.
    def upsample(x):
        return F.interpolate(x, scale_factor=2, mode=mode, antialias=antialias)

    shape = (0, 2, *range(3, 3 + dims))
    run = torch.compile(upsample, backend="neuron") if compiled else upsample
    actual = run(torch.empty(shape, device="neuron"))
    assert actual.device.type == "neuron" and actual.shape == upsample(torch.empty(shape)).shape


#: Sizes ATen's upsample_{1,2,3}d_common_check refuses, and an empty channel dimension.
EMPTY_SIZES = {
    "zero-output": lambda dims: ((1, 2, *(4,) * dims), {"size": (3,) * (dims - 1) + (0,)}),
    "empty-spatial-input": lambda dims: ((1, 2, 0, *(4,) * (dims - 1)), {"size": (3,) * dims}),
    "empty-input-with-scale": lambda dims: ((1, 2, 0, *(4,) * (dims - 1)), {"scale_factor": 2}),
    "empty-channels": lambda dims: ((1, 0, *(4,) * dims), {"size": (3,) * dims}),
}


@pytest.mark.parametrize("sizes", list(EMPTY_SIZES))
@pytest.mark.parametrize(("mode", "antialias", "dims"), EVERY_UPSAMPLING, ids=str)
def test_upsampling_of_empty_sizes_raises_atens_error(mode, antialias, dims, sizes):
    # PyTorch's decompositions of the linear and cubic modes divided by a zero output size
    # (ZeroDivisionError), indexed an empty input (IndexError) or returned an empty result.
    shape, options = EMPTY_SIZES[sizes](dims)
    with pytest.raises(RuntimeError) as expected:
        F.interpolate(torch.rand(shape), mode=mode, antialias=antialias, **options)
    with pytest.raises(RuntimeError, match=f"^{re.escape(str(expected.value))}$"):
        F.interpolate(torch.rand(shape, device="neuron"), mode=mode, antialias=antialias, **options)


@pytest.mark.parametrize("sizes", ["empty-spatial-input", "empty-channels"])
def test_compiled_upsampling_of_empty_sizes_raises_atens_error(sizes):
    # AOTAutograd decomposes upsampling while it traces, past the meta kernel's checks: the compiled
    # graph returned an empty tensor or raised IndexError.
    shape, options = EMPTY_SIZES[sizes](2)
    with pytest.raises(RuntimeError) as expected:
        F.interpolate(torch.rand(shape), mode="bicubic", **options)
    compiled = torch.compile(lambda x: F.interpolate(x, mode="bicubic", **options), backend="neuron")
    with pytest.raises(RuntimeError, match=f"^{re.escape(str(expected.value))}"):
        compiled(torch.rand(shape, device="neuron"))


@pytest.mark.parametrize(
    ("op", "extra"),
    [
        (torch.ops.aten.upsample_bilinear2d_backward, (False,)),
        (torch.ops.aten.upsample_bicubic2d_backward, (False,)),
        (torch.ops.aten._upsample_bilinear2d_aa_backward, (False,)),
        (torch.ops.aten._upsample_nearest_exact2d_backward, ()),
    ],
    ids=lambda value: getattr(value, "__name__", ""),
)
def test_upsampling_backward_checks_grad_output_against_the_output(op, extra):
    grad_output = torch.rand(1, 2, 4, 3)
    with pytest.raises(RuntimeError) as expected:
        op(grad_output, [4, 4], [1, 2, 2, 2], *extra)
    assert "grad_output.size(3) = 3" in str(expected.value)
    with pytest.raises(RuntimeError, match=f"^{re.escape(str(expected.value))}$"):
        op(grad_output.to("neuron"), [4, 4], [1, 2, 2, 2], *extra)


def test_nearest_backward_of_uint8_wraps_as_cudas_int64_accumulator():
    # CUDA differentiates uint8 in the nearest modes (the CPU refuses); jax.vjp of an integer input
    # gave zeros.
    grad_output = torch.randint(0, 256, (1, 2, 8, 6), dtype=torch.uint8)
    actual = torch.ops.aten.upsample_nearest2d_backward(grad_output.to("neuron"), [8, 6], [1, 2, 2, 3])
    summed = torch.ops.aten.upsample_nearest2d_backward(grad_output.float(), [8, 6], [1, 2, 2, 3])
    torch.testing.assert_close(actual.cpu(), summed.long().remainder(256).to(torch.uint8))


@pytest.mark.parametrize(
    ("op", "extra", "kernel"),
    [
        (torch.ops.aten.upsample_bilinear2d_backward, (False,), "upsample_bilinear2d_backward_out_frame"),
        (torch.ops.aten._upsample_bicubic2d_aa_backward, (False,), "upsample_gen2d_backward_out_frame"),
        (torch.ops.aten.upsample_nearest2d_backward, (), "upsample_nearest2d_backward_out_frame"),
    ],
    ids=lambda value: getattr(value, "__name__", ""),
)
def test_upsampling_backward_of_integers_raises_cudas_dispatch_error(op, extra, kernel):
    grad_output = torch.ones(1, 2, 4, 4, dtype=torch.int64, device="neuron")
    with pytest.raises(NotImplementedError, match=f"^\"{kernel}\" not implemented for 'Long'"):
        op(grad_output, [4, 4], [1, 2, 2, 2], *extra)


def test_upsample_ops_reach_their_lowerings():
    x = torch.randn(1, 2, 3, 4)
    _assert_matches(lambda t: F.interpolate(t, scale_factor=2, mode="bilinear"), x)
    executed = torch_neuronx.get_executed_ops()
    assert executed.get("aten::upsample_bilinear2d.default") == 1
    assert executed.get("aten::upsample_bilinear2d_backward.default") == 1


GRID_SAMPLES = [
    (mode, padding, (i + j) % 2 == 1)
    for i, mode in enumerate(["bilinear", "nearest", "bicubic"])
    for j, padding in enumerate(["zeros", "border", "reflection"])
] + [("bilinear", "reflection", True), ("bicubic", "border", False)]


@pytest.mark.parametrize("mode,padding_mode,align_corners", GRID_SAMPLES)
def test_grid_sample(mode, padding_mode, align_corners):
    x = torch.randn(2, 3, 5, 6)
    grid = torch.rand(2, 4, 7, 2) * 2.6 - 1.3  # reaches past [-1, 1] to exercise the padding modes
    cpu = [x.clone().requires_grad_(), grid.clone().requires_grad_()]
    expected = F.grid_sample(*cpu, mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    grad_output = torch.randn(expected.shape)
    expected.backward(grad_output)
    torch_neuronx.clear_op_tracking()
    dev = [to_neuron(t) for t in cpu]
    actual = F.grid_sample(*dev, mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    actual.backward(grad_output.to("neuron"))
    assert torch_neuronx.get_fallback_ops() == {}
    torch.testing.assert_close(actual.cpu(), expected.detach())
    torch.testing.assert_close(dev[0].grad.cpu(), cpu[0].grad)
    # Bicubic grid gradients sum 16 value * coefficient-derivative products; PyTorch evaluates the
    # derivative polynomials in another factored form, so float32 rounding differs by a few ulps.
    tolerance = {"rtol": 1e-5, "atol": 1e-4} if mode == "bicubic" else {}
    torch.testing.assert_close(dev[1].grad.cpu(), cpu[1].grad, **tolerance)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_grid_sample_of_16_bit_input_rounds_each_step_as_the_cpu(mode):
    # The CPU's 2-D kernel computes 16-bit input in c10::Half/BFloat16, each operator's result
    # rounded; sampling in float32 and rounding once differed in 70% of the elements, bicubic by up
    # to 7% in bfloat16.
    for dtype, padding_mode, align_corners in [
        (torch.float16, "zeros", False),
        (torch.bfloat16, "border", True),
        (torch.bfloat16, "reflection", False),
    ]:
        x = torch.rand(2, 2, 5, 6).to(dtype)
        grid = (torch.rand(2, 4, 3, 2) * 2.4 - 1.2).to(dtype)
        expected = F.grid_sample(x, grid, mode=mode, padding_mode=padding_mode, align_corners=align_corners)
        actual = F.grid_sample(
            x.to("neuron"), grid.to("neuron"), mode=mode, padding_mode=padding_mode, align_corners=align_corners
        )
        torch.testing.assert_close(actual.cpu(), expected, atol=0, rtol=0)


def test_grid_sample_bfloat16_gradients_and_input_only_grad():
    # 16-bit gradients are computed in float32 and rounded once (the forward rounds each step as
    # the CPU's kernel: the test above), so they are compared with float32's.
    x = torch.randn(1, 2, 4, 5).to(torch.bfloat16)
    grid = (torch.rand(1, 3, 3, 2) * 2 - 1).to(torch.bfloat16)
    grad_output = torch.randn(1, 2, 3, 3).to(torch.bfloat16)
    cpu = [t.float().requires_grad_() for t in (x, grid)]
    F.grid_sample(*cpu, align_corners=False).backward(grad_output.float())
    dev = [t.to("neuron").requires_grad_() for t in (x, grid)]
    F.grid_sample(*dev, align_corners=False).backward(grad_output.to("neuron"))
    for on_device, on_cpu in zip(dev, cpu, strict=True):
        torch.testing.assert_close(on_device.grad.cpu(), on_cpu.grad.to(torch.bfloat16))
    x = torch.randn(1, 2, 4, 5)
    grid = torch.rand(1, 3, 3, 2) * 2 - 1
    _assert_matches(lambda t: F.grid_sample(t, grid.to(t.device), align_corners=True), x)
    assert torch_neuronx.get_executed_ops().get("aten::grid_sampler_2d_backward.default") == 1


@pytest.mark.parametrize(("input_shape", "grid_shape"), [((0, 2, 4, 4), (0, 3, 3, 2)), ((1, 0, 4, 4), (1, 3, 3, 2))])
def test_grid_sample_of_an_empty_batch_or_channels_as_the_cpu(input_shape, grid_shape):
    # reshape(n, c, -1) divided by n * c = 0 (ZeroDivisionError).
    _assert_matches(
        lambda t, g: F.grid_sample(t, g, align_corners=False), torch.rand(input_shape), torch.rand(grid_shape)
    )


@pytest.mark.parametrize(
    ("input_shape", "grid_shape"),
    [
        ((1, 2, 0, 4), (1, 3, 3, 2)),  # sampled nothing: zeros
        ((2, 2, 4, 4), (1, 3, 3, 2)),  # a reshape error
        ((1, 2, 4, 4), (1, 3, 3, 3)),
        ((1, 2, 4, 4), (1, 3, 3, 2, 2)),
    ],
)
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_grid_sample_argument_errors_are_atens(input_shape, grid_shape, compiled):
    # PyTorch's meta kernel of grid_sampler_2d is its decomposition, which checks none of these.
    def sample(x, grid):
        return torch.grid_sampler_2d(x, grid, 0, 0, False)

    with pytest.raises(RuntimeError) as expected:
        sample(torch.rand(input_shape), torch.rand(grid_shape))
    # Dynamo's fake run meets the error first and wraps it (TorchRuntimeError), as on the CPU.
    run = torch.compile(sample, backend="neuron", dynamic=False) if compiled else sample
    with pytest.raises(RuntimeError, match=re.escape(str(expected.value))):
        run(torch.rand(input_shape, device="neuron"), torch.rand(grid_shape, device="neuron"))
