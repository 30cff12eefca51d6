"""Argument errors of ops whose PyTorch meta kernel checks less than ATen or words it otherwise:
neuron raises ATen's exception and message (CPU and CUDA share these checks), in eager and in
compiled graphs (torch_neuronx/_compat/aten_checks.py)."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from torch_neuronx._compat.aten_checks import CHECKS


def _ones(*shape, device, dtype=torch.float32):
    return torch.ones(*shape, device=device, dtype=dtype)


def _labels(*shape, device):
    return torch.zeros(*shape, device=device, dtype=torch.long)


def _mask(*shape, device):
    return torch.ones(*shape, device=device, dtype=torch.bool)


#: Each call raises on the CPU; neuron raised another message, another exception type, or nothing.
ATEN_CHECKED = {
    # v2.4.0 test_unary_ufuncs: isposinf/isneginf's structured meta words a non-bool out= itself
    "isposinf_into_float_out": lambda d: torch.isposinf(_ones(2, device=d), out=_ones(2, device=d)),
    "isneginf_into_int_out": lambda d: torch.isneginf(_ones(2, device=d), out=_ones(2, device=d, dtype=torch.int32)),
    # v2.4.0 test_foreach: PyTorch's meta kernel worded it as an out= dtype error
    "foreach_abs__of_complex": lambda d: torch._foreach_abs_([_ones(3, device=d, dtype=torch.complex64)]),
    "mm_of_3d_self": lambda d: torch.mm(_ones(2, 3, 4, device=d), _ones(4, 5, device=d)),
    "mm_of_3d_mat2": lambda d: torch.mm(_ones(2, 3, device=d), _ones(3, 4, 5, device=d)),
    "addmm_of_1d_mat1": lambda d: torch.addmm(_ones(3, device=d), _ones(3, device=d), _ones(3, 4, device=d)),
    # ADDMM_META checks dtypes before ranks: neuron said "mat1 must be a matrix".
    "addmm_dtypes_before_ranks": lambda d: torch.addmm(
        _ones(3, 4, device=d, dtype=torch.float16), _ones(3, device=d), _ones(3, 4, device=d)
    ),
    "addmm_mat_dtypes_before_ranks": lambda d: torch.addmm(
        _ones(3, 4, device=d), _ones(3, device=d, dtype=torch.float16), _ones(3, 4, device=d)
    ),
    "addmm_self_not_expandable": lambda d: torch.addmm(
        _ones(3, 7, device=d), _ones(2, 3, device=d), _ones(3, 4, device=d)
    ),
    "mv_of_3d": lambda d: torch.mv(_ones(2, 3, 4, device=d), _ones(4, device=d)),
    "addmv_self_size": lambda d: torch.addmv(_ones(5, device=d), _ones(2, 3, device=d), _ones(3, device=d)),
    "flip_repeated_dim": lambda d: torch.flip(_ones(2, 3, device=d), (0, 0)),
    "flip_repeated_wrapped_dim": lambda d: torch.flip(_ones(2, 3, device=d), (1, -1)),
    "masked_fill_broadcast": lambda d: _ones(2, 3, device=d).masked_fill(_mask(4, 3, device=d), 1.0),
    "masked_select_broadcast": lambda d: torch.masked_select(_ones(2, 3, device=d), _mask(4, 3, device=d)),
    "masked_scatter_broadcast": lambda d: _ones(2, 3, device=d).masked_scatter(
        _mask(4, 3, device=d), _ones(12, device=d)
    ),
    "pixel_shuffle_channels": lambda d: F.pixel_shuffle(_ones(1, 3, 4, 4, device=d), 2),
    "pixel_shuffle_2d": lambda d: F.pixel_shuffle(_ones(4, 4, device=d), 2),
    "pixel_shuffle_factor_0": lambda d: F.pixel_shuffle(_ones(1, 4, 4, 4, device=d), 0),
    "pixel_unshuffle_height": lambda d: F.pixel_unshuffle(_ones(1, 1, 3, 4, device=d), 2),
    "pixel_unshuffle_width": lambda d: F.pixel_unshuffle(_ones(1, 1, 4, 3, device=d), 2),
    "pixel_unshuffle_2d": lambda d: F.pixel_unshuffle(_ones(4, 4, device=d), 2),
    "pixel_unshuffle_factor_0": lambda d: F.pixel_unshuffle(_ones(1, 1, 4, 4, device=d), 0),
    "layer_norm_shape": lambda d: F.layer_norm(_ones(2, 3, device=d), (4,)),
    "layer_norm_two_dims": lambda d: F.layer_norm(_ones(2, 3, 4, device=d), (3, 5)),
    "layer_norm_more_dims_than_input": lambda d: F.layer_norm(_ones(3, device=d), (2, 3)),
    "layer_norm_weight": lambda d: F.layer_norm(_ones(2, 3, device=d), (3,), weight=_ones(4, device=d)),
    "nll_loss_2d_target": lambda d: F.nll_loss(_ones(2, 3, device=d), _labels(2, 2, device=d)),
    "cross_entropy_2d_target": lambda d: F.cross_entropy(_ones(2, 3, device=d), _labels(2, 2, device=d)),
    "nll_loss_3d_input": lambda d: torch.ops.aten.nll_loss_forward(
        _ones(2, 3, 4, device=d), _labels(2, device=d), None, 1, -100
    ),
    "tril_indices_negative_row": lambda d: torch.tril_indices(-1, 3, device=d),
    "triu_indices_negative_col": lambda d: torch.triu_indices(3, -2, device=d),
    "renorm_negative_p": lambda d: torch.renorm(_ones(2, 3, device=d), -1, 0, 1.0),
    "renorm_negative_maxnorm": lambda d: torch.renorm(_ones(2, 3, device=d), 2, 0, -1.0),
    "renorm_1d": lambda d: torch.renorm(_ones(3, device=d), 2, 0, 1.0),
    "unfold_no_blocks": lambda d: F.unfold(_ones(1, 1, 2, 2, device=d), 3),
    "unfold_no_rows": lambda d: F.unfold(_ones(1, 1, 2, 5, device=d), 3),
    "unfold_kernel_0": lambda d: F.unfold(_ones(1, 1, 4, 4, device=d), 0),
    "unfold_stride_0": lambda d: F.unfold(_ones(1, 1, 4, 4, device=d), 2, stride=0),
    "unfold_negative_padding": lambda d: F.unfold(_ones(1, 1, 4, 4, device=d), 2, padding=-1),
    "unfold_dilation_0": lambda d: F.unfold(_ones(1, 1, 4, 4, device=d), 2, dilation=0),
    "unfold_2d": lambda d: F.unfold(_ones(2, 2, device=d), 1),
    "unfold_1d": lambda d: F.unfold(_ones(4, device=d), 2),
    "fold_blocks": lambda d: F.fold(_ones(1, 4, 5, device=d), (3, 3), 2),
    "fold_kernel_0": lambda d: F.fold(_ones(1, 4, 4, device=d), (3, 3), 0),
    "fold_channels": lambda d: F.fold(_ones(1, 5, 4, device=d), (3, 3), 2),
    "fold_no_blocks": lambda d: F.fold(_ones(1, 4, 1, device=d), (1, 1), 2),
    "fold_empty_output": lambda d: F.fold(_ones(1, 4, 0, device=d), (0, 0), 1),
    "ctc_loss_without_classes": lambda d: F.ctc_loss(
        _ones(5, 1, 0, device=d), torch.ones(1, 2, dtype=torch.long, device=d), [5], [2]
    ),
    "stack_sizes": lambda d: torch.stack([_ones(2, device=d), _ones(3, device=d)]),
    "stack_sizes_third": lambda d: torch.stack([_ones(2, device=d), _ones(2, device=d), _ones(3, 1, device=d)]),
    "soft_margin_loss_target_not_broadcastable": lambda d: F.soft_margin_loss(
        _ones(5, 4, device=d), _ones(5, device=d)
    ),
    "soft_margin_loss_target_larger": lambda d: F.soft_margin_loss(_ones(4, device=d), _ones(5, 4, device=d)),
    "multi_margin_loss_empty": lambda d: F.multi_margin_loss(_ones(0, device=d), _labels(1, device=d)),
    "multi_margin_loss_2d_target": lambda d: F.multi_margin_loss(_ones(5, 4, device=d), _labels(5, 4, device=d)),
    "multi_margin_loss_weight": lambda d: F.multi_margin_loss(
        _ones(5, 4, device=d), _labels(5, device=d), weight=_ones(3, device=d)
    ),
    "multi_margin_loss_float_target": lambda d: F.multi_margin_loss(_ones(5, 4, device=d), _ones(5, device=d)),
    "hstack_ranks": lambda d: torch.hstack([_ones(3, device=d), _ones(1, 2, 3, 4, device=d)]),
    "cat_ranks_against_the_first": lambda d: torch.cat(
        [_ones(3, 4, device=d), _ones(3, device=d), _ones(2, 3, 4, device=d)]
    ),
    "cat_sizes_position_counts_empty": lambda d: torch.cat(
        [_ones(0, device=d), _ones(3, 4, device=d), _ones(2, 5, device=d)]
    ),
    "cat_dim_below_range_with_mismatched_sizes": lambda d: torch.cat(
        [_ones(2, 3, device=d), _ones(2, 4, device=d)], -3
    ),
    "cat_dim_far_below_range": lambda d: torch.cat([_ones(2, 3, device=d), _ones(2, 3, device=d)], -5),
    "stack_dim_out_of_range": lambda d: torch.stack([_ones(2, 3, device=d), _ones(2, 4, device=d)], 5),
    "scatter_src_of_lower_rank": lambda d: torch.scatter(
        _ones(3, 5, device=d), 0, _labels(2, 3, device=d), _ones(3, device=d)
    ),
    "max_pool2d_three_kernel_sizes": lambda d: F.max_pool2d(_ones(8, 8, device=d), (1, 2, 3)),
    "conv1d_dilation_0": lambda d: F.conv1d(_ones(1, 2, 8, device=d), _ones(3, 2, 3, device=d), dilation=0),
    "conv2d_dilation_0": lambda d: F.conv2d(_ones(1, 2, 8, 8, device=d), _ones(3, 2, 3, 3, device=d), dilation=0),
    # torch 2.13's ormqr_out: exactly min(m, n) reflectors (fewer computed), its order and words
    "ormqr_fewer_reflectors": lambda d: torch.ormqr(_ones(4, 3, device=d), _ones(1, device=d), _ones(4, 2, device=d)),
    "ormqr_tau_of_higher_rank": lambda d: torch.ormqr(
        _ones(4, 3, device=d), _ones(1, 2, device=d), _ones(4, 2, device=d)
    ),
    # check_addr_scalar (LinearAlgebra.cpp) checks beta before alpha; PyTorch's reference alpha first
    "addr_bool_beta_and_alpha_of_int8": lambda d: torch.addr(
        _ones(2, 2, device=d).to(torch.int8),
        _ones(2, device=d).to(torch.int8),
        _ones(2, device=d).to(torch.int8),
        beta=True,
        alpha=True,
    ),
    "addr_float_alpha_of_int8": lambda d: torch.addr(
        _ones(2, 2, device=d).to(torch.int8),
        _ones(2, device=d).to(torch.int8),
        _ones(2, device=d).to(torch.int8),
        alpha=0.5,
    ),
    "ormqr_tau_of_another_dtype": lambda d: torch.ormqr(
        _ones(4, 3, device=d), _ones(3, device=d).half(), _ones(4, 2, device=d)
    ),
    "ormqr_other_rows_before_tau": lambda d: torch.ormqr(
        _ones(4, 3, device=d), _ones(3, device=d), _ones(2, 2, device=d), left=False
    ),
    "cauchy_sigma_0": lambda d: _ones(3, device=d).cauchy_(0, 0),
    # the samplers check their Scalar before they dispatch on the dtype (DistributionTemplates.h)
    "exponential_of_int_tensor_lambda_negative": lambda d: _ones(3, device=d).int().exponential_(-1.0),
    "cauchy_of_int_tensor_sigma_negative": lambda d: _ones(3, device=d).int().cauchy_(0, -1.0),
    "normal_of_uint8_tensor_std_negative": lambda d: _ones(3, device=d).to(torch.uint8).normal_(0, -1.0),
    "geometric_of_bool_tensor_p_2": lambda d: _ones(3, device=d).bool().geometric_(2.0),
    "exponential_lambda_0": lambda d: _ones(3, device=d).exponential_(0),
    "geometric_p_negative": lambda d: _ones(3, device=d).geometric_(-1),
    "log_normal_std_0": lambda d: _ones(3, device=d).log_normal_(0, 0),
    "softshrink_negative_lambda": lambda d: F.softshrink(_ones(3, device=d), -0.5),
    "embedding_of_0d_weight": lambda d: F.embedding(_labels(2, device=d), _ones(device=d)),
    "slice_scatter_src_shape": lambda d: torch.slice_scatter(_ones(4, 4, device=d), _ones(2, 5, device=d), 0, 0, 2),
    "slice_scatter_src_broadcast": lambda d: torch.slice_scatter(_ones(4, 4, device=d), _ones(1, 4, device=d), 0, 0, 2),
    "slice_scatter_step_0": lambda d: torch.slice_scatter(_ones(4, 4, device=d), _ones(2, 4, device=d), 0, 0, 4, 0),
    "select_scatter_index": lambda d: torch.select_scatter(_ones(4, 4, device=d), _ones(4, device=d), 0, 9),
    "select_scatter_src_broadcast": lambda d: torch.select_scatter(_ones(4, 4, device=d), _ones(1, device=d), 0, 1),
    "diagonal_scatter_src_shape": lambda d: torch.diagonal_scatter(_ones(3, 3, device=d), _ones(4, device=d)),
    "diagonal_scatter_src_broadcast": lambda d: torch.diagonal_scatter(_ones(3, 3, device=d), _ones(1, device=d)),
    "diagonal_scatter_same_dims": lambda d: torch.diagonal_scatter(_ones(3, 3, device=d), _ones(3, device=d), 0, 0, 0),
    "softmax_backward_shapes": lambda d: torch.ops.aten._softmax_backward_data(
        _ones(5, device=d), _ones(1, 5, device=d), 0, torch.float32
    ),
    "native_group_norm_groups_0": lambda d: torch.ops.aten.native_group_norm(
        _ones(1, 6, 3, device=d), None, None, 1, 6, 3, 0, 1e-5
    ),
    "native_group_norm_bias": lambda d: torch.ops.aten.native_group_norm(
        _ones(1, 6, 3, device=d), _ones(6, device=d), _ones(1, 6, device=d), 1, 6, 3, 2, 1e-5
    ),
    "native_group_norm_count": lambda d: torch.ops.aten.native_group_norm(
        _ones(1, 6, 3, device=d), None, None, 2, 6, 3, 2, 1e-5
    ),
    "native_group_norm_negative_batch": lambda d: torch.ops.aten.native_group_norm(
        _ones(1, 6, 3, device=d), None, None, -1, 6, 3, 2, 1e-5
    ),
    "cross_entropy_1d_input": lambda d: F.cross_entropy(_ones(3, device=d), _labels(2, device=d)),
    "nll_loss_int32_target": lambda d: F.nll_loss(_ones(2, 3, device=d), _labels(2, device=d).int()),
    "scatter_index_larger_than_src": lambda d: _ones(10, 5, device=d).scatter(
        0, _labels(5, 6, device=d), _ones(5, 5, device=d)
    ),
    "scatter_add_index_larger_than_src": lambda d: _ones(10, 5, device=d).scatter_add(
        1, _labels(5, 6, device=d), _ones(5, 5, device=d)
    ),
    "scatter_value_index_larger": lambda d: _ones(10, 5, device=d).scatter(0, _labels(5, 6, device=d), 1.0),
    "scatter_src_rank": lambda d: _ones(10, 5, device=d).scatter(0, _labels(5, 5, device=d), _ones(1, 5, 5, device=d)),
    "scatter_index_rank": lambda d: _ones(10, 5, device=d).scatter(0, _labels(5, device=d), 1.0),
    "scatter_reduce_index_larger": lambda d: _ones(10, 5, device=d).scatter_reduce(
        1, _labels(5, 6, device=d), _ones(5, 5, device=d), "sum"
    ),
    "cross_batch_broadcast": lambda d: torch.cross(_ones(5, 3, 5, device=d), _ones(5, 3, 6, device=d), dim=1),
    "cross_ranks": lambda d: torch.linalg.cross(_ones(3, device=d), _ones(2, 3, device=d)),
    "cross_length": lambda d: torch.linalg.cross(_ones(4, device=d), _ones(4, device=d)),
    "put_element_counts": lambda d: _ones(5, device=d).put(_labels(4, device=d), _ones(3, device=d)),
    "put_into_empty": lambda d: _ones(0, device=d).put_(_labels(1, device=d), _ones(1, device=d)),
    "index_select_of_a_scalar": lambda d: torch.index_select(torch.ones((), device=d), 0, _labels(2, device=d)),
    "nonzero_static_negative_size": lambda d: torch.nonzero_static(_ones(3, device=d), size=-1),
    "histogramdd_empty_edges": lambda d: torch.histogramdd(_ones(5, 2, device=d), bins=[0, -1]),
    "histogramdd_negative_steps": lambda d: torch.histogramdd(_ones(5, 2, device=d), bins=[-2, 1]),
    "histogramdd_zero_bins": lambda d: torch.histogramdd(_ones(5, 2, device=d), bins=[0, 2]),
    "histogram_2d_edges": lambda d: torch.histogram(_ones(5, device=d), bins=_ones(2, 2, device=d)),
    "avg_pool2d_negative_stride": lambda d: F.avg_pool2d(_ones(1, 1, 4, 4, device=d), 2, stride=-1),
    "avg_pool3d_negative_stride": lambda d: F.avg_pool3d(_ones(1, 1, 4, 4, 4, device=d), 2, stride=-1),
    "max_pool2d_dilation_0": lambda d: F.max_pool2d(_ones(1, 1, 4, 4, device=d), 2, dilation=0),
    "max_pool1d_negative_kernel": lambda d: F.max_pool1d(_ones(1, 1, 8, device=d), -1),
    "max_pool2d_negative_kernel": lambda d: F.max_pool2d(_ones(1, 1, 8, 8, device=d), -1),
    "max_pool2d_negative_dilation": lambda d: F.max_pool2d(_ones(1, 1, 8, 8, device=d), 3, dilation=-1),
    "max_pool3d_negative_kernel": lambda d: F.max_pool3d(_ones(1, 1, 8, 8, 8, device=d), -1),
    "max_pool3d_negative_dilation": lambda d: F.max_pool3d(_ones(1, 1, 8, 8, 8, device=d), 3, dilation=-1),
    "avg_pool1d_negative_kernel": lambda d: F.avg_pool1d(_ones(1, 1, 8, device=d), -1),
    "avg_pool3d_negative_kernel": lambda d: F.avg_pool3d(_ones(1, 1, 8, 8, 8, device=d), (-1, 2, 2)),
    "avg_pool2d_padding_past_half": lambda d: F.avg_pool2d(_ones(1, 1, 8, 8, device=d), 2, padding=2),
    "max_pool2d_2d_input": lambda d: F.max_pool2d(_ones(8, 8, device=d), -1),
    "adaptive_avg_pool2d_5d": lambda d: F.adaptive_avg_pool2d(_ones(1, 1, 8, 8, 8, device=d), 2),
    "segment_reduce_lengths_of_more_dims": lambda d: torch.segment_reduce(
        _ones(6, device=d), "sum", lengths=torch.tensor([[2, 4]], device=d)
    ),
    "segment_reduce_axis_not_last": lambda d: torch.segment_reduce(
        _ones(6, 3, device=d), "sum", lengths=torch.tensor([2, 4], device=d), axis=1
    ),
    "segment_reduce_axis_out_of_range": lambda d: torch.segment_reduce(
        _ones(6, 3, device=d), "sum", lengths=torch.tensor([2, 4], device=d), axis=5
    ),
    "segment_reduce_unknown_reduction": lambda d: torch.segment_reduce(
        _ones(6, 3, device=d), "foo", lengths=torch.tensor([2, 4], device=d)
    ),
    "segment_reduce_without_segments": lambda d: torch.segment_reduce(_ones(6, 3, device=d), "sum"),
    "segment_reduce_by_indices": lambda d: torch.segment_reduce(
        _ones(6, 3, device=d), "sum", indices=torch.tensor([2, 4], device=d)
    ),
    "det_of_1d": lambda d: torch.linalg.det(_ones(3, device=d)),
    "inv_of_1d": lambda d: torch.linalg.inv(_ones(3, device=d)),
    "cholesky_inverse_of_1d": lambda d: torch.cholesky_inverse(_ones(3, device=d)),
    "solve_triangular_1d_b": lambda d: torch.linalg.solve_triangular(
        _ones(3, 3, device=d), _ones(3, device=d), upper=True
    ),
    # Running statistics of the right element count but not 1-D: the kernels' 1-D accessors refuse
    # them; neuron broadcast them (computed, or raised a broadcast error).
    "batch_norm_2d_running_mean_training": lambda d: F.batch_norm(
        _ones(4, 3, 5, device=d), _ones(1, 3, device=d), _ones(3, device=d), training=True
    ),
    "batch_norm_2d_running_var_eval": lambda d: F.batch_norm(
        _ones(4, 3, 5, device=d), _ones(3, device=d), _ones(3, 1, device=d), training=False
    ),
    "batch_norm_running_mean_count": lambda d: F.batch_norm(
        _ones(4, 3, 5, device=d), _ones(2, 3, device=d), _ones(3, device=d), training=True
    ),
    # More indices than dimensions: an IndexError, counted before masks expand (neuron raised a
    # RuntimeError, a mask's shape error, or Python's "tuple index out of range").
    "index_too_many": lambda d: torch.ops.aten.index(_ones(3, 4, device=d), [_labels(3, device=d)] * 3),
    "index_too_many_masks": lambda d: torch.ops.aten.index(_ones(3, 4, device=d), [_mask(3, device=d)] * 3),
    "index_put_too_many": lambda d: torch.ops.aten.index_put(
        _ones(3, 4, device=d), [_labels(3, device=d)] * 3, _ones(3, device=d)
    ),
    "index_put_mask_past_the_end": lambda d: torch.ops.aten.index_put_(
        _ones(3, 4, device=d), [None, None, _mask(3, device=d)], torch.tensor(1.0)
    ),
    "index_put_impl_too_many": lambda d: torch.ops.aten._index_put_impl_(
        _ones(3, 4, device=d), [_labels(3, device=d)] * 3, _ones(3, device=d)
    ),
    "unsafe_masked_index_too_many": lambda d: torch.ops.aten._unsafe_masked_index(
        _ones(3, 4, device=d), _mask(3, device=d), [_labels(3, device=d)] * 3, 0.0
    ),
    "unsafe_masked_index_put_accumulate_too_many": lambda d: torch.ops.aten._unsafe_masked_index_put_accumulate(
        _ones(3, 4, device=d), _mask(3, device=d), [_labels(3, device=d)] * 3, _ones(3, device=d)
    ),
    # Found by the conformance runner's argument-errors phase (testing/argument_errors.py):
    # PyTorch's meta kernel said "numel: integer multiplication overflow".
    "as_strided_copy_negative_size": lambda d: torch.as_strided_copy(_ones(8, device=d), [2, -3], [1, 1]),
    # slow_conv_transpose2d/3d's output size check (PyTorch's meta prints lists, and an unbatched
    # input's negative size reached the allocation)
    "conv_transpose1d_output_too_small": lambda d: F.conv_transpose1d(
        _ones(1, 2, 4, device=d), _ones(2, 3, 3, device=d), padding=1000
    ),
    "conv_transpose2d_unbatched_output_too_small": lambda d: F.conv_transpose2d(
        _ones(2, 4, 4, device=d), _ones(2, 3, 3, 3, device=d), padding=(1000, 0)
    ),
    "conv_transpose3d_output_too_small": lambda d: F.conv_transpose3d(
        _ones(1, 2, 4, 4, 4, device=d), _ones(2, 3, 3, 3, 3, device=d), padding=1000
    ),
    # Found by helper-40: PyTorch's reference raised ValueError; its meta kernel lets repeated dims
    # of size 1 through, and vector_norm computed
    "div_rounding_mode": lambda d: torch.div(_ones(3, device=d), 2, rounding_mode="round"),
    "vector_norm_repeated_dims": lambda d: torch.linalg.vector_norm(_ones(1, 3, device=d), dim=(0, -2)),
    # ATen checks beta on every call; neuron computed
    "smooth_l1_loss_negative_beta": lambda d: F.smooth_l1_loss(_ones(3, device=d), _ones(3, device=d), beta=-1.0),
    # Found by helper-57: clamp's Scalar overloads build a unary TensorIterator that wants one dtype
    # ("Found dtype ..."); neuron named a cast, or computed into a wider out=.
    "clamp_scalar_out_of_the_input_dtype": lambda d: torch.clamp(
        _labels(4, device=d), min=0.5, out=_labels(4, device=d)
    ),
    "clamp_min_scalar_out_wider": lambda d: torch.clamp_min(_labels(4, device=d), 1, out=_ones(4, device=d)),
    "clamp_max_scalar_out_half": lambda d: torch.clamp_max(
        _ones(4, device=d), 1, out=_ones(4, device=d, dtype=torch.float16)
    ),
    "clamp_in_place_promoting": lambda d: _labels(4, device=d).clamp_(min=0.5),
    # matrix_rank_impl: the int64 count must cast safely to out= (v2.4.0's test_linalg); neuron counted
    # into a bool out=
    "matrix_rank_out_of_bool": lambda d: torch.linalg.matrix_rank(
        torch.eye(2, device=d), out=torch.empty(0, dtype=torch.bool, device=d)
    ),
    # elu_backward's and leaky_relu_backward's metas refuse a gradient through an in-place forward with
    # a negative slope (v2.4.0's test_nn); neuron computed one
    "elu_in_place_negative_alpha_backward": lambda d: (
        F.elu_(_ones(2, device=d).neg().requires_grad_().clone(), alpha=-2).sum().backward()
    ),
    "leaky_relu_in_place_negative_slope_backward": lambda d: (
        F.leaky_relu_(_ones(2, device=d).neg().requires_grad_().clone(), -2).sum().backward()
    ),
    # complex_check_dtype: out= of exactly the inputs' complex dtype (v2.4.0's test_tensor_creation_ops)
    "complex_out_of_a_real_dtype": lambda d: torch.complex(
        _ones(2, device=d), _ones(2, device=d), out=_ones(2, device=d)
    ),
    "polar_out_of_complex32": lambda d: torch.polar(
        _ones(2, device=d), _ones(2, device=d), out=_ones(2, device=d, dtype=torch.complex32)
    ),
    # TensorIterator computes shapes before it compares devices (add's device_check: NoCheck): a
    # CPU operand that does not fit raises the shape error; neuron raised the device error.
    "in_place_result_too_large_beside_a_cpu_tensor": lambda d: torch.ones((), device=d).add_(torch.ones(3)),
    "no_broadcast_beside_a_cpu_tensor": lambda d: torch.ones(2, device=d).mul(torch.ones(3)),
}


def _error(make, device):
    with pytest.raises(Exception) as raised:  # noqa: PT011 (the type is what is compared)
        make(device)
        if device == "neuron":
            torch.neuron.synchronize()
    return type(raised.value), str(raised.value)


@pytest.mark.parametrize("case", ATEN_CHECKED)
def test_argument_errors_are_atens(case):
    assert _error(ATEN_CHECKED[case], "neuron") == _error(ATEN_CHECKED[case], "cpu")


#: A Scalar argument that ATen checks on every call, after a valid call has built the op's executable:
#: the check ran only when it was built (the scalar is a runtime argument of the executable), so the
#: loss and softshrink computed, and the samplers' device checks dropped the value or passed NaN.
SCALAR_CHECKED = {
    "softshrink": (lambda x, v: F.softshrink(x, v), 0.5, -1.0),
    "huber_loss": (lambda x, v: F.huber_loss(x, x, delta=v), 1.0, 0.0),
    "smooth_l1_loss": (lambda x, v: F.smooth_l1_loss(x, x, beta=v), 1.0, -1.0),
    "geometric_": (lambda x, v: x.geometric_(v), 0.5, 2.0),
    "geometric_nan": (lambda x, v: x.geometric_(v), 0.5, float("nan")),
    "log_normal_": (lambda x, v: x.log_normal_(0, v), 1.0, -1.5),
    "exponential_nan": (lambda x, v: x.exponential_(v), 1.0, float("nan")),
    "cauchy_": (lambda x, v: x.cauchy_(0, v), 1.0, -1.0),
    "normal_nan": (lambda x, v: x.normal_(0, v), 1.0, float("nan")),
    "exponential_tiny_negative": (lambda x, v: x.exponential_(v), 1.0, -1e-50),
    "normal_tiny_negative": (lambda x, v: torch.normal(x, v), 1.0, -1e-50),
    # a NaN with its sign bit: C++ streams print "-nan"
    "exponential_negative_nan": (lambda x, v: x.exponential_(v), 1.0, -float("nan")),
    "geometric_negative_nan": (lambda x, v: x.geometric_(v), 0.5, -float("nan")),
    "bernoulli_negative_nan": (lambda x, v: torch.bernoulli(x, v), 0.5, -float("nan")),
    "smooth_l1_loss_nan": (lambda x, v: F.smooth_l1_loss(x, x, beta=v), 1.0, float("nan")),
}


@pytest.mark.parametrize("case", SCALAR_CHECKED)
def test_scalar_arguments_are_checked_on_every_call(case):
    call, valid, invalid = SCALAR_CHECKED[case]
    with pytest.raises(RuntimeError) as on_cpu:
        call(torch.ones(4), invalid)
    call(torch.ones(4, device="neuron"), valid)
    with pytest.raises(RuntimeError) as raised:  # at the call, as ATen's host check
        call(torch.ones(4, device="neuron"), invalid)
    assert str(raised.value) == str(on_cpu.value)


@pytest.mark.parametrize("std", [-1.0, float("nan")], ids=["negative", "nan"])
def test_normal_tensor_std_is_checked_at_the_call(std):
    # CHECK_NORMAL_TENSOR_STD reads std.min().ge(0) back on CPU and CUDA alike; NaN fails it
    stds = torch.tensor([1.0, std])
    with pytest.raises(RuntimeError, match=r"normal expects all elements of std >= 0\.0$"):
        torch.normal(torch.zeros(2), stds)
    with pytest.raises(RuntimeError, match=r"normal expects all elements of std >= 0\.0$"):
        torch.normal(torch.zeros(2, device="neuron"), stds.to("neuron"))
    with pytest.raises(RuntimeError, match=r"normal expects all elements of std >= 0\.0$"):
        torch.normal(0.5, stds.to("neuron"))


#: Valid Scalars that round to 0 or 1 in float32, which a check made in float32 refused after a first
#: call had built the executable: ATen checks the double, and the sample computes in float32 as the
#: CPU's kernel (lambda=1e-50 gives inf, p=1-1e-9 one trial).
TINY_BUT_VALID = {
    "exponential_": lambda x: x.exponential_(1e-50),
    "geometric_": lambda x: x.geometric_(1 - 1e-9),
    "log_normal_": lambda x: x.log_normal_(0, 1e-50),
    "cauchy_": lambda x: x.cauchy_(0, 1e-50),
    "normal_": lambda x: x.normal_(0, 1e-50),
}


@pytest.mark.parametrize("case", TINY_BUT_VALID)
def test_sampler_scalars_are_checked_in_double_precision(case):
    expected = TINY_BUT_VALID[case](torch.ones(4))
    for _ in range(2):  # the second call runs the cached executable
        torch.testing.assert_close(TINY_BUT_VALID[case](torch.ones(4, device="neuron")).cpu(), expected)


#: Where CUDA's kernel words an error otherwise than the CPU's, neuron raises CUDA's.
CUDA_WORDED = {
    # trace_cuda (cuda/TriangularOps.cu); trace_cpu says "trace: expected a matrix, but got tensor with dim 3"
    "trace_of_3d": (lambda: torch.trace(_ones(2, 3, 4, device="neuron")), RuntimeError, "expected a matrix"),
    # adaptive_avg_pool3d_out_cuda_template (cuda/AdaptiveAveragePooling3d.cu): empty sizes before the
    # rank; the CPU's words drop "_cuda" (PyTorch's meta checked the rank only, without the name)
    "adaptive_avg_pool3d_of_6d": (
        lambda: F.adaptive_avg_pool3d(_ones(1, 2, 3, 3, 3, 3, device="neuron"), 2),
        RuntimeError,
        "adaptive_avg_pool3d_cuda(): Expected 4D or 5D tensor, but got [1, 2, 3, 3, 3, 3]",
    ),
    "adaptive_avg_pool3d_without_channels": (
        lambda: F.adaptive_avg_pool3d(_ones(1, 0, 3, 3, 3, 3, device="neuron"), 2),
        RuntimeError,
        "adaptive_avg_pool3d_cuda(): Expected input to have non-zero size for non-batch dimensions, but input has "
        "sizes [1, 0, 3, 3, 3, 3] with dimension 1 being empty",
    ),
    # ATen's expand error prints the tensor's TensorImpl type: the CPU's "torch.FloatTensor", neuron's
    # "neuronFloatType" (PyTorch's name for a PrivateUse1 tensor); addmm computed, broadcasting self.
    "addmm_of_3d_self": (
        lambda: torch.addmm(
            _ones(1, 2, 3, device="neuron"), _ones(2, 4, device="neuron"), _ones(4, 3, device="neuron")
        ),
        RuntimeError,
        "expand(neuronFloatType{[1, 2, 3]}, size=[2, 3]): the number of sizes provided (2) must be greater or equal "
        "to the number of dimensions in the tensor (3)",
    ),
    # check_inputs_nll_loss2d (cuda/NLLLoss2d.cu); the CPU says "size mismatch (got input: [2, 3, 4, 4] , ..."
    "nll_loss2d_sizes": (
        lambda: F.nll_loss(_ones(2, 3, 4, 4, device="neuron"), _labels(2, 4, 5, device="neuron")),
        RuntimeError,
        "input and target batch or spatial sizes don't match: target [2, 4, 5], input [2, 3, 4, 4]",
    ),
    "nll_loss2d_target_rank": (
        lambda: torch.ops.aten.nll_loss2d_forward(
            _ones(2, 3, 4, 4, device="neuron"), _labels(2, 4, device="neuron"), None, 1, -100
        ),
        RuntimeError,
        "only batches of spatial targets supported (3D tensors) but got targets of size: : [2, 4]",
    ),
    # _bincount_cuda's AT_DISPATCH_INTEGRAL_TYPES (cuda/SummaryOps.cu)
    "bincount_of_float": (
        lambda: torch.bincount(_ones(3, device="neuron")),
        NotImplementedError,
        "\"bincount_cuda\" not implemented for 'Float'",
    ),
}


@pytest.mark.parametrize("case", CUDA_WORDED)
def test_argument_errors_cuda_words_otherwise_are_cudas(case):
    make, error_type, message = CUDA_WORDED[case]
    with pytest.raises(error_type) as raised:
        make()
    assert str(raised.value) == message


@pytest.mark.parametrize("position", range(4), ids=["weight", "bias", "running_mean", "running_var"])
def test_batch_norm_parameters_of_another_count_are_refused_in_f_batch_norms_words(position):
    # native_batch_norm does not check them: the CPU's kernel reads the first C elements (past the
    # end of a shorter one); PyTorch's meta kernel raised a broadcast error.
    parameters = [_ones(3, device="neuron") for _ in range(4)]
    name = ("weight", "bias", "running_mean", "running_var")[position]
    for count in (2, 4):
        parameters[position] = _ones(count, device="neuron")
        with pytest.raises(RuntimeError, match=f"^{name} should contain 3 elements not {count}$"):
            torch.native_batch_norm(_ones(4, 3, 5, device="neuron"), *parameters, True, 0.1, 1e-5)


def test_negative_unfold_padding_raises_in_a_compiled_graph():
    compiled = torch.compile(lambda x: F.unfold(x, 2, padding=-1), backend="neuron")
    with pytest.raises(Exception, match="padding should be non-negative, but got pad_height: -1 pad_width: -1"):
        compiled(_ones(1, 1, 4, 4, device="neuron"))


#: Calls whose compiled graphs raised PyTorch's words: FakeTensorMode runs its own native_layer_norm
#: and *_scatter before any meta kernel, PyTorch's addmm decomposition checks mm's ranks first, and
#: a fake tensor's expand words its error as PyTorch's reference does.
COMPILED = [
    "mm_of_3d_self",
    "addmm_of_1d_mat1",
    "addmm_dtypes_before_ranks",
    "addmm_mat_dtypes_before_ranks",
    "addmm_self_not_expandable",
    "mv_of_3d",
    "addmv_self_size",
    "masked_fill_broadcast",
    "layer_norm_shape",
    "layer_norm_weight",
    "slice_scatter_src_shape",
    "diagonal_scatter_src_shape",
    "batch_norm_2d_running_mean_training",
    "batch_norm_2d_running_var_eval",
    "index_too_many",
]


@pytest.mark.parametrize("case", COMPILED)
def test_argument_errors_in_a_compiled_graph_are_atens(case):
    with pytest.raises(Exception) as on_cpu:  # noqa: PT011 (its type is what is compared)
        ATEN_CHECKED[case]("cpu")
    compiled = torch.compile(lambda: ATEN_CHECKED[case]("neuron"), backend="neuron")
    # Dynamo wraps a RuntimeError of its fake tensors in its TorchRuntimeError (a RuntimeError).
    with pytest.raises(type(on_cpu.value)) as raised:
        compiled()
    assert str(on_cpu.value) in str(raised.value)


def test_checks_apply_to_fake_tensors_before_any_neuron_op_ran():
    """Dynamo runs a graph's fake tensors through the meta kernels before the backend, or any eager
    neuron op, has imported a lowering: ``import torch`` registers the checks."""
    code = (
        "import torch\n"
        "from torch._subclasses.fake_tensor import FakeTensorMode\n"
        "with FakeTensorMode():\n"
        "    try:\n"
        "        torch.mm(torch.empty(2, 3, 4, device='neuron'), torch.empty(4, 5, device='neuron'))\n"
        "    except RuntimeError as error:\n"
        "        print(error)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert result.stdout.strip() == "self must be a matrix", result.stderr[-2000:]


def test_checked_ops_compute_as_on_cpu_in_a_compiled_graph():
    def f(x, w):
        blocks = F.unfold(x, 2, padding=1)
        folded = F.fold(blocks, (4, 4), 2, padding=1)
        shuffled = F.pixel_unshuffle(F.pixel_shuffle(folded.repeat(1, 4, 1, 1), 2), 2)
        normed = F.layer_norm(shuffled, (4,), weight=w)
        return torch.stack([normed.sum((2, 3)), torch.mm(normed[0, 0], normed[0, 1]).sum(0, keepdim=True)])

    x, w = torch.randn(1, 1, 4, 4), torch.randn(4)
    compiled = torch.compile(f, backend="neuron")
    torch.testing.assert_close(compiled(x.to("neuron"), w.to("neuron")).cpu(), f(x, w))


def test_each_check_takes_its_ops_arguments_as_the_dispatcher_passes_them():
    """Every overload's positional arguments bind positionally, and its keyword-only ones by name."""
    for op, check in CHECKS.items():
        arguments = op._schema.arguments
        positional = [None] * sum(not argument.kwarg_only for argument in arguments)
        keywords = {argument.name: None for argument in arguments if argument.kwarg_only}
        inspect.signature(check).bind(*positional, **keywords)


