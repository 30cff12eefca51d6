"""The conformance runner's data: dtypes, tolerances and known failures, each entry with its reason.

Entries are keyed by the OpInfo's full name (``name`` or ``name.variant_test_name``), so one grep
finds everything known about an op. Keep the tables small and honest: every known failure is a bug
or an unsupported feature with its reason, never a way to hide a wrong value (STYLE.md, principle 7).
"""

from __future__ import annotations

import fnmatch

import torch

#: The dtypes the conformance runner checks (those of the device that CPU OpInfos also cover).
DEVICE_DTYPES: tuple[torch.dtype, ...] = (
    torch.float32,
    torch.bfloat16,
    torch.float16,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint8,
    torch.bool,
    torch.complex64,
)

#: Dtypes an OpInfo supports on CPU that the device does not have. A sample holding one, or whose
#: CPU result holds one (``double()``, ``dtype=torch.float64``), is skipped with this reason.
UNSUPPORTED_DTYPES: dict[torch.dtype, str] = {
    torch.float64: "Trainium has no FP64",
    torch.complex128: "Trainium has no FP64",
}

#: OpInfos whose values are not comparable with the CPU's and that the OpInfo itself does not skip
#: (its own skips of ``test_compare_cpu`` apply as well).
SKIPS: dict[str, str] = {
    "randn": "random values: neuron's generator is not the CPU's mt19937 (as on CUDA)",
    "randint": "random values: neuron's generator is not the CPU's mt19937 (as on CUDA)",
    "nn.functional.alpha_dropout": "random values: neuron's generator is not the CPU's mt19937 (as on CUDA)",
}

#: Ops whose index results may break ties differently from the CPU: an index result that differs
#: from the CPU's passes when it selects equal values of the input (see compare.py).
TIES: dict[str, str] = {
    "sort": "with stable=False the order of equal elements is unspecified (the CPU's sort is not stable)",
    "argsort": "with stable=False the order of equal elements is unspecified (the CPU's sort is not stable)",
    "topk": "which of several equal elements is returned is unspecified",
    "kthvalue": "which of several equal elements is returned is unspecified",
    "median": "which of several equal elements (or NaNs) is returned is unspecified",
    "nanmedian": "which of several equal elements is returned is unspecified",
    "mode": "which occurrence of the most frequent value is returned is unspecified",
}

#: Ops whose saved statistics (mean, rstd, invstd) follow CUDA, not PyTorch's CPU kernels: float32
#: for 16-bit float inputs (the meta kernel's dtype; the CPU keeps the input dtype), and in eval mode
#: the running mean and 1 / sqrt(running_var + eps) (``batch_norm_cuda_out``; the CPU returns empty
#: tensors). The CPU's statistics are widened to float32, or replaced by those of the running
#: statistics, before comparing with the input dtype's tolerance.
CUDA_STATISTICS: dict[str, str] = dict.fromkeys(
    ("native_layer_norm", "native_batch_norm", "_native_batch_norm_legit", "_batch_norm_with_update"),
    "saved statistics as on CUDA: float32 for 16-bit inputs, the running statistics in eval mode",
)

