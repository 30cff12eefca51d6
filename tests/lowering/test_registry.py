"""The lowering registry's contract, on lowerings registered for test-only ops: registration,
dtype rules, checked scalars, type promotion, random keys, and the check of every result against
PyTorch's meta kernel (lowering/registry.py, applied by lowering/engine.py)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from torch_neuronx.lowering import engine, registry
from torch_neuronx.lowering.registry import Promotion, lowering, same_dtype
from torch_neuronx.runtime import tracing

aten = torch.ops.aten

_library = torch.library.Library("neuron_registry_test", "DEF")
for _schema in (
    "scale(Tensor self, Scalar factor) -> Tensor",
    "pair(Tensor self, Tensor other) -> Tensor",
    "fill_like(Tensor self, Scalar value) -> Tensor",
    "noise(Tensor self) -> Tensor",
):
    _library.define(_schema)
_library.impl("scale", lambda self, factor: torch.empty_like(self, dtype=torch.result_type(self, factor)), "Meta")
_library.impl("pair", lambda self, other: torch.empty_like(self), "Meta")
_library.impl("fill_like", lambda self, value: torch.empty_like(self), "Meta")
_library.impl("noise", lambda self: torch.empty_like(self), "Meta")
ops = torch.ops.neuron_registry_test


@pytest.fixture(scope="module", autouse=True)
def _device_started():
    """The runtime configures JAX (64-bit types) and loads every lowering when the device starts."""
    torch.zeros(1, device="neuron")


@pytest.fixture
def registered():
    """Registers lowerings for the test ops, and removes them afterwards."""
    added = []

    def register(*op_list, **options):
        def decorate(fn):
            lowering(*op_list, **options)(fn)
            added.extend(op_list)
            return fn

        return decorate

    yield register
    for op in added:
        registry.LOWERINGS.pop(op, None)


def _lower(op, args, metas, context=None):
    """``engine.lower_op`` at trace time, inside a jitted function; returns its concrete result and
    the trace context. ``args`` entries that are arrays become traced inputs."""
    context = context or tracing.TraceContext()
    traced_positions = [i for i, a in enumerate(args) if isinstance(a, (np.ndarray, jax.Array))]
    result_meta = op(*metas)

    def fn(*traced):
        filled = list(args)
        for position, value in zip(traced_positions, traced, strict=True):
            filled[position] = value
        with tracing.tracing(context):
            return engine.lower_op(op, filled, list(metas), result_meta)

    return jax.jit(fn)(*[args[i] for i in traced_positions]), context


def test_registering_an_overload_twice_raises_and_keeps_the_first():
    first = registry.LOWERINGS[aten.add.Tensor].fn
    with pytest.raises(RuntimeError, match=r"aten.add.Tensor already has a lowering \(.*add"):
        lowering(aten.add.Tensor)(lambda self, other, alpha=1: self)
    assert registry.LOWERINGS[aten.add.Tensor].fn is first


def test_registering_a_packet_raises_type_error():
    with pytest.raises(TypeError, match=r"lowering\(\) takes OpOverloads such as aten.add.Tensor"):
        lowering(aten.add)(lambda self, other: self)


def test_replacing_a_lowering_keeps_its_declaration_and_returns_the_replaced_function(registered):
    @registered(ops.scale.default, static=("factor",))
    def scale(self, factor):
        return self * factor

    replaced = registry.replace_lowering(ops.scale.default, lambda self, factor: replaced(self, factor) + 1)
    assert replaced is scale
    assert registry.LOWERINGS[ops.scale.default].static == frozenset({"factor"})
    x = np.arange(4, dtype=np.float32)
    result, _ = _lower(ops.scale.default, [x, 2.0], [torch.empty(4, device="meta"), 2.0])
    np.testing.assert_array_equal(np.asarray(result), x * 2 + 1)


def test_replacing_a_missing_lowering_raises_key_error():
    with pytest.raises(KeyError, match=r"neuron_registry_test.pair.default has no lowering to replace"):
        registry.replace_lowering(ops.pair.default, lambda self, other: self)


def test_promotion_casts_operands_to_the_computation_dtype(registered):
    seen = []

    @registered(ops.scale.default, promotion=Promotion.INT_TO_FLOAT)
    def scale(self, factor):
        seen.append((self.dtype, jnp.asarray(factor).dtype))
        return self * factor

    x = np.arange(4, dtype=np.int32)
    result, _ = _lower(ops.scale.default, [x, np.float64(0.5)], [torch.empty(4, dtype=torch.int32, device="meta"), 0.5])
    assert seen == [(np.dtype(np.float32), np.dtype(np.float32))]  # int -> float32 opmath
    np.testing.assert_allclose(np.asarray(result), np.arange(4) * 0.5)


def test_result_is_cast_to_the_meta_kernels_dtype(registered):
    @registered(ops.pair.default)
    def pair(self, other):
        return (self + other).astype(jnp.float32)  # the meta kernel says int64

    a, b = np.arange(3, dtype=np.int64), np.ones(3, dtype=np.int64)
    metas = [torch.empty(3, dtype=torch.int64, device="meta")] * 2
    result, _ = _lower(ops.pair.default, [a, b], metas)
    assert result.dtype == np.int64
    np.testing.assert_array_equal(np.asarray(result), a + b)


def test_result_of_another_shape_than_the_meta_kernels_raises(registered):
    @registered(ops.pair.default)
    def pair(self, other):
        return jnp.concatenate([self, other])

    metas = [torch.empty(3, device="meta")] * 2
    with pytest.raises(RuntimeError, match=r"returned shape \(6,\), PyTorch's meta kernel says \(3,\)"):
        _lower(ops.pair.default, [np.ones(3, np.float32)] * 2, metas)


def test_result_count_must_match_the_meta_kernel(registered):
    @registered(ops.pair.default)
    def pair(self, other):
        return self, other

    metas = [torch.empty(3, device="meta")] * 2
    with pytest.raises(RuntimeError, match="returned 2 results, PyTorch's meta kernel 1"):
        _lower(ops.pair.default, [np.ones(3, np.float32)] * 2, metas)


def test_dtype_rule_refuses_before_promotion(registered):
    @registered(ops.pair.default, promotion=Promotion.DEFAULT, dtype_rule=same_dtype(("self", "other"), "{} vs {}"))
    def pair(self, other):
        raise AssertionError("the rule refuses first")

    metas = [torch.empty(3, dtype=torch.float32, device="meta"), torch.empty(3, dtype=torch.int64, device="meta")]
    with pytest.raises(RuntimeError, match="^Float vs Long"):
        _lower(ops.pair.default, [np.ones(3, np.float32), np.ones(3, np.int64)], metas)


def test_checked_scalar_raises_when_concrete_and_is_a_device_check_when_traced(registered):
    @registered(ops.fill_like.default, checked=("value",))
    def fill_like(self, value):
        return jnp.full(self.shape, value, self.dtype)

    metas = [torch.empty(2, dtype=torch.int8, device="meta"), 300]
    with pytest.raises(RuntimeError, match="^value cannot be converted to type int8_t without overflow"):
        _lower(ops.fill_like.default, [np.zeros(2, np.int8), 300], metas)
    _, context = _lower(ops.fill_like.default, [np.zeros(2, np.int8), np.asarray(300)], metas)
    assert [check.message for check in context.checks] == ["value cannot be converted to type int8_t without overflow"]


def test_checked_scalar_left_to_the_host_check(registered):
    """An eager kernel checks its runtime scalars on the host before each launch: the trace of its op
    then records no device check."""

    @registered(ops.fill_like.default, checked=("value",))
    def fill_like(self, value):
        return jnp.full(self.shape, value, self.dtype)

    context = tracing.TraceContext()
    context.host_checked = ops.fill_like.default
    metas = [torch.empty(2, dtype=torch.int8, device="meta"), 3]
    _lower(ops.fill_like.default, [np.zeros(2, np.int8), np.asarray(3)], metas, context)
    assert context.checks == []


def test_random_lowering_gets_a_key_and_counts_its_elements(registered):
    @registered(ops.noise.default, random=True)
    def noise(self, rng_key):
        return jax.random.uniform(rng_key, self.shape, self.dtype)

    meta = torch.empty(5, device="meta")
    context = tracing.TraceContext(np.uint64(1), np.uint64(0))
    first, _ = _lower(ops.noise.default, [np.zeros(5, np.float32)], [meta], context)
    assert context.random_elements == 8  # 5 elements, the offset advanced by a multiple of 4
    assert engine.op_random_elements(ops.noise.default, meta, [meta]) == 8
    assert engine.op_random_elements(aten.neg.default, meta, [meta]) == 0
    again, _ = _lower(
        ops.noise.default, [np.zeros(5, np.float32)], [meta], tracing.TraceContext(np.uint64(1), np.uint64(0))
    )
    np.testing.assert_array_equal(np.asarray(first), np.asarray(again))


def test_decomposed_dtype_rule_is_checked_on_the_metas(monkeypatch):
    rule = same_dtype(("v", "g"), "{} and {} differ")
    monkeypatch.setitem(registry.DECOMPOSED_DTYPE_RULES, aten._weight_norm_interface.default, rule)
    metas = [torch.empty(3, dtype=torch.float32, device="meta"), torch.empty(3, dtype=torch.int32, device="meta"), 0]
    with pytest.raises(RuntimeError, match="^Float and Int differ$"):
        registry.check_dtype_rule(aten._weight_norm_interface.default, metas)
    registry.check_dtype_rule(aten._weight_norm_interface.default, [metas[0], metas[0], 0])  # same dtype: passes
