"""Loss functions and their backward ops.

``reduction`` is PyTorch's enum (0 none, 1 mean, 2 sum). Losses compute in float32 for 16-bit
inputs (DEFAULT promotion of the floating arguments; class targets stay int64) and reduce in that
dtype. Formulas follow PyTorch's CPU kernels (``aten/src/ATen/native/Loss*.cpp``) and
``torch/_decomp/decompositions.py``. ``l1_loss``, ``kl_div``, ``cross_entropy`` and ``nll_loss_nd``
are CompositeImplicitAutograd: the dispatcher decomposes them into the ops lowered here.
``multi_margin_loss_backward`` and ``multilabel_margin_loss_backward`` are the VJPs of their forward
lowerings (their meta kernels, which PyTorch lacks, are in ``_compat/meta_kernels.py``).
``_ctc_loss`` runs the CTC alpha recursion with ``lax.scan`` and ``_ctc_loss_backward`` the beta
recursion and PyTorch's gradient formula; their ``.Tensor`` overloads read the lengths back
(``eager/host_ops.py``), as PyTorch's CPU and CUDA kernels do.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import torch

from torch_neuronx.lowering.registry import Promotion, lowering, same_dtype
from torch_neuronx.runtime.dtypes import aten_name
from torch_neuronx.runtime.tracing import device_check

aten = torch.ops.aten

_NONE, _MEAN, _SUM = 0, 1, 2


def _reduce(loss, reduction: int):
    if reduction == _NONE:
        return loss
    if reduction == _MEAN:
        return jnp.mean(loss)
    if reduction == _SUM:
        return jnp.sum(loss)
    raise ValueError(f"loss on neuron: reduction must be 0 (none), 1 (mean) or 2 (sum), got {reduction}")


def _norm(reduction: int, count: int) -> float:
    """The factor a mean reduction puts on each element's gradient."""
    return 1 / max(count, 1) if reduction == _MEAN else 1.0  # an empty input has no gradient to scale


# --- negative log likelihood --------------------------------------------------------------------


def _class_weights(self, target, weight, ignore_index):
    """(channel dim, whether each target counts, target with ignored entries replaced by class 0,
    per-target weight: the class weight, or 1, and 0 where the target is ``ignore_index``)."""
    channel = 1 if self.ndim >= 2 else 0
    valid = target != ignore_index
    safe = jnp.where(valid, target, 0)
    picked = weight[safe] if weight is not None else jnp.ones(target.shape, self.dtype)
    return channel, valid, safe, jnp.where(valid, picked, 0)


def _nll_loss_dtypes(arguments: dict) -> None:
    """ATen's nll_loss checks (LossNLL.cpp): an int64 (or uint8) target, and class weights of the
    input's dtype; neither is promoted."""
    self, target, weight = arguments["self"], arguments["target"], arguments["weight"]
    if target.dtype not in (torch.int64, torch.uint8):
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {aten_name(target.dtype)}")
    if weight is not None and weight.dtype != self.dtype:
        raise RuntimeError(f"expected scalar type {aten_name(self.dtype)} but found {aten_name(weight.dtype)}")


