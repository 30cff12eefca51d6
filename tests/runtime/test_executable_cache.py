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
    """The count bound's default is a sixteenth of vm.max_map_count, and at least 256."""
    monkeypatch.delenv("TORCH_NEURONX_EXECUTABLE_CACHE_SIZE", raising=False)
    limit_file = tmp_path / "max_map_count"
    limit_file.write_text(limit)
    monkeypatch.setattr(_config, "MAX_MAP_COUNT_FILE", str(limit_file))
    assert _config.executable_cache_size() == expected


def test_default_capacity_without_a_readable_limit(monkeypatch, tmp_path):
    monkeypatch.delenv("TORCH_NEURONX_EXECUTABLE_CACHE_SIZE", raising=False)
    monkeypatch.setattr(_config, "MAX_MAP_COUNT_FILE", str(tmp_path / "absent"))
    assert _config.executable_cache_size() == 4096


def _admitted() -> int:
    """Executables admitted to the cache so far (those still cached and those evicted)."""
    info = torch_neuronx.executable_cache_info()
    return info.size + info.evictions


def test_views_at_every_storage_offset_share_one_executable():
    """An eager op over a matrix's rows compiles once: a view's storage offset is a runtime input
    (csrc/runtime/NeuronCallSignature.cpp), so the first row and the last share the executable."""
    host = torch.randn(24, 13)
    x = host.to("neuron")
    before = _admitted()
    for i in range(host.shape[0]):
        torch.testing.assert_close(torch.exp(x[i]).cpu(), torch.exp(host[i]))
    assert _admitted() - before == 1
    columns = x[:, 2:5]  # a strided view at other offsets: a shape of its own, one executable
    before = _admitted()
    for start in range(0, 10, 3):
        torch.testing.assert_close(torch.exp(x[:, start : start + 3]).cpu(), torch.exp(host[:, start : start + 3]))
    assert _admitted() - before == 1
    torch.testing.assert_close(torch.exp(columns).cpu(), torch.exp(host[:, 2:5]))


def test_in_place_and_out_on_views_at_every_offset_share_one_executable():
    """Writes into views (in place, out=) land at each view's own offset, from one executable per op."""
    host = torch.randn(16, 7)
    y = host.to("neuron")
    before = _admitted()
    for i in range(host.shape[0]):
        y[i].mul_(i + 0.5)
        host[i].mul_(i + 0.5)
    assert _admitted() - before == 1
    torch.testing.assert_close(y.cpu(), host)

    out, expected = torch.zeros(16, 7, device="neuron"), torch.zeros(16, 7)
    before = _admitted()
    for i in range(host.shape[0]):
        torch.sin(y[i], out=out[i])
        torch.sin(host[i], out=expected[i])
    assert _admitted() - before == 1
    torch.testing.assert_close(out.cpu(), expected)

    # Views of one storage: the key keeps where they sit relative to each other, not where they are.
    before = _admitted()
    for i in range(host.shape[0] - 2):
        torch.add(y[i], y[i + 1], out=y[i + 2])
        torch.add(host[i], host[i + 1], out=host[i + 2])
    assert _admitted() - before == 1
    torch.testing.assert_close(y.cpu(), host)


def test_partial_overlap_still_raises_after_a_call_at_other_offsets():
    """Two views of one storage that overlap at these offsets raise as on the CPU, even after the
    same shapes compiled at offsets where they did not."""
    flat = torch.zeros(40, device="neuron")
    torch.exp(flat[0:8], out=flat[10:18])
    message = "some elements of the input tensor and the written-to tensor refer to a single memory location"
    host = torch.zeros(40)
    with pytest.raises(RuntimeError, match=message):
        torch.exp(host[0:8], out=host[4:12])
    with pytest.raises(RuntimeError, match=message):
        torch.exp(flat[0:8], out=flat[4:12])


def test_copies_of_views_at_every_offset_share_one_view_program():
    """Reading rows to the host and writing host rows into a device matrix compile one view program
    each (runtime/buffers.py), whatever the row."""
    from torch_neuronx.runtime import buffers

    host = torch.randn(12, 19)
    x = host.to("neuron")
    reads = buffers._read_program.cache_info().misses
    for i in range(host.shape[0]):
        torch.testing.assert_close(x[i].cpu(), host[i])
    assert buffers._read_program.cache_info().misses - reads == 1
    written = torch.zeros(12, 19, device="neuron")
    writes = buffers._write_program.cache_info().misses
    for i in range(host.shape[0]):
        written[i].copy_(host[i])
    assert buffers._write_program.cache_info().misses - writes == 1
    torch.testing.assert_close(written.cpu(), host)


