"""User errors get PyTorch's own messages; device faults surface at the next synchronization point."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings

import pytest
import torch


def test_mixed_neuron_and_cpu_tensors_raise_pytorch_error():
    x = torch.ones(3, device="neuron")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        x + torch.ones(3)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.mm(torch.ones(2, 2, device="neuron"), torch.ones(2, 2))


def test_mixed_cores_raise(two_cores):
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device.*neuron:1"):
        torch.ones(3, device="neuron:0") + torch.ones(3, device="neuron:1")


def test_cpu_scalar_tensors_mix_as_on_cuda():
    x = torch.ones(3, device="neuron")
    torch.testing.assert_close((x * torch.tensor(2.0)).cpu(), torch.full((3,), 2.0))


def test_shape_errors_are_pytorchs_own():
    # PyTorch's meta kernel for addmm words it "must have same reduction dim"; reworded as the CPU's.
    with pytest.raises(RuntimeError, match=r"^mat1 and mat2 shapes cannot be multiplied \(2x3 and 5x4\)"):
        torch.nn.functional.linear(torch.ones(2, 3, device="neuron"), torch.ones(4, 5, device="neuron"))
    # Elementwise ops' broadcasting errors are TensorIterator's, as on the CPU (see SHAPE_ERRORS).
    with pytest.raises(RuntimeError, match=r"The size of tensor a \(2\) must match the size of tensor b \(3\)"):
        torch.ones(2, device="neuron") + torch.ones(3, device="neuron")


def test_integer_division_by_zero_is_a_device_fault_raised_at_sync():
    x = torch.tensor([4, 5], device="neuron")
    y = torch.div(x, torch.tensor([1, 0], device="neuron"), rounding_mode="floor")
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        y.cpu()
    assert (x + 1).tolist() == [5, 6]


def test_a_launch_with_several_faults_raises_once():
    # One compiled executable, two integer divisions by zero: one fault, then the runtime is clean.
    def two_divisions(x, divisor):
        return torch.remainder(x // divisor, divisor)

    x, zero = torch.tensor([4, 5], device="neuron"), torch.tensor([0, 0], device="neuron")
    result = torch.compile(two_divisions, backend="neuron", fullgraph=True)(x, zero)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        result.cpu()
    assert (x + 1).tolist() == [5, 6]


@pytest.mark.parametrize("rounding_mode", ["floor", "trunc"])
def test_integer_division_of_an_empty_tensor_by_zero_divides_nothing(rounding_mode):
    empty = torch.arange(0, device="neuron")
    result = torch.div(empty, 0, rounding_mode=rounding_mode)
    assert result.cpu().shape == (0,)
    torch.testing.assert_close(torch.triu_indices(0, 0, device="neuron").cpu(), torch.triu_indices(0, 0))
    torch.testing.assert_close(torch.tril_indices(3, 0, device="neuron").cpu(), torch.tril_indices(3, 0))


def _run(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ, **env), check=False
    )


def test_launch_blocking_raises_at_the_op():
    code = (
        "import torch\n"
        "x = torch.tensor([4, 5], device='neuron')\n"
        "try:\n"
        "    torch.div(x, torch.tensor([1, 0], device='neuron'), rounding_mode='trunc')\n"
        "except RuntimeError as e:\n"
        "    print('raised at op:', 'ZeroDivisionError' in str(e))\n"
    )
    result = _run(code, NEURON_LAUNCH_BLOCKING="1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "raised at op: True"


def test_stack_trace_of_the_launch_is_recorded_on_request():
    code = (
        "import torch\n"
        "def faulty():\n"
        "    return torch.remainder(torch.tensor([3], device='neuron'), torch.tensor([0], device='neuron'))\n"
        "y = faulty()\n"
        "try:\n"
        "    torch.neuron.synchronize()\n"
        "except RuntimeError as e:\n"
        "    print('in faulty' if 'in faulty' in str(e) else str(e))\n"
    )
    result = _run(code, TORCH_NEURONX_ENABLE_STACK_TRACE="1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "in faulty"


def test_forked_child_raises_instead_of_hanging():
    code = (
        "import os, torch\n"
        "x = torch.ones(3, device='neuron')\n"
        "x.sum().item()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    try:\n"
        "        torch.zeros(2, device='neuron').add(1)\n"
        "    except RuntimeError as e:\n"
        "        print('child:', 'forked subprocess' in str(e) and torch.neuron._is_in_bad_fork(), flush=True)\n"
        "    os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
        "print('parent:', (x * 2).sum().item())\n"
    )
    result = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["child: True", "parent: 6.0"]


def test_reading_past_a_shrunk_storage_raises():
    x = torch.arange(4.0, device="neuron")
    x.untyped_storage().resize_(0)
    with pytest.raises(RuntimeError, match="requires a storage of 16 bytes, but its storage has 0 bytes"):
        x.cpu()
    with pytest.raises(RuntimeError, match="requires a storage of 16 bytes"):
        x + 1


def test_out_of_memory_in_an_op_raises_before_launching():
    with pytest.raises(torch.OutOfMemoryError, match="Tried to allocate 149.01 GiB"):
        torch.ones(200000, 1, device="neuron") @ torch.ones(1, 200000, device="neuron")
    assert torch.ones(10, device="neuron").sum().item() == 10.0


def _errors_on_cpu_and_neuron(make, synchronize: bool = False) -> tuple[str, str]:
    """The messages of the RuntimeErrors ``make("cpu")`` and ``make("neuron")`` raise (on neuron after
    a synchronisation when ``synchronize``: a device fault is raised there)."""
    with pytest.raises(RuntimeError) as on_cpu:
        make("cpu")
    with pytest.raises(RuntimeError) as on_neuron:
        make("neuron")
        if synchronize:
            torch.neuron.synchronize()
    return str(on_cpu.value), str(on_neuron.value)


UNCASTABLE_WRITES = {
    "mul_": lambda d: torch.arange(3, device=d).mul_(2.5),
    "add_scalar": lambda d: torch.ones(2, dtype=torch.long, device=d).add_(0.5),
    "sub_tensor": lambda d: torch.ones(2, dtype=torch.int32, device=d).sub_(torch.ones(2, device=d)),
    "bool_add_": lambda d: torch.ones(2, dtype=torch.bool, device=d).add_(1),
    "div_": lambda d: torch.ones(2, dtype=torch.long, device=d).div_(2),
    "add_out": lambda d: torch.add(torch.ones(2, device=d), 1, out=torch.empty(2, dtype=torch.long, device=d)),
    # Before CUDA's "bitwise_and_cuda" dtype refusal: TensorIterator checks the cast first.
    "iand_float": lambda d: torch.ones(2, dtype=torch.int32, device=d).__iand__(torch.ones(2, device=d)),
    "bitwise_or_out": lambda d: torch.bitwise_or(
        torch.ones(2, dtype=torch.int32, device=d), 1.5, out=torch.empty(2, dtype=torch.int32, device=d)
    ),
}


@pytest.mark.parametrize("case", UNCASTABLE_WRITES)
def test_in_place_and_out_results_that_cannot_be_cast_raise_as_on_cpu(case):
    """CPU's TensorIterator message, also where PyTorch's meta kernel words the error its own way."""
    with pytest.raises(RuntimeError) as on_cpu:
        UNCASTABLE_WRITES[case]("cpu")
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type") as on_neuron:
        UNCASTABLE_WRITES[case]("neuron")
    assert str(on_neuron.value) == str(on_cpu.value)


def _half(d, *shape):
    return torch.empty(*shape, dtype=torch.float16, device=d)


def _int(d):
    return torch.empty(0, dtype=torch.int32, device=d)


def _long(d):
    return torch.empty(0, dtype=torch.long, device=d)


def _int32_indices(d):
    return torch.empty(0, device=d), _int(d)


def _float_index(d):
    return torch.tensor([0.0], device=d)


# out= of another dtype than the result's, refused with the words of ATen's generated out= check
# (structured kernels, copy_arg) or of TensorIterator's same-dtype unary ops: device-independent code,
# so CUDA raises these too. Their Python meta kernels accepted the out= and wrote rounded values, or
# worded the error their own way ("dtype Float but got Half").
MISTYPED_OUTS = {
    "bmm": lambda d: torch.bmm(torch.ones(1, 2, 2, device=d), torch.ones(1, 2, 2, device=d), out=_half(d, 1, 2, 2)),
    "addmm": lambda d: torch.addmm(
        torch.ones(2, 2, device=d), torch.ones(2, 2, device=d), torch.ones(2, 2, device=d), out=_half(d, 2, 2)
    ),
    "baddbmm": lambda d: torch.baddbmm(
        torch.ones(1, 2, 2, device=d),
        torch.ones(1, 2, 2, device=d),
        torch.ones(1, 2, 2, device=d),
        out=_half(d, 1, 2, 2),
    ),
    "addmv": lambda d: torch.addmv(
        torch.ones(2, device=d), torch.ones(2, 2, device=d), torch.ones(2, device=d), out=_half(d, 2)
    ),
    "sort": lambda d: torch.sort(
        torch.ones(3, device=d), out=(_half(d, 3), torch.empty(3, dtype=torch.long, device=d))
    ),
    "tril": lambda d: torch.tril(torch.ones(2, 2, device=d), out=_half(d, 2, 2)),
    "index_add": lambda d: torch.index_add(
        torch.ones(3, device=d), 0, torch.tensor([0], device=d), torch.ones(1, device=d), out=_half(d, 3)
    ),
    "aminmax": lambda d: torch.aminmax(torch.ones(3, device=d), out=(_half(d, ()), _half(d, ()))),
    "linalg_cross": lambda d: torch.linalg.cross(torch.ones(3, device=d), torch.ones(3, device=d), out=_half(d, 3)),
    "mm": lambda d: torch.mm(torch.ones(2, 2, device=d), torch.ones(2, 2, device=d), out=_half(d, 2, 2)),
    "gelu": lambda d: torch._C._nn.gelu(torch.ones(3, device=d), out=_half(d, 3)),
    "conj_physical": lambda d: torch.conj_physical(torch.ones(3, device=d), out=_half(d, 3)),
    "amax": lambda d: torch.amax(torch.ones(3, device=d), 0, out=_half(d, ())),
    "cummax": lambda d: torch.cummax(
        torch.ones(3, device=d), 0, out=(_half(d, 3), torch.empty(3, dtype=torch.long, device=d))
    ),
    "take": lambda d: torch.take(torch.ones(3, device=d), torch.tensor([0], device=d), out=_half(d, 1)),
    "nan_to_num": lambda d: torch.nan_to_num(torch.ones(3, device=d), out=_half(d, 3)),
    "frexp": lambda d: torch.frexp(
        torch.ones(3, device=d), out=(_half(d, 3), torch.empty(3, dtype=torch.int32, device=d))
    ),
    "heaviside": lambda d: torch.heaviside(torch.ones(3, device=d), torch.ones(3, device=d), out=_half(d, 3)),
    "triangular_solve": lambda d: torch.triangular_solve(
        torch.ones(2, 1, device=d), torch.eye(2, device=d), out=(_half(d, 0), torch.empty(0, device=d))
    ),
    "kthvalue": lambda d: torch.kthvalue(
        torch.ones(3, device=d), 1, out=(_half(d, ()), torch.empty((), dtype=torch.long, device=d))
    ),
    "mode": lambda d: torch.mode(
        torch.ones(3, device=d), out=(_half(d, ()), torch.empty((), dtype=torch.long, device=d))
    ),
    "log_sigmoid": lambda d: torch._C._nn.log_sigmoid(torch.ones(3, device=d), out=_half(d, 3)),
    "index_select": lambda d: torch.index_select(
        torch.ones(3, device=d), 0, torch.tensor([0], device=d), out=_half(d, 1)
    ),
    "linalg_solve_triangular": lambda d: torch.linalg.solve_triangular(
        torch.eye(2, device=d), torch.ones(2, 1, device=d), upper=True, out=_half(d, 2, 1)
    ),
    "topk-long-values": lambda d: torch.topk(torch.ones(3, device=d), 1, out=(_long(d), _long(d))),
    "max-dim-long-values": lambda d: torch.max(torch.ones(3, device=d), 0, out=(_long(d), _long(d))),
    "max-unary-long": lambda d: torch.max(torch.ones(3, device=d), out=_long(d)),
    "gather-long": lambda d: torch.gather(torch.ones(3, device=d), 0, torch.tensor([0], device=d), out=_long(d)),
    "median-half-values": lambda d: torch.median(torch.ones(2, 3, device=d), 1, out=(_half(d, 0), _long(d))),
    "nanmedian-long-values": lambda d: torch.nanmedian(torch.ones(2, 3, device=d), 1, out=(_long(d), _long(d))),
    "searchsorted-float": lambda d: torch.searchsorted(
        torch.ones(3, device=d), torch.ones(2, device=d), out=torch.empty(0, device=d)
    ),
    "searchsorted-out_int32-long": lambda d: torch.searchsorted(
        torch.ones(3, device=d), torch.ones(2, device=d), out_int32=True, out=_long(d)
    ),
    "bucketize-half": lambda d: torch.bucketize(torch.ones(2, device=d), torch.ones(3, device=d), out=_half(d, 0)),
    # the indices of an out= pair must be int64 (they were written as int32 or float)
    "kthvalue-int32-indices": lambda d: torch.kthvalue(torch.ones(2, 3, device=d), 2, 1, out=_int32_indices(d)),
    "mode-int32-indices": lambda d: torch.mode(torch.ones(2, 3, device=d), 1, out=_int32_indices(d)),
    "median-int32-indices": lambda d: torch.median(torch.ones(2, 3, device=d), 1, out=_int32_indices(d)),
    "nanmedian-int32-indices": lambda d: torch.nanmedian(torch.ones(2, 3, device=d), 1, out=_int32_indices(d)),
    "cummax-int32-indices": lambda d: torch.cummax(torch.ones(2, 3, device=d), 1, out=_int32_indices(d)),
    "cummin-int32-indices": lambda d: torch.cummin(torch.ones(2, 3, device=d), 1, out=_int32_indices(d)),
    "topk-int32-indices": lambda d: torch.topk(torch.ones(2, 3, device=d), 1, out=_int32_indices(d)),
    # checkLinalgCompatibleDtype's words: an out= the result cannot be cast to.
    "cholesky_inverse": lambda d: torch.cholesky_inverse(torch.eye(2, device=d), out=_int(d)),
    "linalg_pinv": lambda d: torch.linalg.pinv(torch.eye(2, device=d), out=_int(d)),
    "orgqr": lambda d: torch.orgqr(torch.eye(2, device=d), torch.ones(1, device=d), out=_int(d)),
}

# Calls ATen refuses before any kernel (CPU and CUDA alike) that neuron computed or worded otherwise.
REFUSED_CALLS = {
    # ATen's words where PyTorch's meta kernels have their own (CPU and CUDA share these checks)
    "normal_-negative-std": lambda d: torch.empty(3, device=d).normal_(0, -1),
    "masked_fill-1d-value": lambda d: torch.ones(3, device=d).masked_fill(
        torch.ones(3, dtype=torch.bool, device=d), torch.ones(3, device=d)
    ),
    "index_fill_-1d-value": lambda d: torch.ones(3, device=d).index_fill_(
        0, torch.tensor([0], device=d), torch.ones(1, device=d)
    ),
    # checks ATen makes before the kernel's dtype dispatch: neuron named CUDA's kernel for neg, and
    # PyTorch's reference words isposinf's check its own way
    "neg-of-bool": lambda d: torch.neg(torch.tensor([True, False], device=d)),
    "neg_-of-bool": lambda d: torch.tensor([True], device=d).neg_(),
    "isposinf-of-complex": lambda d: torch.isposinf(torch.ones(2, dtype=torch.complex64, device=d)),
    "isneginf-of-complex": lambda d: torch.isneginf(torch.ones(2, dtype=torch.complex64, device=d)),
    # overlap checks ATen makes before resizing an out= (neuron resized it and computed, or resized
    # the input and then refused k)
    "index_select-into-expanded-out": lambda d: torch.index_select(
        torch.rand(3, 6, device=d), 1, torch.tensor([0, 1], device=d), out=torch.rand(1, 6, device=d).expand(2, 6)
    ),
    "kthvalue-into-its-input": lambda d: (lambda t: torch.kthvalue(t, 5, out=(t, torch.empty((), device=d).long())))(
        torch.randn(10, device=d)
    ),
    "arange-to-nan": lambda d: torch.arange(0, float("nan"), device=d),
    "arange-from-inf": lambda d: torch.arange(float("-inf"), 3, device=d),
    "matmul-long-out": lambda d: torch.matmul(
        torch.ones(2, 2, device=d), torch.ones(2, 2, device=d), out=torch.empty(2, 2, dtype=torch.long, device=d)
    ),
    "logsumexp-int-out": lambda d: torch.logsumexp(
        torch.ones(2, dtype=torch.int32, device=d), 0, out=torch.empty((), dtype=torch.int32, device=d)
    ),
    "heaviside-of-two-dtypes": lambda d: torch.heaviside(
        torch.ones(2, dtype=torch.float16, device=d), torch.ones(2, device=d)
    ),
    "sum-over-a-repeated-dim": lambda d: torch.sum(torch.ones(2, 3, device=d), dim=(1, -1)),
    "vector_norm-over-a-repeated-dim": lambda d: torch.linalg.vector_norm(torch.ones(2, 3, device=d), dim=(0, 0)),
    "masked_select-with-an-integer-mask": lambda d: torch.ones(2, device=d).masked_select(
        torch.ones(2, dtype=torch.uint8, device=d)
    ),
    # index and mask dtypes (JAX's TypeError or the meta kernels' words before)
    "index_select-float-index": lambda d: torch.index_select(torch.ones(3, device=d), 0, _float_index(d)),
    "gather-float-index": lambda d: torch.gather(torch.ones(3, device=d), 0, _float_index(d)),
    "index_add-float-index": lambda d: torch.index_add(
        torch.ones(3, device=d), 0, _float_index(d), torch.ones(1, device=d)
    ),
    "index_reduce-float-index": lambda d: torch.index_reduce(
        torch.ones(3, device=d), 0, _float_index(d), torch.ones(1, device=d), "prod"
    ),
    "index_copy-float-index": lambda d: torch.index_copy(
        torch.ones(3, device=d), 0, _float_index(d), torch.ones(1, device=d)
    ),
    "put-int32-index": lambda d: torch.ones(3, device=d).put(
        torch.tensor([0], dtype=torch.int32, device=d), torch.ones(1, device=d)
    ),
    "embedding-float-indices": lambda d: torch.nn.functional.embedding(_float_index(d), torch.ones(2, 3, device=d)),
    "where-int-condition": lambda d: torch.where(torch.tensor([1, 0], device=d), 1.0, 0.0),
    "masked_fill-long-mask": lambda d: torch.ones(2, device=d).masked_fill(torch.tensor([1, 0], device=d), 0.0),
    "masked_scatter-long-mask": lambda d: torch.ones(2, device=d).masked_scatter(
        torch.tensor([1, 0], device=d), torch.ones(2, device=d)
    ),
    # random ops' argument checks (the sample count, the categories, p), at the call
    "multinomial-no-samples": lambda d: torch.multinomial(torch.ones(3, device=d), 0),
    "multinomial-negative-samples": lambda d: torch.multinomial(torch.ones(3, device=d), -1),
    "multinomial-3-d": lambda d: torch.multinomial(torch.ones(2, 2, 2, device=d), 1),
    "multinomial-2**24+1-categories": lambda d: torch.multinomial(torch.ones(2**24 + 1, device=d), 1, True),
    "bernoulli_-nan-p": lambda d: torch.zeros(3, device=d).bernoulli_(float("nan")),
    "bernoulli-p-1.5": lambda d: torch.bernoulli(torch.zeros(3, device=d), 1.5),
    "native_dropout-p-1.5": lambda d: torch.native_dropout(torch.ones(3, device=d), 1.5, True),
    "sdpa-dropout-1.5": lambda d: torch.nn.functional.scaled_dot_product_attention(
        *(torch.ones(1, 1, 2, 4, device=d),) * 3, dropout_p=1.5
    ),
    # an attention mask that does not broadcast to (B, H, L, S): JAX's ValueError before
    "sdpa-mask-3x5": lambda d: _attention_with_mask(d, (3, 5)),
    "sdpa-mask-1x2x2x3": lambda d: _attention_with_mask(d, (1, 2, 2, 3)),
    "sdpa-mask-5x1x1": lambda d: _attention_with_mask(d, (5, 1, 1)),
    "sdpa-mask-2x1x1x2x3": lambda d: _attention_with_mask(d, (2, 1, 1, 2, 3)),
}


def _attention_with_mask(d, shape):
    query, key_value = torch.ones(1, 1, 2, 4, device=d), torch.ones(1, 1, 3, 4, device=d)
    mask = torch.zeros(shape, device=d)
    return torch.nn.functional.scaled_dot_product_attention(query, key_value, key_value, attn_mask=mask)


def test_index_tensors_of_a_float_dtype_raise_index_error_as_on_cpu():
    # JAX's TypeError ("Indexer must have integer or boolean type") before.
    message = "tensors used as indices must be long, int, byte or bool tensors"
    for device in ("cpu", "neuron"):
        with pytest.raises(IndexError, match=message):
            torch.ones(3, device=device).index_put((_float_index(device),), torch.tensor(1.0))


@pytest.mark.parametrize("compare", [torch.lt, torch.le, torch.gt, torch.ge])
@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex32, torch.uint32])
def test_ordered_comparisons_refuse_what_cudas_kernel_does_not_dispatch(compare, dtype):
    # Complex numbers have no order; the CPU and CUDA raise (neuron compared the real parts).
    values = torch.ones(2, dtype=dtype, device="neuron")
    with pytest.raises(NotImplementedError, match=f"\"compare_cuda\" not implemented for '{_ATEN_NAMES[dtype]}'"):
        compare(values, values)
    with pytest.raises(NotImplementedError):
        compare(values.cpu(), values.cpu())


_ATEN_NAMES = {torch.complex64: "ComplexFloat", torch.complex32: "ComplexHalf", torch.uint32: "UInt32"}


@pytest.mark.parametrize("case", REFUSED_CALLS)
def test_refused_calls_raise_as_on_cpu(case):
    on_cpu, on_neuron = _errors_on_cpu_and_neuron(REFUSED_CALLS[case])
    assert on_neuron == on_cpu


@pytest.mark.parametrize("op", [torch.logaddexp, torch.logaddexp2])
def test_logaddexp_of_integers_raises_cudas_error(op):
    ones = torch.ones(2, dtype=torch.int32, device="neuron")
    with pytest.raises(NotImplementedError, match=f"\"{op.__name__}_cuda\" not implemented for 'Int'"):
        op(ones, ones)


@pytest.mark.parametrize("case", MISTYPED_OUTS)
def test_outs_of_another_dtype_raise_as_on_cpu(case):
    on_cpu, on_neuron = _errors_on_cpu_and_neuron(MISTYPED_OUTS[case])
    assert on_neuron == on_cpu


def _small(d, dtype=torch.float32):
    return torch.zeros(3, device=d, dtype=dtype)


def _wide(d, shape=(2, 3), dtype=torch.float32):
    return torch.ones(shape, device=d, dtype=dtype)


# In-place ops whose result does not fit ``self``, operands that do not broadcast, and copies: each
# is refused with TensorIterator's message. Several of PyTorch's Python meta kernels resized ``self``
# to the broadcast shape instead (atan2_, clamp_, eq_ ...), so those calls returned a new shape.
SHAPE_ERRORS = {
    "add_": lambda d: _small(d).add_(_wide(d)),
    "mul_mismatch": lambda d: _small(d).mul_(_wide(d, (4,))),
    "atan2_": lambda d: _small(d).atan2_(_wide(d)),
    "hypot_": lambda d: _small(d).hypot_(_wide(d)),
    "remainder_": lambda d: _small(d).remainder_(_wide(d)),
    "xlogy_": lambda d: _small(d).xlogy_(_wide(d)),
    "clamp_": lambda d: _small(d).clamp_(_wide(d)),
    "clamp_max_": lambda d: _small(d).clamp_(max=_wide(d)),
    "eq_": lambda d: _small(d).eq_(_wide(d)),
    "bitwise_and_": lambda d: _small(d, torch.int32).bitwise_and_(_wide(d, dtype=torch.int32)),
    "heaviside_": lambda d: _small(d).heaviside_(_wide(d)),
    "lerp_": lambda d: _small(d).lerp_(_small(d), _wide(d)),
    "addcmul_": lambda d: _small(d).addcmul_(_wide(d), _small(d)),
    "masked_fill_": lambda d: _small(d).masked_fill_(_wide(d, dtype=torch.bool), 1.0),
    "add_operands": lambda d: _small(d) + _wide(d, (4,)),
    "sigmoid_backward": lambda d: torch.ops.aten.sigmoid_backward(_small(d), _wide(d, (4,))),
    "copy_mismatch": lambda d: _wide(d).copy_(_wide(d, (4,))),
    "copy_into_smaller": lambda d: _small(d).copy_(_wide(d)),
    "copy_from_host": lambda d: _wide(d).copy_(torch.ones(4)),
    "ldexp_": lambda d: torch.zeros(5, 1, device=d).ldexp_(torch.ones(5, 5, device=d)),
    "mul_out_aliasing_input": lambda d: (lambda x: torch.mul(x, torch.ones(5, 5, device=d), out=x))(
        torch.ones(5, 1, device=d)
    ),
    "index_add_source": lambda d: torch.zeros(3, 4, device=d).index_add_(
        0, torch.tensor([0], device=d), torch.ones(1, 5, device=d)
    ),
}


@pytest.mark.parametrize("case", SHAPE_ERRORS)
def test_shape_errors_raise_as_on_cpu(case):
    on_cpu, on_neuron = _errors_on_cpu_and_neuron(SHAPE_ERRORS[case])
    assert on_neuron == on_cpu


#: Argument errors PyTorch's meta kernels word otherwise (or generically: a negative topk k).
ARGUMENT_ERRORS = {
    "cat_sizes": lambda d: torch.cat([torch.zeros(2, 3, device=d), torch.zeros(2, 4, device=d)]),
    "cat_sizes_dim_1": lambda d: torch.cat([torch.zeros(2, 3, device=d), torch.zeros(4, 4, device=d)], 1),
    "lerp_end_dtype": lambda d: torch.lerp(torch.zeros(2, device=d), torch.ones(2, dtype=torch.half, device=d), 0.5),
    "lerp_weight_dtype": lambda d: torch.lerp(
        torch.zeros(2, device=d), torch.ones(2, device=d), torch.ones(2, dtype=torch.half, device=d)
    ),
    "topk_k_too_large": lambda d: torch.ones(2, device=d).topk(3),
    "topk_k_negative": lambda d: torch.ones(2, device=d).topk(-1),
    "repeat_negative": lambda d: torch.ones(2, 3, device=d).repeat(-1, 2),
    "repeat_negative_leading": lambda d: torch.ones(2, device=d).repeat(2, -1),
    # Computed: a complex weight skipped c10's conversion to the result's dtype.
    "lerp_complex_weight": lambda d: torch.lerp(torch.zeros(2, device=d), torch.ones(2, device=d), 0.5 + 1j),
    # PyTorch's meta looks the complex dtype up in a dict: KeyError(torch.int32) leaked.
    "eig_of_int": lambda d: torch.linalg.eig(torch.ones(3, 3, dtype=torch.int32, device=d)),
    "scatter_reduce_unknown": lambda d: torch.zeros(2, device=d).scatter_reduce(
        0, torch.tensor([0], device=d), torch.ones(1, device=d), "foo"
    ),
}


@pytest.mark.parametrize("case", ARGUMENT_ERRORS)
def test_argument_errors_raise_as_on_cpu(case):
    on_cpu, on_neuron = _errors_on_cpu_and_neuron(ARGUMENT_ERRORS[case])
    assert on_neuron == on_cpu


MIXED_DTYPE_MATMULS = {
    "mm": lambda d: torch.mm(torch.ones(1, 2, dtype=torch.int32, device=d), torch.ones(2, 1, device=d)),
    "matmul_bf16": lambda d: torch.ones(1, 2, device=d) @ torch.ones(2, 1, dtype=torch.bfloat16, device=d),
    "addmm": lambda d: torch.addmm(
        torch.ones(1, 1, dtype=torch.int64, device=d),
        torch.ones(1, 2, dtype=torch.int64, device=d),
        torch.ones(2, 1, device=d),
    ),
    "linear": lambda d: torch.nn.functional.linear(
        torch.ones(1, 2, dtype=torch.int32, device=d), torch.ones(1, 2, device=d)
    ),
    "addmm_mat1": lambda d: torch.addmm(
        torch.ones(1, 1, device=d), torch.ones(1, 2, dtype=torch.int32, device=d), torch.ones(2, 1, device=d)
    ),
    "mv": lambda d: torch.mv(torch.ones(2, 3, device=d), torch.ones(3, dtype=torch.int32, device=d)),
    "mv_matrix": lambda d: torch.mv(torch.ones(2, 3, dtype=torch.bfloat16, device=d), torch.ones(3, device=d)),
    "matmul_vector": lambda d: torch.ones(2, 3, device=d) @ torch.ones(3, dtype=torch.int64, device=d),
    "addmv": lambda d: torch.addmv(
        torch.ones(2, dtype=torch.int32, device=d), torch.ones(2, 3, device=d), torch.ones(3, device=d)
    ),
    "addbmm_self": lambda d: torch.addbmm(
        torch.ones(3, 6, dtype=torch.int32, device=d), torch.ones(2, 3, 4, device=d), torch.ones(2, 4, 6, device=d)
    ),
    "addbmm_batch1": lambda d: torch.addbmm(
        torch.ones(3, 6, device=d), torch.ones(2, 3, 4, dtype=torch.int32, device=d), torch.ones(2, 4, 6, device=d)
    ),
    "baddbmm": lambda d: torch.baddbmm(
        torch.ones(2, 3, 6, dtype=torch.int64, device=d), torch.ones(2, 3, 4, device=d), torch.ones(2, 4, 6, device=d)
    ),
}


def _float(d, *shape):
    return torch.ones(*shape, device=d)


def _bf16(d, *shape):
    return torch.ones(*shape, dtype=torch.bfloat16, device=d)


# Ops whose ATen kernels require one dtype (no promotion); neuron promoted and computed them.
UNPROMOTED_OPERANDS = {
    "index_put_": lambda d: _float(d, 4).index_put_((torch.tensor([0, 1], device=d),), _bf16(d, 2)),
    "index_copy_": lambda d: _float(d, 4).index_copy_(0, torch.tensor([0, 1], device=d), _bf16(d, 2)),
    "index_add_": lambda d: _float(d, 4).index_add_(0, torch.tensor([0, 1], device=d), _bf16(d, 2)),
    "put_": lambda d: _float(d, 4).put_(torch.tensor([0, 1], device=d), _bf16(d, 2)),
    "polar": lambda d: torch.polar(_float(d, 3), _bf16(d, 3)),
    "complex": lambda d: torch.complex(_float(d, 3), _bf16(d, 3)),
    "complex_half_and_float": lambda d: torch.complex(_float(d, 3), _float(d, 3).half()),
    "conv2d_bias": lambda d: torch.nn.functional.conv2d(_float(d, 1, 1, 4, 4), _float(d, 1, 1, 3, 3), _bf16(d, 1)),
    "cross_entropy_weight": lambda d: torch.nn.functional.cross_entropy(
        _float(d, 2, 3), torch.tensor([0, 1], device=d), weight=_bf16(d, 3)
    ),
    "nll_loss_int32_target": lambda d: torch.nn.functional.nll_loss(
        _float(d, 2, 3), torch.tensor([0, 1], dtype=torch.int32, device=d)
    ),
    "binary_cross_entropy_target": lambda d: torch.nn.functional.binary_cross_entropy(
        _float(d, 3) / 2, _bf16(d, 3) / 2
    ),
    "cdist": lambda d: torch.cdist(_float(d, 2, 3), _bf16(d, 2, 3)),
    "linalg_cross": lambda d: torch.linalg.cross(_float(d, 3), _bf16(d, 3)),  # a decomposition on neuron
}


@pytest.mark.parametrize("case", UNPROMOTED_OPERANDS)
def test_ops_without_promotion_refuse_two_dtypes_as_on_cpu(case):
    on_cpu, on_neuron = _errors_on_cpu_and_neuron(UNPROMOTED_OPERANDS[case])
    assert on_neuron == on_cpu


@pytest.mark.parametrize(
    "make_operands",
    [
        pytest.param(lambda d: (_float(d, 1, 1, 4, 4), _bf16(d, 1, 1, 3, 3)), id="weight"),
        pytest.param(lambda d: (_bf16(d, 1, 1, 4), _float(d, 1, 1, 3)), id="input"),
    ],
)
def test_convolution_of_two_dtypes_names_both_and_the_fix(make_operands):
    # The CPU's wording depends on its kernel (MKLDNN or not); neuron's is ATen's generic check.
    data, weight = make_operands("neuron")
    convolve = torch.nn.functional.conv2d if data.dim() == 4 else torch.nn.functional.conv1d
    with pytest.raises(
        RuntimeError, match=r"Input type \((float|c10::BFloat16)\) and weight type .* should be the same"
    ):
        convolve(data, weight)
    with pytest.raises(RuntimeError):
        convolve(data.cpu(), weight.cpu())


def _norm_operands(d, data, weight, bias, running):
    def make(dtype, size):
        return None if dtype is None else torch.rand(size, generator=torch.Generator().manual_seed(0)).to(d, dtype)

    return make(data, (2, 4, 3)), make(weight, 4), make(bias, 4), make(running, 4), make(running, 4)


@pytest.mark.parametrize("norm", ["layer_norm", "group_norm", "batch_norm"])
@pytest.mark.parametrize(
    "dtypes",
    [
        pytest.param((torch.float32, torch.bfloat16, None, torch.float32), id="float32-input-bf16-weight"),
        pytest.param((torch.float32, torch.float32, torch.bfloat16, torch.float32), id="bf16-bias"),
        pytest.param((torch.bfloat16, torch.float32, torch.bfloat16, torch.float32), id="mixed-with-bf16-bias"),
        pytest.param((torch.bfloat16, torch.bfloat16, torch.float32, torch.float32), id="bf16-weight-float32-bias"),
        pytest.param((torch.bfloat16, None, None, torch.float16), id="half-running-stats"),
        pytest.param((torch.bfloat16, torch.float32, torch.float32, torch.float32), id="allowed-mixed"),
        pytest.param((torch.float16, None, torch.float32, torch.float32), id="allowed-mixed-bias-only"),
    ],
)
def test_normalizations_take_the_cpu_s_parameter_dtypes(norm, dtypes):
    """ATen's mixed_data_type.h rule: parameters of the input's dtype, or all float32 with a 16-bit
    input (neuron promoted any mix). The CPU's "(CPU)" in its mixed-dtype message reads "(neuron)"."""

    def call(d):
        data, weight, bias, mean, var = _norm_operands(d, *dtypes)
        if norm == "layer_norm":
            return torch.nn.functional.layer_norm(data.transpose(1, 2), (4,), weight, bias)
        if norm == "group_norm":
            return torch.nn.functional.group_norm(data, 2, weight, bias)
        return torch.nn.functional.batch_norm(data, mean, var, weight, bias, training=True)

    try:
        expected = call("cpu")
    except RuntimeError as error:
        cpu_message = str(error).replace("(CPU)", "(neuron)")
        with pytest.raises(RuntimeError) as raised:
            call("neuron")
        assert str(raised.value).startswith(cpu_message)
    else:
        torch.testing.assert_close(call("neuron").cpu(), expected)


