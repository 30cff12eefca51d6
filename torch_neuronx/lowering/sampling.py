"""Interpolation and sampling: upsample_nearest{1,2,3}d (and the ``_exact`` variants), upsample_linear1d,
upsample_bilinear2d, upsample_trilinear3d, upsample_bicubic2d, the antialiased bilinear, bicubic and
Lanczos resamplers, their backward ops, and grid_sampler_2d and grid_sampler_3d (with backward).

Every upsampling mode is separable: along each spatial dimension, output ``o`` is a weighted sum of a
few input taps. The taps and weights depend only on the sizes and scales, so they are computed on the
host (numpy, in float32 like PyTorch's ``opmath_t``) with PyTorch's formulas from
``aten/src/ATen/native/UpSample.h``:

- scale: ``(in - 1) / (out - 1)`` with align_corners (0 when out == 1); otherwise ``1 / scale``
  when a positive scale factor was given, else ``in / out`` (``area_pixel_compute_scale``).
- source index: ``scale * o`` with align_corners, else ``scale * (o + 0.5) - 0.5``, clamped at 0
  except for cubic (``area_pixel_compute_source_index``); then ``guard_index_and_lambda``.
- nearest: ``min(floor(o * scale), in - 1)``; the 2d kernel (``nearest_idx``) takes out == in as
  the identity and out == 2 * in as ``o >> 1`` whatever the scale; nearest-exact:
  ``min(floor((o + 0.5) * scale), in - 1)``, with the float32 rounding of each kernel (see
  ``_nearest_taps``).
- linear modes copy a dimension whose output size equals its input size, whatever the scale (as the
  CPU kernel does); cubic's forward does not (its backward copies when both sizes match).
- cubic: Keys' cubic convolution with ``A = -0.75`` over taps ``i - 1 .. i + 2`` clamped to the
  border (``get_cubic_upsample_coefficients``).
- antialias: the filters and windows of ``UpSampleKernel.cpp`` (``_compute_indices_min_size_weights_aa``);
  the forward copies a dimension whose size does not change, whatever the scale, the backward does
  not; uint8 (bilinear, bicubic and Lanczos, with or without antialias, as the CPU computes it;
  CUDA's bilinear and bicubic kernels refuse it) in Pillow's int16 fixed point.

The dimensions are contracted last to first, as PyTorch's separable CPU kernel nests them; 16-bit
inputs interpolate in float32 and round once. Backward ops are the transposes (``jax.vjp``) of the
forward, accumulating in float32.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import torch

from torch_neuronx.lowering.pointwise import true_divide
from torch_neuronx.lowering.promotion import c10_rounding, opmath_dtype
from torch_neuronx.lowering.registry import lowering, same_dtype
from torch_neuronx.runtime.dtypes import aten_name

aten = torch.ops.aten

_F32 = np.float32
_CUBIC_A = _F32(-0.75)

#: One spatial dimension's taps: (input indices, weights), each of shape (taps, out), or weights None
#: for a single tap of weight 1 (nearest, or a linear dimension copied unchanged).
Taps = tuple[np.ndarray, np.ndarray | None]


def _scale_value(scale: float | None, size: int, out: int, real: type = _F32) -> np.floating:
    """``compute_scales_value``: 1 / scale when a positive scale was given, else in / out."""
    if scale is not None and scale > 0:
        return real(1.0 / scale)
    return real(size) / real(out)


def _area_scale(size: int, out: int, align_corners: bool, scale: float | None, real: type = _F32) -> np.floating:
    """``area_pixel_compute_scale``, in ``real`` (float32, the kernels' opmath; float64 for uint8's
    antialiased weights)."""
    if align_corners:
        return real(size - 1) / real(out - 1) if out > 1 else real(0)
    return _scale_value(scale, size, out, real)


def _source_index(scale: np.floating, out: int, align_corners: bool, cubic: bool) -> np.ndarray:
    """``area_pixel_compute_source_index`` for every output position, in ``scale``'s dtype (float32,
    the kernels' opmath; float64 for uint8's weights)."""
    real = type(scale)
    dst = np.arange(out, dtype=real)
    if align_corners:
        return scale * dst
    src = scale * (dst + real(0.5)) - real(0.5)
    return src if cubic else np.maximum(src, real(0))


def _guard(real: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """``guard_index_and_lambda``: the integer tap below ``real`` and the fraction past it, in
    ``real``'s dtype."""
    kind = real.dtype.type
    index = np.minimum(np.floor(real).astype(np.int64), size - 1)
    fraction = np.clip(real - index.astype(kind), kind(0), kind(1)).astype(kind)
    return index, fraction


def _nearest_taps(size: int, out: int, scale: float | None, exact: bool, planar: bool) -> Taps:
    """Nearest source indices. ``planar`` selects PyTorch's 2d kernel (``nearest_idx`` /
    ``nearest_exact_idx``: float32 ``floor((o [+ 0.5]) * scale)``, out == in and out == 2 * in as
    exact shortcuts); otherwise its N-d kernel (``HelperInterpNearest[Exact]``), whose exact variant
    rounds ``scale * (o + 0.5) - 0.5`` once (a fused multiply-add), clamps it at 0 and floors it + 0.5."""
    step = _scale_value(scale, size, out)
    dst = np.arange(out)
    if planar and not exact and out == size:
        index = dst
    elif planar and not exact and out == 2 * size:
        index = dst >> 1
    elif planar or not exact:
        index = np.floor((dst.astype(_F32) + _F32(0.5 if exact else 0)) * step)
    else:
        real = np.maximum(((dst + 0.5) * np.float64(step) - 0.5).astype(_F32), _F32(0))
        index = np.floor((real.astype(np.float64) + 0.5).astype(_F32))
    return np.minimum(index.astype(np.int64), size - 1)[None, :], None


