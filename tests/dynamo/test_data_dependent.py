"""Graphs that read data into Python (``.item()`` with ``capture_scalar_outputs``) or make sizes from
it (``capture_dynamic_output_shape_ops``) compile and give eager's values."""

from __future__ import annotations

import math

import pytest
import torch
import torch._dynamo
from torch.testing import assert_close


@pytest.fixture
def dynamo_config():
    with torch._dynamo.config.patch(capture_scalar_outputs=True, capture_dynamic_output_shape_ops=True):
        yield


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32], ids=str)
def test_a_float_read_with_item_scales_a_tensor(dynamo_config, dtype):
    def fn(x):
        return x * x.sum().item()

    x = torch.arange(-3, 4).to(dtype)
    # The float goes through float64 (Python's float) and back: an exact round trip, folded.
    assert_close(torch.compile(fn, backend="neuron")(x.to("neuron")).cpu(), fn(x))


@pytest.mark.parametrize(
    "loss",
    [
        lambda w, x: (w * x.sum().item()).pow(2).sum(),
        lambda w, x: (w * int(x.sum().item())).pow(2).sum(),
        lambda w, x: w.clamp(max=x.max().item()).sum(),
        lambda w, x: w.clamp(min=x.min().item()).pow(2).sum(),
        lambda w, x: torch.where(w <= x.mean().item(), w, 2 * w).sum(),
    ],
    ids=["float-factor", "int-factor", "clamp-max", "clamp-min", "compared"],
)
def test_values_read_with_item_in_a_training_step(dynamo_config, loss):
    # The backward reads the float too: the joint graph's round trip is folded before AOTAutograd
    # partitions it, so the forward saves it in float32, not as a float64 tensor; as a bound or a
    # comparand of float32 tensors (the clamp's gradient mask compares w with it) its float32
    # source replaces it (helper-67); int() of it runs on the host between compiled parts.
    w_cpu, x = torch.randn(6), torch.tensor([1.5, 2.0, -0.25, 4.0, 0.5, -1.0])
    w = w_cpu.to("neuron").requires_grad_()
    compiled = torch.compile(loss, backend="neuron")(w, x.to("neuron"))
    compiled.backward()
    w_cpu.requires_grad_()
    expected = loss(w_cpu, x)
    expected.backward()
    assert_close(compiled.cpu(), expected)
    assert_close(w.grad.cpu(), w_cpu.grad)


def test_a_float_read_with_item_beside_integers_is_not_narrowed(dynamo_config):
    # An int64 tensor compared with the float64 value compares in float64 (the 0-dim float wins):
    # float32 would round the integers, so the FP64 policy's error stands.
    def fn(t, x):
        return (t <= x.sum().item()).sum()

    with pytest.raises(Exception, match="float64 \\(double\\) tensors are not supported"):  # in Dynamo's wrapper
        torch.compile(fn, backend="neuron")(torch.arange(5, device="neuron") + 2**40, torch.ones(3, device="neuron"))


def test_arithmetic_on_a_float_read_with_item_raises_the_fp64_policy(dynamo_config):
    with pytest.raises(TypeError, match="float64 \\(double\\) tensors are not supported") as raised:
        torch.compile(lambda x: x * (x.sum().item() * 0.1), backend="neuron")(torch.ones(3, device="neuron"))
    assert "Do it on the tensor instead (x.sum() * 0.1, not x.sum().item() * 0.1)" in "\n".join(raised.value.__notes__)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x * int(x.sum().item()),
        lambda x: x * math.floor(x.sum().item()),
        lambda x: x + round(x.sum().item()),
        lambda x: x[: int((x > 0).sum().item())] * 3,
    ],
    ids=["int", "floor", "round", "slice"],
)
def test_python_on_a_value_read_with_item_runs_on_the_host(dynamo_config, fn):
    # int(s), math.floor(s), round(s) of a float read from the device are Python on the host, as in
    # eager: they run between compiled parts (they raised "math.trunc has no neuron lowering").
    x = torch.tensor([1.5, -2.25, 3.0, 0.5])
    assert_close(torch.compile(fn, backend="neuron")(x.to("neuron")).cpu(), fn(x))


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x[x > 0] * 2,
        lambda x: torch.masked_select(x, x < 0.5).sum() + x,
        lambda x: torch.nonzero(x > 0).float().mean(dim=0),
    ],
    ids=["boolean-index", "masked_select", "nonzero"],
)
def test_data_dependent_sizes_run_eagerly_between_compiled_parts(dynamo_config, fn):
    compiled = torch.compile(fn, backend="neuron")
    for seed in range(3):  # a new count of selected elements each call
        x = torch.randn(4, 5, generator=torch.Generator().manual_seed(seed))
        assert_close(compiled(x.to("neuron")).cpu(), fn(x))


def test_training_through_a_boolean_index(dynamo_config):
    def loss(w, x):
        return ((w * x)[x > 0] ** 2).sum()

    w_cpu = torch.randn(6)
    x = torch.randn(6)
    w = w_cpu.to("neuron").requires_grad_()
    torch.compile(loss, backend="neuron")(w, x.to("neuron")).backward()
    w_cpu.requires_grad_()
    loss(w_cpu, x).backward()
    assert_close(w.grad.cpu(), w_cpu.grad)
