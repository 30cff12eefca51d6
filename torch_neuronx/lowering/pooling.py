"""Pooling: max pooling with indices, average pooling, adaptive average and max pooling, fractional
max pooling (2d and 3d), and their backward ops.

The 1d forms (``F.max_pool1d``, ``avg_pool1d``, ``adaptive_*_pool1d``) are CompositeImplicitAutograd
in PyTorch and reach these lowerings as their 2d counterparts.

Windows follow PyTorch's CPU kernels (``aten/src/ATen/native/cpu/MaxPoolKernel.cpp``,
``AvgPoolKernel.cpp``, ``AdaptiveAvgPoolKernel.cpp``, ``AdaptiveMaxPoolKernel.cpp``) and its output
size rule (``pooling_output_shape`` in ``Pool.h``). Max pooling returns, for each output, the flat
index of the chosen element within its input plane (``h * W + w``, or ``(d * H + h) * W + w``): the
first maximum in row-major window order, or the last NaN when the window holds NaNs, as the CPU
kernel's ``val > maxval || isnan(val)`` scan picks. 16-bit inputs average and accumulate gradients
in float32 (PyTorch's opmath type), except where the CPU's kernels keep 16-bit intermediates:
adaptive_avg_pool3d's forward, the adaptive average pools' and avg_pool2d's backward, which divide
and accumulate in the 16-bit dtype as those kernels do.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
import torch

from torch_neuronx.lowering.exact_division import divided_by
from torch_neuronx.lowering.promotion import c10_rounding, contiguous_runs, opmath_dtype, runs_of, sum_runs_in_order
from torch_neuronx.lowering.registry import lowering
from torch_neuronx.runtime.dtypes import aten_name
from torch_neuronx.runtime.tracing import device_check

aten = torch.ops.aten


def _per_dim(values: Sequence[int] | int, nd: int, default: Sequence[int] | None = None) -> tuple[int, ...]:
    """A pooling argument per spatial dimension: one value applies to all; empty takes ``default``."""
    if isinstance(values, int):
        return (values,) * nd
    values = tuple(values)
    if not values and default is not None:
        return tuple(default)
    return values * nd if len(values) == 1 else values


def _output_size(size: int, kernel: int, stride: int, pad: int, dilation: int, ceil_mode: bool) -> int:
    """PyTorch's ``pooling_output_shape``: with ceil_mode the last window must start inside the
    input or its left padding."""
    out = (size + 2 * pad - dilation * (kernel - 1) - 1 + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def _fill_low(dtype):
    """A value no element exceeds: -inf for floats, the minimum for integers."""
    if jnp.issubdtype(dtype, jnp.floating):
        return -jnp.inf
    if dtype == jnp.bool_:
        return False
    return jnp.iinfo(dtype).min


def _windows(x, kernel, stride, padding, dilation, out_size, fill):
    """The pooling windows of ``x``'s trailing ``len(kernel)`` dimensions.

    Returns:
        ``(values, valid, index)``: values of shape ``(..., K, *out_size)`` (K = prod(kernel), window
        offsets in row-major order, out-of-input positions set to ``fill``); ``valid`` (K, *out_size)
        marks positions inside the input; ``index`` (K, *out_size) is each position's flat index in
        the input plane.
    """
    nd = len(kernel)
    sizes = x.shape[-nd:]
    config = [(0, 0)] * (x.ndim - nd)
    for i, k, s, p, d, o in zip(sizes, kernel, stride, padding, dilation, out_size, strict=True):
        config.append((p, max(0, (o - 1) * s + d * (k - 1) + 1 - (i + p))))
    padded = jnp.pad(x, config, constant_values=fill)
    slices = []
    for offsets in itertools.product(*(range(k) for k in kernel)):
        start = [0] * (x.ndim - nd) + [j * d for j, d in zip(offsets, dilation, strict=True)]
        limit = list(x.shape[:-nd]) + [
            j * d + (o - 1) * s + 1 for j, d, s, o in zip(offsets, dilation, stride, out_size, strict=True)
        ]
        steps = [1] * (x.ndim - nd) + list(stride)
        slices.append(jax.lax.slice(padded, start, limit, steps))
    values = jnp.stack(slices, axis=x.ndim - nd)
    positions = [
        np.arange(o)[None, :] * s - p + np.arange(k)[:, None] * d
        for k, s, p, d, o in zip(kernel, stride, padding, dilation, out_size, strict=True)
    ]
    return values, *_position_tables(positions, sizes)


def _position_tables(positions: list[np.ndarray], sizes: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """From per-dimension input positions ``(window, out)``, the validity and flat input index of
    every (window offset, output) pair, shaped ``(K, *out)`` with the offsets in row-major order."""
    nd = len(positions)
    valid = np.ones((), bool)
    index = np.zeros((), np.int64)
    for dim, (pos, size) in enumerate(zip(positions, sizes, strict=True)):
        shape = [1] * (2 * nd)
        shape[dim], shape[nd + dim] = pos.shape
        pos = pos.reshape(shape)
        valid = valid & (pos >= 0) & (pos < size)
        index = index * size + pos
    kernel = math.prod(p.shape[0] for p in positions)
    out = tuple(p.shape[1] for p in positions)
    return valid.reshape(kernel, *out), index.reshape(kernel, *out)


def _select_max(values, valid, index, axis):
    """Max over ``axis`` (the window) and the flat input index of the element chosen, with the CPU
    kernel's rules: first maximum among valid positions, or the last NaN."""
    maximum = jnp.max(values, axis=axis)
    hit = (values == jnp.expand_dims(maximum, axis)) & valid
    chosen = jnp.argmax(hit, axis=axis)
    if jnp.issubdtype(values.dtype, jnp.floating):
        nan = jnp.isnan(values)
        last_nan = values.shape[axis] - 1 - jnp.argmax(jnp.flip(nan, axis), axis=axis)
        chosen = jnp.where(jnp.any(nan, axis=axis), last_nan, chosen)
    table = jnp.broadcast_to(jnp.asarray(index), values.shape)
    indices = jnp.take_along_axis(table, jnp.expand_dims(chosen, axis), axis=axis)
    return maximum, jnp.squeeze(indices, axis)


