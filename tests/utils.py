"""Helpers for comparing neuron against CPU."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils import _pytree as pytree

import torch_neuronx


def to_neuron(value: Any) -> Any:
    """Every CPU tensor in ``value`` (a pytree) copied to neuron, keeping requires_grad."""

    def move(t: Any) -> Any:
        if isinstance(t, torch.Tensor):
            moved = t.detach().to("neuron")
            return moved.requires_grad_(t.requires_grad)
        return t

    return pytree.tree_map(move, value)


def _widen_16_bit(value: Any) -> Any:
    def widen(t: Any) -> Any:
        if isinstance(t, torch.Tensor) and t.dtype in (torch.bfloat16, torch.float16):
            return t.float()
        return t

    return pytree.tree_map(widen, value)


def to_cpu(value: Any) -> Any:
    return pytree.tree_map(lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, value)


def assert_matches_cpu(
    fn: Callable[..., Any],
    *args: Any,
    atol: float | None = None,
    rtol: float | None = None,
    native: bool = True,
    float32_reference: bool = False,
    **kwargs: Any,
) -> Any:
    """Runs ``fn`` on CPU tensors and on their neuron copies and asserts the results match.

    With ``native`` (the default), also asserts nothing fell back to the CPU. With
    ``float32_reference``, the CPU computes 16-bit float inputs in float32 and its results are
    rounded to their dtypes once: for ops that accumulate (index_add, embedding backward, ...),
    which neuron computes in float32 as CUDA's accumulate type does, while the CPU kernels round
    every partial sum to 16 bits (a sum that cancels then differs by many ulps).
    Returns the neuron result.
    """
    expected = fn(*args, **kwargs)
    if float32_reference:
        precise = fn(*_widen_16_bit(args), **_widen_16_bit(kwargs))
        expected = pytree.tree_map(lambda e, p: p.to(e.dtype) if isinstance(e, torch.Tensor) else e, expected, precise)
    torch_neuronx.clear_op_tracking()
    actual = fn(*to_neuron(args), **to_neuron(kwargs))
    if native:
        assert torch_neuronx.get_fallback_ops() == {}, f"ops fell back to the CPU: {torch_neuronx.get_fallback_ops()}"
    for got, want in zip(pytree.tree_leaves(actual), pytree.tree_leaves(expected), strict=True):
        if isinstance(want, torch.Tensor):
            assert got.device.type == "neuron", f"result on {got.device}, expected neuron"
            torch.testing.assert_close(got.cpu(), want, atol=atol, rtol=rtol, equal_nan=True)
        else:
            assert got == want
    return actual
