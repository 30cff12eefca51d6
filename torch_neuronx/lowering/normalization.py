"""Normalizations: layer norm, batch norm (every ATen form), group norm, and their backward ops.

Statistics are computed in float32 for 16-bit inputs (PyTorch DEFAULT promotion; mixed inputs such
as bfloat16 activations with float32 weights and running stats compute in float32 too) with the
two-pass variance, mean((x - mean)^2). Results take the dtypes of PyTorch's meta kernels, so
``mean``/``rstd`` have the shapes and dtypes PyTorch gives them. Backward formulas follow
``torch/_decomp/decompositions.py`` (the same algebra as the CPU kernels).

Operand dtypes follow the CPU's rule (ATen's ``native/mixed_data_type.h``, used by its layer, group
and batch norm kernels): the parameters (weight, bias, running statistics) are all of the input's
dtype, or, "mixed", all float32 with a 16-bit input; anything else raises the CPU's error.

Batch norm's running statistics: ``_native_batch_norm_legit_functional`` and
``_batch_norm_with_update_functional`` return the new running mean and (unbiased) running variance
after the op's outputs; the eager layer writes them into the module's buffers for the mutating
overloads that PyTorch computes through those functional forms.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import torch

from torch_neuronx._compat.torch_internals import suggest_memory_format
from torch_neuronx.lowering.fused_multiply_add import (
    contracted_in_float64,
    contracted_multiply_add,
    cpu_kernels_contract,
    flushed_fused_multiply_add,
)
from torch_neuronx.lowering.pointwise import true_divide
from torch_neuronx.lowering.promotion import c10_rounding, opmath_dtype
from torch_neuronx.lowering.registry import DECOMPOSED_DTYPE_RULES, Promotion, lowering, same_dtype
from torch_neuronx.lowering.rowwise_moments import rowwise_moments
from torch_neuronx.runtime.dtypes import aten_name
from torch_neuronx.runtime.host_threads import cpu_thread_count

aten = torch.ops.aten


def _cpu_parameter_rule(*parameters: str):
    """The ``dtype_rule`` of a normalization whose input is ``input`` and whose ``parameters`` are
    named: when the first parameter given has the input's dtype, every parameter must (the CPU's
    kernel reads them as that type: "expected scalar type Float but found BFloat16"); otherwise the
    call is mixed, and the parameters must all be float32 and the input 16-bit (ATen's
    ``check_mixed_data_type``)."""

    def rule(arguments: dict) -> None:
        data = arguments["input"]
        given = [arguments[name] for name in parameters if isinstance(arguments.get(name), torch.Tensor)]
        if not given:
            return
        if given[0].dtype == data.dtype:
            for parameter in given:
                if parameter.dtype != data.dtype:
                    raise RuntimeError(
                        f"expected scalar type {aten_name(data.dtype)} but found {aten_name(parameter.dtype)}"
                    )
            return
        if any(parameter.dtype != torch.float32 for parameter in given):
            raise RuntimeError(
                "mixed dtype (neuron): expect parameter to have scalar type of Float (a 16-bit input may take "
                "float32 weights, bias and running statistics; convert them with .float() or to the input's dtype)"
            )
        if data.dtype not in (torch.bfloat16, torch.float16):
            raise RuntimeError("mixed dtype (neuron): expect input to have scalar type of BFloat16 or Half")

    return rule


LAYER_NORM_RULE = _cpu_parameter_rule("weight", "bias")
_BATCH_NORM_RULE = _cpu_parameter_rule("weight", "bias", "running_mean", "running_var")


def _sum(x, axes):
    return jnp.sum(x, axis=axes) if axes else x


# --- layer norm -------------------------------------------------------------------------------


def _reciprocal_sqrt(x, rounded=lambda value: value):
    """``1 / sqrt(x)`` with the square root rounded first (by ``rounded`` too: a 16-bit tensor's
    ``at::sqrt``), as the CPU kernels' ``1 / std::sqrt(x)`` rounds it; XLA would fold it into its
    rsqrt, an ulp off in 40% of float32 values."""
    return 1 / jax.lax.optimization_barrier(rounded(jnp.sqrt(x)))


@lowering(
    aten.native_layer_norm.default,
    promotion=Promotion.DEFAULT,
    uncast=("input", "weight", "bias"),
    dtype_rule=LAYER_NORM_RULE,
)
def native_layer_norm(input, normalized_shape, weight, bias, eps):
    """F.layer_norm over the trailing ``normalized_shape`` dimensions: (x - mean) * rstd * weight +
    bias with the biased variance; also returns mean and rstd = 1/sqrt(var + eps), shaped like the
    input with the normalized dimensions kept as 1 (PyTorch's meta shapes).

    The statistics are the CPU's ``RowwiseMoments`` to the bit (lowering/rowwise_moments.py) and
    rstd its ``1 / std::sqrt(var + eps)``. A float32 input's output is the CPU's
    ``LayerNormSecondPass``: ``(x - mean) * rstd * weight + bias``, the last product and sum
    contracted where its kernels contract them (the vectorised loop, weight and bias both given; the
    scalar loop with a bias only, where the weight of 1 leaves ``(x - mean) * rstd + bias``); with
    no bias, the scalar loop's ``+ 0`` turns -0.0 into 0.0 (fitted against torch 2.13's CPU: every
    element equal, 1 to 1,027 elements a row, each dtype and parameter combination). A 16-bit
    input computes as the CPU's ``layer_norm_kernel_mixed_type`` (layer_norm_kernel.cpp): ``(x *
    rstd - rstd * mean) * weight + bias`` in float32, rounded once, and, where the parameters share
    the input's dtype (or there are none), the saved mean and rstd stored in that dtype, as its
    kernel stores them (their dtype stays float32, as PyTorch's meta kernel and CUDA have it); the
    backward reads them as the CPU's does."""
    kept = input.ndim - len(normalized_shape)
    dtype, compute = input.dtype, opmath_dtype(input.dtype)
    parameters_in_dtype = all(p is None or p.dtype == dtype for p in (weight, bias))
    input, weight, bias = (None if t is None else t.astype(compute) for t in (input, weight, bias))
    statistics_shape = input.shape[:kept] + (1,) * len(normalized_shape)
    rows = input.reshape(math.prod(input.shape[:kept]), math.prod(input.shape[kept:]))
    mean, variance = rowwise_moments(rows, dtype)
    mean, variance = mean.reshape(statistics_shape), variance.reshape(statistics_shape)
    rstd = _reciprocal_sqrt(variance + eps)
    if dtype not in (jnp.bfloat16, jnp.float16):
        if weight is None and bias is not None:  # the loop without gamma: (x - mean) * rstd + beta
            return _contracted_at_run_time(input - mean, rstd, bias), mean, rstd
        out = (input - mean) * rstd
        if weight is not None and bias is not None:
            return _contracted_at_run_time(out, weight, bias), mean, rstd
        if weight is not None:
            out = out * weight
        return jnp.where(out == 0, 0, out), mean, rstd  # + 0: -0.0 is 0.0
    out = flushed_fused_multiply_add(input, rstd, -rstd * mean)
    if parameters_in_dtype:
        mean, rstd = (c10_rounding(dtype)(s) for s in (mean, rstd))
    if weight is not None:
        out = flushed_fused_multiply_add(out, weight, 0 if bias is None else bias)
    elif bias is not None:
        out = out + bias
    if bias is None:  # the kernel's + beta of 0: -0.0 is 0.0 (XLA folds x + 0)
        out = jnp.where(out == 0, 0, out)
    return out, mean, rstd


@lowering(
    aten.native_layer_norm_backward.default,
    promotion=Promotion.DEFAULT,
    uncast=("input", "weight", "bias"),
    static=("output_mask",),
)
def native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask):
    """Gradients of F.layer_norm with respect to (input, weight, bias), each only where
    ``output_mask`` asks for it and the parameter exists (None otherwise, as PyTorch returns).

    A 16-bit input's gradient is the CPU's ``layer_norm_backward_frame``: ``a * dy * weight + b * x
    + c`` with a = rstd, b = (db * mean - ds) * a^3 / N, c = -b * mean - db * a / N from the row
    sums ds = sum(dy * x * weight), db = sum(dy * weight), in float32 and rounded once (with the
    forward's 16-bit statistics, float32 once differed by up to 20 times tolerance). With
    parameters of the input's 16-bit dtype, the weight and bias gradients sum as the CPU's do
    (:func:`_sum_rows_per_thread`)."""
    axis = input.ndim - len(normalized_shape)
    inner = tuple(range(axis, input.ndim))
    outer = tuple(range(axis))
    count = math.prod(input.shape[axis:])
    dtype = input.dtype
    in_16_bit = dtype in (jnp.bfloat16, jnp.float16)
    per_thread = in_16_bit and all(p is None or p.dtype == dtype for p in (weight, bias))
    weight, bias = (None if p is None else p.astype(grad_out.dtype) for p in (weight, bias))
    input = input.astype(grad_out.dtype)
    if dtype == jnp.float32 and grad_out.dtype == jnp.float32:
        return _float32_layer_norm_backward(grad_out, input, axis, mean, rstd, weight, bias, output_mask)
    x_hat = (input - mean) * rstd
    grad_input = grad_weight = grad_bias = None
    if output_mask[0] and in_16_bit:
        scaled = grad_out * weight if weight is not None else grad_out
        ds = jnp.sum(scaled * input, axis=inner, keepdims=True)
        db = jnp.sum(scaled, axis=inner, keepdims=True)
        scale = jnp.float32(1 / count)
        b = (db * mean - ds) * rstd * rstd * rstd * scale
        c = -b * mean - db * rstd * scale
        grad_input = rstd * grad_out * (weight if weight is not None else 1) + b * input + c
    elif output_mask[0]:
        grad_x_hat = grad_out * weight if weight is not None else grad_out
        grad_input = (rstd / count) * (
            count * grad_x_hat
            - jnp.sum(grad_x_hat, axis=inner, keepdims=True)
            - x_hat * jnp.sum(grad_x_hat * x_hat, axis=inner, keepdims=True)
        )
    total = functools.partial(_sum_rows_per_thread, dtype=dtype, rows=axis) if per_thread else lambda t: _sum(t, outer)
    if output_mask[1] and weight is not None:
        grad_weight = total(grad_out * x_hat)
    if output_mask[2] and bias is not None:
        grad_bias = total(grad_out)
    return grad_input, grad_weight, grad_bias


