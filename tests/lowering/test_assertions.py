"""Assertions on a tensor's value (torch_neuronx/lowering/assertions.py) against CPU PyTorch: a false
condition raises the CPU's error at the next synchronisation, as CUDA's device-side assert does."""

from __future__ import annotations

import re

import pytest
import torch
import torch._dynamo

import torch_neuronx
from torch_neuronx import _config

aten = torch.ops.aten

blocking = pytest.mark.skipif(_config.launch_blocking(), reason="NEURON_LAUNCH_BLOCKING=1 raises faults at the op")


def _cpu_error(fn, *args) -> str | None:
    """The CPU's error message for ``fn(*args)``, or None when it does not raise."""
    try:
        fn(*args)
    except RuntimeError as error:
        return str(error).splitlines()[0]
    return None


ASSERTS = {
    "default": lambda t: torch._assert_async(t),
    "msg": lambda t: aten._assert_async.msg(t, "values must be {positive}"),
    "empty_msg": lambda t: aten._assert_async.msg(t, ""),
}

VALUES = {
    "true_bool": torch.tensor(True),
    "false_bool": torch.tensor([False]),
    "zero_int": torch.tensor(0, dtype=torch.int32),
    "nan": torch.tensor(float("nan")),
    "zero_bfloat16": torch.tensor([[0.0]], dtype=torch.bfloat16),
    "negative_zero": torch.tensor(-0.0),
    "imaginary": torch.tensor(1j, dtype=torch.complex64),
    "complex_zero": torch.tensor(0j, dtype=torch.complex64),
}


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("assertion", ASSERTS)
def test_eager_assertion_raises_the_cpus_error_at_synchronization(assertion, value):
    fn, t = ASSERTS[assertion], VALUES[value]
    expected = _cpu_error(fn, t)
    assert fn(t.to("neuron")) is None  # launched: a false condition is not raised yet
    if expected is None:
        torch.neuron.synchronize()
    else:
        with pytest.raises(RuntimeError, match=re.escape(expected)):
            torch.neuron.synchronize()
    torch.neuron.synchronize()  # the fault was consumed
    assert torch_neuronx.get_fallback_ops() == {}


@blocking
def test_a_false_assertion_waits_for_the_next_host_read():
    x = torch.arange(3.0, device="neuron")
    aten._assert_async.msg((x < 0).any(), "no negative values")
    later = x * 2
    with pytest.raises(RuntimeError, match="aten::_assert_async.msg on neuron:0: no negative values"):
        later.cpu()
    torch.testing.assert_close(later.cpu(), torch.tensor([0.0, 2.0, 4.0]))


@pytest.mark.parametrize("shape", [(0,), (2,), (1, 2)])
def test_assertion_of_several_or_no_values_raises_at_the_call_as_on_cpu(shape):
    t = torch.ones(shape)
    expected = _cpu_error(torch._assert_async, t)
    assert expected is not None and "Boolean value of Tensor with" in expected
    with pytest.raises(RuntimeError, match=re.escape(expected)):
        torch._assert_async(t.to("neuron"))


def test_functional_assertion_returns_its_token():
    token = torch.ones(())
    got = aten._functional_assert_async.msg(torch.tensor(True, device="neuron"), "fine", token.to("neuron"))
    torch.testing.assert_close(got.cpu(), aten._functional_assert_async.msg(torch.tensor(True), "fine", token))
    aten._functional_assert_async.msg(torch.tensor(0, device="neuron"), "token check", token.to("neuron"))
    with pytest.raises(RuntimeError, match="token check"):
        torch.neuron.synchronize()


def _positive_sum(x):
    torch._assert_async(x.sum() > 0)
    return x * 2


def _valid_classes(labels):
    return torch.nn.functional.one_hot(labels, 4).float().sum(0)  # checks its labels with _assert_async.msg


def test_compiled_assertion_is_carried_by_the_graphs_executable():
    torch._dynamo.reset()
    compiled = torch.compile(_positive_sum, backend="neuron", fullgraph=True)
    x = torch.tensor([1.0, 2.0])
    before = len(torch_neuronx.get_dynamo_metrics())
    torch.testing.assert_close(compiled(x.to("neuron")).cpu(), _positive_sum(x))
    result = compiled(-x.to("neuron"))
    with pytest.raises(RuntimeError, match="Expected Tensor with single nonzero value, but got zero"):
        result.cpu()
    # The graph's executable faulted: its outputs stay undefined, as CUDA's sticky assert leaves them.
    with pytest.raises(RuntimeError, match="Expected Tensor with single nonzero value, .*which are undefined"):
        result.cpu()
    (metrics,) = torch_neuronx.get_dynamo_metrics()[before:]  # one executable, not split, not eager
    assert metrics["signatures"] == 1 and metrics["calls"] == 2 and not metrics["eager_fallback"]
    assert torch_neuronx.get_fallback_ops() == {}
    torch._dynamo.reset()


def test_compiled_one_hot_raises_its_message_for_bad_labels():
    torch._dynamo.reset()
    compiled = torch.compile(_valid_classes, backend="neuron", fullgraph=True)
    labels = torch.tensor([0, 3, 3, 1])
    torch.testing.assert_close(compiled(labels.to("neuron")).cpu(), _valid_classes(labels))
    expected = _cpu_error(_valid_classes, torch.tensor([0, 4]))
    assert expected is not None and expected.endswith("Class values must be smaller than num_classes.")
    with pytest.raises(RuntimeError, match=re.escape(expected)):
        compiled(torch.tensor([0, 4], device="neuron")).cpu()
    torch._dynamo.reset()
