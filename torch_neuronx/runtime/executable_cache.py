"""The process-wide bound on cached executables.

Every XLA CPU executable maps memory of its own (about six memory mappings each, measured on
jax 0.8), and Linux refuses a process more than ``vm.max_map_count`` mappings (65,530 by default):
past it LLVM fails with "Cannot allocate memory" and the process aborts. A workload whose shapes
keep changing (generation with a growing KV cache, variable-length batches) compiles new
executables without end, so eager kernels and compiled graphs keep theirs in one bounded
least-recently-used order. An evicted call signature is traced and compiled again on its next call
(from the persistent cache when the executable is there).

Each owner (an eager kernel, a compiled graph) keeps its executables in a dict of its own, looked up
on every call; this module only orders the entries of all owners and evicts from them.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, NamedTuple

from torch_neuronx import _config


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
                (_, evicted_key), evicted_owner = self._order.popitem(last=False)
                evicted_owner.pop(evicted_key, None)
                self.evictions += 1

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