def _linear_taps(size: int, out: int, align_corners: bool, scale: float | None, dtype=None) -> Taps:
    """Two taps per output, weights ``1 - l, l``. As ``compute_source_index_and_lambda`` stores the
    weights in the tensor's dtype, a 16-bit ``dtype`` rounds ``l`` and then ``1 - l`` to it (weights
    in float32 differed from the CPU in 36% of bfloat16 elements, by up to 4 times tolerance)."""
    if out == size:
        return np.arange(out)[None, :], None
    real = _source_index(_area_scale(size, out, align_corners, scale), out, align_corners, cubic=False)
    index, fraction = _guard(real, size)
    upper = index + (index < size - 1)
    fraction = _stored(fraction, dtype)
    return np.stack([index, upper]), np.stack([_stored(_F32(1) - fraction, dtype), fraction])


def _stored(weights: np.ndarray, dtype) -> np.ndarray:
    """Float32 ``weights`` as a kernel that keeps them in ``dtype`` (a 16-bit float) reads them back."""
    if dtype in (jnp.bfloat16, jnp.float16):
        return weights.astype(dtype).astype(_F32)
    return weights


def _cubic_taps(size: int, out: int, align_corners: bool, scale: float | None, dtype=None) -> Taps:
    """Four taps per output with Keys' weights, computed in float32 and, for a 16-bit ``dtype``,
    stored in it as the CPU's forward kernel stores them (:func:`_stored`)."""
    real = _source_index(_area_scale(size, out, align_corners, scale), out, align_corners, cubic=True)
    index, t = _guard(real, size)
    a = _CUBIC_A

    def near(x):  # |x| <= 1
        return ((a + _F32(2)) * x - (a + _F32(3))) * x * x + _F32(1)

    def far(x):  # 1 < |x| < 2
        return ((a * x - _F32(5) * a) * x + _F32(8) * a) * x - _F32(4) * a

    weights = np.stack([far(t + _F32(1)), near(t), near(_F32(1) - t), far(_F32(2) - t)]).astype(_F32)
    taps = np.clip(index[None, :] + np.arange(-1, 3)[:, None], 0, size - 1)
    return taps, _stored(weights, dtype)


#: The antialias filters of ``UpSampleKernel.cpp`` and their half-widths (taps on each side at
#: scale 1): a triangle, Keys' cubic with A = -0.5, and Lanczos-3 (Pillow's ``lanczos_filter``).
_AA_SUPPORT = {"linear": 1, "cubic": 2, "lanczos": 3}


def _sinc(x: np.ndarray) -> np.ndarray:
    """sin(pi x) / (pi x) in x's dtype (1 at 0), the sine rounded from float64."""
    real = x.dtype.type
    t = np.where(x == 0, real(1), x * real(math.pi)).astype(x.dtype)
    return np.where(x == 0, real(1), np.sin(t.astype(np.float64)).astype(x.dtype) / t).astype(x.dtype)


def _aa_filter(x: np.ndarray, kind: str, antialias: bool = True) -> np.ndarray:
    """The antialias filter ``kind`` (a key of ``_AA_SUPPORT``) at ``x``, in x's dtype; the cubic one
    with A = -0.5 (Pillow's), or without ``antialias`` (uint8's fixed-point bicubic) PyTorch's -0.75."""
    real = x.dtype.type
    x = np.abs(x)
    if kind == "linear":
        return np.where(x < 1, real(1) - x, real(0)).astype(x.dtype)
    if kind == "lanczos":
        return np.where(x < 3, _sinc(x) * _sinc(x / real(3)), real(0)).astype(x.dtype)
    a = real(-0.5 if antialias else -0.75)
    near = ((a + real(2)) * x - (a + real(3))) * x * x + real(1)
    far = (((x - real(5)) * x + real(8)) * x - real(4)) * a
    return np.where(x < 1, near, np.where(x < 2, far, real(0))).astype(x.dtype)


def _aa_taps(
    size: int, out: int, align_corners: bool, scale: float | None, kind: str, real: type = _F32
) -> tuple[np.ndarray, np.ndarray]:
    """``_compute_indices_min_size_weights_aa``: output ``o`` averages the inputs within ``support``
    of its centre ``scale * (o + 0.5)`` with the filter stretched by the scale when downsampling
    (``support = half-width * scale``), weights normalised to sum 1, computed in ``real``."""
    scale = _area_scale(size, out, align_corners, scale, real)
    half = real(_AA_SUPPORT[kind])
    support = half * scale if scale >= 1 else half
    inverse = real(1) / scale if scale >= 1 else real(1)
    width = int(math.ceil(support)) * 2 + 1
    index = np.zeros((width, out), np.int64)
    weights = np.zeros((width, out), real)
    for o in range(out):
        center = scale * (real(o) + real(0.5))
        start = max(int(center - support + real(0.5)), 0)
        count = min(max(min(int(center + support + real(0.5)), size) - start, 0), width)
        w = _aa_filter((np.arange(start, start + count, dtype=real) - center + real(0.5)) * inverse, kind)
        total = w.sum(dtype=real)
        weights[:count, o] = w / total if total != 0 else w
        index[:, o] = np.minimum(start + np.arange(width), size - 1)
    return index, weights


def _aa(x_shape, output_size, align_corners, scales, kind, *, forward=True) -> list[Taps]:
    """Each spatial dimension's antialiased taps. The forward kernel copies a dimension whose output
    size equals its input size whatever the scale (``separable_upsample_generic_Nd_kernel_impl``);
    the backward kernel interpolates it with the scale."""
    sizes = x_shape[-len(output_size) :]
    return [
        (np.arange(o)[None, :], None) if forward and i == o else _aa_taps(i, o, align_corners, s, kind)
        for i, o, s in zip(sizes, output_size, scales, strict=True)
    ]


