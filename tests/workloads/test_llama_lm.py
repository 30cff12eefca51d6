"""A shorter run of the main job's Llama language model: Trainer on neuron against the CPU."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import torch_neuronx
from examples import llama_lm

SIZE = dataclasses.replace(llama_lm.SIZES["tiny"], steps=2, new_tokens=4)


@pytest.fixture(scope="module")
def tokenizer_and_data():
    text = llama_lm.corpus_text(SIZE.corpus_modules)
    tokenizer = llama_lm.train_tokenizer(text, SIZE.vocab)
    return tokenizer, llama_lm.TokenBlocks(tokenizer(text)["input_ids"], SIZE.seq_len)


def test_tokenizer_is_deterministic_and_round_trips(tokenizer_and_data):
    tokenizer, _ = tokenizer_and_data
    again = llama_lm.train_tokenizer(llama_lm.corpus_text(SIZE.corpus_modules), SIZE.vocab)
    assert again.get_vocab() == tokenizer.get_vocab()
    assert len(tokenizer) == SIZE.vocab
    source = "def f(x):\n    return x ** 2  # é\n"
    assert tokenizer.decode(tokenizer(source)["input_ids"]) == source


def test_trainer_on_neuron_matches_cpu(tokenizer_and_data):
    tokenizer, dataset = tokenizer_and_data
    cpu = llama_lm.train("cpu", SIZE, tokenizer, dataset)
    torch_neuronx.clear_op_tracking()
    neuron = llama_lm.train("neuron", SIZE, tokenizer, dataset)
    assert next(neuron.model.parameters()).device.type == "neuron"
    assert torch_neuronx.get_fallback_ops() == {}
    assert len(cpu.losses) == SIZE.steps
    torch.testing.assert_close(torch.tensor(neuron.losses), torch.tensor(cpu.losses), rtol=1e-5, atol=1e-5)
    for name, parameter in neuron.model.named_parameters():
        torch.testing.assert_close(
            parameter.detach().cpu(),
            cpu.model.get_parameter(name).detach(),
            rtol=1e-4,
            atol=1e-5,
            msg=lambda message, name=name: f"{name}: {message}",
        )
    greedy_cpu = llama_lm.generate(cpu.model.eval(), tokenizer, SIZE.new_tokens, compile_decoding=False)
    greedy_neuron = llama_lm.generate(neuron.model.eval(), tokenizer, SIZE.new_tokens, compile_decoding=False)
    assert greedy_neuron.tokens == greedy_cpu.tokens