#: Tolerances (atol, rtol, reason) wider than the OpInfo's or the dtype default, per (op, dtype) or
#: (op, dtype, phase).
_LEAST_SQUARES_GRADIENT = (
    "gradients of magnitude 120 (float32 spacing 7.6e-6) through a QR factorization each device rounds its own "
    "way: neuron's are up to 5.7e-5 from float64, the CPU's 2.6e-5 (sample 14, a well-conditioned 4 x 3 system)"
)
_LAPACK_ROUNDING = (
    "the CPU's LAPACK and the device's (XLA's) round the factorization differently; the float32 gradient "
    "amplifies it through eigenvalue gaps to ~3e-5 elementwise (RMS errors against float64: ~1e-6 of the largest "
    "value, 3-4x the CPU's); PyTorch's own device-vs-CPU test (test_compare_cpu) allows 1e-3"
)
_GRID_GRADIENT = (
    "the grid gradient sums value * weight * grad_output over the channels and corners, cancelling terms of "
    "~100 to much smaller results; the CPU accumulates in its loop order, XLA in its own: neuron's gradient is "
    "up to 6e-4 from the CPU's at gradient magnitudes ~200, and the CPU's own is up to 5e-4 from float64"
)
TOLERANCES: dict[tuple, tuple[float, float, str]] = {
    ("logcumsumexp", torch.float32, "backward"): (
        1e-2,
        1.3e-6,
        "a sample of elements 1e4 (float32 spacing 1e-3): the gradient's exp(x - out) terms carry that "
        "rounding, and XLA's parallel prefix and the CPU's sequential sum round differently",
    ),
    ("linalg.eig", torch.float32, "backward"): (1e-4, 1e-4, _LAPACK_ROUNDING),
    ("linalg.pinv.hermitian", torch.float32, "backward"): (1e-4, 1e-4, _LAPACK_ROUNDING),
    ("nn.functional.ctc_loss", torch.float32, "backward"): (
        1e-4,
        1.3e-6,
        "the gradient exp(lp) - exp(log(sum alpha * beta) + nll - lp) cancels log-likelihoods of ~100 (float32 "
        "spacing 8e-6) accumulated over 50 steps of exp/log, whose float32 implementations differ (XLA's, glibc's); "
        "neuron's gradient is up to 3e-5 from the CPU's, and the CPU's own is up to 7e-5 from float64",
    ),
    ("linalg.cond", torch.complex64): (
        1e-5,
        5e-6,
        "the ratio of a float32 complex SVD's largest and smallest singular values carries about cond * eps of "
        "relative error (3.6e-6 at cond 60): neuron's is 1.4e-6 from float64 there, the CPU's 4.9e-7",
    ),
    ("nn.functional.conv_transpose3d", torch.float32, "backward"): (
        1e-4,
        1.3e-6,
        "the gradients sum float32 products to magnitudes of 100-250 in XLA's order: neuron's and the CPU's are "
        "each up to 6e-5 from float64, in other elements (a dilated, grouped sample)",
    ),
    ("linalg.lstsq", torch.float32, "backward"): (1e-4, 1.3e-6, _LEAST_SQUARES_GRADIENT),
    ("linalg.lstsq.grad_oriented", torch.float32, "backward"): (1e-4, 1.3e-6, _LEAST_SQUARES_GRADIENT),
    ("grid_sampler_3d", torch.float32, "backward"): (1e-3, 1.3e-6, _GRID_GRADIENT),
    ("nn.functional.grid_sample", torch.float32, "backward"): (1e-3, 1.3e-6, _GRID_GRADIENT),
}

#: Samples the default test run expects to fail, per (op, dtype, phase): a strict xfail, so a fix
#: shows up as an unexpected pass. "wrong value" marks a mismatch with CPU.
KNOWN_FAILURES: dict[tuple[str, torch.dtype, str], str] = {
    **{
        (name, dtype, "forward"): "sparse layouts are not supported on neuron: NotImplementedError naming the op"
        for name, dtypes in (
            ("to_sparse", (torch.float32, torch.bfloat16, torch.int64)),
            ("sparse.mm.reduce", (torch.float32, torch.bfloat16)),
            ("sparse.sampled_addmm", (torch.float32,)),
        )
        for dtype in dtypes
    },
}

#: Mutated calls of the argument-errors phase (testing/argument_errors.py) that are not run, per
#: (OpInfo, mutation label), each with its reason: their values cannot be compared, or the CPU's
#: kernel crashes the process.
ARGUMENT_ERROR_NOT_RUN: dict[tuple[str, str], str] = {
    **{
        ("resize_as_", label): "not comparable: the elements resize_as_ adds are uninitialized memory on every device"
        for label in ("arg0.lastdim+1", "input.select(0, 0)", "input.unsqueeze(0)")
    },
    ("resize_", "input.select(0, 0)"): "not comparable: resize_ grows the smaller input, and the elements it adds "
    "are uninitialized memory on every device (the CPU's held NaN in one run)",
}

