"""accelerate's device-memory query taught about neuron, for accelerate releases without it.

accelerate 1.15 knows the neuron device (``is_neuron_available``; ``dispatch_model`` and
``Accelerator`` place work on it) but ``accelerate.utils.get_max_memory``, which
``device_map="auto"``/``"balanced"``/``"sequential"`` start from, has no neuron branch: with no
``max_memory`` it asks ``torch.cuda`` and finds no device, so transformers puts the whole model on
the CPU, silently; with ``max_memory`` keyed by core index it warns "Device 0 is not available"
(it counts CUDA devices), and ``"neuron:1"`` keys raise "Device neuron:1 is not recognized".

:func:`install` (run when the device registers, at ``import torch``) replaces that function, once
accelerate is imported and only for releases up to :data:`LAST_RELEASE_WITHOUT_NEURON`, by
:func:`neuron_max_memory`, which does for NeuronCores what accelerate does for CUDA devices:
free memory per core from ``torch.neuron.mem_get_info``, the available host memory as ``"cpu"``,
sizes given as strings converted, cores first, then ``"mps"``, ``"cpu"``, ``"disk"``. A test
(tests/workloads/test_hf_device_map.py) tells when a new accelerate release makes this unnecessary.
accelerate 1.16 did: it finds the cores through ``torch.accelerator`` and, as for CUDA, takes core
indices as ``max_memory`` keys and refuses ``"neuron:1"`` (as it refuses ``"cuda:1"``).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import logging
import sys
from typing import Any

import torch

#: The newest accelerate release whose ``get_max_memory`` lacks a neuron branch.
LAST_RELEASE_WITHOUT_NEURON = "1.15.0"

_logger = logging.getLogger("torch_neuronx")


def _core_index(key: Any) -> Any:
    """A ``max_memory`` key as accelerate's own: a core index for ``"neuron:1"``,
    ``torch.device("neuron", 1)`` or ``1``; other keys (``"cpu"``, ``"disk"``) as they are."""
    if isinstance(key, str) and key.startswith("neuron"):
        key = torch.device(key)
    if isinstance(key, torch.device) and key.type == "neuron":
        return key.index if key.index is not None else torch.neuron.current_device()
    return key


def neuron_max_memory(max_memory: dict[Any, Any] | None = None) -> dict[Any, int]:
    """accelerate's ``get_max_memory`` for NeuronCores.

    Args:
        max_memory: bytes (an int, or a string such as ``"2GiB"``) per device, keyed by core index,
            ``"neuron:i"``, ``"mps"``, ``"cpu"`` or ``"disk"``; None: every visible core's free
            memory and the host's available memory. Its string sizes are converted in place, as
            accelerate's own function does (transformers reads them back).

    Returns:
        Bytes per device, cores (as indices) first in order, then ``"mps"``, ``"cpu"``, ``"disk"``.

    Raises:
        ValueError: a key is no device accelerate knows, or names one core twice.
    """
    from accelerate.utils import convert_file_size_to_int

    cores = torch.neuron.device_count()
    if max_memory is None:
        import psutil

        found: dict[Any, int] = {i: torch.neuron.mem_get_info(i)[0] for i in range(cores)}
        found["cpu"] = psutil.virtual_memory().available
        return found
    for key, value in max_memory.items():  # in place, as accelerate does: transformers relies on it
        if isinstance(value, str):
            max_memory[key] = convert_file_size_to_int(value)
    normalized: dict[Any, int] = {}
    for key, value in max_memory.items():
        index = _core_index(key)
        if index in normalized:
            raise ValueError(f"max_memory gives device {index!r} twice (as {key!r} and another key)")
        normalized[index] = value
    indices = sorted(k for k in normalized if isinstance(k, int))
    for index in indices:
        if not 0 <= index < cores:
            _logger.warning(f"Device {index} is not available, available devices are {list(range(cores))}")
    order = indices + [k for k in ("mps", "cpu", "disk") if k in normalized]
    for key in normalized:
        if key not in order:
            raise ValueError(
                f"Device {key} is not recognized, available devices are integers (NeuronCores), "
                "'neuron:i', 'mps', 'cpu' and 'disk'"
            )
    return {key: normalized[key] for key in order}


def needs_patch(version: str) -> bool:
    """Whether accelerate ``version`` lacks the neuron branch of ``get_max_memory``."""
    from packaging.version import Version

    return Version(version) <= Version(LAST_RELEASE_WITHOUT_NEURON)


def _patch() -> None:
    """Replaces accelerate's ``get_max_memory`` (and transformers' binding of it) where needed."""
    import accelerate

    if not needs_patch(accelerate.__version__):
        return
    utils = sys.modules["accelerate.utils"]
    modeling = sys.modules["accelerate.utils.modeling"]
    original = modeling.get_max_memory
    if getattr(original, "_neuron_original", None) is not None:
        return

    def get_max_memory(max_memory: dict[Any, Any] | None = None) -> dict[Any, Any]:
        if torch.neuron.device_count() == 0 or torch.cuda.is_available():
            return original(max_memory)
        return neuron_max_memory(max_memory)

    get_max_memory.__doc__ = original.__doc__
    get_max_memory._neuron_original = original  # type: ignore[attr-defined]
    modeling.get_max_memory = get_max_memory
    utils.get_max_memory = get_max_memory
    transformers_binding = sys.modules.get("transformers.integrations.accelerate")
    if transformers_binding is not None and getattr(transformers_binding, "accelerate_max_memory", None) is original:
        transformers_binding.accelerate_max_memory = get_max_memory


class _PatchAfterImport(importlib.abc.MetaPathFinder):
    """Runs :func:`_patch` right after ``accelerate.utils`` is imported (before anything that imports
    ``get_max_memory`` from it, such as transformers, can bind the original)."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != "accelerate.utils":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            execute(module)
            _patch()

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def install() -> None:
    """Patches accelerate now if it is imported, else right after it is (idempotent, cheap)."""
    if "accelerate.utils.modeling" in sys.modules and "accelerate.utils" in sys.modules:
        _patch()
    elif not any(isinstance(finder, _PatchAfterImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _PatchAfterImport())
