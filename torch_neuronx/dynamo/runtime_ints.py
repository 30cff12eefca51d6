"""Python ints that a compiled graph takes as runtime scalars instead of specialising on them.

Dynamo makes a Python int argument symbolic when its value changes between calls (automatic
dynamic): ``f(x, step)`` in a training loop. A symbolic graph is specialised on its inputs' values
before it is lowered (dynamo/graph.py), which built one executable per step. An int that the graph
uses only as an operand, as eager ops take a Python number (a Scalar argument, or a Tensor one that
the number is wrapped into), or through integer arithmetic into such operands, or returns as it is
(AOTAutograd's forward graph saves it for the backward graph), changes no shape: the executable
takes it as a runtime int64 scalar, as eager kernels take runtime scalars, and one executable serves
every value. An int that a size, a dim, an op without a lowering or a static argument of a lowering
uses keeps the specialisation.
"""

from __future__ import annotations

import dataclasses
import operator
from typing import Any

import torch
import torch.fx

from torch_neuronx._compat.torch_internals import OpOverload, pytree, schema_of, symint_hint
from torch_neuronx.lowering import engine, registry
from torch_neuronx.runtime import arguments

_ARITHMETIC = engine.INT_ARITHMETIC
_DIVISIONS = frozenset({operator.floordiv, operator.mod})


@dataclasses.dataclass
class RuntimeInts:
    """What :func:`find` found: the graph's runtime int inputs and the int outputs that are inputs."""

    #: Input positions taken as runtime scalars.
    inputs: list[int]
    #: (output position, input position) of the runtime ints the graph returns as they are; the
    #: executable returns the value it was built with, the caller puts the call's in its place.
    returned: list[tuple[int, int]]


def _operand_use(user: torch.fx.Node, value: torch.fx.Node) -> bool:
    """Whether ``user``, a lowered op, takes ``value`` only as a runtime number."""
    entry = registry.LOWERINGS.get(user.target)
    if entry is None:
        return False
    values = engine.schema_values(user.target, user.args, user.kwargs)
    return all(
        given is value
        and arguments.argument_type(argument) in (arguments.ArgumentType.NUMBER, arguments.ArgumentType.TENSOR)
        and argument.name not in entry.static
        for argument, given in zip(schema_of(user.target).arguments, values, strict=True)
        if given is value or value in pytree.tree_leaves(given)
    )


def _arithmetic_use(user: torch.fx.Node, value: torch.fx.Node) -> bool:
    if user.target not in _ARITHMETIC or user.kwargs:
        return False
    if user.target in _DIVISIONS:
        divisor = user.args[1]
        if isinstance(divisor, torch.fx.Node) or divisor == 0:
            return False
    return all(isinstance(arg, int) or arg is value or _is_runtime(arg) for arg in user.args)


def _is_runtime(node: Any) -> bool:
    """Whether an int-valued node can be a runtime value: every use of it is an operand, arithmetic
    whose result is such a value, or the graph's output."""
    if not isinstance(node, torch.fx.Node) or not node.users:
        return False
    for user in node.users:
        if user.op == "output":
            continue
        if user.op != "call_function":
            return False
        if isinstance(user.target, OpOverload):
            if not _operand_use(user, node):
                return False
        elif not (_arithmetic_use(user, node) and _is_runtime(user)):
            return False
    return True


def find(graph: torch.fx.GraphModule, example_inputs: list[Any]) -> RuntimeInts:
    """The inputs of ``graph`` that its executable can take as runtime ints. When every symbolic
    input is one, :func:`concretise` makes the graph lowerable as it is."""
    placeholders = [node for node in graph.graph.nodes if node.op == "placeholder"]
    positions = []
    for index, (node, value) in enumerate(zip(placeholders, example_inputs, strict=False)):
        # AOTAutograd may compile a backward graph with the forward's saved ints as plain ints;
        # its placeholders keep the SymInts.
        symbolic = isinstance(value, torch.SymInt) or (
            type(value) is int and isinstance(node.meta.get("val"), torch.SymInt)
        )
        if symbolic and _is_runtime(node):
            positions.append(index)
    output = next(node for node in graph.graph.nodes if node.op == "output")
    leaves = pytree.tree_leaves(output.args[0])
    returned = [(at, index) for index in positions for at, leaf in enumerate(leaves) if leaf is placeholders[index]]
    return RuntimeInts(positions, returned)


def concretise(graph: torch.fx.GraphModule, example_inputs: list[Any], found: RuntimeInts) -> None:
    """Gives the runtime ints, and the arithmetic on them, the example's values as their metadata:
    lowerings see numbers where eager kernels see a call's runtime scalars (the values only tell
    their type: the executable takes the values at run time). New metadata dicts, as AOTAutograd's
    backward graph may share the forward's."""
    placeholders = [node for node in graph.graph.nodes if node.op == "placeholder"]
    for index in found.inputs:
        example = example_inputs[index]
        hint = example if type(example) is int else symint_hint(example)
        placeholders[index].meta = {**placeholders[index].meta, "val": hint}
    for node in graph.graph.nodes:
        if node.op == "call_function" and node.target in _ARITHMETIC:
            operands = [arg.meta["val"] if isinstance(arg, torch.fx.Node) else arg for arg in node.args]
            node.meta = {**node.meta, "val": node.target(*operands)}