def _arange(d):
    return torch.arange(9.0, device=d)


# TensorIterator's and copy_'s memory-overlap rule: a written tensor and an input may be the same
# memory or disjoint, not partly the same. neuron computed these (as if the input were cloned).
OVERLAPPING_WRITES = {
    # TensorIterator checks overlap first, before the kernel refuses the dtype (shifts of floats)
    "ilshift_-of-floats": lambda d: (lambda x: x[:-1].__ilshift__(x[1:]))(torch.rand(3, device=d)),
    "copy_": lambda d: (lambda a: a[1:].copy_(a[:-1]))(_arange(d)),
    "add_": lambda d: (lambda a: a[1:].add_(a[:-1]))(_arange(d)),
    "add_transposed_self": lambda d: (lambda a: a.add_(a.t()))(_arange(d).reshape(3, 3)),
    "exp_out": lambda d: (lambda a: torch.exp(a[:-1], out=a[1:]))(_arange(d)),
    "addcmul_": lambda d: (lambda a: a[1:].addcmul_(a[:-1], a[1:]))(_arange(d)),
}

# The same memory, or disjoint parts of one storage: allowed.
ALIASED_WRITES = {
    "copy_self": lambda d: (lambda a: a.copy_(a))(_arange(d)),
    "copy_disjoint": lambda d: (lambda a: a[5:].copy_(a[:4]))(_arange(d)),
    "mul_self": lambda d: (lambda a: a.mul_(a))(_arange(d)),
    "add_out_self": lambda d: (lambda a: torch.add(a, 1, out=a))(_arange(d)),
    "clamp_interleaved": lambda d: (lambda a: a[::2].clamp_(min=a[1::2]))(_arange(d)[:8]),
}


