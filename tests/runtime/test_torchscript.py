"""TorchScript of neuron modules: torch.jit.trace (with its default output check), script, save, load."""

from __future__ import annotations

import copy
import io
import warnings

import pytest
import torch

pytestmark = pytest.mark.filterwarnings(r"ignore:`torch\.jit\.\w+` is deprecated")


def _convolutional_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3),
        torch.nn.BatchNorm2d(4),
        torch.nn.ReLU(),
        torch.nn.ConvTranspose2d(4, 2, 2, stride=2),
        torch.nn.Flatten(),
        torch.nn.Linear(2 * 12 * 12, 3),
    ).eval()


def _node_kinds(graph: torch.Graph) -> list[str]:
    inlined = graph.copy()
    torch._C._jit_pass_inline(inlined)
    return [node.kind() for node in inlined.nodes() if node.kind().startswith("aten::")]


def test_trace_with_its_output_check_records_the_cpus_graph_and_values():
    cpu_model = _convolutional_model()
    x = torch.randn(2, 3, 8, 8)
    model = copy.deepcopy(cpu_model).to("neuron")
    traced = torch.jit.trace(model, x.to("neuron"))  # check_trace=True compares in float64
    cpu_traced = torch.jit.trace(cpu_model, x)
    assert _node_kinds(traced.graph) == _node_kinds(cpu_traced.graph)
    assert _node_kinds(traced.graph).count("aten::_convolution") == 2
    new_input = torch.randn(2, 3, 8, 8)
    torch.testing.assert_close(traced(new_input.to("neuron")).cpu(), cpu_model(new_input))


def test_trace_check_still_reports_outputs_that_differ():
    def noisy(x):
        return x + torch.rand(3, device=x.device)

    with pytest.warns(torch.jit.TracerWarning, match="Output nr 1. of the traced function does not match"):
        torch.jit.trace(noisy, torch.ones(3, device="neuron"))


def test_trace_check_of_python_numbers_and_integer_and_bool_outputs():
    # The graph's Python numbers (x * 2 + 1) are what the check's traced run could not take under a
    # dispatch mode.
    def counts(x):
        return (x > 0).sum(dim=0) + 1, x * 2 + 1 > 1, (x * 2 + 1) / 2

    with warnings.catch_warnings():
        warnings.simplefilter("error", torch.jit.TracerWarning)
        traced = torch.jit.trace(counts, torch.randn(4, 3, device="neuron"))
    x = torch.randn(5, 3)
    for result, expected in zip(traced(x.to("neuron")), counts(x), strict=True):
        torch.testing.assert_close(result.cpu(), expected)


def test_gradients_through_a_traced_convolution_match_the_cpu():
    torch.manual_seed(0)
    cpu_conv = torch.nn.Conv1d(2, 3, 2)
    conv = copy.deepcopy(cpu_conv).to("neuron")
    x = torch.randn(1, 2, 5)
    traced = torch.jit.trace(conv, x.to("neuron"))
    traced(x.to("neuron")).square().sum().backward()
    cpu_conv(x).square().sum().backward()
    torch.testing.assert_close(conv.weight.grad.cpu(), cpu_conv.weight.grad)
    torch.testing.assert_close(conv.bias.grad.cpu(), cpu_conv.bias.grad)


def test_saved_trace_loads_onto_neuron():
    model = _convolutional_model()
    x = torch.randn(2, 3, 8, 8)
    buffer = io.BytesIO()
    torch.jit.save(torch.jit.trace(model, x), buffer)  # traced on the CPU
    buffer.seek(0)
    loaded = torch.jit.load(buffer, map_location="neuron")
    assert loaded.state_dict()["0.weight"].device.type == "neuron"
    torch.testing.assert_close(loaded(x.to("neuron")).cpu(), model(x))


def test_script_with_control_flow():
    class Gated(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

        def forward(self, x):
            y = torch.relu(self.conv(x)).mean(dim=(2, 3))
            if bool(y.sum() > 0):
                y = y * 2
            return y

    torch.manual_seed(0)
    cpu_model = Gated()
    scripted = torch.jit.script(copy.deepcopy(cpu_model).to("neuron"))
    x = torch.randn(2, 3, 8, 8)
    torch.testing.assert_close(scripted(x.to("neuron")).cpu(), cpu_model(x))


@pytest.mark.parametrize("traced_on", ["cpu", "neuron"])
def test_saved_trace_with_python_floats_loads_onto_neuron(traced_on):
    # The tracer keeps 2.5 as a float64 CPU constant; map_location="neuron" moved it to neuron, which
    # has no FP64, and the load raised the policy's TypeError.
    torch.manual_seed(0)
    cpu_model = torch.nn.Linear(4, 3)

    def scaled(x):
        return cpu_model(x) * 2.5 + 0.5

    x = torch.randn(2, 4)
    buffer = io.BytesIO()
    torch.jit.save(torch.jit.trace(copy.deepcopy(cpu_model).to(traced_on), x.to(traced_on)), buffer)
    traced = torch.jit.trace(lambda t: t * 2.5 + 0.5, torch.randn(2, 3, device=traced_on))
    constants = io.BytesIO()
    torch.jit.save(traced, constants)
    for archive in (buffer, constants):
        archive.seek(0)
    linear = torch.jit.load(buffer, map_location="neuron")
    scale = torch.jit.load(constants, map_location="neuron:0")
    assert all(p.device == torch.device("neuron", 0) for p in linear.parameters())
    torch.testing.assert_close(scale(linear(x.to("neuron"))).cpu(), scaled(x))
