"""Fused optimizer steps (torch_neuronx/lowering/optimizer.py) against CPU's fused kernels."""

from __future__ import annotations

import copy

import pytest
import torch

import torch_neuronx
from tests.utils import assert_matches_cpu

OPTIONS = {
    torch.optim.Adam: {"amsgrad": {"amsgrad": True}, "maximize_decay": {"maximize": True, "weight_decay": 0.1}},
    torch.optim.AdamW: {"amsgrad": {"amsgrad": True}, "maximize_decay": {"maximize": True, "weight_decay": 0.1}},
    torch.optim.SGD: {
        "momentum": {"momentum": 0.9},
        "nesterov_decay": {"momentum": 0.9, "nesterov": True, "weight_decay": 0.1},
        "dampening_maximize": {"momentum": 0.9, "dampening": 0.3, "maximize": True},
    },
}
CASES = [
    pytest.param(optimizer, options, id=f"{optimizer.__name__}-{name}")
    for optimizer, named in OPTIONS.items()
    for name, options in {"plain": {}, **named, "tensor_lr": {"lr": torch.tensor(0.02)}}.items()
]


@pytest.mark.parametrize(("optimizer", "options"), CASES)
def test_fused_optimizer_steps_match_cpu(optimizer, options):
    """Three steps of Adam/AdamW/SGD(fused=True): one executable per step, no CPU fallback."""
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2))
    models = {"cpu": model, "neuron": copy.deepcopy(model).to("neuron")}
    kwargs = {"lr": 0.01, **options}
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
        for key, state in optimizers["cpu"].state[want].items():
            if key != "step":
                torch.testing.assert_close(optimizers["neuron"].state[got][key].cpu(), state)


def _adamw_step(params, grads, exp_avgs, exp_avg_sqs, steps, scale, inf):
    torch._fused_adamw_(
        params, grads, exp_avgs, exp_avg_sqs, [], steps, lr=0.1, beta1=0.9, beta2=0.999,
        weight_decay=0.01, eps=1e-8, amsgrad=False, maximize=False, grad_scale=scale, found_inf=inf,
    )  # fmt: skip
    return params, grads, exp_avgs, exp_avg_sqs


def _sgd_step(params, grads, buffers, _, __, scale, inf):
    torch._fused_sgd_(
        params, grads, buffers, weight_decay=0.01, momentum=0.9, lr=0.1, dampening=0.0, nesterov=True,
        maximize=False, is_first_step=False, grad_scale=scale, found_inf=inf,
    )  # fmt: skip
    return params, grads, buffers


@pytest.mark.parametrize("found_inf", [0.0, 1.0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("fused_step", [_adamw_step, _sgd_step], ids=["adamw", "sgd"])
def test_fused_steps_unscale_gradients_and_skip_steps_with_infinities(fused_step, dtype, found_inf):
    """GradScaler's arguments: gradients are divided by grad_scale and written back unscaled; a
    nonzero found_inf leaves every tensor as it was."""
    shapes = [(3, 4), (5,)]

    def step(*lists_and_steps, scale, inf):
        return fused_step(*([t.clone() for t in tensors] for tensors in lists_and_steps), scale, inf)

    lists = [[torch.randn(s).to(dtype) for s in shapes] for _ in range(2)]
    moments = [[torch.rand(s).to(dtype) for s in shapes] for _ in range(2)]
    steps = [torch.tensor(3.0) for _ in shapes]
    assert_matches_cpu(step, *lists, *moments, steps, scale=torch.tensor(2.0), inf=torch.tensor(found_inf))
