"""The one lowering engine: an ATen op or an FX graph of ATen ops -> a JAX function (decision 5).

Eager runs a single op through :func:`lower_op`, or, for an op with no lowering, the graph that
PyTorch's decomposition of it traces to (:func:`trace_decomposition`, then :func:`run_graph`).
torch.compile runs the graphs AOTAutograd produces through the same :func:`run_graph`. Either way
each node is computed by its registered lowering through :func:`lower_op`, so promotion,
result dtypes and random streams follow one set of rules. A custom op that mutates its arguments
(an NKI kernel's op with ``mutates_args``) appears in AOTAutograd's graphs inside an
``auto_functionalized`` node; :func:`lower_auto_functionalized` lowers it through the op's
``returns_mutated`` lowering.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import torch
import torch.fx

from torch_neuronx._compat.torch_internals import (
    OpOverload,
    decomposition_table,
    dispatch_keys_for_tracing,
    make_fx,
    pytree,
    schema_of,
)
from torch_neuronx.lowering import overflow, promotion, registry
from torch_neuronx.runtime import layout, tracing
from torch_neuronx.runtime.dtypes import convert, jax_dtype, view_dtype

#: AOTAutograd's wrappers of a mutating op in a functional graph (their outputs: the op's results,
#: then the new values of its mutated arguments, or of the bases those are views of).
AUTO_FUNCTIONALIZED = (torch.ops.higher_order.auto_functionalized, torch.ops.higher_order.auto_functionalized_v2)
#: Control-flow operators, whose branches or bodies are subgraphs of the graph (``get_attr`` nodes).
CONTROL_FLOW = (torch.ops.higher_order.cond, torch.ops.higher_order.while_loop)
#: ``run_with_rng_state(state, op, *args)``: ``op`` drawing from a generator state another graph saved
#: (activation checkpointing's recomputed random ops; dynamo/random_states.py).
REPLAYED_RANDOM_OP = torch.ops.higher_order.run_with_rng_state


class Unsupported(Exception):
    """An op, or an op in its decomposition, has no lowering: the caller falls back."""

    def __init__(self, op: object, reason: str = "has no neuron lowering or decomposition") -> None:
        super().__init__(f"no lowering for {op}")
        self.op = op
        self.reason = reason


def schema_values(op: OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """``op``'s arguments in schema order, defaults filled in."""
    values = []
    for index, argument in enumerate(schema_of(op).arguments):
        if index < len(args) and not argument.kwarg_only:
            values.append(args[index])
        elif argument.name in kwargs:
            values.append(kwargs[argument.name])
        elif argument.has_default_value():
            values.append(argument.default_value)
        else:
            values.append(None)
    return values


def _as_runtime_scalar(value: Any, floating_pointwise: bool) -> Any:
    """A graph's Python number as the lowering gets it in eager: a Python int that only uint64 holds
    as numpy.uint64 (JAX has no weak type for it: "Python int too large to convert to int64"); a
    Python float, or an int32 operand (``self``, ``other``) of a pointwise op with a floating or
    complex result (other ints may be an index, a size, polygamma's order, an exponent the lowering
    specialises on), as a weakly typed 0-d array behind an optimization barrier, opaque to XLA as a
    runtime scalar is; anything else as it is.

    The barrier keeps XLA's algebraic simplifier from reassociating float constants, which IEEE
    arithmetic does not allow: ``(x + 1.5 * 2**23) - 1.5 * 2**23`` (the round-to-integer trick of
    quantization code) folded to ``x``, ``(x * 1e30) * 1e-30`` to ``x * 1.0000000150474662``,
    ``x + 0.0`` to ``x``, which keeps the sign of -0.0, and ``x.sum() / 3`` to a product by 1/3.
    Integer arithmetic wraps, so an integer result may be reassociated."""
    if type(value) is int and 2**63 <= value < 2**64:
        return np.uint64(value)
    if type(value) is float or (floating_pointwise and type(value) is int and -(2**31) <= value < 2**31):
        return jax.lax.optimization_barrier(jnp.asarray(value))
    return value


def _check_scalar(check: registry.ScalarCheck, value: Any) -> None:
    """Makes ``check`` of a Scalar argument: on the host where it is a number (a compiled graph's
    constant), else on the device in float64, raising at the launch as ATen raises at the call."""
    if isinstance(value, (bool, int, float)):
        check.check_number(value)
        return
    double = jnp.asarray(value).astype(jnp.float64)
    bits = jax.lax.bitcast_convert_type(double, jnp.int64)
    tracing.device_check(~check.valid(double), bits, check.message, synchronous=True)


