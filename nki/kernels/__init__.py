"""A library of NKI kernels (the NKI-lib analogue), each checked against PyTorch on the CPU
(tests/nki/test_kernels.py):

- :func:`rmsnorm.rms_norm_kernel`: RMSNorm over the last dimension;
- :func:`rope.rope_kernel`: rotary position embedding (the rotate-half form);
- :func:`swiglu.swiglu_mlp_kernel`: the SwiGLU MLP ``(silu(x Wg) * (x Wu)) Wd``;
- :mod:`flash_attention`: flash attention forward and backward (online softmax, causal or no mask,
  grouped-query attention).

The kernels are plain ``nki.jit`` kernels (call them on neuron tensors, or with
``nki.simulate``); :mod:`nki.kernels.ops` registers them as PyTorch ops with autograd.
"""
