"""Shared fixtures. CPU PyTorch is the reference for every value (STYLE.md, principle 7)."""

from __future__ import annotations

import pytest
import torch

import torch_neuronx


@pytest.fixture(autouse=True)
def _fresh_op_tracking():
    torch_neuronx.clear_op_tracking()
    yield


@pytest.fixture
def two_cores():
    if torch.neuron.device_count() < 2:
        pytest.skip("requires 2 NeuronCores")