def lower_op(op: OpOverload, args: list[Any], metas: list[Any], result_meta: Any) -> Any:
    """Computes ``op`` at trace time with its registered lowering, applying what the registry
    declares for it: its scalar checks, its dtype rule, the overflow check of its ``checked``
    scalars, type promotion, its random key, and the cast of every result to the dtype PyTorch's
    meta kernel reports.

    Args:
        args: the op's arguments in schema order; tensors as JAX arrays, runtime scalars as 0-d
            arrays, everything else as Python values.
        metas: the same arguments as PyTorch sees them: meta tensors (or 0-dim CPU tensors),
            Python numbers, Python values.
        result_meta: PyTorch's meta result (a tensor or a tuple/list of them).

    Returns:
        The result(s), cast to ``result_meta``'s dtypes; a tuple/list when the op returns several.

    Raises:
        Unsupported: ``op`` has no lowering.
        RuntimeError: the lowering returned a result of another count or shape than PyTorch's meta
            kernel (a lowering bug), or a dtype rule or overflow check refused the call.
    """
    entry = registry.LOWERINGS.get(op)
    if entry is None:
        raise Unsupported(op)
    schema = schema_of(entry.op)
    names = [argument.name for argument in schema.arguments]
    args = list(args)
    registry.check_dim_in_range(op, metas)  # compiled graphs: Dynamo's meta kernels skip it too
    context = tracing.current_context()
    if entry.scalar_checks and (context is None or context.host_checked is not entry.op):
        by_name = dict(zip(names, args, strict=True))
        for check in entry.scalar_checks:  # before the dtype rule, as ATen checks them
            _check_scalar(check, by_name[check.argument])
    if entry.dtype_rule is not None:
        entry.dtype_rule(dict(zip(names, metas, strict=True)))
    first = result_meta[0] if isinstance(result_meta, (tuple, list)) and result_meta else result_meta
    if entry.checked and (
        context is None or context.host_checked is not entry.op
    ):  # c10 converts to the result's dtype
        for arg, meta, name in zip(args, metas, names, strict=True):
            if name in entry.checked and promotion.is_number(meta):
                overflow.check_fits(
                    overflow.negated(arg) if name in entry.negated_checked else arg,
                    overflow.checked_dtype(first.dtype, entry.checked_in_opmath),
                )
    floating = (
        torch.Tag.pointwise in op.tags
        and isinstance(first, torch.Tensor)
        and (first.dtype.is_floating_point or first.dtype.is_complex)
    )
    args = [
        arg if name in entry.static else _as_runtime_scalar(arg, floating and name in ("self", "other"))
        for arg, name in zip(args, names, strict=True)
    ]
    if entry.promotion is not None:
        args = promotion.promote(entry, args, metas)
    kwargs = {}
    positional = []
    for argument, arg in zip(schema.arguments, args, strict=True):
        if argument.kwarg_only:
            kwargs[argument.name] = arg
        else:
            positional.append(arg)
    results = result_meta if isinstance(result_meta, (tuple, list)) else (result_meta,)
    if entry.random:
        kwargs["rng_key"] = (
            tracing.active_context().next_key(sum(r.numel() for r in results if isinstance(r, torch.Tensor)))
            if draws(entry, metas)
            else None
        )
    if entry.result_dtype:
        kwargs["result_dtype"] = jax_dtype(results[0].dtype)
    if entry.metas:
        kwargs["metas"] = metas
    value = entry.fn(*positional, **kwargs)
    values = value if isinstance(value, (tuple, list)) else (value,)
    if len(values) != len(results):
        raise RuntimeError(
            f"lowering of {entry.op} returned {len(values)} results, PyTorch's meta kernel {len(results)}"
        )
    cast = []
    for produced, expected in zip(values, results, strict=True):
        if expected is None or not isinstance(expected, torch.Tensor):
            cast.append(produced)
            continue
        produced = jnp.asarray(produced)
        if tuple(produced.shape) != tuple(expected.shape):
            raise RuntimeError(
                f"lowering of {entry.op} returned shape {tuple(produced.shape)}, PyTorch's meta kernel "
                f"says {tuple(expected.shape)}"
            )
        # view_dtype: a complex32 result is complex64 rounded to complex32, as each op stores it.
        cast.append(convert(produced, view_dtype(expected.dtype)))
    if isinstance(result_meta, (tuple, list)):
        return type(result_meta)(cast)
    return cast[0]


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
    schema = schema_of(op)

    def call(*tensors: torch.Tensor) -> Any:
        filled = list(leaves)
        for position, tensor in zip(positions, tensors, strict=True):
            filled[position] = tensor
        values = pytree.tree_unflatten(filled, spec)
        positional = [v for a, v in zip(schema.arguments, values, strict=True) if not a.kwarg_only]
        keywords = {a.name: v for a, v in zip(schema.arguments, values, strict=True) if a.kwarg_only}
        return op(*positional, **keywords)

    functional = torch.func.functionalize(call, remove="mutations")
    with dispatch_keys_for_tracing():
        graph = make_fx(functional, decomposition_table=decompositions())(*[leaves[i] for i in positions])
    check_lowerable(graph)
    return graph, positions


