"""Fixtures of the profiling tests: a profile exported the way the vendor documents it."""

from __future__ import annotations

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import torch_neuronx
from torch_neuronx.profiling import NeuronConfig, NeuronProfiler, ProfileMode


@pytest.fixture(scope="package", autouse=True)
def _plain_eager():
    """These tests count one device event per op. Under TORCH_NEURONX_ADAPTIVE_EAGER=1 the ops would
    be fused into one launch, which is one event by design (docs/profiling.md; tested in
    tests/adaptive): the profiler's tests run plain eager whatever the environment says."""
    with torch_neuronx.adaptive_eager(enabled=False):
        yield


class RMSNorm(torch.nn.Module):
    """The vendor's profiling walkthrough model: an RMSNorm over the last dimension."""

    def __init__(self, hidden: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


@pytest.fixture(scope="package")
def exported(tmp_path_factory):
    """The vendor's documented capture, unmodified but for the model and the directory."""
    output = tmp_path_factory.mktemp("profile_output")
    model = RMSNorm(256).to("neuron")
    x = torch.randn(32, 256, device="neuron")

    neuron_config = NeuronConfig(
        modes=[ProfileMode.DEVICE, ProfileMode.RUNTIME],
        profile_output_dir=str(output),
    )
    exporter = NeuronProfiler(neuron_config)

    with torch.no_grad():
        for _ in range(3):
            model(x)

    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
        experimental_config=neuron_config,
        on_trace_ready=exporter.export_trace,
    ) as prof:
        with torch.no_grad():
            out = model(x)
            out.cpu()
            torch.neuron.synchronize()
        prof.step()
    return output, exporter, prof