def _float32_layer_norm_backward(grad_out, input, axis, mean, rstd, weight, bias, output_mask):
    """Float32 layer norm gradients as the CPU's ``layer_norm_backward_frame`` computes them, row by
    row: ``ds = sum(dy * x * weight)`` and ``db = sum(dy * weight)`` by :func:`_lane_sums` (its
    vectorised reductions), ``b = (db * mean - ds) * a * a * a / N`` and ``c = -b * mean - db * a /
    N`` (a = rstd), ``dx = a * dy * weight + b * x + c``; the weight and bias gradients in a float32
    buffer per thread (:func:`_thread_buffers`), ``buffer + dy * (a * x - a * mean)``, then the
    buffers added in thread order; each product and sum contracted where the CPU's build contracts
    it."""
    rows, count = math.prod(input.shape[:axis]), math.prod(input.shape[axis:])
    x, dy = input.reshape(rows, count), grad_out.reshape(rows, count)
    a, mean = rstd.reshape(rows, 1), mean.reshape(rows, 1)
    w = None if weight is None else weight.reshape(1, count)
    grad_input = grad_weight = grad_bias = None
    if output_mask[0]:
        if w is None:
            ds = _lane_sums(dy * x, fused_tail=(dy, x))
            db = _lane_sums(dy)
        else:
            scaled = dy * x
            ds = _lane_sums(scaled * w, fused_tail=(scaled, jnp.broadcast_to(w, scaled.shape)))
            db = _lane_sums(dy * w, fused_tail=(dy, jnp.broadcast_to(w, dy.shape)))
        ds, db = ds[:, None], db[:, None]
        scale = np.float32(1) / np.float32(count)
        b = contracted_multiply_add(db, mean, -ds) * a * a * a * scale
        c = contracted_multiply_add(-b, mean, -(db * a * scale))
        weighted = a * dy if w is None else a * dy * w
        grad_input = (contracted_in_float64(b, x, weighted) + c).reshape(input.shape)
    if (output_mask[1] and weight is not None) or (output_mask[2] and bias is not None):
        normalized = contracted_in_float64(a, x, -a * mean)

        def accumulate(buffers, row):
            return _contracted_at_run_time(row[0], row[1], buffers[0]), buffers[1] + row[0]

        gamma_buffers, beta_buffers = _thread_buffers((dy, normalized), 1, accumulate)

        def in_thread_order(buffers):
            total = jnp.where(buffers[0] == 0, 0, buffers[0])  # 0 + buffer: -0.0 is 0.0 (XLA folds x + 0)
            for thread in range(1, buffers.shape[0]):
                total = total + buffers[thread]
            return total.reshape(input.shape[axis:])

        if output_mask[1] and weight is not None:
            grad_weight = in_thread_order(gamma_buffers)
        if output_mask[2] and bias is not None:
            grad_bias = in_thread_order(beta_buffers)
    return grad_input, grad_weight, grad_bias


def _sum_rows_per_thread(values, dtype, rows: int):
    """The sum over the leading ``rows`` dims of ``values`` as the CPU's 16-bit layer norm backward
    sums its weight and bias gradients (layer_norm_kernel.cpp): each thread's chunk of rows
    (:func:`_thread_buffers`) added in order into its own 16-bit buffer, each addition rounded; the
    buffers then summed in float32, in thread order, and rounded. (Fitted at 1, 2 and 3 threads;
    float32 rounded once differed in most elements.)"""
    rounded = c10_rounding(dtype)
    buffers = _thread_buffers(values, rows, lambda buffer, row: rounded(buffer + row))
    total = buffers[0]
    for thread in range(1, buffers.shape[0]):
        total = total + buffers[thread]
    return rounded(total)


