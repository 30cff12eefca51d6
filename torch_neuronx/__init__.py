"""TorchNeuron: AWS Trainium NeuronCores as the PyTorch device ``neuron``.

``import torch`` is enough to use the device (the package is autoloaded through the
``torch.backends`` entry point): ``model.to("neuron")``, ``torch.neuron.*`` and
``torch.accelerator.*`` work as they do for CUDA. ``import torch_neuronx`` adds the backend's own
APIs, listed in ``__all__``.
"""

from __future__ import annotations


def _autoload() -> None:
    """Entry point of the ``torch.backends`` group: registers the device (idempotent, cheap)."""
    from torch_neuronx import _registration

    _registration.register()


# Defined before torch is imported: `import torch_neuronx` imports torch, whose autoload calls
# _autoload on this partially imported module.
import torch  # noqa: E402

_autoload()

from torch_neuronx.adaptive import adaptive_eager, adaptive_eager_metrics, reset_adaptive_eager_metrics  # noqa: E402
from torch_neuronx.device.streams import Event, Stream  # noqa: E402
from torch_neuronx.eager.tracking import clear_op_tracking, get_executed_ops, get_fallback_ops  # noqa: E402

__all__ = [
    "Event",
    "adaptive_eager",
    "adaptive_eager_metrics",
    "Stream",
    "clear_op_tracking",
    "executable_cache_info",
    "get_dynamo_metrics",
    "get_executed_ops",
    "get_fallback_ops",
    "nki_op",
    "reset_adaptive_eager_metrics",
    "wrap_nki",
]

#: Names served by the NKI package, imported at first use (it imports JAX; ``import torch`` must not).
_NKI_NAMES = {"nki_op", "wrap_nki"}


def __getattr__(name: str):
    """``torch_neuronx.nki_op`` / ``torch_neuronx.wrap_nki`` (see :mod:`nki.op`), loaded lazily."""
    if name in _NKI_NAMES:
        from nki import op

        return getattr(op, name)
    raise AttributeError(f"module 'torch_neuronx' has no attribute {name!r}")


def get_dynamo_metrics() -> list[dict]:
    """Per compiled graph: node count, lowering and compile time, calls and cache hits (see
    :func:`torch_neuronx.dynamo.get_dynamo_metrics`)."""
    from torch_neuronx.dynamo import get_dynamo_metrics as metrics

    return metrics()


def executable_cache_info():
    """``CacheInfo(size, capacity, evictions)`` of the executables eager kernels and compiled graphs
    keep: how many are cached now, the bound (``TORCH_NEURONX_EXECUTABLE_CACHE_SIZE``) and how many
    were evicted, least recently used first, since the start. A call whose executable was evicted
    is compiled again. Importing this does not start the device.

    Raises:
        ValueError: ``TORCH_NEURONX_EXECUTABLE_CACHE_SIZE`` is malformed.
    """
    from torch_neuronx.runtime.executable_cache import EXECUTABLES

    return EXECUTABLES.info()


__version__ = "0.1.0"

del torch
