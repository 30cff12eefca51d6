"""Fused optimizer steps: the kernels ``torch.optim.Adam``, ``AdamW`` and ``SGD`` call with ``fused=True``.

``_fused_adam``/``_fused_adamw``/``_fused_sgd`` update every parameter of a group in one executable;
the eager layer derives the in-place forms the optimizers call from these functional lowerings.
The arithmetic follows PyTorch's fused kernels (``FusedAdamKernel.cpp``, ``FusedSGDKernel.cpp``),
per element in float32 for 16-bit tensors. Adam and AdamW:

- ``grad_scale`` (GradScaler) unscales the gradients, which are written back unscaled; a nonzero
  ``found_inf`` leaves every tensor as it was;
- ``maximize`` negates the gradient (not written back); Adam adds ``weight_decay * param`` to it,
  AdamW scales the parameter by ``1 - lr * weight_decay`` instead;
- ``exp_avg`` moves towards the gradient by ``1 - beta1``, ``exp_avg_sq`` is
  ``beta2 * exp_avg_sq + (1 - beta2) * grad**2`` (its running maximum with ``amsgrad``);
- ``param -= lr / (1 - beta1**step) * exp_avg / (sqrt(exp_avg_sq) / sqrt(1 - beta2**step) + eps)``.

SGD: the gradient is unscaled and negated as above, gets ``weight_decay * param`` added; with
``momentum``, the buffer becomes the gradient on the first step and
``momentum * buffer + (1 - dampening) * grad`` after, and the step takes the buffer (``nesterov``:
``grad + momentum * buffer``); ``param -= lr * step``.

The bias corrections are computed in float32 from the device's step tensors, as CUDA's fused kernel
does (CPU's computes them in float64), so results differ from CPU's by float32 rounding of them.
"""

from __future__ import annotations

import jax.numpy as jnp
import torch

from torch_neuronx.lowering.registry import lowering

aten = torch.ops.aten


def _step(
    decoupled,
    params,
    grads,
    exp_avgs,
    exp_avg_sqs,
    max_exp_avg_sqs,
    state_steps,
    *,
    lr,
    beta1,
    beta2,
    weight_decay,
    eps,
    amsgrad,
    maximize,
    grad_scale,
    found_inf,
):
    results = ([], [], [], [], [])
    for i, (param, grad, exp_avg, exp_avg_sq, step) in enumerate(
        zip(params, grads, exp_avgs, exp_avg_sqs, state_steps, strict=True)
    ):
        compute = jnp.float32 if param.dtype in (jnp.bfloat16, jnp.float16) else param.dtype
        p, g, m, v = (t.astype(compute) for t in (param, grad, exp_avg, exp_avg_sq))
        if grad_scale is not None:
            g = g / grad_scale.reshape(()).astype(compute)
        unscaled = g
        if maximize:
            g = -g
        rate = jnp.asarray(lr, compute)
        if decoupled:
            p = p * (1 - rate * weight_decay)
        elif weight_decay != 0:
            g = g + weight_decay * p
        m = m + (1 - beta1) * (g - m)
        v = beta2 * v + (1 - beta2) * g * g
        count = step.reshape(()).astype(jnp.float32)
        correction1 = 1 - jnp.power(jnp.float32(beta1), count)
        correction2_sqrt = jnp.sqrt(1 - jnp.power(jnp.float32(beta2), count))
        largest = jnp.maximum(max_exp_avg_sqs[i].astype(compute), v) if amsgrad else v
        denominator = jnp.sqrt(largest) / correction2_sqrt.astype(compute) + eps
        p = p - (rate / correction1.astype(compute)) * m / denominator
        updated = [p, unscaled, m, v] + ([largest] if amsgrad else [])
        originals = [param, grad, exp_avg, exp_avg_sq] + ([max_exp_avg_sqs[i]] if amsgrad else [])
        for result, new, old in zip(results, updated, originals, strict=False):
            new = new.astype(old.dtype)
            result.append(new if found_inf is None else jnp.where(found_inf.reshape(()) != 0, old, new))
    return results


def _adam(decoupled: bool, doc: str):
    """The lowering of one fused Adam overload family: its tensor lists, then the schema's options."""

    def step(self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, **options):
        return _step(decoupled, self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, **options)

    step.__doc__ = doc
    return step


_ADAM_STATIC = ("beta1", "beta2", "weight_decay", "eps")

fused_adam = lowering(aten._fused_adam.default, aten._fused_adam.tensor_lr, static=_ADAM_STATIC)(
    _adam(
        False,
        """torch.optim.Adam(fused=True)'s step: (params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs),
    updated; the weight decay is added to the gradient.""",
    )
)

fused_adamw = lowering(aten._fused_adamw.default, aten._fused_adamw.tensor_lr, static=_ADAM_STATIC)(
    _adam(
        True,
        """torch.optim.AdamW(fused=True)'s step: as :func:`fused_adam`, with the weight decay applied to
    the parameter (decoupled, Loshchilov and Hutter, "Decoupled Weight Decay Regularization").""",
    )
)


@lowering(aten._fused_sgd.default, aten._fused_sgd.tensor_lr, static=("weight_decay", "momentum", "dampening"))
def fused_sgd(
    self,
    grads,
    momentum_buffer_list,
    *,
    weight_decay,
    momentum,
    lr,
    dampening,
    nesterov,
    maximize,
    is_first_step,
    grad_scale=None,
    found_inf=None,
):
    """torch.optim.SGD(fused=True)'s step: (params, grads, momentum buffers), updated."""
    results = ([], [], [])
    for i, (param, grad) in enumerate(zip(self, grads, strict=True)):
        compute = jnp.float32 if param.dtype in (jnp.bfloat16, jnp.float16) else param.dtype
        p, g = param.astype(compute), grad.astype(compute)
        if grad_scale is not None:
            g = g / grad_scale.reshape(()).astype(compute)
        unscaled = g
        if maximize:
            g = -g
        if weight_decay != 0:
            g = g + weight_decay * p
        updated, originals = [None, unscaled], [param, grad]
        if momentum != 0:
            buffer = g if is_first_step else momentum * momentum_buffer_list[i].astype(compute) + (1 - dampening) * g
            g = g + momentum * buffer if nesterov else buffer
            updated.append(buffer)
            originals.append(momentum_buffer_list[i])
        updated[0] = p - jnp.asarray(lr, compute) * g
        for result, new, old in zip(results, updated, originals, strict=False):
            new = new.astype(old.dtype)
            result.append(new if found_inf is None else jnp.where(found_inf.reshape(()) != 0, old, new))
    return results
