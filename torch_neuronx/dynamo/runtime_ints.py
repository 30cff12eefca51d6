"""Python ints that a compiled graph takes as runtime scalars instead of specialising on them.

Dynamo makes a Python int argument symbolic when its value changes between calls (automatic
dynamic): ``f(x, step)`` in a training loop. A symbolic graph is specialised on its inputs' values
before it is lowered (dynamo/graph.py), which built one executable per step. An int that the graph
uses only as an operand, as eager ops take a Python number (a Scalar argument, or a Tensor one that
the number is wrapped into), or returns as it is (AOTAutograd's forward graph saves it for the
backward graph), changes no shape: the executable takes it as a runtime int64 scalar, as eager
kernels take runtime scalars, and one executable serves every value. Each call makes the checks an
eager kernel makes of its numbers on the host (a lowering's dtype rule, which may read them: an
integer tensor to a negative power) with the call's values.

Python arithmetic on them (``x * (step + 1)``, ``step // 2``, ``step / 10``: Dynamo records it as
``operator`` nodes) is the host's: :class:`HostArithmetic` takes it out of the graph, computes it
at each call with Python's meaning (unbounded ints, floor division, true division to a float), and
gives the executable its results as runtime scalars of their own.

Anything else keeps the specialisation: an int that a size, a dim, an op without a lowering or a
static argument of a lowering uses. An int an op reads past 64 bits raises OverflowError at the
call, as eager does; one no op reads may be any Python int.
"""

from __future__ import annotations

import builtins
import dataclasses
import math
import operator
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.fx

from torch_neuronx._compat.torch_internals import OpOverload, pytree, schema_of, symint_hint
from torch_neuronx.lowering import engine, registry
from torch_neuronx.runtime import arguments

#: The ints a runtime scalar holds (int64, or uint64 above it, as eager's scalars).
_SCALAR_RANGE = range(-(2**63), 2**64)

#: Python's arithmetic on numbers as Dynamo records it in a graph; the host computes it.
_HOST_ARITHMETIC = frozenset(
    {
        operator.add,
        operator.sub,
        operator.mul,
        operator.floordiv,
        operator.truediv,
        operator.mod,
        operator.pow,
        operator.neg,
        operator.abs,
        torch.sym_max,
        torch.sym_min,
        torch.sym_float,
        torch.sym_int,
        torch.sym_sqrt,
        math.trunc,
        math.floor,
        math.ceil,
        math.sqrt,
        builtins.round,
    }
)


def _is_symbolic_number(value: Any) -> bool:
    return isinstance(value, (torch.SymInt, torch.SymFloat))


@dataclasses.dataclass(frozen=True)
class _Step:
    """One Python operation of :class:`HostArithmetic`: ``target(*args)``, where an argument that is
    a str names an earlier result or a graph input (FX node names are unique)."""

    name: str
    target: Callable[..., Any]
    args: tuple[Any, ...]


