"""Graphs with ops the device runs eagerly but cannot lower: custom ops with a neuron kernel, and
ops with side effects.

A custom op registered with a neuron implementation (``torch.library.custom_op(...,
device_types="neuron")``, or a kernel for the PrivateUse1 key) is opaque to the compiler: its
implementation is arbitrary Python. Such a graph is split around those ops; every run of lowerable
ops becomes one executable (a :class:`~torch_neuronx.dynamo.graph.CompiledGraph`) and each opaque op
runs eagerly between them, on the device, as it would outside torch.compile. AOTAutograd wraps ops
with side effects in ``with_effects`` nodes threaded by a token (``_linalg_check_errors`` in
``torch.linalg.solve`` raises for a singular matrix); those run eagerly too, in graph order.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx
from torch._ops import OpOverload
from torch.fx.passes.split_module import split_module

from torch_neuronx._compat.torch_internals import has_kernel
from torch_neuronx.lowering import registry


def runs_eagerly(node: torch.fx.Node) -> bool:
    """Whether ``node`` is an op with no lowering that the device can nevertheless run eagerly."""
    if node.op != "call_function" or node.target is operator.getitem or node.target in registry.LOWERINGS:
        return False
    if node.target is torch.ops.higher_order.with_effects:
        return True  # an op with side effects (a check that raises, a print), ordered by its token
    op = node.target
    return isinstance(op, OpOverload) and (has_kernel(op, "PrivateUse1") or has_kernel(op, "CompositeExplicitAutograd"))


class _CompiledPart:
    """A lowerable part of a split graph, compiled at its first call (its inputs are real then)."""

    def __init__(self, part: torch.fx.GraphModule, kind: str) -> None:
        self.part = part
        self.kind = kind
        self.compiled: Any = None
        output = next(n for n in part.graph.nodes if n.op == "output")
        self.returns_tuple = isinstance(output.args[0], (tuple, list))

    def __call__(self, *args: Any) -> Any:
        from torch_neuronx.dynamo.graph import CompiledGraph

        if self.compiled is None:
            self.compiled = CompiledGraph(self.part, list(args), self.kind)
        results = self.compiled(*args)
        return tuple(results) if self.returns_tuple else results[0]


class PartitionedGraph:
    """A graph split into compiled parts and eagerly run opaque ops (same calling convention as
    CompiledGraph: one list of inputs, or the inputs as arguments; returns a list)."""

    def __init__(self, graph: torch.fx.GraphModule, kind: str) -> None:
        self._boxed_call = True
        partition_of: dict[torch.fx.Node, int] = {}
        current = 0
        for node in graph.graph.nodes:
            if node.op != "call_function":
                continue
            if runs_eagerly(node):
                current += 1
                partition_of[node] = current
                current += 1
            elif node.target is operator.getitem and runs_eagerly(node.args[0]):
                # results of an eager op (a token among them) are unpacked eagerly, next to it
                partition_of[node] = partition_of[node.args[0]]
            else:
                partition_of[node] = current
        self.split = split_module(graph, None, lambda node: partition_of[node], keep_original_order=True)
        for name, part in list(self.split.named_children()):
            ops = [n for n in part.graph.nodes if n.op == "call_function" and n.target is not operator.getitem]
            if not all(runs_eagerly(n) for n in ops):
                delattr(self.split, name)
                setattr(self.split, name, _CompiledPart(part, kind))

    def __call__(self, *args: Any) -> list[Any]:
        if len(args) == 1 and type(args[0]) is list:
            boxed = args[0]
            args = tuple(boxed)
            boxed.clear()
        outputs = self.split(*args)
        return list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