@lowering(
    aten.nll_loss_forward.default,
    aten.nll_loss2d_forward.default,
    promotion=Promotion.DEFAULT,
    promote=("self", "weight"),
    dtype_rule=_nll_loss_dtypes,
)
def nll_loss_forward(self, target, weight, reduction, ignore_index):
    """F.nll_loss on (C,), (N, C) or (N, C, d1, ...) log-probabilities: -weight[t] * self[t] per
    target, 0 where target == ignore_index; "mean" divides the sum by the total weight of the
    counted targets (NaN when it is 0, as PyTorch gives). Returns (output, total_weight);
    total_weight is 0 for an unreduced batch, as on CPU.

    A target outside [0, C) that is not ``ignore_index`` raises ``IndexError: Target {t} is out
    of bounds.`` at the next synchronization (a device-side check, never a silent clamp).
    """
    if self.ndim == 1 and target.ndim == 1:  # torch 2.13: one target (checked) for a single sample
        target = target.reshape(())
    target = target.astype(jnp.int64)  # a uint8 target indexes as ATen's kernels read it
    channel, valid, safe, weights = _class_weights(self, target, weight, ignore_index)
    classes = self.shape[channel]
    bad = valid & ((target < 0) | (target >= classes))
    if target.size:  # an empty batch has no target to check (argmax of nothing fails)
        first_bad = target.reshape(-1)[jnp.argmax(bad.reshape(-1))]
        device_check(jnp.any(bad), first_bad, "Target {detail} is out of bounds.", IndexError)
    picked = jnp.take_along_axis(self, jnp.expand_dims(safe, channel), axis=channel).squeeze(channel)
    losses = jnp.where(valid, -picked * weights, 0)
    if reduction == _NONE and self.ndim >= 2:
        return losses, jnp.zeros((), self.dtype)
    total_weight = jnp.sum(weights)
    if reduction == _MEAN:
        return jnp.sum(losses) / total_weight, total_weight
    return _reduce(losses, reduction), total_weight


@lowering(
    aten.nll_loss_backward.default,
    aten.nll_loss2d_backward.default,
    promotion=Promotion.DEFAULT,
    promote=("grad_output", "self", "weight", "total_weight"),
)
def nll_loss_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight):
    """Gradient of F.nll_loss: -weight[t] * grad at each target's class (divided by total_weight
    for "mean"), 0 elsewhere and for ignored targets (even when total_weight is 0)."""
    target = target.astype(jnp.int64)  # a uint8 target indexes as ATen's kernels read it
    channel, valid, safe, weights = _class_weights(self, target, weight, ignore_index)
    if reduction == _MEAN:
        grad_output = grad_output / total_weight
    coefficient = jnp.expand_dims(jnp.where(valid, -weights * grad_output, 0), channel)
    classes = jnp.arange(self.shape[channel]).reshape((-1,) + (1,) * (self.ndim - channel - 1))
    return jnp.where(classes == jnp.expand_dims(safe, channel), coefficient, 0)


# --- regression losses ------------------------------------------------------------------------


@lowering(aten.mse_loss.default, promotion=Promotion.DEFAULT, static=("reduction",))
def mse_loss(self, target, reduction=_MEAN):
    """F.mse_loss: (self - target)^2, reduced."""
    difference = self - target
    return _reduce(difference * difference, reduction)


@lowering(aten.mse_loss_backward.default, promotion=Promotion.DEFAULT, static=("reduction",))
def mse_loss_backward(grad_output, self, target, reduction):
    """Gradient of F.mse_loss: 2 * (self - target) * grad (/ numel for "mean")."""
    return 2 * _norm(reduction, self.size) * (self - target) * grad_output


@lowering(aten.smooth_l1_loss.default, promotion=Promotion.DEFAULT, static=("reduction", "beta"))
def smooth_l1_loss(self, target, reduction=_MEAN, beta=1.0):
    """F.smooth_l1_loss: 0.5 * d^2 / beta where |d| < beta, else |d| - 0.5 * beta (beta = 0 is
    the L1 loss), reduced. ``beta`` is static: ATen checks it on every call (Loss.cpp, CPU and
    CUDA), which PyTorch's meta kernel does not.

    Raises:
        RuntimeError: ``beta`` is negative or NaN (ATen's words).
    """
    if not beta >= 0:  # ATen's TORCH_CHECK(beta >= 0): NaN fails it too
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    z = jnp.abs(self - target)
    safe_beta = jnp.where(beta == 0, 1, beta)
    return _reduce(jnp.where(z < beta, 0.5 * z * z / safe_beta, z - 0.5 * beta), reduction)


