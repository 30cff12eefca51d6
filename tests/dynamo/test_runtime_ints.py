"""Python ints that Dynamo makes symbolic (automatic dynamic) are runtime scalars of one executable
where no shape depends on them (dynamo/runtime_ints.py)."""

from __future__ import annotations

import copy
import math

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


def test_a_step_counter_after_a_stride_change_still_builds_one_executable():
    # A call with the same shape and other strides makes only the strides symbolic; specialising
    # such graphs per call (a first fix of nki_op's symbolic strides) built one executable per step.
    before = len(torch_neuronx.get_dynamo_metrics())
    fn = torch.compile(lambda x, step: x * step + 1, backend="neuron")
    x = torch.randn(8, 8, device="neuron")
    fn(x, 1)
    for step in range(1, 6):
        assert_close(fn(x.t(), step).cpu(), x.cpu().t() * step + 1)
    assert [signatures for _, signatures, _ in _new_metrics(before)][-1] == 1


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
        lambda x, n: (x * n, n * 2),  # an int computed from it, returned (a forward saving it)
        lambda x, n: torch.add(x, n, alpha=2),
    ],
    ids=["add-floordiv", "neg-mod-mul", "returned-product", "alpha"],
)
def test_python_arithmetic_on_the_int_keeps_pythons_meaning(fn):
    # The host computes the arithmetic (floor division and modulo of negative ints as Python's)
    # at each call; the executable takes the results as runtime scalars.
    before = len(torch_neuronx.get_dynamo_metrics())
    compiled = torch.compile(fn, backend="neuron")
    x_cpu = torch.linspace(-2, 2, 6)
    x = x_cpu.to("neuron")
    for n in (3, 4, -7, 11):
        assert_close(_to_cpu(compiled(x, n)), fn(x_cpu, n), rtol=0, atol=0)
    assert _new_metrics(before)[1:] == [("inference", 1, 3)]


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, n: x * (n / 10),
        lambda x, n: x + n / 3 - 2 ** (n // 2),
        lambda x, n: x * max(n, 4) - min(n, 2),
    ],
    ids=["truediv", "truediv-pow", "max-min"],
)
def test_true_division_of_the_int_is_a_runtime_float(fn):
    before = len(torch_neuronx.get_dynamo_metrics())
    compiled = torch.compile(fn, backend="neuron")
    x_cpu = torch.linspace(-2, 2, 6)
    x = x_cpu.to("neuron")
    for n in (3, 7, 5, 12):  # a negative one: Dynamo guards pow's exponent sign, a recompile
        assert_close(compiled(x, n).cpu(), fn(x_cpu, n), rtol=0, atol=0)
    assert _new_metrics(before)[1:] == [("inference", 1, 3)]


