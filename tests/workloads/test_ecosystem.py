"""The Hugging Face ecosystem on neuron against the CPU: PEFT, TRL, Diffusers, sentence-transformers
and timm, each through its example in examples/.

The default run takes the shortest check (sentence-transformers encode); ``make test-ecosystem``
(``TORCH_NEURONX_ECOSYSTEM_FULL=1``) adds LoRA fine-tuning, the DDIM pipeline and the training steps
of the UNet and the DiT, TRL's SFTTrainer in float32 and bfloat16, and the timm models.
"""

from __future__ import annotations

import dataclasses
import os

import pytest
import torch

import torch_neuronx
from examples import diffusers_unet, peft_lora, sentence_transformers_encode, timm_models, trl_sft
from examples.minilm_embeddings import SENTENCES

full = pytest.mark.skipif(
    os.environ.get("TORCH_NEURONX_ECOSYSTEM_FULL") != "1",
    reason="minutes of compiling; make test-ecosystem (TORCH_NEURONX_ECOSYSTEM_FULL=1) runs it",
)


def _named(name: str):
    """An assert_close message that starts with the tensor's name."""
    return lambda message: f"{name}: {message}"


@full
def test_peft_lora_fine_tuning_matches_cpu():
    cpu = peft_lora.fine_tune("cpu", peft_lora.SIZES["tiny"])
    torch_neuronx.clear_op_tracking()
    neuron = peft_lora.fine_tune("neuron", peft_lora.SIZES["tiny"])
    assert torch_neuronx.get_fallback_ops() == {}
    torch.testing.assert_close(torch.tensor(neuron.losses), torch.tensor(cpu.losses), rtol=1e-5, atol=1e-6)
    assert cpu.adapters.keys() == neuron.adapters.keys()
    assert all("lora_" in name for name in neuron.adapters)
    for name, adapter in cpu.adapters.items():
        torch.testing.assert_close(neuron.adapters[name], adapter, rtol=1e-4, atol=1e-6, msg=_named(name))
    assert neuron.frozen_changed == []
    assert cpu.merged.keys() == neuron.merged.keys()
    assert not any("lora_" in name for name in neuron.merged)
    for name, weight in cpu.merged.items():
        torch.testing.assert_close(neuron.merged[name], weight, rtol=1e-4, atol=1e-6, msg=_named(name))
    torch.testing.assert_close(neuron.merged_logits, cpu.merged_logits, rtol=1e-4, atol=1e-5)