@lowering(aten.smooth_l1_loss_backward.default, promotion=Promotion.DEFAULT, static=("reduction",))
def smooth_l1_loss_backward(grad_output, self, target, reduction, beta):
    """Gradient of F.smooth_l1_loss: d / beta where |d| < beta, else sign(d); times grad (/ numel)."""
    d = self - target
    scaled = _norm(reduction, self.size) * grad_output
    safe_beta = jnp.where(beta == 0, 1, beta)
    return jnp.where(jnp.abs(d) < beta, scaled * d / safe_beta, scaled * jnp.sign(d))


@lowering(aten.huber_loss.default, promotion=Promotion.DEFAULT, static=("reduction", "delta"))
def huber_loss(self, target, reduction=_MEAN, delta=1.0):
    """F.huber_loss: 0.5 * d^2 where |d| < delta, else delta * (|d| - 0.5 * delta), reduced.
    ``delta`` is static, so that the meta kernel's check of it (delta > 0) runs for each value."""
    z = jnp.abs(self - target)
    return _reduce(jnp.where(z < delta, 0.5 * z * z, delta * (z - 0.5 * delta)), reduction)


@lowering(aten.huber_loss_backward.default, promotion=Promotion.DEFAULT, static=("reduction",))
def huber_loss_backward(grad_output, self, target, reduction, delta):
    """Gradient of F.huber_loss: d clamped to [-delta, delta], times grad (/ numel)."""
    d = self - target
    return _norm(reduction, self.size) * grad_output * jnp.clip(d, -delta, delta)


# --- classification losses on probabilities and logits ----------------------------------------


@lowering(
    aten.binary_cross_entropy.default,
    promotion=Promotion.DEFAULT,
    static=("reduction",),
    dtype_rule=same_dtype(("target", "self"), "Found dtype {0} but expected {1}"),
)
def binary_cross_entropy(self, target, weight=None, reduction=_MEAN):
    """F.binary_cross_entropy: -(t * log(x) + (1 - t) * log(1 - x)) * weight with each log clamped
    to >= -100, as PyTorch does, reduced. An input or target outside [0, 1] (or NaN) raises
    PyTorch's RuntimeError at the next synchronization."""
    device_check(
        jnp.any(~((self >= 0) & (self <= 1))), 0, "all elements of input should be between 0 and 1", RuntimeError
    )
    device_check(
        jnp.any(~((target >= 0) & (target <= 1))), 0, "all elements of target should be between 0 and 1", RuntimeError
    )
    loss = (target - 1) * jnp.maximum(jnp.log1p(-self), -100) - target * jnp.maximum(jnp.log(self), -100)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


@lowering(aten.binary_cross_entropy_backward.default, promotion=Promotion.DEFAULT, static=("reduction",))
def binary_cross_entropy_backward(grad_output, self, target, weight=None, reduction=_MEAN):
    """Gradient of F.binary_cross_entropy: grad * (x - t) / max(x * (1 - x), 1e-12) * weight
    (/ numel), PyTorch's clamped form."""
    grad = grad_output * (self - target) / jnp.maximum((1 - self) * self, 1e-12)
    if weight is not None:
        grad = grad * weight
    return grad * _norm(reduction, self.size)


@lowering(aten.binary_cross_entropy_with_logits.default, promotion=Promotion.DEFAULT, static=("reduction",))
def binary_cross_entropy_with_logits(self, target, weight=None, pos_weight=None, reduction=_MEAN):
    """F.binary_cross_entropy_with_logits: (1 - t) * x - (1 + (pos_weight - 1) * t) * log_sigmoid(x),
    times weight, reduced (PyTorch's stable form)."""
    log_sigmoid = jnp.minimum(self, 0) - jnp.log1p(jnp.exp(-jnp.abs(self)))
    if pos_weight is not None:
        log_sigmoid = log_sigmoid * ((pos_weight - 1) * target + 1)
    loss = (1 - target) * self - log_sigmoid
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


