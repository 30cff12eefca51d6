"""The Dynamo backend ``neuron``: Dynamo -> AOTAutograd -> the lowering engine -> one executable per graph.

``torch.compile(model, backend="neuron")`` (or ``torch.compiler.set_default_backend("neuron")``
then ``model.compile()``) reaches :func:`neuron_backend` through the ``torch_dynamo_backends``
entry point. AOTAutograd functionalises the captured graph (input mutations become outputs it copies
back, aliased outputs are regenerated from their bases), decomposes ops the device has no lowering
for with PyTorch's decompositions, and partitions forward and backward; each graph becomes a
:class:`~torch_neuronx.dynamo.graph.CompiledGraph`.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
import torch.fx

from torch_neuronx._compat.torch_internals import (
    aot_autograd,
    assumes_static_shapes_by_default,
    default_partition,
    forget_aot_metadata,
    mark_boxed,
    requested_dynamic_dims,
)
from torch_neuronx.dynamo.aliasing import guard_aliasing, input_names, split_aliased_list_updates
from torch_neuronx.dynamo.eager_refusals import RefusedCall, find_refusal
from torch_neuronx.dynamo.float64_round_trips import fold_float64_round_trips
from torch_neuronx.dynamo.fused_ops import restore_fused_ops
from torch_neuronx.dynamo.graph import CompiledGraph, source_line
from torch_neuronx.dynamo.partition import PartitionedGraph, runs_eagerly
from torch_neuronx.dynamo.random_states import device_random_states

__all__ = ["neuron_backend"]

# torch.fx keeps ``aten._assert_async.msg`` and Dynamo's ``torch._assert_async`` from dead-code
# elimination, but not the ATen overload ``torch._assert_async(t)`` becomes in AOTAutograd's graph
# (``aten._assert_async.default``, PyTorch 2.13): without this its assertion would vanish silently
# from every compiled graph. Its lowering is a device check (lowering/assertions.py).
torch.fx.node.has_side_effect(torch.ops.aten._assert_async.default)


def _requested_dynamic_dimension(graph: torch.fx.GraphModule) -> str | None:
    """The first symbolic dimension the user asked for (dynamic=True or torch._dynamo.mark_dynamic),
    described for the error message; None when shapes are static or Dynamo made them dynamic itself."""
    requested_everywhere = not assumes_static_shapes_by_default()
    for node in graph.graph.nodes:
        if node.op != "placeholder":
            continue
        value = node.meta.get("example_value")
        if not isinstance(value, torch.Tensor):
            continue
        grapharg = node.meta.get("grapharg")
        marked = requested_dynamic_dims(grapharg.example if grapharg is not None else None)
        for dim, size in enumerate(value.shape):
            if isinstance(size, torch.SymInt) and (requested_everywhere or dim in marked):
                source = getattr(grapharg, "source", None)
                name = getattr(source, "name", node.name)
                source = name() if callable(name) else name
                return f"dimension {dim} of {source} (symbolic size {size})"
    return None


class _ConstantsAsInputs:
    """A compiled graph whose tensor constants (``get_attr`` nodes: ``torch.tensor([...])`` in the
    traced code, which AOTAutograd keeps as attributes of the graph) are passed as extra inputs,
    after the graph's own: the lowering engine only reads values from inputs."""

    def __init__(self, compiled: Any, constants: list[torch.Tensor]) -> None:
        mark_boxed(self)
        self.compiled = compiled
        self.constants = constants

    def __call__(self, *args: Any) -> list[Any]:
        if len(args) == 1 and type(args[0]) is list:
            boxed = args[0]
            args = tuple(boxed)
            boxed.clear()
        return self.compiled([*args, *self.constants])


def _lift_constants(graph: torch.fx.GraphModule) -> list[torch.Tensor]:
    """Turns every tensor ``get_attr`` node of ``graph`` into a placeholder after the existing ones
    (in place) and returns the tensors, in the order of the new placeholders."""
    nodes = list(graph.graph.nodes)
    first_computation = next((n for n in nodes if n.op != "placeholder"), None)
    constants: list[torch.Tensor] = []
    for node in nodes:
        if node.op != "get_attr":
            continue
        value = graph
        for part in str(node.target).split("."):
            value = getattr(value, part)
        if not isinstance(value, torch.Tensor):
            continue
        with graph.graph.inserting_before(first_computation):
            placeholder = graph.graph.placeholder(f"constant_{len(constants)}")
        # The real tensor stands in for its fake: the engine reads only its shape, dtype and device.
        placeholder.meta["val"] = node.meta.get("val", value)
        node.replace_all_uses_with(placeholder)
        graph.graph.erase_node(node)
        constants.append(value)
    if constants:
        graph.recompile()
    return constants


