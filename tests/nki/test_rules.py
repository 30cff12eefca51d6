"""The hardware's and the language's rules: a kernel that breaks one raises, with NKI's error name
and wording and the kernel's source line, before anything runs.

Each kernel marks its offending line with a ``# breaks`` comment; the error must point at it.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import nki
import nki.isa as nisa
import nki.language as nl
from nki import errors


def breaking_line(kernel) -> int:
    lines, first = inspect.getsourcelines(kernel.fn if isinstance(kernel, nki.Kernel) else kernel)
    return first + next(i for i, line in enumerate(lines) if "# breaks" in line)


def check(kernel, arrays, code, kind, wording):
    with pytest.raises(kind) as raised:
        nki.simulate_kernel(kernel, *arrays)
    error = raised.value
    assert isinstance(error, errors.NKIError)
    assert error.code == code
    assert wording in str(error)
    assert error.location is not None and error.location.lineno == breaking_line(kernel)
    assert f"in kernel '{kernel.name}'" in str(error)
    assert errors.ERRORS_PAGE in str(error)


def f32(*shape):
    return np.ones(shape, np.float32)


@nki.jit
def too_many_partitions(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    tile = nl.load(a)  # breaks
    nl.store(out, tile)
    return out


@nki.jit
def sbuf_allocation_too_tall(a):
    tile = nl.zeros((256, 16), dtype=nl.float32, buffer=nl.sbuf)  # breaks
    return tile


@nki.jit
def psum_too_large(a):
    acc = nl.ndarray((128, 4608), dtype=nl.float32, buffer=nl.psum)  # breaks
    return acc


@nki.jit
def moving_too_wide(a, b):
    out = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nisa.nc_matmul(nl.load(a), nl.load(b)))  # breaks
    return out


@nki.jit
def stationary_too_wide(a, b):
    acc = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(acc, nl.load(a), nl.load(b))  # breaks
    return acc


@nki.jit
def contraction_mismatch(a, b):
    acc = nl.ndarray((64, 32), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=nl.load(a), moving=nl.load(b))  # breaks
    return acc


@nki.jit
def matmul_into_sbuf(a, b):
    acc = nl.ndarray((64, 32), dtype=nl.float32, buffer=nl.sbuf)
    nisa.nc_matmul(dst=acc, stationary=nl.load(a), moving=nl.load(b))  # breaks
    return acc


@nki.jit
def matmul_int_operand(a, b):
    out = nl.ndarray((64, 32), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nisa.nc_matmul(nl.load(a), nl.load(b)))  # breaks
    return out


@nki.jit
def matmul_into_bf16_psum(a, b):
    acc = nl.ndarray((64, 32), dtype=nl.bfloat16, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=nl.load(a), moving=nl.load(b))  # breaks
    return acc


@nki.jit
def compute_on_hbm(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.exp(a))  # breaks
    return out


@nki.jit
def load_from_sbuf(a):
    tile = nl.load(a)
    return nl.load(tile)  # breaks


@nki.jit
def activation_int_bias(a, bias):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nisa.activation(op=nl.exp, data=nl.load(a), bias=nl.load(bias)))  # breaks
    return out


@nki.jit
def activation_wide_scale(a, scale):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nisa.activation(op=nl.exp, data=nl.load(a), scale=nl.load(scale)))  # breaks
    return out


@nki.jit
def tensor_tensor_partition_mismatch(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nisa.tensor_tensor(nl.load(a), nl.load(b), op=nl.add))  # breaks
    return out


@nki.jit
def slice_out_of_bound(a):
    out = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(a[0:128, 0:64]))  # breaks
    return out


@nki.jit
def arange_out_of_bound(a):
    out = nl.ndarray((128, 100), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.arange(128)[:, None], nl.arange(128)[None, :]
    nl.store(out[i_p, i_f], value=0.0)  # breaks
    return out


@nki.jit
def one_d_arange(a):
    i = nl.arange(64)
    return nl.load(a[i, 0])  # breaks


@nki.jit
def mixed_indexing(a):
    i = nl.arange(64)[:, None]
    return nl.load(a[i, :])  # breaks


@nki.jit
def output_never_written(a):  # breaks
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for _ in nl.affine_range(a.shape[0] // 256):
        nl.store(out, nl.load(a))
    return out


@nki.jit
def transpose_too_wide(a):
    out = nl.ndarray((256, 128), dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.transpose(nl.load(a)))  # breaks
    return out


@nki.jit
def transpose_3d(a):
    return nl.transpose(nl.load(a))  # breaks


@nki.jit
def store_larger_value(a):
    out = nl.ndarray((128, 1), dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(a))  # breaks
    return out


@nki.jit
def control_flow_on_tile(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    tile = nl.load(a)
    if tile:  # breaks
        nl.store(out, tile)
    return out


@nki.jit
def control_flow_on_arange(a):
    i = nl.arange(4)[None, :]
    if i > 2:  # breaks
        pass
    return a


@nki.jit
def program_id_axis(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out[nl.program_id(1)], nl.load(a[0]))  # breaks
    return out


@nki.jit
def block_tile_as_operand(a):
    blocks = nl.zeros((4, nl.par_dim(128), 32), dtype=nl.float32, buffer=nl.sbuf)
    return nl.exp(blocks)  # breaks


RULES = [
    (
        too_many_partitions,
        [f32(256, 8)],
        "err_num_partition_exceed_arch_limit",
        errors.NKIValueError,
        "number of partitions 256 exceed architecture limitation of 128.",
    ),
    (
        sbuf_allocation_too_tall,
        [f32(1, 1)],
        "err_num_partition_exceed_arch_limit",
        ValueError,
        "number of partitions 256 exceed architecture limitation of 128.",
    ),
    (
        psum_too_large,
        [f32(1, 1)],
        "err_stack_overflow_psum",
        RuntimeError,
        "required psum banks 9 exceeds available psum banks 8",
    ),
    (
        moving_too_wide,
        [f32(128, 128), f32(128, 1024)],
        "err_size_of_dimension_exceed_arch_limit",
        ValueError,
        "size of dimension 1 in 'moving[128, 1024]' of 'nc_matmul' exceed architecture limitation of 512.",
    ),
    (
        stationary_too_wide,
        [f32(128, 256), f32(128, 64)],
        "err_size_of_dimension_exceed_arch_limit",
        ValueError,
        "size of dimension 1 in 'stationary[128, 256]' of 'nc_matmul' exceed architecture limitation of 128.",
    ),
    (
        contraction_mismatch,
        [f32(128, 64), f32(64, 32)],
        "err_num_partition_mismatch",
        ValueError,
        "mismatch in parameters (stationary[128, 64], moving[64, 32]) of 'nc_matmul'",
    ),
    (
        matmul_into_sbuf,
        [f32(128, 64), f32(128, 32)],
        "err_unsupported_memory",
        TypeError,
        "Expected operand 'dst' of 'nc_matmul' to be in address space 'psum', but got a tile in 'sbuf' instead.",
    ),
    (
        matmul_int_operand,
        [np.ones((128, 64), np.int32), f32(128, 32)],
        "err_supported_operand_dtype",
        TypeError,
        "'stationary' of 'nc_matmul' has dtype int32",
    ),
    (
        matmul_into_bf16_psum,
        [f32(128, 64), f32(128, 32)],
        "err_supported_operand_dtype",
        TypeError,
        "'dst' of 'nc_matmul' has dtype bfloat16, expected one of the following dtypes: float32",
    ),
    (
        compute_on_hbm,
        [f32(128, 8)],
        "err_unsupported_memory",
        TypeError,
        "Expected operand 'x' of 'exp' to be in address space 'psum|sbuf', but got a tile in 'hbm' instead.",
    ),
    (
        load_from_sbuf,
        [f32(128, 8)],
        "err_unsupported_memory",
        TypeError,
        "Expected operand 'src' of 'load' to be in address space 'hbm', but got a tile in 'sbuf' instead.",
    ),
    (
        activation_int_bias,
        [f32(128, 8), np.ones((128, 1), np.int8)],
        "err_activation_bias_invalid_type",
        TypeError,
        "'bias' param of 'activation' must be a vector of type float32, float16, or bfloat16, got 'int8'",
    ),
    (
        activation_wide_scale,
        [f32(128, 8), f32(128, 2)],
        "err_activation_scale_scalar_or_vector",
        ValueError,
        "'scale' param of 'activation' must be either a scalar value or a vector of shape [128, 1]",
    ),
    (
        tensor_tensor_partition_mismatch,
        [f32(128, 8), f32(1, 8)],
        "err_num_partition_mismatch",
        ValueError,
        "mismatch in parameters (data1[128, 8], data2[1, 8]) of 'tensor_tensor'",
    ),
    (
        slice_out_of_bound,
        [f32(128, 32)],
        "err_tensor_access_out_of_bound",
        IndexError,
        "Out-of-bound access for tensor `a` on dimension 1: index range [0, 63] exceed dimension size of 32",
    ),
    (
        arange_out_of_bound,
        [f32(1, 1)],
        "err_tensor_access_out_of_bound",
        IndexError,
        "on dimension 1: index range [0, 127] exceed dimension size of 100",
    ),
    (
        one_d_arange,
        [f32(128, 8)],
        "err_1d_arange_not_supported",
        errors.NKISyntaxError,
        "indexing tensor `a` with 1d arange is not supported",
    ),
    (
        mixed_indexing,
        [f32(128, 8)],
        "err_unsupported_mixing_basic_advanced_tensor_indexing",
        errors.NKISyntaxError,
        "Mixing basic tensor indexing and advanced tensor indexing is not supported.",
    ),
    (output_never_written, [f32(128, 8)], "err_tensor_output_not_written_to", ValueError, "never written to"),
    (
        transpose_too_wide,
        [f32(128, 256)],
        "err_size_of_dimension_exceed_arch_limit",
        ValueError,
        "size of dimension 1 in 'x[128, 256]' of 'transpose' exceed architecture limitation of 128.",
    ),
    (
        transpose_3d,
        [f32(64, 4, 2)],
        "err_exceed_max_supported_dimension",
        ValueError,
        "parameter 'x[64, 4, 2]' of 'transpose' exceed max supported number of dimensions of 2.",
    ),
    (
        store_larger_value,
        [f32(128, 8)],
        "err_store_dst_shape_smaller_than_other_shape",
        ValueError,
        "Illegal assignment destination shape in 'store': shape [128, 1] of parameter",
    ),
    (
        control_flow_on_tile,
        [f32(128, 8)],
        "err_dynamic_control_flow_not_supported",
        errors.NKISyntaxError,
        "dynamic control-flow depending on tensor value is not supported.",
    ),
    (
        control_flow_on_arange,
        [f32(128, 8)],
        "err_control_flow_condition_depending_on_arange",
        errors.NKISyntaxError,
        "Control-flow depending on `nl.arange` or `nl.mgrid` is not supported",
    ),
    (
        program_id_axis[2],
        [f32(2, 8)],
        "err_program_id_axis_out_of_bounds",
        IndexError,
        "axis in `program_id` is out-of-bound(s) of the spmd launch grid (axis=1, grid rank 1)",
    ),
    (
        block_tile_as_operand,
        [f32(1, 1)],
        "err_failed_to_infer_tile_from_local_tensor",
        errors.NKISyntaxError,
        "Failed to infer tile from tensor",
    ),
]


@pytest.mark.parametrize(("kernel", "arrays", "code", "kind", "wording"), RULES, ids=[r[0].name for r in RULES])
def test_rule_violation_raises_before_running(kernel, arrays, code, kind, wording):
    check(kernel, arrays, code, kind, wording)


def test_nki_api_outside_a_kernel():
    with pytest.raises(RuntimeError, match="err_nki_api_outside_of_nki_kernel: calling NKI API outside of NKI kernels"):
        nl.zeros((4, 4), dtype=nl.float32)


def test_kernel_with_grid_called_from_a_kernel():
    @nki.jit
    def inner(a):
        return a

    @nki.jit
    def outer(a):
        return inner[2](a)  # breaks

    with pytest.raises(
        errors.NKISyntaxError, match=r"err_nested_kernel_with_spmd_grid: Calling kernel with spmd grid \(inner\[2\]\)"
    ):
        nki.simulate_kernel(outer, f32(4, 4))


def test_rule_limits_follow_the_platform_target():
    """NeuronCore-v4 (trn3) takes a moving operand of up to 4096 columns (8 PSUM banks of float32)."""

    @nki.jit(platform_target="trn3")
    def wide(a, b):
        acc = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(acc, nl.load(a), nl.load(b))
        out = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, acc)
        return out

    a, b = np.eye(128, dtype=np.float32), np.arange(128 * 1024, dtype=np.float32).reshape(128, 1024) / 1000
    np.testing.assert_allclose(nki.simulate_kernel(wide, a, b), b, rtol=1e-6)
    with pytest.raises(ValueError, match="err_size_of_dimension_exceed_arch_limit"):
        nki.simulate_kernel(moving_too_wide, a, b)


def test_a_kernel_assert_names_the_kernel_and_arguments():
    @nki.jit
    def needs_512(a):
        assert a.shape[1] == 512, f"expected 512 columns, got {a.shape[1]}"
        return a

    with pytest.raises(AssertionError, match="expected 512 columns, got 8") as raised:
        nki.simulate_kernel(needs_512, f32(128, 8))
    assert "while tracing NKI kernel 'needs_512' for (a: float32[128, 8])" in raised.value.__notes__
