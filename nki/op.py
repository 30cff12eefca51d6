"""``torch_neuronx.nki_op``: a PyTorch custom operator whose implementation calls NKI kernels.

``@nki_op("mylib::my_op", mutates_args=...)`` makes a ``torch.library`` custom op of a function that
allocates its outputs and calls kernels (``out = torch.empty_like(x); kernel(x, out); return out``):

- eager: the op runs the function on neuron tensors; each kernel call launches on the device;
- fake tensors (``torch.compile``'s tracing): the function runs on fake tensors, each kernel call
  giving its outputs' shapes from its trace; so the op's fake kernel is the function itself;
- compiled graphs: the op's lowering traces the function (``make_fx``, functionalized) into a graph
  of ATen ops and kernel calls and runs it with the graph's other nodes, so the kernel is part of the
  graph's single executable; an op that mutates its arguments reaches the lowering through
  AOTAutograd's ``auto_functionalized`` and returns the arguments' new values;
- autograd: ``op.register_autograd(backward, setup_context=...)`` (torch.library's own).

An output that is one of the op's inputs (a kernel returning the argument it wrote) is returned as a
copy, since a custom op's outputs may not alias its inputs.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Iterable
from typing import Any

import torch
import torch.fx

from nki import framework  # noqa: F401 - registers nki::kernel_call and its lowering
from nki.kernel import Kernel, jit
from torch_neuronx._compat.torch_internals import make_fx, pytree, schema_of
from torch_neuronx.lowering import engine
from torch_neuronx.lowering.registry import lowering

__all__ = ["nki_op", "wrap_nki"]


def wrap_nki(kernel: Any) -> Kernel:
    """An NKI kernel callable on torch tensors (``wrap_nki(kernel)[grid](...)``): the kernel itself,
    decorated with :func:`nki.jit` if it is a plain function."""
    return kernel if isinstance(kernel, Kernel) else jit(kernel)


def _unaliased(result: Any, inputs: Iterable[Any]) -> Any:
    identities = {id(t) for t in inputs if isinstance(t, torch.Tensor)}

    def fix(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and id(value) in identities:
            return value.clone()
        if isinstance(value, (tuple, list)):
            return type(value)(fix(v) for v in value)
        return value

    return fix(result)


def nki_op(
    name: str,
    fn: Callable[..., Any] | None = None,
    /,
    *,
    mutates_args: Iterable[str] | str = (),
    device_types: str | Iterable[str] | None = None,
    schema: str | None = None,
) -> Any:
    """Registers ``fn`` as the custom op ``name`` (``"namespace::op"``) for eager, compiled and
    autograd use (see the module docstring); usable as a decorator.

    Args:
        name: the op's qualified name.
        mutates_args: the names of the tensor arguments ``fn`` writes (``torch.library.custom_op``'s
            rule: every other argument must be left unchanged).
        device_types: as for ``torch.library.custom_op`` (default: every device; kernels refuse
            tensors that are not on neuron).
        schema: an explicit schema, as for ``torch.library.custom_op`` (default: from annotations).

    Returns:
        The ``torch.library.CustomOpDef`` (call it, or ``register_autograd`` on it).
    """

    def register(fn: Callable[..., Any]) -> Any:
        def implementation(*args: Any, **kwargs: Any) -> Any:
            return _unaliased(fn(*args, **kwargs), [*args, *kwargs.values()])

        implementation.__name__ = fn.__name__
        implementation.__qualname__ = fn.__qualname__
        implementation.__annotations__ = dict(getattr(fn, "__annotations__", {}))
        implementation.__signature__ = inspect.signature(fn)
        op = torch.library.custom_op(
            name, implementation, mutates_args=mutates_args, device_types=device_types, schema=schema
        )
        op.register_fake(implementation)
        namespace, opname = name.split("::")
        overload = getattr(getattr(torch.ops, namespace), opname).default
        _register_lowering(overload, implementation)
        return op

    return register(fn) if fn is not None else register


class _FunctionGraphs:
    """The graphs one nki_op's function traces to, by the shapes, strides and dtypes of its tensors
    and the values of its other arguments."""

    def __init__(self, op: Any, fn: Callable[..., Any]) -> None:
        self.op = op
        self.fn = fn
        self.graphs: dict[Any, tuple[torch.fx.GraphModule, list[int]]] = {}
        self.lock = threading.Lock()

    def graph(self, metas: list[Any]) -> tuple[torch.fx.GraphModule, list[int]]:
        leaves, spec = pytree.tree_flatten(metas)
        leaves = [_with_concrete_strides(v) if isinstance(v, torch.Tensor) else v for v in leaves]
        key = tuple(
            (tuple(v.shape), tuple(v.stride()), v.dtype, str(v.device))
            if isinstance(v, torch.Tensor)
            else (type(v), repr(v))
            for v in leaves
        )
        with self.lock:
            if key not in self.graphs:
                self.graphs[key] = self._trace(leaves, spec)
            return self.graphs[key]

    def _trace(self, leaves: list[Any], spec: Any) -> tuple[torch.fx.GraphModule, list[int]]:
        schema = schema_of(self.op)
        positions = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
        mutated = [i for i, a in enumerate(schema.arguments) if a.alias_info is not None and a.alias_info.is_write]
        fn = self.fn

        def call(*tensors: torch.Tensor) -> Any:
            filled = list(leaves)
            for position, tensor in zip(positions, tensors, strict=True):
                filled[position] = tensor
            values = pytree.tree_unflatten(filled, spec)
            positional = [v for a, v in zip(schema.arguments, values, strict=True) if not a.kwarg_only]
            keywords = {a.name: v for a, v in zip(schema.arguments, values, strict=True) if a.kwarg_only}
            result = fn(*positional, **keywords)
            returned = list(result) if isinstance(result, (tuple, list)) else ([] if result is None else [result])
            return (*returned, *(values[i] for i in mutated))

        examples = [
            torch.empty_strided(leaves[i].shape, leaves[i].stride(), dtype=leaves[i].dtype, device=_device(leaves[i]))
            for i in positions
        ]
        functional = torch.func.functionalize(call, remove="mutations")
        graph = make_fx(functional, tracing_mode="fake", decomposition_table=engine.decompositions())(*examples)
        _drop_input_copies(graph)
        engine.check_lowerable(graph)
        return graph, positions


def _with_concrete_strides(meta: torch.Tensor) -> torch.Tensor:
    """``meta``, or an empty tensor of its shape with contiguous strides where Dynamo made its
    strides symbolic (a call with the same shape and other strides, whose graph keeps its runtime
    ints: dynamo/graph.py specialises only symbolic sizes). A compiled graph's values are dense
    arrays, so the traced function computes the same values with either strides."""
    if not any(isinstance(stride, torch.SymInt) for stride in meta.stride()):
        return meta
    return torch.empty(tuple(meta.shape), dtype=meta.dtype, device="meta")


def _device(meta: torch.Tensor) -> torch.device:
    return meta.device if meta.device.type == "neuron" else torch.device("neuron")


def _drop_input_copies(graph: torch.fx.GraphModule) -> None:
    """Removes the copies back into mutated inputs that functionalization appends: the new values
    are the graph's trailing outputs already."""
    for node in list(graph.graph.nodes):
        if (
            node.op == "call_function"
            and node.target is torch.ops.aten.copy_.default
            and node.args[0].op == "placeholder"
        ):
            node.replace_all_uses_with(node.args[0])
            graph.graph.erase_node(node)
    graph.recompile()


def _register_lowering(op: Any, fn: Callable[..., Any]) -> None:
    graphs = _FunctionGraphs(op, fn)
    mutates = any(a.alias_info is not None and a.alias_info.is_write for a in schema_of(op).arguments)
    returns = len(schema_of(op).returns)

    def lower(*args: Any, metas: list[Any], **kwargs: Any) -> Any:
        graph, positions = graphs.graph(metas)
        names = [a.name for a in schema_of(op).arguments]
        values = list(args) + [kwargs[n] for n in names[len(args) :]]
        leaves = pytree.tree_leaves(values, is_leaf=lambda v: v is None)
        results = engine.run_graph(graph, [leaves[i] for i in positions])
        if mutates:
            return tuple(results)
        return results[0] if returns == 1 else tuple(results[:returns])

    lower.__qualname__ = f"nki_op({op})"
    lowering(op, metas=True, returns_mutated=mutates)(lower)