def _thread_buffers(values, rows: int, accumulate):
    """The float32 buffers, one per thread, into which a CPU kernel's ``at::parallel_for`` over the
    M rows of ``values`` (its leading ``rows`` dims flattened) folds them: each of ``min(threads,
    M)`` threads takes an equal chunk of rows and folds it in order, ``buffer = accumulate(buffer,
    row)`` from zeros. Shape (threads, *trailing). The thread count is the main thread's
    (``runtime.host_threads.cpu_thread_count``) when the call is compiled, as ``arange`` reads it.

    ``values`` may be a tuple of arrays with the same leading dims, folded together: ``row`` and
    ``buffer`` are then tuples, and so is the result. The loop carries them as separate arrays:
    stacked into one, each iteration's concatenation compiled to scalar code (the channels-last
    float32 batch norm backward's loop took 4x as long)."""
    leaves = values if isinstance(values, tuple) else (values,)
    count = math.prod(leaves[0].shape[:rows])
    threads = max(min(cpu_thread_count(), count), 1)
    chunk = -(-count // threads)
    padding = threads * chunk - count
    present = (jnp.arange(threads * chunk) < count).reshape(threads, chunk)

    def by_thread(leaf):
        trailing = leaf.shape[rows:]
        flat = leaf.astype(jnp.float32).reshape(-1, *trailing)
        return jnp.pad(flat, [(0, padding)] + [(0, 0)] * len(trailing)).reshape(threads, chunk, *trailing)

    split = tuple(by_thread(leaf) for leaf in leaves)
    pack = (lambda parts: parts) if isinstance(values, tuple) else (lambda parts: parts[0])
    unpack = (lambda packed: packed) if isinstance(values, tuple) else (lambda packed: (packed,))

    def step(i, buffers):
        folded = unpack(accumulate(pack(buffers), pack(tuple(leaf[:, i] for leaf in split))))
        if not padding:
            return folded
        keep = present[:, i]  # rows past the end leave their thread's buffer
        pairs = zip(folded, buffers, strict=True)
        return tuple(jnp.where(keep.reshape((threads,) + (1,) * (f.ndim - 1)), f, b) for f, b in pairs)

    initial = tuple(jnp.zeros((threads, *leaf.shape[rows:]), jnp.float32) for leaf in leaves)
    return pack(jax.lax.fori_loop(0, chunk, step, initial))


# --- batch norm -------------------------------------------------------------------------------


def _per_channel(input) -> int:
    """The elements of an (N, C, *) input per channel (0 for an input with no channels, whose
    statistics are empty)."""
    return input.size // input.shape[1] if input.shape[1] else 0


def _channel_shape(input) -> tuple[int, ...]:
    """Shape that broadcasts a per-channel vector against an (N, C, *) input."""
    return (1, input.shape[1]) + (1,) * (input.ndim - 2)


def _reduction_axes(input) -> tuple[int, ...]:
    return (0, *range(2, input.ndim))


def _accurate_mean(input, axes):
    """The mean over ``axes``, corrected by a second pass over the deviations from the first.

    The CPU's batch norm sums float32 statistics in float64 (ATen's ``acc_type`` on the CPU); a
    float32 sum of values far larger than their spread loses the mean's low bits, which the
    centered values then carry (activations at 100 with a spread of 0.01: 1e-3 off the CPU's). The
    deviations' mean is small and summed accurately, so adding it back recovers those bits.
    """
    first = jnp.mean(input, axis=axes, keepdims=True)
    return (first + jnp.mean(input - first, axis=axes, keepdims=True)).reshape(-1)


#: Batch norm's tensor arguments: they reach the training lowerings in their own dtypes (so that a
#: 16-bit input with 16-bit parameters can be computed as the CPU computes it).
_BATCH_NORM_TENSORS = ("input", "weight", "bias", "running_mean", "running_var")


def _dense(meta) -> bool:
    """Normalization.cpp's ``is_contiguous``: contiguous, channels-last or channels-last-3d."""
    formats = {4: torch.channels_last, 5: torch.channels_last_3d}
    return meta.is_contiguous() or (meta.dim() in formats and meta.is_contiguous(memory_format=formats[meta.dim()]))


def _plane_kernel(meta) -> bool:
    """Whether ATen's vectorised batch norm kernels take a dense input plane by plane (their
    contiguous kernels) rather than position by position (their channels-last kernels): a
    contiguous input with more than one element per plane; "NC11 is also channels last"
    (batch_norm_kernel.cpp), as is a channels-last input."""
    return meta.is_contiguous() and meta.numel() // max(meta.shape[0] * meta.shape[1], 1) != 1


def _cpu_collects_stats_fast(metas) -> bool:
    """Whether ATen's CPU batch norm sums the batch statistics with its vectorised kernel (the input
    dense, :func:`_dense`), rather than its TensorIterator path (``metas``: the arguments' metas)."""
    return _dense(metas[0])


def _cpu_transforms_fast(metas) -> bool:
    """Whether ATen's CPU batch norm computes the output with its vectorised kernel: the input dense
    and the weight, bias and running statistics contiguous; else its TensorIterator path, which
    rounds each 16-bit step (``batch_norm_cpu_transform_input_template``)."""
    return _dense(metas[0]) and all(p is None or p.is_contiguous() for p in metas[1:5])


def _in_the_cpus_16_bit_kernels(tensors) -> bool:
    """Whether the CPU computes a batch norm of these tensors (input, weight, bias, running_mean,
    running_var) in its 16-bit kernels: all of one 16-bit dtype (else float32, as mixed calls)."""
    dtype = tensors[0].dtype
    return dtype in (jnp.bfloat16, jnp.float16) and all(t is None or t.dtype == dtype for t in tensors)


#: The registry options of the batch norm forward lowerings: tensors in their own dtypes, the layout
#: in ``metas`` (the CPU's kernel for 16-bit tensors depends on both). Each also keeps ``eps``
#: static: a runtime scalar is promoted to float32, and ATen's InvStd adds the double ``eps``
#: (1e-5 in float32 moved an invstd by an ulp in a channel of 64).
_BATCH_NORM_OPTIONS = {
    "promotion": Promotion.DEFAULT,
    "uncast": _BATCH_NORM_TENSORS,
    "dtype_rule": _BATCH_NORM_RULE,
    "metas": True,
}


def _batch_norm_in_training(input, weight, bias, running_mean, running_var, momentum, eps, metas):
    """Training batch norm of arguments in their own dtypes (``_BATCH_NORM_TENSORS`` uncast): the
    CPU's kernels where the input and its parameters are all bfloat16, all float16 or all float32
    (the statistics and the output each from its vectorised kernel or its generic path, as the
    layouts ``metas`` show pick them), or a 16-bit input with float32 parameters in a dense layout
    (:func:`_mixed_batch_stats`); else :func:`_batch_norm` in the computation dtype. (output,
    save_mean, save_invstd, new_running_mean, new_running_var)."""
    tensors = (input, weight, bias, running_mean, running_var)
    if _in_the_cpus_16_bit_kernels(tensors):
        if not _cpu_collects_stats_fast(metas):
            stats = _generic_16_bit_batch_stats
        else:
            stats = _bfloat16_batch_stats if input.dtype == jnp.bfloat16 else _float16_batch_stats
        running = [None if t is None else t.astype(jnp.float32) for t in (running_mean, running_var)]
        mean, invstd, new_mean, new_var = stats(input.astype(jnp.float32), input.dtype, *running, momentum, eps)
        transform = _vectorised_output if _cpu_transforms_fast(metas) else _generic_output
        return transform(input, weight, bias, mean, invstd), mean, invstd, new_mean, new_var
    if input.dtype == jnp.float32 and all(t is None or t.dtype == jnp.float32 for t in tensors):
        if _cpu_collects_stats_fast(metas):
            stats = _float32_batch_stats(input, running_mean, running_var, momentum, eps, _plane_kernel(metas[0]))
        else:
            stats = _float32_generic_batch_stats(input, running_mean, running_var, momentum, eps)
        transform = _vectorised_output if _cpu_transforms_fast(metas) else _generic_output
        return (transform(input, weight, bias, *stats[:2]), *stats)
    mixed = input.dtype in (jnp.bfloat16, jnp.float16) and all(t is None or t.dtype == jnp.float32 for t in tensors[1:])
    if mixed and _cpu_collects_stats_fast(metas) and input.size:  # an empty input has no sums to order
        stats = _mixed_batch_stats(input, running_mean, running_var, momentum, eps, _plane_kernel(metas[0]))
        if _cpu_transforms_fast(metas):
            return (_vectorised_output(input, weight, bias, *stats[:2]), *stats)
        return (_generic_output(input, weight, bias, *stats[:2], in_float32=True), *stats)
    compute = opmath_dtype(input.dtype)
    tensors = (None if t is None else t.astype(compute) for t in tensors)
    return _batch_norm(*tensors, True, momentum, eps)


def _float32_batch_stats(x, running_mean, running_var, momentum, eps, contiguous: bool):
    """Batch statistics of a dense float32 input as the CPU's kernels compute them
    (batch_norm_kernel.cpp, Normalization.cpp): (save_mean, save_invstd, new_running_mean,
    new_running_var).

    A contiguous input's sums are float64 (ATen's ``acc_type`` of float); a channels-last one's are
    float32 buffers, one per thread's chunk of rows (:func:`_thread_buffers`), the squared
    deviations added with a fused multiply-add, the buffers then summed in float64. The mean
    rounds to float32 and the squared deviations from it are float32; invstd =
    ``1 / sqrt(var_sum / n + eps)`` in float64 from the float32 quotient (0 where var and eps are
    0, ATen's ``InvStd``); the running statistics move in float32 (the variance's momentum term in
    float64). Float32 sums in XLA's order differed from the CPU's in 60-70% of output elements."""
    axes, shape, wide = _reduction_axes(x), _channel_shape(x), jnp.float64
    count = _per_channel(x)
    if contiguous:
        mean = true_divide(jnp.sum(x.astype(wide), axis=axes), jnp.float64(count)).astype(jnp.float32)
        deviations = x - mean.reshape(shape)
        var_sum = jnp.sum((deviations * deviations).astype(wide), axis=axes).astype(jnp.float32)
    else:
        mean, var_sum = _channels_last_moments(x, jnp.float64)
    return _from_sums(mean, var_sum, count, running_mean, running_var, momentum, eps, wide_running_var=True)


def _float32_generic_batch_stats(x, running_mean, running_var, momentum, eps):
    """Batch statistics of a float32 input neither contiguous nor channels-last, as
    ``batch_norm_cpu_update_stats_template``'s TensorIterator path computes them: the mean is
    ``at::mean`` (a float32 sum divided by n; taken here as the exact sum rounded), the squared
    deviations from it summed in float64, invstd and the running statistics in float64, each
    rounded to float32 once."""
    axes, shape, wide = _reduction_axes(x), _channel_shape(x), jnp.float64
    count = _per_channel(x)
    total = jnp.sum(x.astype(wide), axis=axes).astype(jnp.float32)
    mean = true_divide(total, jnp.float32(count))
    deviations = x.astype(wide) - mean.astype(wide).reshape(shape)
    var_sum = jnp.sum(deviations * deviations, axis=axes)
    var = true_divide(var_sum, jnp.float64(count))
    invstd = _invstd(var, eps).astype(jnp.float32)
    momentum = jnp.asarray(momentum, wide)
    new_mean = new_var = None
    if running_mean is not None:
        new_mean = (momentum * mean + (1 - momentum) * running_mean.astype(wide)).astype(jnp.float32)
    if running_var is not None:
        unbiased = true_divide(var_sum, jnp.float64(count - 1))
        new_var = (momentum * unbiased + (1 - momentum) * running_var.astype(wide)).astype(jnp.float32)
    return mean, invstd, new_mean, new_var


def _in_thread_order(buffers, dtype=jnp.float64):
    """Per-thread float32 buffers summed in ``dtype`` from 0, thread by thread (float64: ATen's
    ``acc_type`` of float; float32 for 16-bit inputs)."""
    total = jnp.zeros(buffers.shape[1:], dtype)
    for thread in range(buffers.shape[0]):
        total = total + buffers[thread]
    return total


#: Elements of a 16-bit vector in ATen's AVX2 kernels (two float32 vectors of 8 lanes).
_HALF_VECTOR = 16


def _mixed_channel_sums(planes, factor=None, fused_leftovers=True):
    """Per-channel sums of (N, C, P) float32 ``planes`` (16-bit values) as ATen's CPU kernels for
    16-bit inputs add them in float32 (``batch_norm_cpu_collect_stats_contiguous_internal``, the
    backward's ``batch_norm_cpu_backward_contiguous_internal``): each plane's 16-element vectors
    feed 8 float32 lanes, their two halves in turn, plane after plane; each plane's leftover
    elements go, in order, into one float32 scalar; the result is that scalar plus the lanes' sum,
    taken lane by lane (its ``vec_reduce_all`` with a size). With ``factor`` (of ``planes``' shape)
    the terms are the products ``planes * factor``, each added with one rounding as its compiler
    contracts them (the leftovers only if ``fused_leftovers``: its bfloat16 build keeps them
    apart)."""
    batch, channels, count = planes.shape
    whole = count - count % _HALF_VECTOR

    def halves_of(values):
        return jnp.moveaxis(values[:, :, :whole].reshape(batch, channels, whole // 8, 8), 1, 2).reshape(-1, channels, 8)

    def leftovers_of(values):
        return jnp.moveaxis(values[:, :, whole:], 1, 2).reshape(-1, channels)

    def folded(terms, factors, fused):
        if not len(terms):
            return jnp.zeros(terms.shape[1:], jnp.float32)

        def step(i, acc):
            if factors is None:
                return acc + terms[i]
            return _contracted_at_run_time(terms[i], factors[i], acc) if fused else acc + terms[i] * factors[i]

        return jax.lax.fori_loop(0, len(terms), step, jnp.zeros(terms.shape[1:], jnp.float32))

    has_factor = factor is not None
    lanes = folded(halves_of(planes), halves_of(factor) if has_factor else None, True)
    total = folded(leftovers_of(planes), leftovers_of(factor) if has_factor else None, fused_leftovers)
    reduced = lanes[:, 0]
    for lane in range(1, 8):
        reduced = reduced + lanes[:, lane]
    return total + reduced


def _mixed_batch_stats(x, running_mean, running_var, momentum, eps, contiguous: bool):
    """Batch statistics of a dense 16-bit input with float32 parameters (a "mixed" call, as under
    autocast) as the CPU's kernels compute them: float32 sums (ATen's ``acc_type`` of a 16-bit
    type), by :func:`_mixed_channel_sums` for a contiguous input, in a float32 buffer per thread
    for a channels-last one (squared deviations fused there), the buffers added in float32; invstd
    ``1 / sqrt(var + eps)`` in float64 from the float32 variance; the running statistics in
    float32. (save_mean, save_invstd, new_running_mean, new_running_var)."""
    x = x.astype(jnp.float32)
    channels = x.shape[1]
    count = _per_channel(x)
    if contiguous:
        planes = x.reshape(x.shape[0], channels, -1)
        mean = true_divide(_mixed_channel_sums(planes), jnp.float32(count))
        deviations = planes - mean[:, None]
        var_sum = _mixed_channel_sums(deviations * deviations)
    else:
        mean, var_sum = _channels_last_moments(x, jnp.float32)
    return _from_sums(mean, var_sum, count, running_mean, running_var, momentum, eps, wide_running_var=False)


def _from_sums(mean, var_sum, count, running_mean, running_var, momentum, eps, *, wide_running_var):
    """(save_mean, save_invstd, new_running_mean, new_running_var) from float32 batch sums as
    ``batch_norm_cpu_update_stats_template`` makes them: invstd from ``var_sum / n`` (ATen's
    InvStd), the running mean in float32 with the momentum as float32, the running variance from
    ``var_sum / (n - 1)`` (NaN for one value per channel) with its momentum term in float64 where
    ``wide_running_var`` (float's ``acc_type``; float32 for 16-bit inputs)."""
    invstd = _invstd(true_divide(var_sum, jnp.float32(count)), eps)
    momentum = jnp.asarray(momentum, jnp.float32)
    new_mean = new_var = None
    if running_mean is not None:
        new_mean = momentum * mean + (1 - momentum) * running_mean
    if running_var is not None:
        unbiased = true_divide(var_sum, jnp.float32(count - 1))
        kept = (1 - momentum) * running_var
        if wide_running_var:
            unbiased, momentum, kept = (t.astype(jnp.float64) for t in (unbiased, momentum, kept))
        new_var = (momentum * unbiased + kept).astype(jnp.float32)
    return mean, invstd, new_mean, new_var


def _channels_last_moments(x, total_dtype):
    """(mean, sum of squared deviations) per channel of a float32 ``x`` as ATen's channels-last
    statistics kernels compute them: a float32 buffer per thread's chunk of positions
    (:func:`_thread_buffers`), the buffers added thread by thread in ``total_dtype`` (float64 for a
    float32 input, float32 for a 16-bit one), the mean rounded to float32, the squared deviations
    from it fused into the buffers."""
    count = _per_channel(x)
    rows = jnp.moveaxis(x, 1, -1).reshape(-1, x.shape[1])
    sums = _thread_buffers(rows, 1, lambda buffer, row: buffer + row)
    mean = true_divide(_in_thread_order(sums, total_dtype), jnp.asarray(count, total_dtype)).astype(jnp.float32)
    squares = _thread_buffers(rows, 1, lambda buffer, row: _squared_deviation_added(row - mean, buffer))
    return mean, _in_thread_order(squares, total_dtype).astype(jnp.float32)


def _squared_deviation_added(deviation, buffer):
    """``buffer + deviation * deviation`` as the CPU's vectorised builds contract it (one rounding)."""
    return _contracted_at_run_time(deviation, deviation, buffer)


def _contracted_at_run_time(a, b, c):
    """:func:`contracted_multiply_add` of float32 operands that vary at run time (a loop's rows, an
    input's elements): :func:`flushed_fused_multiply_add`, its cheaper form, where the CPU's kernels
    contract."""
    return flushed_fused_multiply_add(a, b, c) if cpu_kernels_contract() else a * b + c


def _batch_norm_in_evaluation(input, weight, bias, running_mean, running_var, momentum, eps, metas):
    """Evaluation batch norm of arguments in their own dtypes. Float32 and 16-bit inputs compute as
    the CPU's kernels for their layouts (:func:`_cpu_transforms_fast`): its vectorised kernel
    (:func:`_vectorised_output`, invstd = ``1 / sqrt(running_var + eps)`` in float32), or its generic
    path (:func:`_generic_output`, invstd from tensor ops in the parameters' dtype, each step
    rounded) where the parameters share the input's dtype; else :func:`_batch_norm` in the
    computation dtype."""
    tensors = (input, weight, bias, running_mean, running_var)
    if running_mean is not None and running_var is not None and input.dtype in _VECTORISED_DTYPES:
        mean, var = running_mean.astype(jnp.float32), running_var.astype(jnp.float32)
        if _cpu_transforms_fast(metas):
            invstd = _reciprocal_sqrt(var + eps)
            return _vectorised_output(input, weight, bias, mean, invstd), mean, invstd, mean, var
        if all(t is None or t.dtype == input.dtype for t in tensors):
            rounded = c10_rounding(input.dtype)
            invstd = rounded(_reciprocal_sqrt(rounded(var + eps), rounded))
            return _generic_output(input, weight, bias, mean, invstd), mean, invstd, mean, var
    compute = opmath_dtype(input.dtype)
    tensors = (None if t is None else t.astype(compute) for t in tensors)
    return _batch_norm(*tensors, False, momentum, eps)


#: The input dtypes whose evaluation follows the CPU's kernels (float64 computes exactly).
_VECTORISED_DTYPES = (jnp.float32, jnp.bfloat16, jnp.float16)


def _vectorised_output(input, weight, bias, mean, invstd):
    """The output of a batch norm as ATen's vectorised CPU kernel computes it for dense layouts
    (batch_norm_kernel.cpp; ``mean`` and ``invstd`` in float32: the running statistics in
    evaluation, the saved ones in training; any parameter dtype): alpha =
    invstd * weight, beta = bias - mean * alpha (fused where the bias is float32) and ``x * alpha +
    beta`` fused, rounded once to the input's dtype. Unfused (and with XLA's rsqrt), half of float32
    elements differed from the CPU's, and 16-bit ones where x sits at the running mean."""
    shape = _channel_shape(input)
    alpha = invstd if weight is None else invstd * weight.astype(jnp.float32)
    if bias is None or bias.dtype != jnp.float32:  # c10's 16-bit operator- keeps the product apart
        beta = (0 if bias is None else bias.astype(jnp.float32)) - mean * alpha
    else:
        beta = contracted_multiply_add(-mean, alpha, bias)
    out = contracted_multiply_add(input.astype(jnp.float32), alpha.reshape(shape), beta.reshape(shape))
    return c10_rounding(input.dtype)(out)


def _generic_output(input, weight, bias, mean, invstd, *, in_float32=False):
    """``((x - mean) * invstd) * weight + bias`` in the input's arithmetic (c10's for 16-bit
    inputs; float32 with float32 parameters, ``in_float32``), each operation rounded, unfused:
    ``batch_norm_cpu_transform_input_template``'s TensorIterator path, for layouts its vectorised
    kernel does not take (whose rounding differed in a quarter to a half of the 16-bit elements, a
    third of float32 ones)."""
    rounded = c10_rounding(jnp.float32 if in_float32 else input.dtype)
    shape = _channel_shape(input)
    out = rounded(rounded(input.astype(jnp.float32) - mean.reshape(shape)) * invstd.reshape(shape))
    if weight is not None:
        out = rounded(out * weight.astype(jnp.float32).reshape(shape))
    if bias is None:  # the CPU adds a 0 all the same, which makes -0.0 (x at the mean) 0.0
        return jnp.where(out == 0, jnp.zeros_like(out), out)
    return rounded(out + bias.astype(jnp.float32).reshape(shape))


def _bfloat16_batch_stats(x, dtype, running_mean, running_var, momentum, eps):
    """Batch statistics as the CPU's bfloat16 kernels round them: the mean and the sum of squared
    deviations (from the float32 mean) stored as bfloat16, the variance ``var_sum / n`` and the
    unbiased ``var_sum / (n - 1)`` divided in bfloat16 (c10's ``operator/(BFloat16, int64_t)``
    converts n), invstd = 1 / sqrt(var + eps) rounded; the running statistics move with momentum,
    1 - momentum and each product and sum rounded to bfloat16."""
    rounded = c10_rounding(dtype)
    axes, shape = _reduction_axes(x), _channel_shape(x)
    count = _per_channel(x)
    mean = jnp.sum(x, axis=axes) / count
    save_mean = rounded(mean)
    var_sum = rounded(jnp.sum(jnp.square(x - mean.reshape(shape)), axis=axes))
    save_invstd = rounded(_invstd(rounded(true_divide(var_sum, _in_dtype(count, dtype))), eps))
    momentum = rounded(jnp.asarray(momentum, jnp.float32))
    keep = rounded(1 - momentum)
    new_mean = new_var = None
    if running_mean is not None:
        new_mean = rounded(rounded(momentum * save_mean) + rounded(keep * running_mean))
    if running_var is not None:
        unbiased = rounded(var_sum / _in_dtype(count - 1, dtype))
        new_var = rounded(momentum * unbiased + rounded(keep * running_var))
    return save_mean, save_invstd, new_mean, new_var


def _float16_batch_stats(x, dtype, running_mean, running_var, momentum, eps, *, running_from_rounded_mean=False):
    """Batch statistics as the CPU's float16 kernels round them: the mean rounded to float16, the
    variance summed in float32 from that rounded mean, invstd = 1 / sqrt(var_sum / n + eps) rounded;
    the running statistics move in wide arithmetic from the float32 mean and ``var_sum / (n - 1)``,
    rounded once (by the result's dtype). ``running_from_rounded_mean``: the running mean moves from
    the rounded mean, as ``batch_norm_cpu_update_stats_template``'s TensorIterator path (an input
    neither contiguous nor channels-last) moves it, in either 16-bit dtype
    (:data:`_generic_16_bit_batch_stats`)."""
    rounded = c10_rounding(dtype)
    axes, shape = _reduction_axes(x), _channel_shape(x)
    count = _per_channel(x)
    mean = jnp.sum(x, axis=axes) / count
    save_mean = rounded(mean)
    var_sum = jnp.sum(jnp.square(x - save_mean.reshape(shape)), axis=axes)
    save_invstd = rounded(_invstd(true_divide(var_sum, jnp.float32(count)), eps))
    new_mean = new_var = None
    if running_mean is not None:
        new_mean = momentum * (save_mean if running_from_rounded_mean else mean) + (1 - momentum) * running_mean
    if running_var is not None:
        new_var = momentum * (var_sum / (count - 1)) + (1 - momentum) * running_var
    return save_mean, save_invstd, new_mean, new_var


#: The statistics of the CPU's TensorIterator path: float16's, the running mean from the rounded mean.
_generic_16_bit_batch_stats = functools.partial(_float16_batch_stats, running_from_rounded_mean=True)


def _invstd(var, eps):
    """1 / sqrt(var + eps) of batch statistics in ``var``'s dtype, 0 where both are 0 (a constant
    channel with eps=0): ATen's ``InvStd`` functor, on the CPU and CUDA alike, so that the output
    is the bias, not NaN. The sum and root are float64's, as the functor adds its double eps (for
    float64 ``var`` too); XLA's float32 rsqrt was an ulp off in 40% of values."""
    wide = _reciprocal_sqrt(var.astype(jnp.float64) + eps).astype(var.dtype)
    return jnp.where((var == 0) & (eps == 0), jnp.zeros((), var.dtype), wide)


def _in_dtype(count: int, dtype):
    """A count converted to ``dtype`` and back to float32, as c10's 16-bit types convert an int."""
    return jnp.asarray(count, dtype).astype(jnp.float32)


def _batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    """Batch norm over every dimension but 1: (output, save_mean, save_invstd, new_running_mean,
    new_running_var).

    In training the batch statistics normalize the input (biased variance) and the running
    statistics move by ``momentum`` towards the batch mean and the unbiased batch variance, as
    PyTorch's kernels update them; a missing running statistic stays None. Otherwise the running
    statistics normalize and are returned unchanged; save_mean/save_invstd are then the running
    mean and its 1/sqrt(var + eps) (the shapes PyTorch's meta kernels report).
    """
    shape = _channel_shape(input)
    axes = _reduction_axes(input)
    new_mean, new_var = running_mean, running_var
    if training:
        mean = _accurate_mean(input, axes)
        centered = input - mean.reshape(shape)
        var = jnp.mean(centered * centered, axis=axes)
        invstd = _invstd(var, eps)
        count = _per_channel(input)
        if running_mean is not None:
            new_mean = (1 - momentum) * running_mean + momentum * mean
        if running_var is not None:
            # One value per channel: 0 * inf = NaN, as PyTorch's var_sum / (n - 1) gives.
            bessel = count / (count - 1) if count > 1 else math.inf
            new_var = (1 - momentum) * running_var + momentum * var * bessel
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("running_mean must be defined in evaluation mode")
        mean = running_mean
        invstd = jax.lax.rsqrt(running_var + eps)
        centered = input - mean.reshape(shape)
    out = centered * invstd.reshape(shape)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out, mean, invstd, new_mean, new_var


@lowering(
    aten._native_batch_norm_legit_functional.default,
    static=("training", "eps"),
    **_BATCH_NORM_OPTIONS,
)
def native_batch_norm_legit_functional(
    input, weight, bias, running_mean, running_var, training, momentum, eps, *, metas
):
    """Functional batch norm (what AOTAutograd and the eager layer use for the in-place running-stat
    update): (output, save_mean, save_invstd, new_running_mean, new_running_var)."""
    if training:
        return _batch_norm_in_training(input, weight, bias, running_mean, running_var, momentum, eps, metas)
    return _batch_norm_in_evaluation(input, weight, bias, running_mean, running_var, momentum, eps, metas)


@lowering(
    aten._native_batch_norm_legit.no_stats,
    static=("training", "eps"),
    **_BATCH_NORM_OPTIONS,
)
def native_batch_norm_legit_no_stats(input, weight, bias, training, momentum, eps, *, metas):
    """Batch norm without running statistics (``track_running_stats=False``): batch statistics;
    PyTorch requires ``training`` here, as evaluation needs running statistics."""
    if not training:
        return _batch_norm(input, weight, bias, None, None, training, momentum, eps)[:3]  # raises
    metas = [*metas[:3], None, None]  # no running statistics
    return _batch_norm_in_training(input, weight, bias, None, None, momentum, eps, metas)[:3]


@lowering(
    aten._native_batch_norm_legit_no_training.default,
    static=("eps",),
    **_BATCH_NORM_OPTIONS,
)
def native_batch_norm_legit_no_training(input, weight, bias, running_mean, running_var, momentum, eps, *, metas):
    """Inference batch norm with the running statistics: (output, running_mean, invstd)."""
    return _batch_norm_in_evaluation(input, weight, bias, running_mean, running_var, momentum, eps, metas)[:3]


def _empty_reserve():
    return jnp.zeros((0,), jnp.uint8)


@lowering(
    aten._batch_norm_with_update_functional.default,
    static=("eps",),
    **_BATCH_NORM_OPTIONS,
)
def batch_norm_with_update_functional(input, weight, bias, running_mean, running_var, momentum, eps, *, metas):
    """Training batch norm of the consolidated API: (output, save_mean, save_invstd, reserve,
    new_running_mean, new_running_var); the reserve is empty (no cuDNN workspace)."""
    out, mean, invstd, new_mean, new_var = _batch_norm_in_training(
        input, weight, bias, running_mean, running_var, momentum, eps, metas
    )
    return out, mean, invstd, _empty_reserve(), new_mean, new_var


@lowering(
    aten._batch_norm_no_update.default,
    static=("eps",),
    **_BATCH_NORM_OPTIONS,
)
def batch_norm_no_update(input, weight, bias, running_mean, running_var, momentum, eps, *, metas):
    """Inference batch norm of the consolidated API: (output, save_mean, save_invstd, reserve)."""
    out, mean, invstd, _, _ = _batch_norm_in_evaluation(
        input, weight, bias, running_mean, running_var, momentum, eps, metas
    )
    return out, mean, invstd, _empty_reserve()


def _cpu_takes_its_fast_backward(metas) -> bool:
    """``batch_norm_backward_cpu_template``'s ``all_contiguous`` for the metas of (grad_out, input):
    both contiguous or channels-last, in the same format; else its generic TensorIterator path."""
    grad_out, input = metas[:2]
    return _dense(grad_out) and _dense(input) and suggest_memory_format(grad_out) == suggest_memory_format(input)


#: The backward's tensor arguments, which reach it in their own dtypes.
_BATCH_NORM_BACKWARD_TENSORS = (
    "grad_out",
    "input",
    "weight",
    "running_mean",
    "running_var",
    "save_mean",
    "save_invstd",
)


@lowering(
    aten.native_batch_norm_backward.default,
    promotion=Promotion.DEFAULT,
    uncast=_BATCH_NORM_BACKWARD_TENSORS,
    static=("train", "eps", "output_mask"),
    metas=True,
)
def native_batch_norm_backward(
    grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, train, eps, output_mask, *, metas
):
    """Gradients of batch norm with respect to (input, weight, bias); weight and bias where
    ``output_mask`` asks, the input's always (PyTorch's meta kernel always returns it).

    In training the batch statistics (save_mean, save_invstd) depend on the input, which adds the
    mean and projection terms; otherwise the running statistics are constants. 16-bit arguments
    in a layout the CPU's vectorised kernel does not take follow its generic path
    (:func:`_batch_norm_backward_as_the_cpus_generic_16_bit_path`); the rest compute in float32.
    """
    arguments = (grad_out, input, weight, running_mean, running_var, save_mean, save_invstd)
    if _in_the_cpus_16_bit_kernels((input, grad_out, weight, running_mean, running_var)) and not (
        _cpu_takes_its_fast_backward(metas)
    ):
        return _batch_norm_backward_as_the_cpus_generic_16_bit_path(*arguments, train, eps, output_mask)
    parameters = (weight, running_mean, running_var, save_mean, save_invstd)
    sixteen_bit = input.dtype in (jnp.bfloat16, jnp.float16) and grad_out.dtype == input.dtype
    if (
        _cpu_takes_its_fast_backward(metas)
        and (train or (running_mean is not None and running_var is not None))
        and (
            all(t is None or t.dtype == jnp.float32 for t in arguments)
            or (sixteen_bit and all(t is None or t.dtype in (jnp.float32, input.dtype) for t in parameters))
        )
    ):
        if train:
            mean, invstd = (t.astype(jnp.float32) for t in (save_mean, save_invstd))
        else:
            mean = running_mean.astype(jnp.float32)
            invstd = _reciprocal_sqrt(running_var.astype(jnp.float64) + eps).astype(jnp.float32)
        if not _plane_kernel(metas[1]):
            backward = _channels_last_backward
        else:
            backward = _16_bit_contiguous_backward if sixteen_bit else _float32_contiguous_backward
        return backward(grad_out, input, weight, mean, invstd, train, output_mask)
    compute = opmath_dtype(input.dtype)
    arguments = (None if t is None else t.astype(compute) for t in arguments)
    return _batch_norm_backward(*arguments, train, eps, output_mask)


#: Float32 lanes of ATen's vectorised batch norm backward on the CPU (its AVX2 kernel, which the
#: AVX-512 capability runs too; the DEFAULT build's generic vectors hold as many).
_BACKWARD_LANES = 8


def _lane_sums(terms, fused_tail=None):
    """``vec::reduce_all`` (add) of each row of ``terms`` (float32, last axis), as ATen's vectorised
    CPU kernel sums it: under 8 terms, in order; else 8 lanes, each adding every 8th term in order
    (the leftover terms into the first lanes; ``fused_tail``: ``(a, b)`` whose products those
    leftovers are, added with one rounding as the compiler contracts ``map2_reduce_all``'s tail),
    then the lanes pairwise at distances 4, 2, 1 (its shuffle tree; in order in the DEFAULT
    build)."""
    count = terms.shape[-1]
    if count < _BACKWARD_LANES:
        total = terms[..., 0]
        for i in range(1, count):
            total = total + terms[..., i]
        return total
    whole = count - count % _BACKWARD_LANES
    chunks = terms[..., :whole].reshape(*terms.shape[:-1], whole // _BACKWARD_LANES, _BACKWARD_LANES)
    # Vector by vector, each vector's rows contiguous: sliced along a middle axis, each step gathered
    # its elements one by one (layer norm's input gradient took 5x as long).
    by_vector = jnp.moveaxis(chunks, -2, 0)
    lanes = jax.lax.fori_loop(1, by_vector.shape[0], lambda j, acc: acc + by_vector[j], by_vector[0], unroll=8)
    leftover = count - whole
    if leftover:
        if fused_tail is None:
            tail = lanes[..., :leftover] + terms[..., whole:]
        else:
            a, b = (t[..., whole:] for t in fused_tail)
            tail = contracted_multiply_add(a, b, lanes[..., :leftover])
        lanes = jnp.concatenate([tail, lanes[..., leftover:]], axis=-1)
    if not cpu_kernels_contract():  # the DEFAULT build's generic vec_reduce_all: lane by lane
        total = lanes[..., 0]
        for i in range(1, _BACKWARD_LANES):
            total = total + lanes[..., i]
        return total
    distance = _BACKWARD_LANES // 2
    while distance:
        lanes = lanes + lanes[..., jnp.arange(_BACKWARD_LANES) ^ distance]
        distance //= 2
    return lanes[..., 0]


def _float32_contiguous_backward(grad_out, input, weight, mean, invstd, train, output_mask):
    """Batch norm's backward of contiguous float32 tensors as ATen's vectorised CPU kernel computes
    it (``batch_norm_cpu_backward_contiguous_impl``): per channel, each (n, c) plane's ``sum(dy)``
    and ``sum((x - mean) * dy)`` by :func:`_lane_sums` in float32, added over the batch in float64;
    ``k = dot * invstd * invstd / count`` and the mean gradient in float32; ``dx = ((dy - mean_grad)
    - (x - mean) * k) * invstd * weight`` with the subtraction of the product fused; grad_weight
    ``dot * invstd`` and grad_bias ``sum(dy)`` from float64. ``mean``/``invstd``: the saved batch
    statistics in training, the running mean and ``1 / sqrt(var + eps)`` otherwise. Float32 sums
    in XLA's order differed in the last bits of a third of the elements."""
    batch, channels = input.shape[:2]
    x, dy = input.reshape(batch, channels, -1), grad_out.reshape(batch, channels, -1)
    centered = x - mean[:, None]
    wide = jnp.float64
    grad_sum = jnp.sum(_lane_sums(dy).astype(wide), axis=0)
    dot = jnp.sum(_lane_sums(centered * dy, fused_tail=(centered, dy)).astype(wide), axis=0)
    scale = invstd[:, None]
    w = jnp.ones((channels, 1), jnp.float32) if weight is None else weight[:, None]
    if train:
        count = jnp.float32(x.shape[0] * x.shape[2])
        k = true_divide(dot.astype(jnp.float32) * invstd * invstd, count)[:, None]
        mean_grad = true_divide(grad_sum, jnp.float64(x.shape[0] * x.shape[2])).astype(jnp.float32)[:, None]
        grad_input = contracted_multiply_add(-centered, k, dy - mean_grad) * scale * w
    else:
        grad_input = dy * scale * w
    grad_weight = (dot * invstd).astype(jnp.float32) if output_mask[1] else None
    grad_bias = grad_sum.astype(jnp.float32) if output_mask[2] else None
    return grad_input.reshape(input.shape), grad_weight, grad_bias


def _channels_last_backward(grad_out, input, weight, mean, invstd, train, output_mask):
    """Batch norm's backward of a channels-last input as ATen's vectorised CPU kernels compute it
    (``batch_norm_cpu_backward_channels_last_impl``, ``..._internal`` for 16-bit inputs, in float32):
    ``sum(dy)`` and ``sum((x - mean) * dy)`` (fused) in a float32 buffer per thread's chunk of
    positions (:func:`_channels_last_gradient_sums`), the buffers added in float64 for a float32
    input and in float32 for a 16-bit one, stored as float32; ``k`` and the mean gradient in
    float32; ``dx = ((dy - mean_grad) - (x - mean) * k) * invstd * weight``, the subtraction of the
    product fused for the channels of whole vectors (8 float32 lanes, or 16-element 16-bit vectors),
    not the leftover ones, which the compiler leaves unfused; grad_weight ``dot * invstd``."""
    channels = input.shape[1]
    in_16_bit = input.dtype != jnp.float32
    x, dy = (jnp.moveaxis(t.astype(jnp.float32), 1, -1).reshape(-1, channels) for t in (input, grad_out))
    grad_sum, dot = _channels_last_gradient_sums(x, dy, mean, jnp.float32 if in_16_bit else jnp.float64)
    vector_channels = channels - channels % (_HALF_VECTOR if in_16_bit else _BACKWARD_LANES)
    grad_input = _input_gradient(
        x, dy, weight, mean, invstd, grad_sum, dot, train, axis=-1, fused_channels=vector_channels
    )
    grad_input = jnp.moveaxis(grad_input.reshape(input.shape[0], *input.shape[2:], channels), -1, 1)
    return grad_input, dot * invstd if output_mask[1] else None, grad_sum if output_mask[2] else None


def _channels_last_gradient_sums(x, dy, mean, total_dtype):
    """``sum(dy)`` and ``sum((x - mean) * dy)`` per channel of (positions, C) float32 rows as ATen's
    channels-last backward kernels make them: a float32 buffer per thread's chunk of positions
    (:func:`_thread_buffers`, the product fused), the buffers added thread by thread in
    ``total_dtype`` (float64 for float32 inputs, float32 for 16-bit ones) and stored as float32."""

    def accumulate(buffers, row):
        (grad_sums, dots), (row_dy, row_x) = buffers, row
        return grad_sums + row_dy, _contracted_at_run_time(row_x - mean, row_dy, dots)

    grad_sums, dots = _thread_buffers((dy, x), 1, accumulate)
    return tuple(_in_thread_order(sums, total_dtype).astype(jnp.float32) for sums in (grad_sums, dots))


def _16_bit_contiguous_backward(grad_out, input, weight, mean, invstd, train, output_mask):
    """Batch norm's backward of a contiguous 16-bit input and gradient (parameters of its dtype or
    float32) as ``batch_norm_cpu_backward_contiguous_internal`` computes it in float32: ``sum(dy)``
    and ``sum((x - mean) * dy)`` by :func:`_mixed_channel_sums` (the products fused, bar the
    leftover elements' in bfloat16), ``k = dot * invstd * invstd / count``, ``dx = ((dy -
    mean_grad - (x - mean) * k) * invstd) * weight``, grad_weight ``dot * invstd``; each result
    rounded once to its dtype. Summed in XLA's order, float32 weight and bias gradients of mixed
    calls differed in a third of the channels."""
    batch, channels = input.shape[:2]
    x, dy = (t.astype(jnp.float32).reshape(batch, channels, -1) for t in (input, grad_out))
    centered = x - mean[:, None]
    grad_sum = _mixed_channel_sums(dy)
    dot = _mixed_channel_sums(centered, dy, fused_leftovers=input.dtype == jnp.float16)
    grad_input = _input_gradient(x, dy, weight, mean, invstd, grad_sum, dot, train, axis=1, fused_channels=channels)
    return (
        grad_input.reshape(input.shape),
        dot * invstd if output_mask[1] else None,
        grad_sum if output_mask[2] else None,
    )


def _input_gradient(x, dy, weight, mean, invstd, grad_sum, dot, train, *, axis, fused_channels=0):
    """The input gradient of the CPU's vectorised batch norm backward kernels (16-bit and
    channels-last float32), in float32 (rounded once by the caller's dtype): ``((dy - sum / count
    - (x - mean) * k) * invstd) * weight`` with ``k = dot * invstd * invstd / count`` in training,
    ``(dy * invstd) * weight`` otherwise; the per-channel values broadcast along ``axis`` of
    ``x``'s flattened layout. The first ``fused_channels`` channels subtract the product with one
    rounding (the channels of the kernel's whole vectors)."""
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]

    def per_channel(value):
        return value.reshape(shape)

    w = jnp.ones((), jnp.float32) if weight is None else per_channel(weight.astype(jnp.float32))
    if not train:
        return dy * per_channel(invstd) * w
    count = jnp.float32(x.size // x.shape[axis])
    k = true_divide(dot * invstd * invstd, count)
    mean_grad = true_divide(grad_sum, count)
    shifted = dy - per_channel(mean_grad)
    centered = x - per_channel(mean)
    difference = shifted - centered * per_channel(k)
    if fused_channels:  # the channels-last kernel's whole vectors: its compiler fuses the product
        fused = contracted_multiply_add(-centered, per_channel(k), shifted)
        vector_channels = per_channel(jnp.arange(x.shape[axis]) < fused_channels)
        difference = jnp.where(vector_channels, fused, difference)
    return difference * per_channel(invstd) * w


def _batch_norm_backward_as_the_cpus_generic_16_bit_path(
    grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, train, eps, output_mask
):
    """The 16-bit batch norm backward of ``batch_norm_backward_cpu_template``'s generic path (an
    input or gradient neither contiguous nor channels-last, or in different formats), in c10's
    16-bit arithmetic: ``dot = sum((x - mean) * dy)`` with each product rounded, summed in float32;
    in training ``k = dot * invstd * invstd / n`` and ``dx = ((dy - sum(dy) / n - (x - mean) * k)
    * invstd) * weight``, in evaluation ``dx = (dy * invstd) * weight`` with invstd = 1 / sqrt(var +
    eps) in double, each operation rounded (``n`` converted to the dtype, as c10 divides);
    grad_weight ``dot * invstd`` and grad_bias ``sum(dy)`` rounded once. Float32 rounded once
    differed in a third to a half of the elements, beyond tolerance."""
    dtype = input.dtype
    rounded = c10_rounding(dtype)
    shape, axes = _channel_shape(input), _reduction_axes(input)
    x, dy = input.astype(jnp.float32), grad_out.astype(jnp.float32)
    if train:
        mean, invstd = (rounded(t.astype(jnp.float32)) for t in (save_mean, save_invstd))
    else:
        mean = running_mean.astype(jnp.float32)
        invstd = rounded((1 / jnp.sqrt(running_var.astype(jnp.float64) + eps)).astype(jnp.float32))
    w = jnp.ones((), jnp.float32) if weight is None else weight.astype(jnp.float32).reshape(shape)
    centered = rounded(x - mean.reshape(shape))
    dot = jnp.sum(rounded(centered * dy), axis=axes)
    wide_sum = jnp.sum(dy, axis=axes)
    grad_sum = rounded(wide_sum)
    if train:
        count = _in_dtype(_per_channel(input), dtype)
        k = rounded(rounded(rounded(rounded(dot) * invstd) * invstd) / count)
        projection = rounded(centered * k.reshape(shape))
        # Fitted: float16's mean gradient divides the float sum, bfloat16's the rounded one.
        grad_mean = rounded((wide_sum if dtype == jnp.float16 else grad_sum) / count)
        grad_input = rounded(rounded(rounded(dy - grad_mean.reshape(shape)) - projection) * invstd.reshape(shape))
    else:
        grad_input = rounded(dy * invstd.reshape(shape))
    grad_input = rounded(grad_input * w)
    grad_weight = rounded(dot * invstd) if output_mask[1] else None
    grad_bias = grad_sum if output_mask[2] else None
    return grad_input, grad_weight, grad_bias


def _batch_norm_backward(
    grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, train, eps, output_mask
):
    """:func:`native_batch_norm_backward` in the computation dtype."""
    shape = _channel_shape(input)
    axes = _reduction_axes(input)
    if train:
        mean, invstd = save_mean, save_invstd
    else:
        mean, invstd = running_mean, jax.lax.rsqrt(running_var + eps)
    centered = input - mean.reshape(shape)
    grad_sum = jnp.sum(grad_out, axis=axes)
    dot = jnp.sum(grad_out * centered, axis=axes)
    scale = invstd * weight if weight is not None else invstd
    if train:
        count = _per_channel(input)
        projection = centered * (dot * invstd * invstd / count).reshape(shape)
        grad_input = (grad_out - projection - (grad_sum / count).reshape(shape)) * scale.reshape(shape)
    else:
        grad_input = grad_out * scale.reshape(shape)
    grad_weight = grad_bias = None
    if output_mask[1]:
        grad_weight = dot * invstd
    if output_mask[2]:
        grad_bias = grad_sum
    return grad_input, grad_weight, grad_bias


@lowering(
    aten.batch_norm_backward.default,
    promotion=Promotion.DEFAULT,
    uncast=(*_BATCH_NORM_BACKWARD_TENSORS[:-1], "save_var"),
    static=("update", "eps", "output_mask"),
    metas=True,
)
def batch_norm_backward(
    grad_out, input, weight, running_mean, running_var, save_mean, save_var, update, eps, output_mask, reserve, *, metas
):
    """Backward of the consolidated batch norm API (``save_var`` holds the saved invstd, as in
    PyTorch's decomposition); same gradients as native_batch_norm_backward."""
    return native_batch_norm_backward(
        grad_out, input, weight, running_mean, running_var, save_mean, save_var, update, eps, output_mask, metas=metas
    )


# --- group norm -------------------------------------------------------------------------------


@lowering(
    aten.native_group_norm.default,
    promotion=Promotion.DEFAULT,
    static=("N", "C", "HxW", "group", "eps"),  # eps: a double in the CPU's kernel, float32 as a runtime scalar
    dtype_rule=LAYER_NORM_RULE,
)
def native_group_norm(input, weight, bias, N, C, HxW, group, eps):
    """F.group_norm: each sample's channels split into ``group`` groups, normalized over the group's
    channels and spatial positions (biased variance), then the per-channel affine; also returns the
    (N, group) mean and rstd. An empty batch gives empty results. The input is read as (N, C, HxW)
    whatever its shape, as ATen's kernels (CPU and CUDA) read it: only its element count is checked."""
    if input.dtype == jnp.float32:
        return _float32_group_norm(input, weight, bias, N, C, HxW, group, eps)
    x = input.reshape(N, group, (C // group) * HxW)
    # An empty group's mean is the CPU's RowwiseMoments' 0 (its rstd stays NaN, as here).
    mean = jnp.mean(x, axis=-1) if x.shape[-1] else jnp.zeros(x.shape[:-1], x.dtype)
    centered = x - mean[..., None]
    rstd = jax.lax.rsqrt(jnp.mean(centered * centered, axis=-1) + eps)
    out = (centered * rstd[..., None]).reshape(N, C, HxW)
    if weight is not None:
        out = out * weight.reshape(1, C, 1)
    if bias is not None:
        out = out + bias.reshape(1, C, 1)
    return out.reshape(input.shape), mean, rstd


def _float32_group_norm(input, weight, bias, N, C, HxW, group, eps):
    """Float32 group norm as the CPU's ``GroupNormKernelImplInternal`` (a contiguous input; its
    channels-last kernel sums otherwise, an ulp apart in some elements): each group's statistics
    are ``RowwiseMoments`` over its channels and positions (lowering/rowwise_moments.py), rstd ``1
    / sqrt(max(var, 0) + eps)`` in double (its ``eps`` is one); without weight and bias ``(x -
    mean) * rstd``, else per channel ``scale = rstd * weight`` and ``bias = -scale * mean + beta``,
    ``scale * x + bias``, with the products the compiler contracts."""
    per_group = (C // group) * HxW
    mean, variance = rowwise_moments(input.reshape(N * group, per_group), jnp.float32)
    # The kernel's eps is a double: max(var, 0) + eps, its root and reciprocal are double operations.
    rstd = _reciprocal_sqrt(jnp.maximum(variance, 0).astype(jnp.float64) + eps).astype(jnp.float32)
    mean, rstd = mean.reshape(N, group), rstd.reshape(N, group)
    x = input.reshape(N, group, C // group, HxW)
    if weight is None and bias is None:
        out = (x - mean[..., None, None]) * rstd[..., None, None]
        return out.reshape(input.shape), mean, rstd
    scale = rstd[..., None] * (1 if weight is None else weight.reshape(group, C // group))
    if bias is None:  # fmadd(-scale, mean, 0): the product rounded once, -0.0 + 0 is 0.0 (XLA folds x + 0)
        shift = -scale * mean[..., None]
        shift = jnp.where(shift == 0, 0, shift)
    else:
        shift = contracted_multiply_add(-scale, mean[..., None], bias.reshape(group, C // group))
    out = contracted_multiply_add(scale[..., None], x, shift[..., None])
    return out.reshape(input.shape), mean, rstd


@lowering(
    aten.native_group_norm_backward.default,
    promotion=Promotion.DEFAULT,
    static=("N", "C", "HxW", "group", "output_mask"),
)
def native_group_norm_backward(grad_out, input, mean, rstd, weight, N, C, HxW, group, output_mask):
    """Gradients of F.group_norm with respect to (input, weight, bias), where ``output_mask`` asks."""
    per_group = C // group
    x = input.reshape(N, group, per_group, HxW)
    dy = grad_out.reshape(N, group, per_group, HxW)
    mean = mean.reshape(N, group, 1, 1)
    rstd = rstd.reshape(N, group, 1, 1)
    x_hat = (x - mean) * rstd
    grad_input = grad_weight = grad_bias = None
    if output_mask[0]:
        dx_hat = dy * weight.reshape(1, group, per_group, 1) if weight is not None else dy
        count = per_group * HxW
        grad_input = (rstd / count) * (
            count * dx_hat
            - jnp.sum(dx_hat, axis=(2, 3), keepdims=True)
            - x_hat * jnp.sum(dx_hat * x_hat, axis=(2, 3), keepdims=True)
        )
        grad_input = grad_input.reshape(input.shape)
    if output_mask[1]:
        # The CPU kernel's form, sum_n (ds - db * mean) * rstd: an empty group's NaN rstd gives NaN.
        ds = jnp.sum(dy * x, axis=3, keepdims=True)
        db = jnp.sum(dy, axis=3, keepdims=True)
        grad_weight = jnp.sum((ds - db * mean) * rstd, axis=(0, 3)).reshape(C)
    if output_mask[2]:
        grad_bias = jnp.sum(dy, axis=(0, 3)).reshape(C)
    return grad_input, grad_weight, grad_bias


# --- weight norm ------------------------------------------------------------------------------

# _weight_norm_interface runs as PyTorch's decomposition, which promotes; the CPU and CUDA kernels
# read g as v's element type.
DECOMPOSED_DTYPE_RULES[aten._weight_norm_interface.default] = same_dtype(
    ("v", "g"), "expected scalar type {0} but found {1}"
)


@lowering(aten._weight_norm_interface_backward.default, promotion=Promotion.DEFAULT, static=("dim",))
def weight_norm_interface_backward(grad_w, saved_v, saved_g, saved_norms, dim):
    """Gradients of ``w = g * v / ||v||`` (torch.nn.utils.weight_norm; the norm over every dim but
    ``dim``, shaped like ``g``) with respect to (v, g), as ATen's WeightNorm kernels compute them:
    ``grad_g = sum(grad_w * v) / norm`` and ``grad_v = (g / norm) * (grad_w - v * grad_g / norm)``."""
    others = tuple(axis for axis in range(saved_v.ndim) if axis != dim)
    per_direction = jnp.sum(grad_w * saved_v, axis=others, keepdims=True)
    grad_g = per_direction / saved_norms
    grad_v = (saved_g / saved_norms) * (grad_w - saved_v * (grad_g / saved_norms))
    return grad_v, grad_g