def _max_pool(self, nd, kernel_size, stride, padding, dilation, ceil_mode):
    kernel = _per_dim(kernel_size, nd)
    stride = _per_dim(stride, nd, default=kernel)
    padding = _per_dim(padding, nd)
    dilation = _per_dim(dilation, nd)
    sizes = self.shape[-nd:]
    out_size = tuple(
        _output_size(i, k, s, p, d, ceil_mode)
        for i, k, s, p, d in zip(sizes, kernel, stride, padding, dilation, strict=True)
    )
    values, valid, index = _windows(self, kernel, stride, padding, dilation, out_size, _fill_low(self.dtype))
    return _select_max(values, valid, index, axis=self.ndim - nd)


@lowering(aten.max_pool2d_with_indices.default)
def max_pool2d_with_indices(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """torch.nn.functional.max_pool2d(return_indices=True) (and max_pool1d, through it): (values,
    flat indices ``h * W + w`` into each input plane)."""
    return _max_pool(self, 2, kernel_size, stride, padding, dilation, ceil_mode)


@lowering(aten.max_pool3d_with_indices.default)
def max_pool3d_with_indices(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """torch.nn.functional.max_pool3d(return_indices=True): indices are ``(d * H + h) * W + w``."""
    return _max_pool(self, 3, kernel_size, stride, padding, dilation, ceil_mode)


def _scatter_to_planes(grad_output, indices, input_shape, nd):
    """Adds each gradient into its input plane at its flat index (overlapping windows accumulate), in
    float32 for 16-bit gradients."""
    plane = math.prod(input_shape[-nd:])
    lead = math.prod(input_shape[:-nd])
    # Explicit sizes: reshape's -1 divides by the other sizes' product, zero for an empty batch.
    windows = math.prod(grad_output.shape[-nd:])
    grad = grad_output.astype(opmath_dtype(grad_output.dtype)).reshape(lead, windows)
    flat = indices.reshape(lead, windows)
    flat = jnp.where(flat < 0, plane, flat)  # dropped, not wrapped: -1 marks no input (checked apart)
    rows = jnp.arange(lead)[:, None]
    result = jnp.zeros((lead, plane), grad.dtype).at[rows, flat].add(grad, mode="drop")
    return result.reshape(input_shape)


def _long_indices(arguments: dict) -> None:
    """The max pooling backwards read ``indices`` as int64 (CPU and CUDA: ``data_ptr<int64_t>``),
    refusing another dtype in these words; neuron computed with them."""
    dtype = arguments["indices"].dtype
    if dtype != torch.int64:
        raise RuntimeError(f"expected scalar type Long but found {aten_name(dtype)}")


def _check_plane_indices(indices, input_shape, nd: int, *, skips_minus_one: bool = False) -> None:
    """Records a device fault for an index outside its input plane (a direct call's own indices):
    ATen's CPU and CUDA kernels write outside the gradient there (the CPU's heap was corrupted);
    neuron would drop or wrap it. ``skips_minus_one``: -1 is the CPU's "no input" mark, which
    max_pool2d/3d's backward skips (its adaptive and fractional kernels do not)."""
    plane = math.prod(input_shape[-nd:])
    bad = ((indices < 0) & ~((indices == -1) & skips_minus_one)) | (indices >= plane)
    if indices.size:
        first_bad = indices.reshape(-1)[jnp.argmax(bad.reshape(-1))]
        device_check(
            jnp.any(bad),
            first_bad,
            f"index {{detail}} is out of bounds for an input plane of {plane} elements; pass the indices "
            "that the pooling's forward returned",
            IndexError,
        )


def _max_pool_backward(
    grad_output,
    indices,
    input_shape,
    windows: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]],
    *,
    skips_minus_one: bool = False,
):
    """Each output's gradient added to the input element its index names. ``windows`` holds, per
    spatial dim, each output's first input position and its positions' step (dilation) and count.
    A 16-bit gradient adds as the CPU's ``cpu_max_pool_backward`` (and its channels-last and
    adaptive forms) adds it: into a 16-bit buffer in output order, each addition rounded, where the
    windows that hold an input overlap (float32 rounded once differed beyond tolerance in a
    third of the overlaps' sums)."""
    nd = len(windows)
    _check_plane_indices(indices, input_shape, nd, skips_minus_one=skips_minus_one)
    if grad_output.dtype not in (jnp.bfloat16, jnp.float16) or not grad_output.size or not math.prod(input_shape):
        return _scatter_to_planes(grad_output, indices, input_shape, nd)
    sizes = input_shape[-nd:]
    covering = []
    for size, (first, step, count) in zip(sizes, windows, strict=True):
        offsets = np.arange(size)[:, None] - first[None, :]
        covering.append(runs_of((offsets >= 0) & (offsets % step == 0) & (offsets < step * count)))
    if all(int(count.max(initial=0)) <= 1 for _, count in covering):
        return _scatter_to_planes(grad_output, indices, input_shape, nd)  # no overlap: nothing to round
    targets = jnp.arange(math.prod(sizes), dtype=indices.dtype).reshape(sizes)
    # Indices of a forward name an input of their window; others (a direct call's own) are summed
    # in float32 rather than dropped.
    in_windows = True
    position = indices
    for dim in reversed(range(nd)):
        position, coordinate = jnp.divmod(position, sizes[dim]) if dim else (None, position)
        along = [1] * nd
        along[dim] = -1
        first, step, count = (jnp.asarray(a).reshape(along) for a in windows[dim])
        offset = coordinate - first
        in_windows = in_windows & (((offset >= 0) & (offset % step == 0) & (offset < step * count)) | (indices == -1))
    return jax.lax.cond(
        jnp.all(in_windows),
        lambda: sum_runs_in_order(grad_output, covering, labels=indices, targets=targets).astype(grad_output.dtype),
        lambda: _scatter_to_planes(grad_output, indices, input_shape, nd).astype(grad_output.dtype),
    )


