"""The five ATen ops of ``nn.SyncBatchNorm`` (``torch/nn/modules/_functions.py``), which PyTorch
implements for CUDA only: per-rank statistics, their combination across ranks, the normalisation and
the two halves of the backward.

Each is a composite of neuron ops computing what CUDA's kernels compute
(aten/src/ATen/native/cuda/Normalization.cuh), in the accumulate type (float32 for 16-bit inputs):

- ``batch_norm_stats(input, eps)``: the mean and ``1 / sqrt(biased variance + eps)`` of each channel
  (dimension 1) over every other dimension;
- ``batch_norm_gather_stats_with_counts``: the ranks' statistics merged as counts-weighted Welford
  steps (the mean of means, the variances recovered from the invstds plus the spread of the means),
  and the running statistics moved in place by ``momentum`` (the variance unbiased), as CUDA's kernel
  writes them although the schema does not mark them mutated;
- ``batch_norm_elemt``: ``(x - mean) * invstd * weight + bias``;
- ``batch_norm_backward_reduce``: the per-channel sums of ``dy`` and ``dy * (x - mean)``, and from
  them the weight and bias gradients;
- ``batch_norm_backward_elemt``: the input gradient from the sums gathered over all ranks
  (``count``: each rank's element count per channel).
"""

from __future__ import annotations

import torch

aten = torch.ops.aten


def _accumulate(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _per_channel(t: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A channel vector shaped to broadcast along dimension 1 of ``like``."""
    return t.reshape((1, -1) + (1,) * (like.dim() - 2))


def _reduced_dims(input: torch.Tensor) -> list[int]:
    if input.dim() < 2:
        raise RuntimeError(f"batch norm expects an input of at least 2 dimensions, got {input.dim()}")
    return [0, *range(2, input.dim())]


def batch_norm_stats(input: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.batch_norm_stats``: (mean, invstd) of each channel, shape (C,), accumulate type."""
    wide = input.to(_accumulate(input.dtype))
    var, mean = torch.var_mean(wide, dim=_reduced_dims(input), correction=0)
    return mean, torch.rsqrt(var + eps)


def batch_norm_gather_stats_with_counts(
    input: torch.Tensor,
    mean: torch.Tensor,
    invstd: torch.Tensor,
    running_mean: torch.Tensor | None,
    running_var: torch.Tensor | None,
    momentum: float,
    eps: float,
    counts: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.batch_norm_gather_stats_with_counts``: ``mean`` and ``invstd`` (world, C) of each rank
    with ``counts`` (world,) elements per channel merged into the global (mean, invstd), shape (C,)
    in ``mean``'s dtype; ``running_mean``/``running_var`` are updated in place, as on CUDA."""
    acc = _accumulate(mean.dtype)
    means, invstds = mean.to(acc), invstd.to(acc)
    weights = counts.to(acc).reshape(-1, 1)
    total = weights.sum(0)
    global_mean = (weights * means).sum(0) / total
    variances = 1 / (invstds * invstds) - eps
    spread = weights * (variances + (means - global_mean) ** 2)
    var_sum = spread.sum(0)
    global_invstd = torch.rsqrt(var_sum / total + eps)
    if running_mean is not None:
        running_mean.copy_((1 - momentum) * running_mean.to(acc) + momentum * global_mean)
    if running_var is not None:
        unbiased = var_sum / (total - 1)
        running_var.copy_((1 - momentum) * running_var.to(acc) + momentum * unbiased)
    return global_mean.to(mean.dtype), global_invstd.to(mean.dtype)


def batch_norm_elemt(
    input: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    mean: torch.Tensor,
    invstd: torch.Tensor,
    eps: float,
) -> torch.Tensor:
    """``torch.batch_norm_elemt``: the normalised input, in ``input``'s dtype."""
    _reduced_dims(input)
    acc = _accumulate(input.dtype)
    out = (input.to(acc) - _per_channel(mean.to(acc), input)) * _per_channel(invstd.to(acc), input)
    if weight is not None:
        out = out * _per_channel(weight.to(acc), input)
    if bias is not None:
        out = out + _per_channel(bias.to(acc), input)
    return out.to(input.dtype)


def batch_norm_backward_reduce(
    grad_out: torch.Tensor,
    input: torch.Tensor,
    mean: torch.Tensor,
    invstd: torch.Tensor,
    weight: torch.Tensor | None,
    input_g: bool,
    weight_g: bool,
    bias_g: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``torch.batch_norm_backward_reduce``: (sum_dy, sum_dy_xmu, grad_weight, grad_bias), each of
    shape (C,); the sums in ``mean``'s dtype, the gradients in ``weight``'s (``mean``'s without a
    weight). All four are computed whatever the flags (CUDA leaves the unrequested ones undefined)."""
    dims = _reduced_dims(input)
    acc = _accumulate(input.dtype)
    dy = grad_out.to(acc)
    centred = input.to(acc) - _per_channel(mean.to(acc), input)
    sum_dy, sum_dy_xmu = dy.sum(dims), (dy * centred).sum(dims)
    parameter_dtype = mean.dtype if weight is None else weight.dtype
    grad_weight = (sum_dy_xmu * invstd.to(acc)).to(parameter_dtype)
    return sum_dy.to(mean.dtype), sum_dy_xmu.to(mean.dtype), grad_weight, sum_dy.to(parameter_dtype)


def batch_norm_backward_elemt(
    grad_out: torch.Tensor,
    input: torch.Tensor,
    mean: torch.Tensor,
    invstd: torch.Tensor,
    weight: torch.Tensor | None,
    sum_dy: torch.Tensor,
    sum_dy_xmu: torch.Tensor,
    count: torch.Tensor,
) -> torch.Tensor:
    """``torch.batch_norm_backward_elemt``: the input gradient, in ``input``'s dtype, from the sums
    of every rank (``sum_dy``, ``sum_dy_xmu``, all-reduced) and ``count`` (world,), each rank's
    elements per channel."""
    _reduced_dims(input)
    acc = _accumulate(input.dtype)
    norm = 1 / count.to(acc).sum()
    mean_dy, mean_dy_xmu = sum_dy.to(acc) * norm, sum_dy_xmu.to(acc) * norm
    scale = invstd.to(acc)
    centred = input.to(acc) - _per_channel(mean.to(acc), input)
    grad = grad_out.to(acc) - _per_channel(mean_dy, input) - centred * _per_channel(scale * scale * mean_dy_xmu, input)
    gain = scale if weight is None else scale * weight.to(acc)
    return (grad * _per_channel(gain, input)).to(input.dtype)


KERNELS = {
    aten.batch_norm_stats.default: batch_norm_stats,
    aten.batch_norm_gather_stats_with_counts.default: batch_norm_gather_stats_with_counts,
    aten.batch_norm_elemt.default: batch_norm_elemt,
    aten.batch_norm_backward_reduce.default: batch_norm_backward_reduce,
    aten.batch_norm_backward_elemt.default: batch_norm_backward_elemt,
}