@lowering(aten.soft_margin_loss.default, promotion=Promotion.DEFAULT, static=("reduction",))
def soft_margin_loss(self, target, reduction=_MEAN):
    """F.soft_margin_loss: log(1 + exp(-target * self)) (as a softplus, which does not overflow), reduced."""
    return _reduce(jax.nn.softplus(-target * self), reduction)


@lowering(aten.soft_margin_loss_backward.default, promotion=Promotion.DEFAULT, static=("reduction",))
def soft_margin_loss_backward(grad_output, self, target, reduction):
    """Gradient of F.soft_margin_loss: -target * sigmoid(-target * self) * grad (/ numel)."""
    return -target * jax.nn.sigmoid(-target * self) * grad_output * _norm(reduction, self.size)


# --- margin losses over classes -----------------------------------------------------------------


def _batched(self):
    """The (N, C) input, adding the batch dimension of a single (C,) sample or a 0-dim one (one
    class)."""
    return self if self.ndim > 1 else self.reshape(1, -1)


def _unbatched(value, self):
    return value.reshape(self.shape) if self.ndim <= 1 else value


def _reduce_samples(loss, self, reduction: int):
    """:func:`_reduce`; a single sample's unreduced loss has shape (), as on CPU and CUDA."""
    loss = _reduce(loss, reduction)
    return loss.reshape(()) if self.ndim <= 1 else loss


@lowering(
    aten.multi_margin_loss.default,
    promotion=Promotion.DEFAULT,
    promote=("self", "weight"),
    static=("p",),
    checked=("margin",),
)
def multi_margin_loss(self, target, p=1, margin=1, weight=None, reduction=_MEAN):
    """F.multi_margin_loss: per sample, sum over classes j != y of max(0, margin - x[y] + x[j])^p
    (times weight[y]), divided by the class count, then reduced. A target outside [0, C) raises
    PyTorch's ``RuntimeError: target out of range`` at the next synchronization."""
    if p not in (1, 2):
        raise RuntimeError("only p == 1 and p == 2 supported")
    x = _batched(self)
    y = target.reshape(x.shape[0])
    classes = x.shape[1]
    device_check(jnp.any((y < 0) | (y >= classes)), 0, "target out of range", RuntimeError)
    safe = jnp.clip(y, 0, classes - 1)
    z = margin - jnp.take_along_axis(x, safe[:, None], axis=1) + x
    others = jnp.arange(classes) != safe[:, None]
    h = jnp.where(others & (z > 0), z if p == 1 else z * z, 0)
    if weight is not None:
        h = h * weight[safe][:, None]
    return _reduce_samples(jnp.sum(h, axis=1) / classes, self, reduction)


def _multilabel_targets(x, y):
    """(whether each target position precedes the first -1, is_target: whether each class is a target)."""
    listed = jnp.cumprod(y >= 0, axis=1).astype(jnp.bool_)
    safe = jnp.where(listed, y, 0)
    classes = jnp.arange(x.shape[1])
    is_target = jnp.any(listed[:, :, None] & (safe[:, :, None] == classes), axis=1)
    return listed, safe, is_target


@lowering(aten.multilabel_margin_loss_forward.default, promotion=Promotion.DEFAULT, promote=("self",))
def multilabel_margin_loss_forward(self, target, reduction):
    """F.multilabel_margin_loss: per sample, for each listed target y (the entries before the first
    -1) and each non-target class d, max(0, 1 - x[y] + x[d]), summed and divided by the class count;
    also returns is_target. A target outside [-1, C) raises PyTorch's RuntimeError at the next
    synchronization."""
    x = _batched(self)
    y = target.reshape(x.shape)
    classes = x.shape[1]
    device_check(jnp.any((y < -1) | (y >= classes)), 0, "argument #2 'target' is out of range", RuntimeError)
    listed, safe, is_target = _multilabel_targets(x, y)
    z = 1 - jnp.take_along_axis(x, safe, axis=1)[:, :, None] + x[:, None, :]
    active = listed[:, :, None] & ~is_target[:, None, :] & (z > 0)
    loss = jnp.sum(jnp.where(active, z, 0), axis=(1, 2)) / classes
    return _reduce_samples(loss, self, reduction), _unbatched(is_target, self)