def _pool_windows(grad_output, nd, kernel_size, stride, padding, dilation):
    """:func:`_max_pool_backward`'s windows of a max pool's arguments."""
    kernel = _per_dim(kernel_size, nd)
    stride, padding, dilation = _per_dim(stride, nd, default=kernel), _per_dim(padding, nd), _per_dim(dilation, nd)
    out_size = grad_output.shape[-nd:]
    return [
        (np.arange(o) * s - p, np.full(o, d), np.full(o, k))
        for o, k, s, p, d in zip(out_size, kernel, stride, padding, dilation, strict=True)
    ]


def _adaptive_windows(input_shape, grad_output, nd):
    """:func:`_max_pool_backward`'s windows of an adaptive max pool."""
    windows = []
    for size, out in zip(input_shape[-nd:], grad_output.shape[-nd:], strict=True):
        start, end = _adaptive_bounds(size, out)
        windows.append((start, np.ones(out, np.int64), end - start))
    return windows


@lowering(aten.max_pool2d_with_indices_backward.default, dtype_rule=_long_indices)
def max_pool2d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices):
    """Backward of max_pool2d: each output's gradient goes to the input element its index names
    (:func:`_max_pool_backward`)."""
    windows = _pool_windows(grad_output, 2, kernel_size, stride, padding, dilation)
    return _max_pool_backward(grad_output, indices, self.shape, windows, skips_minus_one=True)


