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
themselves and so give eager mode's values, views and gradients. A graph that mutates no input is
returned unwrapped.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
import torch.fx

from torch_neuronx import _C
from torch_neuronx._compat.torch_internals import aot_input_mutations

__all__ = ["AliasGuard", "guard_aliasing", "input_names", "overlapping_pair"]


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
