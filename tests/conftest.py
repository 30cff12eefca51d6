"""Shared fixtures. CPU PyTorch is the reference for every value (STYLE.md, principle 7)."""

from __future__ import annotations

import os
import zlib

import pytest
import torch

import torch_neuronx


@pytest.fixture(autouse=True)
def _seeded(request):
    """Seeds the random inputs of every test, as PyTorch's own TestCase does, so a failure reproduces.

    The seed derives from the test's id; ``TORCH_NEURONX_TEST_SEED`` shifts every seed, to sweep the
    tests over other random inputs (``TORCH_NEURONX_TEST_SEED=7 pytest tests/lowering``).
    """
    torch.manual_seed(zlib.crc32(request.node.nodeid.encode()) + int(os.environ.get("TORCH_NEURONX_TEST_SEED", "0")))


@pytest.fixture(autouse=True)
def _fresh_op_tracking():
    torch_neuronx.clear_op_tracking()
    yield


@pytest.fixture
def two_cores():
    if torch.neuron.device_count() < 2:
        pytest.skip("requires 2 NeuronCores")
