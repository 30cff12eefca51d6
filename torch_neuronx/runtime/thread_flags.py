"""Flags that hold for one thread, for the duration of a block."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

__all__ = ["ThreadFlag"]


class ThreadFlag:
    """A flag raised in the current thread while a ``with flag.raised():`` block runs (nested
    blocks restore the outer state); ``bool(flag)`` reads it for the current thread."""

    def __init__(self) -> None:
        self._local = threading.local()

    @contextlib.contextmanager
    def raised(self) -> Iterator[None]:
        previous = getattr(self._local, "active", False)
        self._local.active = True
        try:
            yield
        finally:
            self._local.active = previous

    def __bool__(self) -> bool:
        return getattr(self._local, "active", False)
