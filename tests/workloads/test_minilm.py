"""A shorter run of the main job's all-MiniLM-L6-v2 embeddings: neuron against CPU."""

from __future__ import annotations

import torch

import torch_neuronx
from examples import minilm_embeddings

SENTENCES = minilm_embeddings.SENTENCES[:5]


def test_embeddings_match_cpu():
    cpu = minilm_embeddings.embed(SENTENCES, "cpu")
    torch_neuronx.clear_op_tracking()
    neuron = minilm_embeddings.embed(SENTENCES, "neuron")
    assert torch_neuronx.get_fallback_ops() == {}
    cosine = torch.nn.functional.cosine_similarity(cpu, neuron, dim=1)
    assert cosine.min().item() >= 0.9999
    torch.testing.assert_close(neuron, cpu, atol=1e-4, rtol=1e-4)
    assert minilm_embeddings.nearest_neighbours(neuron) == minilm_embeddings.nearest_neighbours(cpu)
