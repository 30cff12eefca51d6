"""Python ints that Dynamo makes symbolic (automatic dynamic) are runtime scalars of one executable
where no shape depends on them (dynamo/runtime_ints.py)."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

import torch_neuronx


def _new_metrics(before):
    return [(m["kind"], m["signatures"], m["calls"]) for m in torch_neuronx.get_dynamo_metrics()[before:]]


def test_a_step_counter_builds_one_executable_for_every_value():
    before = len(torch_neuronx.get_dynamo_metrics())
    fn = torch.compile(lambda x, step: x * step + step, backend="neuron")
    x = torch.arange(4.0, device="neuron")
    for step in range(2, 8):
        assert_close(fn(x, step).cpu(), x.cpu() * step + step)
    # Dynamo's first graph has the first value as a constant; the second takes every later one.
    assert _new_metrics(before) == [("inference", 1, 1), ("inference", 1, 5)]


def test_a_training_step_takes_the_int_in_forward_and_backward():
    before = len(torch_neuronx.get_dynamo_metrics())
    fn = torch.compile(lambda w, scale: (w.sin() * scale).sum(), backend="neuron")
    w_cpu = torch.randn(5)
    w = w_cpu.to("neuron").requires_grad_()
    for scale in (2, 3, 4, 5):
        w.grad = None
        loss = fn(w, scale)
        loss.backward()
        assert_close(loss.cpu(), (w_cpu.sin() * scale).sum())
        # The forward graph returns the int for the backward graph: the call's value, not the first.
        assert_close(w.grad.cpu(), w_cpu.cos() * scale)
    assert _new_metrics(before)[2:] == [("forward", 1, 3), ("backward", 1, 3)]


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, n: x * (n + 1) - n // 2,
        lambda x, n: x + (-n) % 3 - n * 4,
        lambda x, n: torch.add(x, n, alpha=2) if x.is_floating_point() else x,
    ],
    ids=["add-floordiv", "neg-mod-mul", "alpha"],
)
def test_integer_arithmetic_on_the_int_keeps_pythons_meaning(fn):
    compiled = torch.compile(fn, backend="neuron")
    x = torch.linspace(-2, 2, 6, device="neuron")
    for n in (3, 4, -7, 11):
        assert_close(compiled(x, n).cpu(), fn(x.cpu(), n))


def test_an_int_added_to_an_int32_tensor_wraps_as_eager():
    fn = torch.compile(lambda t, n: t + n, backend="neuron")
    t = torch.arange(4, dtype=torch.int32)
    for n in (3, 2**40 + 5, -(2**35)):
        assert_close(fn(t.to("neuron"), n).cpu(), t + n)


def test_ints_used_as_sizes_or_divisors_are_still_specialised():
    as_size = torch.compile(lambda x, n: x.view(n, -1) * n, backend="neuron")
    as_divisor = torch.compile(lambda x, n: x * (10 // n), backend="neuron")
    x = torch.ones(6, device="neuron")
    for n in (2, 3, 6):
        assert_close(as_size(x, n).cpu(), torch.ones(6).view(n, -1) * n)
        assert_close(as_divisor(x, n).cpu(), torch.ones(6) * (10 // n))
