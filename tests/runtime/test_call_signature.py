"""The C++ call signature's typed descriptions (csrc/runtime/NeuronCallSignature.h): what a cache
miss sees of each argument, and the key that tells calls apart."""

from __future__ import annotations

import pytest
import torch

from torch_neuronx.runtime import arguments

aten = torch.ops.aten


def test_tensor_views_share_the_slot_of_their_storage():
    base = torch.zeros(4, 6, device="neuron")
    call = arguments.call_signature(aten.add.Tensor).describe((base[1:, 2:], base.t()), {"alpha": 2})
    first, second, alpha = call.arguments
    assert (first.slot, first.sizes, first.strides, first.offset) == (0, (3, 4), (6, 1), 8)
    assert first.offset_scalar == 0  # shorter than its storage: its offset is runtime scalar 0
    assert (second.slot, second.sizes, second.strides, second.offset) == (0, (6, 4), (1, 6), 0)
    assert second.offset_scalar == -1  # spans its storage: offset 0 is the only one, a constant
    assert isinstance(alpha, arguments.NumberArg) and (alpha.index, alpha.type_name) == (1, "int")
    (slot,) = call.slots
    assert slot.nbytes == 4 * 6 * 4 and call.buffer_count == int(slot.has_buffer)
    assert (call.scalar_count, call.device) == (2, 0)


def test_every_kind_of_argument_is_described():
    x = torch.ones(3, device="neuron")
    host = torch.tensor(2.0)
    add = arguments.call_signature(aten.add.Tensor).describe((x, host), {})
    assert isinstance(add.arguments[1], arguments.HostScalarArg)
    assert (add.arguments[1].index, add.arguments[1].wrapped) == (0, False)
    assert isinstance(add.arguments[2], arguments.StaticArg) and add.arguments[2].value == 1  # alpha's default

    foreach = arguments.call_signature(aten._foreach_add.ScalarList).describe(([x, x], [1.0, 2]), {})
    tensors, scalars = foreach.arguments
    assert isinstance(tensors, arguments.TensorListArg) and [t.slot for t in tensors.items] == [0, 0]
    assert isinstance(scalars, arguments.NumberListArg) and scalars.indices == (0, 1)

    generator = torch.Generator(device="neuron")
    bernoulli = arguments.call_signature(aten.bernoulli.p).describe((x, 0.5), {"generator": generator})
    assert isinstance(bernoulli.arguments[2], arguments.GeneratorArg)


def test_key_tells_views_dtypes_and_number_types_apart():
    signature = arguments.call_signature(aten.add.Tensor)
    x = torch.zeros(4, 4, device="neuron")

    def key(*args):
        return signature.prepare(args, {})[0]

    y = torch.ones(4, 4, device="neuron")
    assert key(x, x) == key(y, y)  # the same layout of other storages
    assert key(x, x) != key(x, y)  # one slot, or two
    assert key(x, x) != key(x, x.t())
    assert key(x, 1) != key(x, 1.0)
    assert key(x, 1.0) == key(x, 2.5)  # a number is a runtime input: its value is not in the key
    assert key(x, x) != key(x.int(), x.int())
    # A view's offset is a runtime input; where views of one storage sit relative to each other is not.
    assert key(x[0], y[0]) == key(x[3], y[1])
    assert key(x[0], x[1]) == key(x[2], x[3])
    assert key(x[0], x[1]) != key(x[0], x[2])
    assert key(x[0], x[0]) != key(x[0], x[1])
    assert key(x[0], y[0]) != key(x[:, 0], y[0])


def test_a_static_number_only_uint64_holds_reaches_the_op():
    # A Scalar holds uint64 values (c10::Scalar): the key refused them ("does not fit in int64")
    # where the op computes (a float arange) or raises c10's conversion error (an integer one).
    expected = torch.arange(0, 2**63, 2**60, dtype=torch.float32)
    torch.testing.assert_close(torch.arange(0, 2**63, 2**60, dtype=torch.float32, device="neuron").cpu(), expected)
    # Past 2**63 the bounds count in double, as the CPU's kernel does (the lowering's int64 wrapped:
    # the last element came out -9.2e18).
    for call in (
        lambda d: torch.arange(0, 2**63 + 2**62, 2**62, dtype=torch.float32, device=d),
        lambda d: torch.arange(2**63, 0, -(2**61), dtype=torch.float32, device=d),
        lambda d: torch.linspace(0, 2**64 - 1, 3, device=d),
    ):
        torch.testing.assert_close(call("neuron").cpu(), call("cpu"))
    for call in (
        lambda: torch.arange(0, 2**63, device="neuron"),
        lambda: torch.arange(0, 2**63, 2**60, device="neuron"),
    ):
        with pytest.raises(RuntimeError, match="^value cannot be converted to type int64_t without overflow$"):
            call()
    with pytest.raises(RuntimeError, match="^invalid size, possible overflow\\?$"):
        torch.arange(0, 1e20, device="neuron")


def test_numbers_are_checked_at_every_call_that_can_change_them():
    # A number at its default is a constant of the executable, checked when it is built; a runtime
    # number is checked at each call, though the executable is the same.
    x = torch.ones(3, dtype=torch.int8, device="neuron")
    overflow = "^value cannot be converted to type int8_t without overflow$"
    torch.testing.assert_close(torch.add(x, x).cpu(), torch.full((3,), 2, dtype=torch.int8))
    torch.testing.assert_close(torch.add(x, x, alpha=3).cpu(), torch.full((3,), 4, dtype=torch.int8))
    for _ in range(2):
        with pytest.raises(RuntimeError, match=overflow):
            torch.add(x, x, alpha=1000)
        with pytest.raises(RuntimeError, match="^For integral input tensors, argument alpha must not be a floating"):
            torch.add(x, x, alpha=1.0)
        # A static argument's check refuses the call each time, compiling nothing.
        with pytest.raises(RuntimeError, match="^value cannot be converted to type int64_t without overflow$"):
            torch.arange(0, 2**63, device="neuron")
