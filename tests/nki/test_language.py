"""NKI language semantics on the host CPU (nki.simulate_kernel), against numpy.

Each kernel here exercises one part of the language: memories and their movement, indexing
(slices, nl.ds, nl.arange/nl.mgrid expressions, masks), loops and the SPMD grid, elementwise math
and its dtypes, reductions, the Tensor Engine, and the ISA's two calling conventions.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import nki
import nki.isa as nisa
import nki.language as nl

rng = np.random.default_rng(0)


def rand(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def close(actual, expected, rtol=1e-6, atol=1e-6):
    np.testing.assert_allclose(np.asarray(actual, np.float64), np.asarray(expected, np.float64), rtol=rtol, atol=atol)


@nki.jit
def copy_kernel(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.load(a))
    return out


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.int32, ml_dtypes.float8_e4m3fn])
def test_load_store_round_trip_keeps_bits(dtype):
    a = rand(64, 33).astype(dtype)
    out = nki.simulate_kernel(copy_kernel, a)
    assert out.dtype == a.dtype
    np.testing.assert_array_equal(out.view(np.uint8), a.view(np.uint8))


@nki.jit
def tiled_add(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    rows, cols = a.shape
    for i in nl.affine_range(rows // 128):
        for j in nl.sequential_range(cols // 256):
            x = nl.load(a[i * 128 : (i + 1) * 128, nl.ds(j * 256, 256)])
            y = nl.load(b[i * 128 : (i + 1) * 128, nl.ds(j * 256, 256)])
            nl.store(out[i * 128 : (i + 1) * 128, nl.ds(j * 256, 256)], value=nl.add(x, y))
    return out


def test_tiled_loops_with_slices_and_ds():
    a, b = rand(256, 512), rand(256, 512)
    close(nki.simulate_kernel(tiled_add, a, b), a + b)


@nki.jit
def spmd_add(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    ix = nl.program_id(0) * 128 + nl.arange(128)[:, None]
    iy = nl.program_id(1) * 64 + nl.arange(64)[None, :]
    nl.store(out[ix, iy], value=nl.load(a[ix, iy]) + nl.load(b[ix, iy]))
    return out


def test_spmd_grid_programs_share_the_output():
    a, b = rand(256, 128), rand(256, 128)
    close(nki.simulate_kernel(spmd_add[2, 2], a, b), a + b)


@nki.jit
def grid_info(a):
    out = nl.ndarray((4, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    value = i * 100 + nl.num_programs(0) * 10 + nl.num_programs()
    nl.store(out[i : i + 1, :], value=value)
    return out


def test_program_id_and_num_programs():
    out = nki.simulate_kernel(grid_info[4], np.zeros((1, 1), np.float32))
    np.testing.assert_array_equal(out[:, 0], [44, 144, 244, 344])


@nki.jit
def masked_square(a):
    out = nl.ndarray((64, 200), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(256)[None, :]
    tile = nl.load(a[i_p, i_f], mask=(i_p < 64) & (i_f < 200))
    squared = nl.square(tile, mask=(i_p < 64) & (i_f < 200))
    nl.store(out[i_p, i_f], value=squared, mask=(i_p < 64) & (i_f < 200))
    return out


def test_masks_allow_out_of_bound_indices_they_exclude():
    """The index expressions reach past the 64 x 200 tensor; the mask rules those elements out."""
    a = rand(64, 200)
    close(nki.simulate_kernel(masked_square, a), a * a)


@nki.jit
def mgrid_transpose_kernel(a):
    out = nl.ndarray((a.shape[1], a.shape[0]), dtype=a.dtype, buffer=nl.shared_hbm)
    grid = nl.mgrid[0 : a.shape[0], 0 : a.shape[1]]
    tile = nl.load(a[grid.p, grid.x])
    i_p, i_f = nl.mgrid[0 : a.shape[1], 0 : a.shape[0]]
    nl.store(out[i_p, i_f], value=nl.transpose(tile))
    return out


def test_mgrid_indexing_and_transpose():
    a = rand(96, 80)
    close(nki.simulate_kernel(mgrid_transpose_kernel, a), a.T)


@nki.jit
def strided_kernel(a):
    out = nl.ndarray((64, 32), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(64)[:, None]
    i_f = nl.arange(32)[None, :]
    nl.store(out, value=nl.load(a[2 * i_p + 1, 3 * i_f]))
    return out


def test_strided_arange_expressions():
    a = rand(129, 96)
    close(nki.simulate_kernel(strided_kernel, a), a[1::2, ::3][:64, :32])


@nki.jit
def uninitialised_kernel(a):
    out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out[:, 0:4], value=nl.load(a))
    return out


def test_memory_nothing_wrote_reads_as_nan():
    a = rand(128, 4)
    out = nki.simulate_kernel(uninitialised_kernel, a)
    close(out[:, :4], a)
    assert np.isnan(out[:, 4:]).all()


@nki.jit
def dtype_kernel(a, b):
    out_bf16 = nl.ndarray(a.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
    out_f32 = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    out_int = nl.ndarray(a.shape, dtype=nl.int32, buffer=nl.shared_hbm)
    x, y = nl.load(a), nl.load(b)
    nl.store(out_bf16, value=nl.multiply(x, y))  # bf16 x bf16 keeps bf16 (float32 math, one rounding)
    nl.store(out_f32, value=nl.multiply(x, y, dtype=nl.float32))
    nl.store(out_int, value=nl.greater(x, y, dtype=nl.int32))
    return out_bf16, out_f32, out_int


def test_elementwise_dtypes_compute_in_float32():
    a = rand(128, 16).astype(ml_dtypes.bfloat16)
    b = rand(128, 16).astype(ml_dtypes.bfloat16)
    product = a.astype(np.float32) * b.astype(np.float32)
    out_bf16, out_f32, out_int = nki.simulate_kernel(dtype_kernel, a, b)
    assert out_bf16.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(out_bf16, product.astype(ml_dtypes.bfloat16))
    np.testing.assert_array_equal(out_f32, product)
    np.testing.assert_array_equal(out_int, (a.astype(np.float32) > b.astype(np.float32)).astype(np.int32))


UNARY = {
    "exp": np.exp,
    "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "relu": lambda x: np.maximum(x, 0),
    "silu": lambda x: x / (1 + np.exp(-x)),
    "rsqrt": lambda x: 1 / np.sqrt(np.abs(x) + 1),
    "sin": np.sin,
    "square": np.square,
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_functions(name):
    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        tile = nl.load(a)
        if name == "rsqrt":
            tile = nl.add(nl.abs(tile), 1.0)
        nl.store(out, value=getattr(nl, name)(tile))
        return out

    a = rand(128, 64)
    close(nki.simulate_kernel(kernel, a), UNARY[name](a), rtol=2e-6)


@nki.jit
def operators_kernel(a, b):
    out = nl.ndarray((5, *a.shape), dtype=a.dtype, buffer=nl.shared_hbm)
    x, y = nl.load(a), nl.load(b)
    nl.store(out[0], value=x * 2.0 + y)
    nl.store(out[1], value=(x - y) / (nl.abs(y) + 1))
    nl.store(out[2], value=-x)
    nl.store(out[3], value=nl.maximum(x, y))
    nl.store(out[4], value=x**2)
    return out


def test_operators_and_broadcasting_numbers():
    a, b = rand(128, 32), rand(128, 32)
    out = nki.simulate_kernel(operators_kernel, a, b)
    close(out[0], a * 2 + b)
    close(out[1], (a - b) / (np.abs(b) + 1), rtol=1e-6)
    close(out[2], -a)
    close(out[3], np.maximum(a, b))
    close(out[4], a**2)


@nki.jit
def reduction_kernel(a):
    sums = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    maxes = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    means = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    softmax = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    tile = nl.load(a)
    nl.store(sums, value=nl.sum(tile, axis=(1, 2)))
    nl.store(maxes, value=nl.max(tile, axis=[1, 2]))
    nl.store(means, value=nl.mean(tile, axis=2))
    nl.store(softmax, value=nl.softmax(tile, axis=2))
    return sums, maxes, means, softmax


def test_reductions_over_free_axes():
    a = rand(128, 4, 32)
    sums, maxes, means, softmax = nki.simulate_kernel(reduction_kernel, a)
    close(sums[:, 0], a.sum(axis=(1, 2)), rtol=1e-5, atol=1e-5)
    close(maxes[:, 0], a.max(axis=(1, 2)))
    close(means, a.mean(axis=2), atol=1e-6)
    expected = np.exp(a - a.max(axis=2, keepdims=True))
    close(softmax, expected / expected.sum(axis=2, keepdims=True), atol=1e-6)


@nki.jit
def masked_reductions_kernel(a):
    # A partial last tile: 300 valid columns of a 512-wide one, and 100 of 128 partitions.
    rows, cols = a.shape
    out = nl.ndarray((128, 9), dtype=nl.float32, buffer=nl.shared_hbm)
    softmax = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    i, j = nl.arange(128)[:, None], nl.arange(512)[None, :]
    valid = (i < rows) & (j < cols)
    t = nl.load(a[i, j], mask=valid)
    nl.store(out[:, 0:1], nl.sum(t, axis=1, keepdims=True, mask=valid), mask=i < rows)
    nl.store(out[:, 1:2], nl.max(t, axis=1, keepdims=True, mask=valid), mask=i < rows)
    nl.store(out[:, 2:3], nl.min(t, axis=1, keepdims=True, mask=valid), mask=i < rows)
    nl.store(out[:, 3:4], nl.prod(nl.add(nl.abs(t), 0.5), axis=1, keepdims=True, mask=valid), mask=i < rows)
    nl.store(out[:, 4:5], nl.mean(t, axis=1, keepdims=True, mask=valid), mask=i < rows)
    nl.store(out[:, 5:6], nl.var(t, axis=1, mask=valid), mask=i < rows)
    nl.store(out[:, 6:7], nisa.tensor_reduce(nl.add, t, axis=1, keepdims=True, mask=valid), mask=i < rows)
    nl.store(out[:, 7:8], nl.all(nl.greater(t, -100.0), axis=1, mask=valid), mask=i < rows)
    activated = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation_reduce(op=nl.exp, data=t, reduce_op=nl.add, reduce_res=activated, mask=valid)
    nl.store(out[:, 8:9], activated, mask=i < rows)
    nl.store(softmax[i, j], nl.softmax(t, axis=1, mask=valid), mask=valid)
    return out, softmax


def test_masked_reductions_reduce_the_masked_elements_alone():
    # A mask bounds an instruction's iteration domain: elements it leaves out (uninitialised,
    # NaN here) are no part of a sum, max, mean or softmax (helper-60: every result was NaN).
    a = rand(100, 300)
    out, softmax = nki.simulate_kernel(masked_reductions_kernel, a)
    out, softmax = out[:100], softmax[:100, :300]
    close(out[:, 0], a.sum(axis=1), rtol=1e-5, atol=1e-5)
    close(out[:, 1], a.max(axis=1))
    close(out[:, 2], a.min(axis=1))
    close(out[:, 3], np.prod(np.abs(a) + 0.5, axis=1), rtol=1e-4)
    close(out[:, 4], a.mean(axis=1), atol=1e-6)
    close(out[:, 5], a.var(axis=1), rtol=1e-5)
    close(out[:, 6], a.sum(axis=1), rtol=1e-5, atol=1e-5)
    close(out[:, 7], np.ones(100))
    close(out[:, 8], np.exp(a).sum(axis=1), rtol=1e-5)
    expected = np.exp(a - a.max(axis=1, keepdims=True))
    close(softmax, expected / expected.sum(axis=1, keepdims=True), atol=1e-6)


@nki.jit
def integer_division_kernel(x, y):
    true_quotient = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    quotient = nl.ndarray(x.shape, dtype=nl.int32, buffer=nl.shared_hbm)
    scaled = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    a, b = nl.load(x), nl.load(y)
    nl.store(true_quotient, nl.divide(a, b, dtype=nl.float32))
    nl.store(quotient, nl.divide(a, b))
    nl.store(scaled, nisa.tensor_scalar(a, nl.divide, 4, dtype=nl.float32))
    return true_quotient, quotient, scaled


def test_integer_division_is_true_division_into_floats_and_truncates_into_integers():
    # Into a float tile the engines compute in float32; int32 into int32 divides as GpSimd's
    # integers do, toward zero (helper-60: floor division gave -8 for -15 / 2).
    x = np.array([[-15, -4, 7, 9]], np.int32)
    y = np.array([[2, 3, 2, -4]], np.int32)
    true_quotient, quotient, scaled = nki.simulate_kernel(integer_division_kernel, x, y)
    close(true_quotient, x / y)
    np.testing.assert_array_equal(quotient, np.trunc(x / y).astype(np.int32))
    close(scaled, x / 4)


@nki.jit
def matmul_kernel(x_t, x, y):
    out = nl.ndarray((2, x.shape[0], y.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    transposed = nl.matmul(nl.load(x_t), nl.load(y), transpose_x=True)
    plain = nl.matmul(nl.load(x), nl.load(y))
    nl.store(out[0], value=nl.copy(transposed))
    nl.store(out[1], value=nl.copy(plain))
    return out


def test_nl_matmul_with_and_without_transpose_x():
    x, y = rand(64, 128), rand(128, 256)
    out = nki.simulate_kernel(matmul_kernel, np.ascontiguousarray(x.T), x, y)
    close(out[0], x @ y, rtol=1e-5, atol=1e-4)
    close(out[1], x @ y, rtol=1e-5, atol=1e-4)


@nki.jit
def psum_kernel(lhs_t, rhs):
    k, m = lhs_t.shape
    legacy = nl.ndarray((m, rhs.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    current = nl.ndarray((m, rhs.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    # legacy: a zeroed PSUM tile += the returned matmuls
    acc = nl.zeros((m, rhs.shape[1]), nl.float32, buffer=nl.psum)
    for i in nl.affine_range(k // 128):
        acc += nisa.nc_matmul(nl.load(lhs_t[i * 128 : (i + 1) * 128]), nl.load(rhs[i * 128 : (i + 1) * 128]))
    nl.store(legacy, acc)
    # current: accumulate=None overwrites first, then adds; reading the result ends the accumulation
    res = nl.ndarray((m, rhs.shape[1]), dtype=nl.float32, buffer=nl.psum)
    for _ in range(2):
        for i in nl.affine_range(k // 128):
            stationary = nl.ndarray((128, m), dtype=lhs_t.dtype, buffer=nl.sbuf)
            moving = nl.ndarray((128, rhs.shape[1]), dtype=rhs.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=stationary, src=lhs_t[i * 128 : (i + 1) * 128])
            nisa.dma_copy(dst=moving, src=rhs[i * 128 : (i + 1) * 128])
            nisa.nc_matmul(dst=res, stationary=stationary, moving=moving)
        result = nl.ndarray(res.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=result, src=res)
    nisa.dma_copy(dst=current, src=result)
    return legacy, current


def test_psum_accumulation_in_both_dialects():
    lhs_t, rhs = rand(384, 96), rand(384, 320)
    legacy, current = nki.simulate_kernel(psum_kernel, lhs_t, rhs)
    close(legacy, lhs_t.T @ rhs, rtol=1e-5, atol=1e-4)
    close(current, lhs_t.T @ rhs, rtol=1e-5, atol=1e-4)


@nki.jit
def isa_kernel(a, scale_col):
    out = nl.ndarray((7, *a.shape), dtype=nl.float32, buffer=nl.shared_hbm)
    sums = nl.ndarray((a.shape[0], 2), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.load(a)
    col = nl.load(scale_col)
    t = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(t, x, nl.multiply, col, op1=nl.subtract, operand1=1.0, reverse1=True)  # 1 - x * col
    nl.store(out[0], t)
    nl.store(out[1], nisa.tensor_tensor(x, t, op=nl.add))
    nl.store(out[2], nisa.activation(op=nl.exp, data=x, bias=col, scale=0.5))
    reduced = nl.ndarray((a.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nl.store(
        out[3],
        nisa.activation(
            op=nl.square, data=x, reduce_op=nl.add, reduce_res=reduced, reduce_cmd=nisa.reduce_cmd.reset_reduce
        ),
    )
    nl.store(sums[:, 0:1], reduced)
    nl.store(sums[:, 1:2], nisa.tensor_reduce(op=nl.add, data=x, axis=1, negate=True))
    nl.store(out[4], nisa.reciprocal(nisa.tensor_copy(x, dtype=nl.float32)))
    filled = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=filled, value=2.5)
    nl.store(out[5], filled)
    nl.store(out[6], nisa.memset((a.shape[0], a.shape[1]), -1.0, nl.float32))
    return out, sums


def test_isa_instructions_in_both_calling_conventions():
    a, col = rand(128, 48), rand(128, 1)
    out, sums = nki.simulate_kernel(isa_kernel, a, col)
    t = 1 - a * col
    close(out[0], t)
    close(out[1], a + t)
    close(out[2], np.exp(a * 0.5 + col), rtol=2e-6)
    close(out[3], a * a)
    close(sums[:, 0], (a * a).sum(axis=1), rtol=1e-5)
    close(sums[:, 1], -a.sum(axis=1), rtol=1e-5, atol=1e-5)
    close(out[4], 1 / a, rtol=1e-6)
    assert (out[5] == 2.5).all() and (out[6] == -1).all()


@nki.jit
def transpose_iota_kernel(a):
    out = nl.ndarray((a.shape[1], a.shape[0]), dtype=a.dtype, buffer=nl.shared_hbm)
    dma = nl.ndarray((a.shape[1], a.shape[0]), dtype=a.dtype, buffer=nl.shared_hbm)
    iota = nl.ndarray((128, 6), dtype=nl.int32, buffer=nl.shared_hbm)
    iota_legacy = nl.ndarray((1, 8), dtype=nl.int32, buffer=nl.shared_hbm)
    psum_t = nisa.nc_transpose(nl.load(a))
    nl.store(out, nisa.tensor_copy(psum_t))
    nl.store(dma, nisa.dma_transpose(nl.load(a)))
    t = nl.ndarray((128, 6), dtype=nl.int32, buffer=nl.sbuf)
    nisa.iota(t, [[10, 2], [1, 3]], offset=5, channel_multiplier=100)
    nl.store(iota, t)
    nl.store(iota_legacy, nisa.iota(nl.arange(8)[None, :] * 3, dtype=nl.int32))
    return out, dma, iota, iota_legacy


def test_transposes_and_iota():
    a = rand(96, 112)
    out, dma, iota, iota_legacy = nki.simulate_kernel(transpose_iota_kernel, a)
    np.testing.assert_array_equal(out, a.T)
    np.testing.assert_array_equal(dma, a.T)
    expected = 5 + 100 * np.arange(128)[:, None] + (10 * np.arange(2)[:, None] + np.arange(3)).reshape(1, -1)
    np.testing.assert_array_equal(iota, expected)
    np.testing.assert_array_equal(iota_legacy[0], np.arange(8) * 3)


@nki.jit
def writes_argument(a, out):
    nl.store(out[0:64], value=nl.load(a[0:64]) * 3.0)


def test_kernel_writing_an_argument_updates_the_array():
    a, out = rand(128, 8), np.zeros((128, 8), np.float32)
    assert nki.simulate_kernel(writes_argument, a, out) is None
    close(out[:64], a[:64] * 3)
    assert (out[64:] == 0).all()


@nki.jit
def helper(tile):
    return nl.multiply(tile, tile)


@nki.jit
def calls_helper(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, helper(nl.load(a)))
    return out


def test_kernel_called_from_a_kernel_runs_inline():
    a = rand(32, 8)
    close(nki.simulate(calls_helper)(a), a * a)


def test_legacy_dialect_is_the_same_implementation():
    import neuronxcc.nki.isa as legacy_isa
    import neuronxcc.nki.language as legacy_nl

    import neuronxcc.nki as legacy_nki

    assert legacy_nl is nl and legacy_isa is nisa and legacy_nki.jit is nki.jit
    a = rand(16, 8)
    close(legacy_nki.simulate_kernel(copy_kernel, a), a)


def test_a_trace_is_reused_for_the_same_signature():
    kernel = nki.jit(copy_kernel.fn)
    a = rand(8, 8)
    nki.simulate_kernel(kernel, a)
    nki.simulate_kernel(kernel, rand(8, 8))
    nki.simulate_kernel(kernel, rand(16, 8))
    assert len(kernel.traces.entries) == 2
