"""Fused optimizer steps (torch_neuronx/lowering/optimizer.py) against CPU's fused kernels."""

from __future__ import annotations

import copy

import pytest
import torch

import torch_neuronx
from tests.utils import assert_matches_cpu

OPTIONS = {
    "default": {},
    "amsgrad": {"amsgrad": True},
    "maximize_decay": {"maximize": True, "weight_decay": 0.1},
    "tensor_lr": {"lr": torch.tensor(0.02)},
}


@pytest.mark.parametrize("options", OPTIONS)
@pytest.mark.parametrize("optimizer", [torch.optim.Adam, torch.optim.AdamW])
def test_fused_optimizer_steps_match_cpu(optimizer, options):
    """Three steps of Adam/AdamW(fused=True): one executable per step, no CPU fallback."""
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2))
    models = {"cpu": model, "neuron": copy.deepcopy(model).to("neuron")}
    kwargs = {"lr": 0.01, **OPTIONS[options]}
    optimizers = {d: optimizer(m.parameters(), fused=True, **copy.deepcopy(kwargs)) for d, m in models.items()}
    x = torch.randn(8, 6)
    torch_neuronx.clear_op_tracking()
    for _ in range(3):
        for device, model_on in models.items():
            optimizers[device].zero_grad()
            model_on(x.to(device)).square().sum().backward()
            optimizers[device].step()
    assert torch_neuronx.get_fallback_ops() == {}
    for want, got in zip(models["cpu"].parameters(), models["neuron"].parameters(), strict=True):
        torch.testing.assert_close(got.detach().cpu(), want.detach())
        for key in ("exp_avg", "exp_avg_sq"):
            state = optimizers["neuron"].state[got][key]
            torch.testing.assert_close(state.cpu(), optimizers["cpu"].state[want][key])


@pytest.mark.parametrize("found_inf", [0.0, 1.0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_adamw_unscales_gradients_and_skips_steps_with_infinities(dtype, found_inf):
    """GradScaler's arguments: gradients are divided by grad_scale and written back unscaled; a
    nonzero found_inf leaves every tensor as it was."""
    shapes = [(3, 4), (5,)]

    def step(*lists_and_steps, scale, inf):
        params, grads, exp_avgs, exp_avg_sqs, steps = ([t.clone() for t in tensors] for tensors in lists_and_steps)
        torch._fused_adamw_(
            params, grads, exp_avgs, exp_avg_sqs, [], steps, lr=0.1, beta1=0.9, beta2=0.999,
            weight_decay=0.01, eps=1e-8, amsgrad=False, maximize=False, grad_scale=scale, found_inf=inf,
        )  # fmt: skip
        return params, grads, exp_avgs, exp_avg_sqs

    lists = [[torch.randn(s).to(dtype) for s in shapes] for _ in range(2)]
    moments = [[torch.rand(s).to(dtype) for s in shapes] for _ in range(2)]
    steps = [torch.tensor(3.0) for _ in shapes]
    assert_matches_cpu(step, *lists, *moments, steps, scale=torch.tensor(2.0), inf=torch.tensor(found_inf))