def _unfiltered_taps(size: int, out: int, align_corners: bool, scale: float | None, kind: str):
    """``_compute_indices_min_size_weights``, the taps of the CPU's uint8 bilinear and bicubic
    without antialias, in float64: the float kernels' source index and fraction
    (``area_pixel_compute_source_index``, ``guard_index_and_lambda``), the filter's 2 or 4 weights
    around it (cubic's A = -0.75), those of taps past a border added to the border tap's (as the
    float kernels clamp their indices); not normalised."""
    width = 2 * _AA_SUPPORT[kind]
    support = width // 2
    step = _area_scale(size, out, align_corners, scale, np.float64)
    belows, fractions = _guard(_source_index(step, out, align_corners, cubic=kind == "cubic"), size)
    index = np.zeros((width, out), np.int64)
    weights = np.zeros((width, out), np.float64)
    for o, (below, fraction) in enumerate(zip(belows.tolist(), fractions.tolist(), strict=True)):
        unbound = below - support + 1
        start = max(unbound, 0)
        count = min(max(min(below + support + 1, size) - start, 0), width)
        slot = 0
        for j in range(width):
            if unbound + j <= 0:
                slot = 0
            elif unbound + j >= size - 1:
                slot = count - 1
            w = _aa_filter(np.array([j + 1 - support - fraction]), kind, antialias=False)[0]
            weights[slot, o] += w
            slot += 1
        index[:, o] = np.minimum(start + np.arange(width), size - 1)
    return index, weights


def _int16_weights(weights: np.ndarray) -> tuple[np.ndarray, int]:
    """``_compute_indices_int16_weights_aa`` (Pillow's fixed point): float64 weights as int16 with the
    most fraction bits (up to 22) that keep the largest weight under 2**15, rounded half away from 0."""
    largest = weights.max()
    bits = 0
    while bits < 22 and int(0.5 + largest * (1 << (bits + 1))) < (1 << 15):
        bits += 1
    scaled = weights * (1 << bits)
    return np.where(scaled < 0, np.trunc(scaled - 0.5), np.trunc(scaled + 0.5)).astype(np.int32), bits


def _upsample_uint8(x, output_size, align_corners, scales, kind, antialias=True):
    """The CPU's uint8 resampling (Pillow's, ``_separable_upsample_generic_Nd_kernel_impl_single_dim``
    and its AVX2 twin alike): each dimension whose size changes, last first, sums int16 weights
    (:func:`_aa_taps` in float64, or :func:`_unfiltered_taps`) times the pixels in int32, adds half of
    the last fraction bit, shifts and saturates to uint8 before the next dimension.

    Where the CPU's value is wrong, neuron's is right: the CPU's generic kernel (more than 4
    channels, contiguous), resizing both dimensions to a width of 1, fills each output column with
    its first row's value (130 off the float result); neuron's is the float result's, within 1."""
    nd = len(output_size)
    for dim in reversed(range(nd)):
        axis = x.ndim - nd + dim
        size, out = x.shape[axis], output_size[dim]
        if size == out:
            continue
        if antialias:
            index, weights = _aa_taps(size, out, align_corners, scales[dim], kind, np.float64)
        else:
            index, weights = _unfiltered_taps(size, out, align_corners, scales[dim], kind)
        fixed, bits = _int16_weights(weights)
        shape = [1] * x.ndim
        shape[axis] = -1
        total = jnp.full((), 1 << (bits - 1), jnp.int32)
        for tap, weight in zip(index, fixed, strict=True):
            pixels = jnp.take(x, jnp.asarray(tap), axis=axis).astype(jnp.int32)
            total = total + pixels * jnp.asarray(weight).reshape(shape)
        x = jnp.clip(total >> bits, 0, 255).astype(jnp.uint8)
    return x


def _interpolate(x, taps: Sequence[Taps]):
    """Applies each spatial dimension's taps to ``x``'s trailing dimensions, last dimension first."""
    nd = len(taps)
    for dim in reversed(range(nd)):
        axis = x.ndim - nd + dim
        index, weights = taps[dim]
        if weights is None:
            x = jnp.take(x, jnp.asarray(index[0]), axis=axis)
            continue
        shape = [1] * x.ndim
        shape[axis] = -1
        total = None
        for tap, weight in zip(index, weights, strict=True):
            term = jnp.take(x, jnp.asarray(tap), axis=axis) * jnp.asarray(weight, x.dtype).reshape(shape)
            total = term if total is None else total + term
        x = total
    return x


def _interpolated_dtypes(
    kernel: str, *, uint8: bool = False, like: str = "as CUDA does", argument: str = "self"
) -> Callable[[dict[str, Any]], None]:
    """The dtype rule of an upsampling op or its backward (``argument="grad_output"``): CUDA's
    kernels take floating-point tensors, and the nearest modes uint8 as well; another dtype raises
    CUDA's dispatch error (``NotImplementedError``, a RuntimeError) naming ``kernel``. (The CPU
    interpolates uint8 in every mode, and differentiates floating-point gradients only.)"""

    def rule(arguments: dict[str, Any]) -> None:
        dtype = arguments[argument].dtype
        if dtype.is_floating_point or (uint8 and dtype == torch.uint8):
            return
        kinds = "floating-point and uint8" if uint8 else "floating-point"
        raise NotImplementedError(
            f"\"{kernel}\" not implemented for '{aten_name(dtype)}': neuron interpolates {kinds} tensors, "
            f"{like}; convert the input with .float()"
        )

    return rule


def _upsample(x, taps: Sequence[Taps]):
    if all(weights is None for _, weights in taps):
        return _interpolate(x, taps)
    return _interpolate(x.astype(opmath_dtype(x.dtype)), taps)


def _backward(forward: Callable, grad_output, input_size: Sequence[int]):
    """The transpose of the linear ``forward`` applied to grad_output, in the opmath type. An
    integer (uint8) gradient of the nearest modes sums in float64, exact for any sum below 2**53,
    and wraps to its dtype as CUDA's int64 accumulator does (``jax.vjp`` of an integer input gives
    no gradient at all: it returned zeros)."""
    if jnp.issubdtype(grad_output.dtype, jnp.integer):
        grad = _backward(forward, grad_output.astype(jnp.float64), input_size)
        return grad.astype(jnp.int64).astype(grad_output.dtype)
    dtype = opmath_dtype(grad_output.dtype)
    _, pullback = jax.vjp(forward, jnp.zeros(tuple(input_size), dtype))
    (grad,) = pullback(grad_output.astype(dtype))
    return grad


def _nearest(x_shape, output_size, scales, exact):
    sizes = x_shape[-len(output_size) :]
    planar = len(output_size) == 2
    return [_nearest_taps(i, o, s, exact, planar) for i, o, s in zip(sizes, output_size, scales, strict=True)]


