"""Private names of torch.distributed that the distributed layer needs, each with its reason."""

from __future__ import annotations

import sys
from typing import NamedTuple

import torch
import torch.distributed as dist

__all__ = [
    "CpuBackendBeingBuilt",
    "backend_registered",
    "cpu_backend_being_built",
    "device_id_being_bound",
    "register_device_backend",
]


def register_device_backend(group: dist.ProcessGroup, device: str, backend: object) -> None:
    """Registers ``backend`` as ``group``'s backend for ``device`` (``ProcessGroup._register_backend``),
    so that ``group._device_types`` names it: object collectives and barriers pick their device from
    that list (``distributed_c10d._get_object_coll_device``)."""
    group._register_backend(torch.device(device), dist.ProcessGroup.BackendType.CUSTOM, backend)


def backend_registered(name: str) -> bool:
    """Whether a c10d backend plugin called ``name`` is registered (``Backend._plugins``, the table
    ``Backend.register_backend`` fills; torch 2.13 has no public query)."""
    return name.upper() in dist.Backend._plugins


def _group_being_built() -> dict[str, object] | None:
    """The locals of the ``_new_process_group_helper`` call that is building a group now (its
    creators' caller), or ``None`` outside one."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "_new_process_group_helper" and frame.f_globals.get("__name__") == (
            "torch.distributed.distributed_c10d"
        ):
            return frame.f_locals
        frame = frame.f_back
    return None


class CpuBackendBeingBuilt(NamedTuple):
    """What :func:`cpu_backend_being_built` finds: whether the group maps the CPU to a backend, and
    the gloo backend c10d already built for it (``None`` when it built none before the neuron one)."""

    serves_cpu: bool
    gloo: dist.ProcessGroupGloo | None


def cpu_backend_being_built() -> CpuBackendBeingBuilt:
    """Whether the group that ``_new_process_group_helper`` is building now maps the CPU to a
    backend (``"cpu:gloo,neuron:neuron"``), and the gloo backend it built for the CPU before calling
    the neuron creator.

    c10d builds one backend per device of the backend string, in its order, and drops every one of
    them for a creator's Python ``ProcessGroup`` (torch 2.13); the creator is given neither the
    string nor the others. Every rank builds its groups in the same order, so a CPU backend taken
    here is connected when the group is, where one made at the first CPU collective deadlocks ranks
    that start their CPU collectives on two groups in different orders. Outside such a call (or if
    torch no longer has these locals: the test of ``"cpu:gloo,neuron:neuron"`` groups then fails and
    tells) the group serves no CPU tensors."""
    building = _group_being_built()
    if building is None:
        return CpuBackendBeingBuilt(False, None)
    config = building.get("backend_config")
    devices = list(config.get_device_backend_map()) if hasattr(config, "get_device_backend_map") else []
    if "cpu" not in devices:
        return CpuBackendBeingBuilt(False, None)
    built = building.get("backend_class")
    # The CPU's backend is the one built just before the neuron creator's call.
    cpu_built_last = "neuron" in devices and devices.index("neuron") == devices.index("cpu") + 1
    gloo = built if cpu_built_last and isinstance(built, dist.ProcessGroupGloo) else None
    return CpuBackendBeingBuilt(True, gloo)


def device_id_being_bound() -> torch.device | None:
    """The ``device_id`` given to the ``init_process_group`` (or ``new_group``) call that is creating a
    backend now, or ``None``.

    c10d sets ``bound_device_id`` on the ``ProcessGroup`` it builds, then drops that group for the
    one a backend's creator returns when that is a Python ``ProcessGroup`` subclass (torch 2.13,
    ``_new_process_group_helper``), and a creator is not given the device id. So the neuron group
    reads it from that function's frame; ``None`` when torch no longer has it there (the test of
    ``init_process_group(device_id=...)`` then fails and tells)."""
    building = _group_being_built()
    device_id = None if building is None else building.get("device_id")
    return device_id if isinstance(device_id, torch.device) else None
