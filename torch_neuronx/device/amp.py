"""``torch.neuron.amp``: the device-named mixed-precision class that ``torch.cuda.amp`` has for CUDA.

PyTorch deprecates the device-named forms in favour of ``torch.amp.GradScaler(device, ...)``, and so
does this one, in CUDA's words with the device's name (``torch.cuda.amp.GradScaler`` warns
"`torch.cuda.amp.GradScaler(args...)` is deprecated. Please use `torch.amp.GradScaler('cuda',
args...)` instead."). Code written for CUDA that names ``torch.cuda.amp.GradScaler`` runs on neuron
with ``torch.neuron.amp.GradScaler``, with the same warning.
"""

from __future__ import annotations

import warnings

import torch

__all__ = ["GradScaler"]


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
        warnings.warn(
            "`torch.neuron.amp.GradScaler(args...)` is deprecated. "
            "Please use `torch.amp.GradScaler('neuron', args...)` instead.",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__(
            "neuron",
            init_scale=init_scale,
            growth_factor=growth_factor,
            backoff_factor=backoff_factor,
            growth_interval=growth_interval,
            enabled=enabled,
        )