@lowering(aten.max_pool3d_with_indices_backward.default, dtype_rule=_long_indices)
def max_pool3d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices):
    """Backward of max_pool3d (see max_pool2d_with_indices_backward)."""
    windows = _pool_windows(grad_output, 3, kernel_size, stride, padding, dilation)
    return _max_pool_backward(grad_output, indices, self.shape, windows, skips_minus_one=True)


@lowering(aten.adaptive_max_pool2d_backward.default, dtype_rule=_long_indices)
def adaptive_max_pool2d_backward(grad_output, self, indices):
    """Backward of adaptive_max_pool2d: gradients scattered to the indexed input elements."""
    return _max_pool_backward(grad_output, indices, self.shape, _adaptive_windows(self.shape, grad_output, 2))


@lowering(aten.adaptive_max_pool3d_backward.default, dtype_rule=_long_indices)
def adaptive_max_pool3d_backward(grad_output, self, indices):
    """Backward of adaptive_max_pool3d."""
    return _max_pool_backward(grad_output, indices, self.shape, _adaptive_windows(self.shape, grad_output, 3))


def _avg_divisors(sizes, kernel, stride, padding, out_size, count_include_pad, divisor_override) -> np.ndarray:
    """The divisor of every output of avg_pool, as PyTorch's CPU kernel computes it: the window
    clipped to the padded input (count_include_pad) or to the input, or ``divisor_override``."""
    if divisor_override:
        return np.full(out_size, float(divisor_override))
    counts = []
    for i, k, s, p, o in zip(sizes, kernel, stride, padding, out_size, strict=True):
        start = np.arange(o) * s - p
        end = np.minimum(start + k, i + p)
        if count_include_pad:
            counts.append(end - start)
        else:
            counts.append(np.minimum(end, i) - np.maximum(start, 0))
    divisor = np.ones((), np.float64)
    for dim, count in enumerate(counts):
        shape = [1] * len(counts)
        shape[dim] = -1
        divisor = divisor * count.reshape(shape)
    return divisor


