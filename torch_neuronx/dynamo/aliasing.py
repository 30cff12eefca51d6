"""Calls of a compiled function whose inputs overlap in memory while the function mutates one.

AOTAutograd functionalises a graph for the aliasing of the example inputs it was traced with: a
mutation becomes a new value copied back into the input after the graph ran, so every other input
is read as it was before the call. Three cases give values that differ from eager mode (PyTorch's
``aot_eager`` backend shows all three, ``inductor`` the last):

- the graph was traced with inputs that do not overlap and is later called with ones that do
  (``f(base[:5], base[1:])`` after ``f(x, y)``): Dynamo guards on sizes and strides, not on
  storages, so the same graph runs, and reads of the overlapping input are stale;
- the graph was traced with inputs that overlap, one of them mutated: AOTAutograd merges them into
  a "synthetic base" and replays the first call's offsets on later calls, whose inputs may overlap
  differently (wrong elements) or not at all (an error);
- in such a graph, an output that is a view of one of the merged inputs (``b[:3]`` where
  ``b = base[2:8]``) is regenerated from the synthetic base instead of from ``b``: the view starts
  at the wrong offset, or AOTAutograd raises an AssertionError about the view's shape.

:class:`AliasGuard` wraps what AOTAutograd returns for a Dynamo graph. When the graph mutates an
input, every call first checks whether the memory of a mutated input overlaps the memory of another
tensor input; such a call (and every call of a graph AOTAutograd gave synthetic bases) runs the
Dynamo graph eagerly, op by op on the device's eager kernels, which read and write the tensors
themselves and so give eager mode's values, views and gradients. (A write another thread
announced into an input, an async collective's copy back, lands before the graph reads the input,
dynamo/graph.py: AOTAutograd's write-back of the whole input after the graph cannot undo it.) A
graph that mutates no input is returned unwrapped.

Inside a graph, an in-place tensor-list op whose items alias each other
(``torch._foreach_mul_([a, a], 0.5)``, ``_foreach_add_([a[0], a[1]], [a[1], a[0]])``) is
functionalised into one new value per item, each computed from the values before the call, where
eager mode (the CPU's kernels, item by item) lets an item see the update of an item before it.
:func:`split_aliased_list_updates` rewrites such a call into one call per item, in order, before
AOTAutograd sees the graph.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
import torch.fx

from torch_neuronx import _C
from torch_neuronx._compat.torch_internals import (
    OpOverload,
    OpOverloadPacket,
    aot_input_mutations,
    schema_of,
    storage_identity,
)
from torch_neuronx.runtime.spans import byte_span

__all__ = ["AliasGuard", "guard_aliasing", "input_names", "overlapping_pair", "split_aliased_list_updates"]


def input_names(graph: torch.fx.GraphModule) -> list[str]:
    """The user-facing name of each input of a Dynamo graph (its source, such as ``L['a']``), read
    before AOTAutograd, which drops the sources from the graph's placeholders."""
    names = []
    for node in graph.graph.nodes:
        if node.op != "placeholder":
            continue
        source = getattr(node.meta.get("grapharg"), "source", None)
        name = getattr(source, "name", node.name)
        names.append(name() if callable(name) else name)
    return names


def _function_name(graph: torch.fx.GraphModule) -> str:
    """Where the compiled code comes from: the innermost frame of the first op's recorded stack."""
    for node in graph.graph.nodes:
        lines = [line.strip() for line in (node.meta.get("stack_trace") or "").splitlines()]
        frames = [line for line in lines if line.startswith('File "')]
        if frames:
            return frames[-1]
    return "a compiled function"


def overlapping_pair(
    args: tuple[Any, ...] | list[Any], tensor_positions: list[int], mutated: list[bool]
) -> tuple[int, int] | None:
    """The positions ``(mutated input, other input)`` of two tensors among ``args`` whose memory
    ranges overlap, one of them mutated (``mutated[position]``); None when there are none.

    A tensor's range runs from its first element to its last (``data_ptr()`` plus the extent its
    sizes and strides reach), so interleaved views (``x[::2]`` and ``x[1::2]``) count as
    overlapping: the check may send a call eagerly that did not need it, never the reverse.
    Empty tensors overlap nothing. One C++ pass (csrc/runtime/NeuronCallSignature.cpp), about
    0.1 µs a tensor.

    Raises:
        TypeError: ``args[p]`` is not a tensor for some ``p`` in ``tensor_positions``.
    """
    return _C._overlapping_pair(args, tensor_positions, mutated)