def test_arithmetic_raises_as_python_does():
    fn = torch.compile(lambda x, n: x * (10 // n), backend="neuron")
    x = torch.ones(2, device="neuron")
    for n in (3, 4):
        fn(x, n)
    with pytest.raises(ZeroDivisionError):
        fn(x, 0)
    assert_close(fn(x, 5).cpu(), torch.full((2,), 2.0))


def test_an_int_computed_past_64_bits_raises_by_name():
    fn = torch.compile(lambda x, n: x * (n * 2**62), backend="neuron")
    x = torch.ones(2, device="neuron")
    for n in (1, 2):
        assert_close(fn(x, n).cpu(), torch.ones(2) * (n * 2**62))
    with pytest.raises(OverflowError, match="the int 73786976294838206464, which Python arithmetic"):
        fn(x, 16)


def test_ints_no_op_reads_may_pass_64_bits_as_in_eager():
    # Returned as they are, or read only by the host's arithmetic: the executable never takes them.
    returned = torch.compile(lambda x, n: (x * 2, n * 2**70), backend="neuron")
    host_only = torch.compile(lambda x, n: x * (n // 2**40), backend="neuron")
    x = torch.ones(2, device="neuron")
    for n in (1, 2, 2**70 + 1):
        doubled, big = returned(x, n)
        assert big == n * 2**70
        assert_close(doubled.cpu(), torch.full((2,), 2.0))
    for n in (2**41, 2**42, 2**70):
        assert_close(host_only(x, n).cpu(), torch.full((2,), float(n // 2**40)))


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, n: x * int(n / 2),
        lambda x, n: x * round(n / 4),
        lambda x, n: x * math.ceil((n + 1) / 3),
        lambda x, n: x * math.floor(n / 3),
        lambda x, n: x * math.sqrt(n),
    ],
    ids=["int", "round", "ceil", "floor", "sqrt"],
)
def test_python_conversions_of_int_arithmetic_are_the_hosts(fn):
    # int(n / 2), round(...), math.ceil(...) of a symbolic int's arithmetic: the host's too (they
    # stayed in the graph, where nothing lowers them: helper-67).
    before = len(torch_neuronx.get_dynamo_metrics())
    compiled = torch.compile(fn, backend="neuron")
    x = torch.linspace(-2, 2, 5)
    for n in (6, 7, 9, 12):
        assert_close(compiled(x.to("neuron"), n).cpu(), fn(x, n), rtol=0, atol=0)
    assert _new_metrics(before)[1:] == [("inference", 1, 3)]


def _to_cpu(value):
    if isinstance(value, tuple):
        return tuple(map(_to_cpu, value))
    return value.cpu() if isinstance(value, torch.Tensor) else value


def test_a_gradient_scaled_by_an_int_expression_follows_each_value():
    fn = torch.compile(lambda w, n: (w * (n + 1)).sum(), backend="neuron")
    for n in (2, 3, 5):
        w = torch.ones(3, device="neuron", requires_grad=True)
        fn(w, n).backward()
        assert_close(w.grad.cpu(), torch.full((3,), float(n + 1)))


@pytest.mark.parametrize("order", [(2, -1, 3), (2, 3, -1)], ids=str)
def test_the_eager_checks_of_an_int_see_each_calls_value(order):
    # pow's refusal of a negative integer exponent reads the value: made at every call, as eager.
    fn = torch.compile(lambda t, n: t**n, backend="neuron")
    t = torch.tensor([1, 2, 3], device="neuron")
    for n in order:
        if n < 0:
            with pytest.raises(RuntimeError, match="Integers to negative integer powers are not allowed"):
                fn(t, n)
        else:
            assert_close(fn(t, n).cpu(), t.cpu() ** n)


def test_an_int_past_64_bits_raises_by_name():
    fn = torch.compile(lambda x, n: x * n, backend="neuron")
    x = torch.ones(2, device="neuron")
    for n in (3, 4):
        fn(x, n)
    # Eager raises OverflowError ("int too big to convert") for such a number too.
    with pytest.raises(OverflowError, match="the int argument 18446744073709551619 does not fit in 64 bits"):
        fn(x, 2**64 + 3)


def test_both_sizes_of_a_3d_input_changing():
    # Two symbolic sizes multiplied in the graph (s0 * s1): specialised, as before runtime ints.
    linear = torch.nn.Linear(8, 8)
    on_device = copy.deepcopy(linear).to("neuron")
    fn = torch.compile(lambda x: on_device(x).sum(), backend="neuron")
    for shape in ((2, 5, 8), (3, 7, 8), (4, 2, 8)):
        x = torch.randn(shape)
        assert_close(fn(x.to("neuron")).cpu(), linear(x).sum())


def test_an_int_added_to_an_int32_tensor_wraps_as_eager():
    fn = torch.compile(lambda t, n: t + n, backend="neuron")
    t = torch.arange(4, dtype=torch.int32)
    for n in (3, 2**40 + 5, -(2**35)):
        assert_close(fn(t.to("neuron"), n).cpu(), t + n)


def test_ints_used_as_sizes_are_still_specialised():
    before = len(torch_neuronx.get_dynamo_metrics())
    as_size = torch.compile(lambda x, n: x.view(n, -1) * n, backend="neuron")
    as_computed_size = torch.compile(lambda x, n: x.view(n // 2, -1) + n, backend="neuron")
    x = torch.ones(12, device="neuron")
    for n in (2, 4, 6):
        assert_close(as_size(x, n).cpu(), torch.ones(12).view(n, -1) * n)
        assert_close(as_computed_size(x, n).cpu(), torch.ones(12).view(n // 2, -1) + n)
    assert [signatures for _, signatures, _ in _new_metrics(before)] == [1, 1, 2, 2]
