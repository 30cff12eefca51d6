"""Private names of torch.distributed that the distributed layer needs, each with its reason."""

from __future__ import annotations

import sys

import torch
import torch.distributed as dist

__all__ = ["backend_registered", "device_id_being_bound", "register_device_backend"]


def register_device_backend(group: dist.ProcessGroup, device: str, backend: object) -> None:
    """Registers ``backend`` as ``group``'s backend for ``device`` (``ProcessGroup._register_backend``),
    so that ``group._device_types`` names it: object collectives and barriers pick their device from
    that list (``distributed_c10d._get_object_coll_device``)."""
    group._register_backend(torch.device(device), dist.ProcessGroup.BackendType.CUSTOM, backend)


def backend_registered(name: str) -> bool:
    """Whether a c10d backend plugin called ``name`` is registered (``Backend._plugins``, the table
    ``Backend.register_backend`` fills; torch 2.13 has no public query)."""
    return name.upper() in dist.Backend._plugins


def device_id_being_bound() -> torch.device | None:
    """The ``device_id`` given to the ``init_process_group`` (or ``new_group``) call that is creating a
    backend now, or ``None``.

    c10d sets ``bound_device_id`` on the ``ProcessGroup`` it builds, then drops that group for the
    one a backend's creator returns when that is a Python ``ProcessGroup`` subclass (torch 2.13,
    ``_new_process_group_helper``), and a creator is not given the device id. So the neuron group
    reads it from that function's frame; ``None`` when torch no longer has it there (the test of
    ``init_process_group(device_id=...)`` then fails and tells)."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "_new_process_group_helper" and frame.f_globals.get("__name__") == (
            "torch.distributed.distributed_c10d"
        ):
            device_id = frame.f_locals.get("device_id")
            return device_id if isinstance(device_id, torch.device) else None
        frame = frame.f_back
    return None
