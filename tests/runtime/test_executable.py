"""The one path from a traced computation to work on a core (runtime/executable.py), used directly:
results in their layouts, writes into views, random inputs, device checks, op counting, timings."""

from __future__ import annotations

from collections import Counter

import jax
import jax.numpy as jnp
import pytest
import torch

from torch_neuronx.runtime import arguments, executable, tracing

aten = torch.ops.aten


def _build(op, args, compute, **options):
    """Builds ``compute`` for a call of ``op``'s signature with ``args``; returns (executable, launch
    arguments)."""
    signature = arguments.call_signature(op)
    key, inputs, device, slot_tensors, generator, values, _ = signature.prepare(args, {})
    built = executable.build("test::" + op.name(), signature.describe(args, {}), inputs, compute, **options)
    return built, (inputs, device, slot_tensors, generator, values)


def test_new_result_matches_cpu_and_launches_are_counted():
    a, b = torch.randn(3, 4), torch.randn(3, 4)
    counter: Counter[str] = Counter()
    built, call = _build(
        aten.add.Tensor,
        (a.to("neuron"), b.to("neuron")),
        lambda context, args: [args[0] * 2 + args[1]],
        results=[executable.ResultLayout.of(torch.empty(3, 4, device="meta"))],
        returns=lambda values, results: results[0],
        counter=counter,
    )
    for _ in range(2):
        result = built.launch(*call)
        torch.testing.assert_close(result.cpu(), a * 2 + b)
    assert counter == {"test::aten::add.Tensor": 2}
    assert built.times.lowering_s > 0 and built.times.compile_s > 0


def test_result_keeps_a_transposed_layout():
    """A dense meta layout is kept: the buffer holds the value in that memory order."""
    a = torch.randn(3, 5)
    meta = torch.empty(5, 3, device="meta").t()
    built, call = _build(
        aten.neg.default,
        (a.to("neuron"),),
        lambda context, args: [-args[0]],
        results=[executable.ResultLayout.of(meta)],
    )
    (result,) = built.launch(*call)
    assert result.stride() == (1, 3)
    torch.testing.assert_close(result.cpu(), -a)
    contiguous = executable.ResultLayout.of(meta, keep_strides=False)
    assert contiguous.strides == (5, 1) and contiguous.order is None


def test_write_into_a_view_changes_only_the_view():
    base = torch.arange(12.0).reshape(3, 4)
    device_base = base.to("neuron")
    view = device_base[1:, ::2]
    signature = arguments.call_signature(aten.neg_.default)
    description = signature.describe((view,), {})
    (target,) = description.arguments
    assert isinstance(target, arguments.TensorArg)
    assert (target.sizes, target.strides, target.offset) == ((2, 2), (4, 2), 4)
    built, call = _build(
        aten.neg_.default,
        (view,),
        lambda context, args: [-args[0]],
        results=[],
        writes=[target],
        returns=lambda values, results: values[0],
    )
    assert built.launch(*call) is view
    expected = base.clone()
    expected[1:, ::2] *= -1
    torch.testing.assert_close(device_base.cpu(), expected)


def test_random_inputs_advance_the_generator_and_reproduce_under_a_seed():
    def draw(context, args):
        return [jax.random.uniform(context.next_key(16), (16,), jnp.float32)]

    x = torch.zeros(16, device="neuron")
    built, call = _build(
        aten.neg.default,
        (x,),
        draw,
        results=[executable.ResultLayout.of(torch.empty(16, device="meta"))],
        random_elements=16,
    )
    generator = torch.Generator(device="neuron").manual_seed(7)
    inputs, device, slot_tensors, _, values = call
    first = built.launch(inputs, device, slot_tensors, generator, values)[0].cpu()
    second = built.launch(inputs, device, slot_tensors, generator, values)[0].cpu()
    assert not torch.equal(first, second)  # the offset advanced by the draws
    generator.manual_seed(7)
    torch.testing.assert_close(built.launch(inputs, device, slot_tensors, generator, values)[0].cpu(), first)


def test_device_check_is_raised_at_the_next_synchronization_naming_the_launch():
    def compute(context, args):
        tracing.device_check(jnp.any(args[0] < 0), jnp.int64(3), "negative value, detail {detail}")
        return [args[0] + 1]

    x = torch.tensor([1.0, -1.0], device="neuron")
    built, call = _build(
        aten.neg.default, (x,), compute, results=[executable.ResultLayout.of(torch.empty(2, device="meta"))]
    )
    built.launch(*call)
    with pytest.raises(RuntimeError, match=r"test::aten::neg on neuron:0: negative value, detail 3"):
        torch.neuron.synchronize()
    torch.neuron.synchronize()  # consumed by raising


def test_results_that_are_not_device_tensors_take_their_given_values():
    x = torch.randn(4)
    built, call = _build(
        aten.neg.default,
        (x.to("neuron"),),
        lambda context, args: [-args[0], None, 7],
        results=[executable.ResultLayout.of(torch.empty(4, device="meta")), None, 7],
    )
    result, absent, number = built.launch(*call)
    torch.testing.assert_close(result.cpu(), -x)
    assert absent is None and number == 7


def test_lowerings_run_only_while_an_executable_is_traced():
    with pytest.raises(RuntimeError, match="lowerings run only while an executable is traced"):
        tracing.device_check(True, 0, "never")
    with pytest.raises(RuntimeError, match="random op was traced without generator inputs"):
        tracing.TraceContext().next_key(1)


@pytest.mark.parametrize("ahead_of_time", [True, False])
def test_an_executable_does_not_keep_the_tensors_of_the_call_that_built_it(ahead_of_time):
    x = torch.randn(8, device="neuron")
    built, call = _build(
        aten.neg.default,
        (x,),
        lambda context, args: [-args[0]],
        results=[executable.ResultLayout.of(torch.empty(8, device="meta"))],
        ahead_of_time=ahead_of_time,
    )
    built.launch(*call)
    torch.neuron.synchronize()
    before = torch.neuron.memory_allocated()
    del x, call
    assert torch.neuron.memory_allocated() == before - 512  # x's block (8 floats, rounded to 512 bytes)