#: Ops whose PyTorch decomposition does not survive as graph nodes, so they stay whole in the graph
#: and the lowering engine decomposes them inside the executable, as eager does: tril/triu_indices
#: compute in float64 (which would meet the FP64 policy's check of every node, graph.py, which eager
#: never sees); linspace/logspace with tensor bounds make their steps on the default device (CPU),
#: which AOTAutograd's fake tensors refuse beside the neuron bounds.
_DECOMPOSED_WHEN_LOWERED = frozenset(
    {
        torch.ops.aten.tril_indices.default,
        torch.ops.aten.triu_indices.default,
        *(
            getattr(packet, overload)
            for packet in (torch.ops.aten.linspace, torch.ops.aten.logspace)
            for overload in ("Tensor_Tensor", "Tensor_Scalar", "Scalar_Tensor")
        ),
    }
)


def compile_graph(graph: torch.fx.GraphModule, example_inputs: list[Any], kind: str) -> Any:
    """The callable AOTAutograd gets for one graph: one executable, or compiled parts around ops
    that run eagerly (dynamo/partition.py)."""
    restore_fused_ops(graph)
    fold_float64_round_trips(graph)
    example_inputs = device_random_states(graph, example_inputs)
    constants = _lift_constants(graph)
    example_inputs = [*example_inputs, *constants]
    if any(runs_eagerly(node) for node in graph.graph.nodes):
        compiled: Any = PartitionedGraph(graph, kind)
    else:
        compiled = CompiledGraph(graph, example_inputs, kind)
    return _ConstantsAsInputs(compiled, constants) if constants else compiled


def _partition(joint: torch.fx.GraphModule, joint_inputs: Any, **kwargs: Any) -> Any:
    """AOTAutograd's default partition of the joint graph, after its float64 round trips are folded:
    a float read with ``.item()`` that the backward uses too is then saved in its own dtype, not as
    the float64 tensor the FP64 policy refuses."""
    fold_float64_round_trips(joint)
    return default_partition(joint, joint_inputs, **kwargs)


def neuron_backend(
    graph: torch.fx.GraphModule, example_inputs: list[Any], *, mode: str | None = None, options: Any = None
) -> Any:
    """Compiles a Dynamo graph for the neuron device.

    Args:
        mode: torch.compile's mode; anything but "default" warns and compiles as "default".
        options: not supported (raises ValueError).

    Raises:
        ValueError: ``options`` were given.
        RuntimeError: the user asked for dynamic shapes (``dynamic=True``, ``mark_dynamic``): neuron
            compiles static shapes, one executable per input shape.
    """
    from torch_neuronx import runtime
    from torch_neuronx.eager import registration
    from torch_neuronx.lowering import engine, pointwise

    if options:
        raise ValueError(f"torch.compile(backend='neuron') takes no options, got {options!r}")
    if mode not in (None, "default"):
        warnings.warn(
            f"torch.compile(backend='neuron', mode={mode!r}): neuron compiles every graph the same way; "
            "using mode='default'.",
            stacklevel=2,
        )
    dynamic = _requested_dynamic_dimension(graph)
    if dynamic is not None:
        raise RuntimeError(
            f"torch.compile on neuron compiles static shapes, but {dynamic} was made dynamic "
            "(dynamic=True or torch._dynamo.mark_dynamic). Use dynamic=False (or leave it unset): each new "
            "input shape then compiles its own graph."
        )
    # The device starts here if no op has run yet: which ops have neuron kernels decides how a graph
    # is partitioned (dynamo/partition.py).
    runtime.start()
    registration.register_kernels()
    pointwise.register_prims_fma()

    def compiler(kind: str):
        return lambda gm, inputs: compile_graph(gm, list(inputs), kind)

    names = input_names(graph)
    split_aliased_list_updates(graph)  # before AOTAutograd functionalises them (dynamo/aliasing.py)
    forget_aot_metadata()
    refused = find_refusal(graph, example_inputs)  # also ops AOTAutograd decomposes (dynamo/eager_refusals.py)
    if refused is not None:
        error, node = refused
        error.add_note(f"torch.compile(backend='neuron') node {node.name} ({source_line(node)})")
        return RefusedCall(error)
    compiled = aot_autograd(
        fw_compiler=compiler("forward"),
        bw_compiler=compiler("backward"),
        inference_compiler=compiler("inference"),
        partition_fn=_partition,
        decompositions={op: fn for op, fn in engine.decompositions().items() if op not in _DECOMPOSED_WHEN_LOWERED},
        keep_inference_input_mutations=False,
    )(graph, example_inputs)
    # AOTAutograd's functionalisation is wrong for calls whose inputs overlap where one is mutated
    # (dynamo/aliasing.py): those run eagerly.
    return guard_aliasing(graph, example_inputs, compiled, names)
