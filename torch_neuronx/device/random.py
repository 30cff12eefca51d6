"""RNG of the neuron device: per-core default generators holding (seed, offset) (decision 11)."""

from __future__ import annotations

from collections.abc import Iterable

import torch

from torch_neuronx import _C
from torch_neuronx.device.core import _index, device_count

__all__ = [
    "get_rng_state",
    "get_rng_state_all",
    "initial_seed",
    "manual_seed",
    "manual_seed_all",
    "seed",
    "seed_all",
    "set_rng_state",
    "set_rng_state_all",
]


def _generator(device: torch.device | int | str | None) -> torch.Generator:
    return _C._default_generator(_index(device))


def manual_seed(seed: int) -> None:
    """Seeds the current core's generator (``torch.manual_seed`` seeds every core)."""
    _generator(None).manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    """Seeds the generator of every visible core."""
    for index in range(device_count()):
        _C._default_generator(index).manual_seed(int(seed))


def seed() -> None:
    """Seeds the current core's generator with a non-deterministic random number."""
    _generator(None).seed()


def seed_all() -> None:
    """Seeds every core's generator with one non-deterministic random number."""
    value = _generator(None).seed()
    manual_seed_all(value)


def initial_seed() -> int:
    """The current core's seed."""
    return _generator(None).initial_seed()


def get_rng_state(device: torch.device | int | str = "neuron") -> torch.Tensor:
    """The generator state of a core: a 16-byte torch.uint8 CPU tensor (seed, offset), CUDA's layout."""
    return _generator(device).get_state()


def set_rng_state(new_state: torch.Tensor, device: torch.device | int | str = "neuron") -> None:
    """Restores a state from :func:`get_rng_state` (16 bytes: seed, offset; or 8: a seed, offset
    0), copied to contiguous memory first, as ``torch.cuda.set_rng_state`` does.

    Raises:
        TypeError: the state is not a CPU uint8 tensor ("RNG state must be a torch.ByteTensor").
        RuntimeError: it has neither 8 nor 16 bytes, or its offset is not a multiple of 4 (CUDA's
            words).
    """
    _generator(device).set_state(new_state.clone(memory_format=torch.contiguous_format))


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state(index) for index in range(device_count())]


def set_rng_state_all(new_states: Iterable[torch.Tensor]) -> None:
    for index, state in enumerate(new_states):
        set_rng_state(state, index)