@lowering(
    aten.multi_margin_loss_backward.default,
    promotion=Promotion.DEFAULT,
    promote=("grad_output", "self", "weight"),
    static=("p",),
)
def multi_margin_loss_backward(grad_output, self, target, p, margin, weight=None, reduction=_MEAN):
    """The gradient of :func:`multi_margin_loss` with respect to ``self``."""
    _, vjp = jax.vjp(lambda x: multi_margin_loss(x, target, p, margin, weight, reduction), self)
    return vjp(grad_output)[0]


@lowering(aten.multilabel_margin_loss_backward.default, promotion=Promotion.DEFAULT, promote=("grad_output", "self"))
def multilabel_margin_loss_backward(grad_output, self, target, reduction, is_target):
    """The gradient of :func:`multilabel_margin_loss_forward` with respect to ``self``."""
    _, vjp = jax.vjp(lambda x: multilabel_margin_loss_forward(x, target, reduction)[0], self)
    return vjp(grad_output)[0]


# --- connectionist temporal classification ------------------------------------------------------


def _ctc_labels(targets, target_lengths, blank: int, classes: int):
    """The extended label sequences l' (B, 2 * max(target_lengths) + 1) of Graves et al.: blank at
    even positions, the targets at odd ones (blank again past each target's length). ``targets`` is
    (B, S) or the 1-D concatenation of the targets (``target_lengths`` gives the split). A label
    outside [0, classes) raises RuntimeError at the next synchronisation (PyTorch reads past the
    log-probabilities)."""
    lengths = np.asarray(target_lengths, np.int64)
    width = int(lengths.max(initial=0))
    k = np.arange(width)
    if targets.ndim == 1:
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        position = np.clip(starts[:, None] + k, 0, max(targets.shape[0] - 1, 0))
        picked = targets[position] if targets.shape[0] else jnp.zeros(position.shape, targets.dtype)
    else:
        picked = targets[:, np.clip(k, 0, max(targets.shape[1] - 1, 0))]
    valid = k < lengths[:, None]
    picked = jnp.where(valid, picked.astype(jnp.int64), blank)
    bad = (picked < 0) | (picked >= classes)
    device_check(
        jnp.any(bad),
        picked.reshape(-1)[jnp.argmax(bad.reshape(-1))] if picked.size else 0,
        f"ctc_loss: target {{detail}} is outside the {classes} classes of log_probs",
        RuntimeError,
    )
    labels = jnp.full((lengths.shape[0], 2 * width + 1), blank, jnp.int64)
    return labels.at[:, 1::2].set(picked)


def _log_add3(a, b, c):
    """log(exp(a) + exp(b) + exp(c)) as PyTorch's CTC kernels form it: shifted by the largest term
    (0 when all are -inf)."""
    top = jnp.maximum(jnp.maximum(a, b), c)
    top = jnp.where(top == -jnp.inf, jnp.zeros((), top.dtype), top)
    return jnp.log(jnp.exp(a - top) + jnp.exp(b - top) + jnp.exp(c - top)) + top


def _shift(x, by: int):
    """``x[..., s - by]`` for by > 0 and ``x[..., s + |by|]`` for by < 0, -inf where out of range
    (everywhere when |by| exceeds the length: a single state, every target empty)."""
    count = min(abs(by), x.shape[-1])
    pad = jnp.full((*x.shape[:-1], count), -jnp.inf, x.dtype)
    if by > 0:
        return jnp.concatenate([pad, x[..., : x.shape[-1] - count]], axis=-1)
    return jnp.concatenate([x[..., count:], pad], axis=-1)


