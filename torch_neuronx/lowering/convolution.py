"""Convolutions: aten.convolution (1d/2d/3d, strided, padded, dilated, grouped, transposed) and its
backward.

Inputs arrive batched and channels-first (``N, C, *spatial``), weights as ``(C_out, C_in / groups,
*kernel)``, or ``(C_in, C_out / groups, *kernel)`` when transposed, as ``torch.nn.functional`` passes
them. 16-bit inputs multiply exactly and accumulate in float32 (``preferred_element_type``), as
PyTorch's CPU (oneDNN) and CUDA (cuDNN) kernels do, and the registry rounds the result once; a
transposed convolution that the CPU computes with its slow kernels (:func:`_cpu_transposes_step_by_step`)
rounds each step as they do.
float32 convolutions run at full float32 precision (``Precision.HIGHEST``).

The backward is the vector-Jacobian product of the forward (``jax.vjp``), so grad_input and
grad_weight are the transposed convolutions PyTorch's ``convolution_backward`` computes, for
transposed convolutions too; grad_bias is grad_output summed over every dimension but channels.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
import torch

from torch_neuronx._compat.torch_internals import suggest_memory_format
from torch_neuronx.lowering.promotion import c10_rounding
from torch_neuronx.lowering.registry import lowering
from torch_neuronx.runtime.dtypes import TORCH_DTYPE, cpp_name

aten = torch.ops.aten


def _accumulation(dtype) -> dict:
    if dtype in (jnp.bfloat16, jnp.float16):
        return {"preferred_element_type": jnp.float32}
    return {"precision": jax.lax.Precision.HIGHEST}


def _sum_dtype(dtype):
    return jnp.float32 if dtype in (jnp.bfloat16, jnp.float16) else dtype


def _dimension_numbers(spatial: int) -> jax.lax.ConvDimensionNumbers:
    """Channels-first layouts for input/output (N, C, ...) and weight (O, I, ...)."""
    layout = tuple(range(spatial + 2))
    return jax.lax.ConvDimensionNumbers(layout, layout, layout)


def _conv(input, weight, stride, padding, dilation, groups):
    """PyTorch's (cross-correlation) convolution: ``out[n, o] = sum_i input[n, g(o)*I + i] (*) weight[o, i]``
    with symmetric zero padding."""
    spatial = input.ndim - 2
    return jax.lax.conv_general_dilated(
        input,
        weight,
        window_strides=tuple(stride),
        padding=[(p, p) for p in padding],
        rhs_dilation=tuple(dilation),
        dimension_numbers=_dimension_numbers(spatial),
        feature_group_count=groups,
        **_accumulation(input.dtype),
    )


def _conv_transpose(input, weight, stride, padding, dilation, output_padding, groups):
    """PyTorch's ConvTranspose: the gradient of ``_conv`` with respect to its input, whose size along
    each spatial dimension is ``(i - 1) * s - 2 * p + d * (k - 1) + output_padding + 1``.

    Computed directly as a convolution of the input dilated by ``stride`` with the spatially flipped
    kernel, regrouped from ``(C_in, C_out / g, k...)`` to ``(C_out, C_in / g, k...)``, and padded by
    ``d * (k - 1) - p`` before and that plus ``output_padding`` after (negative padding crops)."""
    spatial = input.ndim - 2
    c_in, c_out_group, *kernel = weight.shape
    regrouped = weight.reshape(groups, c_in // groups, c_out_group, *kernel)
    regrouped = jnp.swapaxes(regrouped, 1, 2).reshape(groups * c_out_group, c_in // groups, *kernel)
    flipped = jnp.flip(regrouped, axis=tuple(range(2, spatial + 2)))
    pads = [
        (d * (k - 1) - p, d * (k - 1) - p + op)
        for k, p, d, op in zip(kernel, padding, dilation, output_padding, strict=True)
    ]
    return jax.lax.conv_general_dilated(
        input,
        flipped,
        window_strides=(1,) * spatial,
        padding=pads,
        lhs_dilation=tuple(stride),
        rhs_dilation=tuple(dilation),
        dimension_numbers=_dimension_numbers(spatial),
        feature_group_count=groups,
        **_accumulation(input.dtype),
    )


def _expand(values: Sequence[int], spatial: int) -> tuple[int, ...]:
    """A per-dimension argument; a single value applies to every spatial dimension."""
    values = tuple(values)
    return values * spatial if len(values) == 1 else values


def _forward(input, weight, stride, padding, dilation, transposed, output_padding, groups):
    spatial = input.ndim - 2
    if spatial not in (1, 2, 3):
        raise NotImplementedError(
            f"aten::convolution on neuron: {spatial} spatial dimensions; 1, 2 and 3 (conv1d/2d/3d) are supported"
        )
    stride, padding, dilation = (_expand(v, spatial) for v in (stride, padding, dilation))
    if transposed:
        return _conv_transpose(input, weight, stride, padding, dilation, _expand(output_padding, spatial), groups)
    return _conv(input, weight, stride, padding, dilation, groups)


@lowering(aten.convolution.default, metas=True)
def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, *, metas):
    """torch.nn.functional.conv{1,2,3}d / conv_transpose{1,2,3}d: ``aten::convolution``; bias (if any)
    is added per output channel before the single rounding. ``metas`` (the arguments with their
    strides) say whether the CPU's 16-bit slow kernel runs channels-last.

    Raises:
        RuntimeError: ``weight`` or ``bias`` is not of ``input``'s dtype (ATen's Convolution.cpp
            ``check_input_same_type_as_parameters``: convolutions do not promote).
    """
    for name, parameter in (("weight", weight), ("bias", bias)):
        if parameter is not None and parameter.dtype != input.dtype:
            raise RuntimeError(
                f"Input type ({cpp_name(input.dtype)}) and {name} type ({cpp_name(parameter.dtype)}) should be "
                f"the same; convert one of them, e.g. {name}.to({TORCH_DTYPE[jnp.dtype(input.dtype)]})"
            )
    spatial = input.ndim - 2
    if transposed and _cpu_transposes_step_by_step(
        input.dtype, _expand(stride, spatial), _expand(output_padding, spatial)
    ):
        out = _conv_transpose_step_by_step(
            input,
            weight,
            bias,
            *(_expand(v, spatial) for v in (stride, padding, dilation, output_padding)),
            groups,
            channels_last=_cpu_runs_channels_last(*metas[:2]),
        )
        return out[:, :0] if input.shape[1] == 0 else out
    out = _forward(input, weight, stride, padding, dilation, transposed, output_padding, groups)
    if bias is not None:
        out = out + bias.astype(out.dtype).reshape((1, -1) + (1,) * (out.ndim - 2))
    if input.shape[1] == 0:  # ATen's "Empty" backend: no channels in, none out (bias or not)
        return out[:, :0]
    return out


def _cpu_runs_channels_last(input: torch.Tensor, weight: torch.Tensor) -> bool:
    """ATen's ``thnn_conv_use_channels_last`` (ConvUtils.h) for the metas of a 2-D convolution's
    input and weight: its slow kernels run channels-last when either suggests that layout."""
    return input.dim() == 4 and torch.channels_last in (suggest_memory_format(input), suggest_memory_format(weight))


def _cpu_transposes_step_by_step(dtype, stride, output_padding) -> bool:
    """Whether ATen's CPU computes a transposed convolution of 16-bit ``dtype`` with its portable
    ``slow_conv_transpose{2,3}d`` kernels rather than oneDNN: ``ConvParams::use_mkldnn``
    (Convolution.cpp) takes oneDNN for bfloat16 and float16 only where the host's oneDNN supports
    the dtype (``torch.ops.mkldnn._is_mkldnn_bf16_supported``, ``_fp16_``: AVX-512 for bfloat16,
    AVX-512 FP16 or AMX for float16) and no ``output_padding`` reaches its ``stride``. oneDNN's
    values are float32's rounded once; the slow kernels round each step. The CPU's choice is this
    machine's, so it is read from the host; ``torch.backends.mkldnn.flags(enabled=False)`` is not
    followed (an executable, once compiled, is reused whatever the flag)."""
    if dtype not in (jnp.bfloat16, jnp.float16):
        return False
    if any(pad >= step for pad, step in zip(output_padding, stride, strict=True)):
        return True
    return not _onednn_computes(dtype)


def _onednn_computes(dtype) -> bool:
    """Whether this host's oneDNN computes convolutions of 16-bit ``dtype`` for the CPU
    (``mkldnn_bf16_device_check``/``mkldnn_fp16_device_check``, read through
    ``torch.ops.mkldnn._is_mkldnn_*_supported``)."""
    if not torch.backends.mkldnn.is_available():
        return False
    if dtype == jnp.bfloat16:
        return torch.ops.mkldnn._is_mkldnn_bf16_supported()
    return torch.ops.mkldnn._is_mkldnn_fp16_supported()


def _cpu_convolves_step_by_step(dtype, dilation) -> bool:
    """Whether ATen's CPU computes a 16-bit, undilated, non-transposed convolution with its slow
    kernels (``slow_conv2d``/``slow_conv3d``: oneDNN lacks the dtype on this host), whose backward
    rounds as :func:`_convolution_backward_step_by_step` does. Dilated ones take
    ``slow_conv_dilated``, not followed."""
    return dtype in (jnp.bfloat16, jnp.float16) and all(d == 1 for d in dilation) and not _onednn_computes(dtype)


def _convolution_backward_step_by_step(grad_output, input, weight, stride, padding, groups, want_input, want_weight):
    """(grad_input, grad_weight) of a 16-bit convolution as ``slow_conv2d_backward`` (and 3-D)
    computes them: grad_input as the slow transposed convolution of grad_output
    (:func:`_conv_transpose_step_by_step`: columns ``weight^T @ grad_output`` rounded, then col2im's
    rounded additions), grad_weight accumulated batch element by batch element into a 16-bit buffer
    (``grad_weight += grad_output[n] @ im2col(input[n])^T``, each addition rounded). Float32 rounded
    once differed by up to 25 times float16 tolerance."""
    spatial = input.ndim - 2
    kernel = weight.shape[2:]
    grad_input = grad_weight = None
    if want_input:
        out_sizes = grad_output.shape[2:]
        output_padding = [
            size - ((o - 1) * s - 2 * p + k)
            for size, o, s, p, k in zip(input.shape[2:], out_sizes, stride, padding, kernel, strict=True)
        ]
        grad_input = _conv_transpose_step_by_step(
            grad_output, weight, None, stride, padding, (1,) * spatial, output_padding, groups
        )
    if want_weight:
        grad_weight = _weight_gradient_batch_by_batch(
            lambda x, w: _conv(x, w, stride, padding, (1,) * spatial, groups), grad_output, input, weight
        )
    return grad_input, grad_weight


def _depthwise_weight_gradient(grad_output, input, weight, stride, padding, dilation):
    """The weight gradient of a convolution with one input channel per group (depthwise; output
    channel ``o`` reads input channel ``o // multiplier``), from its definition: for each kernel
    offset ``k``, ``sum over n, t of grad_output[n, o, t] * padded_input[n, o // m, t * stride + k *
    dilation]``, accumulated in float32 (the dtype's accumulation for 16-bit), one product of
    ``grad_output``'s size per offset."""
    spatial = input.ndim - 2
    multiplier = weight.shape[0] // input.shape[1]
    accumulate = jnp.float32 if input.dtype in (jnp.bfloat16, jnp.float16) else input.dtype
    x = jnp.pad(input.astype(accumulate), [(0, 0), (0, 0), *((p, p) for p in padding)])
    if multiplier > 1:
        x = jnp.repeat(x, multiplier, axis=1)
    g = grad_output.astype(accumulate)
    out_size = g.shape[2:]
    sums = []
    for offset in itertools.product(*(range(k) for k in weight.shape[2:])):
        window = tuple(
            slice(k * d, k * d + s * (o - 1) + 1, s)
            for k, d, s, o in zip(offset, dilation, stride, out_size, strict=True)
        )
        sums.append(jnp.sum(g * x[(slice(None), slice(None), *window)], axis=(0, *range(2, 2 + spatial))))
    return jnp.stack(sums, axis=-1).reshape(weight.shape).astype(weight.dtype)


def _weight_gradient_batch_by_batch(forward, grad_output, input, weight):
    """The weight gradient of ``forward(input, weight)`` as ATen's slow 16-bit kernels accumulate it:
    each batch element's gradient (float32 gemms) added to a 16-bit buffer in batch order, each
    addition rounded. Per-element gradients come from a vmapped vjp, the additions from a scan."""
    rounded = c10_rounding(input.dtype)
    x, g, w = (t.astype(jnp.float32) for t in (input, grad_output, weight))

    def contribution(x_n, g_n):
        _, pullback = jax.vjp(lambda w_: forward(x_n[None], w_), w)
        return pullback(g_n[None])[0]

    contributions = jax.vmap(contribution)(x, g)
    total, _ = jax.lax.scan(
        lambda total, part: (rounded(total + part), None), jnp.zeros(weight.shape, jnp.float32), contributions
    )
    return total


def _conv_transpose_step_by_step(
    input, weight, bias, stride, padding, dilation, output_padding, groups, *, channels_last=False
):
    """A 16-bit transposed convolution as ATen's ``slow_conv_transpose{2,3}d`` computes it (per group,
    as ``_convolution_nogroup``): ``columns = weight^T @ input`` accumulated in float32 and rounded to
    the dtype; ``col2im`` adds each kernel offset's columns into the zeroed output in row-major
    offset order, each addition rounded; then the bias, rounded. float32 rounded once instead
    differed in 14% of elements, by up to 9.7e3 times assert_close's bfloat16 tolerance (the sums
    of overlapping offsets cancel). The ``channels_last`` kernel's ``col2im`` walks the output
    positions of the columns outermost, so each output element takes its offsets in the reverse
    order (in the row-major order, 25% of its elements differed beyond tolerance)."""
    rounded = c10_rounding(input.dtype)
    spatial = input.ndim - 2
    batch, c_in, *in_size = input.shape
    _, c_out_group, *kernel = weight.shape
    out_size = [
        (i - 1) * s - 2 * p + d * (k - 1) + op + 1
        for i, s, p, d, k, op in zip(in_size, stride, padding, dilation, kernel, output_padding, strict=True)
    ]
    x = input.reshape(batch, groups, c_in // groups, *in_size).astype(jnp.float32)
    w = weight.reshape(groups, c_in // groups, c_out_group, *kernel).astype(jnp.float32)
    kernel_letters, in_letters = "klm"[:spatial], "xyz"[:spatial]
    columns = rounded(
        jnp.einsum(
            f"ngi{in_letters},gio{kernel_letters}->ngo{kernel_letters}{in_letters}",
            x,
            w,
            precision=jax.lax.Precision.HIGHEST,
        )
    )
    offsets = list(itertools.product(*(range(k) for k in kernel)))
    if channels_last:
        offsets.reverse()
    # col2im as a scan over the offsets (one loop body, where unrolled a 29 x 29 kernel compiled for
    # 9 s): each offset's columns spread by the stride and placed at k * dilation on a canvas with
    # the padding on both sides, which the result crops.
    parts = jnp.take(
        jnp.moveaxis(columns.reshape(batch, groups, c_out_group, -1, *in_size), 3, 0),
        jnp.asarray([np.ravel_multi_index(offset, kernel) for offset in offsets]),
        axis=0,
    )
    starts = jnp.asarray([[k * d for k, d in zip(offset, dilation, strict=True)] for offset in offsets], jnp.int32)
    canvas = [out + 2 * p for out, p in zip(out_size, padding, strict=True)]

    def add(total, inputs):
        part, start = inputs
        spread = jax.lax.pad(part, jnp.float32(0), [(0, 0, 0)] * 3 + [(0, 0, step - 1) for step in stride])
        leading = (jnp.zeros((), start.dtype),) * 3
        placed = jax.lax.dynamic_update_slice(jnp.zeros_like(total), spread, (*leading, *start))
        return rounded(total + placed), None

    total, _ = jax.lax.scan(add, jnp.zeros((batch, groups, c_out_group, *canvas), jnp.float32), (parts, starts))
    total = total[(slice(None),) * 3 + tuple(slice(p, p + out) for p, out in zip(padding, out_size, strict=True))]
    if bias is not None:
        total = rounded(total + bias.astype(jnp.float32).reshape(groups, c_out_group, *(1,) * spatial))
    return total.reshape(batch, groups * c_out_group, *out_size).astype(input.dtype)


@lowering(aten._convolution.default, metas=True)
def _convolution(
    input,
    weight,
    bias,
    stride,
    padding,
    dilation,
    transposed,
    output_padding,
    groups,
    benchmark,
    deterministic,
    cudnn_enabled,
    allow_tf32,
    *,
    metas,
):
    """``aten::_convolution``: aten::convolution with backend hints (benchmark, cuDNN, TF32) that do
    not apply to neuron."""
    return convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, metas=metas)


@lowering(aten.convolution_backward.default)
def convolution_backward(
    grad_output,
    input,
    weight,
    bias_sizes,
    stride,
    padding,
    dilation,
    transposed,
    output_padding,
    groups,
    output_mask,
):
    """``aten::convolution_backward``: (grad_input, grad_weight, grad_bias), each computed only where
    ``output_mask`` asks for it (None otherwise, as PyTorch returns undefined tensors)."""

    def forward(x, w):
        return _forward(x, w, stride, padding, dilation, transposed, output_padding, groups)

    want_input, want_weight, want_bias = output_mask
    grad_input = grad_weight = grad_bias = None
    if input.shape[1] == 0:  # the forward's "Empty" result (no channels) passes no gradient back
        grad_input, grad_weight = jnp.zeros(input.shape, input.dtype), jnp.zeros(weight.shape, weight.dtype)
        grad_bias = jnp.zeros(tuple(bias_sizes), _sum_dtype(grad_output.dtype)) if want_bias else None
        return (grad_input if want_input else None, grad_weight if want_weight else None, grad_bias)
    spatial = input.ndim - 2
    if (
        (want_input or want_weight)
        and not transposed
        and _cpu_convolves_step_by_step(input.dtype, _expand(dilation, spatial))
    ):
        strides, pads = _expand(stride, spatial), _expand(padding, spatial)
        grad_input, grad_weight = _convolution_backward_step_by_step(
            grad_output, input, weight, strides, pads, groups, want_input, want_weight
        )
    elif not transposed and groups > 1 and groups == input.shape[1] and want_weight:
        # Depthwise: XLA's CPU weight gradient of a grouped convolution makes a temporary that grows
        # with the square of the channels (24576 channels: 18 GiB, the process was killed).
        out, pullback = jax.vjp(lambda x: forward(x, weight), input)
        grad_input = pullback(grad_output.astype(out.dtype))[0] if want_input else None
        grad_weight = _depthwise_weight_gradient(
            grad_output, input, weight, *(_expand(v, spatial) for v in (stride, padding, dilation))
        )
    elif want_input or want_weight:
        out, pullback = jax.vjp(forward, input, weight)
        grad_input, grad_weight = pullback(grad_output.astype(out.dtype))
        if (
            want_weight
            and transposed
            and _cpu_transposes_step_by_step(input.dtype, _expand(stride, spatial), _expand(output_padding, spatial))
        ):
            # slow_conv_transpose's backward: grad_input is one gemm per element (rounded once, as
            # above); grad_weight is added batch element by batch element into a 16-bit buffer.
            grad_weight = _weight_gradient_batch_by_batch(forward, grad_output, input, weight)
    if want_bias:
        reduce = (0, *range(2, grad_output.ndim))
        grad_bias = jnp.sum(grad_output.astype(_sum_dtype(grad_output.dtype)), axis=reduce)
    return (
        grad_input if want_input else None,
        grad_weight if want_weight else None,
        grad_bias,
    )