def _linear(x_shape, output_size, align_corners, scales, dtype=None):
    sizes = x_shape[-len(output_size) :]
    return [_linear_taps(i, o, align_corners, s, dtype) for i, o, s in zip(sizes, output_size, scales, strict=True)]


def _cubic(x_shape, output_size, align_corners, scales, dtype=None):
    sizes = x_shape[-len(output_size) :]
    return [_cubic_taps(i, o, align_corners, s, dtype) for i, o, s in zip(sizes, output_size, scales, strict=True)]


# --- nearest ----------------------------------------------------------------------------------


@lowering(
    aten.upsample_nearest1d.default,
    static=("scales",),
    dtype_rule=_interpolated_dtypes("upsample_nearest1d_out_frame", uint8=True),
)
def upsample_nearest1d(self, output_size, scales=None):
    """F.interpolate(mode="nearest") on (N, C, W): ``src = min(floor(dst * scale), in - 1)``."""
    return _upsample(self, _nearest(self.shape, output_size, [scales], exact=False))


@lowering(
    aten.upsample_nearest2d.default,
    static=("scales_h", "scales_w"),
    dtype_rule=_interpolated_dtypes("upsample_nearest2d_out_frame", uint8=True),
)
def upsample_nearest2d(self, output_size, scales_h=None, scales_w=None):
    """F.interpolate(mode="nearest") on (N, C, H, W)."""
    return _upsample(self, _nearest(self.shape, output_size, [scales_h, scales_w], exact=False))


@lowering(
    aten.upsample_nearest3d.default,
    static=("scales_d", "scales_h", "scales_w"),
    dtype_rule=_interpolated_dtypes("upsample_nearest3d_out_frame", uint8=True),
)
def upsample_nearest3d(self, output_size, scales_d=None, scales_h=None, scales_w=None):
    """F.interpolate(mode="nearest") on (N, C, D, H, W)."""
    return _upsample(self, _nearest(self.shape, output_size, [scales_d, scales_h, scales_w], exact=False))


@lowering(
    aten._upsample_nearest_exact1d.default,
    static=("scales",),
    dtype_rule=_interpolated_dtypes("upsample_nearest_exact1d_out_frame", uint8=True),
)
def _upsample_nearest_exact1d(self, output_size, scales=None):
    """F.interpolate(mode="nearest-exact") on (N, C, W): ``src = min(floor((dst + 0.5) * scale), in - 1)``."""
    return _upsample(self, _nearest(self.shape, output_size, [scales], exact=True))


@lowering(
    aten._upsample_nearest_exact2d.default,
    static=("scales_h", "scales_w"),
    dtype_rule=_interpolated_dtypes("upsample_nearest_exact2d_out_frame", uint8=True),
)
def _upsample_nearest_exact2d(self, output_size, scales_h=None, scales_w=None):
    """F.interpolate(mode="nearest-exact") on (N, C, H, W)."""
    return _upsample(self, _nearest(self.shape, output_size, [scales_h, scales_w], exact=True))


@lowering(
    aten._upsample_nearest_exact3d.default,
    static=("scales_d", "scales_h", "scales_w"),
    dtype_rule=_interpolated_dtypes("upsample_nearest_exact3d_out_frame", uint8=True),
)
def _upsample_nearest_exact3d(self, output_size, scales_d=None, scales_h=None, scales_w=None):
    """F.interpolate(mode="nearest-exact") on (N, C, D, H, W)."""
    return _upsample(self, _nearest(self.shape, output_size, [scales_d, scales_h, scales_w], exact=True))


@lowering(
    aten.upsample_nearest1d_backward.default,
    static=("scales",),
    dtype_rule=_interpolated_dtypes("upsample_nearest1d_backward_out_frame", uint8=True, argument="grad_output"),
)
def upsample_nearest1d_backward(grad_output, output_size, input_size, scales=None):
    """Backward of upsample_nearest1d: each input gathers the gradients of the outputs copied from it."""
    taps = _nearest(input_size, output_size, [scales], exact=False)
    return _backward(lambda x: _interpolate(x, taps), grad_output, input_size)


@lowering(
    aten.upsample_nearest2d_backward.default,
    static=("scales_h", "scales_w"),
    dtype_rule=_interpolated_dtypes("upsample_nearest2d_backward_out_frame", uint8=True, argument="grad_output"),
)
def upsample_nearest2d_backward(grad_output, output_size, input_size, scales_h=None, scales_w=None):
    """Backward of upsample_nearest2d."""
    taps = _nearest(input_size, output_size, [scales_h, scales_w], exact=False)
    return _backward(lambda x: _interpolate(x, taps), grad_output, input_size)


@lowering(
    aten.upsample_nearest3d_backward.default,
    static=("scales_d", "scales_h", "scales_w"),
    dtype_rule=_interpolated_dtypes("upsample_nearest3d_backward_out_frame", uint8=True, argument="grad_output"),
)
def upsample_nearest3d_backward(grad_output, output_size, input_size, scales_d=None, scales_h=None, scales_w=None):
    """Backward of upsample_nearest3d."""
    taps = _nearest(input_size, output_size, [scales_d, scales_h, scales_w], exact=False)
    return _backward(lambda x: _interpolate(x, taps), grad_output, input_size)


@lowering(
    aten._upsample_nearest_exact1d_backward.default,
    static=("scales",),
    dtype_rule=_interpolated_dtypes("upsample_nearest_exact1d_backward_out_frame", uint8=True, argument="grad_output"),
)
def _upsample_nearest_exact1d_backward(grad_output, output_size, input_size, scales=None):
    """Backward of _upsample_nearest_exact1d."""
    taps = _nearest(input_size, output_size, [scales], exact=True)
    return _backward(lambda x: _interpolate(x, taps), grad_output, input_size)


@lowering(
    aten._upsample_nearest_exact2d_backward.default,
    static=("scales_h", "scales_w"),
    dtype_rule=_interpolated_dtypes("upsample_nearest_exact2d_backward_out_frame", uint8=True, argument="grad_output"),
)
def _upsample_nearest_exact2d_backward(grad_output, output_size, input_size, scales_h=None, scales_w=None):
    """Backward of _upsample_nearest_exact2d."""
    taps = _nearest(input_size, output_size, [scales_h, scales_w], exact=True)
    return _backward(lambda x: _interpolate(x, taps), grad_output, input_size)


