"""The process-wide bound on cached executables.

Every XLA CPU executable maps memory of its own, and Linux refuses a process more than
``vm.max_map_count`` mappings (65,530 by default): past it LLVM's loader fails, and the process
aborts or dies of a segmentation fault while loading the next executable. A workload whose shapes
keep changing (generation with a growing KV cache, variable-length batches, a test suite) compiles
new executables without end, so eager kernels and compiled graphs keep theirs in one bounded
least-recently-used order. An evicted call signature is traced and compiled again on its next call
(from the persistent cache when the executable is there).

A count alone does not bound the mappings: measured on jax 0.10, an elementwise op's executable
maps about 3 regions, a softmax's or a foreach op's 15 to 30, so 4,095 of the latter reach the
limit (PyTorch's test_foreach.py died so after 88 of its tests). Every ``_CHECK_EVERY`` admissions
the cache counts the process's mappings, and above ``_HIGH`` of the limit evicts the least recently
used executables until the count is under ``_LOW`` of it.

Each owner (an eager kernel, a compiled graph) keeps its executables in a dict of its own, looked up
on every call; this module only orders the entries of all owners and evicts from them.
"""

from __future__ import annotations

import gc
import threading
from collections import OrderedDict
from typing import Any, NamedTuple

from torch_neuronx import _config
from torch_neuronx.runtime.host_threads import cpu_thread_count

#: Admissions between two counts of the process's memory mappings (a count reads /proc/self/maps:
#: about 10 ms at 60,000 mappings, against the seconds 32 compilations take).
_CHECK_EVERY = 32
#: Shares of ``vm.max_map_count``: above ``_HIGH``, evict until under ``_LOW``. 32 executables of
#: about 100 mappings each fit in the margin above ``_HIGH``.
_HIGH, _LOW = 0.75, 0.5


def with_thread_count(key: bytes) -> bytes:
    """A call signature's cache key extended with the host thread count
    (:func:`~torch_neuronx.runtime.host_threads.cpu_thread_count`): lowerings that follow a CPU
    kernel's split of its work between threads (batch norm's per-thread sums, arange, softmax's
    scalar tail) read the count when they are traced, so an executable serves one count."""
    return key + cpu_thread_count().to_bytes(4, "little")


def process_mappings() -> int | None:
    """The memory mappings this process holds (lines of /proc/self/maps), or None off Linux."""
    try:
        with open("/proc/self/maps", "rb") as maps:
            return maps.read().count(b"\n")
    except OSError:
        return None


class CacheInfo(NamedTuple):
    """``size`` executables cached now, of at most ``capacity``; ``evictions`` since the start."""

    size: int
    capacity: int
    evictions: int


class ExecutableCache:
    """Least-recently-used order over the executable dicts of all owners.

    An entry is keyed by ``(id(owner_dict), key)`` and holds the owner dict itself, so the dict (and
    its id) stays alive while it has entries here.
    """

    def __init__(self) -> None:
        self.capacity: int | None = None  # read from the environment at the first admission
        self.evictions = 0
        self._admitted_since_count = 0
        self._order: OrderedDict[tuple[int, Any], dict[Any, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def admit(self, owner: dict[Any, Any], key: Any, executable: Any) -> None:
        """Caches ``owner[key] = executable``, evicting the least recently used entries past capacity.

        Raises:
            ValueError: ``TORCH_NEURONX_EXECUTABLE_CACHE_SIZE`` is malformed.
        """
        with self._lock:
            if self.capacity is None:
                self.capacity = _config.executable_cache_size()
            owner[key] = executable
            self._order[(id(owner), key)] = owner
            self._order.move_to_end((id(owner), key))
            while len(self._order) > self.capacity:
                self._evict_oldest()
            self._admitted_since_count += 1
            if self._admitted_since_count >= _CHECK_EVERY:
                self._admitted_since_count = 0
                self._keep_mappings_under_limit()

    def _evict_oldest(self) -> None:
        (_, evicted_key), evicted_owner = self._order.popitem(last=False)
        evicted_owner.pop(evicted_key, None)
        self.evictions += 1

    def _keep_mappings_under_limit(self) -> None:
        """Once the process's mappings pass ``_HIGH`` of the limit, first drops JAX's own caches
        (``jax.clear_caches``), then evicts the least recently used executables, an eighth of the
        cache at a time, while the mappings are above ``_LOW`` of it. Stops when an eviction frees
        none: the mappings are then other memory's (host buffers), not executables'.

        JAX's caches hold the executables of the small programs the runtime runs outside this
        cache: a buffer's reshape into a view's shape, a storage's resize (one per new shape, up to
        JAX's 4,096 per primitive, tens of mappings each: 1,200 new shapes held 33,000 mappings and
        had already evicted half of this cache). Those compile again in milliseconds when next
        used; this cache's executables (which ``jax.clear_caches`` does not touch, as it holds them
        itself) are the costly ones."""
        limit, mappings = _config.mapping_limit(), process_mappings()
        if limit is None or mappings is None or mappings <= limit * _HIGH:
            return
        import jax  # the runtime has started JAX before any executable is admitted

        jax.clear_caches()
        gc.collect()
        mappings = process_mappings() or 0
        while self._order and mappings > limit * _LOW:
            for _ in range(max(len(self._order) // 8, 1)):
                self._evict_oldest()
            gc.collect()  # an executable and its launch closures form a cycle: free them now
            before, mappings = mappings, process_mappings() or 0
            if mappings >= before:
                return

    def touch(self, owner: dict[Any, Any], key: Any) -> None:
        """Marks ``owner[key]`` as just used (the hit path of every call: one O(1) move)."""
        try:
            self._order.move_to_end((id(owner), key))
        except KeyError:  # evicted by another thread between the owner's lookup and now
            pass

    def info(self) -> CacheInfo:
        return CacheInfo(len(self._order), self.capacity or _config.executable_cache_size(), self.evictions)

    def clear(self) -> None:
        """Drops every cached executable (each is compiled again on its next call)."""
        with self._lock:
            for (_, key), owner in self._order.items():
                owner.pop(key, None)
            self._order.clear()


EXECUTABLES = ExecutableCache()