@pytest.mark.parametrize(
    "view",
    [
        lambda base, i: base[i, :, :3],  # a grid that overhangs the view's extent
        lambda base, i: base.view(-1).as_strided((3, 3), (2, 3), 7 * i),  # not nesting: a gather
        lambda base, i: base[i].t(),
    ],
    ids=["overhanging-grid", "gather", "transposed"],
)
def test_reads_and_writes_of_views_at_every_offset_match_the_cpu(view):
    host = torch.randn(5, 4, 8)
    x = host.to("neuron")
    before = _admitted()
    for i in range(host.shape[0]):
        torch.testing.assert_close(torch.cos(view(x, i)).cpu(), torch.cos(view(host, i)))
        view(x, i).neg_()
        view(host, i).neg_()
    assert _admitted() - before == 2
    torch.testing.assert_close(x.cpu(), host)


def test_mappings_near_the_limit_evict_whatever_the_count(monkeypatch):
    """Executables map 3 to 30 regions each, so the count bound alone let PyTorch's test_foreach.py
    reach vm.max_map_count and die of a segmentation fault: past 3/4 of the limit the cache evicts
    the least recently used until the process is under half of it, and evicted calls compute again."""
    from torch_neuronx.runtime import executable_cache

    torch.ones(1, device="neuron")
    mappings = [60_000]  # the process's mappings as the cache counts them: near the limit

    def counted() -> int:
        return mappings[0]

    def evict_oldest(self) -> None:  # each eviction frees 1,000 mappings
        original_evict(self)
        mappings[0] -= 1_000

    original_evict = executable_cache.ExecutableCache._evict_oldest
    monkeypatch.setattr(executable_cache, "process_mappings", counted)
    monkeypatch.setattr(executable_cache.ExecutableCache, "_evict_oldest", evict_oldest)
    monkeypatch.setattr(_config, "mapping_limit", lambda: 65_530)
    monkeypatch.setattr(EXECUTABLES, "capacity", 100_000)  # far from the count bound
    evictions = EXECUTABLES.evictions
    inputs = [torch.randn(n, 2) for n in range(201, 201 + executable_cache._CHECK_EVERY + 1)]
    for x in inputs:
        torch.testing.assert_close(torch.tanh(x.to("neuron")).cpu(), torch.tanh(x))
    assert EXECUTABLES.evictions > evictions
    assert mappings[0] <= 65_530 * executable_cache._LOW
    torch.testing.assert_close(torch.tanh(inputs[0].to("neuron")).cpu(), torch.tanh(inputs[0]))


def test_mappings_that_evictions_do_not_free_stop_the_eviction(monkeypatch):
    """Mappings that are not executables' (host buffers) do not empty the cache: an eviction round
    that frees none ends the eviction."""
    from torch_neuronx.runtime import executable_cache

    torch.ones(1, device="neuron")
    monkeypatch.setattr(executable_cache, "process_mappings", lambda: 60_000)
    monkeypatch.setattr(_config, "mapping_limit", lambda: 65_530)
    monkeypatch.setattr(EXECUTABLES, "capacity", 100_000)
    for n in range(301, 301 + executable_cache._CHECK_EVERY + 1):
        torch.cos(torch.randn(n, 2).to("neuron"))
    held = len(EXECUTABLES._order)
    assert held > 0
    evictions = EXECUTABLES.evictions
    EXECUTABLES._keep_mappings_under_limit()  # one round, which frees nothing, then it stops
    assert EXECUTABLES.evictions - evictions == max(held // 8, 1)


def test_jax_caches_are_dropped_before_this_caches_executables(monkeypatch):
    """JAX caches the executables of the runtime's own small programs (a buffer's reshape into each
    new view shape), about 60 mappings each, outside this cache: 600 new shapes under a limit of
    16,000 evicted 464 of this cache's executables while JAX's grew without end. Near the limit JAX's
    caches go first; when that brings the process under the limit, this cache keeps everything."""
    import jax

    from torch_neuronx.runtime import executable_cache

    torch.ones(1, device="neuron")
    mappings = [60_000]
    clear_caches = jax.clear_caches

    def clear_jax_caches() -> None:  # JAX's caches held most of the mappings
        clear_caches()
        mappings[0] = 20_000

    monkeypatch.setattr(executable_cache, "process_mappings", lambda: mappings[0])
    monkeypatch.setattr(jax, "clear_caches", clear_jax_caches)
    monkeypatch.setattr(_config, "mapping_limit", lambda: 65_530)
    monkeypatch.setattr(EXECUTABLES, "capacity", 100_000)
    for n in range(401, 401 + executable_cache._CHECK_EVERY + 1):
        x = torch.randn(n, 2)
        torch.testing.assert_close(torch.sin(x.to("neuron").view(2, n)).cpu(), torch.sin(x.view(2, n)))
    evictions = EXECUTABLES.evictions
    mappings[0] = 60_000
    EXECUTABLES._keep_mappings_under_limit()
    assert mappings[0] == 20_000 and EXECUTABLES.evictions == evictions
    x = torch.randn(401, 2)
    torch.testing.assert_close(torch.sin(x.to("neuron").view(2, 401)).cpu(), torch.sin(x.view(2, 401)))