@lowering(
    aten._upsample_nearest_exact3d_backward.default,
    static=("scales_d", "scales_h", "scales_w"),
    dtype_rule=_interpolated_dtypes("upsample_nearest_exact3d_backward_out_frame", uint8=True, argument="grad_output"),
)
def _upsample_nearest_exact3d_backward(
    grad_output, output_size, input_size, scales_d=None, scales_h=None, scales_w=None
):
    """Backward of _upsample_nearest_exact3d."""
    taps = _nearest(input_size, output_size, [scales_d, scales_h, scales_w], exact=True)
    return _backward(lambda x: _interpolate(x, taps), grad_output, input_size)


# --- linear and cubic -------------------------------------------------------------------------


@lowering(
    aten.upsample_linear1d.default, static=("scales",), dtype_rule=_interpolated_dtypes("upsample_linear1d_out_frame")
)
def upsample_linear1d(self, output_size, align_corners, scales=None):
    """F.interpolate(mode="linear"): two taps ``i0 = floor(src)``, ``i1 = min(i0 + 1, in - 1)`` with
    weights ``1 - l, l`` where ``l = src - i0``."""
    return _upsample(self, _linear(self.shape, output_size, align_corners, [scales], self.dtype))


@lowering(
    aten.upsample_bilinear2d.default,
    static=("scales_h", "scales_w"),
    dtype_rule=_interpolated_dtypes("upsample_bilinear2d_out_frame", uint8=True, like="as the CPU does"),
)
def upsample_bilinear2d(self, output_size, align_corners, scales_h=None, scales_w=None):
    """F.interpolate(mode="bilinear") (antialias=False): linear taps along H and W.

    A 16-bit input follows the CPU kernel that ``upsample_bilinear2d_kernel_impl_float`` picks for
    an NCHW input: for outputs with H + W <= 128 its vectorised kernel
    (``cpu_upsample_linear_channels_last``), which weighs the four corners with products of float32
    weights, ``x00 * h0 * w0 + ...``; for larger ones the generic kernel, whose weights are stored
    in the 16-bit dtype (:func:`_linear_taps`). Float32 weights along each dimension in turn
    differed in 31-48% of elements, by up to 4 times tolerance; these differ from the CPU in under
    1% of elements, by one unit in the last place (its vector code's order of additions). The CPU
    also takes the vectorised kernel for channels-last inputs of more than 3 channels, and for 3
    channels on one thread; neuron, which does not see the layout, takes the NCHW choice.

    uint8 resamples in the CPU's fixed point, to the bit (:func:`_upsample_uint8`); CUDA refuses it."""
    if self.dtype == jnp.uint8:
        return _upsample_uint8(self, output_size, align_corners, [scales_h, scales_w], "linear", antialias=False)
    if self.dtype in (jnp.bfloat16, jnp.float16) and output_size[0] + output_size[1] <= 128:
        taps = _linear(self.shape, output_size, align_corners, [scales_h, scales_w])
        return _corner_products(self.astype(jnp.float32), *taps)
    return _upsample(self, _linear(self.shape, output_size, align_corners, [scales_h, scales_w], self.dtype))


def _corner_products(x, rows: Taps, columns: Taps):
    """Bilinear interpolation as a sum over the four corners, each weighted by the product of its
    row and column weights (float32), in ATen's order (00, 01, 10, 11)."""
    corners = [(0, 0), (0, 1), (1, 0), (1, 1)]
    row_index, row_weights = rows if rows[1] is not None else (np.repeat(rows[0], 2, 0), np.array([[1], [0]], _F32))
    col_index, col_weights = (
        columns if columns[1] is not None else (np.repeat(columns[0], 2, 0), np.array([[1], [0]], _F32))
    )
    total = None
    for r, c in corners:
        weight = (row_weights[r][:, None] * col_weights[c][None, :]).astype(_F32)
        term = jnp.take(jnp.take(x, jnp.asarray(row_index[r]), axis=-2), jnp.asarray(col_index[c]), axis=-1) * weight
        total = term if total is None else total + term
    return total


@lowering(
    aten.upsample_trilinear3d.default,
    static=("scales_d", "scales_h", "scales_w"),
    dtype_rule=_interpolated_dtypes("upsample_trilinear3d_out_frame"),
)
def upsample_trilinear3d(self, output_size, align_corners, scales_d=None, scales_h=None, scales_w=None):
    """F.interpolate(mode="trilinear"): linear taps along D, H and W."""
    return _upsample(self, _linear(self.shape, output_size, align_corners, [scales_d, scales_h, scales_w], self.dtype))


@lowering(
    aten.upsample_bicubic2d.default,
    static=("scales_h", "scales_w"),
    dtype_rule=_interpolated_dtypes("upsample_bicubic2d_out_frame", uint8=True, like="as the CPU does"),
)
def upsample_bicubic2d(self, output_size, align_corners, scales_h=None, scales_w=None):
    """F.interpolate(mode="bicubic") (antialias=False): four taps per dimension with Keys' cubic
    convolution weights (A = -0.75), border-clamped (results may overshoot the input range). uint8
    resamples in the CPU's fixed point, to the bit, saturating (:func:`_upsample_uint8`)."""
    if self.dtype == jnp.uint8:
        return _upsample_uint8(self, output_size, align_corners, [scales_h, scales_w], "cubic", antialias=False)
    return _upsample(self, _cubic(self.shape, output_size, align_corners, [scales_h, scales_w], self.dtype))


@lowering(
    aten.upsample_linear1d_backward.default,
    static=("scales",),
    dtype_rule=_interpolated_dtypes("upsample_linear1d_out_frame_backward", argument="grad_output"),
)
def upsample_linear1d_backward(grad_output, output_size, input_size, align_corners, scales=None):
    """Backward of upsample_linear1d."""
    taps = _linear(input_size, output_size, align_corners, [scales])
    return _backward(lambda x: _interpolate(x, taps), grad_output, input_size)