@pytest.mark.parametrize("case", OVERLAPPING_WRITES)
def test_partly_overlapping_writes_raise_as_on_cpu(case):
    on_cpu, on_neuron = _errors_on_cpu_and_neuron(OVERLAPPING_WRITES[case])
    assert on_neuron == on_cpu
    assert on_cpu.startswith("unsupported operation: some elements of the input tensor")


@pytest.mark.parametrize("case", ALIASED_WRITES)
def test_writes_into_the_same_or_disjoint_memory_match_cpu(case):
    torch.testing.assert_close(ALIASED_WRITES[case]("neuron").cpu(), ALIASED_WRITES[case]("cpu"))


# Reductions the CPU refuses that neuron computed (zeros over an empty dimension, a std of integers).
REFUSED_REDUCTIONS = {
    "mode_empty": lambda d: torch.mode(torch.empty(3, 0, device=d), 1),
    "max_empty_dim": lambda d: torch.empty(3, 0, device=d).max(1),
    "min_empty_dim": lambda d: torch.empty(0, device=d).min(-1),
    "std_int": lambda d: torch.tensor([1, 5, 9], device=d).std(),
    "var_int": lambda d: torch.tensor([[1, 5, 9]], device=d).var(1),
    "argmax_bool": lambda d: torch.tensor([True, False], device=d).argmax(),
    "argmin_bool": lambda d: torch.tensor([[True, False]], device=d).argmin(1),
}


