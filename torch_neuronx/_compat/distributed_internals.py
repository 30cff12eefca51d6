"""Private names of torch.distributed that the distributed layer needs, each with its reason."""

from __future__ import annotations

import torch
import torch.distributed as dist

__all__ = ["backend_registered", "register_device_backend", "work_from_future"]


def work_from_future(future: torch.futures.Future) -> dist.Work:
    """A ``dist.Work`` that completes with ``future``: ``wait()`` waits for it and raises its error,
    ``get_future()`` returns it. torch 2.13 offers this to Python process groups only as the private
    ``torch._C._distributed_c10d._create_work_from_future`` (its docstring names it "the preferred
    way of constructing Work objects when writing a custom ProcessGroup in python")."""
    return torch._C._distributed_c10d._create_work_from_future(future)


def register_device_backend(group: dist.ProcessGroup, device: str, backend: object) -> None:
    """Registers ``backend`` as ``group``'s backend for ``device`` (``ProcessGroup._register_backend``),
    so that ``group._device_types`` names it: object collectives and barriers pick their device from
    that list (``distributed_c10d._get_object_coll_device``)."""
    group._register_backend(torch.device(device), dist.ProcessGroup.BackendType.CUSTOM, backend)


def backend_registered(name: str) -> bool:
    """Whether a c10d backend plugin called ``name`` is registered (``Backend._plugins``, the table
    ``Backend.register_backend`` fills; torch 2.13 has no public query)."""
    return name.upper() in dist.Backend._plugins
