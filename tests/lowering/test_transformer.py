"""The inference fast paths of nn.MultiheadAttention and nn.TransformerEncoderLayer on neuron against
the CPU's, eager and compiled (torch_neuronx/lowering/transformer.py)."""

from __future__ import annotations

import copy

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
    ("mask", "mask_type", "embed_dim", "num_heads", "message"),
    [
        (torch.zeros(3, 2, dtype=torch.bool), 1, 4, 2, "For mask_type == 1 mask shape should be (B, L)"),
        (torch.zeros(2, 3, dtype=torch.bool), 0, 4, 2, "For mask_type == 0 mask shape should be (L, L)"),
        (torch.zeros(2, 3, dtype=torch.bool), None, 4, 2, "Mask Type should be defined"),
        (torch.zeros(2, 3, 3, dtype=torch.bool), 2, 4, 2, "For mask_type == 2 mask shape should match input shape"),
        (None, None, 5, 2, "passed-in embed_dim 5 didn't match last dim of query 4"),
        (None, None, 4, 3, "`embed_dim` must divide evenly by `num_heads`"),
    ],
)
def test_multi_head_attention_refuses_what_the_cpu_refuses(mask, mask_type, embed_dim, num_heads, message):
    for device in ("cpu", "neuron"):
        arguments = _attention_arguments(device, embed_dim=embed_dim, num_heads=num_heads)
        with pytest.raises(RuntimeError, match=f"^{message}$".replace("(", r"\(").replace(")", r"\)")):
            aten._native_multi_head_attention(
                *arguments, None if mask is None else mask.to(device), True, True, mask_type
            )


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


def test_multi_head_attention_without_weights_returns_none_as_on_the_cpu():
    # The executable returned the meta kernel's empty tensor where ATen's kernels return undefined.
    for device in ("cpu", "neuron"):
        output, weights = aten._native_multi_head_attention(*_attention_arguments(device), None, False)
        assert weights is None and output.shape == (2, 3, 4)
