"""Posts a neuron group's gloo collectives in the order its ranks called them, each once they agree.

An asynchronous collective returns before the ranks have agreed on it, as NCCL's enqueue does: the
agreement (``agreement.start_agreement``) runs on a gloo transport of its own, and the collective's
gloo call can only be made once it is in, since a call the ranks disagree on would make gloo abort
the process. gloo matches a group's collectives by the order in which each rank posts them, so they
are posted in the order the ranks called them: each after the one called before it, whatever order
the agreements complete in. A call the ranks disagree on is posted by none of them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import torch
import torch.distributed as dist

__all__ = ["CallOrder", "Post"]

#: A collective's gloo call on its staged host tensors, made once the ranks agree.
Post = Callable[[], dist.Work]


def _resolved(value: object) -> torch.futures.Future:
    future = torch.futures.Future()
    future.set_result(value)
    return future


def agreed() -> torch.futures.Future:
    """A verdict future that says the ranks agree (``None``)."""
    return _resolved(None)


class CallOrder:
    """The posting order of one group's collectives on its gloo transport."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = _resolved(None)

    def post(self, verdict: torch.futures.Future, post: Post) -> torch.futures.Future:
        """Makes ``post()`` once every call handed in before it has been posted (or dropped) and
        ``verdict`` (``start_agreement``'s future: ``None`` or the exception) says the ranks agree;
        at once when both are in. Returns a future that never fails, of the gloo work, or of the
        exception that kept the call from being posted (the verdict's, or ``post``'s own)."""
        with self._lock:
            ready = torch.futures.collect_all([self._last, verdict])

            def post_when_ready(_: torch.futures.Future) -> object:
                try:
                    refusal = verdict.value()
                    return refusal if refusal is not None else post()
                except Exception as error:  # noqa: BLE001 (handed to the collective's work)
                    return error

            posted = ready.then(post_when_ready)
            self._last = posted
        return posted
