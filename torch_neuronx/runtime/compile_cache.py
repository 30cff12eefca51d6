"""The persistent executable cache: the NEFF-cache analogue (decision 13).

XLA executables are kept on disk, keyed by JAX on the lowered program, the compiler version and its
flags, so a second process skips XLA compilation for every executable the first one built, eager
ones included. ``TORCH_NEURONX_NEFF_CACHE_DIR`` sets the folder (default
``~/.cache/torch_neuronx/neff``); an empty value turns the cache off.
"""

from __future__ import annotations

import os
from pathlib import Path

import jax
import jax.monitoring

hits = 0
misses = 0


def directory() -> Path | None:
    """The cache folder, or None when the cache is off."""
    configured = os.environ.get("TORCH_NEURONX_NEFF_CACHE_DIR")
    if configured is not None:
        return Path(configured).expanduser() if configured else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "torch_neuronx" / "neff"


def _count(event: str, **kwargs: object) -> None:
    global hits, misses
    if event == "/jax/compilation_cache/cache_hits":
        hits += 1
    elif event == "/jax/compilation_cache/cache_misses":
        misses += 1


def configure() -> None:
    """Points JAX's persistent compilation cache at :func:`directory` (every executable is kept)."""
    folder = directory()
    if folder is None:
        return
    folder.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    jax.monitoring.register_event_listener(_count)
