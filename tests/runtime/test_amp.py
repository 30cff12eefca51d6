"""torch.autocast("neuron") and torch.amp.GradScaler("neuron")."""

from __future__ import annotations

import pytest
import torch


def test_autocast_runs_matmuls_in_bfloat16_and_keeps_fp32_ops():
    x = torch.randn(4, 8, device="neuron")
    linear = torch.nn.Linear(8, 3).to("neuron")
    with torch.autocast("neuron", dtype=torch.bfloat16):
        assert torch.is_autocast_enabled("neuron")
        y = linear(x)
        z = torch.mm(x, x.t())
        s = torch.softmax(z, dim=-1)
        e = torch.exp(z)
    assert y.dtype == torch.bfloat16 and z.dtype == torch.bfloat16
    assert s.dtype == torch.float32 and e.dtype == torch.float32
    expected = torch.nn.functional.linear(
        x.cpu().bfloat16(), linear.weight.cpu().bfloat16(), linear.bias.cpu().bfloat16()
    )
    torch.testing.assert_close(y.cpu(), expected)


def test_autocast_default_dtype_is_bfloat16():
    with torch.autocast("neuron"):
        assert torch.get_autocast_dtype("neuron") == torch.bfloat16


def test_autocast_backward_gives_float32_gradients():
    x = torch.randn(4, 8, device="neuron", requires_grad=True)
    linear = torch.nn.Linear(8, 3).to("neuron")
    with torch.autocast("neuron", dtype=torch.bfloat16):
        loss = linear(x).float().sum()
    loss.backward()
    assert x.grad.dtype == torch.float32 and linear.weight.grad.dtype == torch.float32


def test_unsupported_autocast_dtype_warns():
    with pytest.warns(UserWarning, match="neuron"):
        with torch.autocast("neuron", dtype=torch.float64):
            pass


def test_autocast_to_float32_is_honoured_as_on_cuda():
    a = torch.randn(4, 4, dtype=torch.bfloat16, device="neuron")
    with torch.autocast("neuron", dtype=torch.float32):
        assert (a @ a).dtype == torch.float32


def test_binary_cross_entropy_is_refused_under_autocast_as_on_cuda():
    # CUDA's autocast bans it (a 16-bit probability's log); neuron computed it (helper-62).
    p, target = torch.rand(4, device="neuron"), torch.rand(4, device="neuron")
    with (
        torch.autocast("neuron"),
        pytest.raises(
            RuntimeError, match="^torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast"
        ),
    ):
        torch.nn.functional.binary_cross_entropy(p, target)
    with torch.autocast("neuron"):
        torch.nn.functional.binary_cross_entropy_with_logits(p, target)  # the safe form runs


def test_grad_scaler_matches_cpu_and_skips_non_finite_steps():
    torch.manual_seed(0)
    models = {d: torch.nn.Linear(4, 2).to(d) for d in ("cpu", "neuron")}
    models["neuron"].load_state_dict(models["cpu"].state_dict())
    results = {}
    for device, model in models.items():
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler(device, init_scale=2.0**8)
        x = torch.ones(3, 4, device=device)
        for poison in (False, True, False):
            opt.zero_grad()
            loss = model(x).sum() * (float("inf") if poison else 1.0)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        results[device] = (model.weight.detach().cpu(), scaler.get_scale())
    torch.testing.assert_close(results["neuron"][0], results["cpu"][0])
    assert results["neuron"][1] == results["cpu"][1] == 2.0**7


@pytest.mark.parametrize("device", ["cpu", "neuron"])
def test_disabled_grad_scaler_unscales_as_a_no_op(device):
    # A disabled scaler holds no scale; unscale_, step and update pass through, as PyTorch's do.
    model = torch.nn.Linear(4, 2).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(device, enabled=False)
    scaler.scale(model(torch.ones(3, 4, device=device)).sum()).backward()
    grad = model.weight.grad.clone()
    scaler.unscale_(opt)
    torch.testing.assert_close(model.weight.grad, grad)
    scaler.step(opt)
    scaler.update()


def test_device_named_grad_scaler_warns_as_cudas_and_scales_on_neuron():
    # torch.cuda.amp.GradScaler's deprecation, in its words with the device's name.
    import torch.neuron.amp

    with pytest.warns(FutureWarning) as caught:
        scaler = torch.neuron.amp.GradScaler(init_scale=4.0)
    assert str(caught[0].message) == (
        "`torch.neuron.amp.GradScaler(args...)` is deprecated. "
        "Please use `torch.amp.GradScaler('neuron', args...)` instead."
    )
    assert caught[0].filename == __file__
    assert isinstance(scaler, torch.amp.GradScaler)
    scaled = scaler.scale(torch.ones(2, device="neuron"))
    assert scaled.device.type == "neuron"
    torch.testing.assert_close(scaled.cpu(), torch.full((2,), 4.0))


def test_device_named_autocast_warns_as_cudas_and_casts_to_the_device_dtype():
    # torch.cuda.amp.autocast, with the device's name and its autocast dtype (bfloat16).
    import torch.neuron.amp

    linear = torch.nn.Linear(4, 3)
    x = torch.randn(2, 4)
    on_device = torch.nn.Linear(4, 3).to("neuron")
    on_device.load_state_dict(linear.state_dict())
    with pytest.warns(FutureWarning) as caught:
        with torch.neuron.amp.autocast():
            result = on_device(x.to("neuron"))
    assert str(caught[0].message) == (
        "`torch.neuron.amp.autocast(args...)` is deprecated. "
        "Please use `torch.amp.autocast('neuron', args...)` instead."
    )
    assert caught[0].filename == __file__
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = linear(x)
    assert result.dtype == torch.bfloat16
    torch.testing.assert_close(result.cpu(), expected)
    with pytest.warns(FutureWarning):
        assert torch.neuron.amp.autocast(dtype=torch.float16)(on_device)(x.to("neuron")).dtype == torch.float16


def test_device_named_custom_fwd_casts_inputs_under_autocast():
    import torch.neuron.amp

    with pytest.warns(FutureWarning, match=r"torch.amp.custom_fwd\(args..., device_type='neuron'\)"):

        class Doubled(torch.autograd.Function):
            @staticmethod
            @torch.neuron.amp.custom_fwd(cast_inputs=torch.float32)
            def forward(ctx, a):
                return a * 2

            @staticmethod
            @torch.neuron.amp.custom_bwd
            def backward(ctx, grad):
                return grad * 2

    a = torch.ones(3, device="neuron", dtype=torch.bfloat16, requires_grad=True)
    with torch.autocast("neuron"):
        doubled = Doubled.apply(a)
    assert doubled.dtype == torch.float32
    doubled.sum().backward()
    torch.testing.assert_close(a.grad.cpu(), torch.full((3,), 2.0, dtype=torch.bfloat16))