#: Mutated calls of the argument-errors phase where neuron is known to differ from the CPU, per
#: (OpInfo, mutation label), each with its reason.
_BATCH_NORM_COUNT = (
    "a parameter of more than C elements: the CPU's kernel reads its first C (and past the end of a shorter "
    "one); neuron refuses any other count, in F.batch_norm's words (docs/usage.md)"
)
_GRID_SAMPLER_MODE = (
    "a mode outside the enum: ATen's kernels switch over it unchecked (the CPU computes with no named mode); "
    "neuron refuses it with a ValueError naming the valid modes"
)
ARGUMENT_ERROR_DIFFERENCES: dict[tuple[str, str], str] = {
    **{
        ("lu_unpack", label): "pivots of another shape than (*, min(m, n)): ATen's kernel reads them unchecked "
        "(past their end, or a batch's missing); neuron refuses them (docs/usage.md)"
        for label in ("arg0.unsqueeze(0)", "arg0.lastdim+1", "input.unsqueeze(0)")
    },
    **{
        (name, f"arg{position}.lastdim+1"): _BATCH_NORM_COUNT
        for name in ("native_batch_norm", "_native_batch_norm_legit", "_batch_norm_with_update")
        for position in range(4)
    },
    **{
        (name, f"arg{position}={mode}"): _GRID_SAMPLER_MODE
        for name in ("grid_sampler_2d", "grid_sampler_3d")
        for position in (1, 2)
        for mode in (-1, 1000)
    },
    ("nn.functional.adaptive_avg_pool3d", "input.unsqueeze(0)"): "CUDA's words: adaptive_avg_pool3d_cuda()",
    ("narrow_copy", "arg0=1000"): "CUDA's narrow_copy is narrow's: IndexError 'Dimension out of range'",
    ("narrow_copy", "arg2=-1"): "CUDA's narrow_copy is narrow's: 'narrow(): length must be non-negative.'",
    ("trace", "input.unsqueeze(0)"): "trace_cuda says 'expected a matrix'",
    ("trace", "input.select(0, 0)"): "trace_cuda says 'expected a matrix'",
    ("histc", "min=1000"): "histogram_cuda says 'max must be larger than min' (the CPU's adds 'torch.histc: ')",
    ("histc", "max=-1"): "histogram_cuda says 'max must be larger than min' (the CPU's adds 'torch.histc: ')",
    ("nn.functional.embedding_bag", "offsets.lastdim+1"): "decreasing offsets: the CPU's kernel stops at an "
    "internal check (i < index_size), CUDA's kernel has no check of their order; neuron reads the bag as empty",
    ("_segment_reduce.offsets", "offsets.lastdim+1"): "decreasing offsets: the CPU's kernel stops at an internal "
    "check (segment_length >= 0); neuron reads the segment as empty (data-dependent: no check on the host)",
    **{
        (name, "arg0=1000"): "negative x: the CPU's zeta series cancels (NaN where the value overflows); neuron "
        "reflects (within a float32 ulp of mpmath, -inf here)"
        for name in ("polygamma.polygamma_n_0", "special.polygamma.special_polygamma_n_0")
    },
    **{
        (name, "input.unsqueeze(0)"): "a 3-D A with a 2-D B: the CPU's solution batch is B's read as vectors "
        "while it solves B as a matrix (an upstream inconsistency); neuron returns the matrix case's batch"
        for name in ("linalg.lstsq", "linalg.lstsq.grad_oriented")
    },
}

#: OpInfo error inputs (``op.error_inputs``) that neuron refuses in words other than the CPU's, per
#: (OpInfo, index of the error input): each still raises, and the test checks that it still differs,
#: so a fix shows up and its entry must go.
KNOWN_ERROR_WORDING: dict[tuple[str, int], str] = {}

#: OpInfo error inputs that neuron refuses in CUDA's words, which differ from the CPU's (docs/usage.md,
#: "the differences found so far between the CPU's and CUDA's behaviour").
CUDA_WORDED_ERRORS: dict[tuple[str, int], str] = {
    ("nn.functional.max_pool3d", 4): "the shape check names max_pool3d_with_indices_out_cuda_template",
    ("nn.functional.max_pool3d", 5): "the shape check names max_pool3d_with_indices_out_cuda_template",
    ("narrow_copy", 1): "CUDA's narrow_copy is narrow's: IndexError 'Dimension out of range'",
    ("narrow_copy", 6): "CUDA's narrow_copy is narrow's: 'narrow(): length must be non-negative.'",
    ("trace", 0): "trace_cuda says 'expected a matrix'",
}

#: (op, dtype) pairs of the CUDA-dtype phase (testing/cuda_dtypes.py: dtypes CUDA computes an op in and
#: the CPU does not) that neuron still refuses, by kind, each with its reason. docs/coverage.md lists
#: the measured counts and the other pairs of each kind; the default run checks these as strict xfails.
CUDA_DTYPE_GAPS: dict[tuple[str, torch.dtype], str] = {}

#: The dtypes of PyTorch's own test files that ``torch-neuronx upstream-tests`` skips on purpose: a
#: test instantiated for one of them (its name ends in ``_neuron_<dtype>``, one of a pair of dtypes
#: included) is reported as skipped by us, with this reason.
UPSTREAM_DTYPE_SKIPS: dict[str, str] = {
    "float64": "FP64 policy: Trainium has no FP64; a float64 tensor on neuron raises TypeError (DESIGN.md, 8)",
    "complex128": "FP64 policy: Trainium has no FP64; a complex128 tensor on neuron raises TypeError (DESIGN.md, 8)",
}

