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
from torch_neuronx.lowering.promotion import c10_rounding, opmath_dtype
from torch_neuronx.lowering.random import flat
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
    """Q K^T * scale with the mask applied, in q's dtype, for queries grouped by key head
    (:func:`_grouped`: ``(..., key heads, group, L, E)``, keys ``(..., key heads, S, E)``):
    ``attn_bias`` (grouped too) is additive, or boolean (True = attend); ``is_causal`` keeps
    ``tril(ones(L, S))``; masked scores are -inf."""
    scores = jnp.einsum("...gle,...se->...gls", q, k, precision=jax.lax.Precision.HIGHEST)
    scores = scores * jnp.asarray(scale, q.dtype)
    length, source = scores.shape[-2:]
    if is_causal:
        scores = jnp.where(jnp.tril(jnp.ones((length, source), jnp.bool_)), scores, -jnp.inf)
    if attn_bias is not None:
        if attn_bias.dtype == jnp.bool_:
            scores = jnp.where(attn_bias, scores, -jnp.inf)
        else:
            scores = scores + attn_bias.astype(q.dtype)
    return scores


def _grouped(x, key_states):
    """A query-side array ``(..., H, L, C)`` as ``(..., key heads, H / key heads, L, C)``: the query
    heads that share a key head (grouped-query attention) on an axis of their own, so that keys and
    values are contracted as they are, never repeated to the query's heads (XLA's CPU compiler
    miscompiled rowsum(P * dP) over repeated heads read from a flat buffer: wrong gradients with one
    key head and 300 keys). Without a head dimension (2-D inputs) the group axis is 1."""
    if x.ndim < 3 or key_states.ndim < 3:
        return x[..., None, :, :]
    heads = key_states.shape[-3]
    return x.reshape(*x.shape[:-3], heads, x.shape[-3] // heads, *x.shape[-2:])


def _grouped_bias(attn_bias, query, key_states):
    """The mask broadcast to the scores' ``(..., H, L, S)`` and grouped as :func:`_grouped`."""
    if attn_bias is None:
        return None
    full = jnp.broadcast_to(attn_bias, (*query.shape[:-1], key_states.shape[-2]))
    return _grouped(full, key_states)


def _dropout_keep(rng, dropout_p, shape):
    """The mask of the probabilities dropout keeps: the same for a forward and its backward, which
    rebuild it from the same key."""
    return flat(shape, lambda n: jax.random.bernoulli(rng, 1.0 - dropout_p, n))


def _attention(query, key_states, value, attn_bias, dropout_p, is_causal, scale, rng):
    """softmax(Q K^T * scale + bias) V in the opmath type, with PyTorch's math-path semantics.

    Returns (output, logsumexp). ``attn_bias`` is additive, or boolean (True = attend); ``is_causal``
    keeps ``tril(ones(L, S))``; each key/value head serves its group of query heads (grouped-query
    attention); dropout zeroes probabilities with ``rng`` and rescales by 1 / (1 - p).
    """
    dtype = opmath_dtype(query.dtype)
    q, k, v = (t.astype(dtype) for t in (query, key_states, value))
    scale = _default_scale(q.shape[-1]) if scale is None else scale
    scores = _scores(_grouped(q, k), k, _grouped_bias(attn_bias, q, k), is_causal, scale)
    probabilities, logsumexp = _softmax_rows(scores, -1)
    if dropout_p > 0:
        keep = _grouped(_dropout_keep(rng, dropout_p, (*q.shape[:-1], k.shape[-2])), k)
        probabilities = jnp.where(keep, probabilities / (1.0 - dropout_p), jnp.zeros((), dtype))
    output = jnp.einsum("...gls,...se->...gle", probabilities, v, precision=jax.lax.Precision.HIGHEST)
    return output.reshape(*q.shape[:-1], v.shape[-1]), logsumexp.reshape(q.shape[:-1])


#: cpu_flash_attention's key block (FlashAttentionKernel.cpp: kv_split_size).
_CPU_FLASH_KEY_BLOCK = 512


def _takes_the_cpus_flash_kernel(query, key_states, value, attn_bias, dropout_p, is_causal) -> bool:
    """Whether the CPU computes this 16-bit attention with ``cpu_flash_attention`` (its values
    differ from the math path's float32 rounded once): ``use_flash_attention_cpp``'s conditions
    (sdp_utils_cpp.cpp) that the arrays show: no dropout, 4-D inputs, one head dimension, non-empty
    sequences, and a 2-D or 4-D mask of the scores' shape or broadcast to it
    (``check_attn_mask_shape``), with ``is_causal`` or without (the kernel applies both).
    Grouped-query attention takes it too. A mask that requires grad does not on the CPU, which the
    arrays do not show: the CPU's math path computes it (and refuses it with ``is_causal``, which
    neuron computes, as CUDA's efficient attention does)."""
    batch, heads, length = query.shape[:3] if query.ndim == 4 else (0, 0, 0)
    return (
        query.dtype in (jnp.bfloat16, jnp.float16)
        and dropout_p == 0
        and query.ndim == key_states.ndim == value.ndim == 4
        and query.shape[-1] == key_states.shape[-1] == value.shape[-1]
        and length > 0
        and key_states.shape[-2] > 0
        and (
            attn_bias is None
            or (
                attn_bias.ndim in (2, 4)
                and attn_bias.shape[-2] in (length, 1)
                and attn_bias.shape[-1] in (key_states.shape[-2], 1)
                and (attn_bias.ndim == 2 or (attn_bias.shape[0] in (1, batch) and attn_bias.shape[1] in (1, heads)))
            )
        )
    )


def _takes_the_cpus_flash_backward(query, key_states, value, attn_bias, dropout_p, is_causal, bias_grad) -> bool:
    """Whether a 16-bit attention's gradients follow ``cpu_flash_attention_backward``: its forward
    took the flash kernel, with as many key heads as query heads (grouped-query gradients, summed
    over each group, keep float32), and the mask's gradient is not wanted (the flash backward gives
    none: the CPU takes its math path for a mask that requires grad)."""
    return _takes_the_cpus_flash_kernel(query, key_states, value, attn_bias, dropout_p, is_causal) and not bias_grad


def _cpu_flash_attention(query, key_states, value, attn_bias, is_causal, scale):
    """Attention as the CPU's ``cpu_flash_attention`` computes 16-bit inputs: for each block of 512
    keys, scores in float32, ``p = exp(s - running max)`` (its vector lanes with ``fexp_u20``), the
    running sum of p and the output accumulator rescaled when the maximum grows, and ``p`` rounded
    to the 16-bit dtype before it multiplies V (``qk_reduced``); the output is the accumulator times
    1 / sum. (output, logsumexp). Float32 rounded once (the math path) differed in a third of the
    elements, by up to 46 times assert_close's bfloat16 tolerance."""
    dtype = query.dtype
    rounded = c10_rounding(dtype)
    q, k, v = (t.astype(jnp.float32) for t in (query, key_states, value))
    scale = _default_scale(q.shape[-1]) if scale is None else scale
    length, source = q.shape[-2], k.shape[-2]
    grouped_q, grouped_bias = _grouped(q, k), _grouped_bias(attn_bias, q, k)
    running_max = jnp.full((*grouped_q.shape[:-1], 1), -jnp.inf, jnp.float32)
    total = jnp.zeros_like(running_max)
    accumulator = jnp.zeros((*grouped_q.shape[:-1], v.shape[-1]), jnp.float32)
    for start in range(0, source, _CPU_FLASH_KEY_BLOCK):
        stop = min(start + _CPU_FLASH_KEY_BLOCK, source)
        scores = jnp.einsum(
            "...gle,...se->...gls", grouped_q, k[..., start:stop, :], precision=jax.lax.Precision.HIGHEST
        )
        scores = scores * jnp.float32(scale)
        if is_causal:
            columns = jnp.arange(start, stop)[None, :]
            scores = jnp.where(columns <= jnp.arange(length)[:, None], scores, -jnp.inf)
        if grouped_bias is not None:
            bias = grouped_bias[..., start:stop]
            scores = jnp.where(bias, scores, -jnp.inf) if bias.dtype == jnp.bool_ else scores + bias.astype(jnp.float32)
        new_max = jnp.maximum(running_max, jnp.max(scores, axis=-1, keepdims=True))
        shift = jnp.where(jnp.isneginf(new_max), jnp.zeros_like(new_max), new_max)  # an all-masked row gives 0s
        probabilities = _cpu_vector_exp(scores - shift)
        correction = jnp.exp(jnp.where(jnp.isneginf(running_max), -jnp.inf, running_max - shift))
        total = jnp.sum(probabilities, axis=-1, keepdims=True) + correction * total
        if start:
            accumulator = accumulator * correction
        accumulator = accumulator + jnp.einsum(
            "...gls,...se->...gle", rounded(probabilities), v[..., start:stop, :], precision=jax.lax.Precision.HIGHEST
        )
        running_max = new_max
    empty = total == 0
    output = jnp.where(empty, 0, accumulator * (1 / jnp.where(empty, 1, total)))
    # A fully masked row's logsumexp is 0, as the kernel sets its max to 0 and its sum to 1.
    logsumexp = jnp.where(empty, 0, running_max + jnp.log(jnp.where(empty, 1, total)))
    return output.reshape(*q.shape[:-1], v.shape[-1]), logsumexp.reshape(q.shape[:-1])


def _cpu_flash_attention_backward(grad_out, query, key_states, value, out, logsumexp, attn_bias, is_causal, scale):
    """(grad_query, grad_key, grad_value) as the CPU's ``cpu_flash_attention_backward`` computes
    16-bit inputs: ``dsum = rowsum(dO * out)``; then, for each block of 32, 64 or 256 queries (by
    the query length, as its dispatch picks) and each block of 512 keys, ``P = exp(scale * Q K^T +
    mask - lse)`` in float32, rounded to the dtype for ``grad_value += P^T dO``; ``dS = P * (dO V^T
    - dsum)``, rounded for ``grad_query += scale * dS K`` and ``grad_key += scale * dS^T Q``; each
    gradient is a 16-bit buffer, so every accumulation rounds. With grouped key heads, the query
    heads of a group add into their key head's buffers one after another. Float32 rounded once
    differed by up to 118 times bfloat16 tolerance (grouped: in half the key gradients). The query
    blocks (of each head of a group in turn) run in a ``lax.scan`` (keys in a static loop), so a
    long sequence compiles to one loop body."""
    dtype = query.dtype
    rounded = c10_rounding(dtype)
    q, k, v, d_out, o = (t.astype(jnp.float32) for t in (query, key_states, value, grad_out, out))
    scale = jnp.float32(_default_scale(q.shape[-1]) if scale is None else scale)
    batch, heads, length, _ = q.shape
    key_heads, source = k.shape[-3], k.shape[-2]
    groups = heads // key_heads
    block = 256 if length >= 768 else 64 if length >= 192 else 32
    block = min(block, length)
    blocks = -(-length // block)
    padding = blocks * block - length

    def by_block(x, value_=0.0):
        """(B, H, L, C) padded to whole blocks, as (groups * blocks, B, key heads, block, C): the
        scan's steps, the heads of a group in turn, each head's blocks in order."""
        x = jnp.pad(x, [(0, 0), (0, 0), (0, padding), (0, 0)], constant_values=value_)
        x = x.reshape(x.shape[0], key_heads, groups, blocks, block, x.shape[-1])
        return jnp.moveaxis(x, (2, 3), (0, 1)).reshape(groups * blocks, x.shape[0], key_heads, block, x.shape[-1])

    d_sum = jnp.sum(d_out * o, axis=-1, keepdims=True)
    bias = None
    if attn_bias is not None:
        mask_shape = (*attn_bias.shape[:-2], length, source) if attn_bias.ndim == 4 else (1, 1, length, source)
        bias = jnp.broadcast_to(jnp.broadcast_to(attn_bias, mask_shape), (batch, heads, length, source))

    def query_block(carry, inputs):
        grad_key, grad_value = carry
        index, q_m, d_out_m, lse_m, d_sum_m, bias_m = inputs
        rows = index * block + jnp.arange(block)[:, None]
        grad_query = jnp.zeros_like(q_m)
        for start in range(0, source, _CPU_FLASH_KEY_BLOCK):
            stop = min(start + _CPU_FLASH_KEY_BLOCK, source)
            k_n, v_n = k[..., start:stop, :], v[..., start:stop, :]
            scores = scale * jnp.einsum("...le,...se->...ls", q_m, k_n, precision=jax.lax.Precision.HIGHEST)
            if bias_m is not None:
                part = bias_m[..., start:stop]
                scores = (
                    jnp.where(part, scores, -jnp.inf) if part.dtype == jnp.bool_ else scores + part.astype(jnp.float32)
                )
            probabilities = jnp.exp(scores - lse_m)
            if is_causal:
                probabilities = jnp.where(jnp.arange(start, stop)[None, :] <= rows, probabilities, 0)
            probabilities = jnp.where(jnp.isnan(probabilities), 0, probabilities)  # a fully masked row
            grad_value = grad_value.at[..., start:stop, :].set(
                rounded(
                    grad_value[..., start:stop, :]
                    + jnp.einsum(
                        "...ls,...le->...se", rounded(probabilities), d_out_m, precision=jax.lax.Precision.HIGHEST
                    )
                )
            )
            d_scores = jnp.einsum("...le,...se->...ls", d_out_m, v_n, precision=jax.lax.Precision.HIGHEST)
            d_scores = rounded(probabilities * (d_scores - d_sum_m))
            grad_query = rounded(
                grad_query
                + scale * jnp.einsum("...ls,...se->...le", d_scores, k_n, precision=jax.lax.Precision.HIGHEST)
            )
            grad_key = grad_key.at[..., start:stop, :].set(
                rounded(
                    grad_key[..., start:stop, :]
                    + scale * jnp.einsum("...ls,...le->...se", d_scores, q_m, precision=jax.lax.Precision.HIGHEST)
                )
            )
        return (grad_key, grad_value), grad_query

    inputs = (
        jnp.tile(jnp.arange(blocks), groups),
        by_block(q),
        by_block(d_out),
        # Padded query rows get lse = +inf: their probabilities, and so their contributions, are 0.
        by_block(logsumexp.astype(jnp.float32)[..., None], jnp.inf),
        by_block(d_sum),
        None if bias is None else by_block(bias),
    )
    zeros = jnp.zeros((batch, key_heads, source, k.shape[-1]), jnp.float32)
    (grad_key, grad_value), grad_query = jax.lax.scan(query_block, (zeros, jnp.zeros_like(zeros)), inputs)
    grad_query = grad_query.reshape(groups, blocks, batch, key_heads, block, q.shape[-1])
    grad_query = jnp.moveaxis(grad_query, (0, 1), (2, 3)).reshape(batch, heads, blocks * block, q.shape[-1])
    return grad_query[..., :length, :], grad_key, grad_value


def _cpu_vector_exp(x):
    """``exp`` of float32 ``x`` along its last dimension as ATen's ``_exp_reduce_sum_fusion_kernel``
    computes it: ``fexp_u20`` for the lanes of whole vectors (16 on AVX-512 builds, 8 on AVX2:
    ``torch.backends.cpu.get_cpu_capability()``), ``std::exp`` for the rest. (Fitted against torch
    2.13's logsumexp: exact exp is 4.5e-5 off it, ``exp_u20`` too, ``fexp_u20`` 2e-7.)"""
    lanes = {"AVX512": 16, "AVX2": 8}.get(torch.backends.cpu.get_cpu_capability(), 0)
    vectorised = lanes * (x.shape[-1] // lanes) if lanes else 0
    if not vectorised:
        return jnp.exp(x)
    return jnp.concatenate([_fexp_u20(x[..., :vectorised]), jnp.exp(x[..., vectorised:])], axis=-1)


def _fma(a, b, c):
    """``fma(a, b, c)`` for float32 arrays: the product is exact in float64, so the sum rounds once
    there, then to float32 (a double rounding that differs from fma's only at a float32 tie)."""
    return (a.astype(jnp.float64) * b.astype(jnp.float64) + c.astype(jnp.float64)).astype(jnp.float32)


def _fexp_u20(x):
    """ATen's ``fexp_u20`` (the AVX-512/AVX2 ``_mm512_fexp_u20_ps``: Malossi et al., "Fast
    Exponential Computation on SIMD Architectures"), operation for operation: ``y = x * log2(e)``,
    ``f = y - floor(y)``, a degree-3 Horner polynomial ``p(f)`` in fused multiply-adds, and the bits
    of ``trunc(2**23 * (y - p(f)) + 2**23 * 127)`` read as a float; 0 below ln(FLT_MIN), inf above
    ln(FLT_MAX). Its relative error is about 1e-5, which the CPU's attention sums carry."""
    constant = lambda bits: jax.lax.bitcast_convert_type(jnp.uint32(bits), jnp.float32)  # noqa: E731
    low, high = constant(0xC2AEAC50), constant(0x42B17218)
    scaled = x * constant(0x3FB8AA3B)
    fraction = scaled - jnp.floor(scaled)
    polynomial = _fma(fraction, jnp.float32(-0.079204240219773236), jnp.float32(-0.22433836478672356))
    polynomial = _fma(fraction, polynomial, jnp.float32(0.30354260500649682))
    polynomial = _fma(fraction, polynomial, jnp.float32(0.00010703434948458272))
    bits = _fma(jnp.float32(2**23), scaled - polynomial, jnp.float32(2**23 * 127.0))
    bits = jnp.trunc(bits).astype(jnp.int32)
    bits = jnp.where(x < low, 0, jnp.where(x > high, 0x7F800000, bits))
    return jax.lax.bitcast_convert_type(bits, jnp.float32)


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
    if _takes_the_cpus_flash_kernel(query, key_states, value, attn_bias, dropout_p, is_causal):
        output, logsumexp = _cpu_flash_attention(query, key_states, value, attn_bias, is_causal, scale)
    else:
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
    scale = _default_scale(q.shape[-1]) if scale is None else scale
    grouped_q, d_out = _grouped(q, k), _grouped(grad_out.astype(dtype), k)
    scores = _scores(grouped_q, k, _grouped_bias(attn_bias, q, k), is_causal, scale)
    row_logsumexp = logsumexp.astype(dtype).reshape(*scores.shape[:-1], 1)
    # Rows are renormalised: where the scores are as large as float32's range (a row masked with
    # finfo.min, as Hugging Face masks, gives lse = finfo.min + log(n) == finfo.min), the logsumexp
    # has lost its log-sum and exp(S - lse) is 1, not 1/n. A fully masked row (logsumexp -inf) has
    # probabilities 0, not exp(-inf + inf) = NaN.
    unnormalised = jnp.exp(scores - jnp.where(jnp.isneginf(row_logsumexp), jnp.zeros((), dtype), row_logsumexp))
    total = jnp.sum(unnormalised, axis=-1, keepdims=True)
    empty = jnp.isneginf(row_logsumexp) | (total == 0)
    probabilities = jnp.where(empty, jnp.zeros((), dtype), unnormalised / jnp.where(empty, jnp.ones((), dtype), total))
    d_probabilities = jnp.einsum("...gle,...se->...gls", d_out, v, precision=jax.lax.Precision.HIGHEST)
    kept = probabilities
    if dropout_p > 0:
        keep = _grouped(_dropout_keep(rng, dropout_p, (*q.shape[:-1], k.shape[-2])), k)
        kept = jnp.where(keep, probabilities / (1.0 - dropout_p), jnp.zeros((), dtype))
        d_probabilities = jnp.where(keep, d_probabilities / (1.0 - dropout_p), jnp.zeros((), dtype))
    # A key/value head's gradients sum over the query heads of its group (and the rows).
    grad_value = jnp.einsum("...gls,...gle->...se", kept, d_out, precision=jax.lax.Precision.HIGHEST)
    d_scores = probabilities * (d_probabilities - jnp.sum(probabilities * d_probabilities, axis=-1, keepdims=True))
    grad_query = jnp.einsum("...gls,...se->...gle", d_scores, k, precision=jax.lax.Precision.HIGHEST) * scale
    grad_query = grad_query.reshape(q.shape)
    grad_key = jnp.einsum("...gls,...gle->...se", d_scores, grouped_q, precision=jax.lax.Precision.HIGHEST) * scale
    d_scores = d_scores.reshape(*q.shape[:-1], k.shape[-2])
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
    if _takes_the_cpus_flash_backward(
        query, key_states, value, attn_bias, dropout_p, is_causal, attn_bias is not None and grad_input_mask[3]
    ):
        gradients = _cpu_flash_attention_backward(
            grad_out, query, key_states, value, out, logsumexp, attn_bias, is_causal, scale
        )
        results = (*gradients, jnp.zeros(() if attn_bias is None else attn_bias.shape, jnp.float32))
    else:
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
    must exclude it). 16-bit inputs compute as the CPU's kernel does (:func:`_cpu_flash_attention`)."""
    if _takes_the_cpus_flash_kernel(query, key_states, value, attn_mask, dropout_p, is_causal):
        return _cpu_flash_attention(query, key_states, value, attn_mask, is_causal, scale)
    return _attention(query, key_states, value, attn_mask, dropout_p, is_causal, scale, None)


@lowering(aten._scaled_dot_product_flash_attention_for_cpu_backward.default, static=("dropout_p", "scale"))
def _scaled_dot_product_flash_attention_for_cpu_backward(
    grad_out, query, key_states, value, out, logsumexp, dropout_p, is_causal, *, attn_mask=None, scale=None
):
    """Backward of the CPU's fused SDPA: (grad_query, grad_key, grad_value), see
    :func:`_attention_backward`, or :func:`_cpu_flash_attention_backward` for 16-bit inputs."""
    if _takes_the_cpus_flash_backward(query, key_states, value, attn_mask, dropout_p, is_causal, False):
        return _cpu_flash_attention_backward(
            grad_out, query, key_states, value, out, logsumexp, attn_mask, is_causal, scale
        )
    return _attention_backward(
        grad_out, query, key_states, value, attn_mask, logsumexp, dropout_p, is_causal, scale, None
    )[:3]
