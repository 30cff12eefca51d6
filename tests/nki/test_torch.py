"""NKI kernels on neuron tensors: direct calls in eager, ``torch_neuronx.nki_op`` in eager, compiled
graphs and autograd, in-place kernels, and bad input. CPU PyTorch is the reference."""

from __future__ import annotations

import warnings

import pytest
import torch

import nki
import nki.isa as nisa
import nki.language as nl
import torch_neuronx
from torch_neuronx import nki_op


@nki.jit
def exp_kernel(x, out):
    tile = nl.load(x[0:128])
    nl.store(out[0:128], value=nl.exp(tile))
    return out


@nki.jit
def add_kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    ix = nl.program_id(0) * 128 + nl.arange(128)[:, None]
    iy = nl.arange(a.shape[1])[None, :]
    nl.store(out[ix, iy], value=nl.load(a[ix, iy]) + nl.load(b[ix, iy]))
    return out


def test_direct_call_writes_the_output_argument():
    x = torch.randn(128, 4)
    out = torch.empty(128, 4, device="neuron")
    assert exp_kernel(x.to("neuron"), out) is out
    torch.testing.assert_close(out.cpu(), x.exp())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_direct_call_with_a_grid_returns_a_new_tensor(dtype):
    a, b = torch.randn(256, 64, dtype=dtype), torch.randn(256, 64, dtype=dtype)
    out = add_kernel[2](a.to("neuron"), b.to("neuron"))
    assert out.device == torch.device("neuron", 0) and out.dtype == dtype
    torch.testing.assert_close(out.cpu(), a + b)


def test_a_kernel_traces_once_and_its_executable_is_cached():
    from nki import framework

    kernel = nki.jit(exp_kernel.fn)
    x, y, out = (
        torch.randn(128, 4, device="neuron"),
        torch.randn(128, 4, device="neuron"),
        torch.zeros(128, 4, device="neuron"),
    )
    before = len(framework._cache)
    kernel(x, out)
    kernel(y, out)
    assert len(kernel.traces.entries) == 1
    assert len(framework._cache) == before + 1
    torch.testing.assert_close(out.cpu(), y.cpu().exp())


def test_a_broken_rule_raises_before_anything_runs():
    from nki import framework

    @nki.jit
    def loads_all(x, out):
        nl.store(out, value=nl.load(x))

    x, out = torch.randn(256, 4, device="neuron"), torch.empty(256, 4, device="neuron")
    before = len(framework._cache)
    with pytest.raises(ValueError, match="err_num_partition_exceed_arch_limit") as raised:
        loads_all(x, out)
    assert "nl.store(out, value=nl.load(x))" in str(raised.value)
    assert len(framework._cache) == before


def test_cpu_tensor_names_the_kernel_and_argument():
    with pytest.raises(RuntimeError, match=r"NKI kernel 'exp_kernel': argument 'out' is on cpu"):
        exp_kernel(torch.randn(128, 4, device="neuron"), torch.empty(128, 4))


def test_unsupported_dtype_names_the_kernel_and_argument():
    with pytest.raises(TypeError, match=r"NKI kernel 'add_kernel': argument 'b' is torch.int64, which NKI does not"):
        add_kernel(torch.ones(128, 4, device="neuron"), torch.ones(128, 4, dtype=torch.int64, device="neuron"))


def test_tensors_on_two_cores_are_refused(two_cores):
    with pytest.raises(RuntimeError, match="its tensors are on different NeuronCores"):
        add_kernel(torch.ones(128, 4, device="neuron:0"), torch.ones(128, 4, device="neuron:1"))


def test_the_process_stays_usable_after_a_failing_kernel():
    @nki.jit
    def wants_wide(a):
        assert a.shape[1] == 512, f"kernel wants 512 columns, got {a.shape[1]}"
        return a

    with pytest.raises(AssertionError, match="wants 512 columns") as raised:
        wants_wide(torch.ones(128, 4, device="neuron"))
    assert any("while tracing NKI kernel 'wants_wide'" in note for note in raised.value.__notes__)
    out = add_kernel(torch.ones(128, 4, device="neuron"), torch.ones(128, 4, device="neuron"))
    torch.testing.assert_close(out.cpu(), torch.full((128, 4), 2.0))


