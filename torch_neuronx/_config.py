"""Every environment variable and option of torch_neuronx, read in one place.

Variables read by the C++ core (before the first use of the device):

- ``NEURON_RT_VISIBLE_CORES``: cores this process sees, an index (``3``), a range (``0-3``) or a
  comma-separated mix; each visible core is one ``neuron:i`` device.
- ``NEURON_RT_NUM_CORES``: number of cores when ``NEURON_RT_VISIBLE_CORES`` is unset (default 2).
- ``TORCH_NEURONX_HBM_CAPACITY``: HBM capacity per core, bytes or e.g. ``24GiB`` (the default).

- ``TORCH_NEURONX_NEFF_CACHE_DIR``: the persistent executable cache (runtime/compile_cache.py).

Variables read by the Python runtime, when the device is first used (a malformed value raises
``ValueError`` then, never at ``import torch``):
"""

from __future__ import annotations

import os


def _flag(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{name}={value!r} is not a boolean; use 1 or 0 (true/false, yes/no and on/off also work)")


def fallback_enabled() -> bool:
    """``NEURON_FALLBACK_ENABLED`` (default 1): ops with no lowering and no decomposition run on
    the CPU with a warning; 0 turns that into a NotImplementedError naming the op. Read at every
    fallback, so a test or a script can change it at any time."""
    return _flag("NEURON_FALLBACK_ENABLED", True)


def launch_blocking() -> bool:
    """``NEURON_LAUNCH_BLOCKING`` (default 0): every op waits for its execution to finish, so a
    device fault is raised by the op that caused it, as ``CUDA_LAUNCH_BLOCKING`` does. Read when the
    runtime starts."""
    return _flag("NEURON_LAUNCH_BLOCKING", False)


def record_stack_traces() -> bool:
    """``TORCH_NEURONX_ENABLE_STACK_TRACE`` (default 0): record the Python stack of every op that can
    raise a device fault, and print it with the fault."""
    return _flag("TORCH_NEURONX_ENABLE_STACK_TRACE", False)


def disable_fallback_execution() -> bool:
    """``TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION`` (default 1): a graph torch.compile cannot lower
    raises, naming the node and its source line; 0 runs such a graph eagerly, op by op, with a
    warning."""
    return _flag("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", True)


def preserve_compilation_artifacts() -> bool:
    """``TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS`` (default 0): keep the FX graph and the
    StableHLO text of every compiled graph under :func:`debug_dir`."""
    return _flag("TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS", False)


def debug_dir() -> str:
    """``TORCH_NEURONX_DEBUG_DIR`` (default ``./neuron_debug``): where artifacts are kept."""
    return os.environ.get("TORCH_NEURONX_DEBUG_DIR") or os.path.join(os.getcwd(), "neuron_debug")


#: Linux's bound on a process's memory mappings, which the executable cache's default follows.
MAX_MAP_COUNT_FILE = "/proc/sys/vm/max_map_count"


def mapping_limit() -> int | None:
    """Linux's ``vm.max_map_count``: the most memory mappings a process may hold (65,530 by default),
    or None where it cannot be read."""
    try:
        with open(MAX_MAP_COUNT_FILE) as limit:
            return int(limit.read())
    except (OSError, ValueError):
        return None


def executable_cache_size() -> int:
    """``TORCH_NEURONX_EXECUTABLE_CACHE_SIZE``: how many executables eager kernels and compiled graphs
    keep, least recently used evicted first (runtime/executable_cache.py). The default is a sixteenth
    of Linux's ``vm.max_map_count`` (4095 of the usual 65,530) or 4096 where that limit cannot be
    read; the cache also evicts when the process's mappings near that limit, whatever the count.
    Read when the first executable is cached."""
    value = os.environ.get("TORCH_NEURONX_EXECUTABLE_CACHE_SIZE")
    if value is None or value == "":
        limit = mapping_limit()
        return 4096 if limit is None else max(limit // 16, 256)
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"TORCH_NEURONX_EXECUTABLE_CACHE_SIZE={value!r} is not a positive integer; use e.g. 4096")
    return int(value)


def pin_mmap_threshold() -> bool:
    """``TORCH_NEURONX_PIN_MMAP_THRESHOLD`` (default 0): 1 pins glibc's mmap threshold at its default
    of 128 KiB when the runtime starts, so that freed device buffers return to the system instead of
    staying in malloc's heaps: less peak memory, more page faults (runtime/host_memory.py). Ignored
    where ``MALLOC_MMAP_THRESHOLD_`` or the ``glibc.malloc.mmap_threshold`` tunable sets the
    threshold. Read when the runtime starts."""
    return _flag("TORCH_NEURONX_PIN_MMAP_THRESHOLD", False)


def adaptive_eager() -> bool:
    """``TORCH_NEURONX_ADAPTIVE_EAGER`` (default 0): record eager ops and fuse runs of them into one
    executable for the whole process (torch_neuronx/adaptive/). Read when the device starts."""
    return _flag("TORCH_NEURONX_ADAPTIVE_EAGER", False)


def nki_sdpa() -> bool:
    """``TORCH_NEURONX_ENABLE_NKI_SDPA`` (default 0): ``F.scaled_dot_product_attention`` runs on the
    NKI flash attention kernels where they take the call (nki/kernels/sdpa.py). Read when the device
    starts."""
    return _flag("TORCH_NEURONX_ENABLE_NKI_SDPA", False)


def adaptive_eager_max_ops() -> int:
    """``TORCH_NEURONX_ADAPTIVE_EAGER_MAX_OPS`` (default 512): ops recorded into one trace before it
    is run (larger traces compile longer)."""
    value = os.environ.get("TORCH_NEURONX_ADAPTIVE_EAGER_MAX_OPS")
    if value is None or value == "":
        return 512
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"TORCH_NEURONX_ADAPTIVE_EAGER_MAX_OPS={value!r} is not a positive integer; use e.g. 512")
    return int(value)
