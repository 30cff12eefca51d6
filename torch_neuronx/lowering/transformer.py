"""The fused inference ops of ``nn.MultiheadAttention`` and ``nn.TransformerEncoderLayer``.

In eval mode without gradients both modules take a "fast path" on every device PyTorch lists
(PrivateUse1 among them): one call of ``aten::_native_multi_head_attention`` or
``aten::_transformer_encoder_layer_fwd`` instead of their separate ops. PyTorch has no decomposition
of either, so they are lowered here, with the values of the CPU kernels
(``aten/src/ATen/native/transformers/attention.cpp`` and ``transformer.cpp``): each stage (the QKV
projection, the biased and rescaled Q, K, V, the scores, the masked softmax, the context, the output
projection, the residual sums, the layer norms and the feed-forward layers) computes in float32 for
16-bit inputs and is rounded to the input's dtype where the CPU writes it out.

The mask follows ``_masked_softmax``: any non-boolean mask is read as ``mask != 0`` (the CPU's
``mask.to(kBool)``; ``nn.MultiheadAttention.merge_masks`` passes -inf where a position is masked and
0 elsewhere), True means masked, and a query whose keys are all masked gets NaN weights, as on the CPU.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import torch

from torch_neuronx.lowering.activation import gelu
from torch_neuronx.lowering.normalization import LAYER_NORM_RULE, native_layer_norm
from torch_neuronx.lowering.promotion import opmath_dtype
from torch_neuronx.lowering.registry import lowering
from torch_neuronx.runtime.dtypes import aten_name, cpp_name, jax_dtype

aten = torch.ops.aten

_HIGHEST = jax.lax.Precision.HIGHEST


def _linear(x, weight, bias, dtype):
    """x @ weight^T + bias in the opmath type, rounded to ``dtype`` (ATen's addmm / linear)."""
    compute = opmath_dtype(dtype)
    out = jnp.einsum("...i,oi->...o", x.astype(compute), weight.astype(compute), precision=_HIGHEST)
    return (out + bias.astype(compute)).astype(dtype)


def _attention_rule(query: str):
    """The ``dtype_rule`` (run before the meta kernel and before tracing) with
    ``native_multi_head_attention_cpu``'s argument checks and ``masked_softmax_cpu``'s mask checks,
    which PyTorch's meta kernel skips, in their words; ``query`` names the op's input."""

    def rule(arguments: dict) -> None:
        q = arguments[query]
        key, value = arguments.get("key", q), arguments.get("value", q)
        embed_dim, num_head = arguments["embed_dim"], arguments.get("num_head", arguments.get("num_heads"))
        qkv_weight, qkv_bias = arguments["qkv_weight"], arguments["qkv_bias"]
        checks = (
            (q.ndim == 3, f"expected 3-D `query`, got {q.ndim}-D tensor"),
            (
                q.ndim != 3 or q.shape[-1] == embed_dim,
                f"passed-in embed_dim {embed_dim} didn't match last dim of query {q.shape[-1]}",
            ),
            (key.ndim == 3, f"expected 3-D `key`, got {key.ndim}-D tensor"),
            (value.ndim == 3, f"expected 3-D `value`, got {value.ndim}-D tensor"),
            (q.shape == key.shape == value.shape, "expected `query`/`key`/`value` shapes to match"),
            (qkv_weight.ndim == 2, f"expected 2-D `qkv_weight`, got {qkv_weight.ndim}-D tensor"),
            (qkv_weight.shape[0] == 3 * embed_dim, "expected `qkv_weight` first dim to be 3x embed_dim"),
            (
                qkv_weight.ndim < 2 or qkv_weight.shape[1] == embed_dim,
                "expected `qkv_weight` second dim to be embed_Dim",
            ),
            (qkv_bias.ndim == 1, f"expected 1-D `qkv_bias`, got {qkv_bias.ndim}-D tensor"),
            (qkv_bias.shape[0] == 3 * embed_dim, "expected `qkv_bias` first dim and first dim of query to be equal"),
            (embed_dim % num_head == 0, "`embed_dim` must divide evenly by `num_heads`"),
        )
        for holds, message in checks:
            if not holds:
                raise RuntimeError(message)
        _check_dtypes(q, key, value, arguments)
        mask = arguments.get("mask")
        if mask is not None and q.numel() > 0:
            _check_mask(tuple(mask.shape), arguments.get("mask_type"), (q.shape[0], num_head, q.shape[1], q.shape[1]))

    return rule


def _check_dtypes(query, key, value, arguments: dict) -> None:
    """The dtype checks the CUDA kernel meets on its way, in their order and words: the Q, K, V
    projections are ``mm`` (Blas.cpp), the bias is read as the projection's element type
    (``packed_accessor64``), the output projection is ``addmm(proj_bias, context, proj_weight.t())``
    (ADDMM_META). Without them mixed dtypes (bfloat16 inputs, float32 weights) were computed.

    Raises:
        RuntimeError: "expected mat1 and mat2 to have the same dtype, but got: c10::BFloat16 != float",
            "expected scalar type Float but found BFloat16", "self and mat2 must have the same dtype,
            but got BFloat16 and Float" or "mat1 and mat2 must have the same dtype, but got ...".
    """
    weight, bias = arguments["qkv_weight"], arguments["qkv_bias"]
    proj_weight, proj_bias = arguments["proj_weight"], arguments["proj_bias"]
    for x in (query, key, value):
        if x.dtype != weight.dtype:
            names = " != ".join(cpp_name(jax_dtype(d)) for d in (x.dtype, weight.dtype))
            raise RuntimeError(f"expected mat1 and mat2 to have the same dtype, but got: {names}")
    if not query.dtype.is_floating_point:
        return  # the projection's dtype refusal ("transform_bias_rescale_qkv" not implemented for 'Long')
    checks = (
        (bias, weight, "expected scalar type {1} but found {0}"),
        (proj_bias, proj_weight, "self and mat2 must have the same dtype, but got {0} and {1}"),
        (query, proj_weight, "mat1 and mat2 must have the same dtype, but got {0} and {1}"),
    )
    for a, b, message in checks:
        if a.dtype != b.dtype:
            raise RuntimeError(message.format(aten_name(a.dtype), aten_name(b.dtype)))


def _encoder_layer_rule(arguments: dict) -> None:
    """The dtype rule of ``_transformer_encoder_layer_fwd``: the attention's checks
    (:func:`_attention_rule`), each layer norm's (``native_layer_norm``'s rule) and each feed-forward
    ``addmm``'s (ADDMM_META: bias, then input, against the weight), in the order
    ``transformer_encoder_layer_forward`` meets them (``norm_first`` moves the first norm ahead).
    Without them mixed dtypes were computed where the CPU and CUDA raise.

    Raises:
        RuntimeError: "self and mat2 must have the same dtype, but got BFloat16 and Float", the
            layer norm's and the attention's errors.
    """
    src = arguments["src"]

    def norm(index: int) -> None:
        weight, bias = arguments[f"norm_weight_{index}"], arguments[f"norm_bias_{index}"]
        LAYER_NORM_RULE({"input": src, "weight": weight, "bias": bias})

    def feed_forward() -> None:
        for index in (1, 2):
            weight, bias = arguments[f"ffn_weight_{index}"], arguments[f"ffn_bias_{index}"]
            for a, message in ((bias, "self and mat2"), (src, "mat1 and mat2")):
                if a.dtype != weight.dtype:
                    names = aten_name(a.dtype), aten_name(weight.dtype)
                    raise RuntimeError(f"{message} must have the same dtype, but got {names[0]} and {names[1]}")

    if arguments["norm_first"]:
        norm(1)
    _SOURCE_ATTENTION_RULE(arguments)
    if arguments["norm_first"]:
        norm(2)
        feed_forward()
    else:
        norm(1)
        feed_forward()
        norm(2)


def _check_mask(mask_shape, mask_type, scores_shape) -> None:
    """``masked_softmax_cuda``'s checks of a mask for the (B, H, T, T) scores, in its words: a
    type 0 mask is (T, T), a type 1 mask (B, T), any other mask has the scores' shape.

    Raises:
        RuntimeError: "Mask Type should be defined", "Mask Type should be 0 (src_mask), 1
            (src_key_padding_mask), or 2 (default_mask)", "Mask shape should match input. mask: [2, 3]
            input: [2, 4, 3, 3]".
    """
    batch, _, length, source = scores_shape
    if mask_type is None:
        raise RuntimeError("Mask Type should be defined")
    if mask_type not in (0, 1, 2):
        raise RuntimeError("Mask Type should be 0 (src_mask), 1 (src_key_padding_mask), or 2 (default_mask)")
    padding = mask_type == 1 and mask_shape == (batch, length) and length == source
    square = mask_type == 0 and mask_shape == (length, source) and length == source
    if mask_shape != scores_shape and not padding and not square:
        listed = ", ".join(map(str, mask_shape)), ", ".join(map(str, scores_shape))
        raise RuntimeError(f"Mask shape should match input. mask: [{listed[0]}] input: [{listed[1]}]")


def _mask_of_scores(mask, mask_type, scores_shape):
    """The boolean mask (True = masked) broadcast to the scores' (B, H, T, T), as ``masked_softmax_cpu``
    reads it (checked by :func:`_check_mask`): type 0 is (T, T), type 1 a (B, T) padding mask, any
    mask that is not 2-D is type 2, of the scores' shape."""
    masked = mask if mask.dtype == jnp.bool_ else mask != 0
    if masked.ndim == 2 and mask_type == 1:
        return jnp.broadcast_to(masked[:, None, None, :], scores_shape)
    return jnp.broadcast_to(masked, scores_shape)


def _masked_softmax(scores, masked):
    """Softmax over the last dimension, masked positions 0; a fully masked row is NaN (the CPU's)."""
    if masked is not None:
        scores = jnp.where(masked, -jnp.inf, scores)
    shifted = scores - jnp.max(scores, axis=-1, keepdims=True)
    exp = jnp.exp(shifted)
    return exp / jnp.sum(exp, axis=-1, keepdims=True)


def _multi_head_attention(query, key, value, num_head, qkv_weight, qkv_bias, proj_weight, proj_bias, mask, mask_type):
    """(output (B, T, D), attention weights (B, H, T, T)) of the fast path, in ``query``'s dtype."""
    dtype = query.dtype
    compute = opmath_dtype(dtype)
    batch, length, embed_dim = query.shape
    head_dim = embed_dim // num_head
    weights = jnp.split(qkv_weight, 3, axis=0)
    projected = [
        jnp.einsum("bti,oi->bto", x.astype(compute), w.astype(compute), precision=_HIGHEST).astype(dtype)
        for x, w in zip((query, key, value), weights, strict=True)
    ]
    biases = jnp.split(qkv_bias.astype(compute), 3)
    # _transform_bias_rescale_qkv: (q + bias_q) / sqrt(head_dim), k + bias_k, v + bias_v, per head.
    scale = jnp.asarray(1.0 / math.sqrt(head_dim), compute)
    q, k, v = (
        ((x.astype(compute) + b) * (scale if i == 0 else 1)).astype(dtype).reshape(batch, length, num_head, head_dim)
        for i, (x, b) in enumerate(zip(projected, biases, strict=True))
    )
    scores = jnp.einsum("bqhe,bkhe->bhqk", q.astype(compute), k.astype(compute), precision=_HIGHEST).astype(dtype)
    masked = None if mask is None else _mask_of_scores(mask, mask_type, scores.shape)
    weights = _masked_softmax(scores.astype(compute), masked).astype(dtype)
    context = jnp.einsum("bhqk,bkhe->bqhe", weights.astype(compute), v.astype(compute), precision=_HIGHEST)
    context = context.astype(dtype).reshape(batch, length, embed_dim)
    return _linear(context, proj_weight, proj_bias, dtype), weights


@lowering(aten._native_multi_head_attention.default, dtype_rule=_attention_rule("query"), rule_first=True)
def _native_multi_head_attention(
    query,
    key,
    value,
    embed_dim,
    num_head,
    qkv_weight,
    qkv_bias,
    proj_weight,
    proj_bias,
    mask=None,
    need_weights=True,
    average_attn_weights=True,
    mask_type=None,
):
    """``nn.MultiheadAttention``'s fast path: (output (B, T, D), weights) for 3-D ``query``, ``key``
    and ``value`` of one shape; ``qkv_weight`` (3D, D) and ``qkv_bias`` (3D,) hold the Q, K and V
    projections, ``proj_*`` the output projection. The weights are (B, T, T) averaged over the
    heads, (B, H, T, T) with ``average_attn_weights=False``, and an empty tensor without
    ``need_weights`` or for an empty query (PyTorch's meta kernel; the eager kernel returns None
    there as ATen's: ``redirects.multi_head_attention_weights``).

    Raises:
        RuntimeError: the CPU kernel's argument and mask checks (:func:`_attention_rule`).
    """
    if query.size == 0:
        return jnp.zeros(query.shape, query.dtype), jnp.zeros((0,), query.dtype)
    output, weights = _multi_head_attention(
        query, key, value, num_head, qkv_weight, qkv_bias, proj_weight, proj_bias, mask, mask_type
    )
    if not need_weights:
        return output, jnp.zeros((0,), query.dtype)
    if average_attn_weights:  # qkt.sum(1), then qkt /= num_head, each rounded to the dtype
        compute = opmath_dtype(weights.dtype)
        summed = jnp.sum(weights.astype(compute), axis=1).astype(weights.dtype)
        weights = (summed.astype(compute) / num_head).astype(weights.dtype)
    return output, weights


def _layer_norm(x, weight, bias, eps):
    dtype = x.dtype
    compute = opmath_dtype(dtype)
    out, _, _ = native_layer_norm(x.astype(compute), (x.shape[-1],), weight.astype(compute), bias.astype(compute), eps)
    return out.astype(dtype)


_SOURCE_ATTENTION_RULE = _attention_rule("src")


@lowering(aten._transformer_encoder_layer_fwd.default, static=("eps",), dtype_rule=_encoder_layer_rule, rule_first=True)
def _transformer_encoder_layer_fwd(
    src,
    embed_dim,
    num_heads,
    qkv_weight,
    qkv_bias,
    proj_weight,
    proj_bias,
    use_gelu,
    norm_first,
    eps,
    norm_weight_1,
    norm_bias_1,
    norm_weight_2,
    norm_bias_2,
    ffn_weight_1,
    ffn_bias_1,
    ffn_weight_2,
    ffn_bias_2,
    mask=None,
    mask_type=None,
):
    """``nn.TransformerEncoderLayer``'s fast path on a (B, T, D) ``src``: self-attention
    (:func:`_native_multi_head_attention`) and the feed-forward block (``ffn_weight_1`` (F, D), then
    ReLU, or exact GELU with ``use_gelu``, then ``ffn_weight_2`` (D, F)), each added to its input,
    with layer norms of ``eps`` after each sum, or before each block with ``norm_first``.

    Raises:
        RuntimeError: the attention's argument and mask checks (the CPU kernel's words).
    """
    if src.size == 0:
        return src
    dtype = src.dtype
    x = _layer_norm(src, norm_weight_1, norm_bias_1, eps) if norm_first else src
    x, _ = _multi_head_attention(x, x, x, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, mask, mask_type)
    x = x + src
    if not norm_first:
        x = _layer_norm(x, norm_weight_1, norm_bias_1, eps)
    residual = x
    if norm_first:
        x = _layer_norm(x, norm_weight_2, norm_bias_2, eps)
    # _addmm_activation: the sum rounded to the input's dtype, then the activation.
    hidden = _linear(x, ffn_weight_1, ffn_bias_1, dtype).astype(opmath_dtype(dtype))
    hidden = (gelu(hidden) if use_gelu else jnp.maximum(hidden, 0)).astype(dtype)
    x = _linear(hidden, ffn_weight_2, ffn_bias_2, dtype) + residual
    if not norm_first:
        x = _layer_norm(x, norm_weight_2, norm_bias_2, eps)
    return x