class AliasGuard:
    """What Dynamo calls for one graph: AOTAutograd's compiled function, or the Dynamo graph run
    eagerly when a mutated input overlaps another input (see the module docstring).

    Args:
        graph: the Dynamo graph, run eagerly for such calls.
        compiled: what AOTAutograd returned for it.
        names: the inputs' names (:func:`input_names`), for the warning.
        mutated: per input, whether the graph mutates it; None means AOTAutograd rewrote the inputs
            for aliasing it saw while tracing, and every call runs eagerly.
        tensor_positions: positions of the tensor inputs.
    """

    def __init__(
        self,
        graph: torch.fx.GraphModule,
        compiled: Any,
        names: list[str],
        mutated: list[bool] | None,
        tensor_positions: list[int],
    ) -> None:
        self.graph = graph
        self.names = names
        self.compiled = compiled
        self.mutated = mutated
        self.tensor_positions = tensor_positions
        self._warned = False

    def __call__(self, *args: Any) -> Any:
        if self.mutated is None:
            return self._eagerly(args, None)
        pair = overlapping_pair(args, self.tensor_positions, self.mutated)
        if pair is None:
            return self.compiled(*args)
        return self._eagerly(args, pair)

    def __getattr__(self, name: str) -> Any:
        # What Dynamo may read from a backend's result (AOTAutograd's named_parameters, serialize);
        # through __dict__, so that a guard not yet initialised (a copy) does not recurse.
        compiled = self.__dict__.get("compiled")
        if compiled is None:
            raise AttributeError(name)
        return getattr(compiled, name)

    def _eagerly(self, args: tuple[Any, ...], pair: tuple[int, int] | None) -> Any:
        if not self._warned:
            self._warned = True
            names = self.names
            if pair is None:
                what = "was compiled for inputs that overlap in memory, one of them mutated"
            else:
                what = f"mutates input {names[pair[0]]} while input {names[pair[1]]} overlaps it in memory"
            warnings.warn(
                f"torch.compile(backend='neuron'): {_function_name(self.graph)} {what}. AOTAutograd "
                "compiles such calls to stale reads or views at the wrong offset, so they run eagerly, "
                "op by op. Pass inputs that do not overlap (clone one of them) to run compiled.",
                stacklevel=2,
            )
        return self.graph(*args)


def guard_aliasing(graph: torch.fx.GraphModule, example_inputs: list[Any], compiled: Any, names: list[str]) -> Any:
    """``compiled`` (AOTAutograd's function for ``graph``) itself when the graph mutates no input,
    else an :class:`AliasGuard` around it. Call right after AOTAutograd compiled the graph, while
    its tracing context holds the graph's mutation metadata; without that metadata every tensor
    input counts as mutated."""
    tensor_positions = [i for i, value in enumerate(example_inputs) if isinstance(value, torch.Tensor)]
    mutations = aot_input_mutations(graph)
    if mutations is None:
        every = [isinstance(value, torch.Tensor) for value in example_inputs]
        return AliasGuard(graph, compiled, names, every, tensor_positions)
    flags, lifted = mutations
    if len(flags) != lifted + len(example_inputs):
        return AliasGuard(graph, compiled, names, None, tensor_positions)  # synthetic bases
    mutated = flags[lifted:]
    if not any(mutated):
        return compiled
    return AliasGuard(graph, compiled, names, mutated, tensor_positions)