@pytest.mark.parametrize("case", REFUSED_REDUCTIONS)
def test_reductions_the_cpu_refuses_raise_as_on_cpu(case):
    def raised(d):
        with pytest.raises((RuntimeError, IndexError)) as error:
            REFUSED_REDUCTIONS[case](d)
        return type(error.value), str(error.value)

    assert raised("neuron") == raised("cpu")


MATRIX_VECTOR_SHAPE_ERRORS = {
    "mv": lambda d: torch.mv(torch.ones(2, 3, device=d), torch.ones(4, device=d)),
    "addmv": lambda d: torch.addmv(torch.ones(2, device=d), torch.ones(2, 3, device=d), torch.ones(4, device=d)),
    "dot": lambda d: torch.dot(torch.ones(3, device=d), torch.ones(4, device=d)),
    "vdot": lambda d: torch.vdot(torch.ones(3, device=d), torch.ones(4, device=d)),
}


@pytest.mark.parametrize("case", MATRIX_VECTOR_SHAPE_ERRORS)
def test_matrix_vector_shape_errors_read_as_on_cpu(case):
    on_cpu, on_neuron = _errors_on_cpu_and_neuron(MATRIX_VECTOR_SHAPE_ERRORS[case])
    assert on_neuron == on_cpu


@pytest.mark.parametrize("case", MIXED_DTYPE_MATMULS)
def test_matmul_of_two_dtypes_raises_as_on_cuda(case):
    """ATen does not promote matmul operands; neuron computed int32 @ float32 and truncated it. The
    words are the CPU's but for mm's, which are CUDA's (cuda/Blas.cpp: "mat1 and mat2")."""
    on_cpu, on_neuron = _errors_on_cpu_and_neuron(MIXED_DTYPE_MATMULS[case])
    assert on_neuron == on_cpu.replace("expected m1 and m2", "expected mat1 and mat2")


def _softmax_pair(d):
    return torch.randn(2, 3, device=d), torch.softmax(torch.randn(2, 3, device=d), 1)


def _linear_edges(d, dtype=torch.float32):
    return torch.linspace(0, 1, 5, device=d).to(dtype)


