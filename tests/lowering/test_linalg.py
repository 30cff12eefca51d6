"""Matrix products on neuron against CPU: torch.matmul's broadcasting cases, F.linear in bf16, the
add*-family (addmm, addmv, addbmm, baddbmm, addr) with beta/alpha, out= and in-place forms, and
_int_mm."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.testing import make_tensor

import torch_neuronx
from tests.utils import assert_matches_cpu

MATMUL_SHAPES = [
    ((4,), (4,)),
    ((4,), (4, 3)),
    ((2, 4), (4,)),
    ((2, 4), (4, 3)),
    ((5, 2, 4), (4,)),
    ((4,), (5, 4, 3)),
    ((5, 2, 4), (4, 3)),
    ((2, 4), (5, 4, 3)),
    ((5, 2, 4), (5, 4, 3)),
    ((1, 2, 4), (5, 4, 3)),
    ((2, 5, 2, 4), (5, 4, 3)),
    ((2, 1, 2, 4), (3, 4, 3)),
    ((2, 3, 2, 4), (2, 3, 4, 3)),
]


def _make(shape, dtype=torch.float32):
    return make_tensor(shape, dtype=dtype, device="cpu", low=-2, high=2)


@pytest.mark.parametrize(("a", "b"), MATMUL_SHAPES, ids=[f"{a}@{b}" for a, b in MATMUL_SHAPES])
def test_matmul_broadcasting_matches_cpu(a, b):
    assert_matches_cpu(torch.matmul, _make(a), _make(b))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.int64, torch.int32])
def test_matmul_dtypes_match_cpu(dtype):
    atol, rtol = (1e-2, 1.6e-2) if dtype == torch.bfloat16 else (None, None)
    assert_matches_cpu(torch.matmul, _make((3, 2, 8), dtype), _make((8, 5), dtype), atol=atol, rtol=rtol)


def test_matmul_gradients_match_cpu():
    a, b = _make((3, 2, 4)).requires_grad_(), _make((4, 5)).requires_grad_()
    (a @ b).sum().backward()
    na, nb = a.detach().to("neuron").requires_grad_(), b.detach().to("neuron").requires_grad_()
    (na @ nb).sum().backward()
    torch.testing.assert_close(na.grad.cpu(), a.grad)
    torch.testing.assert_close(nb.grad.cpu(), b.grad)


@pytest.mark.parametrize("input_shape", [(8,), (3, 8), (2, 3, 8)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_bfloat16_matches_cpu(input_shape, bias):
    x, w = _make(input_shape, torch.bfloat16), _make((5, 8), torch.bfloat16)
    b = _make((5,), torch.bfloat16) if bias else None
    assert_matches_cpu(F.linear, x, w, b, atol=2e-2, rtol=2e-2)


PRODUCTS = {
    "addmm": lambda t: torch.addmm(t["m"], t["a"], t["b"], beta=0.5, alpha=2),
    "addmv": lambda t: torch.addmv(t["v3"], t["a"], t["v4"], beta=0.5, alpha=-1),
    "addbmm": lambda t: torch.addbmm(t["m"], t["ba"], t["bb"], beta=2, alpha=0.5),
    "baddbmm": lambda t: torch.baddbmm(t["bm"], t["ba"], t["bb"], beta=0.5, alpha=2),
    "addr": lambda t: torch.addr(t["a"], t["v3"], t["v4"], beta=2, alpha=0.5),
    "outer": lambda t: torch.outer(t["v3"], t["v4"]),
    "dot": lambda t: torch.dot(t["v4"], t["v4"]),
    "vdot": lambda t: torch.vdot(t["v4"], t["v4"]),
    "inner": lambda t: torch.inner(t["a"], t["a"]),
    "mv": lambda t: torch.mv(t["a"], t["v4"]),
    "einsum": lambda t: torch.einsum("bij,bjk->bik", t["ba"], t["bb"]),
}


def _operands(dtype=torch.float32):
    shapes = {"a": (3, 4), "b": (4, 5), "m": (3, 5), "v3": (3,), "v4": (4,), "ba": (2, 3, 4), "bb": (2, 4, 5)}
    operands = {name: _make(shape, dtype) for name, shape in shapes.items()}
    operands["bm"] = _make((2, 3, 5), dtype)
    return operands


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", PRODUCTS)
def test_products_match_cpu(name, dtype):
    atol, rtol = (3e-2, 2e-2) if dtype == torch.bfloat16 else (None, None)
    assert_matches_cpu(PRODUCTS[name], _operands(dtype), atol=atol, rtol=rtol)


BETA_ZERO = {
    "addmm": ("m", lambda t: torch.addmm(t["m"], t["a"], t["b"], beta=0)),
    "addmv": ("v3", lambda t: torch.addmv(t["v3"], t["a"], t["v4"], beta=0)),
    "addbmm": ("m", lambda t: torch.addbmm(t["m"], t["ba"], t["bb"], beta=0)),
    "baddbmm": ("bm", lambda t: torch.baddbmm(t["bm"], t["ba"], t["bb"], beta=0)),
    "addr": ("a", lambda t: torch.addr(t["a"], t["v3"], t["v4"], beta=0)),
}


@pytest.mark.parametrize("name", BETA_ZERO)
def test_beta_zero_ignores_nan_in_self(name):
    self_name, fn = BETA_ZERO[name]
    operands = _operands()
    operands[self_name] = torch.full_like(operands[self_name], float("nan"))
    result = assert_matches_cpu(fn, operands)
    assert not result.isnan().any()


def test_integer_and_bool_products_match_cpu():
    ints = {name: t.to(torch.int64) for name, t in _operands().items()}
    assert_matches_cpu(lambda t: torch.addmv(t["v3"], t["a"], t["v4"]), ints)
    assert_matches_cpu(lambda t: torch.addbmm(t["m"], t["ba"], t["bb"], beta=2, alpha=3), ints)
    assert_matches_cpu(lambda t: torch.addr(t["a"], t["v3"], t["v4"], beta=2, alpha=3), ints)
    bools = {name: t > 0 for name, t in _operands().items()}
    assert_matches_cpu(lambda t: torch.addr(t["a"], t["v3"], t["v4"]), bools)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize(("beta", "alpha"), [(1, 1), (0.7, -1.3), (0, 2.5)])
def test_addr_of_16_bit_tensors_rounds_each_step_as_the_cpu(dtype, beta, alpha):
    # ATen's addr_kernel computes beta * self + alpha * vec1 * vec2 in the 16-bit type, each
    # operator rounded; computing in float32 and rounding once differed in 60% of the elements,
    # by far more than an ulp where the terms cancel. float16's subnormal products included.
    operands = {
        "self": torch.randn(17, 13).to(dtype),
        "vec1": (torch.randn(17) * torch.logspace(-4, 0, 17)).to(dtype),
        "vec2": torch.randn(13).to(dtype),
    }
    fn = lambda t: torch.addr(t["self"], t["vec1"], t["vec2"], beta=beta, alpha=alpha)  # noqa: E731
    assert_matches_cpu(fn, operands, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize(("beta", "alpha"), [(1, 1), (0.7, 0.3), (0, 2.5)])
def test_addbmm_of_16_bit_tensors_rounds_after_each_batch_as_the_cpu(dtype, beta, alpha):
    # ATen's addbmm is one addmm per batch into the 16-bit result; summing the batches in float32
    # and rounding once differed in half of the float16 elements, by up to 61x tolerance.
    operands = {"self": torch.randn(5, 6), "batch1": torch.randn(7, 5, 4), "batch2": torch.randn(7, 4, 6)}
    operands = {name: t.to(dtype) for name, t in operands.items()}
    fn = lambda t: torch.addbmm(t["self"], t["batch1"], t["batch2"], beta=beta, alpha=alpha)  # noqa: E731
    assert_matches_cpu(fn, operands, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=str)
def test_cross_rounds_as_the_cpus_kernel(dtype):
    # ATen's cross kernel computes in scalar_t: 16-bit products and their difference each rounded
    # (PyTorch's decomposition, which neuron ran, rounds once: 36% of float16 elements differed);
    # float32 as one fused multiply-add where the CPU build contracts it.
    a, b = torch.randn(40, 3, 5).to(dtype), torch.randn(1, 3, 5).to(dtype)
    exact = (
        {"atol": 0, "rtol": 0} if dtype != torch.float32 or torch.backends.cpu.get_cpu_capability() != "DEFAULT" else {}
    )
    assert_matches_cpu(lambda x, y: torch.linalg.cross(x, y, dim=1), a, b, **exact)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=str)
def test_bilinear_and_its_gradients_contract_in_atens_two_steps(dtype):
    # aten::_trilinear contracts input1 with the weight, rounds to the dtype, then contracts with
    # input2 and rounds again (the backward's _trilinear calls add the unrolled slices one by one):
    # 16-bit results are the CPU's bit for bit (one float32 einsum differed in 60%, by 6.5x tolerance).
    operands = [torch.randn(2, 3, 4), torch.randn(2, 3, 6), torch.randn(5, 4, 6), torch.randn(5), torch.randn(2, 3, 5)]
    x1, x2, weight, bias, grad = (t.to(dtype) for t in operands)

    def run(x1, x2, weight, bias, grad):
        out = F.bilinear(x1, x2, weight, bias)
        return out, *torch.autograd.grad(out, (x1, x2, weight, bias), grad)

    exact = {} if dtype == torch.float32 else {"atol": 0, "rtol": 0}
    inputs = [t.requires_grad_() for t in (x1, x2, weight, bias)]
    assert_matches_cpu(run, *inputs, grad, **exact)


def test_addr_of_mixed_dtypes_computes_in_their_common_dtype():
    # TensorIterator promotes self, vec1 and vec2 before the kernel scales by alpha: float self with
    # int8 vectors and alpha=0.5 is 1 + 0.5 * 1, where alpha cast to the vectors' int8 gave 1 + 0
    operands = {
        "self": torch.ones(3, 2),
        "vec1": torch.ones(3, dtype=torch.int8),
        "vec2": torch.ones(2, dtype=torch.int8),
    }
    assert_matches_cpu(lambda t: torch.addr(t["self"], t["vec1"], t["vec2"], alpha=0.5), operands)
    operands["self"] = torch.ones(3, 2, dtype=torch.int64)
    operands["vec1"] = torch.ones(3)
    assert_matches_cpu(lambda t: torch.addr(t["self"], t["vec1"], t["vec2"], beta=0.5), operands)


def test_inplace_and_out_forms_match_cpu():
    def fn(t):
        m, v3 = t["m"].clone(), t["v3"].clone()
        m.addbmm_(t["ba"], t["bb"], alpha=0.5)
        v3.addmv_(t["a"], t["v4"])
        a = t["a"].clone()
        a.addr_(t["v3"], t["v4"])
        out = torch.empty(3, 5, device=m.device)
        torch.addbmm(t["m"], t["ba"], t["bb"], out=out)
        out_mv = torch.empty(3, device=m.device)
        torch.addmv(t["v3"], t["a"], t["v4"], out=out_mv)
        return m, v3, a, out, out_mv

    assert_matches_cpu(fn, _operands())


def test_int_mm_matches_cpu():
    a = make_tensor((32, 16), dtype=torch.int8, device="cpu")
    b = make_tensor((16, 24), dtype=torch.int8, device="cpu")
    result = assert_matches_cpu(torch._int_mm, a, b)
    assert result.dtype == torch.int32


def test_product_gradients_match_cpu():
    operands = {name: t.requires_grad_() for name, t in _operands().items()}
    names = ["m", "a", "v3", "v4", "ba", "bb"]

    def grads(t):
        total = (
            torch.addbmm(t["m"], t["ba"], t["bb"]).sum()
            + torch.addmv(t["v3"], t["a"], t["v4"]).sum()
            + torch.addr(t["a"], t["v3"], t["v4"]).sum()
        )
        return torch.autograd.grad(total, [t[name] for name in names])

    assert_matches_cpu(grads, operands)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda h, b: h.addmm_(b, b), "self and mat2 must have the same dtype, but got Half and BFloat16"),
        (lambda h, b: b.addmm_(h, b), "mat1 and mat2 must have the same dtype, but got Half and BFloat16"),
        (lambda h, b: h.addbmm_(b[None], b[None]), "self and mat2 must have the same dtype, but got Half and BFloat16"),
        (lambda h, b: torch.addmm(h, b, b, out=h), "self and mat2 must have the same dtype, but got Half and BFloat16"),
    ],
    ids=["self", "mat1", "addbmm", "out"],
)
def test_inplace_or_out_addmm_of_two_16_bit_dtypes_raises_atens_error(call, message):
    """Before the result's dtype check ("Expected out tensor to have dtype float"), as on the CPU."""
    h, b = torch.zeros(4, 4, dtype=torch.float16), torch.randn(4, 4).bfloat16()
    with pytest.raises(RuntimeError, match=message):
        call(h.clone(), b)
    with pytest.raises(RuntimeError, match=message):
        call(h.to("neuron"), b.to("neuron"))


