"""The kernel library as PyTorch ops (``torch_neuronx.nki_op``), usable in eager and compiled code:

- ``flash_attention(q, k, v, causal=False, scale=None)``: ``q`` ``[B, Hq, S, D]``, ``k``/``v``
  ``[B, Hkv, S, D]`` (``Hq`` a multiple of ``Hkv``), with a backward made of the flash backward
  kernel (``register_autograd``);
- ``rms_norm(x, weight, eps)``, ``swiglu_mlp(x, w_gate, w_up, w_down)``,
  ``rotary_embedding(x, cos, sin)``: forward only (the last dimension normalised / the rows of ``x``
  ``[N, H]`` projected / rotated).

Importing this module registers the ops (namespace ``nki_kernels``).
"""

from __future__ import annotations

import torch

from nki.kernels.flash_attention import flash_bwd_kernel, flash_fwd_kernel
from nki.kernels.rmsnorm import rms_norm_kernel
from nki.kernels.rope import rope_kernel
from nki.kernels.swiglu import swiglu_mlp_kernel
from nki.op import nki_op

__all__ = ["flash_attention", "rms_norm", "rotary_embedding", "swiglu_mlp"]


@nki_op("nki_kernels::flash_attention_forward", mutates_args=())
def _flash_forward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, causal: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    return flash_fwd_kernel[q.shape[0]](q, k, v, scale, causal)


@nki_op("nki_kernels::flash_attention_backward", mutates_args=())
def _flash_backward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    grad: torch.Tensor,
    lse: torch.Tensor,
    scale: float,
    causal: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return flash_bwd_kernel[k.shape[0]](q, k, v, out, grad, lse, scale, causal)


def _setup(ctx, inputs, output):
    q, k, v, scale, causal = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse)
    ctx.scale, ctx.causal = scale, causal


def _backward(ctx, grad_out, grad_lse):
    q, k, v, out, lse = ctx.saved_tensors
    grad_q, grad_k, grad_v = _flash_backward(q, k, v, out, grad_out.contiguous(), lse, ctx.scale, ctx.causal)
    return grad_q, grad_k, grad_v, None, None


_flash_forward.register_autograd(_backward, setup_context=_setup)


def flash_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False, scale: float | None = None
) -> torch.Tensor:
    """``softmax(scale * q k^T [causal mask]) v`` with the flash kernels.

    Args:
        q: ``[B, Hq, S, D]``; k, v: ``[B, Hkv, S, D]``, ``Hq`` a multiple of ``Hkv``; S a multiple of
            128, D <= 128; float32, bfloat16 or float16, on a neuron device.
        scale: default ``D ** -0.5``.

    Returns:
        ``[B, Hq, S, D]`` in ``q``'s dtype. Differentiable in q, k and v.
    """
    b, hq, s, d = q.shape
    scale = float(d**-0.5 if scale is None else scale)
    flat = [t.reshape(-1, s, d).contiguous() for t in (q, k, v)]
    out, _ = _flash_forward(*flat, scale, bool(causal))
    return out.reshape(b, hq, s, d)


@nki_op("nki_kernels::rms_norm", mutates_args=())
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """RMSNorm of the rows of ``x`` ``[N, H]`` scaled by ``weight`` ``[H]`` (:mod:`nki.kernels.rmsnorm`)."""
    return rms_norm_kernel(x, weight, eps)


@nki_op("nki_kernels::swiglu_mlp", mutates_args=())
def swiglu_mlp(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, w_down: torch.Tensor) -> torch.Tensor:
    """``(silu(x @ w_gate) * (x @ w_up)) @ w_down`` (:mod:`nki.kernels.swiglu`)."""
    return swiglu_mlp_kernel(x, w_gate, w_up, w_down)


@nki_op("nki_kernels::rotary_embedding", mutates_args=())
def rotary_embedding(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """The rotate-half rotary embedding of ``x`` ``[N, D]`` (:mod:`nki.kernels.rope`)."""
    return rope_kernel(x, cos, sin)