# Operands of two dtypes that the kernels read as one element type (data_ptr<scalar_t>, checkSameType):
# a probe over every OpInfo's first samples, one operand cast to bfloat16, found these computed on
# neuron where the CPU raises. The words are CUDA's (where the CPU's differ: the last three).
MIXED_DTYPE_OPERANDS = {
    "softmax_backward_output": (
        lambda d: torch.ops.aten._softmax_backward_data(
            *_softmax_pair(d)[:1], _softmax_pair(d)[1].bfloat16(), 1, torch.float32
        ),
        "expected scalar type Float but found BFloat16",
    ),
    "grid_sample_grid": (
        lambda d: torch.nn.functional.grid_sample(
            torch.ones(1, 1, 2, 2, device=d),
            torch.zeros(1, 1, 1, 2, dtype=torch.bfloat16, device=d),
            align_corners=False,
        ),
        "expected scalar type Float but found BFloat16",
    ),
    "weight_norm_g": (
        lambda d: torch._weight_norm(torch.ones(4, 4, device=d), torch.ones(4, 1, dtype=torch.bfloat16, device=d), 0),
        "expected scalar type Float but found BFloat16",
    ),
    "histogram_bins": (
        lambda d: torch.histogram(torch.rand(4, device=d), _linear_edges(d, torch.bfloat16)),
        "torch.histogramdd: input tensor and bins tensors should have the same dtype, but got input with dtype float "
        "and bins for dimension 0 with dtype c10::BFloat16",
    ),
    "histogram_weight": (
        lambda d: torch.histogram(torch.rand(4, device=d), 2, weight=torch.ones(4, dtype=torch.half, device=d)),
        "torch.histogramdd: if weight tensor is provided, input tensor and weight tensor should have the same dtype, "
        "but got input(float), and weight(c10::Half)",
    ),
    "log_softmax_backward_bfloat16_input": (
        lambda d: torch.ops.aten._log_softmax_backward_data(*_softmax_pair(d), 1, torch.bfloat16),
        "expected input and grad types to match, or input to be at::Half and grad to be at::Float",
    ),
    "softmax_backward_half_gradient": (
        lambda d: torch.ops.aten._softmax_backward_data(*(t.half() for t in _softmax_pair(d)), 1, torch.float32),
        "expected input and grad types to match, or input to be at::Half and grad to be at::Float",
    ),
    "embedding_bag_per_sample_weights": (
        lambda d: torch.nn.functional.embedding_bag(
            torch.tensor([0, 1], device=d),
            torch.ones(3, 2, device=d),
            torch.tensor([0], device=d),
            mode="sum",
            per_sample_weights=torch.ones(2, dtype=torch.bfloat16, device=d),
        ),
        "expected scalar type Float but found BFloat16",
    ),
}


@pytest.mark.parametrize("case", MIXED_DTYPE_OPERANDS)
def test_operands_of_two_dtypes_raise_as_on_cuda(case):
    make, message = MIXED_DTYPE_OPERANDS[case]
    with pytest.raises(RuntimeError, match=f"^{re.escape(message)}$"):
        make("neuron")
    if case in ("softmax_backward_output", "grid_sample_grid", "histogram_bins", "histogram_weight", "weight_norm_g"):
        with pytest.raises(RuntimeError, match=f"^{re.escape(message)}$"):
            make("cpu")


def test_softmax_backward_of_a_half_input_with_a_float_gradient_is_half_as_on_cuda():
    # CUDA's half_to_float softmax backward (SoftMax.cu); the CPU refuses it, so compare with float32.
    grad, output = _softmax_pair("cpu")
    expected = torch.ops.aten._softmax_backward_data(grad, output, 1, torch.float32).half()
    actual = torch.ops.aten._softmax_backward_data(grad.to("neuron"), output.to("neuron"), 1, torch.float16)
    assert actual.dtype == torch.float16
    torch.testing.assert_close(actual.cpu(), expected)


def test_solve_triangular_reads_b_in_as_dtype():
    # A float32 A with a bfloat16 B leaked JAX's "lax.triangular_solve requires arguments to have the
    # same dtypes"; ATen copies B into a result of A's dtype.
    a = torch.randn(3, 3).triu() + 3 * torch.eye(3)
    b = torch.randn(3, 2).bfloat16()
    expected = torch.linalg.solve_triangular(a, b, upper=True)
    torch.testing.assert_close(
        torch.linalg.solve_triangular(a.to("neuron"), b.to("neuron"), upper=True).cpu(), expected
    )


def _int8(d):
    return torch.zeros(3, dtype=torch.int8, device=d)


# Scalars c10 converts with checked_convert: an overflow raises instead of wrapping around.
OVERFLOWING_SCALARS = {
    "masked_fill": lambda d: _int8(d).masked_fill(torch.ones(3, dtype=torch.bool, device=d), 1000),
    "index_fill_": lambda d: _int8(d).index_fill_(0, torch.tensor([0], device=d), 1000),
    "scatter_value": lambda d: _int8(d).scatter(0, torch.tensor([0], device=d), -1000),
    "clamp_max": lambda d: _int8(d).clamp(max=1000),
    "clamp_min_": lambda d: _int8(d).clamp_min_(-1000),
    "threshold": lambda d: torch.nn.functional.threshold(_int8(d), 1, 1000),
    "masked_fill_complex": lambda d: torch.zeros(3, device=d).masked_fill(
        torch.ones(3, dtype=torch.bool, device=d), 1j
    ),
}


@pytest.mark.parametrize("case", OVERFLOWING_SCALARS)
def test_scalars_that_overflow_the_dtype_raise_as_on_cpu(case):
    # At the call, as on the CPU (the eager kernel checks its runtime scalars on the host).
    on_cpu, on_neuron = _errors_on_cpu_and_neuron(OVERFLOWING_SCALARS[case])
    assert "without overflow" in on_cpu
    assert on_neuron == on_cpu


@pytest.mark.parametrize("value", [1000, -129, float("nan"), float("inf")])
def test_an_overflowing_fill_leaves_the_tensor_unchanged(value):
    x = torch.tensor([1, 2, 3], dtype=torch.int8, device="neuron")
    with pytest.raises(RuntimeError, match="^value cannot be converted to type int8_t without overflow$"):
        x.masked_fill_(torch.tensor([True, False, True], device="neuron"), value)
    torch.testing.assert_close(x.cpu(), torch.tensor([1, 2, 3], dtype=torch.int8))
    x.masked_fill_(torch.tensor([True, False, True], device="neuron"), 127)  # the same executable, in range
    torch.testing.assert_close(x.cpu(), torch.tensor([127, 2, 127], dtype=torch.int8))


def test_a_compiled_constant_that_overflows_raises_when_compiled():
    clamp = torch.compile(lambda x: x.clamp(max=1000), backend="neuron")
    with pytest.raises(Exception, match="value cannot be converted to type int8_t without overflow"):
        clamp(torch.zeros(3, dtype=torch.int8, device="neuron"))


def test_scalars_that_fit_the_dtype_are_not_refused():
    x = torch.tensor([-5, 3, 120], dtype=torch.int8)
    mask = torch.tensor([True, False, True])
    expected = x.masked_fill(mask, -128).clamp(max=127)
    torch.testing.assert_close(x.to("neuron").masked_fill(mask.to("neuron"), -128).clamp(max=127).cpu(), expected)


def test_uniform_bounds_in_the_wrong_order_raise_at_the_call():
    with pytest.raises(
        RuntimeError, match=r"^uniform_ expects to return a \[from, to\) range, but found from=3 > to=-1"
    ):
        torch.empty(4, device="neuron").uniform_(3, -1)


@pytest.mark.parametrize("self_shape", [(1,), ()])
def test_addbmm_in_place_resizes_self_as_on_cpu(self_shape):
    """addbmm_'s CPU and CUDA kernels resize a ``self`` that broadcasts to the result (the only such
    in-place op in PyTorch's OpInfo database); the values are beta * broadcast(self) + alpha * sum."""
    x, a, b = torch.randn(self_shape), torch.randn(5, 3, 4), torch.randn(5, 4, 10)
    expected = x.clone().addbmm_(a, b, beta=0.5)
    actual = x.neuron().addbmm_(a.neuron(), b.neuron(), beta=0.5)
    torch.testing.assert_close(actual.cpu(), expected)


def test_in_place_op_that_broadcasts_within_self_still_works():
    x, other = torch.randn(2, 3), torch.randn(3)
    expected = x.clone().atan2_(other)
    torch.testing.assert_close(x.to("neuron").atan2_(other.to("neuron")).cpu(), expected)


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.ones(3, device="neuron").mean(dtype=torch.float64),
        lambda: torch.full((2,), 1.0, dtype=torch.float64, device="neuron"),
        lambda: torch.linspace(0, 1, 5, dtype=torch.float64, device="neuron"),
    ],
)
def test_float64_results_raise_type_error(make):
    with pytest.raises(TypeError, match="float64 \\(double\\) tensors are not supported"):
        make()


def test_generator_of_another_core_is_rejected(two_cores):
    generator = torch.Generator(device="neuron:0")
    with pytest.raises(RuntimeError, match="given the generator of neuron:0"):
        torch.rand(3, device="neuron:1", generator=generator)
    with pytest.raises(RuntimeError, match="Expected a 'neuron' device type for generator"):
        torch.rand(3, device="neuron", generator=torch.Generator())


def test_malformed_boolean_variable_fails_at_first_use_not_at_import():
    code = "import torch\nprint('imported')\ntorch.ones(2, device='neuron').sum()\n"
    result = _run(code, NEURON_LAUNCH_BLOCKING="2")
    assert result.stdout.strip() == "imported"
    assert "ValueError: NEURON_LAUNCH_BLOCKING='2' is not a boolean" in result.stderr


