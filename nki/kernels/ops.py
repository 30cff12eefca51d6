"""The kernel library as PyTorch ops (``torch_neuronx.nki_op``), usable in eager and compiled code:

- ``flash_attention(q, k, v, causal=False, scale=None)``: ``q`` ``[B, Hq, S, D]``, ``k``/``v``
  ``[B, Hkv, S, D]`` (``Hq`` a multiple of ``Hkv``), with a backward made of the flash backward
  kernel (``register_autograd``);
- ``rms_norm(x, weight, eps)``, ``swiglu_mlp(x, w_gate, w_up, w_down)``,
  ``rotary_embedding(x, cos, sin)``: forward only (the last dimension normalised / the rows of ``x``
  ``[N, H]`` projected / rotated).

Shapes outside a kernel's limits raise ``ValueError`` naming the op; empty inputs give empty results.

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


def _require(condition: bool, op: str, problem: str) -> None:
    """Raises ``ValueError`` naming the op and what its arguments break (the kernels' own checks
    are bare asserts, which name neither)."""
    if not condition:
        raise ValueError(f"nki.kernels.ops.{op}: {problem}")


def _shape(tensor: torch.Tensor) -> list[int]:
    return list(tensor.shape)


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
    _require(
        q.dim() == k.dim() == v.dim() == 4,
        "flash_attention",
        f"q, k and v must be [B, H, S, D], got {_shape(q)}, {_shape(k)} and {_shape(v)}",
    )
    b, hq, s, d = q.shape
    _require(
        k.shape == v.shape and (k.shape[0], k.shape[2], k.shape[3]) == (b, s, d),
        "flash_attention",
        f"k and v must be [B, Hkv, S, D] with q's B, S and D ({b}, {s}, {d}), got {_shape(k)} and {_shape(v)}",
    )
    _require(k.shape[1] > 0, "flash_attention", f"k and v have no heads ({_shape(k)})")
    if q.numel() == 0:
        # no batch, no query heads or an empty sequence: an empty result, connected to the inputs
        return q.new_zeros(q.shape) + 0 * (q.sum() + k.sum() + v.sum())
    _require(
        hq % k.shape[1] == 0,
        "flash_attention",
        f"q's {hq} heads are not a multiple of k's and v's {k.shape[1]} (grouped-query attention shares each "
        "key-value head among a whole number of query heads)",
    )
    _require(
        s % 128 == 0,
        "flash_attention",
        f"the kernel takes sequences of a multiple of 128, got S={s}; pad the sequence, or call "
        "torch.nn.functional.scaled_dot_product_attention, which takes this kernel where it applies",
    )
    _require(
        d <= 128,
        "flash_attention",
        f"the kernel takes heads of at most 128, got D={d}; call torch.nn.functional.scaled_dot_product_attention",
    )
    scale = float(d**-0.5 if scale is None else scale)
    flat = [t.reshape(-1, s, d).contiguous() for t in (q, k, v)]
    out, _ = _flash_forward(*flat, scale, bool(causal))
    return out.reshape(b, hq, s, d)


@nki_op("nki_kernels::rms_norm", mutates_args=())
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """RMSNorm of the rows of ``x`` ``[N, H]`` scaled by ``weight`` ``[H]`` (:mod:`nki.kernels.rmsnorm`);
    ``N`` may be 0.

    Raises:
        ValueError: ``x`` is not 2-D, or ``weight`` is not ``[H]``.
    """
    _require(x.dim() == 2, "rms_norm", f"x must be [N, H], got {_shape(x)}; flatten it with x.reshape(-1, x.shape[-1])")
    _require(weight.shape == (x.shape[1],), "rms_norm", f"weight must be [{x.shape[1]}] (x's H), got {_shape(weight)}")
    if x.numel() == 0:
        return torch.empty_like(x)
    return rms_norm_kernel(x, weight, eps)


@nki_op("nki_kernels::swiglu_mlp", mutates_args=())
def swiglu_mlp(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, w_down: torch.Tensor) -> torch.Tensor:
    """``(silu(x @ w_gate) * (x @ w_up)) @ w_down`` (:mod:`nki.kernels.swiglu`): ``x`` ``[N, H]``,
    ``w_gate`` and ``w_up`` ``[H, I]``, ``w_down`` ``[I, H]``, ``H`` and ``I`` multiples of 128
    (0 included: no tokens or ``H = 0`` give an empty result, ``I = 0`` zeros, as the matmuls do).

    Raises:
        ValueError: shapes other than these.
    """
    _require(
        x.dim() == 2, "swiglu_mlp", f"x must be [N, H], got {_shape(x)}; flatten it with x.reshape(-1, x.shape[-1])"
    )
    _require(
        w_gate.dim() == w_up.dim() == w_down.dim() == 2,
        "swiglu_mlp",
        f"w_gate, w_up and w_down must be 2-D, got {_shape(w_gate)}, {_shape(w_up)} and {_shape(w_down)}",
    )
    h, inter = x.shape[1], w_gate.shape[1]
    _require(
        w_gate.shape == w_up.shape == (h, inter) and w_down.shape == (inter, h),
        "swiglu_mlp",
        f"w_gate and w_up must be [H, I] and w_down [I, H] with x's H={h}, got {_shape(w_gate)}, {_shape(w_up)} "
        f"and {_shape(w_down)}",
    )
    _require(h % 128 == 0 and inter % 128 == 0, "swiglu_mlp", f"H and I must be multiples of 128, got {h} and {inter}")
    if x.numel() == 0:
        return torch.empty_like(x)
    if inter == 0:
        # no intermediate features: the down projection sums nothing (the kernel would read a PSUM
        # tile no matmul wrote)
        return torch.zeros_like(x)
    return swiglu_mlp_kernel(x, w_gate, w_up, w_down)


@nki_op("nki_kernels::rotary_embedding", mutates_args=())
def rotary_embedding(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """The rotate-half rotary embedding of ``x`` ``[N, D]`` (:mod:`nki.kernels.rope`), ``cos`` and
    ``sin`` ``[N, D / 2]``.

    Raises:
        ValueError: shapes other than these, or an odd ``D``.
    """
    _require(
        x.dim() == 2 and x.shape[1] % 2 == 0,
        "rotary_embedding",
        f"x must be [N, D] with an even D, got {_shape(x)}; flatten it with x.reshape(-1, x.shape[-1])",
    )
    half = (x.shape[0], x.shape[1] // 2)
    _require(
        cos.shape == sin.shape == half,
        "rotary_embedding",
        f"cos and sin must be [N, D / 2] = {list(half)}, got {_shape(cos)} and {_shape(sin)}",
    )
    if x.numel() == 0:
        return torch.empty_like(x)
    return rope_kernel(x, cos, sin)