def _shift_labels(labels, by: int):
    """``labels[:, s - by]`` (-1 where out of range), as :func:`_shift`."""
    count = min(abs(by), labels.shape[1])
    pad = jnp.full((labels.shape[0], count), -1, labels.dtype)
    if by > 0:
        return jnp.concatenate([pad, labels[:, : labels.shape[1] - count]], axis=1)
    return jnp.concatenate([labels[:, count:], pad], axis=1)


def _ctc_setup(log_probs, targets, input_lengths, target_lengths, blank):
    """(labels (B, S), each label's log-probability (T, B, S), input and target lengths (B,), s (S,)).
    Empty ``log_probs`` raise the CPU kernel's error (the recursion has no first time step)."""
    if log_probs.size == 0:
        raise RuntimeError("log_probs tensor must not be empty")
    labels = _ctc_labels(targets, target_lengths, blank, log_probs.shape[2])
    emit = jnp.take_along_axis(log_probs, labels[None], axis=2)
    lengths_in = np.asarray(input_lengths, np.int64)
    lengths_target = np.asarray(target_lengths, np.int64)
    return labels, emit, lengths_in, lengths_target, np.arange(labels.shape[1])


def _log_probs_not_empty(arguments: dict) -> None:
    """The first check of ``ctc_loss_gpu_template`` (LossCTC.cu; the CPU kernel's too), made before
    PyTorch's C++ meta kernel, which checks the blank against the classes first ("blank must be in
    label range" for log_probs without classes)."""
    if arguments["log_probs"].numel() == 0:
        raise RuntimeError("log_probs tensor must not be empty")


@lowering(aten._ctc_loss.default, dtype_rule=_log_probs_not_empty, rule_first=True)
def _ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, zero_infinity=False):
    """The CTC loss of each batch element, -log p(target | log_probs), by the log-space alpha
    recursion of Graves et al. (2006) as PyTorch's CPU kernel (``LossCTC.cpp``) computes it, one
    ``lax.scan`` step per time step for the whole batch. Returns (neg_log_likelihood (B,), log_alpha
    (B, T, 2 * max(target_lengths) + 1)); log_alpha is -inf past each element's input length and
    extended target length (where PyTorch leaves it unwritten). An impossible alignment gives inf
    (``zero_infinity`` is applied by F.ctc_loss and by the backward)."""
    labels, emit, lengths_in, lengths_target, s = _ctc_setup(log_probs, targets, input_lengths, target_lengths, blank)
    neg_inf = jnp.full((), -jnp.inf, log_probs.dtype)
    skip = (s >= 2) & (labels != _shift_labels(labels, 2))
    first = (s == 0) | ((s == 1) & (lengths_target[:, None] > 0))
    alpha0 = jnp.where(first, emit[0], neg_inf)

    def step(previous, emitted):
        alpha = _log_add3(previous, _shift(previous, 1), jnp.where(skip, _shift(previous, 2), neg_inf)) + emitted
        return alpha, alpha

    _, rest = jax.lax.scan(step, alpha0, emit[1:])
    alpha = jnp.concatenate([alpha0[None], rest])  # (T, B, S)
    valid = (np.arange(log_probs.shape[0])[:, None, None] < lengths_in[:, None]) & (s <= 2 * lengths_target[:, None])
    alpha = jnp.where(valid, alpha, neg_inf)
    last = alpha[np.maximum(lengths_in - 1, 0), np.arange(lengths_in.shape[0])]  # (B, S) at each input's end
    end_blank = jnp.take_along_axis(last, (2 * lengths_target)[:, None], axis=1)[:, 0]
    end_label = jnp.take_along_axis(last, np.maximum(2 * lengths_target - 1, 0)[:, None], axis=1)[:, 0]
    top = jnp.maximum(end_blank, end_label)
    top = jnp.where(top == -jnp.inf, jnp.zeros((), top.dtype), top)
    pair = jnp.log(jnp.exp(end_blank - top) + jnp.exp(end_label - top)) + top
    likelihood = jnp.where(lengths_target == 0, end_blank, pair)
    empty_input = jnp.where(lengths_target == 0, jnp.zeros((), log_probs.dtype), neg_inf)
    likelihood = jnp.where(lengths_in == 0, empty_input, likelihood)
    return -likelihood, jnp.transpose(alpha, (1, 0, 2))


