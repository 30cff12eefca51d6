"""Factorizations, solvers, inverses and determinants against the CPU (lowering/factorization.py)."""

from __future__ import annotations

import re
import warnings

import pytest
import torch
from torch.utils import _pytree as pytree

import torch_neuronx

DTYPES = [torch.float32, torch.complex64]


def _general(*shape, dtype):
    torch.manual_seed(0)
    return torch.randn(*shape, dtype=dtype)


def _pd(*shape, dtype):
    a = _general(*shape, dtype=dtype)
    return a @ a.mH + shape[-1] * torch.eye(shape[-1], dtype=dtype)


def _triangular(*shape, dtype):
    return _general(*shape, dtype=dtype) + 4 * torch.eye(shape[-1], dtype=dtype)


def _run(fn, *inputs):
    """fn on the CPU inputs and on their neuron copies (results copied back); no op may fall back."""
    expected = fn(*inputs)
    torch_neuronx.clear_op_tracking()
    actual = fn(*[t.to("neuron") for t in inputs])
    actual = pytree.tree_map(lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, actual)
    assert torch_neuronx.get_fallback_ops() == {}
    return actual, expected


# name -> (input maker and shapes, fn); results are compared with the CPU's as they are, so sign- or
# phase-ambiguous factors are compared through invariants (products, magnitudes), as the OpInfos do.
CASES = {
    "svdvals": (_general, [(3, 5, 4), (4, 4)], torch.linalg.svdvals),
    "svd_reconstruct": (
        _general,
        [(2, 5, 3), (3, 5)],
        lambda a: (lambda u, s, vh: (u * s.to(a.dtype)[..., None, :]) @ vh)(*torch.linalg.svd(a, full_matrices=False)),
    ),
    "svd_full_abs": (_general, [(2, 5, 3)], lambda a: [t.abs() for t in torch.linalg.svd(a)]),
    "svd_empty": (_general, [(0, 3), (3, 0), (2, 0, 0)], lambda a: torch.linalg.svd(a)),
    "eigh": (_pd, [(2, 4, 4)], lambda a: [t.abs() for t in torch.linalg.eigh(a)]),
    "eigvalsh_upper": (_general, [(2, 4, 4)], lambda a: torch.linalg.eigvalsh(a, UPLO="U")),
    "eig_abs": (_general, [(2, 4, 4)], lambda a: [t.abs() if t.dim() > 2 else t for t in torch.linalg.eig(a)]),
    "eigvals": (_general, [(2, 4, 4)], torch.linalg.eigvals),
    "lu_factor_ex": (_general, [(2, 4, 4), (5, 3), (3, 5)], torch.linalg.lu_factor_ex),
    "lu": (_general, [(2, 4, 4), (5, 3), (3, 5)], torch.linalg.lu),
    "lu_unpack": (_general, [(2, 5, 3), (3, 5)], lambda a: torch.lu_unpack(*torch.linalg.lu_factor(a))),
    "lu_solve": (
        _general,
        [(2, 4, 4)],
        lambda a: (
            [
                torch.linalg.lu_solve(*torch.linalg.lu_factor(a), a[..., :2].clone(), left=True, adjoint=adjoint)
                for adjoint in (False, True)
            ]
            + [torch.linalg.lu_solve(*torch.linalg.lu_factor(a), a[..., :2, :].clone(), left=False, adjoint=True)]
        ),
    ),
    "inv": (_general, [(2, 4, 4)], torch.linalg.inv_ex),
    "solve_vector": (_general, [(2, 4, 4)], lambda a: torch.linalg.solve(a, a[..., 0].clone())),
    "solve_broadcast": (_general, [(3, 1, 4, 4)], lambda a: torch.linalg.solve_ex(a, a[0, 0, :, :2].clone())),
    "solve_right": (_general, [(4, 4)], lambda a: torch.linalg.solve(a, a[:2].clone(), left=False)),
    "cholesky": (_pd, [(2, 4, 4)], lambda a: [torch.linalg.cholesky_ex(a, upper=up) for up in (False, True)]),
    "cholesky_inverse": (_pd, [(2, 4, 4)], lambda a: torch.cholesky_inverse(torch.linalg.cholesky(a))),
    "cholesky_solve": (_pd, [(2, 4, 4)], lambda a: torch.cholesky_solve(a[..., :2].clone(), torch.linalg.cholesky(a))),
    "det": (_general, [(2, 4, 4)], torch.linalg.det),
    "slogdet": (_general, [(2, 4, 4)], torch.linalg.slogdet),
    "det_singular": (_general, [(3, 3)], lambda a: torch.linalg.slogdet(a * (torch.arange(3, device=a.device) < 2))),
    "qr": (_general, [(2, 5, 3), (3, 5)], lambda a: [torch.linalg.qr(a, mode=m) for m in ("reduced", "complete", "r")]),
    "geqrf": (_general, [(2, 5, 3), (3, 5)], torch.geqrf),
    "householder_ormqr": (
        _general,
        [(5, 3)],
        lambda a: [
            torch.linalg.householder_product(a, a[0, :3].real.to(a.dtype).clone() / 4),
            torch.ormqr(a, a[0, :3].real.to(a.dtype).clone() / 4, a[:, :2].clone(), transpose=True),
        ],
    ),
    "triangular_solve": (
        _triangular,
        [(2, 4, 4)],
        lambda a: torch.triangular_solve(a[..., :2].clone(), a, upper=False, transpose=True),
    ),
    "solve_triangular": (
        _triangular,
        [(2, 4, 4)],
        lambda a: torch.linalg.solve_triangular(a, a[..., :2, :].clone(), upper=True, left=False, unitriangular=True),
    ),
    "matrix_exp": (_general, [(2, 4, 4)], lambda a: torch.linalg.matrix_exp(a / 2)),
    "pinv": (_general, [(2, 5, 3)], lambda a: [torch.linalg.pinv(a), torch.pinverse(a, rcond=0.3)]),
    "pinv_hermitian": (_pd, [(2, 4, 4)], lambda a: torch.linalg.pinv(a, hermitian=True, atol=5.0)),
    "matrix_rank": (
        _general,
        [(2, 5, 3)],
        lambda a: [torch.linalg.matrix_rank(a), torch.linalg.matrix_rank(a, atol=1.0, rtol=0.0)],
    ),
    "matrix_rank_hermitian": (_pd, [(2, 4, 4)], lambda a: torch.linalg.matrix_rank(a, hermitian=True, rtol=0.5)),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_cpu(case, dtype):
    make, shapes, fn = CASES[case]
    for shape in shapes:
        actual, expected = _run(fn, make(*shape, dtype=dtype))
        torch.testing.assert_close(actual, expected, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("dtype", DTYPES)
def test_info_reports_the_failure_index(dtype):
    """The _ex variants return LAPACK's info instead of raising."""
    singular = torch.tensor([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]], dtype=dtype)
    not_pd = torch.diag(torch.tensor([2.0, 1.0, -1.0], dtype=dtype))
    for fn, a in [
        (lambda t: torch.linalg.lu_factor_ex(t).info, singular),
        (lambda t: torch.linalg.inv_ex(t).info, singular),
        (lambda t: torch.linalg.solve_ex(t, t[:, :1].clone()).info, singular),
        (lambda t: torch.linalg.cholesky_ex(t).info, not_pd),
        (lambda t: torch.linalg.cholesky_ex(t, upper=True).info, torch.stack([not_pd, torch.eye(3, dtype=dtype)])),
    ]:
        actual, expected = _run(fn, a)
        torch.testing.assert_close(actual, expected)
        assert int(expected.max()) > 0


@pytest.mark.parametrize(
    ("fn", "match"),
    [
        (lambda a: torch.linalg.inv(a), "linalg.inv: The diagonal element 3 is zero"),
        (lambda a: torch.linalg.inv_ex(a, check_errors=True), "The diagonal element 3 is zero"),
        (lambda a: torch.linalg.solve(a, a[:, :1].clone()), "The solver failed because the input matrix is singular"),
        (lambda a: torch.linalg.cholesky(a), "the leading minor of order 1 is not positive-definite"),
        (lambda a: torch.cholesky(a), "the leading minor of order 1 is not positive-definite"),
        (lambda a: torch.linalg.cholesky_ex(a, check_errors=True), "leading minor of order 1"),
        (lambda a: torch.cholesky_inverse(a), "The diagonal element 3 is zero"),
        (lambda a: torch.linalg.svdvals(a / 0), "input matrix contained non-finite values"),
    ],
)
def test_checked_forms_raise_linalg_error_at_the_op(fn, match):
    # CUDA checks LAPACK's info on the host after copying it back, so these raise at the op there too
    # (test_linalg's assertRaises around the call), not at a later synchronisation.
    a = torch.tensor([[0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    a[0, 0] = -1.0 if "minor" in match else 1.0
    with pytest.raises(torch.linalg.LinAlgError, match=match):
        fn(a)
    with pytest.raises(torch.linalg.LinAlgError, match=match) as raised:
        fn(a.to("neuron"))
    assert "synchronization point" not in str(raised.value)


@pytest.mark.parametrize(
    "fn",
    [
        lambda a: torch.linalg.cholesky_ex(a, check_errors=True),
        lambda a: torch.linalg.inv(a),
        lambda a: torch.linalg.solve(a, a[..., :1].clone()),
        lambda a: torch.linalg.lu_factor_ex(a, check_errors=True),
    ],
    ids=["cholesky_ex", "inv", "solve", "lu_factor_ex"],
)
def test_batched_checked_forms_name_the_failing_matrix_as_aten(fn):
    # ATen's _linalg_check_errors: "linalg.inv: (Batch element 3): The diagonal element 2 is zero ...".
    batch = torch.eye(3).repeat(5, 1, 1)
    batch[3, 1, 1] = 0
    messages = []
    for device in ("cpu", "neuron"):
        with pytest.raises(RuntimeError) as raised:
            fn(batch.to(device))
        messages.append(str(raised.value))
    # Raised by a device check, neuron's message starts with the op: "aten::... on neuron:0: ".
    assert messages[1].split(" on neuron:0: ")[-1] == messages[0]
    assert "(Batch element 3)" in messages[0]


def test_eig_rejects_non_finite_input_at_the_op():
    a = torch.tensor([[float("nan"), 1.0], [1.0, 1.0]])
    with pytest.raises(RuntimeError, match="should not contain infs or NaNs"):
        torch.linalg.eig(a)
    with pytest.raises(RuntimeError, match="should not contain infs or NaNs"):
        torch.linalg.eig(a.to("neuron"))


@pytest.mark.parametrize("uplo", ["U", "L", "u", "l"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64], ids=str)
def test_eigh_reads_the_triangle_its_uplo_names_in_either_case(uplo, dtype):
    # A non-Hermitian input: only the named triangle may be read. "l" read the upper one (ATen takes
    # UPLO's first letter in either case; upstream test_eigh_lower_uplo).
    a = torch.randn(2, 3, 3, dtype=dtype)
    values = torch.linalg.eigvalsh(a, UPLO=uplo)
    torch.testing.assert_close(torch.linalg.eigvalsh(a.to("neuron"), UPLO=uplo).cpu(), values, atol=1e-5, rtol=1e-5)
    _, vectors = torch.linalg.eigh(a.to("neuron"), UPLO=uplo)
    torch.testing.assert_close(vectors.cpu().abs(), torch.linalg.eigh(a, UPLO=uplo)[1].abs(), atol=1e-5, rtol=1e-5)


def test_pinv_gradient_matches_cpu():
    """pinv's neuron composite keeps autograd (registered for AutogradPrivateUse1 as well)."""
    a = _general(2, 5, 3, dtype=torch.float32)
    grads = []
    for device in ("cpu", "neuron"):
        x = a.to(device).detach().requires_grad_()
        torch.linalg.pinv(x, atol=0.1).sum().backward()
        grads.append(x.grad.cpu())
    torch.testing.assert_close(grads[1], grads[0], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
def test_determinant_gradients_match_cpu_in_either_layout(transposed, dtype):
    """_linalg_det/_linalg_slogdet factor the transpose of a contiguous real input, and their backward
    solves with the LU accordingly: a gradient through the wrong LU comes out transposed."""
    a = _general(2, 4, 4, dtype=dtype)
    for fn in (torch.linalg.det, lambda t: torch.linalg.slogdet(t).logabsdet):
        grads = []
        for device in ("cpu", "neuron"):
            x = a.to(device).detach().requires_grad_()
            y = fn(x.mT if transposed else x)
            (y.abs() if y.is_complex() else y).sum().backward()
            grads.append(x.grad.cpu())
        torch.testing.assert_close(grads[1], grads[0], atol=1e-4, rtol=1e-4)


def test_pinv_and_matrix_rank_errors_are_pytorchs():
    with pytest.raises(RuntimeError, match="expected a tensor with 2 or more dimensions of float"):
        torch.linalg.pinv(torch.ones(3, 3, dtype=torch.bfloat16, device="neuron"))
    with pytest.raises(RuntimeError, match="must have at least 2 dimensions"):
        torch.linalg.matrix_rank(torch.ones(3, device="neuron"))


@pytest.mark.parametrize(
    "pivots",
    [lambda p: p[..., :2], lambda p: p[0], lambda p: p[None], lambda p: torch.cat([p, p[..., :1]], -1)],
    ids=["fewer", "missing_batch", "extra_batch", "more"],
)
def test_lu_unpack_refuses_pivots_of_another_shape(pivots):
    # ATen's kernel reads the pivots in (*, k) without checking: past their end, or missing a batch
    # (a permutation of garbage on the CPU, or its "pivots ... must be between 1 and LU.size(-2)").
    lu, lu_pivots = torch.linalg.lu_factor(torch.randn(2, 3, 3, device="neuron"))
    bad = pivots(lu_pivots)
    message = rf"expected LU_pivots of shape \[2, 3\] .* but got {re.escape(str(list(bad.shape)))}"
    with pytest.raises(RuntimeError, match=message):
        torch.lu_unpack(lu, bad)
    torch.lu_unpack(lu, bad, unpack_pivots=False)  # the pivots are not read


def test_lu_without_pivoting_raises():
    with pytest.raises(RuntimeError, match="LU without pivoting is not implemented"):
        torch.linalg.lu_factor(torch.eye(3, device="neuron"), pivot=False)


@pytest.mark.parametrize("driver", [None, "gels", "gelsy", "gelsd", "gelss"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("a_shape", "b_shape"),
    [((2, 5, 3), (1, 5, 2)), ((1, 5, 3), (3, 5, 2)), ((3, 5), (3, 2)), ((5, 3), (5,)), ((3, 0), (3, 2))],
)
def test_lstsq_matches_cpu(a_shape, b_shape, dtype, driver):
    """Every driver's set of results (rank, singular values, residuals), batch broadcasting (the rank
    and singular values keep the input's own batch shape), vectors."""
    a, b = _general(*a_shape, dtype=dtype), _general(*b_shape, dtype=dtype) + 1
    actual, expected = _run(lambda x, y: tuple(torch.linalg.lstsq(x, y, driver=driver)), a, b)
    torch.testing.assert_close(actual, expected, atol=1e-4, rtol=1e-4)
    # The solution is LAPACK's column-major right-hand sides narrowed to n rows, as on the CPU.
    on_device = torch.linalg.lstsq(a.to("neuron"), b.to("neuron"), driver=driver).solution
    assert on_device.stride() == expected[0].stride()
    assert on_device.untyped_storage().nbytes() == expected[0].untyped_storage().nbytes()


@pytest.mark.parametrize(("a_shape", "b_shape"), [((2, 5, 3), (5, 2)), ((1, 5, 3), (5, 2)), ((3, 5, 3), (5, 3))])
def test_lstsq_matrix_b_beside_batched_input_broadcasts(a_shape, b_shape):
    """b is a batch of vectors only with input.shape[:-1] (ATen's linalg_solve_is_vector_rhs); a
    matrix b broadcasts over input's batch. The CPU broadcasts the wrong dimensions here (a
    broadcasting error, or a (5, 3, 2) solution beside a (1, 5, 3) input), so each matrix is
    compared with the CPU's unbatched solution."""
    a, b = _general(*a_shape, dtype=torch.float32), _general(*b_shape, dtype=torch.float32) + 1
    actual = torch.linalg.lstsq(a.to("neuron"), b.to("neuron"), driver="gelsd")
    expected = [torch.linalg.lstsq(matrix, b, driver="gelsd") for matrix in a]
    torch.testing.assert_close(actual.solution.cpu(), torch.stack([e.solution for e in expected]), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(actual.rank.cpu(), torch.stack([e.rank for e in expected]))


def test_lstsq_without_right_hand_sides_has_lapacks_rank():
    """b with no columns: gelsy returns at once with rank 0 (LAPACK's ?gelsy, as the CPU); gelsd and
    gelss still factor the input (the CPU's MKL fails an assertion or crashes there)."""
    a, b = _general(2, 5, 3, dtype=torch.float32), torch.ones(2, 5, 0)
    actual, expected = _run(lambda x, y: tuple(torch.linalg.lstsq(x, y, driver="gelsy")), a, b)
    torch.testing.assert_close(actual, expected)
    for driver in ("gelsd", "gelss"):
        result = torch.linalg.lstsq(a.to("neuron"), b.to("neuron"), driver=driver)
        torch.testing.assert_close(result.rank.cpu(), torch.tensor([3, 3]))
        torch.testing.assert_close(result.singular_values.cpu(), torch.linalg.svdvals(a), atol=1e-5, rtol=1e-5)
        assert result.solution.shape == (2, 3, 0)


@pytest.mark.parametrize("driver", ["gelsy", "gelsd", "gelss"])
def test_lstsq_rank_deficient_matches_cpu(driver):
    """The minimum-norm solution and the rank; gelsd/gelss then return no residuals."""
    a = _general(5, 3, dtype=torch.float32)
    a[:, 2] = a[:, 1]
    actual, expected = _run(lambda x, y: tuple(torch.linalg.lstsq(x, y, driver=driver)), a, a[:, :2] + 1)
    torch.testing.assert_close(actual, expected, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("driver", [None, "gels", "gelsd"])
def test_lstsq_out_resizes_and_fills_every_out_as_the_cpu(driver):
    """torch.linalg.lstsq(out=) ran on the CPU fallback; a wrongly shaped out is resized with PyTorch's warning."""
    a, b = _general(2, 5, 3, dtype=torch.float32), _general(2, 5, 2, dtype=torch.float32)

    def lstsq_out(x, y):
        outs = (x.new_empty(1), x.new_empty(0), x.new_empty(0, dtype=torch.int64), x.new_empty(0))
        resized = r"An output with one or more elements was resized since it had shape \[1\], which does not match"
        with pytest.warns(UserWarning, match=resized) as record:
            returned = torch.linalg.lstsq(x, y, driver=driver, out=outs)
        assert record[0].filename == __file__  # the user's line, as ATen's warning
        assert all(r is o for r, o in zip(returned, outs, strict=True))
        return outs

    actual, expected = _run(lstsq_out, a, b)
    torch.testing.assert_close(actual, expected, atol=1e-4, rtol=1e-4)


def test_lstsq_out_errors_are_atens():
    def lstsq_into(device, rank):
        a = torch.ones(3, 2, device=device)
        outs = (a.new_empty(0), a.new_empty(0), rank, a.new_empty(0))
        torch.linalg.lstsq(a, torch.ones(3, 1, device=device), out=outs)

    message = "Expected rank to be safely castable from Long dtype, but got rank with dtype Bool"
    for device in ("cpu", "neuron"):
        with pytest.raises(RuntimeError, match=message):
            lstsq_into(device, torch.empty(0, dtype=torch.bool, device=device))
    message = "Expected rank and input tensors to be on the same device, but got rank on cpu and input on neuron:0"
    with pytest.raises(RuntimeError, match=message):
        lstsq_into("neuron", torch.empty(0, dtype=torch.int64))


@pytest.mark.parametrize(
    ("a_shape", "b_shape", "kwargs", "match"),
    [
        ((3,), (3,), {}, "input must have at least 2 dimensions"),
        ((3, 3), (4, 3), {}, r"input.size\(-2\) should match other.size\(-2\)"),
        ((2, 5, 3), (2, 4), {}, r"input.size\(-2\) should match other.size\(-2\)"),
        ((5, 3), (4,), {}, r"input.size\(-2\) should match other.size\(-1\)"),
        ((3, 3), (3, 3), {"driver": "foo"}, "parameter `driver` should be one of"),
        ((1, 3, 3), (3,), {}, "input.dim\\(\\) must be greater or equal to other.dim\\(\\)"),
        ((2, 5, 3), (3, 5, 2), {}, "^The size of tensor a \\(2\\) must match the size of tensor b \\(3\\) at "),
    ],
)
def test_lstsq_argument_errors_are_pytorchs(a_shape, b_shape, kwargs, match):
    for device in ("cpu", "neuron"):
        with pytest.raises(RuntimeError, match=match):
            torch.linalg.lstsq(torch.ones(a_shape, device=device), torch.ones(b_shape, device=device), **kwargs)


def test_lstsq_dtype_mismatch_names_atens_scalar_types():
    message = "^torch.linalg.lstsq: Expected input and other to have the same dtype, but got input's dtype Float and "
    for device in ("cpu", "neuron"):
        with pytest.raises(RuntimeError, match=message + "other's dtype Half$"):
            torch.linalg.lstsq(torch.ones(3, 2, device=device), torch.ones(3, 1, dtype=torch.half, device=device))


def test_lstsq_gels_ignores_rcond_as_lapack():
    """LAPACK's ?gels takes no rcond; neuron truncated the singular values below it."""
    u, _ = torch.linalg.qr(_general(6, 3, dtype=torch.float32))
    v, _ = torch.linalg.qr(_general(3, 3, dtype=torch.float32))
    a = u @ torch.diag(torch.tensor([1.0, 0.5, 0.005])) @ v.T
    b = _general(6, 2, dtype=torch.float32)
    actual, expected = _run(lambda x, y: torch.linalg.lstsq(x, y, rcond=1e-2, driver="gels").solution, a, b)
    torch.testing.assert_close(actual, expected, atol=1e-3, rtol=1e-4)


def test_lstsq_into_an_empty_solution_out_gives_lapacks_layout():
    a, b = _general(5, 3, dtype=torch.float32), _general(5, 2, dtype=torch.float32)
    layouts = []
    for device in ("cpu", "neuron"):
        outs = [torch.empty(0, device=device) for _ in range(4)]
        outs[2] = torch.empty(0, dtype=torch.int64, device=device)
        torch.linalg.lstsq(a.to(device), b.to(device), out=outs)
        layouts.append(outs[0].stride())
    assert layouts[1] == layouts[0] == (1, 5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_matrix_exp_of_16_bit_input_computes_in_float32(dtype):
    """The CPU's 16-bit kernel overflows to NaN for a matrix of norm ~30; neuron rounds the float32 result."""
    a = _general(2, 4, 4, dtype=torch.float32).to(dtype) * 2
    expected = torch.linalg.matrix_exp(a.float()).to(dtype)
    torch.testing.assert_close(torch.linalg.matrix_exp(a.to("neuron")).cpu(), expected)


#: 1-norms inside each of ATen's Taylor-degree intervals for float32 (degrees 1, 2, 4, 8, 12) and
#: beyond (degree 18 with 0 and 2 squarings), and the boundary where degree 12 gives way to 18.
MATRIX_EXP_NORMS = (1e-8, 1e-4, 0.03, 0.4, 1.2, 1.461661507209034, 2.5, 10.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64], ids=str)
@pytest.mark.parametrize("batch", [(), (3,)], ids=["single", "batch"])
@pytest.mark.parametrize("norm", MATRIX_EXP_NORMS)
def test_matrix_exp_takes_atens_taylor_degree_for_the_norm(norm, batch, dtype):
    # JAX's Pade approximant differed from the CPU by 8 float32 ulps at norm ~30; ATen's optimized
    # Taylor polynomials (Bader, Blanes, Casas 2019), chosen by the 1-norm, agree to about one.
    a = torch.randn(*batch, 5, 5, generator=torch.Generator().manual_seed(0), dtype=dtype)
    a = a * (norm / torch.linalg.matrix_norm(a, ord=1)[..., None, None])
    torch.testing.assert_close(torch.linalg.matrix_exp(a.to("neuron")).cpu(), torch.linalg.matrix_exp(a))


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64], ids=str)
@pytest.mark.parametrize("batch", [(), (3,)], ids=["single", "batch"])
def test_matrix_exp_after_many_squarings_is_as_accurate_as_the_cpu(batch, dtype):
    # Six squarings at norm 150 amplify float32 rounding to ~5e-6 of the largest element on either
    # device, past assert_close's elementwise tolerance; measure both against float64 instead.
    a = torch.randn(*batch, 5, 5, generator=torch.Generator().manual_seed(0), dtype=dtype)
    a = a * (150 / torch.linalg.matrix_norm(a, ord=1)[..., None, None])
    exact = torch.linalg.matrix_exp(a.to(torch.complex128 if dtype.is_complex else torch.float64))

    def error(result):
        return ((result.to(exact.dtype) - exact).abs().amax() / exact.abs().amax()).item()

    neuron, cpu = error(torch.linalg.matrix_exp(a.to("neuron")).cpu()), error(torch.linalg.matrix_exp(a))
    assert neuron <= 2 * cpu + 1e-6, f"relative error {neuron:.2e} on neuron, {cpu:.2e} on the CPU"


@pytest.mark.parametrize("batch", [(), (2,)], ids=["single", "batch"])
@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_matrix_exp_of_a_non_finite_matrix_is_nan_as_on_the_cpu(value, batch):
    a = torch.eye(3).expand(*batch, 3, 3).clone()
    a[..., 0, 1] = value
    torch.testing.assert_close(
        torch.linalg.matrix_exp(a.to("neuron")).cpu(), torch.linalg.matrix_exp(a), equal_nan=True
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64], ids=str)
@pytest.mark.parametrize("shape", [(3, 2**16), (2**16, 3)], ids=["wide", "tall"])
def test_singular_values_of_a_long_matrix_need_no_square_workspace(shape, dtype):
    # XLA's kernel without vectors sized its workspace by the long side squared: 34 GB for 3 x 2**16
    # complex64, 4 TiB for the upstream test_svd_memory_allocation's 3 x 2**20.
    a = torch.randn(shape, dtype=dtype)
    expected = torch.linalg.svdvals(a.to(torch.complex128 if dtype.is_complex else torch.float64))
    values = torch.linalg.svdvals(a.to("neuron"))
    torch.testing.assert_close(values.cpu(), expected.to(values.dtype), rtol=1e-5, atol=0)
    torch.testing.assert_close(torch.linalg.svd(a.to("neuron"), full_matrices=False).S.cpu(), values.cpu())


_OUT_FACTORIZATIONS = {
    "inv": (lambda a, new: torch.linalg.inv(a, out=new()), _pd),
    "solve": (lambda a, new: torch.linalg.solve(a, a[:, :2], out=new()), _pd),
    "cholesky": (lambda a, new: torch.linalg.cholesky(a, out=new()), _pd),
    "torch.cholesky": (lambda a, new: torch.cholesky(a, out=new()), _pd),
    "cholesky_inverse": (lambda a, new: torch.cholesky_inverse(torch.linalg.cholesky(a), out=new()), _pd),
    "lu_factor": (lambda a, new: torch.linalg.lu_factor(a, out=(new(), new(torch.int32))), _general),
    "eigh": (lambda a, new: torch.linalg.eigh(a, out=(new(), new())), _pd),
    "qr": (lambda a, new: torch.linalg.qr(a, out=(new(), new())), _general),
    "svd": (lambda a, new: torch.linalg.svd(a, out=(new(), new(), new())), _general),
    "geqrf": (lambda a, new: torch.geqrf(a, out=(new(), new())), _general),
    "householder_product": (lambda a, new: torch.linalg.householder_product(*torch.geqrf(a), out=new()), _general),
    "eig": (lambda a, new: torch.linalg.eig(a, out=(new(torch.complex64), new(torch.complex64))), _general),
    "eig, no out": (lambda a, new: torch.linalg.eig(a), _general),
}


@pytest.mark.parametrize("out_shape", [(0,), (2, 7)], ids=["empty", "with elements"])
@pytest.mark.parametrize("case", _OUT_FACTORIZATIONS)
def test_a_resized_out_takes_the_kernels_layout(case, out_shape):
    # ATen's structured kernels restride an out= tensor they resize to their meta function's
    # strides; its other linalg out= kernels write an empty out column-major and copy into any
    # other resized row-major (torch.cholesky's always). neuron's stayed row-major (a fresh-user
    # trial: geqrf(A, out=(empty, empty))). eig's Python meta kernel lays its eigenvectors out
    # row-major, LAPACK column-major.
    fn, make = _OUT_FACTORIZATIONS[case]
    a = make(4, 4, dtype=torch.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # resizing an out with elements warns, on both devices
        expected = pytree.tree_leaves(fn(a, lambda dtype=torch.float32: torch.empty(out_shape, dtype=dtype)))
        actual = pytree.tree_leaves(
            fn(a.to("neuron"), lambda dtype=torch.float32: torch.empty(out_shape, dtype=dtype, device="neuron"))
        )
    assert [t.stride() for t in actual] == [t.stride() for t in expected]
    if case in ("inv", "solve", "cholesky", "torch.cholesky", "cholesky_inverse", "lu_factor"):
        torch.testing.assert_close([t.cpu() for t in actual], expected, atol=1e-4, rtol=1e-4)


def _symmetric(n: int, dtype: torch.dtype, seed: int, hermitian: bool) -> torch.Tensor:
    a = torch.randn(n, n, dtype=dtype, generator=torch.Generator().manual_seed(seed))
    a = a + (a.mH if hermitian else a.mT)
    if seed % 3 == 0:
        a[..., 0, 0] = 0  # no 1x1 pivot at the first column: interchanges and 2x2 blocks
    return a


@pytest.mark.parametrize(
    ("dtype", "hermitian"),
    [(torch.float32, False), (torch.complex64, True), (torch.complex64, False)],
    ids=["float32", "complex64-hermitian", "complex64-symmetric"],
)
def test_ldl_factor_is_lapacks_bunch_kaufman(dtype, hermitian):
    # ?sytf2/?hetf2 step for step: the same pivots always, and LD to rounding. Real and Hermitian LD
    # came out bit for bit on earlier hosts; on an AVX-512 one the CPU's LAPACK and XLA round some
    # products otherwise (1 ulp at n=6, 7.6e-6 at n=33), as complex-symmetric ones on any host.
    for n, seed in [(2, 0), (6, 3), (6, 4), (33, 9)]:
        a = _symmetric(n, dtype, seed, hermitian)
        (ld, pivots, info), expected = _run(lambda t: tuple(torch.linalg.ldl_factor_ex(t, hermitian=hermitian)), a)
        torch.testing.assert_close(pivots, expected[1], rtol=0, atol=0)
        torch.testing.assert_close(info, expected[2], rtol=0, atol=0)
        torch.testing.assert_close(ld, expected[0], rtol=1e-5, atol=1e-4)
        b = torch.randn(3, n, 2, dtype=dtype)  # a batch of right-hand sides beside one factorization
        solved, reference = _run(lambda f, p, r: torch.linalg.ldl_solve(f, p, r, hermitian=hermitian), *expected[:2], b)
        torch.testing.assert_close(solved, reference, rtol=1e-4, atol=1e-4)


def test_singular_ldl_factor_raises_what_lapacks_info_means():
    # PyTorch's own check fails an internal assertion here ("Unknown error code: 1"), CPU and CUDA.
    singular = torch.stack([torch.eye(3), torch.zeros(3, 3)]).to("neuron")
    message = r"torch.linalg.ldl_factor: \(Batch element 1\): .* D is exactly singular: its diagonal element 1"
    with pytest.raises(torch.linalg.LinAlgError, match=message):
        torch.linalg.ldl_factor(singular)
    with pytest.raises(torch.linalg.LinAlgError, match="D is exactly singular"):
        torch.linalg.ldl_factor_ex(singular[1], check_errors=True)
    ld, pivots, info = torch.linalg.ldl_factor_ex(singular)
    torch.testing.assert_close(info.cpu(), torch.tensor([0, 1], dtype=torch.int32))
