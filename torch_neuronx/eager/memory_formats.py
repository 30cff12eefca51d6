"""Memory formats of results that PyTorch's meta kernels leave contiguous.

A new result takes the strides its meta kernel gives (runtime/executable.py, ``ResultLayout``), but
the meta kernel of ``aten::convolution`` returns a contiguous result whatever its operands' memory
format. CPU and CUDA return a channels_last (channels_last_3d) convolution when the input or the weight suggests it
(ATen's ``_determine_backend_memory_format``: ``cudnn_conv_suggest_memory_format``,
``mkldnn_conv_use_channels_last``), and code written for them keeps channels_last models in it.
"""

from __future__ import annotations

from typing import Any

import torch

aten = torch.ops.aten

#: By the output's rank: 2-d and 3-d convolutions (a 1-d one has no channels-last format).
_CHANNELS_LAST = {4: torch.channels_last, 5: torch.channels_last_3d}


def _suggests(tensor: torch.Tensor, memory_format: torch.memory_format) -> bool:
    """ATen's ``suggest_memory_format() == memory_format`` for a dense tensor: its strides are that
    format's and not also the contiguous ones (a tensor of one channel is both)."""
    return tensor.is_contiguous(memory_format=memory_format) and not tensor.is_contiguous()


def result_metas(op: Any, arguments: list[Any], results: list[Any]) -> list[Any]:
    """``results`` (the meta kernel's new results of ``op`` called with ``arguments``) in the memory
    format CPU and CUDA give them: a convolution's output channels_last (channels_last_3d) when its
    input or weight is."""
    if op is not aten.convolution.default or not results or not isinstance(results[0], torch.Tensor):
        return results
    output, (input, weight) = results[0], arguments[:2]
    memory_format = _CHANNELS_LAST.get(output.dim())
    if memory_format is None or not (_suggests(input, memory_format) or _suggests(weight, memory_format)):
        return results
    return [output.contiguous(memory_format=memory_format), *results[1:]]
