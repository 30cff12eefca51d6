"""Freed host memory back to the system: glibc's heaps trimmed after a compile, its mmap threshold
pinned (opt-in).

The emulated cores' buffers are host memory, which XLA's CPU runtime takes from glibc's malloc.
glibc serves a request of at least its mmap threshold (128 KiB at start) with a memory mapping of
its own, unmapped when freed; but each time such a block is freed, glibc raises the threshold to
that block's size (up to 32 MiB), so from then on blocks of that size come from its heaps, one
per allocating thread (arenas), which keep freed memory for reuse and give it back to the system
only from their top. A training step allocates its activations, gradients and optimizer state on
XLA's threads, in a different order every step, and frees them from Python's: the heaps grow
around the live blocks. On bench/llama_decoder's compiled training step they held about 400 MB
that no buffer used (docs/compile.md, "Where the memory goes").

With ``TORCH_NEURONX_PIN_MMAP_THRESHOLD=1``, :func:`pin_mmap_threshold` sets the threshold to
glibc's own default at the start of the runtime (``mallopt(M_MMAP_THRESHOLD, 128 KiB)``), which also
stops it from rising: blocks of 128 KiB and more (every buffer of 32,768 float32 elements or more)
are mapped and unmapped, and a freed buffer's memory is the system's again at once. That memory is
faulted in again, page by page, by the next buffer: on the same step, peak RSS 1,363 -> 955 MB, for
100,000 more page faults (0.25 s more system CPU time) per step, which is why it is not the
default. Blocks below the threshold, most of the C++ and Python allocations, are served as before.
Where the user set the threshold already (``MALLOC_MMAP_THRESHOLD_``, the
``glibc.malloc.mmap_threshold`` tunable), or on a C library other than glibc, nothing is changed.

Compiling a graph (Dynamo's and AOTAutograd's tracing, the lowering to StableHLO, XLA's passes and
LLVM) frees most of what it allocated, in blocks below the threshold that stay in glibc's heaps.
:func:`trim` (``malloc_trim(0)``, after each compiled graph is built: dynamo/graph.py) hands their
free pages back: on the same step, peak RSS 1,422 -> 1,389 MB (1,096 -> 1,061 MB pinned), for 6-57
ms per compiled graph.
"""

from __future__ import annotations

import ctypes
import functools
import os

from torch_neuronx import _config

#: glibc's ``M_MMAP_THRESHOLD`` (malloc.h) and its default value, in bytes.
M_MMAP_THRESHOLD = -3
DEFAULT_MMAP_THRESHOLD = 128 * 1024

_pinned = False


def user_set_threshold(environ: dict[str, str] | os._Environ[str]) -> bool:
    """Whether ``environ`` sets glibc's mmap threshold itself (``MALLOC_MMAP_THRESHOLD_``, or the
    ``glibc.malloc.mmap_threshold`` tunable in ``GLIBC_TUNABLES``), which the runtime then keeps."""
    return "MALLOC_MMAP_THRESHOLD_" in environ or "glibc.malloc.mmap_threshold" in environ.get("GLIBC_TUNABLES", "")


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    """The process's C library when it is glibc (``mallopt`` has glibc's meaning), else None."""
    try:
        version = os.confstr("CS_GNU_LIBC_VERSION")  # None, or no such name, on other C libraries
    except (AttributeError, ValueError, OSError):
        return None
    if not version:
        return None
    library = ctypes.CDLL(None)
    return library if hasattr(library, "mallopt") else None


def trim() -> None:
    """Returns the free pages of glibc's heaps to the system (``malloc_trim(0)``: every heap, not
    only the top of the main one, since glibc 2.8); does nothing on another C library. The memory
    stays the process's to allocate again (its pages are faulted in anew when used), so no result
    changes; it lowers the resident memory a compile leaves behind."""
    library = _glibc()
    if library is not None:
        library.malloc_trim(0)


def pin_mmap_threshold() -> bool:
    """Pins glibc's mmap threshold at its default of 128 KiB (see the module docstring), once per
    process, when ``TORCH_NEURONX_PIN_MMAP_THRESHOLD=1``. Returns whether it is pinned: False when
    that variable is unset or 0, where the environment sets the threshold already, or without glibc.

    Raises:
        ValueError: ``TORCH_NEURONX_PIN_MMAP_THRESHOLD`` is not a boolean.
    """
    global _pinned
    if _pinned:
        return True
    if not _config.pin_mmap_threshold() or user_set_threshold(os.environ):
        return False
    library = _glibc()
    if library is None:
        return False
    _pinned = bool(library.mallopt(M_MMAP_THRESHOLD, DEFAULT_MMAP_THRESHOLD))
    return _pinned
