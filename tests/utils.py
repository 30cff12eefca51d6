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


def to_cpu(value: Any) -> Any:
    return pytree.tree_map(lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, value)


def assert_matches_cpu(
    fn: Callable[..., Any],
    *args: Any,
    atol: float | None = None,
    rtol: float | None = None,
    native: bool = True,
    **kwargs: Any,
) -> Any:
    """Runs ``fn`` on CPU tensors and on their neuron copies and asserts the results match.

    With ``native`` (the default), also asserts nothing fell back to the CPU.
    Returns the neuron result.
    """
    expected = fn(*args, **kwargs)
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
