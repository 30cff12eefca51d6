"""A shorter run of the main job's digits CNN: neuron against CPU."""

from __future__ import annotations

import torch_neuronx
from examples import digits_cnn


def test_training_matches_cpu_step_for_step():
    cpu = digits_cnn.train("cpu", epochs=1)
    torch_neuronx.clear_op_tracking()
    neuron = digits_cnn.train("neuron", epochs=1)
    assert torch_neuronx.get_fallback_ops() == {}
    assert len(neuron.losses) == len(cpu.losses)
    for step, (got, want) in enumerate(zip(neuron.losses, cpu.losses, strict=True)):
        assert abs(got - want) <= 1e-4 * max(1.0, abs(want)), f"step {step}: neuron {got}, cpu {want}"
    assert abs(neuron.test_accuracy - cpu.test_accuracy) <= 0.01