def _subgraphs(graph: torch.fx.GraphModule, node: torch.fx.Node) -> list[torch.fx.GraphModule]:
    """The subgraphs a control-flow node runs (cond's branches, while_loop's condition and body)."""
    return [getattr(graph, arg.target) for arg in node.args if isinstance(arg, torch.fx.Node) and arg.op == "get_attr"]


_RANDOM_IN_CONTROL_FLOW = "is a random op inside torch.cond or while_loop, which neuron cannot compile"


def check_lowerable(graph: torch.fx.GraphModule, *, nested: bool = False) -> None:
    """Raises Unsupported for the first node that has no lowering; within a control-flow
    subgraph (``nested``), also for a random op, whose draws the generator counts per graph."""
    for node in graph.graph.nodes:
        if node.op != "call_function" or node.target is operator.getitem:
            continue
        if node.target in CONTROL_FLOW:
            for subgraph in _subgraphs(graph, node):
                check_lowerable(subgraph, nested=True)
        elif nested and isinstance(node.target, OpOverload) and torch.Tag.nondeterministic_seeded in node.target.tags:
            raise Unsupported(node.target, _RANDOM_IN_CONTROL_FLOW)
        elif node.target is REPLAYED_RANDOM_OP:
            if nested:
                raise Unsupported(node.args[1], _RANDOM_IN_CONTROL_FLOW)
            if node.args[1] not in registry.LOWERINGS:
                raise Unsupported(node.args[1])
        elif node.target in AUTO_FUNCTIONALIZED:
            entry = registry.LOWERINGS.get(node.args[0])
            if entry is None or not entry.returns_mutated:
                raise Unsupported(node.args[0])
        elif node.target not in registry.LOWERINGS:
            raise Unsupported(node.target)


def draws(entry: registry.Lowering, metas: list[Any]) -> bool:
    """Whether a random op's lowering draws for these arguments (schema order, as PyTorch sees
    them): ``random=True``, or its predicate's answer."""
    if not callable(entry.random):
        return bool(entry.random)
    return entry.random(dict(zip([a.name for a in schema_of(entry.op).arguments], metas, strict=True)))


def op_random_elements(op: OpOverload, result: Any, metas: list[Any]) -> int:
    """How far one op advances the generator: a random op that draws (:func:`draws`) draws one
    element per element of its results, counted as ``tracing.offset_increment`` counts them; any
    other op, 0. ``metas``: its arguments in schema order, as PyTorch sees them."""
    entry = registry.LOWERINGS.get(op)
    if entry is None or not entry.random or not draws(entry, metas):
        return 0
    return tracing.offset_increment(sum(t.numel() for t in pytree.tree_leaves(result) if isinstance(t, torch.Tensor)))


def random_elements(graph: torch.fx.GraphModule) -> int:
    """How far a graph advances the generator: the sum of its random ops' (:func:`op_random_elements`),
    what they advance it by launched one by one."""
    return sum(
        op_random_elements(node.target, node.meta["val"], schema_metas(node.target, node.args, node.kwargs))
        for node in graph.graph.nodes
        if node.op == "call_function"
        and isinstance(node.target, OpOverload)
        and getattr(registry.LOWERINGS.get(node.target), "random", False)
    )


def _meta(value: Any) -> Any:
    if isinstance(value, torch.fx.Node):
        return value.meta["val"]
    return value


def metas(value: Any) -> Any:
    """A node argument (nodes, lists of them, constants) as PyTorch saw it when tracing: each node
    replaced by its traced value (``meta["val"]``)."""
    return pytree.tree_map_only(torch.fx.Node, _meta, value)


