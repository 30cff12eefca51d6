"""Shared fixtures of the torch.compile tests."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    """Each test compiles from an empty Dynamo cache and leaves none behind."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()