def _in_place_list_arguments(target: Any) -> frozenset[str] | None:
    """The names of the tensor-list arguments an in-place tensor-list op (``torch._foreach_mul_``,
    ``aten._fused_adam_``; the torch function, the packet or an overload) writes, or None for any
    other call target. Such an op returns nothing in every overload."""
    if isinstance(target, OpOverload):
        name = schema_of(target).name
    elif isinstance(target, OpOverloadPacket):
        name = target._qualified_op_name
    elif getattr(torch, getattr(target, "__name__", ""), None) is target:
        name = f"aten::{target.__name__}"
    else:
        return None
    packet = getattr(torch.ops.aten, name.removeprefix("aten::"), None) if name.startswith("aten::") else None
    if packet is None:
        return None
    schemas = [schema_of(getattr(packet, overload)) for overload in packet.overloads()]
    written = {
        argument.name
        for schema in schemas
        for argument in schema.arguments
        if argument.alias_info is not None and argument.alias_info.is_write and str(argument.type) == "List[Tensor]"
    }
    if not written or any(schema.returns for schema in schemas):
        return None
    return frozenset(written)


def _span(value: Any) -> tuple[Any, int, int] | None:
    """(storage identity, first byte, end byte) of the memory a node's example value (a fake
    tensor) spans, or None if it has none; an empty tensor spans nothing."""
    example = value.meta.get("example_value") if isinstance(value, torch.fx.Node) else None
    if not isinstance(example, torch.Tensor):
        return None
    if not example.numel():
        return storage_identity(example), 0, 0
    return storage_identity(example), *byte_span(example)


def _holds_no_tensor(node: torch.fx.Node) -> bool:
    """Whether a node's example value is known and not a tensor (a symbolic scalar)."""
    example = node.meta.get("example_value")
    return example is not None and not isinstance(example, torch.Tensor)


def _items_alias(node: torch.fx.Node, written: frozenset[str], count: int) -> bool:
    """Whether an item the call writes may share memory with a tensor at another index, or with a
    tensor every item reads: their ranges of one storage intersect (interleaved views count); an
    item without an example value counts as sharing."""
    schema_names = [a.name for a in _first_schema(node.target).arguments]
    entries = []  # (index, span, written)
    named = list(zip(schema_names, node.args, strict=False)) + list(node.kwargs.items())
    for name, value in named:
        if isinstance(value, (list, tuple)) and len(value) == count:
            entries.extend((i, _span(item), name in written) for i, item in enumerate(value) if item is not None)
        elif isinstance(value, torch.fx.Node) and not _holds_no_tensor(value):
            entries.append((-1, _span(value), False))
    for index, span, is_written in entries:
        if not is_written:
            continue
        if span is None:
            return True
        storage, first, end = span
        for other_index, other, _ in entries:
            if other_index == index:
                continue
            if other is None or (other[0] == storage and other[1] < end and first < other[2]):
                return True
    return False


def _first_schema(target: Any) -> Any:
    """A schema of the call's op (every overload of an in-place list op names its arguments alike
    up to where they differ in kind)."""
    if isinstance(target, OpOverload):
        return schema_of(target)
    packet = target if isinstance(target, OpOverloadPacket) else getattr(torch.ops.aten, target.__name__)
    return schema_of(getattr(packet, packet.overloads()[0]))


def _item(value: Any, index: int, count: int) -> Any:
    """A call argument for item ``index`` alone: a one-item list of a per-item list, else itself."""
    return [value[index]] if isinstance(value, (list, tuple)) and len(value) == count else value


def split_aliased_list_updates(graph: torch.fx.GraphModule) -> int:
    """Rewrites each in-place tensor-list call of ``graph`` whose items alias (see
    :func:`_items_alias`) into one call per item, in index order, each with one-item lists, as the
    CPU's kernels update item by item. Returns the number of calls rewritten."""
    rewritten = 0
    for node in list(graph.graph.nodes):
        if node.op != "call_function" or node.users:
            continue
        written = _in_place_list_arguments(node.target)
        if written is None or not node.args or not isinstance(node.args[0], (list, tuple)):
            continue
        count = len(node.args[0])
        if count < 2 or not _items_alias(node, written, count):
            continue

        with graph.graph.inserting_before(node):
            for index in range(count):
                call = graph.graph.call_function(
                    node.target,
                    tuple(_item(v, index, count) for v in node.args),
                    {k: _item(v, index, count) for k, v in node.kwargs.items()},
                )
                call.meta = dict(node.meta)
        graph.graph.erase_node(node)
        rewritten += 1
    if rewritten:
        graph.recompile()
    return rewritten