def schema_metas(op: OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """A node's arguments in schema order (:func:`schema_values`), as :func:`metas`."""
    return [metas(value) for value in schema_values(op, args, kwargs)]


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
            if node.target in AUTO_FUNCTIONALIZED:
                env[node] = lower_auto_functionalized(node, env)
                continue
            if node.target in CONTROL_FLOW:
                env[node] = _lower_control_flow(graph, node, env)
                continue
            if node.target is REPLAYED_RANDOM_OP:
                state, op, *op_args = node.args
                with tracing.active_context().replaying(env[state]):
                    env[node] = _lower_node(op, tuple(op_args), node.kwargs, node.meta["val"], env)
                continue
            if not isinstance(node.target, OpOverload):
                raise Unsupported(node.target)
            # make_fx records no value for an op that returns nothing (``_assert_async``).
            result_meta = node.meta["val"] if schema_of(node.target).returns else None
            env[node] = _lower_node(node.target, node.args, node.kwargs, result_meta, env)
        elif node.op == "output":
            return [env[leaf] if isinstance(leaf, torch.fx.Node) else leaf for leaf in pytree.tree_leaves(node.args[0])]
        elif node.op == "get_attr" and all(user.target in CONTROL_FLOW for user in node.users):
            continue  # a control-flow subgraph, which its node runs
        else:
            raise Unsupported(node.op)
    raise RuntimeError("graph has no output node")


def _lower_node(
    op: OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any], result_meta: Any, env: dict[torch.fx.Node, Any]
) -> Any:
    """``op`` called with a node's arguments, the values of earlier nodes taken from ``env``."""
    values = schema_values(op, args, kwargs)
    return lower_op(
        op,
        [pytree.tree_map_only(torch.fx.Node, env.__getitem__, v) for v in values],
        list(map(metas, values)),
        result_meta,
    )


def _lower_control_flow(graph: torch.fx.GraphModule, node: torch.fx.Node, env: dict[torch.fx.Node, Any]) -> list[Any]:
    """``torch.cond`` as ``jax.lax.cond`` and ``while_loop`` as ``jax.lax.while_loop``, each subgraph
    interpreted by :func:`run_graph` (a Python-bool predicate picks its branch at trace time)."""

    def value(arg: Any) -> Any:
        return pytree.tree_map_only(torch.fx.Node, env.__getitem__, arg)

    if node.target is torch.ops.higher_order.cond:
        predicate, _, _, operands = node.args
        if isinstance(predicate, torch.fx.Node) and _meta(predicate).numel() != 1:
            raise RuntimeError(  # eager torch.cond's check, the shape for the values it prints
                "Expected pred to be bool or single-element tensor, but got a tensor of shape "
                f"{list(_meta(predicate).shape)}."
            )
        on_true, on_false = _subgraphs(graph, node)
        operands, predicate = list(value(operands)), value(predicate)
        if isinstance(predicate, bool):
            return run_graph(on_true if predicate else on_false, operands)
        return list(
            jax.lax.cond(
                jnp.asarray(predicate).reshape(()).astype(jnp.bool_),
                lambda xs: tuple(run_graph(on_true, list(xs))),
                lambda xs: tuple(run_graph(on_false, list(xs))),
                tuple(operands),
            )
        )
    _, _, carried, additional = node.args
    condition, body = _subgraphs(graph, node)
    carried, additional = list(value(carried)), list(value(additional))
    dtypes = [jnp.asarray(c).dtype for c in carried]

    def proceed(state: tuple[Any, ...]) -> Any:
        (flag,) = run_graph(condition, [*state, *additional])
        return jnp.asarray(flag).reshape(()).astype(jnp.bool_)

    def step(state: tuple[Any, ...]) -> tuple[Any, ...]:
        results = run_graph(body, [*state, *additional])
        return tuple(jnp.asarray(r).astype(d) for r, d in zip(results, dtypes, strict=True))

    return list(jax.lax.while_loop(proceed, step, tuple(jnp.asarray(c) for c in carried)))


def _strided_view(base: Any, base_meta: torch.Tensor, size: Any, stride: Any, offset: int) -> layout.View:
    """The view ``as_strided(size, stride, offset)`` of a base that is a whole contiguous tensor (its
    storage in row-major order), the layout AOTAutograd's graph inputs have.

    Raises:
        Unsupported: the base is itself a strided view of a larger storage.
    """
    contiguous = layout.contiguous_strides(tuple(base_meta.shape))
    if base_meta.storage_offset() != 0 or any(
        n != 1 and s != c for n, s, c in zip(base_meta.shape, base_meta.stride(), contiguous, strict=True)
    ):
        raise Unsupported("auto_functionalized view of a non-contiguous base")
    return layout.View(np.dtype(base.dtype), tuple(int(n) for n in size), tuple(int(s) for s in stride), int(offset))


