"""The inference fast paths of nn.MultiheadAttention and nn.TransformerEncoderLayer on neuron against
the CPU's, eager and compiled (torch_neuronx/lowering/transformer.py)."""

from __future__ import annotations

import copy
import re

import pytest
import torch

import torch_neuronx

aten = torch.ops.aten

B, T, D = 2, 5, 16
PADDING = torch.tensor([[False] * T, [False] * (T - 2) + [True] * 2])
CAUSAL = torch.nn.Transformer.generate_square_subsequent_mask(T)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def _on_both(module: torch.nn.Module) -> tuple[torch.nn.Module, torch.nn.Module]:
    return module.eval(), copy.deepcopy(module).to("neuron")


def _run(module, *args, compiled: bool, **kwargs):
    call = torch.compile(module, backend="neuron") if compiled else module
    with torch.no_grad():
        return call(*args, **kwargs)


MASKS = {
    "none": {},
    "padding": {"src_key_padding_mask": PADDING},
    "causal-float": {"src_mask": CAUSAL},
    "causal-bool-and-padding": {"src_mask": CAUSAL.isinf(), "src_key_padding_mask": PADDING},
}


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize("masks", MASKS, ids=list(MASKS))
@pytest.mark.parametrize(("norm_first", "activation"), [(False, "relu"), (True, "gelu")])
def test_encoder_layer_fast_path_matches_cpu(compiled, masks, norm_first, activation):
    # Compiled, the fused op had no lowering: BackendCompilerFailed for every eval-mode layer.
    layer = torch.nn.TransformerEncoderLayer(
        D, 2, 32, dropout=0.0, batch_first=True, norm_first=norm_first, activation=activation
    )
    cpu, neuron = _on_both(layer)
    x = torch.randn(B, T, D)
    torch_neuronx.clear_op_tracking()
    actual = _run(neuron, x.to("neuron"), compiled=compiled, **{k: v.to("neuron") for k, v in MASKS[masks].items()})
    expected = _run(cpu, x, compiled=False, **MASKS[masks])
    torch.testing.assert_close(actual.cpu(), expected)
    assert "aten::_transformer_encoder_layer_fwd.default" not in torch_neuronx.get_fallback_ops()


def test_encoder_layer_fast_path_bfloat16_matches_cpu():
    cpu, neuron = _on_both(torch.nn.TransformerEncoderLayer(D, 2, 32, batch_first=True).to(torch.bfloat16))
    x = torch.randn(B, T, D, dtype=torch.bfloat16)
    actual = _run(neuron, x.to("neuron"), compiled=False, src_key_padding_mask=PADDING.to("neuron"))
    expected = _run(cpu, x, compiled=False, src_key_padding_mask=PADDING)
    # Both round after each stage; the residual sums and layer norms make a few ulps of 2**-8 apart.
    torch.testing.assert_close(actual.cpu(), expected, atol=2e-2, rtol=2e-2)


def test_fully_padded_sequence_is_nan_as_on_the_cpu():
    # The dense fast path's masked softmax gives a query with no key NaN weights (masked_softmax_cpu).
    cpu, neuron = _on_both(torch.nn.TransformerEncoderLayer(D, 2, 32, batch_first=True))
    x, padding = torch.randn(B, T, D), PADDING.clone()
    padding[1] = True
    actual = _run(neuron, x.to("neuron"), compiled=False, src_key_padding_mask=padding.to("neuron"))
    expected = _run(cpu, x, compiled=False, src_key_padding_mask=padding)
    assert expected[1].isnan().all()
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize(
    ("need_weights", "average"), [(True, True), (True, False), (False, True)], ids=["average", "per-head", "none"]
)
@pytest.mark.parametrize("attention", ["self-padding", "cross-causal"])
def test_multi_head_attention_fast_path_matches_cpu(compiled, need_weights, average, attention):
    cpu, neuron = _on_both(torch.nn.MultiheadAttention(D, 4, batch_first=True))
    query, memory = torch.randn(B, T, D), torch.randn(B, T, D)
    if attention == "self-padding":
        key, masks = query, {"key_padding_mask": PADDING}
    else:
        key, masks = memory, {"attn_mask": CAUSAL.isinf()}
    options = {"need_weights": need_weights, "average_attn_weights": average}
    actual = _run(
        neuron,
        query.to("neuron"),
        key.to("neuron"),
        key.to("neuron"),
        compiled=compiled,
        **options,
        **{k: v.to("neuron") for k, v in masks.items()},
    )
    expected = _run(cpu, query, key, key, compiled=False, **options, **masks)
    torch.testing.assert_close(actual[0].cpu(), expected[0])
    if need_weights:
        torch.testing.assert_close(actual[1].cpu(), expected[1])
    else:
        assert expected[1] is None and actual[1] is None


def _attention_arguments(device, dtype=torch.float32, embed_dim=4, num_heads=2):
    q = torch.ones(2, 3, 4, dtype=dtype, device=device)
    weights = [torch.ones(*shape, dtype=dtype, device=device) for shape in ((12, 4), (12,), (4, 4), (4,))]
    return (q, q, q, embed_dim, num_heads, *weights)


