"""Registers the ``neuron`` c10d backend with torch.distributed (at ``import torch``, cheaply).

After this, ``init_process_group("neuron")``, ``init_process_group("cpu:gloo,neuron:neuron")``,
``init_process_group(device_id=torch.device("neuron", i))`` and ``init_process_group()`` in a
process whose accelerator is neuron all create a :class:`NeuronProcessGroup`.
"""

from __future__ import annotations

import datetime

import torch.distributed as dist

from torch_neuronx._compat.distributed_internals import (
    backend_registered,
    cpu_backend_being_built,
    device_id_being_bound,
)

__all__ = ["BACKEND", "register"]

#: The backend's name, as ``init_process_group`` and ``dist.get_backend()`` spell it.
BACKEND = "neuron"


def _create(store: dist.Store, rank: int, size: int, timeout: datetime.timedelta) -> dist.ProcessGroup:
    """The backend's creator (``Backend.register_backend``): the group of this process, whose
    current core becomes that of its ``LOCAL_RANK``, bound to the ``device_id`` that
    ``init_process_group`` was given (as NCCL's group is: ``bound_device_id``), serving CPU tensors
    on the gloo backend c10d built for the group's ``cpu`` device when its backend string has one."""
    from torch_neuronx.distributed import devices
    from torch_neuronx.distributed.process_group import NeuronProcessGroup

    devices.set_core_for_local_rank()
    cpu = cpu_backend_being_built()
    group = NeuronProcessGroup(store, rank, size, timeout, serves_cpu=cpu.serves_cpu, cpu_transport=cpu.gloo)
    device_id = device_id_being_bound()
    if device_id is not None:
        group.bound_device_id = device_id
    return group


def register() -> None:
    """Registers the backend for the ``neuron`` device (idempotent; imports nothing heavy)."""
    if not dist.is_available() or backend_registered(BACKEND):
        return
    dist.Backend.register_backend(BACKEND, _create, devices=["neuron"])