@pytest.mark.parametrize(
    "refused",
    [
        lambda x: x.clone().renorm_(2, 0, -1.0),
        lambda x: torch.renorm(x, 2, 0, -1.0, out=torch.empty(0, device=x.device)),
    ],
    ids=["in_place", "out"],
)
def test_renorm_checks_maxnorm_on_every_call_not_only_the_first(refused):
    # maxnorm was a runtime scalar of the cached executable: a negative one after a valid call
    # returned -x.
    x = torch.randn(4, 5, device="neuron")
    x.clone().renorm_(2, 0, 1.0)
    with pytest.raises(RuntimeError, match="renorm: expected maxnorm to be >= 0 but got -1"):
        refused(x)


def test_checks_describe_neuron_ops_only_not_another_devices_fake_tensors():
    """A CPU torch.compile in the same process keeps PyTorch's meta kernels: the checks run for the
    eager layer's meta tensors and for fake tensors of the neuron device."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from torch_neuronx._compat import meta_kernels

    meta_kernels.register()  # as the first neuron op's lowerings do (idempotent)
    im2col = torch.ops.aten.im2col.default
    negative_padding = ([2, 2], [1, 1], [-1, -1], [1, 1])
    with pytest.raises(RuntimeError, match="padding should be non-negative"):
        im2col(torch.empty(1, 1, 4, 4, device="meta"), *negative_padding)
    with FakeTensorMode() as mode:
        cpu = mode.from_tensor(torch.empty(1, 1, 4, 4))
        im2col(cpu, *negative_padding)  # PyTorch's decomposition, which does not check the padding
        neuron = mode.from_tensor(torch.empty(1, 1, 4, 4, device="neuron"))
        with pytest.raises(RuntimeError, match="padding should be non-negative"):
            im2col(neuron, *negative_padding)
