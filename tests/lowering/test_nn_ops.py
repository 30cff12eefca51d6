"""embedding_bag (and embedding_renorm_), 3-D grid sampling and the CTC loss on neuron against CPU:
values, gradients, the options of each, and the errors PyTorch raises."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests.utils import assert_matches_cpu, to_neuron

aten = torch.ops.aten


@pytest.fixture(autouse=True)
def _seeded():
    torch.manual_seed(0)


def _grads(fn, *inputs):
    """fn(*inputs) and the gradients of a fixed weighting of its output with respect to the inputs
    that require grad."""

    def run(*args):
        output = fn(*args)
        weighting = torch.linspace(-1, 2, output.numel(), device=output.device).reshape(output.shape)
        wanted = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
        return output, *torch.autograd.grad(output, wanted, weighting.to(output.dtype))

    return run


# --- embedding_bag -----------------------------------------------------------------------------

INDICES = torch.tensor([5, 1, 6, 5, 6, 2, 2, 9])
BAGS = {
    "plain": {"offsets": torch.tensor([0, 3, 3, 5])},  # bag 1 is empty
    "padding_idx": {"offsets": torch.tensor([0, 3, 3, 5]), "padding_idx": 5},
    "include_last_offset": {"offsets": torch.tensor([0, 3, 8]), "include_last_offset": True},
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("bags", list(BAGS), ids=list(BAGS))
def test_embedding_bag_matches_cpu(bags, mode, dtype):
    weight = torch.randn(10, 4).to(dtype)
    assert_matches_cpu(lambda w, i, **kw: F.embedding_bag(i, w, mode=mode, **kw), weight, INDICES, **BAGS[bags])


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("bags", list(BAGS), ids=list(BAGS))
def test_embedding_bag_weight_gradient_matches_cpu(bags, mode):
    weight = torch.randn(10, 4).requires_grad_()
    options = dict(BAGS[bags])
    offsets = options.pop("offsets")
    assert_matches_cpu(_grads(lambda w, i, o: F.embedding_bag(i, w, o, mode=mode, **options)), weight, INDICES, offsets)


@pytest.mark.parametrize("padding_idx", [None, 2])
def test_embedding_bag_per_sample_weights_and_their_gradient(padding_idx):
    weight = torch.randn(10, 4).requires_grad_()
    scales = torch.randn(INDICES.numel()).requires_grad_()

    def bag(w, i, o, p):
        return F.embedding_bag(i, w, o, mode="sum", per_sample_weights=p, padding_idx=padding_idx)

    assert_matches_cpu(_grads(bag), weight, INDICES, torch.tensor([0, 3, 3, 5]), scales)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_without_indices(mode):
    """No indices: every bag is empty, so the output and the weight gradient are zeros."""
    weight = torch.randn(5, 3).requires_grad_()
    empty = torch.zeros(0, dtype=torch.int64)
    assert_matches_cpu(_grads(lambda w, i, o: F.embedding_bag(i, w, o, mode=mode)), weight, empty, torch.tensor([0, 0]))


def test_embedding_bag_2d_input_and_max_norm():
    """2-D input is a batch of equal bags; max_norm renormalises the looked-up rows in place first."""
    weight = torch.randn(10, 4) * 3
    indices = torch.tensor([[1, 2, 2], [7, 1, 0]])

    def bag(w, i):
        w = w.clone()
        return F.embedding_bag(i, w, mode="mean", max_norm=1.5), w

    output, renormed = assert_matches_cpu(bag, weight, indices)
    assert renormed.cpu()[3].equal(weight[3]), "a row not looked up keeps its values"
    assert not renormed.cpu()[7].equal(weight[7])


def test_embedding_bag_max_keeps_nan_first_and_earliest_ties():
    """CPU's running maximum: a NaN first row stays, a later NaN is skipped, ties keep the first row."""
    nan = float("nan")
    weight = torch.tensor([[1.0, nan], [2.0, 5.0], [2.0, nan], [0.0, 1.0]])
    result = assert_matches_cpu(
        lambda w, i, o: aten._embedding_bag(w, i, o, False, 2, False, None, False, -1),
        weight,
        torch.tensor([0, 1, 2, 3, 2, 1]),
        torch.tensor([0, 3, 3]),
    )
    assert result[3].cpu().tolist() == [[1, 0], [0, 0], [2, 1]]


def test_embedding_bag_scale_grad_by_freq_divides_by_each_index_count():
    """Each row's gradient is divided by how often its index occurs (the documented rule, CUDA's).
    Where every index occurs equally often this is also CPU's result; where counts differ, PyTorch's
    CPU kernel divides by another index's count (pytorch/pytorch#190063), so the expected values
    are written out."""
    weight = torch.randn(6, 3).requires_grad_()
    offsets = torch.tensor([0, 2])
    same_counts = torch.tensor([4, 1, 1, 4])
    assert_matches_cpu(
        _grads(lambda w, i, o: F.embedding_bag(i, w, o, mode="mean", scale_grad_by_freq=True)),
        weight,
        same_counts,
        offsets,
    )
    indices = torch.tensor([0, 0, 0, 1, 3, 3, 4])
    w = weight.detach().to("neuron").requires_grad_()
    F.embedding_bag(
        indices.to("neuron"), w, torch.tensor([0]).to("neuron"), mode="sum", scale_grad_by_freq=True
    ).sum().backward()
    assert w.grad.cpu()[:, 0].tolist() == pytest.approx([1.0, 1.0, 0.0, 1.0, 1.0, 0.0])