@dataclasses.dataclass
class HostArithmetic:
    """Python arithmetic on a graph's symbolic int inputs, taken out of the graph: each result that
    the graph uses becomes a new input of it, after the caller's, that :meth:`values` computes."""

    #: The graph inputs that the arithmetic reads: name to position in a call.
    reads: dict[str, int]
    steps: list[_Step]
    #: The names of the steps whose values are the graph's new inputs, in their order.
    results: list[str]

    @classmethod
    def hoist(cls, graph: torch.fx.GraphModule, example_inputs: list[Any]) -> tuple[HostArithmetic, list[Any]]:
        """Takes the arithmetic out of ``graph`` (changed in place); returns it and the example
        inputs of the changed graph (the arithmetic's symbolic results after ``example_inputs``)."""
        placeholders = [node for node in graph.graph.nodes if node.op == "placeholder"]
        reads = {
            node: index
            for index, (node, value) in enumerate(zip(placeholders, example_inputs, strict=False))
            if _is_symbolic_number(value) or _is_symbolic_number(node.meta.get("val"))
        }
        hoisted: list[torch.fx.Node] = []
        for node in graph.graph.nodes:
            if (
                node.op == "call_function"
                and node.target in _HOST_ARITHMETIC
                and not node.kwargs
                and _is_symbolic_number(node.meta.get("val"))
                and all(arg in reads or arg in hoisted for arg in node.all_input_nodes)
            ):
                hoisted.append(node)
        kept = set(hoisted)
        results = [node for node in hoisted if any(user not in kept for user in node.users)]
        if not results:
            return cls({}, [], []), example_inputs
        arithmetic = cls(
            {node.name: index for node, index in reads.items()},
            [
                _Step(node.name, node.target, tuple(a.name if isinstance(a, torch.fx.Node) else a for a in node.args))
                for node in hoisted
            ],
            [node.name for node in results],
        )
        examples = [*example_inputs, *(node.meta["val"] for node in results)]
        anchor = placeholders[-1]
        for node in results:
            with graph.graph.inserting_after(anchor):
                anchor = graph.graph.placeholder(f"host_{node.name}")
            anchor.meta = {"val": node.meta["val"]}
            node.replace_all_uses_with(anchor, delete_user_cb=lambda user: user not in kept)
        for node in reversed(hoisted):
            graph.graph.erase_node(node)
        graph.recompile()
        return arithmetic, examples

    def values(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        """The results of the arithmetic for this call's inputs, as Python computes them.

        Raises:
            ZeroDivisionError, OverflowError: where Python's arithmetic raises for these values.
        """
        if not self.results:
            return ()
        env = {name: args[position] for name, position in self.reads.items()}
        for step in self.steps:
            env[step.name] = step.target(*(env[a] if isinstance(a, str) else a for a in step.args))
        return tuple(env[name] for name in self.results)


@dataclasses.dataclass
class _ValueCheck:
    """The host checks of an op that takes runtime ints (its lowering's dtype rule, which may read
    their values, and its call warning), with its arguments by name as the checks see them;
    ``positions`` maps an argument's name to the graph input that gives its value."""

    rule: Callable[[dict[str, Any]], None] | None
    warning: Callable[[dict[str, Any]], str | None] | None
    arguments: dict[str, Any]
    positions: dict[str, int]

    def check(self, args: tuple[Any, ...]) -> None:
        arguments = {**self.arguments, **{name: args[position] for name, position in self.positions.items()}}
        if self.rule is not None:
            self.rule(arguments)
        message = self.warning(arguments) if self.warning is not None else None
        if message:
            warnings.warn(message, stacklevel=4)


@dataclasses.dataclass
class RuntimeInts:
    """A graph's runtime int inputs."""

    #: Input positions taken as runtime scalars.
    inputs: list[int]
    #: The host checks of the ops that take them, made at every call.
    checks: list[_ValueCheck] = dataclasses.field(default_factory=list)
    #: The runtime ints no op of the graph reads (returned as they are, or read only by the host's
    #: arithmetic): the executable gets 0 for them, so any Python int passes, as in eager.
    unread: list[int] = dataclasses.field(default_factory=list)
    #: How many of the graph's inputs are the caller's; the others are :class:`HostArithmetic`'s.
    caller_inputs: int = 0

    def check(self, args: tuple[Any, ...]) -> None:
        """Makes the eager kernels' host checks of this call's runtime ints.

        Raises:
            OverflowError: an int an op reads does not fit a runtime scalar (int64, or uint64), as
                eager's "int too big to convert".
            RuntimeError: what the eager kernel raises for its value.
        """
        for position in self.inputs:
            value = args[position]
            if type(value) is int and value not in _SCALAR_RANGE and position not in self.unread:
                what = (
                    f"the int argument {value}"
                    if position < self.caller_inputs
                    else f"the int {value}, which Python arithmetic in the compiled function computes from its "
                    "int arguments,"
                )
                raise OverflowError(
                    f"torch.compile(backend='neuron'): {what} does not fit in 64 bits (eager raises \"int too big "
                    'to convert" for it too); reduce it, or compute it with tensors'
                )
        for check in self.checks:
            check.check(args)

    def executable_args(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        """``args`` with 0 for the ints the executable does not read."""
        if not self.unread:
            return args
        return tuple(0 if position in self.unread else value for position, value in enumerate(args))


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


def _is_runtime(node: torch.fx.Node) -> bool:
    """Whether every use of a number input is an operand of a lowered op or the graph's output (an
    input that the graph does not use is one too: its arithmetic is the host's)."""
    return all(
        user.op == "output"
        or (user.op == "call_function" and isinstance(user.target, OpOverload) and _operand_use(user, node))
        for user in node.users
    )


def find(graph: torch.fx.GraphModule, example_inputs: list[Any]) -> RuntimeInts:
    """The inputs of ``graph`` that its executable can take as runtime ints. When every symbolic
    input is one, :func:`concretise` makes the graph lowerable as it is."""
    placeholders = [node for node in graph.graph.nodes if node.op == "placeholder"]
    positions = []
    for index, (node, value) in enumerate(zip(placeholders, example_inputs, strict=False)):
        # AOTAutograd may compile a backward graph with the forward's saved ints as plain ints;
        # its placeholders keep the SymInts.
        symbolic = _is_symbolic_number(value) or (
            type(value) in (int, float) and _is_symbolic_number(node.meta.get("val"))
        )
        if symbolic and _is_runtime(node):
            positions.append(index)
    unread = [index for index in positions if all(user.op == "output" for user in placeholders[index].users)]
    return RuntimeInts(positions, unread=unread)


def set_values(graph: torch.fx.GraphModule, found: RuntimeInts, args: tuple[Any, ...]) -> None:
    """Gives the runtime ints the values of ``args`` (the call being built) as their metadata, so
    that the lowering's own checks see the values its call has (the later calls are checked by
    :meth:`RuntimeInts.check`)."""
    placeholders = [node for node in graph.graph.nodes if node.op == "placeholder"]
    for index in found.inputs:
        placeholders[index].meta = {**placeholders[index].meta, "val": args[index]}


def concretise(graph: torch.fx.GraphModule, example_inputs: list[Any], found: RuntimeInts) -> None:
    """Gives the runtime ints the example's values as their metadata (lowerings see numbers where
    eager kernels see a call's runtime scalars: the values only tell their type, the executable
    takes them at run time), in new metadata dicts (AOTAutograd's backward graph may share the
    forward's), and records the host checks of the ops that take them."""
    placeholders = [node for node in graph.graph.nodes if node.op == "placeholder"]
    position_of = {placeholders[index]: index for index in found.inputs}
    for index in found.inputs:
        example = example_inputs[index]
        hint = example if type(example) in (int, float) else symint_hint(example)
        placeholders[index].meta = {**placeholders[index].meta, "val": hint}
    for node in graph.graph.nodes:
        if node.op != "call_function" or not any(arg in position_of for arg in node.all_input_nodes):
            continue
        entry = registry.LOWERINGS[node.target]  # every user of a runtime int is a lowered op (find)
        if entry.dtype_rule is None and entry.call_warning is None:
            continue
        names = [argument.name for argument in schema_of(node.target).arguments]
        values = engine.schema_values(node.target, node.args, node.kwargs)
        found.checks.append(
            _ValueCheck(
                entry.dtype_rule,
                entry.call_warning,
                dict(zip(names, map(engine.metas, values), strict=True)),
                {
                    n: position_of[v]
                    for n, v in zip(names, values, strict=True)
                    if isinstance(v, torch.fx.Node) and v in position_of
                },
            )
        )
