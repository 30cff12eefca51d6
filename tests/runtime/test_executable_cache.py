"""The bound on cached executables: least recently used evicted first, evicted calls compiled again."""

from __future__ import annotations

import pytest
import torch

import torch_neuronx
from torch_neuronx import _config
from torch_neuronx.runtime.executable_cache import EXECUTABLES


@pytest.fixture
def capacity(monkeypatch):
    """Sets the bound to the entries cached now plus ``extra`` (entries of earlier tests stay)."""

    def set_capacity(extra: int) -> int:
        torch.ones(1, device="neuron")  # the runtime started, its first executables cached
        monkeypatch.setattr(EXECUTABLES, "capacity", len(EXECUTABLES._order) + extra)
        return EXECUTABLES.capacity

    return set_capacity


def test_cache_stays_within_capacity_and_evicted_calls_compute_again(capacity):
    """New shapes past the bound evict the oldest executables; calling those again recompiles them."""
    bound = capacity(4)
    evictions = torch_neuronx.executable_cache_info().evictions
    inputs = [torch.randn(n, 3) for n in range(101, 113)]  # shapes no other test uses
    for x in inputs:
        torch.testing.assert_close(torch.sinh(x.to("neuron")).cpu(), torch.sinh(x))
        assert torch_neuronx.executable_cache_info().size <= bound
    info = torch_neuronx.executable_cache_info()
    assert info.capacity == bound
    assert info.evictions > evictions
    # The first shapes' executables were evicted: they compile again and still compute the op.
    torch.testing.assert_close(torch.sinh(inputs[0].to("neuron")).cpu(), torch.sinh(inputs[0]))


def test_recently_used_executable_is_kept(capacity):
    """An executable used between admissions stays cached: calling it again evicts nothing."""
    capacity(3)
    hot = torch.randn(97, 5).to("neuron")
    torch.cosh(hot)
    before = torch_neuronx.executable_cache_info().evictions
    for n in range(121, 131):
        torch.cosh(torch.randn(n, 5).to("neuron"))  # admits up to three executables (copy, cosh)
        torch.cosh(hot)  # a hit: moves the hot executable to the most recent end
    evictions = torch_neuronx.executable_cache_info().evictions
    assert evictions > before  # the bound was under pressure
    torch.testing.assert_close(torch.cosh(hot).cpu(), torch.cosh(hot.cpu()))
    assert torch_neuronx.executable_cache_info().evictions == evictions


def test_compiled_graph_executables_are_bounded(capacity):
    """Each input shape of a compiled function compiles an executable; they share the same bound."""

    def scaled_softplus(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.softplus(x) * 3

    compiled = torch.compile(scaled_softplus, backend="neuron", dynamic=False)
    bound = capacity(2)
    for n in (71, 73, 79, 83, 89):
        x = torch.randn(n, 4)
        torch.testing.assert_close(compiled(x.to("neuron")).cpu(), scaled_softplus(x))
        assert torch_neuronx.executable_cache_info().size <= bound


def test_capacity_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_EXECUTABLE_CACHE_SIZE", "123")
    assert _config.executable_cache_size() == 123


@pytest.mark.parametrize("value", ["0", "-5", "many", "1.5"])
def test_malformed_capacity_raises(monkeypatch, value):
    monkeypatch.setenv("TORCH_NEURONX_EXECUTABLE_CACHE_SIZE", value)
    with pytest.raises(ValueError, match=f"TORCH_NEURONX_EXECUTABLE_CACHE_SIZE={value!r} is not a positive integer"):
        _config.executable_cache_size()


@pytest.mark.parametrize(("limit", "expected"), [("65530\n", 4095), ("262144\n", 16384), ("1000\n", 256)])
def test_default_capacity_is_a_sixteenth_of_the_mapping_limit(monkeypatch, tmp_path, limit, expected):
    """Each executable maps about six regions; the default keeps them well within vm.max_map_count,
    and at least 256."""
    monkeypatch.delenv("TORCH_NEURONX_EXECUTABLE_CACHE_SIZE", raising=False)
    limit_file = tmp_path / "max_map_count"
    limit_file.write_text(limit)
    monkeypatch.setattr(_config, "MAX_MAP_COUNT_FILE", str(limit_file))
    assert _config.executable_cache_size() == expected


def test_default_capacity_without_a_readable_limit(monkeypatch, tmp_path):
    monkeypatch.delenv("TORCH_NEURONX_EXECUTABLE_CACHE_SIZE", raising=False)
    monkeypatch.setattr(_config, "MAX_MAP_COUNT_FILE", str(tmp_path / "absent"))
    assert _config.executable_cache_size() == 4096
