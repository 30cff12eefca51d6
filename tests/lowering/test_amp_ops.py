"""GradScaler's kernels on neuron against CPU: unscaling with the non-finite check, the scale update,
and a GradScaler("neuron") training loop that skips a step with infinite gradients."""

from __future__ import annotations

import copy

import pytest
import torch

import torch_neuronx
from tests.utils import assert_matches_cpu, to_neuron


def _unscale(grads, found_inf, inv_scale):
    grads = [g.clone() for g in grads]
    found_inf = found_inf.clone()
    torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale)
    return grads, found_inf


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("bad", [None, float("inf"), float("-inf"), float("nan")], ids=["finite", "inf", "-inf", "nan"])
def test_non_finite_check_and_unscale_matches_cpu(dtype, bad):
    grads = [torch.randn(3, 4, dtype=dtype) * 64, torch.randn(5, dtype=dtype), torch.tensor(8.0, dtype=dtype)]
    if bad is not None:
        grads[1][2] = bad
    assert_matches_cpu(_unscale, grads, torch.zeros(1), torch.full((1,), 1 / 64))


def test_found_inf_already_set_stays_set():
    assert_matches_cpu(_unscale, [torch.ones(3)], torch.ones(1), torch.full((1,), 0.5))


def test_unscale_runs_as_one_executable():
    grads = to_neuron([torch.randn(i + 2) for i in range(5)])
    found_inf, inv_scale = torch.zeros(1, device="neuron"), torch.full((1,), 0.25, device="neuron")
    torch_neuronx.clear_op_tracking()
    torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale)
    assert torch_neuronx.get_executed_ops() == {"aten::_amp_foreach_non_finite_check_and_unscale_.default": 1}


def _update(scale, tracker, found_inf, interval):
    scale, tracker = scale.clone(), tracker.clone()
    returned = torch._amp_update_scale_(scale, tracker, found_inf, 2.0, 0.5, interval)
    return returned, scale, tracker


@pytest.mark.parametrize(
    ("scale", "tracker", "found"),
    [(1024.0, 0, 0.0), (1024.0, 2, 0.0), (1024.0, 2, 1.0), (1024.0, 0, 1.0), (3e38, 2, 0.0)],
    ids=["count", "grow", "backoff_at_interval", "backoff", "no_overflow"],
)
def test_update_scale_matches_cpu(scale, tracker, found):
    assert_matches_cpu(
        _update,
        torch.full((1,), scale),
        torch.full((1,), tracker, dtype=torch.int32),
        torch.full((1,), found),
        3,
    )


def test_update_scale_is_in_place_on_neuron():
    scale = torch.full((1,), 8.0, device="neuron")
    tracker = torch.zeros(1, dtype=torch.int32, device="neuron")
    returned = torch._amp_update_scale_(scale, tracker, torch.zeros(1, device="neuron"), 2.0, 0.5, 1)
    assert returned is scale
    assert scale.item() == 16.0 and tracker.item() == 0


def _train(model, device, steps=5, inf_step=2):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scaler = torch.amp.GradScaler(device, init_scale=2.0**12, growth_interval=2)
    scales, skipped = [], []
    torch.manual_seed(0)
    for step in range(steps):
        x, y = torch.randn(6, 4).to(device), torch.randn(6, 3).to(device)
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        if step == inf_step:
            loss = loss * float("inf")
        before = [p.detach().clone() for p in model.parameters()]
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        scales.append(scaler.get_scale())
        skipped.append(all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True)))
    return [p.detach().cpu() for p in model.parameters()], scales, skipped


def test_grad_scaler_training_matches_cpu_and_skips_infinite_steps():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    expected, expected_scales, expected_skipped = _train(copy.deepcopy(model), "cpu")
    torch_neuronx.clear_op_tracking()
    actual, scales, skipped = _train(copy.deepcopy(model).to("neuron"), "neuron")
    assert torch_neuronx.get_fallback_ops() == {}, torch_neuronx.get_fallback_ops()
    executed = torch_neuronx.get_executed_ops()
    assert "aten::_amp_foreach_non_finite_check_and_unscale_.default" in executed
    assert "aten::_amp_update_scale_.default" in executed
    assert skipped == expected_skipped == [False, False, True, False, False]
    assert scales == expected_scales
    for got, want in zip(actual, expected, strict=True):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