def test_embedding_bag_out_of_range_index_and_bad_offsets_raise():
    weight = torch.randn(5, 2).to("neuron")
    with pytest.raises(RuntimeError, match="Expected idx >= 0 && idx < num_embeddings but found idx to be 7"):
        F.embedding_bag(torch.tensor([1, 7]).to("neuron"), weight, torch.tensor([0]).to("neuron")).cpu()
    with pytest.raises(RuntimeError, match="offsets\\[0\\] has to be 0"):
        F.embedding_bag(torch.tensor([1, 2]).to("neuron"), weight, torch.tensor([1]).to("neuron")).cpu()


def test_embedding_bag_sparse_gradient_is_refused():
    weight = torch.randn(5, 2).to("neuron").requires_grad_()
    output = F.embedding_bag(torch.tensor([1, 2]).to("neuron"), weight, torch.tensor([0]).to("neuron"), sparse=True)
    with pytest.raises(NotImplementedError, match="sparse=True gives a sparse gradient"):
        output.sum().backward()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("norm_type", [1.0, 2.0, float("inf")])
def test_embedding_renorm_matches_cpu(norm_type, dtype):
    """Rows named (once or more, negative indices wrapping) with a norm above max_norm are scaled."""
    weight = (torch.randn(6, 5) * 4).to(dtype)
    indices = torch.tensor([4, 0, 4, -1, 2])
    assert_matches_cpu(lambda w, i: torch.embedding_renorm_(w.clone(), i, 1.5, norm_type), weight, indices)


def test_embedding_max_norm_matches_cpu():
    def embed(w, i):
        w = w.clone()
        return F.embedding(i, w, max_norm=1.0), w

    assert_matches_cpu(embed, torch.randn(8, 3) * 3, torch.tensor([[1, 4], [4, 7]]))


# --- grid_sampler_3d ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "dtype"),
    [
        ("bilinear", torch.float32),
        ("nearest", torch.float32),
        ("bilinear", torch.bfloat16),
        ("bilinear", torch.float16),
    ],
    ids=str,
)
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_3d_matches_cpu(align_corners, padding_mode, mode, dtype):
    """Forward in every dtype (16-bit inputs round after each step, as PyTorch's 3-D CPU kernel does;
    one element in 144 has been seen an ulp off, unexplained; nearest's 16-bit path is bilinear's
    coordinates, so only bilinear runs in 16 bits); gradients of input and grid in float32."""
    volume = torch.randn(2, 3, 4, 5, 6)
    grid = torch.rand(2, 3, 2, 4, 3) * 2.4 - 1.2  # some points outside [-1, 1]

    def sample(x, g):
        return F.grid_sample(x, g, mode=mode, padding_mode=padding_mode, align_corners=align_corners)

    if dtype != torch.float32:
        assert_matches_cpu(sample, volume.to(dtype), grid.to(dtype))
        return
    assert_matches_cpu(_grads(sample), volume.requires_grad_(), grid.requires_grad_())


def test_grid_sample_3d_grid_only_gradient():
    volume = torch.randn(1, 2, 3, 4, 5)
    grid = (torch.rand(1, 2, 3, 2, 3) * 2 - 1).requires_grad_()
    assert_matches_cpu(_grads(lambda x, g: F.grid_sample(x, g, align_corners=True)), volume, grid)


def test_grid_sample_3d_bicubic_is_refused_as_on_cpu():
    volume, grid = torch.randn(1, 1, 2, 2, 2), torch.zeros(1, 1, 1, 1, 3)
    with pytest.raises(RuntimeError, match="bicubic interpolation only supports 4D input"):
        F.grid_sample(*to_neuron((volume, grid)), mode="bicubic", align_corners=False)


# --- ctc_loss ----------------------------------------------------------------------------------

STEPS, BATCH, CLASSES = 12, 4, 6
INPUT_LENGTHS = [12, 10, 7, 3]
TARGET_LENGTHS = [5, 3, 0, 3]


def _ctc_inputs(flat: bool):
    log_probs = torch.randn(STEPS, BATCH, CLASSES).log_softmax(2).requires_grad_()
    targets = torch.randint(1, CLASSES, (BATCH, 5))
    if flat:
        targets = torch.cat([targets[b, :length] for b, length in enumerate(TARGET_LENGTHS)])
    return log_probs, targets


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("zero_infinity", [False, True])
@pytest.mark.parametrize("targets_layout", ["padded", "concatenated"])
@pytest.mark.parametrize("lengths_as", ["lists", "tensors"])
def test_ctc_loss_and_gradient_match_cpu(lengths_as, targets_layout, zero_infinity, reduction):
    log_probs, targets = _ctc_inputs(targets_layout == "concatenated")
    lengths = (INPUT_LENGTHS, TARGET_LENGTHS)
    if lengths_as == "tensors":
        lengths = tuple(torch.tensor(v) for v in lengths)

    def loss(x, t, input_lengths, target_lengths):
        return F.ctc_loss(x, t, input_lengths, target_lengths, reduction=reduction, zero_infinity=zero_infinity)

    assert_matches_cpu(_grads(loss), log_probs, targets, *lengths)


