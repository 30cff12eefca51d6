"""Scaled dot-product attention.

``F.scaled_dot_product_attention`` asks each device which fused implementation to use; neuron answers
"overrideable" for 4-D inputs (csrc/aten/native/Attention.cpp), so attention runs as
``_scaled_dot_product_fused_attention_overrideable`` and its backward, one executable each, lowered
here. Under ``sdpa_kernel(SDPBackend.MATH)``, or for other ranks, PyTorch's math path runs instead:
scale, bmm, mask, ``_safe_softmax`` (lowered here), ``native_dropout``, bmm, each its own op.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import torch

from torch_neuronx._compat.aten_checks import stream_text
from torch_neuronx.lowering.promotion import opmath_dtype
from torch_neuronx.lowering.registry import lowering
from torch_neuronx.runtime.dtypes import jax_dtype

aten = torch.ops.aten


def _default_scale(head_dim: int) -> float:
    """SDPA's default scale, 1 / sqrt(E); without a head dimension (E = 0) the scores are empty sums,
    0 whatever the scale, so every key weighs the same, as on the CPU (1 / sqrt(0) divided by zero)."""
    return 1.0 / math.sqrt(head_dim) if head_dim else 1.0


def _softmax_rows(scores, axis: int):
    """Softmax along ``axis`` with rows that are entirely -inf giving 0; also returns the rows'
    logsumexp (-inf for such rows)."""
    # initial: an empty row (a zero-size softmax axis) has no maximum; it counts as masked.
    row_max = jnp.max(scores, axis=axis, keepdims=True, initial=-jnp.inf)
    masked = jnp.isneginf(row_max)
    shift = jnp.where(masked, jnp.zeros_like(row_max), row_max)
    exp = jnp.exp(scores - shift)
    # A masked row sums to 0: divide (and take the log) by 1 there instead, so that neither the value
    # nor the gradient of the branch jnp.where discards is NaN.
    total = jnp.where(masked, jnp.ones_like(row_max), jnp.sum(exp, axis=axis, keepdims=True))
    probabilities = jnp.where(masked, jnp.zeros_like(exp), exp / total)
    logsumexp = jnp.where(masked, jnp.full_like(row_max, -jnp.inf), shift + jnp.log(total))
    return probabilities, jnp.squeeze(logsumexp, axis)


@lowering(aten._safe_softmax.default)
def _safe_softmax(self, dim, dtype=None):
    """``aten::_safe_softmax`` (the softmax of SDPA's math path): softmax along ``dim`` computed in
    float32 for 16-bit inputs (after converting to ``dtype`` if given), except that a slice which is
    entirely -inf (a fully masked query) gives 0 rather than NaN; NaN inputs stay NaN."""
    compute = opmath_dtype(jax_dtype(dtype) if dtype is not None else self.dtype)
    probabilities, _ = _softmax_rows(self.astype(compute), dim % max(self.ndim, 1))
    return probabilities


def _pack_key(rng_key) -> jax.Array:
    """A threefry key as one int64 (PyTorch's ``philox_seed`` slot), so the backward can rebuild it."""
    data = jax.random.key_data(rng_key)
    if data.shape != (2,):
        raise NotImplementedError(f"neuron SDPA dropout: PRNG key data of shape {data.shape}, expected (2,)")
    packed = (data[0].astype(jnp.uint64) << 32) | data[1].astype(jnp.uint64)
    return packed.astype(jnp.int64)


def _unpack_key(seed) -> jax.Array:
    bits = jnp.asarray(seed).astype(jnp.uint64)
    return jax.random.wrap_key_data(jnp.stack([bits >> 32, bits & 0xFFFFFFFF]).astype(jnp.uint32))


def _scores(q, k, attn_bias, is_causal, scale):
    """Q K^T * scale with the mask applied, in q's dtype: ``attn_bias`` is additive, or boolean
    (True = attend); ``is_causal`` keeps ``tril(ones(L, S))``; masked scores are -inf."""
    scores = jnp.einsum("...le,...se->...ls", q, k, precision=jax.lax.Precision.HIGHEST) * jnp.asarray(scale, q.dtype)
    length, source = scores.shape[-2:]
    if is_causal:
        scores = jnp.where(jnp.tril(jnp.ones((length, source), jnp.bool_)), scores, -jnp.inf)
    if attn_bias is not None:
        if attn_bias.dtype == jnp.bool_:
            scores = jnp.where(attn_bias, scores, -jnp.inf)
        else:
            scores = scores + attn_bias.astype(q.dtype)
    return scores


def _repeat_heads(query, key_states, value):
    """Key and value heads repeated to the query's (grouped-query attention), and the group size."""
    if query.ndim < 3 or key_states.shape[-3] == query.shape[-3]:
        return key_states, value, 1
    groups = query.shape[-3] // key_states.shape[-3]
    return jnp.repeat(key_states, groups, axis=-3), jnp.repeat(value, groups, axis=-3), groups


def _dropout_keep(rng, dropout_p, shape):
    """The mask of the probabilities dropout keeps: the same for a forward and its backward, which
    rebuild it from the same key."""
    return jax.random.bernoulli(rng, 1.0 - dropout_p, shape)


def _attention(query, key_states, value, attn_bias, dropout_p, is_causal, scale, rng):
    """softmax(Q K^T * scale + bias) V in the opmath type, with PyTorch's math-path semantics.

    Returns (output, logsumexp). ``attn_bias`` is additive, or boolean (True = attend); ``is_causal``
    keeps ``tril(ones(L, S))``; key/value heads are repeated to the query's (grouped-query
    attention); dropout zeroes probabilities with ``rng`` and rescales by 1 / (1 - p).
    """
    dtype = opmath_dtype(query.dtype)
    q, k, v = (t.astype(dtype) for t in (query, key_states, value))
    k, v, _ = _repeat_heads(q, k, v)
    scale = _default_scale(q.shape[-1]) if scale is None else scale
    probabilities, logsumexp = _softmax_rows(_scores(q, k, attn_bias, is_causal, scale), -1)
    if dropout_p > 0:
        keep = _dropout_keep(rng, dropout_p, probabilities.shape)
        probabilities = jnp.where(keep, probabilities / (1.0 - dropout_p), jnp.zeros((), dtype))
    output = jnp.einsum("...ls,...se->...le", probabilities, v, precision=jax.lax.Precision.HIGHEST)
    return output, logsumexp


def _check_attention_arguments(query, key_states, attn_bias, dropout_p) -> None:
    """The checks of PyTorch's math path (CPU and CUDA alike), which the fused op's meta kernel skips:
    ``dropout_p`` in [0, 1] (``at::dropout``), and a mask that broadcasts to the scores' shape
    (B, H, L, S), which the math path adds it to in place (TensorIterator's words)."""
    if not 0 <= dropout_p <= 1:
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {stream_text(dropout_p)}")
    if attn_bias is None:
        return
    scores = (*query.shape[:-1], key_states.shape[-2])
    mask = tuple(attn_bias.shape)
    rank = max(len(scores), len(mask))
    padded_scores, padded_mask = (1,) * (rank - len(scores)) + scores, (1,) * (rank - len(mask)) + mask
    for dim in reversed(range(rank)):  # infer_size reports the last mismatch first
        a, b = padded_scores[dim], padded_mask[dim]
        if a != b and 1 not in (a, b):
            raise RuntimeError(
                f"The size of tensor a ({a}) must match the size of tensor b ({b}) at non-singleton dimension {dim}"
            )
    broadcast = [max(a, b) for a, b in zip(padded_scores, padded_mask, strict=True)]
    if broadcast != list(scores):
        raise RuntimeError(f"output with shape {list(scores)} doesn't match the broadcast shape {broadcast}")


def _sum_to_shape(gradient, shape):
    """``gradient`` summed over the dimensions along which a tensor of ``shape`` was broadcast to it."""
    lead = gradient.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, size in enumerate(shape) if size == 1 and gradient.shape[lead + i] != 1
    )
    return jnp.sum(gradient, axis=axes, keepdims=True).reshape(shape) if axes else gradient.reshape(shape)


@lowering(aten._scaled_dot_product_fused_attention_overrideable.default, static=("dropout_p", "scale"), random=True)
def _scaled_dot_product_fused_attention_overrideable(
    query,
    key_states,
    value,
    attn_bias=None,
    dropout_p=0.0,
    is_causal=False,
    return_debug_mask=False,
    *,
    scale=None,
    rng_key,
):
    """The fused SDPA of PrivateUse1 backends: (output, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k,
    philox_seed, philox_offset, debug_attn_mask) with the values of PyTorch's math path (see
    :func:`_attention`). ``philox_seed`` carries the dropout key for the backward; the cumulative
    sequence lengths and the debug mask are undefined, as for dense (non-nested) inputs on CUDA.

    Raises:
        RuntimeError: ``dropout_p`` outside [0, 1], or an ``attn_bias`` that does not broadcast to
            (B, H, L, S) (:func:`_check_attention_arguments`).
    """
    _check_attention_arguments(query, key_states, attn_bias, dropout_p)
    output, logsumexp = _attention(query, key_states, value, attn_bias, dropout_p, is_causal, scale, rng_key)
    seed = _pack_key(rng_key) if dropout_p > 0 else jnp.zeros((), jnp.int64)
    length, source = query.shape[-2], key_states.shape[-2]
    return output, logsumexp, None, None, length, source, seed, jnp.zeros((), jnp.int64), None


def _attention_backward(grad_out, query, key_states, value, attn_bias, logsumexp, dropout_p, is_causal, scale, rng):
    """(grad_query, grad_key, grad_value, grad_attn_bias) of :func:`_attention` from the gradient of its
    output and its saved ``logsumexp``; ``rng`` rebuilds dropout's mask.

    As FlashAttention's backward (Dao et al., 2022, Algorithm 4) does, the probabilities are rebuilt
    from the scores and the forward's saved ``logsumexp`` (``exp(S - lse)``, renormalised), without the
    softmax's row max; dropout's mask is rebuilt from ``rng``. Then, with P the
    probabilities and P' = dropout(P):
    dV = P'^T dO, dP = dropout(dO V^T), dS = P * (dP - rowsum(P * dP)), dQ = scale dS K,
    dK = scale dS^T Q (summed over a key head's group), d(bias) = dS summed to the bias's shape.
    """
    dtype = opmath_dtype(query.dtype)
    q, k, v = (t.astype(dtype) for t in (query, key_states, value))
    k, v, groups = _repeat_heads(q, k, v)
    scale = _default_scale(q.shape[-1]) if scale is None else scale
    d_out = grad_out.astype(dtype)
    scores = _scores(q, k, attn_bias, is_causal, scale)
    row_logsumexp = logsumexp.astype(dtype)[..., None]
    # Rows are renormalised: where the scores are as large as float32's range (a row masked with
    # finfo.min, as Hugging Face masks, gives lse = finfo.min + log(n) == finfo.min), the logsumexp
    # has lost its log-sum and exp(S - lse) is 1, not 1/n. A fully masked row (logsumexp -inf) has
    # probabilities 0, not exp(-inf + inf) = NaN.
    unnormalised = jnp.exp(scores - jnp.where(jnp.isneginf(row_logsumexp), jnp.zeros((), dtype), row_logsumexp))
    total = jnp.sum(unnormalised, axis=-1, keepdims=True)
    empty = jnp.isneginf(row_logsumexp) | (total == 0)
    probabilities = jnp.where(empty, jnp.zeros((), dtype), unnormalised / jnp.where(empty, jnp.ones((), dtype), total))
    d_probabilities = jnp.einsum("...le,...se->...ls", d_out, v, precision=jax.lax.Precision.HIGHEST)
    kept = probabilities
    if dropout_p > 0:
        keep = _dropout_keep(rng, dropout_p, probabilities.shape)
        kept = jnp.where(keep, probabilities / (1.0 - dropout_p), jnp.zeros((), dtype))
        d_probabilities = jnp.where(keep, d_probabilities / (1.0 - dropout_p), jnp.zeros((), dtype))
    grad_value = jnp.einsum("...ls,...le->...se", kept, d_out, precision=jax.lax.Precision.HIGHEST)
    d_scores = probabilities * (d_probabilities - jnp.sum(probabilities * d_probabilities, axis=-1, keepdims=True))
    grad_query = jnp.einsum("...ls,...se->...le", d_scores, k, precision=jax.lax.Precision.HIGHEST) * scale
    grad_key = jnp.einsum("...ls,...le->...se", d_scores, q, precision=jax.lax.Precision.HIGHEST) * scale
    if groups > 1:  # a key/value head served `groups` query heads: its gradient is their sum
        grouped = (*grad_key.shape[:-3], grad_key.shape[-3] // groups, groups, *grad_key.shape[-2:])
        grad_key = grad_key.reshape(grouped).sum(axis=-3)
        grad_value = grad_value.reshape(grouped).sum(axis=-3)
    if attn_bias is not None and attn_bias.dtype != jnp.bool_:
        grad_bias = _sum_to_shape(d_scores, attn_bias.shape)
    else:
        grad_bias = jnp.zeros(() if attn_bias is None else attn_bias.shape, dtype)
    return grad_query, grad_key, grad_value, grad_bias


@lowering(aten._scaled_dot_product_fused_attention_overrideable_backward.default, static=("dropout_p", "scale"))
def _scaled_dot_product_fused_attention_overrideable_backward(
    grad_out,
    query,
    key_states,
    value,
    attn_bias,
    grad_input_mask,
    out,
    logsumexp,
    cum_seq_q,
    cum_seq_k,
    max_q,
    max_k,
    dropout_p,
    is_causal,
    philox_seed,
    philox_offset,
    *,
    scale=None,
):
    """Backward of the fused SDPA: (grad_query, grad_key, grad_value, grad_attn_bias), see
    :func:`_attention_backward`; gradients ``grad_input_mask`` leaves out are zeros."""
    rng = _unpack_key(philox_seed) if dropout_p > 0 else None
    results = _attention_backward(
        grad_out, query, key_states, value, attn_bias, logsumexp, dropout_p, is_causal, scale, rng
    )
    return tuple(
        g if wanted else jnp.zeros(g.shape, g.dtype) for g, wanted in zip(results, grad_input_mask, strict=True)
    )


@lowering(aten._scaled_dot_product_flash_attention_for_cpu.default, static=("dropout_p", "scale"))
def _scaled_dot_product_flash_attention_for_cpu(
    query, key_states, value, dropout_p=0.0, is_causal=False, *, attn_mask=None, scale=None
):
    """The CPU's fused SDPA, which ``torch.compile`` traces for CPU tensors: (output, logsumexp),
    as :func:`_attention` computes them (the CPU kernel takes no dropout; its meta kernel refuses it).

    Lowered rather than decomposed: PyTorch's decomposition returns the attention probabilities in
    the logsumexp's place, which its backward (not decomposed) then reads as a logsumexp, giving
    wrong gradients in a compiled training step (torch/_decomp/decompositions.py says inductor
    must exclude it)."""
    return _attention(query, key_states, value, attn_mask, dropout_p, is_causal, scale, None)


@lowering(aten._scaled_dot_product_flash_attention_for_cpu_backward.default, static=("dropout_p", "scale"))
def _scaled_dot_product_flash_attention_for_cpu_backward(
    grad_out, query, key_states, value, out, logsumexp, dropout_p, is_causal, *, attn_mask=None, scale=None
):
    """Backward of the CPU's fused SDPA: (grad_query, grad_key, grad_value), see
    :func:`_attention_backward`."""
    return _attention_backward(
        grad_out, query, key_states, value, attn_mask, logsumexp, dropout_p, is_causal, scale, None
    )[:3]