@lowering(
    aten.upsample_bilinear2d_backward.default,
    static=("scales_h", "scales_w"),
    dtype_rule=_interpolated_dtypes("upsample_bilinear2d_backward_out_frame", argument="grad_output"),
)
def upsample_bilinear2d_backward(grad_output, output_size, input_size, align_corners, scales_h=None, scales_w=None):
    """Backward of upsample_bilinear2d."""
    taps = _linear(input_size, output_size, align_corners, [scales_h, scales_w])
    return _backward(lambda x: _interpolate(x, taps), grad_output, input_size)


@lowering(
    aten.upsample_trilinear3d_backward.default,
    static=("scales_d", "scales_h", "scales_w"),
    dtype_rule=_interpolated_dtypes("upsample_trilinear3d_backward_out_frame", argument="grad_output"),
)
def upsample_trilinear3d_backward(
    grad_output, output_size, input_size, align_corners, scales_d=None, scales_h=None, scales_w=None
):
    """Backward of upsample_trilinear3d."""
    taps = _linear(input_size, output_size, align_corners, [scales_d, scales_h, scales_w])
    return _backward(lambda x: _interpolate(x, taps), grad_output, input_size)


@lowering(
    aten.upsample_bicubic2d_backward.default,
    static=("scales_h", "scales_w"),
    dtype_rule=_interpolated_dtypes("upsample_bicubic2d_backward_out_frame", argument="grad_output"),
)
def upsample_bicubic2d_backward(grad_output, output_size, input_size, align_corners, scales_h=None, scales_w=None):
    """Backward of upsample_bicubic2d (border taps accumulate into the edge inputs). When the output
    has the input's size, PyTorch's backward kernel copies the gradient, although its forward kernel
    interpolates with the given scales; both are matched."""
    if tuple(output_size) == tuple(input_size[-2:]):
        return grad_output.astype(opmath_dtype(grad_output.dtype))
    taps = _cubic(input_size, output_size, align_corners, [scales_h, scales_w])
    return _backward(lambda x: _interpolate(x, taps), grad_output, input_size)


# --- grid_sampler_2d, grid_sampler_3d ----------------------------------------------------------

_MODES = {0: "bilinear", 1: "nearest", 2: "bicubic"}
_PADDINGS = {0: "zeros", 1: "border", 2: "reflection"}


def _clip(x, size: int):
    """``clip_coordinates``: into [0, size - 1]; the borders count as clipped (gradient 0 there), as
    PyTorch's ``clip_coordinates_set_grad`` has it."""
    high = jnp.asarray(size - 1, x.dtype)
    return jnp.where(x <= 0, jnp.zeros_like(x), jnp.where(x >= high, high, x))


def _unrounded(x):
    return x


def _reflect(x, twice_low: int, twice_high: int, step=_unrounded):
    """``reflect_coordinates``: folds ``x`` into [low, high] by reflecting at the bounds; ``step``
    rounds each arithmetic result (:func:`.promotion.c10_rounding`)."""
    if twice_low == twice_high:
        return jnp.zeros_like(x)
    low = twice_low / 2
    span = (twice_high - twice_low) / 2
    shifted = step(x - low)
    sign = jnp.where(shifted < 0, -1.0, 1.0).astype(x.dtype)
    distance = shifted * sign
    extra = jnp.fmod(distance, span)
    flips = jnp.floor(step(true_divide(distance, jnp.asarray(span, distance.dtype)))).astype(jnp.int64)
    return jnp.where(flips % 2 == 0, step(extra + low), step(step(span - extra) + low))


def _grid_coordinates(x, size: int, padding_mode: int, align_corners: bool, step=_unrounded):
    """``compute_coordinates``: applies the padding mode to unnormalised coordinates."""
    if padding_mode == 1:
        return _clip(x, size)
    if padding_mode == 2:
        folded = _reflect(x, 0, 2 * (size - 1), step) if align_corners else _reflect(x, -1, 2 * size - 1, step)
        return _clip(folded, size)
    return x


def _unnormalize(coordinate, size: int, align_corners: bool, step=_unrounded):
    """``grid_sampler_unnormalize``: [-1, 1] to pixel indices ([0, size - 1] with align_corners,
    else [-0.5, size - 0.5]), with ``GridSampler.h``'s order of operations."""
    if align_corners:
        return step(step(step(coordinate + 1) / 2) * (size - 1))
    return step(step(step(step(coordinate + 1) * size) - 1) / 2)


