"""Recomputed random ops (``run_with_rng_state``, activation checkpointing) that run eagerly: between
compiled parts (a draw on another core) or in a graph run op by op (fallback execution).
PyTorch's implementation of ``run_with_rng_state`` knows CPU, CUDA, HPU and XPU tensors only; on
neuron the op draws from the saved 16-byte state of its core (dynamo/random_states.py), which is set
and then restored, as CUDA's implementation does with its generator.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

from torch_neuronx.lowering.engine import REPLAYED_RANDOM_OP


def replay_random_op(state: torch.Tensor, op: Any, *args: Any, **kwargs: Any) -> Any:
    """``run_with_rng_state`` for a recomputed op that runs eagerly (PyTorch's implementation knows
    no neuron tensors): ``op`` drawing from ``state`` (the 16-byte generator state of the core its
    result is on), that core's generator left as it was."""
    device = state.device
    previous = torch.neuron.get_rng_state(device)
    torch.neuron.set_rng_state(state.cpu(), device)
    try:
        return op(*args, **kwargs)
    finally:
        torch.neuron.set_rng_state(previous, device)


def eager_random_replays(graph: torch.fx.GraphModule) -> None:
    """Makes the ``run_with_rng_state`` nodes of ``graph``, a graph (or part of one) that runs
    eagerly, call :func:`replay_random_op`."""
    changed = False
    for node in graph.graph.nodes:
        if node.op == "call_function" and node.target is REPLAYED_RANDOM_OP:
            node.target = replay_random_op
            changed = True
    if changed:
        graph.recompile()