def _avg_pool(self, nd, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    kernel = _per_dim(kernel_size, nd)
    stride = _per_dim(stride, nd, default=kernel)
    padding = _per_dim(padding, nd)
    sizes = self.shape[-nd:]
    out_size = tuple(
        _output_size(i, k, s, p, 1, ceil_mode) for i, k, s, p in zip(sizes, kernel, stride, padding, strict=True)
    )
    x = self.astype(opmath_dtype(self.dtype))
    lead = x.ndim - nd
    # Windows clipped to the padded input's end and one output's stride set to 1 sum the same
    # elements (the rest is zero padding). Unclipped, XLA's CPU backend summed a (2, 2560, 1, 1)
    # input's 2560-wide ceil_mode window wrongly when fused after another op (YNNPACK's reduce
    # fusion, XLA in jax 0.10.2: EfficientNet's pooler, 26228 for 0.69) and its backward built the
    # 134 GB padded input; the divisors below keep the unclipped windows.
    windows = [min(k, p + i) for i, k, p in zip(sizes, kernel, padding, strict=True)]
    strides = [1 if o == 1 else s for s, o in zip(stride, out_size, strict=True)]
    pads = [(0, 0)] * lead + [
        (p, max(0, (o - 1) * s + k - (i + p)))
        for i, k, s, p, o in zip(sizes, windows, strides, padding, out_size, strict=True)
    ]
    total = jax.lax.reduce_window(
        x, np.zeros((), x.dtype), jax.lax.add, (1,) * lead + tuple(windows), (1,) * lead + tuple(strides), pads
    )
    total = total[(Ellipsis, *(slice(0, o) for o in out_size))]
    divisor = _avg_divisors(sizes, kernel, stride, padding, out_size, count_include_pad, divisor_override)
    if not divisor_override:
        # A window entirely in the padding (possible only with ceil_mode) averages to 0, as on CPU.
        divisor = np.maximum(divisor, 1)
    return divided_by(total, divisor)


@lowering(aten.avg_pool2d.default)
def avg_pool2d(self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
    """torch.nn.functional.avg_pool2d (and avg_pool1d, through it): window sums in the opmath type
    divided by PyTorch's divisor (see _avg_divisors)."""
    return _avg_pool(self, 2, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


@lowering(aten.avg_pool3d.default)
def avg_pool3d(self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
    """torch.nn.functional.avg_pool3d (see avg_pool2d)."""
    return _avg_pool(self, 3, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


def _linear_backward(forward, grad_output, self):
    """The backward of a linear pooling ``forward``: its transpose applied to grad_output."""
    primal = jnp.zeros(self.shape, opmath_dtype(self.dtype))
    _, pullback = jax.vjp(forward, primal)
    (grad,) = pullback(grad_output.astype(opmath_dtype(grad_output.dtype)))
    return grad


@lowering(aten.avg_pool2d_backward.default)
def avg_pool2d_backward(
    grad_output, self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
):
    """Backward of avg_pool2d: each output's gradient divided by its divisor, spread over its window
    (for 16-bit gradients, in the dtype: :func:`_avg_pool_backward_in_16_bit`)."""
    if grad_output.dtype in (jnp.bfloat16, jnp.float16) and self.size and grad_output.size:
        options = (kernel_size, stride, padding, count_include_pad, divisor_override)
        return _avg_pool_backward_in_16_bit(grad_output, self.shape, 2, *options)
    return _linear_backward(
        lambda x: _avg_pool(x, 2, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override),
        grad_output,
        self,
    )


def _avg_pool_backward_in_16_bit(
    grad_output, input_shape, nd, kernel_size, stride, padding, count_include_pad, divisor_override
):
    """avg_pool's 16-bit gradient as the CPU's ``cpu_avg_pool{2,3}d_backward`` computes it (fitted,
    contiguous and channels-last alike): each output's gradient divided by its divisor converted to
    the dtype, rounded, then added to each input of its window in output order, each addition
    rounded. Float32 rounded once differed by up to 16.5 times assert_close's bfloat16 tolerance
    where windows overlap."""
    kernel = _per_dim(kernel_size, nd)
    stride = _per_dim(stride, nd, default=kernel)
    padding = _per_dim(padding, nd)
    sizes, out_size = tuple(input_shape[-nd:]), tuple(grad_output.shape[-nd:])
    divisor = _avg_divisors(sizes, kernel, stride, padding, out_size, count_include_pad, divisor_override)
    rounded, dtype = c10_rounding(grad_output.dtype), grad_output.dtype
    delta = rounded(grad_output.astype(jnp.float32) / jnp.asarray(divisor, dtype).astype(jnp.float32))
    covering = []
    for size, k, s, p, o in zip(sizes, kernel, stride, padding, out_size, strict=True):
        start = np.arange(o) * s - p
        end = np.minimum(np.minimum(start + k, size + p), size)
        inside = (np.arange(size)[:, None] >= np.maximum(start, 0)[None, :]) & (np.arange(size)[:, None] < end[None, :])
        covering.append(runs_of(inside))
    return sum_runs_in_order(delta.astype(dtype), covering).astype(dtype)


@lowering(aten.avg_pool3d_backward.default)
def avg_pool3d_backward(
    grad_output, self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
):
    """Backward of avg_pool3d (see avg_pool2d_backward; the CPU has no 16-bit avg_pool3d, so 16-bit
    gradients are CUDA's float32 rounded once)."""
    return _linear_backward(
        lambda x: _avg_pool(x, 3, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override),
        grad_output,
        self,
    )


def _adaptive_bounds(size: int, out: int) -> tuple[np.ndarray, np.ndarray]:
    """PyTorch's adaptive windows: ``[floor(o * I / O), ceil((o + 1) * I / O))``."""
    o = np.arange(out)
    return (o * size) // out, -((-(o + 1) * size) // out)


def _adaptive_avg_pool(self, output_size):
    """Adaptive average over the trailing ``len(output_size)`` dimensions.

    Float32 and 16-bit inputs are averaged as the CPU's kernels do (``cpu_adaptive_avg_pool2d`` in
    AdaptiveAvgPoolKernel.cpp, ``adaptive_avg_pool3d_out_frame``): each window summed element by
    element in row-major order in float32, then divided by its extent in each dimension in turn
    (``sum / kh / kw``). A window matrix product summed in the order XLA's CPU dot chose, which
    depends on the machine's vector width: on an AVX-512 host adaptive_avg_pool1d was an ulp off
    in 38 of 60 elements. Other dtypes (complex) keep the product, divided by the window volumes."""
    nd = len(output_size)
    # An empty window would average to NaN; ATen refuses it, and in 3-D every non-batch dimension.
    for dim in range(1 if nd == 3 else self.ndim - nd, self.ndim):
        if self.shape[dim] == 0:
            raise RuntimeError(
                f"adaptive_avg_pool{nd}d(): Expected input to have non-zero size for non-batch dimensions, "
                f"but input has sizes {list(self.shape)} with dimension {dim} being empty"
            )
    x = self.astype(opmath_dtype(self.dtype))
    if x.dtype == jnp.float32 and x.size and 0 not in output_size:
        bounds = [_adaptive_bounds(size, out) for size, out in zip(x.shape[-nd:], output_size, strict=True)]
        total = sum_runs_in_order(x, [contiguous_runs(start, end - start) for start, end in bounds])
        for dim, (start, end) in enumerate(bounds):
            shape = [1] * nd
            shape[dim] = -1
            # Behind a barrier: XLA's simplifier folds (x / a) / b into x / (a * b), one rounding.
            total = jax.lax.optimization_barrier(divided_by(total, np.asarray(end - start, np.float32).reshape(shape)))
        return total
    lead = x.ndim - nd
    letters = "abcdefghij"[: x.ndim]
    divisor = np.ones((), np.float64)
    for dim, (size, out) in enumerate(zip(x.shape[lead:], output_size, strict=True)):
        start, end = _adaptive_bounds(size, out)
        positions = np.arange(size)
        window = ((positions[None, :] >= start[:, None]) & (positions[None, :] < end[:, None])).astype(np.float32)
        axis = letters[lead + dim]
        spec = f"{letters},z{axis}->{letters.replace(axis, 'z')}"
        x = jnp.einsum(spec, x, jnp.asarray(window, x.dtype), precision=jax.lax.Precision.HIGHEST)
        shape = [1] * nd
        shape[dim] = out
        divisor = divisor * (end - start).reshape(shape)
    return divided_by(x, divisor)


@lowering(aten._adaptive_avg_pool2d.default)
def _adaptive_avg_pool2d(self, output_size):
    """torch.nn.functional.adaptive_avg_pool2d (and adaptive_avg_pool1d): the mean of each adaptive
    window (see _adaptive_bounds)."""
    return _adaptive_avg_pool(self, tuple(output_size))


@lowering(aten._adaptive_avg_pool3d.default)
def _adaptive_avg_pool3d(self, output_size):
    """torch.nn.functional.adaptive_avg_pool3d. A 16-bit input is averaged in its dtype as the
    CPU's ``adaptive_avg_pool3d_out_frame`` does (AdaptiveAveragePooling3d.cpp): each window
    summed element by element in (t, h, w) order, each addition rounded, then divided by its extent
    in t, h and w in turn, each division rounded. Averaging in float32 and rounding once differed
    in 75% of bfloat16 elements, by up to 132 times assert_close's tolerance."""
    if self.dtype not in (jnp.bfloat16, jnp.float16) or not self.size or 0 in output_size:
        return _adaptive_avg_pool(self, tuple(output_size))
    bounds = [_adaptive_bounds(size, out) for size, out in zip(self.shape[-3:], output_size, strict=True)]
    total = sum_runs_in_order(self, [contiguous_runs(start, end - start) for start, end in bounds])
    return _divide_by_extents(total, [end - start for start, end in bounds], self.dtype).astype(self.dtype)


def _divide_by_extents(values, extents, dtype):
    """``values / extent_t / extent_h / extent_w`` over the last three dims, each extent converted to
    ``dtype`` and each division rounded to it, as C++'s ``c10::Half``/``BFloat16`` operators do."""
    rounded = c10_rounding(dtype)
    for dim, extent in enumerate(extents):
        values = rounded(values / jnp.asarray(extent, dtype).astype(jnp.float32).reshape(_along(dim)))
    return values


def _along(dim: int) -> list[int]:
    """The broadcast shape of a vector along spatial ``dim`` of three."""
    shape = [1, 1, 1]
    shape[dim] = -1
    return shape


@lowering(aten._adaptive_avg_pool2d_backward.default)
def _adaptive_avg_pool2d_backward(grad_output, self):
    """Backward of adaptive_avg_pool2d: each output's gradient divided by its window size, spread
    over its window (16-bit gradients in their dtype, see :func:`_adaptive_avg_pool_backward_in_16_bit`)."""
    if grad_output.dtype in (jnp.bfloat16, jnp.float16) and self.size and grad_output.size:
        # A depth of one: the 2-D kernel divides and accumulates as the 3-D one does.
        return _adaptive_avg_pool_backward_in_16_bit(grad_output[..., None, :, :], self[..., None, :, :])[..., 0, :, :]
    output_size = grad_output.shape[-2:]
    return _linear_backward(lambda x: _adaptive_avg_pool(x, output_size), grad_output, self)


@lowering(aten._adaptive_avg_pool3d_backward.default)
def _adaptive_avg_pool3d_backward(grad_output, self):
    """Backward of adaptive_avg_pool3d (16-bit gradients in their dtype, see
    :func:`_adaptive_avg_pool_backward_in_16_bit`)."""
    if grad_output.dtype in (jnp.bfloat16, jnp.float16) and self.size and grad_output.size:
        return _adaptive_avg_pool_backward_in_16_bit(grad_output, self)
    output_size = grad_output.shape[-3:]
    return _linear_backward(lambda x: _adaptive_avg_pool(x, output_size), grad_output, self)


def _adaptive_avg_pool_backward_in_16_bit(grad_output, self):
    """A 16-bit adaptive average pool's gradient over the last three dims, as the CPU's kernels
    compute it (``adaptive_avg_pool3d_backward_out_frame``, and fitted for 2-D): each output's
    gradient divided by its extents in turn, then added to each input of its window in output order,
    each step rounded (float32 once differed by up to 3.8 times tolerance in 2-D)."""
    output_size = grad_output.shape[-3:]
    bounds = [_adaptive_bounds(size, out) for size, out in zip(self.shape[-3:], output_size, strict=True)]
    delta = _divide_by_extents(
        grad_output.astype(jnp.float32), [end - start for start, end in bounds], grad_output.dtype
    )
    covering = []
    for size, (start, end) in zip(self.shape[-3:], bounds, strict=True):
        inside = (np.arange(size)[:, None] >= start[None, :]) & (np.arange(size)[:, None] < end[None, :])
        covering.append(runs_of(inside))
    return sum_runs_in_order(delta.astype(grad_output.dtype), covering).astype(grad_output.dtype)


def _adaptive_max_pool(self, output_size):
    """Adaptive max pooling: windows padded to the longest one by repeating their last element
    (which changes neither the maximum nor the first index reaching it)."""
    nd = len(output_size)
    sizes = self.shape[-nd:]
    if 0 in output_size:  # no windows (the longest of none has no length): an empty result
        shape = (*self.shape[:-nd], *output_size)
        return jnp.zeros(shape, self.dtype), jnp.zeros(shape, jnp.int64)
    positions = []
    for size, out in zip(sizes, output_size, strict=True):
        start, end = _adaptive_bounds(size, out)
        longest = int((end - start).max())
        positions.append(np.minimum(start[None, :] + np.arange(longest)[:, None], end[None, :] - 1))
    valid, index = _position_tables(positions, sizes)
    lead = self.ndim - nd
    flat = self.reshape(*self.shape[:lead], math.prod(sizes))
    values = jnp.take(flat, jnp.asarray(index.reshape(-1)), axis=lead).reshape(*self.shape[:lead], *index.shape)
    return _select_max(values, valid, index, axis=lead)


@lowering(aten.adaptive_max_pool2d.default)
def adaptive_max_pool2d(self, output_size):
    """torch.nn.functional.adaptive_max_pool2d(return_indices=True) (and adaptive_max_pool1d)."""
    return _adaptive_max_pool(self, tuple(output_size))


@lowering(aten.adaptive_max_pool3d.default)
def adaptive_max_pool3d(self, output_size):
    """torch.nn.functional.adaptive_max_pool3d(return_indices=True)."""
    return _adaptive_max_pool(self, tuple(output_size))


# --- fractional max pooling ------------------------------------------------------------------------


def _fractional_starts(samples, size: int, out: int, pool: int):
    """``generate_intervals`` (FractionalMaxPooling.h) for each plane's sample (shape ``(*lead,)``):
    window ``i < out - 1`` starts at ``int((i + u) * alpha) - int(u * alpha)`` with ``alpha = (size -
    pool) / (out - 1)``, the last at ``size - pool``; computed in the samples' dtype, each operation
    rounded to it as the CPU's ``scalar_t`` arithmetic is (c10's 16-bit floats round every result)."""
    dtype = samples.dtype
    last = jnp.full((*samples.shape, 1), size - pool, jnp.int32)
    if out == 1:
        return last
    alpha = jnp.asarray(size - pool, dtype) / jnp.asarray(out - 1, dtype)
    steps = jnp.arange(out - 1).astype(dtype)
    u = samples[..., None]
    starts = ((steps + u) * alpha).astype(jnp.int32) - (u * alpha).astype(jnp.int32)
    return jnp.concatenate([starts, last], axis=-1)


def _check_fractional_samples(self, samples, nd: int) -> None:
    """``fractional_max_pool_check_shape`` (FractionalMaxPooling.h), with its messages: the 3d meta
    kernel leaves it to the CPU kernel, and a sample read past its last dimension was clamped."""
    if samples.dtype != self.dtype:
        raise RuntimeError("Expect _random_samples to have the same dtype as input")
    if samples.ndim != 3:
        raise RuntimeError(f"Expect _random_samples to have 3 dimensions, got {samples.ndim}")
    batch = self.shape[0] if self.ndim == nd + 2 else 1
    if samples.shape[0] < batch:
        raise RuntimeError("Expect _random_samples.size(0) no less then input batch size.")
    if samples.shape[1] != self.shape[-nd - 1]:
        raise RuntimeError("Expect _random_samples.size(1) equals to input channel size.")
    if samples.shape[2] != nd:
        raise RuntimeError(f"Expect _random_samples.size(2) equals to {nd}; got {samples.shape[2]}.")


def _fractional_max_pool(self, kernel_size, output_size, random_samples, nd):
    """Max pooling over windows of ``kernel_size`` whose starts each plane's random samples pick
    (``random_samples`` (N, C, nd), the input's dtype; for 2d, sample 0 is the width's and 1 the
    height's, for 3d they are in (T, H, W) order, as the CPU kernels read them)."""
    _check_fractional_samples(self, random_samples, nd)
    lead = self.ndim - nd
    if min(kernel_size) <= 0 and 0 not in output_size:
        # Neither ATen's meta nor its kernels check it: the CPU returns -inf with indices outside the
        # input (a window of no elements), which no caller can use.
        raise RuntimeError(
            f"fractional_max_pool{nd}d(): kernel_size must be greater than zero, but got {list(kernel_size)}; "
            "pass a positive kernel_size"
        )
    if 0 in output_size:  # no windows: an empty result, as the CPU's
        shape = (*self.shape[:lead], *output_size)
        return jnp.zeros(shape, self.dtype), jnp.zeros(shape, jnp.int64)
    sizes = self.shape[lead:]
    batched = lead == 2
    samples = random_samples[: self.shape[0]] if batched else random_samples[0]
    order = (1, 0) if nd == 2 else (0, 1, 2)  # the sample that each spatial dimension reads
    index = jnp.zeros((), jnp.int32)
    for dim in range(nd):
        starts = _fractional_starts(samples[..., order[dim]], sizes[dim], output_size[dim], kernel_size[dim])
        positions = starts[..., None, :] + jnp.arange(kernel_size[dim], dtype=jnp.int32)[:, None]
        shape = list(samples.shape[:-1]) + [1] * (2 * nd)
        shape[lead + dim], shape[lead + nd + dim] = kernel_size[dim], output_size[dim]
        index = index * sizes[dim] + positions.reshape(shape)
    index = index.reshape(*self.shape[:lead], math.prod(kernel_size), *output_size)
    flat = self.reshape(*self.shape[:lead], math.prod(sizes))
    windows = index.reshape(*self.shape[:lead], math.prod(index.shape[lead:]))
    values = jnp.take_along_axis(flat, windows, axis=lead).reshape(index.shape)
    maximum, chosen = _select_max(values, jnp.ones((), bool), index, axis=lead)
    return maximum, chosen.astype(jnp.int64)


@lowering(aten.fractional_max_pool2d.default)
def fractional_max_pool2d(self, kernel_size, output_size, random_samples):
    """torch.nn.functional.fractional_max_pool2d(return_indices=True): (values, flat indices
    ``h * W + w``), windows placed by ``random_samples`` as the CPU kernel places them."""
    return _fractional_max_pool(self, tuple(kernel_size), tuple(output_size), random_samples, 2)


@lowering(aten.fractional_max_pool3d.default)
def fractional_max_pool3d(self, kernel_size, output_size, random_samples):
    """torch.nn.functional.fractional_max_pool3d(return_indices=True): indices ``(t * H + h) * W + w``."""
    return _fractional_max_pool(self, tuple(kernel_size), tuple(output_size), random_samples, 3)


@lowering(aten.fractional_max_pool2d_backward.default, dtype_rule=_long_indices)
def fractional_max_pool2d_backward(grad_output, self, kernel_size, output_size, indices):
    """Backward of fractional_max_pool2d: gradients scattered to the indexed input elements."""
    _check_plane_indices(indices, self.shape, 2)
    return _scatter_to_planes(grad_output, indices, self.shape, 2)


@lowering(aten.fractional_max_pool3d_backward.default, dtype_rule=_long_indices)
def fractional_max_pool3d_backward(grad_output, self, kernel_size, output_size, indices):
    """Backward of fractional_max_pool3d."""
    _check_plane_indices(indices, self.shape, 3)
    return _scatter_to_planes(grad_output, indices, self.shape, 3)