def _grid_sample(input, grid, interpolation_mode: int, padding_mode: int, align_corners: bool, step=_unrounded):
    """Samples ``input`` (N, C, *spatial) at ``grid`` (N, *out, len(spatial)), whose last dimension
    holds the (x, y[, z]) coordinates of the (W, H[, D]) dimensions, in the dtype of the arguments,
    ``step`` rounding each arithmetic result (:func:`.promotion.c10_rounding`).
    Bilinear sums the corners' taps z-major, x fastest, each weighted by the product of its
    distances in x, y, z order, as PyTorch's kernels do; taps outside the input count 0."""
    n, c, *sizes = input.shape
    out = grid.shape[1:-1]
    extents = sizes[::-1]  # the size each grid coordinate (x, y, z) indexes
    flat = input.reshape(n, c, math.prod(sizes))  # reshape's -1 divides by n * c, zero for empty batches

    def tap(coordinates, weight=None):
        """Input values at integer ``coordinates`` (x, y[, z], each (N, *out)) times ``weight``; 0
        outside the input."""
        inside = jnp.ones(coordinates[0].shape, jnp.bool_)
        index = jnp.zeros(coordinates[0].shape, jnp.int64)
        for coordinate, size in zip(coordinates, extents, strict=True):
            inside = inside & (coordinate >= 0) & (coordinate < size)
        for coordinate, size in zip(reversed(coordinates), sizes, strict=True):
            index = index * size + coordinate.astype(jnp.int64)
        index = jnp.where(inside, index, 0)
        values = jnp.take_along_axis(flat, index.reshape(n, 1, math.prod(out)), axis=2).reshape(n, c, *out)
        if weight is not None:
            values = step(values * weight[:, None])
        return jnp.where(inside[:, None], values, jnp.zeros((), values.dtype))

    real = [_unnormalize(grid[..., k], size, align_corners, step) for k, size in enumerate(extents)]
    if interpolation_mode == 2:
        x, y = real
        x0, y0 = jnp.floor(x), jnp.floor(y)
        wx, wy = _cubic_weights(step(x - x0), step), _cubic_weights(step(y - y0), step)
        total = 0
        for j in range(4):  # cubic_interp1d of the rows' cubic_interp1d, each a sum in tap order
            ty = _grid_coordinates(y0 + (j - 1), extents[1], padding_mode, align_corners, step)
            row = 0
            for i in range(4):
                tx = _grid_coordinates(x0 + (i - 1), extents[0], padding_mode, align_corners, step)
                row = step(row + tap([tx, ty], wx[i]))
            total = step(total + step(row * wy[j][:, None]))
        return total
    real = [
        _grid_coordinates(x, size, padding_mode, align_corners, step) for x, size in zip(real, extents, strict=True)
    ]
    if interpolation_mode == 1:
        return tap([jnp.round(x) for x in real])
    low = [jnp.floor(x) for x in real]
    total = 0
    for corner in itertools.product((0, 1), repeat=len(real)):
        upper = corner[::-1]  # per coordinate (x, y, z): whether this corner takes the upper tap
        weight = None
        for x, x0, up in zip(real, low, upper, strict=True):
            distance = step(x - x0) if up else step((x0 + 1) - x)
            weight = distance if weight is None else step(weight * distance)
        total = step(total + tap([x0 + up for x0, up in zip(low, upper, strict=True)], weight))
    return total


def _cubic_weights(t, step=_unrounded):
    """Keys' cubic convolution weights (A = -0.75) of the taps at offsets -1, 0, 1, 2 from ``floor``,
    in the order of operations of ATen's ``get_cubic_upsample_coefficients`` (UpSample.h), ``step``
    rounding each result (its constants are exact in 16-bit floats)."""
    a = -0.75

    def near(x):  # ((A + 2) * x - (A + 3)) * x * x + 1
        return step(step(step(step(step((a + 2) * x) - (a + 3)) * x) * x) + 1)

    def far(x):  # ((A * x - 5 * A) * x + 8 * A) * x - 4 * A
        return step(step(step(step(step(step(a * x) - 5 * a) * x) + 8 * a) * x) - 4 * a)

    opposite = step(1 - t)
    return [far(step(t + 1)), near(t), near(opposite), far(step(opposite + 1))]


def _check_grid_options(name: str, interpolation_mode: int, padding_mode: int, modes: int) -> None:
    """``modes`` interpolation modes are supported (bicubic only in 2-D, as in PyTorch)."""
    if interpolation_mode not in range(modes) or padding_mode not in _PADDINGS:
        supported = ", ".join(_MODES[m] for m in range(modes))
        raise ValueError(
            f"aten::{name} on neuron: interpolation_mode {interpolation_mode} / padding_mode "
            f"{padding_mode}; expected 0-{modes - 1} ({supported}) / 0-2 ({', '.join(_PADDINGS.values())})"
        )


def _grid_sample_backward(grad_output, input, grid, interpolation_mode, padding_mode, align_corners, output_mask):
    """(grad_input, grad_grid) as the VJP of :func:`_grid_sample` in the opmath type, grad_input only
    where ``output_mask[0]`` asks for it. The coordinate clipping and reflection have PyTorch's
    gradients (0 at a clipped border, the reflection's sign elsewhere)."""
    dtype = opmath_dtype(input.dtype)

    def forward(x, g):
        return _grid_sample(x, g, interpolation_mode, padding_mode, align_corners)

    _, pullback = jax.vjp(forward, input.astype(dtype), grid.astype(dtype))
    grad_input, grad_grid = pullback(grad_output.astype(dtype))
    return (grad_input if output_mask[0] else None), grad_grid


#: The kernels read the grid as the input's element type (CPU and CUDA alike); a grid of another
#: dtype was computed here.
_GRID_OF_INPUT_DTYPE = same_dtype(("input", "grid"), "expected scalar type {0} but found {1}")


@lowering(aten.grid_sampler_2d.default, dtype_rule=_GRID_OF_INPUT_DTYPE)
def grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners):
    """F.grid_sample on 4-D input: samples ``input`` (N, C, H, W) at ``grid`` (N, oH, oW, 2) (x, y)
    coordinates in [-1, 1], as PyTorch's ``GridSampler.h``: bilinear (out-of-input corners count 0),
    nearest (round half to even) or bicubic (A = -0.75, padding applied per tap); zeros, border or
    reflection padding. 16-bit inputs compute as the 3-D kernel's (:func:`_sampled_in_dtype`): the
    CPU's vectorised 2-D kernel is float32's and float64's; 16-bit runs its scalar fallback."""
    _check_grid_options("grid_sampler_2d", interpolation_mode, padding_mode, modes=3)
    return _sampled_in_dtype(input, grid, interpolation_mode, padding_mode, align_corners)


def _sampled_in_dtype(input, grid, interpolation_mode: int, padding_mode: int, align_corners: bool):
    """:func:`_grid_sample` in the input's dtype, as PyTorch's scalar CPU kernels compute: 16-bit
    inputs in float32 rounded after every step (coordinates, weights and the running sum)."""
    if input.dtype == jnp.float32:
        return _grid_sample(input, grid, interpolation_mode, padding_mode, align_corners)
    step = c10_rounding(input.dtype)
    grid = grid.astype(input.dtype).astype(jnp.float32)
    sampled = _grid_sample(input.astype(jnp.float32), grid, interpolation_mode, padding_mode, align_corners, step)
    return sampled.astype(input.dtype)


@lowering(aten.grid_sampler_2d_backward.default)
def grid_sampler_2d_backward(grad_output, input, grid, interpolation_mode, padding_mode, align_corners, output_mask):
    """Backward of grid_sampler_2d (:func:`_grid_sample_backward`)."""
    _check_grid_options("grid_sampler_2d_backward", interpolation_mode, padding_mode, modes=3)
    return _grid_sample_backward(grad_output, input, grid, interpolation_mode, padding_mode, align_corners, output_mask)