def test_sparse_coo_tensors_raise_naming_the_op_and_the_fix():
    dense = torch.eye(3)
    with pytest.raises(NotImplementedError, match=r"sparse COO tensors are not supported on neuron.*\.to_dense\(\)"):
        dense.to_sparse().to("neuron")
    assert (dense.to("neuron") + 1).cpu().tolist() == (dense + 1).tolist()


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor")
def test_quantized_tensors_raise_naming_the_op_and_the_fix():
    # CUDA has QuantizedCUDA kernels; neuron has none, so every op says so and how to do without.
    quantized = torch.quantize_per_tensor(torch.arange(4.0), 0.5, 0, torch.quint8)
    fix = r"quantized tensors are not supported on neuron\. .*\.dequantize\(\)"
    with pytest.raises(NotImplementedError, match="aten::_empty_affine_quantized.*" + fix):
        torch._empty_affine_quantized([2], scale=0.5, zero_point=0, dtype=torch.quint8, device="neuron")
    with pytest.raises(NotImplementedError, match=fix):
        quantized.to("neuron")
    torch.testing.assert_close(quantized.dequantize().to("neuron").cpu(), quantized.dequantize())


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_strided_nested_tensors_raise_naming_the_op_and_the_fix():
    # CUDA has NestedTensorCUDA kernels; neuron has none. Autograd reads a new nested tensor's sizes
    # from C++ that cannot raise, where the dispatcher's error aborted the process (test_autograd's
    # TestAutogradMultipleDispatch).
    fix = r"nested \(torch.strided layout\) tensors are not supported on neuron\. .*layout=torch.jagged"
    a = torch.arange(6.0).reshape(2, 3).requires_grad_(True)
    with pytest.raises(NotImplementedError, match="aten::_nested_tensor_from_tensor_list.*" + fix):
        torch.nested.as_nested_tensor([a.to("neuron"), a.to("neuron")])
    with pytest.raises(NotImplementedError, match="aten::_to_copy.*" + fix):
        torch.nested.nested_tensor([a.detach(), a.detach()]).to("neuron")
    nested = torch.nested.as_nested_tensor([a, a], device="neuron")  # made by the CPU's kernels
    assert nested._nested_tensor_size().tolist() == [[2, 3], [2, 3]]
    with pytest.raises(NotImplementedError, match="aten::sin.*" + fix):
        nested.sin()
    jagged = torch.nested.nested_tensor([a.detach(), a.detach()], layout=torch.jagged, device="neuron")
    torch.testing.assert_close(jagged.sin().values().cpu(), torch.cat([a, a]).detach().sin())


FILLS_THAT_OVERFLOW = {
    "fill_": lambda d: torch.zeros(3, dtype=torch.uint8, device=d).fill_(300),
    "full": lambda d: torch.full((2,), 300, dtype=torch.uint8, device=d),
    "full_like": lambda d: torch.full_like(torch.zeros(2, dtype=torch.int8, device=d), 200),
    "scalar_tensor": lambda d: torch.scalar_tensor(256, dtype=torch.uint8, device=d),
    "setitem": lambda d: torch.zeros(3, dtype=torch.uint8, device=d).__setitem__(1, 300),
}


@pytest.mark.parametrize("case", FILLS_THAT_OVERFLOW)
def test_fills_that_overflow_raise_at_the_call_as_on_cpu(case):
    # t[1] = 300 on uint8 makes a scalar_tensor, which wrapped to 44 without any error.
    on_cpu, on_neuron = _errors_on_cpu_and_neuron(FILLS_THAT_OVERFLOW[case])
    assert on_neuron == on_cpu
    assert "without overflow" in on_cpu


CPU_OUTS = {
    # A 0-dim CPU tensor is a runtime scalar where it is read; as an out= it must be refused.
    "sin_0d": lambda x: torch.sin(x[0, 0], out=torch.empty(())),
    "vector_norm_0d": lambda x: torch.linalg.vector_norm(x, out=torch.empty(())),
    "max_dim_0d": lambda x: torch.max(x[0], 0, out=(torch.empty(()), torch.empty((), dtype=torch.long))),
    "add_2d": lambda x: torch.add(x, x, out=torch.empty(4, 3)),
    "masked_select": lambda x: torch.masked_select(x, x > 0, out=torch.empty(0)),
}


@pytest.mark.parametrize("case", CPU_OUTS)
def test_out_on_another_device_raises_the_device_error(case):
    with pytest.raises(RuntimeError, match=r"^Expected all tensors to be on the same device, but got \w+ is on cpu"):
        CPU_OUTS[case](torch.randn(4, 3, device="neuron"))


NONZERO_OUTS = {
    "cpu_out": (torch.empty(0, dtype=torch.long), "expected self and out to be on the same device, but got out on cpu"),
    "float_out": (torch.empty(0), "Expected object of scalar type Long as out, but got float"),
    "int32_out": (torch.empty(0, dtype=torch.int32), "Expected object of scalar type Long as out, but got int"),
}


@pytest.mark.parametrize("case", NONZERO_OUTS)
def test_nonzero_out_misuse_raises_cudas_error(case):
    # nonzero_out_cuda's checks; nonzero(out=) used to reach the CPU fallback, which wrote a CPU out.
    out, message = NONZERO_OUTS[case]
    with pytest.raises(RuntimeError, match=f"^{message}"):
        torch.nonzero(torch.ones(2, 2, device="neuron"), out=out.to("neuron") if case != "cpu_out" else out)


@pytest.mark.filterwarnings("ignore:An output with one or more elements was resized")  # the next test's
@pytest.mark.parametrize("op", [torch.nonzero, lambda x, out: torch.masked_select(x, x != 0, out=out)])
def test_nonzero_and_masked_select_out_write_into_out(op):
    x = torch.tensor([[0.0, 1.5], [2.0, 0.0], [0.0, -3.0]])
    want = op(x, out=torch.empty(0, dtype=torch.long if op is torch.nonzero else torch.float32))
    out = torch.empty(5, dtype=want.dtype, device="neuron")
    assert op(x.to("neuron"), out=out) is out
    torch.testing.assert_close(out.cpu(), want, atol=0, rtol=0)


def test_masked_select_warns_when_it_resizes_a_non_empty_out_as_cuda():
    # CUDA's masked_select(out=) writes through the structured index_out, whose resize_output warns;
    # CUDA's nonzero(out=) resizes without a word (Nonzero.cu), as neuron's does.
    x = torch.tensor([[0.0, 1.5], [2.0, 0.0]], device="neuron")
    with pytest.warns(UserWarning, match=r"^An output with one or more elements was resized since it had shape \[5\]"):
        torch.masked_select(x, x != 0, out=torch.empty(5, device="neuron"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.masked_select(x, x != 0, out=torch.empty(0, device="neuron"))
        torch.nonzero(x, out=torch.empty(5, dtype=torch.long, device="neuron"))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bfloat16])
@pytest.mark.parametrize(
    "op",
    [
        lambda x, out: torch.sum(x, 0, out=out),
        lambda x, out: torch.prod(x, 0, out=out),
        lambda x, out: torch.cumsum(x, 0, out=out),
        lambda x, out: torch.cumprod(x, 0, out=out),
    ],
)
def test_reductions_compute_in_the_dtype_of_out_as_on_cpu(op, dtype):
    torch.manual_seed(0)
    x = torch.randn(4, 3) * 3
    expected = op(x, torch.empty(0, dtype=dtype))
    actual = op(x.to("neuron"), torch.empty(0, dtype=dtype, device="neuron")).cpu()
    torch.testing.assert_close(actual, expected)


FACTORIES_INTO_OUT = {
    "eye": lambda out: torch.eye(3, out=out),
    "eye-m": lambda out: torch.eye(2, 3, out=out),
    "full": lambda out: torch.full((2, 3), 2, out=out),
    "zeros": lambda out: torch.zeros(2, 3, out=out),
    "arange-float-step": lambda out: torch.arange(0, 4.5, 0.5, out=out),
    "hann_window": lambda out: torch.ops.aten.hann_window.out(5, out=out),
}


@pytest.mark.parametrize("dtype", [torch.int32, torch.bool, torch.bfloat16], ids=str)
@pytest.mark.parametrize("factory", FACTORIES_INTO_OUT)
def test_factories_make_their_values_in_the_dtype_of_out_as_on_cpu(factory, dtype):
    # A factory's out= form has no dtype argument: its functional form's default (float32) made
    # eye(3, out=int32_tensor) raise "result type Float can't be cast to the desired output type
    # Int", also as the first op of a process (torch.eye(2, dtype=torch.int32, device="neuron")).
    make = FACTORIES_INTO_OUT[factory]
    try:
        expected = make(torch.empty(0, dtype=dtype))
    except RuntimeError as refused:
        with pytest.raises(type(refused)):
            make(torch.empty(0, dtype=dtype, device="neuron"))
        return
    torch.testing.assert_close(make(torch.empty(0, dtype=dtype, device="neuron")).cpu(), expected)


def test_integer_addcdiv_error_is_atens_message():
    cpu, neuron = _errors_on_cpu_and_neuron(lambda d: torch.addcdiv(*[torch.arange(1, 4, device=d)] * 3))
    assert neuron == cpu


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int32, torch.bool, torch.float32])
@pytest.mark.parametrize("scales", [{"beta": 2.5}, {"alpha": 1.5}, {"beta": 1j, "alpha": 1.5}, {"alpha": 1j}])
def test_addr_scales_the_result_cannot_take_raise_atens_error(dtype, scales):
    # torch/_refs' addr, the meta kernel, says "cannot safely convert <class 'float'> to Int".
    def call(device):
        vector = torch.ones(3, dtype=dtype, device=device)
        return torch.addr(torch.ones(3, 3, dtype=dtype, device=device), vector, vector, **scales)

    if dtype.is_floating_point and not any(isinstance(value, complex) for value in scales.values()):
        torch.testing.assert_close(call("neuron").cpu(), call("cpu"))
        return
    cpu, neuron = _errors_on_cpu_and_neuron(call)
    assert neuron == cpu


