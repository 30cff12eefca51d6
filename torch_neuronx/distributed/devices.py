"""Which NeuronCore a process of a distributed job uses: ``LOCAL_RANK`` -> ``torch.neuron.set_device``.

Under ``torchrun`` each process has a ``LOCAL_RANK`` (its index on the machine). When its group is
created, the process makes core ``LOCAL_RANK`` its current core, as the vendor's backend does (and
as CUDA jobs do by hand with ``torch.cuda.set_device(local_rank)``). A process that sees a single
core (``NEURON_RT_VISIBLE_CORES`` set per process, so its core is ``neuron:0``) uses that core.
"""

from __future__ import annotations

import os

import torch

__all__ = ["core_for_local_rank", "set_core_for_local_rank"]


def core_for_local_rank(local_rank: int, visible: int) -> int:
    """The core index of the process with ``local_rank`` when it sees ``visible`` cores.

    Raises:
        ValueError: more processes on the machine than cores visible to this one.
    """
    if visible == 1:
        return 0
    if 0 <= local_rank < visible:
        return local_rank
    raise ValueError(
        f"neuron distributed: LOCAL_RANK={local_rank} but this process sees {visible} NeuronCores; run at most "
        f"{visible} processes per machine (torchrun --nproc-per-node), or give each process its own core with "
        "NEURON_RT_VISIBLE_CORES"
    )


def set_core_for_local_rank() -> int | None:
    """Makes the core of this process's ``LOCAL_RANK`` current (when the variable is set) and returns
    its index, or None without ``LOCAL_RANK``.

    Raises:
        ValueError: ``LOCAL_RANK`` is not an integer, or names no visible core.
    """
    value = os.environ.get("LOCAL_RANK")
    if value is None or value == "":
        return None
    try:
        local_rank = int(value)
    except ValueError:
        raise ValueError(f"neuron distributed: LOCAL_RANK={value!r} is not an integer") from None
    core = core_for_local_rank(local_rank, torch.neuron.device_count())
    torch.neuron.set_device(core)
    return core