class _BaseView(NamedTuple):
    """A mutated argument of an ``auto_functionalized_v2`` node: a view of one of its bases."""

    base: int
    view: layout.View


def lower_auto_functionalized(node: torch.fx.Node, env: dict[torch.fx.Node, Any]) -> tuple[Any, ...]:
    """Lowers ``auto_functionalized(op, **kwargs)`` (or ``auto_functionalized_v2``): the op's
    ``returns_mutated`` lowering computes its results and its mutated arguments' new values, which
    (v2) are written back into the bases the arguments view.

    Raises:
        Unsupported: the op has no such lowering, or mutates a list of tensors.
    """
    op = node.args[0]
    entry = registry.LOWERINGS.get(op)
    if entry is None or not entry.returns_mutated:
        raise Unsupported(op)
    schema = schema_of(op)
    mutated = [a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write]
    kwargs = dict(node.kwargs)

    def value(v: Any) -> Any:
        return pytree.tree_map_only(torch.fx.Node, env.__getitem__, v)

    def meta(v: Any) -> Any:
        return pytree.tree_map_only(torch.fx.Node, _meta, v)

    views: dict[str, tuple[int, layout.View | None] | None] = {}
    bases: list[Any] = []
    base_metas: list[Any] = []
    if node.target is torch.ops.higher_order.auto_functionalized_v2:
        kwargs.pop("_only_clone_these_bases", None)
        base_nodes = kwargs.pop("_all_bases")
        bases, base_metas = [value(b) for b in base_nodes], [meta(b) for b in base_nodes]
        for name in mutated:
            if f"_{name}_length" in kwargs:
                raise Unsupported(f"{op} mutating the tensor list {name}")
            index = kwargs.pop(f"_{name}_base_index")
            if index is None:
                views[name] = None
            elif kwargs.pop(f"_{name}_alias", False):
                views[name] = (index, None)
            elif f"_{name}_storage_offset" in kwargs:
                size, stride = kwargs.pop(f"_{name}_size"), kwargs.pop(f"_{name}_stride")
                offset = kwargs.pop(f"_{name}_storage_offset")
                views[name] = (index, _strided_view(bases[index], base_metas[index], size, stride, offset))
            elif f"_{name}_slice_dim" in kwargs:
                dim, start, end = (kwargs.pop(f"_{name}_slice_{p}") for p in ("dim", "start", "end"))
                sliced = torch.ops.aten.slice.Tensor(base_metas[index], dim, start, end)
                views[name] = (
                    index,
                    _strided_view(
                        bases[index], base_metas[index], sliced.shape, sliced.stride(), sliced.storage_offset()
                    ),
                )
            else:
                views[name] = (index, None)
            view = views[name]
            if view is None:
                kwargs[name] = None
            elif view[1] is None:
                kwargs[name] = base_nodes[view[0]]
            else:
                kwargs[name] = _BaseView(*view)
    arguments, metas = [], []
    for argument in schema.arguments:
        given = kwargs.get(argument.name, argument.default_value if argument.has_default_value() else None)
        if isinstance(given, _BaseView):
            arguments.append(layout.read(bases[given.base].reshape(-1), given.view))
            metas.append(base_metas[given.base].as_strided(given.view.sizes, given.view.strides, given.view.offset))
        else:
            arguments.append(value(given))
            metas.append(meta(given))
    positional = [a for a, s in zip(arguments, schema.arguments, strict=True) if not s.kwarg_only]
    keywords = {s.name: a for a, s in zip(arguments, schema.arguments, strict=True) if s.kwarg_only}
    if entry.metas:
        keywords["metas"] = metas
    produced = list(entry.fn(*positional, **keywords))
    returned, new_values = produced[: len(schema.returns)], produced[len(schema.returns) :]
    by_name = dict(zip(mutated, new_values, strict=True))
    returned = returned if returned else [None]
    if node.target is torch.ops.higher_order.auto_functionalized:
        return (*returned, *(by_name[name] for name in mutated))
    new_bases = list(bases)
    for name in mutated:
        view = views[name]
        if view is None:
            continue
        index, strided = view
        new = convert(jnp.asarray(by_name[name]), jnp.dtype(bases[index].dtype))
        if strided is None:
            new_bases[index] = new.reshape(bases[index].shape)
        else:
            nbytes = bases[index].size * bases[index].dtype.itemsize
            new_bases[index] = layout.write(new_bases[index].reshape(-1), nbytes, new, strided).reshape(
                bases[index].shape
            )
    return (*returned, *new_bases)