@pytest.mark.parametrize(
    ("embed_dim", "num_heads", "message"),
    [
        (5, 2, "passed-in embed_dim 5 didn't match last dim of query 4"),
        (4, 3, "`embed_dim` must divide evenly by `num_heads`"),
    ],
)
def test_multi_head_attention_refuses_what_the_cpu_refuses(embed_dim, num_heads, message):
    for device in ("cpu", "neuron"):
        arguments = _attention_arguments(device, embed_dim=embed_dim, num_heads=num_heads)
        with pytest.raises(RuntimeError, match=f"^{re.escape(message)}$"):
            aten._native_multi_head_attention(*arguments, None, True, True, None)


@pytest.mark.parametrize(
    ("mask_shape", "mask_type", "message"),
    [
        ((3, 2), 1, "Mask shape should match input. mask: [3, 2] input: [2, 2, 3, 3]"),
        ((2, 3), 0, "Mask shape should match input. mask: [2, 3] input: [2, 2, 3, 3]"),
        ((2, 3, 3), 2, "Mask shape should match input. mask: [2, 3, 3] input: [2, 2, 3, 3]"),
        ((2, 3), None, "Mask Type should be defined"),
        ((2, 3), 5, "Mask Type should be 0 (src_mask), 1 (src_key_padding_mask), or 2 (default_mask)"),
    ],
)
def test_multi_head_attention_mask_errors_are_cudas(mask_shape, mask_type, message):
    # masked_softmax_cuda's words (SoftMax.cu); the CPU words its shape checks per mask type.
    mask = torch.zeros(mask_shape, dtype=torch.bool, device="neuron")
    with pytest.raises(RuntimeError, match=f"^{re.escape(message)}$"):
        aten._native_multi_head_attention(*_attention_arguments("neuron"), mask, True, True, mask_type)


@pytest.mark.parametrize(
    ("changed", "message"),
    [
        ({0: torch.bfloat16}, "expected mat1 and mat2 to have the same dtype, but got: c10::BFloat16 != float"),
        ({0: torch.int64}, "expected mat1 and mat2 to have the same dtype, but got: long int != float"),
        ({6: torch.bfloat16}, "expected scalar type Float but found BFloat16"),
        ({7: torch.bfloat16}, "self and mat2 must have the same dtype, but got Float and BFloat16"),
        ({8: torch.bfloat16}, "self and mat2 must have the same dtype, but got BFloat16 and Float"),
    ],
)
def test_multi_head_attention_refuses_mixed_dtypes_as_cuda(changed, message):
    # They were computed; the CUDA kernel's mm, bias read and addmm refuse them, in that order.
    arguments = list(_attention_arguments("neuron"))
    for index, dtype in changed.items():
        arguments[index] = arguments[index].to(dtype)
        if index == 0:
            arguments[1] = arguments[2] = arguments[0]
    with pytest.raises(RuntimeError, match=f"^{re.escape(message)}$"):
        aten._native_multi_head_attention(*arguments, None, False)


@pytest.mark.parametrize(
    ("dtype", "kernel"),
    [
        (torch.int64, "transform_bias_rescale_qkv"),
        (torch.complex64, "transform_bias_rescale_qkv"),
        (torch.bool, "addmm_cuda"),
    ],
)
def test_multi_head_attention_dtypes_follow_cuda(dtype, kernel):
    with pytest.raises(NotImplementedError, match=f'"{kernel}" not implemented for'):
        aten._native_multi_head_attention(*_attention_arguments("neuron", dtype), None, False)


@pytest.mark.parametrize(("batch", "need_weights"), [(2, False), (0, True)])
def test_multi_head_attention_without_weights_returns_none_as_on_the_cpu(batch, need_weights):
    # The executable returned the meta kernel's empty tensor where ATen's kernels return undefined.
    for device in ("cpu", "neuron"):
        query, *arguments = _attention_arguments(device)
        query = query[:batch]
        output, weights = aten._native_multi_head_attention(query, query, query, *arguments[2:], None, need_weights)
        assert weights is None and output.shape == (batch, 3, 4)


def _encoder_layer_arguments(device, changed):
    """``_transformer_encoder_layer_fwd``'s arguments (D=4, 2 heads, F=8) with the tensors at the
    positions of ``changed`` converted to their dtype."""
    ones = [torch.ones(*shape) for shape in ((12, 4), (12,), (4, 4), (4,))]
    norms = [torch.ones(4), torch.zeros(4), torch.ones(4), torch.zeros(4)]
    ffn = [torch.ones(8, 4), torch.ones(8), torch.ones(4, 8), torch.ones(4)]
    arguments = [torch.ones(2, 3, 4), 4, 2, *ones, False, False, 1e-5, *norms, *ffn]
    for index, dtype in changed.items():
        arguments[index] = arguments[index].to(dtype)
    return [a.to(device) if isinstance(a, torch.Tensor) else a for a in arguments]


@pytest.mark.parametrize("changed", [{11: torch.bfloat16}, *({i: torch.bfloat16} for i in range(14, 18))])
def test_encoder_layer_refuses_mixed_dtypes_as_the_cpu(changed):
    # A norm bias or a feed-forward weight or bias of another dtype was computed; ADDMM_META and the
    # layer norm's kernel refuse them, on the CPU and CUDA alike.
    messages = []
    for device in ("cpu", "neuron"):
        with pytest.raises(RuntimeError) as raised:
            aten._transformer_encoder_layer_fwd(*_encoder_layer_arguments(device, changed))
        messages.append(str(raised.value))
    assert messages[0] == messages[1]