#: out= forms of composites whose PyTorch implementation makes float64 tolerances on the device
#: (they raised the FP64 policy's TypeError), and out= forms that fell back to the CPU.
_LINALG_OUT_FORMS = {
    "matrix_rank": (lambda a, out: torch.linalg.matrix_rank(a, out=out), torch.int64),
    "matrix_rank_tol": (lambda a, out: torch.linalg.matrix_rank(a, tol=0.1, out=out), torch.int64),
    "matrix_rank_atol_tensor": (
        lambda a, out: torch.linalg.matrix_rank(a, atol=a.new_tensor(0.1), out=out),
        torch.int64,
    ),
    "matrix_rank_tol_tensor": (lambda a, out: torch.linalg.matrix_rank(a, a.new_tensor(0.1), out=out), torch.int64),
    "matrix_rank_into_int32": (lambda a, out: torch.linalg.matrix_rank(a, out=out), torch.int32),
    "pinv_rcond": (lambda a, out: torch.linalg.pinv(a, 0.1, out=out), torch.float32),
    "eigvals": (lambda a, out: torch.linalg.eigvals(a[:3], out=out), torch.complex64),
    "geqrf": (lambda a, out: torch.geqrf(a, out=(out, torch.empty(0, device=a.device)))[0], torch.float32),
}


@pytest.mark.parametrize("case", list(_LINALG_OUT_FORMS))
def test_linalg_out_forms_run_on_the_device(case):
    call, dtype = _LINALG_OUT_FORMS[case]
    a = torch.randn(4, 3)
    expected = call(a, torch.empty(0, dtype=dtype))
    out = torch.empty(0, dtype=dtype, device="neuron")
    result = call(a.to("neuron"), out)
    assert result.data_ptr() == out.data_ptr()
    torch.testing.assert_close(out.cpu(), expected, atol=1e-5, rtol=1e-4)
    assert torch_neuronx.get_fallback_ops() == {}
