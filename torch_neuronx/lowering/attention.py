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

from torch_neuronx.lowering.registry import lowering
from torch_neuronx.runtime.dtypes import jax_dtype

aten = torch.ops.aten


def _opmath(dtype):
    return jnp.float32 if dtype in (jnp.bfloat16, jnp.float16) else dtype


def _softmax_rows(scores, axis: int):
    """Softmax along ``axis`` with rows that are entirely -inf giving 0; also returns the rows'
    logsumexp (-inf for such rows)."""
    row_max = jnp.max(scores, axis=axis, keepdims=True)
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
    compute = _opmath(jax_dtype(dtype) if dtype is not None else self.dtype)
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


def _attention(query, key_states, value, attn_bias, dropout_p, is_causal, scale, rng):
    """softmax(Q K^T * scale + bias) V in the opmath type, with PyTorch's math-path semantics.

    Returns (output, logsumexp). ``attn_bias`` is additive, or boolean (True = attend); ``is_causal``
    keeps ``tril(ones(L, S))``; key/value heads are repeated to the query's (grouped-query
    attention); dropout zeroes probabilities with ``rng`` and rescales by 1 / (1 - p).
    """
    dtype = _opmath(query.dtype)
    q, k, v = (t.astype(dtype) for t in (query, key_states, value))
    if q.ndim >= 3 and k.shape[-3] != q.shape[-3]:
        groups = q.shape[-3] // k.shape[-3]
        k = jnp.repeat(k, groups, axis=-3)
        v = jnp.repeat(v, groups, axis=-3)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = jnp.einsum("...le,...se->...ls", q, k, precision=jax.lax.Precision.HIGHEST) * jnp.asarray(scale, dtype)
    length, source = scores.shape[-2:]
    if is_causal:
        scores = jnp.where(jnp.tril(jnp.ones((length, source), jnp.bool_)), scores, -jnp.inf)
    if attn_bias is not None:
        if attn_bias.dtype == jnp.bool_:
            scores = jnp.where(attn_bias, scores, -jnp.inf)
        else:
            scores = scores + attn_bias.astype(dtype)
    probabilities, logsumexp = _softmax_rows(scores, -1)
    if dropout_p > 0:
        keep = jax.random.bernoulli(rng, 1.0 - dropout_p, probabilities.shape)
        probabilities = jnp.where(keep, probabilities / (1.0 - dropout_p), jnp.zeros((), dtype))
    output = jnp.einsum("...ls,...se->...le", probabilities, v, precision=jax.lax.Precision.HIGHEST)
    return output, logsumexp


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
    sequence lengths and the debug mask are undefined, as for dense (non-nested) inputs on CUDA."""
    output, logsumexp = _attention(query, key_states, value, attn_bias, dropout_p, is_causal, scale, rng_key)
    seed = _pack_key(rng_key) if dropout_p > 0 else jnp.zeros((), jnp.int64)
    length, source = query.shape[-2], key_states.shape[-2]
    return output, logsumexp, None, None, length, source, seed, jnp.zeros((), jnp.int64), None


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
    """Backward of the fused SDPA: (grad_query, grad_key, grad_value, grad_attn_bias), the
    vector-Jacobian product of the forward recomputed with the same dropout mask (rebuilt from
    ``philox_seed``); gradients ``grad_input_mask`` leaves out are zeros."""
    rng = _unpack_key(philox_seed) if dropout_p > 0 else None
    additive = attn_bias is not None and attn_bias.dtype != jnp.bool_
    dtype = _opmath(query.dtype)

    def forward(q, k, v, bias):
        return _attention(q, k, v, bias if additive else attn_bias, dropout_p, is_causal, scale, rng)[0]

    bias = attn_bias.astype(dtype) if additive else jnp.zeros((), dtype)
    primals = (query.astype(dtype), key_states.astype(dtype), value.astype(dtype), bias)
    _, pullback = jax.vjp(forward, *primals)
    grads = pullback(grad_out.astype(dtype))
    grad_bias = grads[3] if additive else jnp.zeros(() if attn_bias is None else attn_bias.shape, dtype)
    results = (*grads[:3], grad_bias)
    return tuple(
        g if wanted else jnp.zeros(g.shape, g.dtype) for g, wanted in zip(results, grad_input_mask, strict=True)
    )
