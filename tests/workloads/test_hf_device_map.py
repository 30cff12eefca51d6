"""Hugging Face models load straight onto the device: device_map="neuron", "auto", "balanced",
"sequential", max_memory per core, and CPU offload when the cores are too small."""

from __future__ import annotations

import logging

import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig

import torch_neuronx
from torch_neuronx._compat import accelerate_memory

CONFIG = LlamaConfig(
    vocab_size=256,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A saved random tiny Llama (427 kB of float32 weights) and its CPU model."""
    path = tmp_path_factory.mktemp("llama")
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(CONFIG).save_pretrained(path)
    return path, AutoModelForCausalLM.from_pretrained(path)


def _assert_logits_match_cpu(model, cpu_model):
    ids = torch.randint(0, 256, (2, 12))
    torch_neuronx.clear_op_tracking()
    with torch.no_grad():
        logits = model(ids.to("neuron")).logits
        torch.testing.assert_close(logits.cpu(), cpu_model(ids).logits, rtol=1e-4, atol=1e-4)
    assert torch_neuronx.get_fallback_ops() == {}


def test_llama_loaded_with_device_map_matches_cpu(checkpoint):
    path, cpu_model = checkpoint
    model = AutoModelForCausalLM.from_pretrained(path, device_map="neuron")
    assert all(p.device == torch.device("neuron", 0) for p in model.parameters())
    _assert_logits_match_cpu(model, cpu_model)


def test_device_map_auto_places_the_model_on_the_cores(checkpoint, caplog):
    path, cpu_model = checkpoint
    with caplog.at_level(logging.WARNING):
        model = AutoModelForCausalLM.from_pretrained(path, device_map="auto")
    assert {p.device.type for p in model.parameters()} == {"neuron"}
    assert "not available" not in caplog.text
    _assert_logits_match_cpu(model, cpu_model)


@pytest.mark.parametrize(
    "max_memory",
    [{0: "300KB", 1: "10MB"}, {"neuron:0": "300KB", "neuron:1": "10MB"}],
    ids=["core_index", "device_name"],
)
def test_max_memory_per_core_splits_the_model_across_cores(checkpoint, caplog, two_cores, max_memory):
    import accelerate

    path, cpu_model = checkpoint
    if "neuron:0" in max_memory and not accelerate_memory.needs_patch(accelerate.__version__):
        # accelerate's own neuron support (1.16 on) takes core indices only, as for CUDA ("cuda:0")
        with pytest.raises(ValueError, match="Device neuron:0 is not recognized"):
            AutoModelForCausalLM.from_pretrained(path, device_map="sequential", max_memory=max_memory)
        return
    with caplog.at_level(logging.WARNING):
        model = AutoModelForCausalLM.from_pretrained(path, device_map="sequential", max_memory=max_memory)
    assert model.hf_device_map["model.embed_tokens"] == 0 and model.hf_device_map["lm_head"] == 1
    assert {str(p.device) for p in model.parameters()} == {"neuron:0", "neuron:1"}
    assert "not available" not in caplog.text
    _assert_logits_match_cpu(model, cpu_model)


def test_balanced_fills_both_cores(checkpoint, two_cores):
    path, cpu_model = checkpoint
    model = AutoModelForCausalLM.from_pretrained(path, device_map="balanced")
    assert set(model.hf_device_map.values()) == {0, 1}
    _assert_logits_match_cpu(model, cpu_model)


def test_cores_too_small_offload_to_cpu(checkpoint):
    path, cpu_model = checkpoint
    model = AutoModelForCausalLM.from_pretrained(path, device_map="sequential", max_memory={0: "300KB", "cpu": "1GB"})
    assert model.hf_device_map["model.embed_tokens"] == 0 and model.hf_device_map["lm_head"] == "cpu"
    ids = torch.randint(0, 256, (2, 12))
    with torch.no_grad():
        torch.testing.assert_close(model(ids.to("neuron")).logits.cpu(), cpu_model(ids).logits, rtol=1e-4, atol=1e-4)


def test_unknown_and_repeated_devices_in_max_memory_raise():
    with pytest.raises(ValueError, match="Device gpu is not recognized"):
        accelerate_memory.neuron_max_memory({"gpu": 10})
    with pytest.raises(ValueError, match="max_memory gives device 0 twice"):
        accelerate_memory.neuron_max_memory({0: 10, "neuron:0": 20})


def test_accelerate_still_needs_the_neuron_memory_branch():
    """accelerate up to LAST_RELEASE_WITHOUT_NEURON finds no NeuronCore by itself (the reason for
    _compat/accelerate_memory.py); a newer release must, or device_map="auto" would silently put
    models on the CPU. When this fails after an accelerate upgrade, check its get_max_memory: drop
    the compatibility layer if it handles neuron, else raise LAST_RELEASE_WITHOUT_NEURON."""
    import accelerate
    from accelerate.utils import get_max_memory

    if accelerate_memory.needs_patch(accelerate.__version__):
        assert not [k for k in get_max_memory._neuron_original() if isinstance(k, int)]
    else:
        assert not hasattr(get_max_memory, "_neuron_original")
    cores = [k for k in get_max_memory() if isinstance(k, int)]
    assert cores == list(range(torch.neuron.device_count()))
