"""Hugging Face models load straight onto the device with device_map="neuron"."""

from __future__ import annotations

import torch
from transformers import AutoModelForCausalLM, LlamaConfig

import torch_neuronx


def test_llama_loaded_with_device_map_matches_cpu(tmp_path):
    config = LlamaConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).save_pretrained(tmp_path)
    cpu_model = AutoModelForCausalLM.from_pretrained(tmp_path)
    model = AutoModelForCausalLM.from_pretrained(tmp_path, device_map="neuron")
    assert all(p.device == torch.device("neuron", 0) for p in model.parameters())
    ids = torch.randint(0, 256, (2, 12))
    torch_neuronx.clear_op_tracking()
    with torch.no_grad():
        logits = model(ids.to("neuron")).logits
    assert torch_neuronx.get_fallback_ops() == {}
    with torch.no_grad():
        torch.testing.assert_close(logits.cpu(), cpu_model(ids).logits, rtol=1e-4, atol=1e-4)