@pytest.mark.parametrize(
    "call",
    [
        lambda x, i: x.clone().fill_(2 + 1j),
        lambda x, i: torch.full((2,), 1 + 1j, dtype=x.dtype, device=x.device),
        lambda x, i: torch.threshold(x, 1 + 1j, 2),
        lambda x, i: x.index_fill(0, i, 2),  # builds the executable the next call may reuse
        lambda x, i: x.index_fill(0, i, 1 + 1j),
        lambda x, i: x.clone().index_fill_(0, i, 1 + 0j),
    ],
    ids=["fill_", "full", "threshold", "index_fill-real", "index_fill", "index_fill_-zero-imaginary"],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
def test_complex_scalars_for_real_results_raise_as_on_cpu(call, dtype):
    # c10 converts a complex Scalar to a real type only when its imaginary part is zero; index_fill
    # refuses any complex value first. Neuron dropped the imaginary part, a wrong value.
    def make(device):
        return call(torch.zeros(3, dtype=dtype, device=device), torch.tensor([0, 2], device=device))

    try:
        expected = make("cpu")
    except RuntimeError as error:
        with pytest.raises(RuntimeError) as raised:
            make("neuron")
        assert str(raised.value) == str(error)
        return
    torch.testing.assert_close(make("neuron").cpu(), expected)


@pytest.mark.parametrize("op", [torch.complex, torch.polar])
@pytest.mark.parametrize(
    "dtypes", [(torch.int8, torch.int8), (torch.float32, torch.int32), (torch.bool, torch.float32)]
)
def test_complex_parts_that_are_not_floating_point_raise_atens_error(op, dtypes):
    # The Python meta kernel asserts about one part; ATen names both parts' dtypes.
    cpu, neuron = _errors_on_cpu_and_neuron(lambda d: op(*(torch.ones(2, dtype=t, device=d) for t in dtypes)))
    assert neuron == cpu


@pytest.mark.parametrize(
    "call", [torch.clamp, torch.Tensor.clamp, torch.Tensor.clamp_], ids=["clamp", "Tensor.clamp", "clamp_"]
)
def test_clamp_without_bounds_raises_atens_runtime_error(call):
    # torch/_refs' clamp, the meta kernel, raises ValueError in its own words.
    cpu, neuron = _errors_on_cpu_and_neuron(lambda d: call(torch.ones(3, device=d)))
    assert neuron == cpu


@pytest.mark.parametrize("call", [torch.add, torch.sub, torch.Tensor.add_], ids=["add", "sub", "add_"])
def test_float_alpha_for_integers_raises_atens_runtime_error(call):
    # torch/_refs' add and sub, the meta kernels, raise ValueError in their own words.
    cpu, neuron = _errors_on_cpu_and_neuron(lambda d: call(torch.ones(3, dtype=torch.int32, device=d), 1, alpha=1.5))
    assert neuron == cpu


@pytest.mark.parametrize("op", [torch.neg, torch.floor, torch.ceil, torch.trunc, torch.sign])
@pytest.mark.parametrize(("dtype", "out_dtype"), [(torch.int64, torch.float32), (torch.float32, torch.complex64)])
def test_same_dtype_unary_out_of_another_dtype_raises_as_cpu(op, dtype, out_dtype):
    # ATen's build_borrowing_unary_op: every operand has one dtype; an out= of another is no cast.
    cpu, neuron = _errors_on_cpu_and_neuron(
        lambda d: op(torch.ones(2, dtype=dtype, device=d), out=torch.empty(0, dtype=out_dtype, device=d))
    )
    assert neuron == cpu


@pytest.mark.parametrize("op", [torch.floor, torch.ceil, torch.trunc])
def test_rounding_of_complex_raises_not_implemented_as_cpu(op):
    messages = []
    for device in ("cpu", "neuron"):
        with pytest.raises(NotImplementedError) as raised:
            op(torch.ones(2, dtype=torch.complex64, device=device))
        messages.append(str(raised.value))
    assert messages[1] == messages[0]


@pytest.mark.parametrize("call", [torch.round, lambda x: torch.round(x, decimals=2), torch.Tensor.round_])
def test_round_of_complex_raises_not_implemented_as_cpu_and_cuda(call):
    # Neuron rounded each part (test_ops' test_dtypes of _refs.round: "worked but not listed").
    for device in ("cpu", "neuron"):
        with pytest.raises(NotImplementedError, match="not implemented for 'ComplexFloat'"):
            call(torch.ones(2, dtype=torch.complex64, device=device))


@pytest.mark.parametrize("op", [torch.all, torch.any])
@pytest.mark.parametrize("out_dtype", [torch.float32, torch.int32])
def test_all_any_into_a_non_bool_out_raises_as_cpu(op, out_dtype):
    cpu, neuron = _errors_on_cpu_and_neuron(
        lambda d: op(torch.ones(3, 4, device=d), 1, out=torch.empty(0, dtype=out_dtype, device=d))
    )
    assert neuron == cpu


@pytest.mark.parametrize(
    ("dtype", "out_dtype"),
    [
        (torch.complex64, torch.complex64),
        (torch.complex64, torch.float32),
        (torch.float32, torch.float32),
        (torch.int32, torch.float32),
        (torch.float32, torch.complex64),
        (torch.complex64, torch.int32),
    ],
)
def test_abs_out_follows_atens_dtype_rule(dtype, out_dtype):
    # ATen: a complex input's magnitude into its real or its own dtype; others into their own only.
    x = torch.tensor([1, -2, 3], dtype=dtype)
    results = []
    for device in ("cpu", "neuron"):
        out = torch.empty(0, dtype=out_dtype, device=device)
        try:
            results.append(torch.abs(x.to(device), out=out).cpu())
        except RuntimeError as error:
            results.append(str(error))
    if isinstance(results[0], str):
        assert results[1] == results[0]
    else:
        torch.testing.assert_close(results[1], results[0])


@pytest.mark.parametrize(
    ("dtype", "alpha"),
    [(torch.bool, 1.5), (torch.float32, True), (torch.float32, 1j), (torch.int64, 1j)],
    ids=["bool-float", "float-bool", "float-complex", "int-complex"],
)
def test_alpha_of_a_kind_the_result_cannot_take_raises_as_cpu(dtype, alpha):
    # ATen's alpha_check; torch/_refs' add checks the integer case only, in its own words.
    cpu, neuron = _errors_on_cpu_and_neuron(
        lambda d: torch.add(*[torch.ones(3, dtype=dtype, device=d)] * 2, alpha=alpha)
    )
    assert neuron == cpu


def test_in_place_abs_of_complex_raises_as_cpu():
    cpu, neuron = _errors_on_cpu_and_neuron(lambda d: torch.ones(2, dtype=torch.complex64, device=d).abs_())
    assert neuron == cpu
    x = torch.tensor([-1.5, 2.0])
    torch.testing.assert_close(x.to("neuron").abs_().cpu(), x.abs_())


@pytest.mark.parametrize(
    "call",
    [
        lambda d: torch.linalg.eigh(
            torch.eye(3, device=d), out=(torch.empty(7, 7, device=d), torch.empty(7, 7, device=d))
        ),
        lambda d: torch.add(torch.ones(3, device=d), 1, out=torch.empty(2, device=d)),
    ],
    ids=["eigh", "add"],
)
def test_resizing_a_non_empty_out_warns_once_per_output_as_on_cpu(call):
    # Python meta kernels warn too, in their own words; only ATen's warning may reach the user.
    messages = []
    for device in ("cpu", "neuron"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call(device)
        # The CPU's warnings end in "(Triggered internally at .../Resize.cpp:30.)".
        messages.append(sorted(str(warning.message).split(" (Triggered internally")[0] for warning in caught))
    assert messages[1] == messages[0]


@pytest.mark.parametrize(
    "call",
    [
        lambda d: torch.linalg.eigh(
            torch.eye(3, device=d), out=(torch.empty(0, device=d), torch.empty(0, device=d).int())
        ),
        lambda d: torch.linalg.slogdet(
            torch.eye(3, device=d), out=(torch.empty(0, device=d), torch.empty(0, device=d).long())
        ),
        lambda d: torch.linalg.cholesky(torch.eye(3, device=d), out=torch.empty(0, dtype=torch.int16, device=d)),
        lambda d: torch.linalg.det(torch.eye(3, dtype=torch.complex64, device=d), out=torch.empty(0, device=d)),
    ],
    ids=["eigh", "slogdet", "cholesky", "det"],
)
def test_linalg_out_of_a_dtype_the_result_cannot_take_raises_atens_error(call):
    # ATen's checkLinalgCompatibleDtype: "Expected out tensor to have dtype float, but got int instead".
    cpu, neuron = _errors_on_cpu_and_neuron(call)
    assert neuron == cpu


def _floats(d):
    return torch.arange(8.0, device=d)


def _longs(d):
    return torch.arange(8, device=d)


def _pair(d):
    return torch.tensor([0, 1], device=d)


#: Writes that overlap an index, source or input argument, which ATen refuses in code CPU and CUDA
#: share (MemoryOverlap.cpp's assert_no_overlap in TensorAdvancedIndexing.cpp and cat's meta); the
#: lowering read every input before writing, so each gave a value.
ARGUMENT_OVERLAPPING_WRITES = {
    "index_add_-source": lambda d: (lambda x: x.index_add_(0, _pair(d), x[1:3]))(_floats(d)),
    "index_add_-itself": lambda d: (lambda x: x.index_add_(0, torch.arange(8, device=d), x))(_floats(d)),
    "index_add_-index": lambda d: (lambda x: x.index_add_(0, x[:2], x[:2].clone()))(_longs(d)),
    "index_copy_-source": lambda d: (lambda x: x.index_copy_(0, _pair(d), x[1:3]))(_floats(d)),
    "index_copy-out": lambda d: (lambda x: torch.index_copy(x[:4], 0, _pair(d), x[4:6], out=x[2:6]))(_floats(d)),
    "index_reduce_-source": lambda d: (lambda x: x.index_reduce_(0, _pair(d), x[1:3], "amax"))(_floats(d)),
    "index_fill_-index": lambda d: (lambda x: x.index_fill_(0, x[:2], 7))(_longs(d)),
    "scatter_-source": lambda d: (lambda x: x.scatter_(0, _pair(d), x[1:3]))(_floats(d)),
    "scatter_-value-index": lambda d: (lambda x: x.scatter_(0, x[:2], 5))(_longs(d)),
    "scatter_add_-source": lambda d: (lambda x: x.scatter_add_(0, _pair(d), x[1:3]))(_floats(d)),
    "scatter_reduce_-source": lambda d: (lambda x: x.scatter_reduce_(0, _pair(d), x[1:3], "sum"))(_floats(d)),
    "put_-source": lambda d: (lambda x: x.put_(_pair(d), x[1:3]))(_floats(d)),
    "put_-index": lambda d: (lambda x: x.put_(x[:2], x[:2].clone()))(_longs(d)),
    "index_put_-values": lambda d: (lambda x: x.index_put_((_pair(d),), x[1:3]))(_floats(d)),
    "index_put_-accumulate": lambda d: (lambda x: x.index_put_((_pair(d),), x[1:3], accumulate=True))(_floats(d)),
    "index_put_-index": lambda d: (lambda x: x.index_put_((x[:2],), x[:2].clone()))(_longs(d)),
    "setitem": lambda d: (lambda x: x.__setitem__(_pair(d), x[1:3]))(_floats(d)),
    "gather-out-self": lambda d: (lambda x: torch.gather(x, 0, _pair(d), out=x[:2]))(_floats(d)),
    "index_select-out-self": lambda d: (lambda x: torch.index_select(x, 0, _pair(d), out=x[:2]))(_floats(d)),
    "index_select-out-index": lambda d: (lambda x: torch.index_select(x[2:].clone(), 0, x[:2], out=x[:2]))(_longs(d)),
    "take-out-self": lambda d: (lambda x: torch.take(x, _pair(d), out=x[:2]))(_floats(d)),
    "masked_select-out-self": lambda d: (lambda x: torch.masked_select(x, x > 5, out=x[:2]))(_floats(d)),
    "cat-out": lambda d: (lambda x: torch.cat([x[:3], x[3:]], out=x))(_floats(d)),
    "cat-out-is-an-input": lambda d: (lambda x: torch.cat([x[:4]], out=x[:4]))(_floats(d)),
    "stack-out": lambda d: (lambda x: torch.stack([x[:2], x[2:4]], out=x[:4].view(2, 2)))(_floats(d)),
}


@pytest.mark.parametrize("case", ARGUMENT_OVERLAPPING_WRITES)
def test_writes_overlapping_an_argument_raise_as_on_cpu(case):
    on_cpu, on_neuron = _errors_on_cpu_and_neuron(ARGUMENT_OVERLAPPING_WRITES[case])
    assert on_neuron == on_cpu
    assert on_neuron.startswith("unsupported operation: some elements of the input tensor and the written-to tensor")


#: Writes ATen allows beside those: gather's out= may be its index exactly, and disjoint views.
ALLOWED_WRITES = {
    "gather-out-is-the-index": lambda d: (lambda x: (torch.gather(x[2:].clone(), 0, x[:2], out=x[:2]), x)[1])(
        _longs(d)
    ),
    "gather-out-disjoint": lambda d: (lambda x: (torch.gather(x[:4], 0, _pair(d), out=x[4:6]), x)[1])(_floats(d)),
    "stack-out-disjoint": lambda d: (lambda x: (torch.stack([x[:2], x[2:4]], out=x[4:].view(2, 2)), x)[1])(_floats(d)),
    "index_add_-disjoint-views": lambda d: (lambda x: (x[:4].index_add_(0, _pair(d), x[4:6]), x)[1])(_floats(d)),
}


@pytest.mark.parametrize("case", ALLOWED_WRITES)
def test_writes_aten_allows_compute_as_on_cpu(case):
    torch.testing.assert_close(ALLOWED_WRITES[case]("neuron").cpu(), ALLOWED_WRITES[case]("cpu"))


@pytest.mark.parametrize("op", [torch.cat, torch.stack])
def test_cat_into_an_out_the_inputs_cannot_be_cast_to_raises_atens_type_error(op):
    """cat's structured meta raises TypeError (TORCH_CHECK_TYPE), stack writes through cat; PyTorch's
    meta kernels raised a RuntimeError cast error."""
    for device in ("cpu", "neuron"):
        out = torch.empty(1, 2, dtype=torch.long, device=device)
        inputs = [torch.ones(2, device=device)] if op is torch.stack else [torch.ones(1, 2, device=device)]
        with pytest.raises(
            TypeError, match=r"^torch.cat\(\): input types can't be cast to the desired output type Long$"
        ):
            op(inputs, out=out)


#: Dims past the tensor's rank that PyTorch's meta kernels let through (or fail on internally):
#: the lowerings wrapped them onto another dimension and returned its values.
OUT_OF_RANGE_DIMS = {
    "softmax": lambda d: torch.ones(2, 3, device=d).softmax(2),
    "log_softmax-negative": lambda d: torch.ones(2, 3, device=d).log_softmax(-3),
    "sort": lambda d: torch.ones(2, 3, device=d).sort(2),
    "sort-of-0-dim": lambda d: torch.tensor(1.0, device=d).sort(1),
    "index_reduce_": lambda d: torch.zeros(3, device=d).index_reduce_(
        1, torch.tensor([0], device=d), torch.ones(1, device=d), "amax"
    ),
    "index_select": lambda d: torch.ones(2, 3, device=d).index_select(2, torch.tensor([0], device=d)),
    "index_fill": lambda d: torch.ones(2, 3, device=d).index_fill(2, torch.tensor([0], device=d), 1.0),
    "unsqueeze": lambda d: torch.ones(2, 3, device=d).unsqueeze(3),
}


@pytest.mark.parametrize("case", OUT_OF_RANGE_DIMS)
def test_an_out_of_range_dim_raises_as_cpu(case):
    with pytest.raises(IndexError) as cpu_error:
        OUT_OF_RANGE_DIMS[case]("cpu")
    with pytest.raises(IndexError) as neuron_error:
        OUT_OF_RANGE_DIMS[case]("neuron")
    assert str(neuron_error.value) == str(cpu_error.value)


def test_an_out_of_range_dim_raises_in_a_compiled_graph():
    compiled = torch.compile(lambda x: x.softmax(2), backend="neuron")
    with pytest.raises(
        IndexError, match=r"^Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"
    ):
        compiled(torch.ones(2, 3, device="neuron"))


@pytest.mark.parametrize(
    "make",
    [
        lambda d: torch.cat([torch.tensor(1.0, device=d)]),
        lambda d: torch.cat([torch.ones(2, device=d), torch.tensor(1.0, device=d)]),
        lambda d: torch.cat([torch.tensor(1.0, device=d)], out=torch.empty(0, device=d)),
    ],
    ids=["first", "second", "out"],
)
def test_cat_of_a_zero_dim_tensor_raises_atens_error(make):
    # PyTorch's Python meta kernel failed with "IndexError: list assignment index out of range".
    with pytest.raises(RuntimeError) as cpu_error:
        make("cpu")
    with pytest.raises(RuntimeError) as neuron_error:
        make("neuron")
    assert str(neuron_error.value) == str(cpu_error.value)


#: out= calls whose out tensor has one element where the result has four.
_RESIZED_OUTS = {
    "add": lambda a, out: torch.add(a, a, out=out),
    "linalg_inv": lambda a, out: torch.linalg.inv(a, out=out),
    "linalg_inv_ex": lambda a, out: torch.linalg.inv_ex(a, out=(out, torch.empty(0, dtype=torch.int, device=a.device))),
    "linalg_cholesky": lambda a, out: torch.linalg.cholesky(a, out=out),
}


@pytest.mark.parametrize("op", list(_RESIZED_OUTS))
def test_resizing_a_non_empty_out_warns_once_at_the_callers_line(op):
    # A C++ meta kernel's own resize warning reached Python only after the call, past the kernel's
    # filter: linalg.inv(out=) warned twice (upstream test_inv_errors_and_warnings).
    expected = _RESIZED_OUTS[op](torch.eye(2) * 2, torch.empty(1))
    out = torch.empty(1, device="neuron")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = _RESIZED_OUTS[op](torch.eye(2, device="neuron") * 2, out)
    assert [str(w.message).split(" since")[0] for w in caught] == ["An output with one or more elements was resized"]
    assert caught[0].filename == __file__
    torch.testing.assert_close(out.cpu(), expected[0] if isinstance(expected, tuple) else expected)
    assert (result[0] if isinstance(result, tuple) else result).data_ptr() == out.data_ptr()


_CASTABLE = "Expected {0} to be safely castable from ComplexFloat dtype, but got {0} with dtype Int"


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda a, i, c: torch.linalg.eig(a, out=(i, c)), "torch.linalg.eig: " + _CASTABLE.format("eigenvalues")),
        (lambda a, i, c: torch.linalg.eig(a, out=(c, i)), "torch.linalg.eig: " + _CASTABLE.format("eigenvectors")),
        (lambda a, i, c: torch.linalg.eigvals(a, out=i), "torch.linalg.eigvals: " + _CASTABLE.format("eigenvalues")),
    ],
    ids=["eig_values", "eig_vectors", "eigvals"],
)
def test_eig_out_of_a_narrower_dtype_raises_atens_words(call, message):
    # ATen's checkLinalgCompatibleDtype names the output; neuron said "Expected out tensor to have dtype".
    for device in ("cpu", "neuron"):
        tensors = (torch.randn(3, 3), torch.empty(0, dtype=torch.int), torch.empty(0, dtype=torch.complex64))
        with pytest.raises(RuntimeError, match=f"^{re.escape(message)}$"):
            call(*(t.to(device) for t in tensors))


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool, torch.complex64], ids=str)
@pytest.mark.parametrize("non_floating", ["both", "x1", "x2"])
def test_cdist_of_non_floating_tensors_raises_cdist_impls_check(dtype, non_floating):
    # Distance.cpp checks each operand before any kernel, on CPU and CUDA; neuron named CUDA's
    # kernel instead, and for a float x1 and an integer x2 said "expected scalar type Float".
    a, f = torch.ones(2, 2, dtype=dtype), torch.ones(2, 2)
    x1, x2 = {"both": (a, a), "x1": (a, f), "x2": (f, a)}[non_floating]
    with pytest.raises(RuntimeError) as expected:
        torch.cdist(x1, x2)
    with pytest.raises(RuntimeError, match=f"^{re.escape(str(expected.value))}$"):
        torch.cdist(x1.to("neuron"), x2.to("neuron"))


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int16], ids=str)
def test_embedding_bag_indices_of_another_dtype_raise_cudas_check(dtype):
    # PyTorch's Python meta kernel said "expected indices to be long or int, got Char".
    weight, indices = torch.randn(10, 3, device="neuron"), torch.tensor([1, 2, 4], dtype=dtype, device="neuron")
    message = (
        "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; but got "
        f"torch.{ {torch.int8: 'Char', torch.uint8: 'Byte', torch.int16: 'Short'}[dtype] }Tensor instead "
        "(while checking arguments for embedding_bag_cuda)"
    )
    with pytest.raises(RuntimeError, match=f"^{re.escape(message)}$"):
        torch.nn.functional.embedding_bag(indices, weight, torch.tensor([0], device="neuron"))


def test_a_lowerings_argument_error_carries_no_jax_note():
    # JAX notes "For simplicity, JAX has removed its internal frames ..." on errors raised while it
    # traces; the error is the op's.
    log_probs = torch.rand(0, 2, 4, device="neuron")
    targets = torch.zeros(2, 3, dtype=torch.long, device="neuron")
    with pytest.raises(RuntimeError, match="^log_probs tensor must not be empty$") as error:
        torch.nn.functional.ctc_loss(log_probs, targets, torch.tensor([0, 0]), torch.tensor([0, 0]))
    assert not any("JAX" in note for note in getattr(error.value, "__notes__", []))
