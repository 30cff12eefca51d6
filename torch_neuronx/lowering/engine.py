"""The one lowering engine: an ATen op or an FX graph of ATen ops -> a JAX function (decision 5).

Eager runs a single op through :func:`lower_op`, or, for an op with no lowering, the graph that
PyTorch's decomposition of it traces to (:func:`trace_decomposition`, then :func:`run_graph`).
torch.compile runs the graphs AOTAutograd produces through the same :func:`run_graph`. Either way
each node is computed by its registered lowering through :func:`registry.apply`, so promotion,
result dtypes and random streams follow one set of rules.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.fx
from torch._ops import OpOverload
from torch.utils import _pytree as pytree

from torch_neuronx._compat.torch_internals import decomposition_table, make_fx
from torch_neuronx.lowering import registry


class Unsupported(Exception):
    """An op, or an op in its decomposition, has no lowering: the caller falls back."""

    def __init__(self, op: object) -> None:
        super().__init__(f"no lowering for {op}")
        self.op = op


def schema_values(op: OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """``op``'s arguments in schema order, defaults filled in."""
    values = []
    for index, argument in enumerate(op._schema.arguments):
        if index < len(args) and not argument.kwarg_only:
            values.append(args[index])
        elif argument.name in kwargs:
            values.append(kwargs[argument.name])
        elif argument.has_default_value():
            values.append(argument.default_value)
        else:
            values.append(None)
    return values


def lower_op(op: OpOverload, args: list[Any], metas: list[Any], result_meta: Any) -> Any:
    """Computes ``op`` at trace time with its registered lowering (arguments in schema order)."""
    entry = registry.LOWERINGS.get(op)
    if entry is None:
        raise Unsupported(op)
    return registry.apply(entry, args, metas, result_meta)


@functools.cache
def decompositions() -> dict[OpOverload, Callable[..., Any]]:
    """PyTorch's decompositions for every op without a lowering of its own."""
    return {op: fn for op, fn in decomposition_table().items() if op not in registry.LOWERINGS}


def has_decomposition(op: OpOverload) -> bool:
    return op in decompositions()


def trace_decomposition(op: OpOverload, metas: list[Any]) -> tuple[torch.fx.GraphModule, list[int]]:
    """The functional graph of ``op`` decomposed until every node has a lowering.

    Args:
        metas: the op's arguments in schema order as PyTorch sees them (meta tensors, CPU scalars,
            Python values); tensors become graph inputs, everything else is a constant.

    Returns:
        The graph and, for each graph input, the flat position of its tensor among ``metas``'
        pytree leaves.
    """
    leaves, spec = pytree.tree_flatten(metas)
    positions = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
    schema = op._schema

    def call(*tensors: torch.Tensor) -> Any:
        filled = list(leaves)
        for position, tensor in zip(positions, tensors, strict=True):
            filled[position] = tensor
        values = pytree.tree_unflatten(filled, spec)
        positional = [v for a, v in zip(schema.arguments, values, strict=True) if not a.kwarg_only]
        keywords = {a.name: v for a, v in zip(schema.arguments, values, strict=True) if a.kwarg_only}
        return op(*positional, **keywords)

    functional = torch.func.functionalize(call, remove="mutations")
    graph = make_fx(functional, decomposition_table=decompositions())(*[leaves[i] for i in positions])
    check_lowerable(graph)
    return graph, positions


def check_lowerable(graph: torch.fx.GraphModule) -> None:
    """Raises Unsupported for the first node that has no lowering."""
    for node in graph.graph.nodes:
        if node.op == "call_function" and node.target is not operator.getitem and node.target not in registry.LOWERINGS:
            raise Unsupported(node.target)


def random_elements(graph: torch.fx.GraphModule) -> int:
    """Random draws of a graph, as the generator counts them: each random op draws one per element
    of its result (at least one)."""
    total = 0
    for node in graph.graph.nodes:
        entry = registry.LOWERINGS.get(node.target) if node.op == "call_function" else None
        if entry is not None and entry.random:
            results = node.meta["val"] if isinstance(node.meta["val"], (tuple, list)) else [node.meta["val"]]
            total += max(sum(t.numel() for t in results if isinstance(t, torch.Tensor)), 1)
    return total


def _meta(value: Any) -> Any:
    if isinstance(value, torch.fx.Node):
        return value.meta["val"]
    return value


def run_graph(graph: torch.fx.GraphModule, inputs: list[Any]) -> list[Any]:
    """Interprets ``graph`` with JAX values for its inputs; returns its flattened outputs.

    Raises:
        Unsupported: a node has no lowering.
    """
    env: dict[torch.fx.Node, Any] = {}
    feed = iter(inputs)
    for node in graph.graph.nodes:
        if node.op == "placeholder":
            env[node] = next(feed)
        elif node.op == "call_function":
            if node.target is operator.getitem:
                container, index = node.args
                env[node] = env[container][index]
                continue
            if not isinstance(node.target, OpOverload):
                raise Unsupported(node.target)
            values = schema_values(node.target, node.args, node.kwargs)
            args = [pytree.tree_map_only(torch.fx.Node, env.__getitem__, v) for v in values]
            metas = [pytree.tree_map_only(torch.fx.Node, _meta, v) for v in values]
            env[node] = lower_op(node.target, args, metas, node.meta["val"])
        elif node.op == "output":
            return [env[leaf] if isinstance(leaf, torch.fx.Node) else leaf for leaf in pytree.tree_leaves(node.args[0])]
        else:
            raise Unsupported(node.op)
    raise RuntimeError("graph has no output node")
