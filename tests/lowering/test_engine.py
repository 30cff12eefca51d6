"""The one lowering engine (lowering/engine.py) used directly: an FX graph of ATen ops interpreted
with JAX values, decompositions traced until every node has a lowering, and what it refuses."""

from __future__ import annotations

import jax
import numpy as np
import pytest
import torch

from torch_neuronx._compat.torch_internals import make_fx
from torch_neuronx.lowering import engine, registry
from torch_neuronx.runtime import faults, tracing

aten = torch.ops.aten


@pytest.fixture(scope="module", autouse=True)
def _device_started():
    """The runtime configures JAX (64-bit types) and loads every lowering when the device starts."""
    torch.zeros(1, device="neuron")


def _run(graph, *inputs):
    """Interprets ``graph`` inside a jitted function on CPU tensors' values; returns torch tensors."""

    def fn(*arrays):
        with tracing.tracing(tracing.TraceContext(np.uint64(0), np.uint64(0))):
            return engine.run_graph(graph, list(arrays))

    return [torch.from_numpy(np.array(r)) for r in jax.jit(fn)(*[t.numpy() for t in inputs])]


def test_graph_of_aten_ops_matches_cpu():
    def f(x, w):
        return torch.nn.functional.gelu(x @ w).softmax(-1).sum(0)

    x, w = torch.randn(4, 5), torch.randn(5, 3)
    graph = make_fx(f, decomposition_table=engine.decompositions())(x, w)
    engine.check_lowerable(graph)
    (result,) = _run(graph, x, w)
    torch.testing.assert_close(result, f(x, w))


def test_decomposition_is_traced_until_every_node_has_a_lowering():
    op = aten.celu.default
    assert op not in registry.LOWERINGS and engine.has_decomposition(op)
    x = torch.randn(6)
    graph, positions = engine.trace_decomposition(op, [torch.empty(6, device="meta"), 1.0])
    assert positions == [0]
    targets = {n.target for n in graph.graph.nodes if n.op == "call_function"}
    assert targets and all(t in registry.LOWERINGS for t in targets)
    (result,) = _run(graph, x)
    torch.testing.assert_close(result, torch.nn.functional.celu(x))


#: An ATen op with no lowering (the CPU's int8 weight-only matmul; it runs on the CPU fallback).
_UNLOWERED = aten._weight_int8pack_mm.default


def test_graph_with_an_unlowered_op_is_refused_naming_it():
    def f(x, weight, scales):
        return _UNLOWERED(x, weight, scales)

    graph = make_fx(f)(torch.ones(3, 8), torch.ones(4, 8, dtype=torch.int8), torch.ones(4))
    with pytest.raises(engine.Unsupported, match="no lowering for aten._weight_int8pack_mm.default") as raised:
        engine.check_lowerable(graph)
    assert raised.value.op is _UNLOWERED


def test_random_elements_count_each_random_ops_results():
    graph = make_fx(lambda x, y: aten.uniform.default(x).sum() + aten.bernoulli.p(y, 0.5))(
        torch.empty(4, 5), torch.empty(3, 2)
    )
    # Each op advances the offset by its elements rounded up to 4, as a launch of it alone would.
    assert engine.random_elements(graph) == 4 * 5 + 8
    assert engine.random_elements(make_fx(lambda x: x + 1)(torch.empty(3))) == 0


def test_schema_values_fill_defaults_in_schema_order():
    assert engine.schema_values(aten.add.Tensor, (1, 2), {}) == [1, 2, 1]
    assert engine.schema_values(aten.sum.dim_IntList, (1,), {"keepdim": True}) == [1, None, True, None]


def test_lowering_an_op_without_lowering_raises_unsupported():
    with pytest.raises(engine.Unsupported):
        engine.lower_op(_UNLOWERED, [], [], None)


@torch.library.custom_op("engine_tests::scale_", mutates_args={"x"}, device_types="neuron")
def _scale_(x: torch.Tensor, factor: float) -> None:
    x.mul_(factor)


@registry.lowering(torch.ops.engine_tests.scale_.default, returns_mutated=True)
def _scale_lowering(x, factor):
    """A mutating custom op's lowering: no results, then the new value of ``x``."""
    return (x * factor,)


@pytest.mark.parametrize("view", [False, True])
def test_mutating_custom_op_lowers_through_auto_functionalized(view):
    """AOTAutograd wraps the op in auto_functionalized_v2 (on a view of a base when ``view``); the
    engine lowers it with the op's returns_mutated lowering, inside the graph's one executable."""
    import torch_neuronx

    base = torch.randn(6, 4)
    expected = base.clone()
    (expected[2:] if view else expected).mul_(3.0)

    def fn(t):
        _scale_(t[2:] if view else t, 3.0)
        return t.sum()

    on_device = base.to("neuron")
    before = len(torch_neuronx.get_dynamo_metrics())
    total = torch.compile(fn, backend="neuron", fullgraph=True)(on_device)
    torch.testing.assert_close(on_device.cpu(), expected)
    torch.testing.assert_close(total.cpu(), expected.sum())
    graphs = torch_neuronx.get_dynamo_metrics()[before:]
    assert len(graphs) == 1 and not graphs[0]["eager_fallback"]


class _Unwrapping(torch.Tensor):
    """A wrapper subclass whose ``__torch_dispatch__`` calls each op on the neuron tensor it holds:
    PyTorch runs that call with every dispatch key after Python excluded in the thread."""

    @staticmethod
    def __new__(cls, inner):
        return torch.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype, device=inner.device)

    def __init__(self, inner):
        self.inner = inner

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        def unwrap(value):
            return value.inner if isinstance(value, _Unwrapping) else value

        return func(*[unwrap(a) for a in args], **{k: unwrap(v) for k, v in (kwargs or {}).items()})


def test_decomposition_traced_from_a_subclass_dispatch():
    # Tracing pixel_unshuffle's decomposition from inside __torch_dispatch__ dereferenced a null
    # tensor in functionalization (SIGSEGV; PyTorch's test_forward_ad of pixel_unshuffle). A fresh
    # input shape makes this call trace, whatever ran before in the process.
    x = torch.randn(1, 4, 10, 2)
    got = torch.nn.functional.pixel_unshuffle(_Unwrapping(x.to("neuron")), 2)
    torch.testing.assert_close(got.cpu(), torch.nn.functional.pixel_unshuffle(x, 2))


def test_scalar_check_of_a_traced_scalar_is_made_on_the_device_in_double_precision():
    """A compiled graph whose Scalar is one of its inputs: the lowering's ATen check is made on the
    device, and raises at the launch with the value printed as ATen prints a double."""
    meta = torch.empty(3, device="meta")
    messages = []

    @jax.jit
    def checked(array, lambd):
        context = tracing.TraceContext(np.uint64(0), np.uint64(0))
        with tracing.tracing(context):
            engine.lower_op(aten.exponential.default, [array, lambd, None], [meta, 1.0, None], meta)
        (check,) = context.checks
        messages.append(check.message)
        return check.failed, check.detail

    assert not bool(checked(np.ones(3, np.float32), np.float64(1e-50))[0])  # 0 in float32
    outputs = list(checked(np.ones(3, np.float32), np.float64(-1e-50)))
    expected = r"^aten::exponential on neuron:0: exponential_ expects lambda > 0\.0, but found lambda=-1e-50$"
    with pytest.raises(RuntimeError, match=expected):
        faults.record(0, "aten::exponential", outputs, [(messages[0], RuntimeError, True)])
