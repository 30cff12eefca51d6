"""nn.DataParallel over two NeuronCores: the comm copies PyTorch defines only in CUDA builds."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from torch_neuronx._compat import data_parallel


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))


def test_data_parallel_over_two_cores_matches_the_cpu(two_cores):
    # torch._C._broadcast_coalesced was missing from the CPU build: every call raised AttributeError.
    # Each replica sees half the batch (BatchNorm's statistics are per replica, as on two GPUs), and
    # the gradients of the replicas add up: the CPU's model run on each half gives the same values.
    x = torch.randn(6, 4)
    cpu_model = _model()
    expected = torch.cat([cpu_model(half) for half in x.chunk(2)])
    expected.sum().backward()
    model = _model().to("neuron:0")
    parallel = nn.DataParallel(model)
    assert parallel.device_ids == [0, 1]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="PyTorch is not compiled with NCCL support")
        out = parallel(x.to("neuron:0"))
        out.sum().backward()
    assert out.device == torch.device("neuron:0")
    torch.testing.assert_close(out.cpu(), expected)
    for got, want in zip(model.parameters(), cpu_model.parameters(), strict=True):
        torch.testing.assert_close(got.grad.cpu(), want.grad)


def test_comm_copies_follow_cudas_semantics(two_cores):
    from torch.nn.parallel import comm

    x = torch.arange(12.0, device="neuron:0").reshape(6, 2)
    copies = comm.broadcast_coalesced([x], [0, 1])
    assert copies[0][0] is x and copies[1][0].device == torch.device("neuron:1")
    torch.testing.assert_close(copies[1][0].cpu(), x.cpu(), atol=0, rtol=0)
    parts = comm.scatter(x, [0, 1], chunk_sizes=[2, 4])
    assert [tuple(p.shape) for p in parts] == [(2, 2), (4, 2)] and parts[1].device == torch.device("neuron:1")
    torch.testing.assert_close(comm.gather(parts, destination="cpu"), x.cpu(), atol=0, rtol=0)
    torch.testing.assert_close(comm.gather(parts, destination=1).cpu(), x.cpu(), atol=0, rtol=0)
    with pytest.raises(RuntimeError, match="Expected chunk sizes to sum to 6"):
        comm.scatter(x, [0, 1], chunk_sizes=[2, 3])


def test_install_defines_only_what_the_build_lacks():
    assert data_parallel.install() == []  # defined at registration; a second call defines nothing
    assert torch._C._broadcast_coalesced is not None