@pytest.mark.parametrize("zero_infinity", [False, True])
def test_ctc_loss_impossible_and_empty_alignments(zero_infinity):
    """Too few frames for the target (repeats need a blank between them) and an empty input with a
    target give inf (NaN gradients unless zero_infinity); an empty input and target give 0."""
    log_probs = torch.randn(6, 4, 5).log_softmax(2).requires_grad_()
    targets = torch.tensor([[1, 1, 1, 2], [1, 2, 3, 4], [2, 2, 0, 0], [1, 0, 0, 0]])
    result = assert_matches_cpu(
        _grads(lambda x, t: aten._ctc_loss(x, t, [4, 6, 0, 0], [3, 4, 2, 0], 0, zero_infinity)[0]), log_probs, targets
    )
    assert result[0].cpu().tolist()[0] == float("inf")


def test_ctc_loss_tensor_overload_matches_cpu():
    """aten::_ctc_loss.Tensor (as composite code and tracing call it) and its backward."""
    log_probs, targets = _ctc_inputs(flat=True)

    def loss(x, t, input_lengths, target_lengths):
        nll, log_alpha = aten._ctc_loss.Tensor(x, t, input_lengths, target_lengths, 2, False)
        return nll, log_alpha.shape, *torch.autograd.grad(nll, x, torch.linspace(0.5, 1.0, BATCH, device=x.device))

    assert_matches_cpu(loss, log_probs, targets, torch.tensor(INPUT_LENGTHS), torch.tensor(TARGET_LENGTHS))


def test_ctc_loss_log_alpha_matches_cpu_where_written():
    """log_alpha has CPU's shape and values wherever the CPU kernel writes it (it leaves the rest
    unwritten; here it is -inf)."""
    log_probs, targets = _ctc_inputs(flat=False)
    expected = aten._ctc_loss(log_probs.detach(), targets, INPUT_LENGTHS, TARGET_LENGTHS)[1]
    actual = aten._ctc_loss(*to_neuron((log_probs.detach(), targets)), INPUT_LENGTHS, TARGET_LENGTHS)[1].cpu()
    assert actual.shape == expected.shape
    written = torch.isfinite(actual)
    assert written.sum() > 0
    torch.testing.assert_close(actual[written], expected[written])


def test_ctc_loss_target_outside_classes_raises():
    log_probs = torch.randn(5, 1, 4).log_softmax(2).to("neuron")
    with pytest.raises(RuntimeError, match="ctc_loss: target 9 is outside the 4 classes"):
        F.ctc_loss(log_probs, torch.tensor([[1, 9]]).to("neuron"), [5], [2]).cpu()


def test_ctc_loss_16_bit_is_refused_as_on_cpu():
    """PyTorch computes CTC in float32 and float64 only (its meta kernel refuses other dtypes, so the
    call reaches the CPU kernel, which raises)."""
    log_probs = torch.randn(5, 1, 4).log_softmax(2).to(torch.bfloat16)
    with pytest.raises(RuntimeError, match="not implemented for 'BFloat16'"):
        F.ctc_loss(log_probs, torch.tensor([[1, 2]]), [5], [2])
    with pytest.raises(RuntimeError, match="not implemented for 'BFloat16'"):
        F.ctc_loss(log_probs.to("neuron"), torch.tensor([[1, 2]]).to("neuron"), [5], [2])


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_bilinear_and_its_gradients_match_cpu(compiled):
    # F.bilinear's aten::_trilinear had no lowering: eager ran its composite op by op, and a compiled
    # graph holding it failed to compile (BackendCompilerFailed).
    torch.manual_seed(0)
    layer = torch.nn.Bilinear(3, 4, 5)
    x1, x2 = torch.randn(6, 3, requires_grad=True), torch.randn(1, 4).expand(6, 4)
    layer(x1, x2).square().sum().backward()
    device_layer = torch.nn.Bilinear(3, 4, 5).to("neuron")
    device_layer.load_state_dict(layer.state_dict())
    device_x1 = x1.detach().to("neuron").requires_grad_()
    run = torch.compile(device_layer, backend="neuron") if compiled else device_layer
    run(device_x1, x2.to("neuron")).square().sum().backward()
    torch.testing.assert_close(device_x1.grad.cpu(), x1.grad)
    torch.testing.assert_close(device_layer.weight.grad.cpu(), layer.weight.grad)


def test_bilinear_of_integers_matches_cpu():
    a, b, w = torch.arange(6).view(2, 3), torch.arange(8).view(2, 4), torch.arange(60).view(5, 3, 4)
    assert_matches_cpu(F.bilinear, a, b, w)