@lowering(aten._ctc_loss_backward.default)
def _ctc_loss_backward(
    grad, log_probs, targets, input_lengths, target_lengths, neg_log_likelihood, log_alpha, blank, zero_infinity=False
):
    """The gradient of :func:`_ctc_loss` with respect to log_probs, by PyTorch's formula (Graves et
    al., eq. 16): the beta recursion runs backwards in time with ``lax.scan``; for each time step and
    class, ``(exp(lp) - exp(log(sum of alpha * beta over the label's positions) + nll - lp)) * grad``.
    It is 0 past each element's input length and, with ``zero_infinity``, for elements whose loss is
    inf; without it an infinite loss gives NaN, as on the CPU."""
    labels, emit, lengths_in, lengths_target, s = _ctc_setup(log_probs, targets, input_lengths, target_lengths, blank)
    steps, batch, classes = log_probs.shape
    neg_inf = jnp.full((), -jnp.inf, log_probs.dtype)
    skip = (s < 2 * lengths_target[:, None] - 1) & (labels != _shift_labels(labels, -2))
    ends = (s == 2 * lengths_target[:, None]) | ((s == 2 * lengths_target[:, None] - 1) & (lengths_target[:, None] > 0))
    inside = s <= 2 * lengths_target[:, None]

    def step(following, inputs):
        t, emitted = inputs
        later = jnp.where(s < 2 * lengths_target[:, None], _shift(following, -1), neg_inf)
        skipped = jnp.where(skip, _shift(following, -2), neg_inf)
        recurred = _log_add3(following, later, skipped) + emitted
        last = jnp.where(ends, emitted, neg_inf)
        beta = jnp.where(
            (t == lengths_in - 1)[:, None], last, jnp.where((t < lengths_in - 1)[:, None], recurred, neg_inf)
        )
        beta = jnp.where(inside, beta, neg_inf)
        return beta, beta

    start = jnp.full((batch, labels.shape[1]), -jnp.inf, log_probs.dtype)
    _, beta = jax.lax.scan(step, start, (jnp.arange(steps), emit), reverse=True)  # (T, B, S)
    products = jnp.transpose(log_alpha, (1, 0, 2)) + beta
    # log-sum-exp over the positions s of each class c: segments b * C + labels[b, s]
    segments = (np.arange(batch)[:, None] * classes + labels).reshape(-1)
    values = jnp.transpose(products, (1, 2, 0)).reshape(-1, steps)  # (B * S, T)
    top = jax.ops.segment_max(values, segments, batch * classes)
    top = jnp.where(top == -jnp.inf, jnp.zeros((), top.dtype), top)
    total = jax.ops.segment_sum(jnp.exp(values - top[segments]), segments, batch * classes)
    collected = jnp.transpose((jnp.log(total) + top).reshape(batch, classes, steps), (2, 0, 1))  # (T, B, C)
    nll = neg_log_likelihood[None, :, None]
    gradient = (jnp.exp(log_probs) - jnp.exp(collected + nll - log_probs)) * grad[None, :, None]
    keep = np.arange(steps)[:, None] < lengths_in
    if zero_infinity:
        keep = keep & (neg_log_likelihood != jnp.inf)[None, :]
    return jnp.where(keep[:, :, None], gradient, jnp.zeros((), gradient.dtype))
