"""``torch.neuron.amp``: the device-named mixed-precision API that ``torch.cuda.amp`` has for CUDA
(``autocast``, ``custom_fwd``, ``custom_bwd``, ``GradScaler``).

PyTorch deprecates the device-named forms in favour of ``torch.amp``'s (``torch.amp.autocast(device,
...)``), and so does this module, in CUDA's words with the device's name (``torch.cuda.amp.GradScaler``
warns "`torch.cuda.amp.GradScaler(args...)` is deprecated. Please use `torch.amp.GradScaler('cuda',
args...)` instead."). Code written for CUDA that names ``torch.cuda.amp`` runs on neuron with
``torch.neuron.amp``, with the same warnings.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["GradScaler", "autocast", "custom_bwd", "custom_fwd"]


def _deprecated(old: str, new: str) -> None:
    warnings.warn(f"`{old}` is deprecated. Please use `{new}` instead.", FutureWarning, stacklevel=3)


class autocast(torch.amp.autocast):  # noqa: N801 - torch.cuda.amp.autocast's name
    """``torch.autocast("neuron", ...)``, under its deprecated device-named form: a context manager
    and decorator. ``dtype`` defaults to the device's autocast dtype (bfloat16:
    ``torch.get_autocast_dtype("neuron")``), where ``torch.cuda.amp.autocast``'s is float16.

    Warns:
        FutureWarning: on construction, naming ``torch.amp.autocast('neuron', args...)``.
    """

    def __init__(self, enabled: bool = True, dtype: torch.dtype | None = None, cache_enabled: bool = True) -> None:
        _deprecated("torch.neuron.amp.autocast(args...)", "torch.amp.autocast('neuron', args...)")
        super().__init__("neuron", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


def custom_fwd(fwd: Callable[..., Any] | None = None, *, cast_inputs: torch.dtype | None = None) -> Any:
    """``torch.amp.custom_fwd(..., device_type="neuron")``, under its deprecated device-named form.

    Warns:
        FutureWarning: naming ``torch.amp.custom_fwd(args..., device_type='neuron')``.
    """
    _deprecated("torch.neuron.amp.custom_fwd(args...)", "torch.amp.custom_fwd(args..., device_type='neuron')")
    return functools.partial(torch.amp.custom_fwd, device_type="neuron")(fwd=fwd, cast_inputs=cast_inputs)


def custom_bwd(bwd: Callable[..., Any]) -> Any:
    """``torch.amp.custom_bwd(..., device_type="neuron")``, under its deprecated device-named form.

    Warns:
        FutureWarning: naming ``torch.amp.custom_bwd(args..., device_type='neuron')``.
    """
    _deprecated("torch.neuron.amp.custom_bwd(args...)", "torch.amp.custom_bwd(args..., device_type='neuron')")
    return torch.amp.custom_bwd(bwd, device_type="neuron")


class GradScaler(torch.amp.GradScaler):
    """``torch.amp.GradScaler("neuron", ...)``, under its deprecated device-named form.

    Warns:
        FutureWarning: on construction, naming ``torch.amp.GradScaler('neuron', args...)``.
    """

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> None:
        _deprecated("torch.neuron.amp.GradScaler(args...)", "torch.amp.GradScaler('neuron', args...)")
        super().__init__(
            "neuron",
            init_scale=init_scale,
            growth_factor=growth_factor,
            backoff_factor=backoff_factor,
            growth_interval=growth_interval,
            enabled=enabled,
        )