_DEFERRED_CHECK = (
    "data-dependent checks run on the device and raise at the next synchronisation (DESIGN.md, 9; "
    "NEURON_LAUNCH_BLOCKING=1 raises at the op), so the test's assertRaises sees no error at the call "
    "and the fault is left pending for a later test"
)
_CPU_TOO = "fails on the CPU too: "
_ASARRAY_KEEPS_REQUIRES_GRAD = (
    "torch 2.13's torch.asarray keeps the input's requires_grad (and autograd history) when requires_grad "
    "is not passed, with a warning; the v2.4.0 test expects False (TestAsArrayCPU fails the same way)"
)
_VITALS_GONE = "torch 2.13 removed torch.vitals_enabled and torch.read_vitals (a CPU-only test)"
_SCIPY_EMPTY_WINDOW = (
    _CPU_TOO + "the test compares windows of size 0 with SciPy's, and the installed SciPy (newer than the "
    "v2.4.0 test files) raises 'Parameter Nx=0 is not a positive integer'; the integer variants pass"
)
_NO_COW = (
    "checks copy-on-write storages (torch._C._is_cow_tensor, shared data addresses): neuron's "
    "allocations carry a context that c10's COW DataPtr cannot wrap, so _lazy_clone is a clone into a "
    "new storage (equal values, independent writes; tests/runtime/test_tensors.py); PyTorch skips these "
    "tests on XLA alike (skipXLA)"
)
_UINT8_INTERPOLATION = (
    "expects a device other than the CPU to refuse bilinear/bicubic interpolation of uint8, as CUDA "
    "does; neuron interpolates uint8 as the CPU does, in its fixed point, to the bit (it computes "
    "what the CPU or CUDA computes; test_upsamplingBiMode2d_consistency checks those values and passes)"
)
_NO_INDUCTOR = (
    "tests inductor itself on neuron tensors (a debug_backend_override rule naming inductor's compile_fx, "
    "or inductor's per-graph config overrides): inductor has no code generator for neuron and raises "
    "KeyError: 'neuron'; torch.compile(model) and backend='inductor' compile neuron graphs with "
    "backend='neuron' instead (dynamo/default_backend.py), which has no inductor config; on CUDA "
    "inductor generates Triton"
)
_ILL_CONDITIONED_DRAW = (
    _CPU_TOO + "for some random matrices: the test checks float32 results of random matrices at a tolerance "
    "that ill-conditioned draws exceed on any device, and neuron's random stream differs from the CPU's "
    "mt19937 (as CUDA's does), so its seed draws another matrix. Measured over 2,000 random 5x5 matrices, "
    "test_pinverse's check fails for 7 on the CPU and 7 on neuron; over 4,000 Hermitian 5x5 ones, "
    "test_eigh's for 8 on the CPU and 9 on neuron"
)
_CPU_ONLY_MAP = (
    "a CUDA-only assumption: Tensor.map_ and map2_ call a Python function per element, which PyTorch "
    "implements for CPU tensors alone (TypeError 'map_ is only implemented on CPU tensors' on CUDA and every "
    "other device); the test leaves them out for CUDA tensors only (small.is_cuda)"
)
#: Tests of PyTorch's own files skipped on purpose, each with its reason: keyed by the test's name
#: without its device and dtype suffix (``test_foo`` for ``test_foo_neuron_float32``), or by an
#: ``fnmatch`` pattern (holding ``*``) over the whole instantiated name. A reason starting "fails on
#: the CPU too" is a test that is not ours to fix: the test files are older than the installed
#: torch, numpy or SciPy, and the CPU fails it alike.
UPSTREAM_SKIPS: dict[str, str] = {
    # Failures of the 100-tests-a-file run (2026-12-03) that are not device faults:
    "test_tensor_dead_weak_ref": _CPU_TOO
    + "torch 2.13 keeps a tensor reachable through .grad alive; the v2.4.0 test expects it dead (a CPU-only test)",
    "test_naughty_autograd_function_attribute_access": _CPU_TOO
    + "torch 2.13 no longer raises for _register_hook_dict on a tensor's grad_fn (a CPU-only test)",
    "test_create_graph_and_full_backward_hook_cycle": _CPU_TOO
    + "torch 2.13 also warns that the full backward hook fires for gradients with respect to module outputs, "
    "so the v2.4.0 test counts 2 warnings where it expects 1 (a CPU-only test)",
    "test_autograd_views_codegen": _CPU_TOO
    + "torch 2.13 names the multi-output view 'Unbind', the v2.4.0 test expects 'UnbindBackward0' (a CPU-only test)",
    **dict.fromkeys(
        (
            "test_dim_empty__refs_linalg_vector_norm",
            "test_dim_empty_keepdim__refs_linalg_vector_norm",
            "test_dim_empty_keepdim_linalg_vector_norm",
            "test_dim_empty_linalg_vector_norm",
        ),
        _CPU_TOO + "torch 2.13's vector_norm reduces every dimension for dim=[] (its reference too); "
        "the v2.4.0 test expects none",
    ),
    "test_quantile": _CPU_TOO + "the test passes NumPy's interpolation= keyword, which NumPy 2 removed (method=)",
    "test_dtypes__refs_native_group_norm": _CPU_TOO
    + "torch 2.13's Python reference computes complex64 inputs and differentiates them on any device (the "
    "CPU's torch._refs.native_group_norm of complex64 works, backward too), where the v2.4.0 OpInfo lists "
    "floating dtypes and no backward dtypes for the reference",
    **{
        f"test_dtypes__refs_{name}": _CPU_TOO
        + f"torch 2.13's Python reference computes {what} on any device (the CPU's too), which its OpInfo, "
        "listing its torch op's dtypes and no backward dtypes for a reference, does not claim"
        for name, what in (
            ("sgn", "and differentiates float and complex inputs"),
            ("conj_physical", "and differentiates float inputs"),
            ("nn_functional_hardshrink", "integer and complex inputs, and differentiates float ones,"),
            ("special_ndtri", "float16 and bfloat16 inputs"),
            ("broadcast_tensors", "and differentiates float and complex inputs"),
        )
    },
    "test_reference_numerics_extremal_values__refs_heaviside_neuron_bfloat16*": _CPU_TOO
    + "torch.heaviside of a NaN input is 0 (the CPU's kernel and torch._refs.heaviside alike), NumPy's "
    "reference gives NaN; the bfloat16 variant is instantiated for neuron by CUDA's dtype list",
    # Failures of the 311-tests-a-file run (2026-12-06) that are not device faults (each checked with
    # the file's tests run on the CPU alone, torch_neuronx not imported, where the class allows):
    **dict.fromkeys(
        ("test_autograd_multiple_views_python", "test_autograd_simple_views_python"),
        _CPU_TOO + "torch 2.13 names the custom Function in its view+inplace error ('Output 0 of ComplexView is a "
        "view ...'), the v2.4.0 test expects its backward node's name ('ComplexViewBackward')",
    ),
    "test_checkpointing_without_reentrant_with_context_fn": _CPU_TOO
    + "torch 2.13's non-reentrant checkpoint runs the context functions' modes differently from what the v2.4.0 "
    "test asserts (a CPU-only test)",
    "test_current_node": _CPU_TOO
    + "torch 2.13 runs aten.detach.default from within autograd where the v2.4.0 test expects no op (a CPU-only "
    "test)",
    "test_increment_version": _CPU_TOO
    + "torch 2.13 no longer raises for torch.autograd.graph.increment_version of an inference tensor, which the "
    "v2.4.0 test expects (a CPU-only test)",
    "test_named_tensor_for_complex_views": _CPU_TOO + "torch 2.13 removed named tensors (Tensor.refine_names)",
    "test_naughty_anomaly_access": _CPU_TOO
    + "an expectedFailure of the v2.4.0 test that torch 2.13 fixed (an unexpected success; a CPU-only test)",
    "test_naughty_autograd_function_stashing_ctx": _CPU_TOO
    + "torch 2.13 lets a custom Function's stashed ctx be read after backward where the v2.4.0 test expects a "
    "RuntimeError (a CPU-only test)",
    "test_unsafe_set_version_counter": _CPU_TOO
    + "torch 2.13's torch._C._autograd._unsafe_set_version_counter takes tuples of tensors and versions, the "
    "v2.4.0 test passes one of each (a CPU-only test)",
    "test_checkpointing_without_reentrant_dataparallel": (
        "a CUDA-only assumption: the test moves its module to the accelerator only where torch.cuda is available; "
        "nn.DataParallel takes the two NeuronCores and refuses the module left on the CPU ('module must have its "
        "parameters and buffers on device neuron:0'), as it would on two GPUs"
    ),
    "test_dataparallel_saved_tensors_hooks": (
        "a CUDA-only assumption: the test asks torch.cuda.device_count() whether nn.DataParallel runs its replicas in "
        "threads; over two NeuronCores it does, and the hooks are not called there, as the test expects for two GPUs"
    ),
    "test_large_bmm_backward": _CPU_TOO
    + "a CUDA test without @onlyCUDA: it makes its tensors with device='cuda' whatever device it is instantiated "
    "for ('Torch not compiled with CUDA enabled')",
    "test_householder_product_neuron_*": _CPU_TOO
    + "the test's reference helper calls np.linalg.qr on CPU tensors, which NumPy 2 returns as tensors, and "
    "torch.from_numpy refuses them ('expected np.ndarray (got Tensor)')",
    "test_shift_limits_neuron_uint8*": _CPU_TOO
    + "the test's NumPy reference shifts a uint8 array by negative Python ints, which NumPy 2 refuses ('Python "
    "integer -100 out of bounds for uint8', NEP 50); the v2.4.0 test was written for NumPy 1's value-based casting",
    **dict.fromkeys(
        ("test_scalar_support_sub_neuron_*", "test_scalar_support__refs_sub_neuron_*"),
        _CPU_TOO + "the test's NumPy reference of sub with a Python scalar computes in float64/complex128 (NumPy 2's "
        "promotion), and the test asserts the reference keeps float32/complex64",
    ),
    "test_trapezoid": _CPU_TOO + "the v2.4.0 test calls numpy.trapz, which NumPy 2 removed (numpy.trapezoid)",
    "test_dtypes__refs_logaddexp2": _CPU_TOO
    + "the Python reference computes integer inputs on any device (torch._refs.logaddexp2 of int32 works on the "
    "CPU), where the OpInfo lists aten's floating dtypes, and it lists no backward dtypes for the reference",
    "test_linalg_lstsq_input_checks": (
        "a CUDA-only assumption: on any device but the CPU the v2.4.0 test expects an unknown driver to raise "
        "CUDA's '`driver` other than `gels` is not supported on CUDA'; neuron computes every LAPACK driver "
        "(gels, gelsy, gelsd, gelss) as the CPU does and refuses an unknown one in the CPU's words"
    ),
    "test_addbmm_neuron_bfloat16*": (
        "a CUDA-capability assumption: on any device but the CPU the test expects bfloat16 addbmm to raise unless "
        "CUDA's compute capability is 5.3 or later (SM53OrLater, False where there is no CUDA); neuron computes it, "
        "as CUDA does on every GPU PyTorch 2.13 supports"
    ),
    "test_*int4_mm_*": (
        "int4 weight packing for CUDA's tinygemm kernel (_convert_weight_to_int4pack, _weight_int4pack_mm): a "
        "CUDA tensor-core layout; neuron has no int4 kernels, and torch 2.13's CPU has no kernel for the op (its "
        "CPU form is _convert_weight_to_int4pack_for_cpu), so the CPU fallback cannot run it either"
    ),
    "test_alias_from_tensor_neuron_*float*": _CPU_TOO + _ASARRAY_KEEPS_REQUIRES_GRAD,
    "test_alias_from_tensor_neuron_*complex*": _CPU_TOO + _ASARRAY_KEEPS_REQUIRES_GRAD,
    "test_retain_autograd_history_neuron_*": _CPU_TOO + _ASARRAY_KEEPS_REQUIRES_GRAD,
    "test_grad_empty_inputs": _CPU_TOO
    + "torch 2.13 raises RuntimeError for torch.autograd.grad with no inputs; the v2.4.0 test expects ValueError",
    "test_not_implemented_grad": _CPU_TOO
    + "torch 2.13 differentiates nextafter; the v2.4.0 test expects its derivative to be missing",
    "test_logging": _CPU_TOO
    + "torch 2.13's pt2 loggers carry more handlers than the v2.4.0 test allows (fails without torch_neuronx too)",
    "test_norm_matrix_degenerate_shapes_neuron_*": _CPU_TOO
    + "the installed NumPy (2.x) returns 0 for norms of empty matrices that the v2.4.0 test expects NumPy to refuse",
    "test_thread_shutdown": (
        "an accelerator's autograd worker thread: with neuron installed (autoloaded) the engine starts a thread "
        "for the device and logs its shutdown, which the v2.4.0 test expects only where CUDA, MPS or XPU is "
        "present (it fails on the CPU with neuron installed, as it would with CUDA's build and no GPU test flag)"
    ),
    "test_pinverse_neuron_float32*": _ILL_CONDITIONED_DRAW,
    "test_eigh_neuron_float32*": _ILL_CONDITIONED_DRAW,
    "test_fmod_remainder_by_zero_integral": (
        "expects CUDA's undefined values for an integer fmod/remainder by zero (all-ones bit patterns); "
        "neuron raises the CPU's ZeroDivisionError as a device fault (docs/usage.md: an integer division "
        "by zero is a device fault; a wrong value is worse than an error)"
    ),
    "test_logaddexp_neuron_complex64*": _CPU_TOO
    + "the reference (SciPy's logsumexp) wraps the imaginary part into (-pi, pi], while torch.logaddexp of "
    "complex inputs is max + log1p(exp(min - max)) without wrapping (the CPU's values, which neuron "
    "matches; the CPU also gives NaN for one of the test's large inputs)",
    "test_long_tensor_pow_floats": _CPU_TOO
    + "torch 2.13 words the error of an integer pow_ by a float 'result type Float can't be cast to the "
    "desired output type Long'; the v2.4.0 test expects 'Found dtype Long but expected Float'",
    "test_bincount": "FP64 policy: the test weighs bincount with int8 weights, whose sums the CPU and CUDA give "
    "in float64; neuron raises TypeError naming float32 weights as the fix (DESIGN.md, 8)",
    **dict.fromkeys(
        (
            "test_dim_ndim_limit_*",
            "test_dim_reduction_less_than_64",
            "test_errors_amax",
            "test_errors_amin",
            "test_errors_aminmax",
            "test_errors__refs_amax",
            "test_errors__refs_amin",
        ),
        "builds a tensor of 65 dimensions on the device, beyond the 64 of NumPy's and JAX's arrays that hold "
        "neuron's values: making it raises the reductions' own error ('only tensors with up to 64 dims are "
        "supported') before the reduction the test checks",
    ),
    "test_rot90": _CPU_TOO
    + "torch 2.13 raises IndexError for a dim out of range, the v2.4.0 test expects RuntimeError",
    "test_signal_window_functions_window_*_neuron_*float*": _SCIPY_EMPTY_WINDOW,
    "test_signal_windows_functions_window_*_neuron_*float*": _SCIPY_EMPTY_WINDOW,
    "test_kaiser_window_neuron_*float*": _SCIPY_EMPTY_WINDOW,
    "test_kaiser_neuron_*float*": _SCIPY_EMPTY_WINDOW,
    "test_basic_vitals": _CPU_TOO + _VITALS_GONE,
    "test_basic_vitals_read_write": _CPU_TOO + _VITALS_GONE,
    "test_dataloader_vitals": _CPU_TOO + _VITALS_GONE,
    "test_masked_scatter": _DEFERRED_CHECK
    + " (a source with fewer elements than the mask's count; the test checks that part on every device but CUDA)",
    "test_upsamplingBiMode2d_nonsupported_dtypes_*_mode_bi*_uint8": _UINT8_INTERPOLATION,
    "test_tensor_storage_type": (
        "the v2.4.0 test expects torch's CPU storage classes (torch.FloatStorage) for every device but "
        "CUDA; torch 2.13's storage_type() looks a PrivateUse1 device's classes up in torch.neuron, "
        "which has none of the deprecated typed-storage classes (so it returns None)"
    ),
    "test_grad_scaling_state_dict": (
        "a CUDA-only assumption: for every device but CUDA the v2.4.0 test expects the scaler's scale to be a "
        "torch.FloatTensor, the CPU's legacy tensor class (a neuron tensor is not one, as a CUDA tensor is "
        "not; the test checks torch.cuda.FloatTensor for CUDA); the state-dict checks after it pass"
    ),
    "test_as_subclass": _CPU_TOO
    + "torch 2.13's as_subclass refuses a class that does not inherit from Tensor, with a TypeError",
    "test_print": _CPU_TOO + "torch 2.13 prints tensor([100.0000, 0.0100]) with less padding than v2.4.0 expects",
    "test_storage_dead_weak_ref": _CPU_TOO
    + "torch 2.13 raises no 'Got a null Storage' error for a storage whose weak reference died",
    "test_large_bmm_mm_backward": (
        "a CUDA-only assumption: the test, in the class for every device, makes its tensors on device='cuda'"
    ),
    "test_ormqr_errors_and_warnings": _CPU_TOO
    + "torch 2.13 words the tau check 'tau.shape[-1] must be equal to min(other.shape[-2], input.shape[-1])'",
    "test_solve": _CPU_TOO
    + "NumPy 2's np.linalg.solve takes a right-hand side of two dimensions as a matrix, where the v2.4.0 test "
    "expects a batch of vectors (the empty-batch cases differ in shape)",
    "test_nuclear_norm_axes_small_brute_force_old": _CPU_TOO
    + "the test calls np.array(..., copy=False), which NumPy 2 refuses where a copy is needed",
    "test_batchnorm_nhwc_cpu": _CPU_TOO
    + "a CPU-only test whose channels-last batch norm differs from the reference by 2e-5 with torch 2.13",
    "test_softshrink_negative": _CPU_TOO
    + "torch 2.13 words the check 'lambda must be in range [0, 3.40282e+38] for input dtype Float, but found -1'",
    "test_one_hot": _DEFERRED_CHECK + " (an index out of range or a class count too small)",
    "test_lazy_clone": _NO_COW,
    "test_lazy_clone_view": _NO_COW,
    "test_lazy_clone_view_materialize": _NO_COW,
    "test_lazy_clone_binary_op_no_materialize": _NO_COW,
    "test_parallel_cow_materialize_error": _NO_COW,
    "test_pin_memory": (
        "a CPU-only test that expects pin_memory() to raise unless CUDA is available; with neuron, the "
        "process's accelerator, pinned memory exists, as with CUDA (tests/runtime/test_tensors.py checks "
        "the test's CUDA branch on neuron)"
    ),
    # PyTorch skips it on CUDA itself ("CUDA asserts instead of raising an exception").
    "test_trivial_fancy_out_of_bounds": _DEFERRED_CHECK + " (index bounds; PyTorch skips this test on CUDA)",
    # x[mask] = v with v's length not the mask's count of true elements; CUDA syncs on nonzero there.
    "test_boolean_assignment_value_mismatch": _DEFERRED_CHECK
    + " (a boolean mask's count against the value's length; the float value's dtype check comes first then)",
    # test/dynamo (docs/coverage.md, "Dynamo tests that take a device").
    "test_explain_with_backend": _CPU_TOO
    + "the test expects explain() to count 8 graphs for 7 graph breaks in nested calls; torch 2.13's "
    "dynamo TestCase turns nested_graph_breaks on, with which it counts 2 graphs and 1 break (the file is "
    "not v2.13.0's own)",
    "test_torch_cuda_is_initialized": (
        "a CUDA-only assumption: the test, in a class for accelerators, expects torch.cuda.is_initialized() "
        "to be True, which holds on CUDA alone (there is no CUDA here; it is not a question about neuron)"
    ),
    "test_multiple_rules": _NO_INDUCTOR,
    "test_complex_config": _NO_INDUCTOR,
    "test_combined_backend_and_config_override": _NO_INDUCTOR,
    "test_multiple_config_overrides_with_backend": _NO_INDUCTOR,
    "test_config_override_backward_propagation": _NO_INDUCTOR,
    # Failures of the 130-tests-a-file run of test_torch.py and test_nn.py (2026-12-04):
    "test_cpp_warnings_have_python_context": _CPU_TOO
    + "torch 2.13's torch.jit.script warns a DeprecationWarning first ('`torch.jit.script` is deprecated'), "
    "so the first warning the test records of the scripted call lacks the C++ context it looks for (the test "
    "makes CPU tensors only, on any device)",
    "test_invalid_arg_error_handling": _CPU_TOO
    + "torch 2.13's set_num_threads(2**65) raises ValueError ('Overflow when unpacking long long') in its "
    "argument parser, the v2.4.0 test expects RuntimeError (a CPU-only test)",
    "test_no_cuda_monkeypatch": _CPU_TOO
    + "torch 2.13's torch.cuda.Stream() without CUDA raises 'torch.cuda.Stream requires CUDA support', the "
    "v2.4.0 test expects 'Tried to instantiate dummy base class Stream' (a CPU-only test)",
    "test_broadcast_fn_map": _CPU_ONLY_MAP,
    "test_broadcast_fn_map2": _CPU_ONLY_MAP,
    "test_grad_scaler_deprecated_warning": (
        "the v2.4.0 test builds torch.cpu.amp.GradScaler on every device but CUDA and expects its warning to "
        "name that device ('torch.neuron.amp.GradScaler(args...)'), where torch.cpu.amp.GradScaler names the "
        "CPU (on MPS or XPU alike); torch.neuron.amp.GradScaler warns in the words the test expects "
        "(tests/runtime/test_amp.py)"
    ),
    "test_gradient_all": _CPU_TOO
    + "NumPy 2 returns np.gradient's arrays for several axes as a tuple, which the v2.4.0 test's _wrap_to_list "
    "wraps whole, so it compares 2 gradients with 1 (the float32, complex64 and int64 variants alike)",
    "test_parameterlistdict_pickle": _CPU_TOO
    + "torch 2.13 unpickles storages without the FutureWarning of torch.load with weights_only=False that the "
    "v2.4.0 test expects (a CPU-only test)",
    "test_unflatten": _CPU_TOO
    + "torch 2.13 removed the named-tensor forms the v2.4.0 tests use (test_nn: nn.Unflatten's (name, size) tuples, "
    "'unflattened_size must be tuple of ints, but found element of type tuple at pos 0'; test_torch: "
    "Tensor.unflatten of a dimension name; CPU-only tests)",
    "test_manual_seed": _CPU_TOO
    + "torch 2.13 raises ValueError('Overflow when unpacking long long') for a seed out of range, the v2.4.0 test "
    "expects RuntimeError (a CPU-only test)",
    "test_sobolengine_distribution*": _CPU_TOO
    + "NumPy 2's percentile of a float32 tensor returns float32, the v2.4.0 test compares it with a float64 array "
    "(a CPU-only test)",
    "test_gradient_type_promotion": _CPU_TOO
    + "torch 2.13's torch.gradient returns a tuple, which the v2.4.0 test assigns into",
    "test_unflatten_invalid_arg": _CPU_TOO
    + "torch 2.13's nn.Unflatten checks a list of lists element by element ('unflattened_size must be tuple of "
    "ints, but found element of type list at pos 0'), the v2.4.0 test expects 'unflattened_size must be a "
    "tuple of tuples, but found type list' (a CPU-only test)",
    "test_reference_numerics_large_round_decimals_3_neuron_float16*": (
        "values follow the CPU: its float16 round(decimals=3) multiplies by 1000 in float32, finite where "
        "the test's NumPy reference (and CUDA's Half arithmetic) overflow to inf above 65.5"
    ),
    "test_stable_sort_against_numpy": (
        "after its first samples the test index_fills the device tensor with index tensors on the CPU "
        "(torch.randint without device=), which CUDA's TensorIterator refuses as neuron does; the test "
        "returns before that part on CUDA"
    ),
}


def upstream_skip_reason(test_name: str) -> str | None:
    """Why ``torch-neuronx upstream-tests`` skips the instantiated test ``test_name`` on purpose
    (``test_add_neuron_float64``), or None when it runs."""
    base, _, suffix = test_name.partition("_neuron")
    if base in UPSTREAM_SKIPS:
        return UPSTREAM_SKIPS[base]
    for pattern, reason in UPSTREAM_SKIPS.items():
        if "*" in pattern and fnmatch.fnmatchcase(test_name, pattern):
            return reason
    for token in suffix.replace("[", "_").split("_"):
        if token in UPSTREAM_DTYPE_SKIPS:
            return UPSTREAM_DTYPE_SKIPS[token]
    return None
