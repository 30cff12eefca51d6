"""``F.scaled_dot_product_attention`` on the flash kernels (``TORCH_NEURONX_ENABLE_NKI_SDPA=1``).

Attention on neuron runs as ``aten::_scaled_dot_product_fused_attention_overrideable`` and its
backward (torch_neuronx/lowering/attention.py). :func:`route_sdpa` replaces those two lowerings with
ones that run :func:`nki.kernels.flash_attention.flash_fwd_kernel` and ``flash_bwd_kernel`` for the
calls the kernels take, and the default lowering for the others, so eager, adaptive eager and
torch.compile all reach the kernels. The kernels take: 4-D float32/bfloat16/float16 inputs, no
``attn_mask``, no dropout, queries and keys of the same length ``S``, a multiple of 128, head
dimension ``D <= 128``, key/value heads dividing the query heads (grouped-query attention).
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import torch

from nki.kernels.flash_attention import flash_bwd_kernel, flash_fwd_kernel
from nki.tracing import TracedKernel, tensor_spec
from torch_neuronx.lowering import registry

__all__ = ["flash_eligible", "route_sdpa"]

_FORWARD = torch.ops.aten._scaled_dot_product_fused_attention_overrideable.default
_BACKWARD = torch.ops.aten._scaled_dot_product_fused_attention_overrideable_backward.default
_DTYPES = (jnp.float32, jnp.bfloat16, jnp.float16)
_default: dict[str, Any] = {}


def flash_eligible(query: Any, key: Any, value: Any, attn_bias: Any, dropout_p: float) -> bool:
    """Whether the flash kernels compute this attention (shapes ``[B, H, S, D]``; see the module
    docstring for the rule)."""
    if attn_bias is not None or dropout_p != 0 or query.ndim != 4 or key.shape != value.shape or key.ndim != 4:
        return False
    batch, heads, length, dim = query.shape
    kv_batch, kv_heads, source, kv_dim = key.shape
    return (
        query.dtype in _DTYPES
        and key.dtype == query.dtype == value.dtype
        and (kv_batch, source, kv_dim) == (batch, length, dim)
        and length % 128 == 0
        and 0 < dim <= 128
        and heads % kv_heads == 0
    )


def _traced(kernel: Any, arrays: dict[str, Any], statics: dict[str, Any]) -> TracedKernel:
    """``kernel`` traced for JAX arrays (or tracers) of these shapes and dtypes."""
    arguments = {**arrays, **statics}
    signature = kernel.signature(
        arguments,
        lambda name, value: tensor_spec(name, value.shape, value.dtype, kernel.name) if name in arrays else None,
    )
    return kernel.trace(signature)


def _heads_first(x: Any) -> Any:
    """``[B, H, S, D]`` as the kernels' ``[B * H, S, D]``."""
    return x.reshape(-1, *x.shape[2:])


def _scale(query: Any, scale: float | None) -> float:
    return float(query.shape[-1] ** -0.5 if scale is None else scale)


def _forward(
    query, key, value, attn_bias=None, dropout_p=0.0, is_causal=False, return_debug_mask=False, *, scale=None, rng_key
):
    if not flash_eligible(query, key, value, attn_bias, dropout_p):
        return _default["forward"](
            query,
            key,
            value,
            attn_bias,
            dropout_p,
            is_causal,
            return_debug_mask,
            scale=scale,
            rng_key=rng_key,
        )
    batch, heads, length, _ = query.shape
    arrays = {"q": _heads_first(query), "k": _heads_first(key), "v": _heads_first(value)}
    traced = _traced(flash_fwd_kernel[batch * heads], arrays, {"scale": _scale(query, scale), "causal": is_causal})
    output, logsumexp = traced.function(*arrays.values())
    zero = jnp.zeros((), jnp.int64)
    return (
        output.reshape(query.shape),
        logsumexp.reshape(batch, heads, length),
        None,
        None,
        length,
        length,
        zero,
        zero,
        None,
    )


def _backward(*args, scale=None):
    # The schema's arguments, all positional: grad_out, query, key, value, attn_bias,
    # grad_input_mask, out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal,
    # philox_seed, philox_offset.
    grad_out, query, key, value, attn_bias, grad_input_mask, out, logsumexp = args[:8]
    dropout_p, is_causal = args[12:14]
    if not flash_eligible(query, key, value, attn_bias, dropout_p):
        return _default["backward"](*args, scale=scale)
    arrays = {
        "q": _heads_first(query),
        "k": _heads_first(key),
        "v": _heads_first(value),
        "out": _heads_first(out),
        "grad_out": _heads_first(grad_out.astype(query.dtype)),
        "lse": logsumexp.reshape(-1, logsumexp.shape[-1]).astype(jnp.float32),
    }
    kernel = flash_bwd_kernel[key.shape[0] * key.shape[1]]
    traced = _traced(kernel, arrays, {"scale": _scale(query, scale), "causal": is_causal})
    grad_q, grad_k, grad_v = traced.function(*arrays.values())
    grads = (grad_q.reshape(query.shape), grad_k.reshape(key.shape), grad_v.reshape(value.shape))
    grads += (jnp.zeros((), jnp.float32),)  # no attn_mask: the default lowering's empty gradient
    return tuple(g if wanted else jnp.zeros(g.shape, g.dtype) for g, wanted in zip(grads, grad_input_mask, strict=True))


def route_sdpa() -> None:
    """Routes ``F.scaled_dot_product_attention`` to the flash kernels for the calls they take (the
    module docstring); the others keep the default lowering. Called when the device starts if
    ``TORCH_NEURONX_ENABLE_NKI_SDPA=1``; calling it again does nothing. Executables built before the
    call keep the default lowering."""
    if _default:
        return
    _default["forward"] = registry.replace_lowering(_FORWARD, _forward)
    _default["backward"] = registry.replace_lowering(_BACKWARD, _backward)