def test_sentence_transformers_encode_matches_cpu():
    cpu = sentence_transformers_encode.encode(SENTENCES[:5], "cpu")
    torch_neuronx.clear_op_tracking()
    neuron = sentence_transformers_encode.encode(SENTENCES[:5], "neuron")
    assert torch_neuronx.get_fallback_ops() == {}
    cosine = torch.nn.functional.cosine_similarity(cpu.embeddings, neuron.embeddings, dim=1)
    assert cosine.min().item() >= 0.99999
    torch.testing.assert_close(neuron.embeddings, cpu.embeddings, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(neuron.similarity, cpu.similarity, rtol=1e-4, atol=1e-5)


@full
@pytest.mark.parametrize("size", ["tiny", "main"])
def test_diffusers_ddim_pipeline_matches_cpu(size):
    cpu_images, _ = diffusers_unet.sample("cpu", diffusers_unet.SIZES[size])
    torch_neuronx.clear_op_tracking()
    neuron_images, _ = diffusers_unet.sample("neuron", diffusers_unet.SIZES[size])
    assert torch_neuronx.get_fallback_ops() == {}
    side = diffusers_unet.SIZES[size].image
    assert neuron_images.shape == (diffusers_unet.SIZES[size].batch, 3, side, side)
    torch.testing.assert_close(neuron_images, cpu_images, rtol=1e-4, atol=5e-4)


@full
@pytest.mark.parametrize("model", ["unet", "dit"])
def test_diffusers_training_step_matches_cpu(model):
    if model == "unet":
        cpu = diffusers_unet.train_step("cpu", diffusers_unet.SIZES["tiny"])
        torch_neuronx.clear_op_tracking()
        neuron = diffusers_unet.train_step("neuron", diffusers_unet.SIZES["tiny"])
    else:
        cpu = diffusers_unet.dit_step("cpu")
        torch_neuronx.clear_op_tracking()
        neuron = diffusers_unet.dit_step("neuron")
    assert torch_neuronx.get_fallback_ops() == {}
    torch.testing.assert_close(neuron.loss, cpu.loss, rtol=1e-5, atol=1e-6)
    assert cpu.grads.keys() == neuron.grads.keys()
    # Relative to the largest gradient: the attention's key biases have zero gradients in exact
    # arithmetic (softmax ignores a shift shared by all keys), so both devices hold rounding noise.
    largest = max(g.abs().max().item() for g in cpu.grads.values())
    for name, grad in cpu.grads.items():
        torch.testing.assert_close(neuron.grads[name], grad, rtol=1e-4, atol=1e-5 * largest, msg=_named(name))
    # AdamW's first step divides each gradient by its own magnitude plus eps (1e-8): where a
    # gradient is near eps, its rounding noise moves the weight by a fraction of the learning rate.
    for name, weight in cpu.updated.items():
        torch.testing.assert_close(neuron.updated[name], weight, rtol=0, atol=2e-4, msg=_named(name))


@full
@pytest.mark.parametrize("bf16", [False, True], ids=["float32", "bfloat16"])
def test_trl_sft_trainer_matches_cpu(bf16):
    size = dataclasses.replace(trl_sft.SIZES["tiny"], steps=3)
    cpu = trl_sft.train("cpu", size, bf16=bf16)
    torch_neuronx.clear_op_tracking()
    neuron = trl_sft.train("neuron", size, bf16=bf16)
    assert (cpu.device, neuron.device) == ("cpu", "neuron")
    assert torch_neuronx.get_fallback_ops() == {}
    assert len(neuron.losses) == size.steps
    # bfloat16 autocast rounds every matmul's result to 8 bits of mantissa; the two devices' kernels
    # accumulate in different orders, so their losses differ by bfloat16 rounding, not float32's.
    tolerance = {"rtol": 2e-3, "atol": 2e-3} if bf16 else {"rtol": 1e-5, "atol": 1e-5}
    torch.testing.assert_close(torch.tensor(neuron.losses), torch.tensor(cpu.losses), **tolerance)
    torch.testing.assert_close(torch.tensor(neuron.grad_norms), torch.tensor(cpu.grad_norms), **tolerance)


def _import_timm():
    try:
        import timm
    except (ImportError, RuntimeError) as error:
        # PyPI's torchvision is a CUDA build; next to torch's CPU wheel its import raises RuntimeError.
        pytest.skip(f"timm does not import ({error}); install timm and a torchvision built for this torch")
    return timm


@full
@pytest.mark.parametrize("name", list(timm_models.MODELS))
def test_timm_model_forward_and_backward_match_cpu(name):
    _import_timm()
    compile = name == "resnet18"
    cpu = timm_models.run(name, "cpu", compile=compile)
    torch_neuronx.clear_op_tracking()
    neuron = timm_models.run(name, "neuron", compile=compile)
    assert torch_neuronx.get_fallback_ops() == {}
    # Training-mode batch norm over 4 images of 1x1 or 2x2 pixels in the last stages is ill-conditioned:
    # efficientnet_b0's float32 logits are 8.7e-4 from float64's on the CPU, 7.6e-4 on neuron.
    tolerance = 2e-3 if name == "efficientnet_b0" else 1e-4
    torch.testing.assert_close(neuron.logits, cpu.logits, rtol=tolerance, atol=tolerance)
    largest = max(g.abs().max().item() for g in cpu.grads.values())
    assert cpu.grads.keys() == neuron.grads.keys()
    for parameter, grad in cpu.grads.items():
        torch.testing.assert_close(
            neuron.grads[parameter], grad, rtol=0, atol=tolerance * largest, msg=_named(parameter)
        )
    if compile:
        torch.testing.assert_close(neuron.compiled_logits, cpu.compiled_logits, rtol=1e-4, atol=1e-5)
