"""User errors get PyTorch's own messages; device faults surface at the next synchronization point."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch


def test_mixed_neuron_and_cpu_tensors_raise_pytorch_error():
    x = torch.ones(3, device="neuron")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        x + torch.ones(3)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.mm(torch.ones(2, 2, device="neuron"), torch.ones(2, 2))


def test_mixed_cores_raise(two_cores):
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device.*neuron:1"):
        torch.ones(3, device="neuron:0") + torch.ones(3, device="neuron:1")


def test_cpu_scalar_tensors_mix_as_on_cuda():
    x = torch.ones(3, device="neuron")
    torch.testing.assert_close((x * torch.tensor(2.0)).cpu(), torch.full((3,), 2.0))


def test_shape_errors_are_pytorchs_own():
    # The message is that of PyTorch's meta kernel for addmm, as for any device without its own.
    with pytest.raises(RuntimeError, match=r"must have same reduction dim, but got \[2, 3\] X \[5, 4\]"):
        torch.nn.functional.linear(torch.ones(2, 3, device="neuron"), torch.ones(4, 5, device="neuron"))
    with pytest.raises(RuntimeError, match="broadcast a dimension of length 3"):
        torch.ones(2, device="neuron") + torch.ones(3, device="neuron")


def test_integer_division_by_zero_is_a_device_fault_raised_at_sync():
    x = torch.tensor([4, 5], device="neuron")
    y = torch.div(x, torch.tensor([1, 0], device="neuron"), rounding_mode="floor")
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        y.cpu()
    assert (x + 1).tolist() == [5, 6]


def _run(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ, **env), check=False
    )


def test_launch_blocking_raises_at_the_op():
    code = (
        "import torch\n"
        "x = torch.tensor([4, 5], device='neuron')\n"
        "try:\n"
        "    torch.div(x, torch.tensor([1, 0], device='neuron'), rounding_mode='trunc')\n"
        "except RuntimeError as e:\n"
        "    print('raised at op:', 'ZeroDivisionError' in str(e))\n"
    )
    result = _run(code, NEURON_LAUNCH_BLOCKING="1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "raised at op: True"


def test_stack_trace_of_the_launch_is_recorded_on_request():
    code = (
        "import torch\n"
        "def faulty():\n"
        "    return torch.remainder(torch.tensor([3], device='neuron'), torch.tensor([0], device='neuron'))\n"
        "y = faulty()\n"
        "try:\n"
        "    torch.neuron.synchronize()\n"
        "except RuntimeError as e:\n"
        "    print('in faulty' if 'in faulty' in str(e) else str(e))\n"
    )
    result = _run(code, TORCH_NEURONX_ENABLE_STACK_TRACE="1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "in faulty"
