"""The per-core generator: seeding, state, torch.Generator(device="neuron") (decision 11)."""

from __future__ import annotations

import pytest
import torch


def test_manual_seed_makes_random_ops_reproducible():
    torch.manual_seed(1234)
    first = (torch.rand(5, device="neuron"), torch.randn(3, device="neuron"))
    torch.manual_seed(1234)
    second = (torch.rand(5, device="neuron"), torch.randn(3, device="neuron"))
    for a, b in zip(first, second, strict=True):
        torch.testing.assert_close(a.cpu(), b.cpu(), rtol=0, atol=0)


def test_consecutive_draws_differ():
    torch.manual_seed(0)
    assert not torch.equal(torch.rand(8, device="neuron").cpu(), torch.rand(8, device="neuron").cpu())


def test_generator_object():
    generator = torch.Generator(device="neuron").manual_seed(7)
    a = torch.rand(4, device="neuron", generator=generator)
    generator.manual_seed(7)
    b = torch.rand(4, device="neuron", generator=generator)
    torch.testing.assert_close(a.cpu(), b.cpu(), rtol=0, atol=0)
    assert generator.device == torch.device("neuron", 0)


@pytest.mark.parametrize("seed", [2**63, 10894581523222963170, 2**64 - 1])
def test_seeds_of_2_to_the_63_or_more_draw(seed):
    # Seeds are uint64 (DTensor's RNG tracker draws them at random); the executables take int64.
    generator = torch.Generator(device="neuron").manual_seed(seed)
    a = torch.randn(4, device="neuron", generator=generator)
    generator.manual_seed(seed)
    torch.testing.assert_close(torch.randn(4, device="neuron", generator=generator).cpu(), a.cpu(), rtol=0, atol=0)
    assert generator.initial_seed() == seed
    # The top bit is part of the seed: the seed without it draws other values.
    generator.manual_seed(seed - 2**63)
    assert not torch.equal(torch.randn(4, device="neuron", generator=generator).cpu(), a.cpu())


def test_rng_state_round_trip():
    torch.neuron.manual_seed(3)
    state = torch.neuron.get_rng_state()
    assert state.dtype == torch.uint8 and state.numel() == 16
    a = torch.rand(6, device="neuron")
    torch.neuron.set_rng_state(state)
    b = torch.rand(6, device="neuron")
    torch.testing.assert_close(a.cpu(), b.cpu(), rtol=0, atol=0)


def test_initial_seed_and_offset_advances():
    torch.neuron.manual_seed(42)
    assert torch.neuron.initial_seed() == 42
    generator = torch.neuron.default_generators[0]
    offset = generator.get_offset()
    torch.rand(10, device="neuron")
    assert generator.get_offset() == offset + 12  # 10 draws, rounded up to whole Philox counters of 4


@pytest.mark.parametrize(
    ("state", "error", "message"),
    [
        (lambda: torch.zeros(16, dtype=torch.int32), TypeError, "RNG state must be a torch.ByteTensor"),
        # a device tensor's bytes were read as host memory: a segmentation fault (helper-62)
        (
            lambda: torch.zeros(16, dtype=torch.uint8, device="neuron"),
            TypeError,
            "RNG state must be a torch.ByteTensor",
        ),
        (lambda: torch.zeros(3, dtype=torch.uint8), RuntimeError, "RNG state is wrong size"),
        (
            lambda: torch.tensor([7] + [0] * 7 + [5] + [0] * 7, dtype=torch.uint8),
            RuntimeError,
            "offset must be a multiple of 4",
        ),
    ],
    ids=["int32", "on the device", "3 bytes", "offset 5"],
)
def test_set_rng_state_rejects_bad_states_with_cudas_errors(state, error, message):
    for set_state in (torch.neuron.set_rng_state, torch.Generator(device="neuron").set_state):
        with pytest.raises(error, match=f"^{message}$"):
            set_state(state())


def test_rng_state_of_a_seed_alone_or_not_contiguous_is_read_as_cuda_reads_it():
    seed_only = torch.tensor([7, 1, 0, 0, 0, 0, 0, 0], dtype=torch.uint8)
    torch.neuron.set_rng_state(seed_only)
    assert torch.neuron.initial_seed() == 263 and torch.neuron.default_generators[0].get_offset() == 0
    # torch.cuda.set_rng_state copies to contiguous memory; a strided view was read as raw bytes.
    state = torch.neuron.get_rng_state()
    strided = torch.stack([state, state], 1)[:, 0]
    torch.neuron.set_rng_state(strided)
    assert torch.equal(torch.neuron.get_rng_state(), state)
    with pytest.raises(RuntimeError, match="^RNG state must be contiguous$"):
        torch.Generator(device="neuron").set_state(strided)
    with pytest.raises(RuntimeError, match="^offset must be a multiple of 4$"):
        torch.Generator(device="neuron").set_offset(5)


def test_cores_have_independent_generators(two_cores):
    torch.neuron.manual_seed_all(5)
    a = torch.rand(4, device="neuron:0")
    b = torch.rand(4, device="neuron:1")
    torch.testing.assert_close(a.cpu(), b.cpu(), rtol=0, atol=0)  # same seed, same stream position
    torch.rand(4, device="neuron:1")
    assert torch.neuron.default_generators[1].get_offset() != torch.neuron.default_generators[0].get_offset()


def test_uniform_statistics():
    torch.manual_seed(0)
    x = torch.empty(20000, device="neuron").uniform_(-2, 3).cpu()
    assert x.min() >= -2 and x.max() < 3
    assert abs(x.mean().item() - 0.5) < 0.05
