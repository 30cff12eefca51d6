"""torch.compile(backend="neuron") against eager on neuron and against CPU."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import warnings

import pytest
import torch
import torch._dynamo

import torch_neuronx

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16), torch.nn.Linear(16, 4))


def test_forward_matches_eager_and_cpu():
    model = _mlp()
    x = torch.randn(5, 8)
    neuron_model = copy.deepcopy(model).to("neuron")
    compiled = torch.compile(neuron_model, backend="neuron", fullgraph=True)
    got = compiled(x.to("neuron"))
    torch.testing.assert_close(got.cpu(), neuron_model(x.to("neuron")).cpu())
    torch.testing.assert_close(got.cpu(), model(x), atol=1e-5, rtol=1e-5)
    assert torch_neuronx.get_fallback_ops() == {}


def test_each_compiled_graph_trims_the_heaps_once(monkeypatch):
    from torch_neuronx.runtime import host_memory

    trims = []
    monkeypatch.setattr(host_memory, "trim", lambda: trims.append(1))
    compiled = torch.compile(lambda x: torch.sin(x) * 2, backend="neuron", fullgraph=True)
    x = torch.randn(6)
    torch.testing.assert_close(compiled(x.to("neuron")).cpu(), torch.sin(x) * 2)
    assert len(trims) == 1
    compiled(x.to("neuron"))  # the cached executable: nothing compiled, nothing trimmed
    assert len(trims) == 1
    compiled(torch.randn(3, 2).to("neuron"))  # a new graph
    assert len(trims) == 2


def test_backward_matches_cpu():
    model = _mlp()
    neuron_model = copy.deepcopy(model).to("neuron")
    x = torch.randn(5, 8)
    before = len(torch_neuronx.get_dynamo_metrics())
    torch.compile(neuron_model, backend="neuron")(x.to("neuron")).square().sum().backward()
    model(x).square().sum().backward()
    for cpu_param, neuron_param in zip(model.parameters(), neuron_model.parameters(), strict=True):
        torch.testing.assert_close(neuron_param.grad.cpu(), cpu_param.grad, atol=1e-5, rtol=1e-5)
    kinds = {m["kind"] for m in torch_neuronx.get_dynamo_metrics()[before:]}
    assert {"forward", "backward"} <= kinds


def test_a_double_backward_through_a_compiled_graph_raises_aot_autograds_error():
    # The forward saves x for the backward. It returned a copy of x, outside the autograd graph, so
    # the second grad said x "appears to not have been used" (None with allow_unused=True, helper-88);
    # AOTAutograd's eager backend and Inductor save x itself and refuse the double backward.
    torch._dynamo.reset()
    x = torch.randn(5, device="neuron", requires_grad=True)
    compiled = torch.compile(lambda t: (t.sin() * t).sum(), backend="neuron")
    (grad,) = torch.autograd.grad(compiled(x), x, create_graph=True)
    on_cpu = x.detach().cpu()
    torch.testing.assert_close(grad.cpu(), on_cpu.cos() * on_cpu + on_cpu.sin())
    for allow_unused in (False, True):
        with pytest.raises(RuntimeError, match="does not currently support double backward"):
            torch.autograd.grad(grad.sum(), x, allow_unused=allow_unused)


def test_whole_training_step_compiled_together_matches_cpu():
    cpu_model = _mlp()
    neuron_model = copy.deepcopy(cpu_model).to("neuron")
    cpu_opt = torch.optim.AdamW(cpu_model.parameters(), lr=1e-2)
    neuron_opt = torch.optim.AdamW(neuron_model.parameters(), lr=1e-2)

    def step(model, opt, x, y):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss

    compiled_step = torch.compile(step, backend="neuron")
    x, y = torch.randn(16, 8), torch.randn(16, 4)
    for _ in range(3):
        expected = step(cpu_model, cpu_opt, x, y)
        got = compiled_step(neuron_model, neuron_opt, x.to("neuron"), y.to("neuron"))
        torch.testing.assert_close(got.cpu(), expected, atol=1e-5, rtol=1e-5)
    for cpu_param, neuron_param in zip(cpu_model.parameters(), neuron_model.parameters(), strict=True):
        torch.testing.assert_close(neuron_param.cpu(), cpu_param, atol=1e-5, rtol=1e-5)
    assert torch_neuronx.get_fallback_ops() == {}


@pytest.mark.parametrize(("optimizer", "capturable"), [("Adam", False), ("Adam", True), ("NAdam", False)])
def test_compiled_step_of_an_optimizer_with_state_updates_it_once(optimizer, capturable):
    # Dynamo holds the existing optimizer state as graph attributes (real tensors): the backend's
    # fake run of the graph (dynamo/eager_refusals.py) wrote them, counting the first step twice.
    # NAdam's host mu_product moves to the device with step (_compat/compiled_optimizers.py): Dynamo
    # moved step only, and the trace multiplied a host tensor by a device one.
    cpu_model = _mlp()
    neuron_model = copy.deepcopy(cpu_model).to("neuron")
    make = getattr(torch.optim, optimizer)
    cpu_opt = make(cpu_model.parameters(), lr=1e-2, foreach=False)  # the CPU is not capturable
    neuron_opt = make(neuron_model.parameters(), lr=1e-2, foreach=False, capturable=capturable)
    x = torch.randn(16, 8)
    for steps, (model, opt, x_on) in enumerate([(cpu_model, cpu_opt, x), (neuron_model, neuron_opt, x.to("neuron"))]):
        compiled = torch.compile(opt.step, backend="neuron") if steps else opt.step
        for call in (opt.step, compiled, compiled):
            opt.zero_grad()
            model(x_on).square().sum().backward()
            call()
    for cpu_param, neuron_param in zip(cpu_model.parameters(), neuron_model.parameters(), strict=True):
        cpu_state, neuron_state = cpu_opt.state[cpu_param], neuron_opt.state[neuron_param]
        assert neuron_state["step"].item() == cpu_state["step"].item() == 3
        torch.testing.assert_close(neuron_state["exp_avg"].cpu(), cpu_state["exp_avg"], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(neuron_param.cpu(), cpu_param, atol=1e-5, rtol=1e-5)


class _Head(torch.nn.Module):
    """A user-defined module: Dynamo compiles its forward (it skips torch.nn's own modules' code)."""

    def __init__(self) -> None:
        super().__init__()
        self.body = _mlp()

    def forward(self, x):
        return self.body(x).softmax(dim=-1)


def test_default_backend_and_module_compile():
    torch.compiler.set_default_backend("neuron")
    try:
        model = _Head().to("neuron")
        x = torch.randn(3, 8, device="neuron")
        expected = model(x)
        before = len(torch_neuronx.get_dynamo_metrics())
        model.compile()
        torch.testing.assert_close(model(x).cpu(), expected.cpu())
    finally:
        torch.compiler.set_default_backend(None)
    assert len(torch_neuronx.get_dynamo_metrics()) > before


def test_graph_breaks():
    def fn(x):
        y = x.sin() * 2
        print("graph break")  # noqa: T201
        return (y + x.cos()).sum(dim=0)

    x = torch.randn(4, 5)
    before = len(torch_neuronx.get_dynamo_metrics())
    got = torch.compile(fn, backend="neuron")(x.to("neuron"))
    torch.testing.assert_close(got.cpu(), fn(x))
    assert len(torch_neuronx.get_dynamo_metrics()) - before == 2  # one graph on each side of the break


def test_in_place_ops_on_inputs_reach_the_caller():
    def fn(x, buffer):
        buffer.add_(x)
        x.mul_(2)
        return buffer.sum()

    x, buffer = torch.randn(6), torch.zeros(6)
    x_n, buffer_n = x.to("neuron"), buffer.to("neuron")
    total = torch.compile(fn, backend="neuron")(x_n, buffer_n)
    expected_total = fn(x, buffer)
    torch.testing.assert_close(total.cpu(), expected_total)
    torch.testing.assert_close(x_n.cpu(), x)
    torch.testing.assert_close(buffer_n.cpu(), buffer)


def test_batch_norm_running_statistics_update():
    torch.manual_seed(0)
    cpu_norm = torch.nn.BatchNorm1d(4)
    neuron_norm = copy.deepcopy(cpu_norm).to("neuron")
    compiled = torch.compile(neuron_norm, backend="neuron")
    for _ in range(2):
        x = torch.randn(8, 4)
        torch.testing.assert_close(compiled(x.to("neuron")).cpu(), cpu_norm(x), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(neuron_norm.running_mean.cpu(), cpu_norm.running_mean)
    torch.testing.assert_close(neuron_norm.running_var.cpu(), cpu_norm.running_var)
    assert neuron_norm.num_batches_tracked.item() == 2


def test_outputs_aliasing_inputs_and_each_other():
    def fn(x):
        return x.view(2, 3), x[1:], x.t().t() * 1

    x = torch.arange(6.0, device="neuron")
    reshaped, tail, copied = torch.compile(fn, backend="neuron")(x)
    x[2] = 100.0  # views of the input see the write, as in eager
    assert reshaped[0, 2].item() == 100.0 and tail[1].item() == 100.0
    assert copied[2].item() == 2.0


def test_non_contiguous_input_views():
    base = torch.randn(6, 8)
    fn = torch.compile(lambda a: (a * 3).sum(dim=1), backend="neuron")
    torch.testing.assert_close(fn(base.to("neuron").t()[:, 1:5]).cpu(), (base.t()[:, 1:5] * 3).sum(dim=1))


def test_dropout_is_fresh_every_call_and_follows_the_seed():
    fn = torch.compile(lambda x: torch.nn.functional.dropout(x, p=0.5, training=True), backend="neuron")
    x = torch.ones(1000, device="neuron")
    torch.manual_seed(3)
    first, second = fn(x).cpu(), fn(x).cpu()
    assert not torch.equal(first, second)
    assert 350 < int((first == 0).sum()) < 650
    torch.manual_seed(3)
    torch.testing.assert_close(fn(x).cpu(), first, rtol=0, atol=0)


def test_new_shape_compiles_a_new_graph():
    fn = torch.compile(lambda a: (a * 2).sum(), backend="neuron")
    for length in (3, 5, 7):
        torch.testing.assert_close(fn(torch.ones(length, device="neuron")).cpu(), torch.tensor(2.0 * length))


def test_new_shape_of_a_graph_that_creates_device_tensors():
    """The graph Dynamo makes dynamic after a new shape, retraced for each call's sizes, creates a
    tensor on the device and adds the inputs into it (JetMoE's router in the model sweep)."""

    def f(x, index):
        return torch.zeros(4, x.shape[1], device=x.device).index_add(0, index, x) * 2

    fn = torch.compile(f, backend="neuron")
    for rows in (6, 5):
        x, index = torch.randn(rows, 3), torch.arange(rows) % 4
        torch.testing.assert_close(fn(x.to("neuron"), index.to("neuron")).cpu(), f(x, index))


@pytest.mark.parametrize("inplace", [False, True], ids=["index_add", "index_add_"])
def test_index_add_of_integers_with_a_float_alpha_compiles_as_eager_computes(inplace):
    # CPU and CUDA convert alpha (2.5 adds twice); PyTorch's decomposition, which FakeTensorMode ran
    # as the meta kernel, refused it ("alpha argument of type float cannot be safely cast").
    def f(x, index, source):
        return (x.index_add_ if inplace else x.index_add)(0, index, source, alpha=2.5) * 1

    x, index, source = torch.zeros(4, dtype=torch.int32), torch.tensor([0, 2]), torch.tensor([3, 5], dtype=torch.int32)
    compiled = torch.compile(f, backend="neuron")
    torch.testing.assert_close(
        compiled(x.to("neuron"), index.to("neuron"), source.to("neuron")).cpu(), f(x, index, source)
    )
    message = r"Number of indices \(3\) should be equal to source.size\(dim\): \(2\), for dim: 0"
    with pytest.raises(RuntimeError, match=message):
        f(x, torch.tensor([0, 2, 3]), source)
    with pytest.raises(RuntimeError, match=message):
        compiled(x.to("neuron"), torch.tensor([0, 2, 3], device="neuron"), source.to("neuron"))


def test_as_strided_of_a_view_reads_the_storage_the_view_places():
    """Longformer's and LED's overlapping chunks: as_strided of a reshaped view of a transposed input
    (found by the model sweep: LED's compiled encoder was off by 4e-4, this by 5)."""

    def chunks(x):
        y = x.transpose(1, 2).reshape(8, 16, 8).view(8, 2, 8, 8)  # a view of x's storage
        return y.as_strided((8, 3, 8, 8), (y.stride(0), y.stride(1) // 2, *y.stride()[2:])) * 1

    x = torch.randn(16, 2, 4, 8).transpose(0, 1)
    on_device = torch.empty_strided(x.shape, x.stride(), device="neuron").copy_(x)
    torch.testing.assert_close(torch.compile(chunks, backend="neuron")(on_device).cpu(), chunks(x))


def test_as_strided_outside_a_sliced_view_raises_instead_of_reading_the_slice():
    fn = torch.compile(lambda x: x[2:].as_strided((4,), (1,), 0) * 1, backend="neuron")
    with pytest.raises(Exception, match=r"as_strided: .* read storage elements outside the input tensor"):
        fn(torch.arange(8.0, device="neuron"))


@pytest.mark.parametrize("how", ["dynamic=True", "default backend, dynamic=True", "mark_dynamic"])
def test_requested_dynamic_shapes_raise_naming_the_dimension(how):
    x = torch.randn(4, 3, device="neuron")
    if how == "dynamic=True":
        fn = torch.compile(lambda a: a * 2, backend="neuron", dynamic=True)
    elif how == "default backend, dynamic=True":
        fn = torch.compile(lambda a: a * 2, dynamic=True)
    else:
        torch._dynamo.mark_dynamic(x, 0)
        fn = torch.compile(lambda a: a * 2, backend="neuron")
    with pytest.raises(
        Exception, match=r"torch.compile on neuron compiles static shapes, but dimension 0 of .* \(symbolic size s\d+\)"
    ):
        fn(x)


def test_other_modes_warn_and_compile_as_default():
    fn = torch.compile(lambda a: a + 1, backend="neuron", mode="max-autotune-no-cudagraphs")
    with pytest.warns(UserWarning, match="using mode='default'"):
        torch.testing.assert_close(fn(torch.ones(2, device="neuron")).cpu(), torch.full((2,), 2.0))


def test_metrics_per_graph():
    fn = torch.compile(lambda a: a.exp().sum(), backend="neuron")
    x = torch.ones(4, device="neuron")
    before = len(torch_neuronx.get_dynamo_metrics())
    fn(x)
    fn(x)
    (metrics,) = torch_neuronx.get_dynamo_metrics()[before:]
    assert metrics["kind"] == "inference" and metrics["nodes"] == 2
    assert metrics["calls"] == 2 and metrics["cache_hits"] == 1 and metrics["signatures"] == 1
    assert metrics["lowering_s"] > 0 and metrics["compile_s"] >= 0


# An op with only a CPU kernel and a fake: opaque to the compiler, unknown to the device.
_library = torch.library.Library("neuron_compile_test", "DEF")
_library.define("cpu_only(Tensor x) -> Tensor")
_library.impl("cpu_only", lambda x: x * 10, "CPU")
torch.library.register_fake("neuron_compile_test::cpu_only", lambda x: torch.empty_like(x), lib=_library)


def test_compile_failure_names_the_node_and_source_line():
    def fn(a):
        return torch.ops.neuron_compile_test.cpu_only(a) + 1

    with pytest.raises(
        Exception, match=r"cannot compile node .*cpu_only.*It comes from: File .*test_compile.py.*cpu_only\(a\)"
    ):
        torch.compile(fn, backend="neuron")(torch.ones(3, device="neuron"))


def test_compile_failure_runs_eagerly_when_fallback_execution_is_enabled(monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", "0")
    fn = torch.compile(lambda a: torch.ops.neuron_compile_test.cpu_only(a) + 1, backend="neuron")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn(torch.ones(3, device="neuron"))
    torch.testing.assert_close(result.cpu(), torch.full((3,), 11.0))
    assert any("runs eagerly" in str(w.message) for w in caught)


def test_artifacts_are_kept_on_request(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS", "1")
    monkeypatch.setenv("TORCH_NEURONX_DEBUG_DIR", str(tmp_path))
    torch.compile(lambda a: a.sin() * 2, backend="neuron")(torch.ones(3, device="neuron"))
    (folder,) = tmp_path.iterdir()
    names = sorted(path.name for path in folder.iterdir())
    assert names == ["fx_graph_1.py", "stablehlo_1.mlir"]
    assert "aten.sin" in (folder / "fx_graph_1.py").read_text()
    assert "stablehlo.sine" in (folder / "stablehlo_1.mlir").read_text()


def test_persistent_cache_lets_a_second_process_skip_compilation(tmp_path):
    code = (
        "import torch, torch_neuronx\n"
        "fn = torch.compile(lambda a: (a @ a).relu().sum(), backend='neuron')\n"
        "fn(torch.ones(8, 8, device='neuron'))\n"
        "print(torch_neuronx.get_dynamo_metrics()[0]['persistent_cache_hits'])\n"
    )
    env = dict(os.environ, TORCH_NEURONX_NEFF_CACHE_DIR=str(tmp_path))
    runs = [
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, check=False)
        for _ in range(2)
    ]
    for run in runs:
        assert run.returncode == 0, run.stderr
    assert [run.stdout.strip() for run in runs] == ["0", "1"]


def test_compiled_lstm_before_any_eager_run():
    """Dynamo must not trace into the backend's kernels when a compiled frame graph-breaks into them."""
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(3, 4)
    x = torch.randn(5, 2, 3)
    expected = lstm(x)[0]
    got = torch.compile(lstm.to("neuron"), backend="neuron")(x.to("neuron"))[0]
    torch.testing.assert_close(got.cpu(), expected, atol=1e-5, rtol=1e-5)


@torch.library.custom_op("neuron_compile_test::scale_add", mutates_args=(), device_types="neuron")
def _scale_add(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    return x * alpha + y


@_scale_add.register_fake
def _(x, y, alpha):
    return torch.empty_like(x)


def _scale_add_backward(ctx, grad):
    return grad * ctx.alpha, grad, None


def _scale_add_setup(ctx, inputs, output):
    ctx.alpha = inputs[2]


_scale_add.register_autograd(_scale_add_backward, setup_context=_scale_add_setup)


def test_custom_op_with_a_neuron_kernel_runs_between_compiled_parts():
    def fn(x, y, op):
        a = x.sin() * 2
        return (op(a, y, 3.0).cos() + a).sum()

    def reference(x, y, alpha):
        return x * alpha + y

    x, y = torch.randn(5), torch.randn(5)
    x_cpu = x.clone().requires_grad_()
    expected = fn(x_cpu, y, reference)
    expected.backward()
    x_neuron = x.to("neuron").requires_grad_()
    before = len(torch_neuronx.get_dynamo_metrics())
    got = torch.compile(fn, backend="neuron", fullgraph=True)(x_neuron, y.to("neuron"), _scale_add)
    got.backward()
    torch.testing.assert_close(got.cpu(), expected)
    torch.testing.assert_close(x_neuron.grad.cpu(), x_cpu.grad)
    kinds = [m["kind"] for m in torch_neuronx.get_dynamo_metrics()[before:]]
    assert kinds.count("forward") == 2 and "backward" in kinds  # two compiled parts around the custom op


def test_ops_with_side_effects_run_in_order_between_compiled_parts():
    # torch.linalg.solve checks its result with _linalg_check_errors, which AOTAutograd wraps in a
    # with_effects node: it runs eagerly and raises the CPU's LinAlgError for a singular matrix.
    def solve_twice(a, b):
        return torch.linalg.solve(a, b) * 2

    a, b = torch.randn(3, 3) + 3 * torch.eye(3), torch.randn(3, 2)
    compiled = torch.compile(solve_twice, backend="neuron", fullgraph=True)
    torch.testing.assert_close(compiled(a.to("neuron"), b.to("neuron")).cpu(), solve_twice(a, b))
    with pytest.raises(torch.linalg.LinAlgError, match="input matrix is singular"):
        compiled(torch.zeros(3, 3, device="neuron"), b.to("neuron"))


DEVICE_MOVES = {
    "to_cpu": (lambda x, y: x.cpu() * 2, False),
    "cpu_results": (lambda x, y: (x.to("cpu") + 1, x.sum().cpu(), x * 3), False),
    "cpu_input_moved": (lambda x, y: x + y.to(x.device), False),
    "cpu_only": (lambda x, y: (y * 2).sum(), False),
    "other_core": (lambda x, y: (x.to("neuron:1") * 2, x + 1), True),
    "back_and_forth": (lambda x, y: (x.cpu().sin().to(x.device) * x).sum(), False),
}


@pytest.mark.parametrize("case", DEVICE_MOVES)
@pytest.mark.parametrize("sizes", [(3,), (3, 4, 5)], ids=["one_shape", "new_shapes"])
def test_device_moves_inside_a_compiled_function_land_where_eager_puts_them(case, sizes):
    """Copies off the core and ops on the CPU run eagerly between compiled parts; an executable runs
    on one core. Also after Dynamo makes the graph dynamic on a shape change."""
    fn, needs_two_cores = DEVICE_MOVES[case]
    if needs_two_cores and torch.neuron.device_count() < 2:
        pytest.skip("requires 2 NeuronCores")
    compiled = torch.compile(fn, backend="neuron")
    for size in sizes:
        x, y = torch.randn(size, device="neuron"), torch.randn(size)
        got, want = compiled(x, y), fn(x, y)
        for g, w in zip(torch.utils._pytree.tree_leaves(got), torch.utils._pytree.tree_leaves(want), strict=True):
            assert g.device == w.device
            torch.testing.assert_close(g.cpu(), w.cpu())
    assert torch_neuronx.get_fallback_ops() == {}


def test_gradient_through_a_copy_to_the_cpu():
    x = torch.randn(4, 3, device="neuron", requires_grad=True)
    torch.compile(lambda x: (x.cpu().exp() * 2).sum(), backend="neuron")(x).backward()
    assert x.grad.device == x.device
    torch.testing.assert_close(x.grad.cpu(), x.detach().cpu().exp() * 2)


def test_float64_inside_a_compiled_graph_raises_the_dtype_policy_error():
    def widen(a):
        return a.double() * 2

    # The TypeError eager raises, at every call; it came as Dynamo's BackendCompilerFailed.
    message = r"^aten::_to_copy on neuron: float64 \(double\) tensors are not supported because Trainium has no FP64"
    compiled = torch.compile(widen, backend="neuron")
    for _ in range(2):
        with pytest.raises(TypeError, match=message) as raised:
            compiled(torch.ones(3, device="neuron"))
        assert raised.value.__notes__[-1].startswith("torch.compile(backend='neuron') node double (")


def test_float64_tensor_made_inside_a_compiled_function_raises_while_dynamo_traces():
    def add_float64_literal(a):
        return a + torch.tensor([1.0, 2.0], dtype=torch.float64, device=a.device)

    # Dynamo runs the constructor on fake tensors before any backend sees the graph and wraps the
    # eager error, as it does any eager error of a traced function on CUDA.
    message = r"got TypeError\(\"aten::empty_strided on neuron: float64 \(double\) tensors are not supported"
    with pytest.raises(torch._dynamo.exc.TorchRuntimeError, match=message):
        torch.compile(add_float64_literal, backend="neuron")(torch.ones(2, device="neuron"))


#: Calls CUDA's eager kernels refuse in these dtypes (eager/dispatched_dtypes.py): compiled, the
#: lowering computed softmax of integers (zeros) and leaked JAX's TypeError for silu.
COMPILED_REFUSALS = {
    "softmax_int64": (lambda x: torch.softmax(x, 0), torch.int64),
    "silu_int64": (torch.nn.functional.silu, torch.int64),
    "gelu_int32": (torch.nn.functional.gelu, torch.int32),
    "sort_complex": (lambda x: torch.sort(x).values, torch.complex64),
    # Decomposed by AOTAutograd, so the graph held their decompositions' ops, which take integers:
    # through the table (celu) or PyTorch's tracing-only Autograd kernels (hardshrink, multi_margin_loss).
    "celu_int64": (torch.nn.functional.celu, torch.int64),
    "hardshrink_int64": (torch.nn.functional.hardshrink, torch.int64),
    "multi_margin_loss_int64": (
        lambda x: torch.nn.functional.multi_margin_loss(x[None], torch.zeros(1, dtype=torch.long, device=x.device)),
        torch.int64,
    ),
    # ATen's CompositeExplicitAutograd kernel refuses; the fake run took PyTorch's decomposition.
    "mvlgamma_bool": (lambda x: torch.mvlgamma(x, 1), torch.bool),
    "mvlgamma_p_0": (lambda x: torch.mvlgamma(x, 0), torch.float32),
}


@pytest.mark.parametrize("case", COMPILED_REFUSALS)
def test_compiled_graph_refuses_the_dtypes_eager_refuses(case):
    fn, dtype = COMPILED_REFUSALS[case]
    x = torch.arange(1, 4, device="neuron").to(dtype)
    with pytest.raises(RuntimeError) as eager:
        fn(x)
    with pytest.raises(type(eager.value)) as compiled:
        torch.compile(fn, backend="neuron")(x)
    assert str(compiled.value) == str(eager.value)
    assert any("torch.compile(backend='neuron') node" in note for note in compiled.value.__notes__)


@pytest.mark.parametrize(
    "factory",
    [lambda: torch.tril_indices(3, 5, -1, device="neuron"), lambda: torch.triu_indices(4, 3, 1, device="neuron")],
    ids=["tril_indices", "triu_indices"],
)
def test_index_factories_whose_decomposition_computes_in_float64_compile(factory):
    # Their decomposition's float64 arange met the FP64 policy's check of graph nodes.
    torch.testing.assert_close(torch.compile(factory, backend="neuron")().cpu(), factory().cpu())


@pytest.mark.parametrize(
    "fn",
    [
        lambda start, end: torch.linspace(start, end, 7),
        lambda start, end: torch.logspace(start, end, 5, base=2),
        lambda start, end: torch.logspace(start, 2.0, 5),
        lambda start, end: torch.linspace(0.5, end, 7, dtype=torch.int32),
    ],
    ids=["linspace", "logspace", "logspace-Tensor_Scalar", "linspace-Scalar_Tensor-int32"],
)
def test_ranges_with_tensor_bounds_compile(fn):
    # Their decomposition made its steps on the CPU beside the neuron bounds: AOTAutograd's fake
    # tensors raised FakeTensorDeviceMismatchError, so every such graph failed to compile.
    start, end = torch.tensor(0.5), torch.tensor(2.0)
    actual = torch.compile(fn, backend="neuron")(start.to("neuron"), end.to("neuron"))
    torch.testing.assert_close(actual.cpu(), fn(start, end))


# An op with no lowering whose kernel is CompositeExplicitAutogradNonFunctional, as ATen's
# structured kernels' functional forms are (the last unlowered ATen ones were lowered since).
_library.define("non_functional_composite(Tensor x) -> Tensor")
_library.impl("non_functional_composite", lambda x: x.exp() * 10, "CompositeExplicitAutogradNonFunctional")


def test_an_op_the_cpu_fallback_runs_compiles_around_it():
    # Eager runs such an op through its composite kernel, and so does a compiled graph (it raised
    # CompileError: only CompositeExplicitAutograd kernels counted as runnable).
    x = torch.randn(1, 2, 8, 8)

    def around(x):
        return torch.ops.neuron_compile_test.non_functional_composite(x * 3) * 2

    actual = torch.compile(around, backend="neuron")(x.to("neuron"))
    torch.testing.assert_close(actual.cpu(), around(x))


def test_default_backend_compiles_neuron_graphs_with_neuron():
    # torch.compile(model) hands graphs to inductor, which has no neuron code generator
    # (InductorError: KeyError: 'neuron'); graphs of neuron tensors compile with backend="neuron".
    model = _mlp()
    x = torch.randn(5, 8)
    expected = model(x)
    expected.sum().backward()
    neuron_model = copy.deepcopy(model).to("neuron")
    neuron_model.zero_grad(set_to_none=True)
    compiled = torch.compile(neuron_model, fullgraph=True)
    got = compiled(x.to("neuron"))
    got.sum().backward()
    torch.testing.assert_close(got.cpu(), expected, atol=1e-5, rtol=1e-5)
    for ours, theirs in zip(neuron_model.parameters(), model.parameters(), strict=True):
        torch.testing.assert_close(ours.grad.cpu(), theirs.grad, atol=1e-5, rtol=1e-5)
    assert torch_neuronx.get_dynamo_metrics(), "the graphs were compiled by the neuron backend"
    made_on_neuron = torch.compile(lambda: torch.arange(4.0, device="neuron") * 2, backend="inductor")
    torch.testing.assert_close(made_on_neuron().cpu(), torch.arange(4.0) * 2)


def test_default_backend_leaves_other_graphs_to_inductor():
    from torch_neuronx.dynamo.default_backend import compile_default

    graph = torch.fx.symbolic_trace(lambda t: t.sin())
    for node in graph.graph.nodes:
        node.meta["example_value"] = torch.empty(3, device="meta")
    seen = []
    result = compile_default(lambda g, inputs: seen.append(g) or "inductor's", graph, [torch.empty(3, device="meta")])
    assert result == "inductor's" and seen == [graph]


#: Functions whose compiled graph receives a lazy conjugate or negative view: as an argument, or from
#: a node AOTAutograd leaves to run eagerly (``_conj``). Their storage holds other values: compiled
#: graphs read it raw and returned the unconjugated values (hfft2 was off by 14).
MATH_BIT_INPUTS = {
    "conj-argument": (lambda x: x.clone() * 1, lambda x: x.conj()),
    "conj-in-the-graph": (lambda x: x.conj().clone() * 1, lambda x: x),
    "neg-view-argument": (lambda x: x + 0, lambda x: x.real._neg_view()),
    "hfft2": (lambda x: torch.fft.hfft2(x.real, s=(3, 10), dim=(1, 2), norm="ortho"), lambda x: x),
}


@pytest.mark.parametrize("case", MATH_BIT_INPUTS)
def test_compiled_graphs_read_lazy_conjugate_and_negative_views(case):
    fn, make_input = MATH_BIT_INPUTS[case]
    torch.manual_seed(0)
    x = torch.randn(5, 6, 7, dtype=torch.complex64)
    expected = fn(make_input(x))
    actual = torch.compile(fn, backend="neuron")(make_input(x.to("neuron")))
    torch.testing.assert_close(actual.cpu(), expected)


@pytest.mark.parametrize("dtype", [torch.int8, torch.int32, torch.int64], ids=str)
def test_compiled_integer_abs_of_the_minimum_wraps_as_on_cpu(dtype):
    # XLA's algebraic simplifier took an integer abs to be non-negative: abs(x) < 0 folded to False
    # and abs(x).sign() gave 0 for INT_MIN, whose abs wraps to itself (helper-24's trial).
    def signs(x):
        magnitude = x.abs()
        return magnitude < 0, magnitude.sign(), magnitude // 2

    x = torch.tensor([torch.iinfo(dtype).min, -3, 3], dtype=dtype)
    compiled = torch.compile(signs, backend="neuron")(x.to("neuron"))
    for got, want in zip(compiled, signs(x), strict=True):
        torch.testing.assert_close(got.cpu(), want)


#: Float expressions XLA's algebraic simplifier rewrote by real-number algebra in compiled graphs and
#: adaptive-eager traces (helper-24's trial): each, in IEEE arithmetic, differs from its rewrite.
_ROUNDING = 1.5 * 2**23  # (x + c) - c rounds x to an integer: quantization code's trick
IEEE_EXPRESSIONS = {
    "(x + c) - c": (lambda x: (x + _ROUNDING) - _ROUNDING, [0.3, 1.7, 2.5, -1.2]),
    "(x + 1e8) - 1e8": (lambda x: (x + 1e8) - 1e8, [0.3, 1.7, 2.5, -1.2]),
    # not 1.0: ln(float32(e)) lies 0.02 ulp from a rounding tie, where XLA's vectorised log (AVX-512)
    # rounds to 1.0 and the CPU's to 0.99999994, with no rewrite involved
    "log(exp(x))": (lambda x: torch.log(torch.exp(x)), [100.0, 2.0]),
    "exp(x) / exp(x)": (lambda x: torch.exp(x) / torch.exp(x), [100.0, 1.0]),
    "sqrt(x * x)": (lambda x: torch.sqrt(x * x), [1e20, 1e-30, 3.0]),
    "(x * 1e30) * 1e-30": (lambda x: (x * 1e30) * 1e-30, [3.0]),
    "exp(x) * exp(-x / 5)": (lambda x: torch.exp(x) * torch.exp(-x / 5), [100.0, 1.0]),
    "1 / (x + 0.0)": (lambda x: 1 / (x + 0.0), [-0.0, 2.0]),
    "x / tensor scalar": (lambda x: x / x[0], [3.3] + list(range(100))),
    # helper-25's trial: Python ints, constant fills, pow/exp2/reciprocal/mean
    "(x + int c) - int c": (lambda x: (x + 12582912) - 12582912, [0.3, 1.7, 2.5, -1.2]),
    "x * 2 * 0.5": (lambda x: x * 2 * 0.5, [3e38, 1.0]),
    "1 / (zeros_like(x) + x)": (lambda x: 1 / (torch.zeros_like(x) + x), [-0.0, 2.0]),
    "log(pow(x, y))": (lambda x: torch.log(torch.pow(x, 100.0)), [10.0, -2.0]),
    "log(exp2(x))": (lambda x: torch.log(torch.exp2(x)), [200.0, 1.0]),
    "exp2(x) * exp2(-x)": (lambda x: torch.exp2(x) * torch.exp2(-x * 0.75), [200.0, 1.0]),
    "reciprocal(reciprocal(x))": (lambda x: torch.reciprocal(torch.reciprocal(x)), [7.0, 1e-40]),
    "x.sum() / 3": (lambda x: x.sum() / 3, [1.0, 2.0, 4.0]),
    "x.mean()": (lambda x: x.mean(), [1.0, 2.0, 4.0]),
    # XLA rewrote (x / y) / z to x / (y * z), x / pow(y, c) to x * pow(y, -c), sqrt(x ** 2) to |x|
    "(x / 1e30) / 1e30": (lambda x: (x / 1e30) / 1e30, [1e30, 3.0]),
    "(x / t) / t": (lambda x: (x / x[1]) / x[1], [1e30, 1e30, 3.0]),
    "x / pow(x, 2.5)": (lambda x: x / torch.pow(x, 2.5), [1e20, 3.0, 7.0]),
    "sqrt(x ** 2)": (lambda x: torch.sqrt(x**2), [1e20, 1e-30, 3.0]),
    # and x / sqrt(y) to x * rsqrt(y) (sqrt(9.) is exact, x * rsqrt(9.) is not x / 3)
    "x / sqrt(y)": (lambda x: x[0] / torch.sqrt(x[1]), [list(range(1, 40)), [9.0] * 39]),
    # XLA contracted a product and a sum into one fused multiply-add (runtime/xla_flags.py): the
    # tie (1 + 2**-12) ** 2 - (1 + 2**-11) gave 2**-24, not 0, and inf - inf gave -inf, not NaN.
    "a * b - c": (lambda x: x[0] * x[1] - x[2], [[1 + 2**-12] * 8, [1 + 2**-12] * 8, [1 + 2**-11] * 8]),
    "x * p + x * q": (lambda x: x[0] * x[1] + x[0] * x[2], [[1e30, 2.0], [1e10, 1.0], [-1e10, 1.0]]),
}


@pytest.mark.parametrize("engine", ["compiled", "adaptive_eager"])
@pytest.mark.parametrize("case", IEEE_EXPRESSIONS)
def test_float_expressions_keep_ieee_values(engine, case):
    fn, values = IEEE_EXPRESSIONS[case]
    x = torch.tensor(values)
    if engine == "compiled":
        torch._dynamo.reset()
        actual = torch.compile(fn, backend="neuron")(x.to("neuron"))
    else:
        with torch_neuronx.adaptive_eager():
            actual = fn(x.to("neuron"))
    torch.testing.assert_close(actual.cpu(), fn(x), rtol=0, atol=0, equal_nan=True)


#: Dynamo traces these as mul/div then prims.fma (torch/_dynamo/variables/tensor.py), which rounds
#: otherwise than ATen's kernels; the backend puts addcmul/addcdiv back (dynamo/fused_ops.py).
DYNAMO_FMA_REWRITES = {
    "addcmul_ value": (lambda a, b, c, s: a.clone().addcmul_(b, c, value=0.3), torch.float32),
    "addcdiv_ value": (lambda a, b, c, s: a.clone().addcdiv_(b, c, value=-0.7), torch.float32),
    "addcmul_ value bfloat16": (lambda a, b, c, s: a.clone().addcmul_(b, c, value=0.3), torch.bfloat16),
    "addcdiv_ value float16": (lambda a, b, c, s: a.clone().addcdiv_(b, c, value=-0.7), torch.float16),
    "add_ tensor alpha": (lambda a, b, c, s: a.clone().add_(b, alpha=s), torch.float32),
    "add_ tensor alpha bfloat16": (lambda a, b, c, s: a.clone().add_(b, alpha=s), torch.bfloat16),
    # the same graph as addcmul_/addcdiv_ with a tensor value, which must keep add_'s rounding
    "add_ of a product, tensor alpha": (lambda a, b, c, s: a.clone().add_(b * c, alpha=s), torch.float32),
    "add_ of a quotient, tensor alpha": (lambda a, b, c, s: a.clone().add_(b / c, alpha=s), torch.float32),
}


@pytest.mark.parametrize("case", DYNAMO_FMA_REWRITES)
def test_dynamo_rewrites_of_fused_ops_compute_as_eager(case):
    fn, dtype = DYNAMO_FMA_REWRITES[case]
    generator = torch.Generator().manual_seed(0)
    a, b = (torch.randn(1024, generator=generator).to(dtype) for _ in range(2))
    c = (torch.rand(1024, generator=generator) + 0.5).to(dtype)
    s = torch.tensor(0.37)
    torch._dynamo.reset()
    actual = torch.compile(fn, backend="neuron")(*(t.to("neuron") for t in (a, b, c, s)))
    torch.testing.assert_close(actual.cpu(), fn(a, b, c, s), rtol=0, atol=0)


@pytest.mark.parametrize(
    ("make", "fn"),
    [
        (lambda: torch.randn(2, 3, 4, 4).to(memory_format=torch.channels_last), lambda x: x * 2),
        (lambda: torch.arange(6.0).view(2, 3), lambda x: x.t() * 2),
        (lambda: torch.randn(2, 3, 4, 4).to(memory_format=torch.channels_last), lambda x: torch.relu(x) + 1),
        # FakeTensorMode's convolution picks channels-last for CPU and CUDA inputs only (helper-63)
        (
            lambda: torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last),
            lambda x: torch.nn.functional.conv2d(x, torch.ones(6, 3, 3, 3, device=x.device)) * 2,
        ),
    ],
    ids=["channels-last", "transposed", "channels-last chain", "channels-last convolution"],
)
def test_compiled_outputs_take_eagers_strides(make, fn):
    # Outputs were stored contiguously: a channels-last result came back NCHW and view(-1) of a
    # transposed one succeeded where eager raises (helper-61); inductor keeps eager's strides too.
    x = make()
    expected = fn(x)
    actual = torch.compile(fn, backend="neuron")(x.to("neuron"))
    assert actual.stride() == expected.stride()
    torch.testing.assert_close(actual.cpu(), expected)


def test_a_first_compiled_optimizer_step_is_capturable_as_on_cuda():
    # Dynamo makes a stateless optimizer's compiled step capturable for CUDA parameters (its state on
    # the device); neuron parameters get the same.
    torch.manual_seed(0)
    cpu_model = torch.nn.Linear(8, 4)
    model = copy.deepcopy(cpu_model).to("neuron")
    cpu_opt = torch.optim.AdamW(cpu_model.parameters(), lr=1e-2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    step = torch.compile(opt.step, backend="neuron")
    x = torch.randn(2, 8)
    for _ in range(3):
        for m, o, inp, run in ((cpu_model, cpu_opt, x, cpu_opt.step), (model, opt, x.to("neuron"), step)):
            o.zero_grad()
            m(inp).square().sum().backward()
            run()
    assert opt.param_groups[0]["capturable"] and opt.state[model.weight]["step"].device.type == "neuron"
    torch.testing.assert_close(model.weight.detach().cpu(), cpu_model.weight.detach())


def test_a_compiled_foreach_adamw_step_after_a_fused_one_in_one_process():
    # The fused step's graph break inside torch.optim's loop makes Dynamo skip AdamW.step's frame
    # for good; the foreach step then runs _init_group eagerly (host `step` state) and compiles
    # _multi_tensor_adam, whose _foreach_addcdiv_(..., Tensor scalars) PyTorch's own meta kernel
    # refused under FakeTensorMode on every device ("Expected scalars to be on CPU, got meta").
    def train(**options):
        torch.manual_seed(0)
        model = torch.nn.Linear(8, 4).to("neuron")
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2, **options)
        step = torch.compile(lambda: opt.step(), backend="neuron")
        for _ in range(2):
            opt.zero_grad()
            model(torch.ones(2, 8, device="neuron")).square().sum().backward()
            step()
        return [p.detach().cpu() for p in model.parameters()]

    torch.testing.assert_close(train(fused=True), train(foreach=True))


@pytest.mark.parametrize(
    "fn",
    [lambda t, n: t[n], lambda t, n: t.narrow(0, n, 1), lambda t, n: t[n : n + 2]],
    ids=["index", "narrow", "slice"],
)
def test_a_returned_view_at_a_changing_offset(fn):
    # After the first value Dynamo makes n symbolic; AOTAutograd rebuilds the returned alias of t
    # from the compiled output's own offset, which was 0 (t[0] for every n, helper-64).
    compiled = torch.compile(fn, backend="neuron")
    t = torch.arange(10.0, 15.0, device="neuron")
    for n in (1, 2, 3):
        result = compiled(t, n)
        torch.testing.assert_close(result.cpu(), fn(t.cpu(), n))
        assert result.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()  # a view, as eager
