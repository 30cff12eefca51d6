"""The visible CPU fallback (decision 7): warns once, counted, switchable to an error."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest
import torch

import torch_neuronx
from torch_neuronx.eager import fallback

# An op with a CPU kernel only: the device has no lowering or decomposition for it.
_library = torch.library.Library("neuron_fallback_test", "DEF")
_library.define("scaled_cumsum(Tensor self, float scale) -> Tensor")
_library.define("halve_(Tensor(a!) self) -> Tensor(a!)")
_library.impl("scaled_cumsum", lambda self, scale: torch.cumsum(self, 0) * scale, "CPU")
_library.impl("halve_", lambda self: self.mul_(0.5), "CPU")
_library.define("halve_each_(Tensor(a!)[] tensors) -> ()")
_library.impl("halve_each_", lambda tensors: [t.mul_(0.5) for t in tensors] and None, "CPU")


def test_fallback_runs_on_cpu_with_one_warning_and_is_counted():
    x = torch.arange(5.0)
    y = x.to("neuron")
    with pytest.warns(UserWarning, match="neuron_fallback_test::scaled_cumsum.default is not supported natively"):
        result = torch.ops.neuron_fallback_test.scaled_cumsum(y, 2.0)
    assert result.device.type == "neuron"
    torch.testing.assert_close(result.cpu(), torch.cumsum(x, 0) * 2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.ops.neuron_fallback_test.scaled_cumsum(y, 2.0)
    assert torch_neuronx.get_fallback_ops() == {"neuron_fallback_test::scaled_cumsum.default": 2}
    assert "aten::_copy_from" in torch_neuronx.get_executed_ops()


def test_fallback_writes_mutated_arguments_back():
    y = torch.tensor([2.0, 4.0], device="neuron")
    view = y[1:]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        returned = torch.ops.neuron_fallback_test.halve_(view)
    assert returned is view
    torch.testing.assert_close(y.cpu(), torch.tensor([2.0, 2.0]))


@pytest.mark.parametrize(
    "items",
    [
        lambda t: [t, t],
        lambda t: [t[0:6], t[4:10]],
        lambda t: [t[0:4], t[4:8]],
        lambda t: [t[1:4].view(torch.float16), t[3:8]],  # bytes 4 to 32 of 40, in two dtypes
    ],
    ids=["same_tensor_twice", "overlapping_views", "disjoint_views", "views_in_two_dtypes"],
)
def test_fallback_keeps_the_memory_its_arguments_share(items):
    # Each argument copied to the host alone lost the sharing: the CPU kernel halved [t, t] once.
    def run(device):
        t = torch.arange(1.0, 11.0, device=device)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.ops.neuron_fallback_test.halve_each_(items(t))
        return t.cpu()

    torch.testing.assert_close(run("neuron"), run("cpu"), atol=0, rtol=0)


def test_fallback_refuses_a_written_argument_whose_elements_share_memory_before_running():
    # The CPU's _fused_adagrad_ read an expanded gradient past its storage (garbage state sums), and
    # the write-back then failed after the other arguments had been written.
    first, second = torch.ones(3, device="neuron"), torch.ones(1, device="neuron")
    with pytest.raises(RuntimeError) as raised, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.ops.neuron_fallback_test.halve_each_([first, second.expand(3)])
    assert str(raised.value) == (
        "neuron_fallback_test::halve_each_.default: tensors[1] (written by the op): unsupported operation: "
        "more than one element of the written-to tensor refers to a single memory location. Please clone() "
        "the tensor before performing the operation."
    )
    torch.testing.assert_close(first.cpu(), torch.ones(3), atol=0, rtol=0)


def test_fallback_writes_an_empty_expanded_argument_as_the_cpu():
    # ATen takes an empty tensor for contiguous: no internal overlap (helper-53).
    empty = torch.zeros(0, 1, device="neuron").expand(0, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert torch.ops.neuron_fallback_test.halve_(empty).shape == (0, 3)


def test_clear_op_tracking():
    torch.ones(2, device="neuron").add_(1)
    assert torch_neuronx.get_executed_ops()
    torch_neuronx.clear_op_tracking()
    assert torch_neuronx.get_executed_ops() == {} and torch_neuronx.get_fallback_ops() == {}


def test_strict_mode_raises_not_implemented_error_naming_the_op():
    code = (
        "import torch, tests.runtime.test_fallback\n"
        "try:\n"
        "    torch.ops.neuron_fallback_test.scaled_cumsum(torch.ones(3, device='neuron'), 1.0)\n"
        "except NotImplementedError as e:\n"
        "    print(e)\n"
    )
    env = dict(os.environ, NEURON_FALLBACK_ENABLED="0")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=root, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "neuron_fallback_test::scaled_cumsum.default has no neuron lowering" in result.stdout
    assert "NEURON_FALLBACK_ENABLED=0" in result.stdout


def test_fallback_of_a_factory_puts_its_result_on_the_requested_core(two_cores):
    # A factory has no neuron tensor argument: its device= argument says where the result goes.
    result = fallback.run_on_cpu(torch.ops.aten.ones.default, ([2, 3],), {"device": torch.device("neuron:1")})
    assert result.device == torch.device("neuron:1")
    torch.testing.assert_close(result.cpu(), torch.ones(2, 3))