@lowering(aten.grid_sampler_3d.default, dtype_rule=_GRID_OF_INPUT_DTYPE)
def grid_sampler_3d(input, grid, interpolation_mode, padding_mode, align_corners):
    """F.grid_sample on 5-D input: samples ``input`` (N, C, D, H, W) at ``grid`` (N, oD, oH, oW, 3)
    (x, y, z) coordinates in [-1, 1]: trilinear (eight corners) or nearest; zeros, border or
    reflection padding. PyTorch's 3-D CPU kernel computes in the input's dtype
    (:func:`_sampled_in_dtype`)."""
    _check_grid_options("grid_sampler_3d", interpolation_mode, padding_mode, modes=2)
    return _sampled_in_dtype(input, grid, interpolation_mode, padding_mode, align_corners)


@lowering(aten.grid_sampler_3d_backward.default)
def grid_sampler_3d_backward(grad_output, input, grid, interpolation_mode, padding_mode, align_corners, output_mask):
    """Backward of grid_sampler_3d (:func:`_grid_sample_backward`; 16-bit inputs differentiate in
    float32 and round once, where PyTorch's kernel accumulates in the 16-bit type)."""
    _check_grid_options("grid_sampler_3d_backward", interpolation_mode, padding_mode, modes=2)
    return _grid_sample_backward(grad_output, input, grid, interpolation_mode, padding_mode, align_corners, output_mask)


# --- antialiased ------------------------------------------------------------------------------


@lowering(
    aten._upsample_bilinear2d_aa.default,
    static=("scales_h", "scales_w"),
    dtype_rule=_interpolated_dtypes("upsample_bilinear2d_aa_out_frame", uint8=True, like="as the CPU does"),
)
def _upsample_bilinear2d_aa(self, output_size, align_corners, scales_h=None, scales_w=None):
    """F.interpolate(mode="bilinear", antialias=True): a triangle filter widened by the downsampling
    factor (Pillow's resampling, as PyTorch implements it); uint8 in the CPU's fixed point, to the
    bit (torchvision's Resize of uint8 images)."""
    if self.dtype == jnp.uint8:
        return _upsample_uint8(self, output_size, align_corners, [scales_h, scales_w], "linear")
    return _upsample(self, _aa(self.shape, output_size, align_corners, [scales_h, scales_w], "linear"))


@lowering(
    aten._upsample_bicubic2d_aa.default,
    static=("scales_h", "scales_w"),
    dtype_rule=_interpolated_dtypes("upsample_bicubic2d_aa_out_frame", uint8=True, like="as the CPU does"),
)
def _upsample_bicubic2d_aa(self, output_size, align_corners, scales_h=None, scales_w=None):
    """F.interpolate(mode="bicubic", antialias=True): Keys' cubic filter (A = -0.5) widened by the
    downsampling factor; uint8 in the CPU's fixed point, to the bit."""
    if self.dtype == jnp.uint8:
        return _upsample_uint8(self, output_size, align_corners, [scales_h, scales_w], "cubic")
    return _upsample(self, _aa(self.shape, output_size, align_corners, [scales_h, scales_w], "cubic"))


@lowering(
    aten._upsample_bilinear2d_aa_backward.default,
    static=("scales_h", "scales_w"),
    dtype_rule=_interpolated_dtypes("upsample_gen2d_backward_out_frame", argument="grad_output"),
)
def _upsample_bilinear2d_aa_backward(grad_output, output_size, input_size, align_corners, scales_h=None, scales_w=None):
    """Backward of _upsample_bilinear2d_aa."""
    taps = _aa(input_size, output_size, align_corners, [scales_h, scales_w], "linear", forward=False)
    return _backward(lambda x: _interpolate(x, taps), grad_output, input_size)


@lowering(
    aten._upsample_bicubic2d_aa_backward.default,
    static=("scales_h", "scales_w"),
    dtype_rule=_interpolated_dtypes("upsample_gen2d_backward_out_frame", argument="grad_output"),
)
def _upsample_bicubic2d_aa_backward(grad_output, output_size, input_size, align_corners, scales_h=None, scales_w=None):
    """Backward of _upsample_bicubic2d_aa."""
    taps = _aa(input_size, output_size, align_corners, [scales_h, scales_w], "cubic", forward=False)
    return _backward(lambda x: _interpolate(x, taps), grad_output, input_size)


@lowering(
    aten._upsample_lanczos2d_aa.default,
    static=("scales_h", "scales_w"),
    dtype_rule=_interpolated_dtypes("compute_index_ranges_weights", uint8=True, like="as the CPU does"),
)
def _upsample_lanczos2d_aa(self, output_size, align_corners, scales_h=None, scales_w=None):
    """F.interpolate(mode="lanczos", antialias=True): the Lanczos-3 windowed sinc widened by the
    downsampling factor (PIL's ``Image.LANCZOS``). uint8 resamples in the CPU's fixed point, to the
    bit; CUDA has no lanczos kernel, and neuron takes every floating dtype, 16-bit ones computed in
    float32 (the CPU refuses float16 and bfloat16)."""
    scales = [scales_h, scales_w]
    if self.dtype == jnp.uint8:
        return _upsample_uint8(self, output_size, align_corners, scales, "lanczos")
    return _upsample(self, _aa(self.shape, output_size, align_corners, scales, "lanczos"))


@lowering(
    aten._upsample_lanczos2d_aa_backward.default,
    static=("scales_h", "scales_w"),
    dtype_rule=_interpolated_dtypes(
        "upsample_lanczos2d_aa_backward_cpu", like="as the CPU does", argument="grad_output"
    ),
)
def _upsample_lanczos2d_aa_backward(grad_output, output_size, input_size, align_corners, scales_h=None, scales_w=None):
    """Backward of _upsample_lanczos2d_aa."""
    taps = _aa(input_size, output_size, align_corners, [scales_h, scales_w], "lanczos", forward=False)
    return _backward(lambda x: _interpolate(x, taps), grad_output, input_size)
