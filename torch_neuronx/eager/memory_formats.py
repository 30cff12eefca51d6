"""Memory formats of results that PyTorch's meta kernels lay out otherwise than CPU and CUDA.

A new result takes the strides its meta kernel gives (runtime/executable.py, ``ResultLayout``), but
the meta kernel of ``aten::convolution`` returns a contiguous result whatever its operands' memory
format. CPU and CUDA return a channels_last (channels_last_3d) convolution when the input or the weight suggests it
(ATen's ``_determine_backend_memory_format``: ``cudnn_conv_suggest_memory_format``,
``mkldnn_conv_use_channels_last``), and code written for them keeps channels_last models in it.

Some pointwise ops' Python meta kernels are compositions (``copysign`` is a ``where`` over the sign
of its second operand), whose strides follow another operand than TensorIterator's rule: a
transposed ``a`` with a broadcast ``b`` gave a contiguous ``copysign(a, b)``, where CPU and CUDA keep
``a``'s layout. Their results take TensorIterator's strides. ``pow(scalar, tensor)``'s ATen meta
kernel allocates a contiguous result, which PyTorch's Python one does not.

Batch norm's meta kernels keep a permuted input's strides, as CUDA's native kernel does
(``at::empty_like(self)``), but CUDA hands the common case (affine, float32 or float16, 3-d or more)
to cuDNN, whose output is laid out in the input's suggested memory format, contiguous for a
permuted input; that case takes cuDNN's layout.

``linalg_eig``'s Python meta kernel returns row-major eigenvectors; LAPACK's geev (CPU) and MAGMA's
(CUDA) write them column-major, as ATen's C++ meta function lays them out (``linalg_eig_out``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from torch_neuronx._compat.torch_internals import compute_elementwise_output_strides, suggest_memory_format

aten = torch.ops.aten

#: Pointwise ops whose meta kernel's strides differ from TensorIterator's (found by comparing the
#: CPU's result strides with the meta kernel's for every binary ufunc of OpInfo, with transposed,
#: channels_last and broadcast operands).
_TENSOR_ITERATOR_LAYOUT = {
    aten.copysign.Tensor,
    aten.div.Tensor_mode,
    aten.floor_divide.default,
    aten.heaviside.default,
    aten.logaddexp.default,
    aten.logical_and.default,
    aten.logical_or.default,
    aten.logical_xor.default,
    aten.xlogy.Tensor,
    aten.special_xlog1py.default,
}

#: Batch norm's ops: where each reads ``training`` (or its value where the op fixes it) and its
#: running statistics (None: the op has none).
_BATCH_NORMS = {
    aten._native_batch_norm_legit_no_training.default: {"training": False, "stats": (3, 4)},
    aten._native_batch_norm_legit_functional.default: {"training": 5, "stats": (3, 4)},
    aten._native_batch_norm_legit.no_stats: {"training": 3, "stats": None},
    aten.native_batch_norm.default: {"training": 5, "stats": (3, 4)},
    aten._batch_norm_with_update_functional.default: {"training": True, "stats": (3, 4)},
}

#: By the output's rank: 2-d and 3-d convolutions (a 1-d one has no channels-last format).
_CHANNELS_LAST = {4: torch.channels_last, 5: torch.channels_last_3d}


def _suggests(tensor: torch.Tensor, memory_format: torch.memory_format) -> bool:
    """ATen's ``suggest_memory_format() == memory_format`` for a dense tensor: its strides are that
    format's and not also the contiguous ones (a tensor of one channel is both)."""
    return tensor.is_contiguous(memory_format=memory_format) and not tensor.is_contiguous()


