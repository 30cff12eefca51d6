"""Random ops that activation checkpointing recomputes: the generator state the forward graph saves
for the backward graph, on the device.

When ``torch.utils.checkpoint`` (or a selective checkpointing policy) makes AOTAutograd's partitioner
recompute a random op (dropout) in the backward graph, the two graphs must draw the same elements.
The partitioner wraps the forward op in ``run_and_save_rng_state(op, *args)``, which returns
``(state, result)``, passes ``state`` to the backward graph as a saved tensor, and wraps the
recomputed op there in ``run_with_rng_state(state, op, *args)``. For a device it does not know it
describes ``state`` as the CPU generator's (a 5,056-byte CPU tensor), and PyTorch's implementation
of ``run_and_save_rng_state`` knows only CPU, CUDA, HPU and XPU tensors.

On neuron the state is the core's (seed, offset) where the op draws (decision 11), 16 bytes on the
device (``torch.neuron.get_rng_state``'s layout): :func:`device_random_states` puts
``torch_neuronx::generator_state`` before the forward op (the lowering returns the trace's state
there), and makes the backward graph take that tensor; the lowering engine runs the recomputed op
with its draws taken from it (``TraceContext.replaying``). The forward graph advances the generator
by the op's elements, as eager does; the backward graph does not. A random op that runs eagerly
between compiled parts (a copy to another core) has its state taken eagerly right before it, and
its replay sets and restores the core's generator (dynamo/random_replays.py), as CUDA's
``run_with_rng_state`` does.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx

from torch_neuronx._compat.torch_internals import fake_result, pytree
from torch_neuronx.dynamo.graph import CompileError, source_line
from torch_neuronx.lowering import registry
from torch_neuronx.lowering.engine import REPLAYED_RANDOM_OP, metas

SAVED_RANDOM_OP = torch.ops.higher_order.run_and_save_rng_state


def _first_tensor(values: Any) -> torch.Tensor:
    """The first tensor of ``values``: a random op's result, whose core draws it (``torch.rand(3,
    device=...)`` has no tensor argument; ``rand_like(t, device="neuron:1")`` draws on another core
    than its argument's)."""
    return next(v for v in pytree.tree_leaves(values) if isinstance(v, torch.Tensor))


def _state_meta(like: torch.Tensor) -> torch.Tensor:
    """A (fake) 16-byte generator state on ``like``'s device."""
    return like.new_empty(16, dtype=torch.uint8)


def device_random_states(graph: torch.fx.GraphModule, example_inputs: list[Any]) -> list[Any]:
    """Rewrites the partitioner's ``run_and_save_rng_state`` nodes of ``graph`` into
    ``generator_state(device)`` followed by the op itself, and describes the states that
    ``run_with_rng_state`` nodes read as 16-byte device tensors; returns ``example_inputs`` with
    those states' example values replaced alike."""
    nodes = list(graph.graph.nodes)
    if not any(node.target in (SAVED_RANDOM_OP, REPLAYED_RANDOM_OP) for node in nodes):
        return example_inputs
    example_inputs = list(example_inputs)
    placeholders = [node for node in nodes if node.op == "placeholder"]
    for node in nodes:
        if node.op != "call_function" or node.target not in (SAVED_RANDOM_OP, REPLAYED_RANDOM_OP):
            continue
        op = node.args[0] if node.target is SAVED_RANDOM_OP else node.args[1]
        if op not in registry.LOWERINGS:  # it would run eagerly, apart from the state it must draw from
            raise CompileError(
                f"torch.compile(backend='neuron') cannot recompute {op} under activation checkpointing: "
                f"it has no neuron lowering, so it cannot draw from the saved generator state. It comes from: "
                f"{source_line(node)}. Save its result instead (a checkpoint policy of MUST_SAVE for it), or "
                "leave it out of the checkpointed region."
            )
        if node.target is SAVED_RANDOM_OP:
            op, *args = node.args
            getters = {user.args[1]: user for user in node.users if user.target is operator.getitem}
            result_meta = (
                getters[1].meta["val"] if 1 in getters else fake_result(op, *metas(args), **metas(node.kwargs))
            )
            like = _first_tensor(result_meta)
            with graph.graph.inserting_before(node):
                state = graph.graph.call_function(torch.ops.torch_neuronx.generator_state.default, (like.device,))
                result = graph.graph.call_function(op, tuple(args), dict(node.kwargs))
            state.meta["val"] = _state_meta(like)
            state.meta["drawn_by"] = result  # dynamo/partition.py: the state runs where the op runs
            result.meta = dict(getters[1].meta) if 1 in getters else {"val": result_meta}
            for index, getter in getters.items():
                getter.replace_all_uses_with(state if index == 0 else result)
                graph.graph.erase_node(getter)
            graph.graph.erase_node(node)
        elif node.target is REPLAYED_RANDOM_OP:
            state, op, *args = node.args
            if "val" not in node.meta:  # the partitioner made the node without one
                node.meta["val"] = fake_result(op, *metas(args), **metas(node.kwargs))
            like = _first_tensor(node.meta["val"])
            if state.meta.get("val") is None or state.meta["val"].device != like.device:
                state.meta["val"] = _state_meta(like)
                if state in placeholders:
                    example_inputs[placeholders.index(state)] = state.meta["val"]
    graph.recompile()
    return example_inputs