@nki_op("nki_tests::exp", mutates_args={})
def nki_exp(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    exp_kernel(x, out)
    return out


def _exp_backward(ctx, grad):
    (y,) = ctx.saved_tensors
    return grad * y


def _exp_setup(ctx, inputs, output):
    ctx.save_for_backward(output)


nki_exp.register_autograd(_exp_backward, setup_context=_exp_setup)


def test_nki_op_in_eager_and_autograd():
    x = torch.randn(128, 4)
    xn = x.to("neuron").requires_grad_()
    y = nki_exp(xn)
    y.sum().backward()
    torch.testing.assert_close(y.detach().cpu(), x.exp())
    torch.testing.assert_close(xn.grad.cpu(), x.exp())


def test_nki_op_compiles_into_one_executable():
    x = torch.randn(128, 4)
    before = len(torch_neuronx.get_dynamo_metrics())
    compiled = torch.compile(lambda t: nki_exp(t * 2) + 1, backend="neuron", fullgraph=True)
    torch.testing.assert_close(compiled(x.to("neuron")).cpu(), (x * 2).exp() + 1)
    graphs = torch_neuronx.get_dynamo_metrics()[before:]
    assert len(graphs) == 1 and not graphs[0]["eager_fallback"]


def test_nki_op_compiles_without_reading_fake_tensors_data_pointers():
    # The aliasing check skips fake tensors, which have no storage (helper-60: PyTorch warned
    # "Accessing the data pointer of FakeTensor is deprecated" on every compile).
    x = torch.randn(128, 3)
    compiled = torch.compile(lambda t: nki_exp(t - 1), backend="neuron", fullgraph=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.testing.assert_close(compiled(x.to("neuron")).cpu(), (x - 1).exp())


def test_nki_op_trains_under_compile():
    x = torch.randn(128, 4)
    xn = x.to("neuron").requires_grad_()
    torch.compile(lambda t: nki_exp(t).sum(), backend="neuron", fullgraph=True)(xn).backward()
    torch.testing.assert_close(xn.grad.cpu(), x.exp())


@nki.jit
def scaled_add_inplace(a, b_out):
    """b_out += 2 * a (an in-place kernel: it writes its argument)."""
    for t in nl.affine_range(a.shape[0] // 128):
        rows = slice(t * 128, (t + 1) * 128)
        sum_tile = nl.ndarray((128, a.shape[1]), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=sum_tile, data=nl.load(a[rows]), op0=nl.multiply, operand0=2.0)
        nl.store(b_out[rows], value=nl.add(sum_tile, nl.load(b_out[rows])))
    return b_out


@nki_op("nki_tests::scaled_add_", mutates_args={"b"})
def scaled_add_(a: torch.Tensor, b: torch.Tensor) -> None:
    scaled_add_inplace(a, b)


@pytest.mark.parametrize("mode", ["eager", "compile"])
def test_in_place_nki_op(mode):
    a, b = torch.randn(128, 8), torch.randn(128, 8)
    an, bn = a.to("neuron"), b.to("neuron")

    def fn(a, b):
        scaled_add_(a, b)
        return b * 1

    run = fn if mode == "eager" else torch.compile(fn, backend="neuron", fullgraph=True)
    result = run(an, bn)
    torch.testing.assert_close(bn.cpu(), b + 2 * a)
    torch.testing.assert_close(result.cpu(), b + 2 * a)


def test_compiled_in_place_nki_op_on_a_view():
    a, big = torch.randn(128, 8), torch.randn(256, 8)
    bign = big.to("neuron")

    def fn(a, big):
        scaled_add_(a, big[128:])
        return big.sum(0)

    result = torch.compile(fn, backend="neuron", fullgraph=True)(a.to("neuron"), bign)
    expected = big.clone()
    expected[128:] += 2 * a
    torch.testing.assert_close(bign.cpu(), expected)
    torch.testing.assert_close(result.cpu(), expected.sum(0))


@nki_op("nki_tests::scaled_add_returning", mutates_args={"b"})
def scaled_add_returning(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The kernel returns the argument it wrote; a custom op's output may not alias an input, so the
    op returns a copy."""
    return scaled_add_inplace(a, b)


def test_nki_op_returning_its_mutated_argument():
    a, b = torch.randn(128, 8), torch.randn(128, 8)
    bn = b.to("neuron")
    out = scaled_add_returning(a.to("neuron"), bn)
    torch.testing.assert_close(out.cpu(), b + 2 * a)
    torch.testing.assert_close(bn.cpu(), b + 2 * a)
    assert out.data_ptr() != bn.data_ptr()


# The vendor's blog example, reconstructed: one kernel computing sin and cos, registered as an op
# with two outputs and a backward, used in eager, autograd and torch.compile.
@nki.jit
def sin_cos_kernel(x):
    sin_out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    cos_out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        tile = nl.load(x[i * 128 : (i + 1) * 128])
        nl.store(sin_out[i * 128 : (i + 1) * 128], value=nl.sin(tile))
        nl.store(cos_out[i * 128 : (i + 1) * 128], value=nl.cos(tile))
    return sin_out, cos_out


@nki_op("nki_tests::sin_cos", mutates_args={})
def sin_cos(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return sin_cos_kernel(x)


def _sin_cos_setup(ctx, inputs, output):
    ctx.save_for_backward(*output)


def _sin_cos_backward(ctx, grad_sin, grad_cos):
    sin, cos = ctx.saved_tensors
    return grad_sin * cos - grad_cos * sin


sin_cos.register_autograd(_sin_cos_backward, setup_context=_sin_cos_setup)


@pytest.mark.parametrize("mode", ["eager", "compile"])
def test_sin_cos_example(mode):
    x = torch.randn(256, 16)
    xn = x.to("neuron").requires_grad_()

    def fn(t):
        s, c = sin_cos(t)
        return s * c

    run = fn if mode == "eager" else torch.compile(fn, backend="neuron", fullgraph=True)
    result = run(xn)
    result.sum().backward()
    torch.testing.assert_close(result.detach().cpu(), x.sin() * x.cos())
    torch.testing.assert_close(xn.grad.cpu(), torch.cos(2 * x))


def test_numpy_call_runs_on_the_device_and_simulate_on_the_cpu():
    import numpy as np

    a = np.random.default_rng(0).standard_normal((128, 8)).astype(np.float32)
    np.testing.assert_allclose(add_kernel(a, a), 2 * a)
    np.testing.assert_allclose(nki.simulate(add_kernel)(a, a), 2 * a)
    cpu = torch.from_numpy(a)
    torch.testing.assert_close(nki.simulate(add_kernel)(cpu, cpu), 2 * cpu)


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.randn(1, 8).expand(128, 8),
        lambda: torch.randn(128, 8, requires_grad=True),
    ],
    ids=["expanded", "leaf requiring grad"],
)
def test_simulation_writes_back_only_the_arguments_a_kernel_writes(make):
    # helper-60: every torch argument was copied back, so read-only inputs raised.
    a = make()
    torch.testing.assert_close(nki.simulate(add_kernel)(a, a), 2 * a.detach())
    x, out = torch.randn(128, 4), torch.zeros(128, 4)
    assert nki.simulate(exp_kernel)(x, out) is out
    torch.testing.assert_close(out, x.exp())


def test_simulation_mode_runs_cpu_tensors_on_the_host():
    simulated = nki.jit(add_kernel, mode="simulation")
    a = torch.randn(128, 8)
    result = simulated(a, a)
    assert result.device.type == "cpu"
    torch.testing.assert_close(result, 2 * a)


def test_direct_kernel_call_inside_compile_says_to_use_nki_op():
    compiled = torch.compile(lambda a: add_kernel(a, a), backend="neuron", fullgraph=True)
    with pytest.raises(Exception, match="register the function that calls it as an op with torch_neuronx.nki_op"):
        compiled(torch.ones(128, 4, device="neuron"))


def test_a_written_argument_may_not_share_memory_with_another():
    a = torch.ones(128, 8, device="neuron")
    with pytest.raises(RuntimeError, match="writes argument 'b_out', which shares memory with argument 'a'"):
        scaled_add_inplace(a, a)


@nki.jit
def whole_exp_kernel(x, out):
    nl.store(out, value=nl.exp(nl.load(x)))


def test_empty_and_disjoint_arguments_pass_the_memory_check():
    # Every empty storage has address 0, and the check compared storages: an empty batch and the
    # halves of one buffer were refused as "shares memory" (helper-83).
    empty = torch.empty(0, 4, device="neuron")
    whole_exp_kernel(empty, torch.empty(0, 4, device="neuron"))
    base = torch.randn(128, 8)
    halves = base.to("neuron")
    whole_exp_kernel(halves[:, :4], halves[:, 4:])
    torch.testing.assert_close(halves.cpu(), torch.cat([base[:, :4], base[:, :4].exp()], 1))
    with pytest.raises(RuntimeError, match="writes argument 'out', which shares memory with argument 'x'"):
        whole_exp_kernel(halves[:, :4], halves[:, 3:7])


def test_compiled_nki_op_takes_new_strides_of_one_shape():
    # Dynamo's second compile makes the strides symbolic; the op's graph cache hashed them (TypeError).
    compiled = torch.compile(lambda t: nki_exp(t) + 1, backend="neuron", fullgraph=True)
    rows, columns = torch.randn(128, 16), torch.randn(16, 128)
    torch.testing.assert_close(compiled(rows.to("neuron")).cpu(), rows.exp() + 1)
    torch.testing.assert_close(compiled(columns.to("neuron").t()).cpu(), columns.t().exp() + 1)


@nki.jit
def scale_kernel(a, factor):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.multiply(nl.load(a), factor))
    return out


@nki_op("nki_tests::scale", mutates_args={})
def nki_scale(a: torch.Tensor, factor: int) -> torch.Tensor:
    return scale_kernel(a, factor)


def test_compiled_nki_op_takes_new_int_values():
    # Dynamo's second compile makes the int symbolic, which reached the kernel's trace (TypeError).
    compiled = torch.compile(nki_scale, backend="neuron")
    x = torch.randn(128, 4)
    for factor in (2, 3, 4):
        torch.testing.assert_close(compiled(x.to("neuron"), factor).cpu(), x * factor)