def convolution_fake_layout(input: torch.Tensor, weight: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
    """The memory format FakeTensorMode's convolution of neuron ``input`` and ``weight`` must give
    its result, so that compiled graphs lay it out as eager does (:func:`result_metas`): channels-last
    (channels_last_3d) where either suggests it, else None (its own choice stands)."""
    if input.device.type != "neuron":
        return None
    memory_format = _CHANNELS_LAST.get(input.dim())
    if memory_format is None or not (_suggests(input, memory_format) or _suggests(weight, memory_format)):
        return None
    return memory_format


def tensor_iterator_strides(arguments: list[Any], shape: Sequence[int]) -> list[int] | None:
    """The strides TensorIterator gives a result of ``shape`` computed from the tensor ``arguments``
    (broadcast to that shape; 0-d operands do not count), or None without such an operand."""
    operands = [a.expand(shape) for a in arguments if isinstance(a, torch.Tensor) and a.dim() > 0]
    return list(compute_elementwise_output_strides(*operands)) if operands else None


def _tensor_iterator_layout(arguments: list[Any], result: torch.Tensor) -> torch.Tensor:
    """``result`` (a meta tensor) with :func:`tensor_iterator_strides`."""
    strides = tensor_iterator_strides(arguments, result.shape)
    if strides is None:
        return result
    return torch.empty_strided(result.shape, strides, dtype=result.dtype, device="meta")


def _cuda_selects_cudnn_batch_norm(op: Any, arguments: list[Any]) -> bool:
    """Whether CUDA's ``_select_batch_norm_backend`` (``Normalization.cpp``) hands this batch norm
    call to cuDNN (compiled with cuDNN >= 5.1.10, enabled: the default). CUDA also keeps an ``eps``
    below cuDNN's 1e-5 from cuDNN; that is not followed: an executable's layout is fixed per call
    signature, in which ``eps`` is a runtime scalar."""
    where = _BATCH_NORMS[op]
    input, weight, bias = arguments[:3]
    training = where["training"] if isinstance(where["training"], bool) else arguments[where["training"]]
    stats = [arguments[i] for i in where["stats"]] if where["stats"] else [None, None]
    if weight is None or bias is None or input.dim() < 3:
        return False
    if torch.bfloat16 in (input.dtype, weight.dtype):
        return False
    if input.dtype == torch.float16 and weight.dtype != torch.float32:
        return False
    if not (all(s is not None for s in stats) or (all(s is None for s in stats) and training)):
        return False
    return input.shape[0] <= (880801 if training else 65535) and input.numel() < 2**31 - 1


#: Ops whose CPU and CUDA kernels allocate their (first) result contiguous whatever the input's
#: layout (``at::empty(self.sizes())`` in the samplers of Distributions.cpp; rrelu_with_noise's
#: LEGACY_CONTIGUOUS_MEMORY_FORMAT), where PyTorch's meta kernels keep the input's strides.
_CONTIGUOUS_FIRST_RESULT = frozenset(
    {
        aten.poisson.default,
        aten._standard_gamma.default,
        aten._sample_dirichlet.default,
        aten.rrelu_with_noise_functional.default,
    }
)


def result_metas(op: Any, arguments: list[Any], results: list[Any]) -> list[Any]:
    """``results`` (the meta kernel's new results of ``op`` called with ``arguments``) in the memory
    format CPU and CUDA give them: a convolution's output channels_last (channels_last_3d) when its
    input or weight is; TensorIterator's strides for the ops of ``_TENSOR_ITERATOR_LAYOUT``; a
    contiguous ``pow(scalar, tensor)`` and sampler output; a batch norm's output as cuDNN lays it out
    where CUDA calls cuDNN; ``linalg_eig``'s eigenvectors column-major."""
    if op in _CONTIGUOUS_FIRST_RESULT and results and isinstance(results[0], torch.Tensor):
        return [results[0].contiguous(), *results[1:]]
    if op is aten.linalg_eig.default and len(results) == 2:
        return [results[0], results[1].mT.contiguous().mT]
    if op in _BATCH_NORMS and _cuda_selects_cudnn_batch_norm(op, arguments):
        output = results[0]
        return [output.contiguous(memory_format=suggest_memory_format(arguments[0])), *results[1:]]
    if len(results) == 1 and isinstance(results[0], torch.Tensor):
        if op in _TENSOR_ITERATOR_LAYOUT:
            return [_tensor_iterator_layout(arguments, results[0])]
        if op is aten.pow.Scalar:
            return [results[0].contiguous()]
    if op is not aten.convolution.default or not results or not isinstance(results[0], torch.Tensor):
        return results
    output, (input, weight) = results[0], arguments[:2]
    memory_format = _CHANNELS_LAST.get(output.dim())
    if memory_format is None or not (_suggests(input, memory_format) or _suggests(weight, memory_format)):
        return results
    return [output.contiguous(memory_format=memory_format), *results[1:]]
