"""``nn.TransformerEncoder``'s nested-tensor path, on neuron's dense tensors.

In eval mode without gradients, with a ``src_key_padding_mask``, PyTorch's encoder turns its input
into a nested tensor by the mask (``torch._nested_tensor_from_mask``), runs its layers on the kept
positions only and pads the result with zeros (``to_padded_tensor(0.0)``) before the final norm: on
the CPU, CUDA and, by its device list, PrivateUse1. Neuron holds no nested tensors of the strided
layout, so that path raised "nested tensors are not supported on neuron" (``mask_check=False``) or,
through ``_nested_tensor_from_mask_left_aligned`` answering False, took the standard path, whose
padded positions hold computed values where the CPU's hold zeros.

:func:`install` wraps the encoder's ``forward``: for neuron inputs with a padding mask it asks
PyTorch's own checks which path they choose (a probe: ``_nested_tensor_from_mask`` raises
:class:`_NestedPathChosen` in the probing thread, before any layer runs) and, where they choose the
nested one, runs the same layers on the padded batch with the padding mask, which gives each kept
position the value the nested path gives it, then writes zeros at the padded positions before the
final norm. Dynamo traces the wrapper and the probe like any Python code, so compiled encoders
take the same path.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

import torch
from torch import nn

__all__ = ["install", "probing"]

_state = threading.local()


class _NestedPathChosen(Exception):
    """Raised by the probe where PyTorch's encoder would convert its input to a nested tensor."""


def probing() -> bool:
    """Whether this thread is asking PyTorch's encoder which path it takes (then
    ``_nested_tensor_from_mask_left_aligned`` answers as on the CPU: eager/host_ops.py)."""
    return getattr(_state, "probing", False)


def _takes_nested_path(encoder: nn.TransformerEncoder, args: tuple[Any, ...]) -> Any:
    """Runs the original forward with the probe on: the standard path's result, or ``_NestedPathChosen``."""
    _state.probing = True
    try:
        return _original_forward(encoder, *args)
    finally:
        _state.probing = False


def _padded_like_nested(
    encoder: nn.TransformerEncoder,
    src: torch.Tensor,
    mask: torch.Tensor | None,
    src_key_padding_mask: torch.Tensor,
    is_causal: bool | None,
) -> torch.Tensor:
    """The nested path's result: (batch, sequence, features), batch first as that path requires."""
    from torch.nn.modules.transformer import _detect_is_causal_mask

    is_causal = _detect_is_causal_mask(mask, is_causal, src.size(1))
    padded = _nested_reading(src_key_padding_mask)
    # The nested path's to_padded_tensor refuses a batch with no kept position at all (CPU and
    # CUDA); a compiled encoder does not read the mask back to check it.
    if not torch.compiler.is_compiling() and bool(padded.all()):
        raise RuntimeError("to_padded_tensor: at least one constituent tensor should have non-zero numel")
    if src_key_padding_mask.dtype != torch.bool:  # an additive mask: -inf where padded
        padded_mask = torch.zeros_like(src_key_padding_mask).masked_fill(padded, float("-inf"))
    else:
        padded_mask = padded
    output = src
    for layer in encoder.layers:
        output = layer(output, src_mask=mask, is_causal=is_causal, src_key_padding_mask=padded_mask)
    output = output.masked_fill(padded.unsqueeze(-1), 0.0)
    return encoder.norm(output) if encoder.norm is not None else output


def _nested_reading(src_key_padding_mask: torch.Tensor) -> torch.Tensor:
    """The positions the nested path pads: ``_nested_tensor_from_mask`` keeps, of each sequence, as
    many leading positions as its mask keeps (``logical_not``: False or 0.0), and pads the rest. For
    a left-aligned mask that is the mask itself; ``mask_check=False`` lets any other mask through, and
    then the first positions are kept whatever the mask says, as on the CPU."""
    kept = src_key_padding_mask.logical_not().sum(-1, keepdim=True)
    positions = torch.arange(src_key_padding_mask.size(-1), device=src_key_padding_mask.device)
    return positions >= kept


def install() -> None:
    """Wraps ``nn.TransformerEncoder.forward`` and ``torch._nested_tensor_from_mask`` (idempotent)."""
    global _original_forward
    if getattr(nn.TransformerEncoder.forward, "_neuron_dense_nested_path", False):
        return
    _original_forward = nn.TransformerEncoder.forward
    nested_from_mask = torch._nested_tensor_from_mask

    @functools.wraps(nested_from_mask)
    def probed_nested_tensor_from_mask(*args: Any, **kwargs: Any) -> Any:
        if probing():
            raise _NestedPathChosen
        return nested_from_mask(*args, **kwargs)

    @functools.wraps(_original_forward)
    def forward(
        self: nn.TransformerEncoder,
        src: torch.Tensor,
        mask: torch.Tensor | None = None,
        src_key_padding_mask: torch.Tensor | None = None,
        is_causal: bool | None = None,
    ) -> torch.Tensor:
        if src.device.type != "neuron" or src_key_padding_mask is None:
            return _original_forward(self, src, mask, src_key_padding_mask, is_causal)
        try:
            return _takes_nested_path(self, (src, mask, src_key_padding_mask, is_causal))
        except _NestedPathChosen:
            return _padded_like_nested(self, src, mask, src_key_padding_mask, is_causal)

    forward._neuron_dense_nested_path = True  # type: ignore[attr-defined]
    torch._nested_tensor_from_mask = probed_nested_tensor_from_mask
    nn.TransformerEncoder.forward = forward


_original_forward: Any = None
