"""Graphs with ops the device runs eagerly but cannot lower: custom ops with a neuron kernel, ops
with side effects, and ops that move data off the core or compute elsewhere.

A custom op registered with a neuron implementation (``torch.library.custom_op(...,
device_types="neuron")``, or a kernel for the PrivateUse1 key) is opaque to the compiler: its
implementation is arbitrary Python. Such a graph is split around those ops; every run of lowerable
ops becomes one executable (a :class:`~torch_neuronx.dynamo.graph.CompiledGraph`) and each opaque op
runs eagerly between them, on the device, as it would outside torch.compile. AOTAutograd wraps ops
with side effects in ``with_effects`` nodes threaded by a token (``_linalg_check_errors`` in
``torch.linalg.solve`` raises for a singular matrix); those run eagerly too, in graph order.

An executable runs on one core. A copy to another device (``x.cpu()``, ``x.to("neuron:1")``, a CPU
input moved to neuron) and any op computing on the CPU run eagerly, as PyTorch's own kernels, so
results land where eager mode puts them; each run of lowerable ops on one core is one executable
(0-dim CPU tensors, which ops accept beside device tensors, stay runtime inputs of it).
"""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx
from torch.fx.passes.split_module import split_module

from torch_neuronx._compat.torch_internals import OpOverload, has_kernel, mark_boxed, pytree, unbacked_symbols
from torch_neuronx.dynamo.graph import CompiledGraph
from torch_neuronx.dynamo.random_replays import eager_random_replays
from torch_neuronx.lowering import registry


def _tensors(value: Any) -> list[torch.Tensor]:
    return [leaf for leaf in pytree.tree_leaves(value) if isinstance(leaf, torch.Tensor)]


def _metas(value: Any) -> Any:
    return pytree.tree_map_only(torch.fx.Node, lambda n: n.meta.get("val"), value)


def core_of(node: torch.fx.Node) -> torch.device | None:
    """The one neuron core a node with tensor results computes on, or None when it computes elsewhere
    or moves data between devices: a result off neuron, results on several devices, or an input
    (other than a 0-dim CPU tensor) on another device than the results."""
    devices = {t.device for t in _tensors(node.meta.get("val"))}
    if len(devices) != 1:
        return None
    (device,) = devices
    if device.type != "neuron":
        return None
    inputs = _tensors(_metas((node.args, node.kwargs)))
    if any(t.device != device and not (t.device.type == "cpu" and t.dim() == 0) for t in inputs):
        return None
    return device


def _makes_data_dependent_sizes(node: torch.fx.Node) -> bool:
    """Whether a node's result has sizes that depend on its inputs' values (``x[x > 0]``, captured
    with ``capture_dynamic_output_shape_ops``): an executable has static shapes, so the node runs
    eagerly and the parts after it are specialised to the sizes it gave."""
    made = unbacked_symbols(node.meta.get("val"))
    return bool(made) and not made <= unbacked_symbols(_metas((node.args, node.kwargs)))


def runs_eagerly(node: torch.fx.Node) -> bool:
    """Whether ``node`` runs eagerly between compiled parts: an op with no lowering that the device
    can nevertheless run, or an op that leaves the core (``core_of`` is None)."""
    if node.op != "call_function" or node.target is operator.getitem:
        return False
    if "drawn_by" in node.meta:  # a generator state (dynamo/random_states.py): where its op runs
        return runs_eagerly(node.meta["drawn_by"])
    if _tensors(node.meta.get("val")) and core_of(node) is None:
        return True
    if _makes_data_dependent_sizes(node):
        return True
    if not isinstance(node.target, OpOverload) and unbacked_symbols(_metas((node.args, node.kwargs))):
        return True  # Python on a value read from a tensor (int(x.item()): math.trunc) is the host's
    if node.target in registry.LOWERINGS:
        return False
    if node.target is torch.ops.higher_order.with_effects:
        return True  # an op with side effects (a check that raises, a print), ordered by its token
    op = node.target
    return isinstance(op, OpOverload) and any(
        has_kernel(op, key)
        for key in ("PrivateUse1", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional")
    )


class _CompiledPart:
    """A lowerable part of a split graph, compiled at its first call (its inputs are real then)."""

    def __init__(self, part: torch.fx.GraphModule, kind: str) -> None:
        self.part = part
        self.kind = kind
        self.compiled: Any = None
        self.placeholders = [n for n in part.graph.nodes if n.op == "placeholder"]
        output = next(n for n in part.graph.nodes if n.op == "output")
        self.returns_tuple = isinstance(output.args[0], (tuple, list))

    def __call__(self, *args: Any) -> Any:
        if self.compiled is None:
            # The part's own example inputs: symbolic ones (automatic dynamic shapes) make it
            # specialise to each call's sizes, as a whole graph does.
            examples = [n.meta.get("val", arg) for n, arg in zip(self.placeholders, args, strict=True)]
            self.compiled = CompiledGraph(self.part, examples, self.kind)
        results = self.compiled(*args)
        return tuple(results) if self.returns_tuple else results[0]


class PartitionedGraph:
    """A graph split into compiled parts and eagerly run opaque ops (same calling convention as
    CompiledGraph: one list of inputs, or the inputs as arguments; returns a list)."""

    def __init__(self, graph: torch.fx.GraphModule, kind: str) -> None:
        mark_boxed(self)
        partition_of: dict[torch.fx.Node, int] = {}
        current, core = 0, None
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
                node_core = core_of(node) if _tensors(node.meta.get("val")) else core
                if core is not None and node_core != core:
                    current += 1  # an executable runs on one core
                core = node_core
                partition_of[node] = current
        self.split = split_module(graph, None, lambda node: partition_of[node], keep_original_order=True)
        for name, part in list(self.split.named_children()):
            ops = [n for n in part.graph.nodes if n.op == "call_function" and n.target is not operator.getitem]
            if not all(runs_eagerly(n) for n in ops):
                delattr(self.split, name)
                setattr(self.split, name, _CompiledPart(part, kind))
            else:
                eager_random_replays(part)

    def __call__(self, *args: Any) -> list[Any]:
        if len(args) == 1 and type(args[0]) is list:
            boxed = args[0]
            args = tuple(boxed)
            boxed.clear()
        outputs = self.split(*args)
        return list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
