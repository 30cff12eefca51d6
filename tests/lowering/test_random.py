"""Random ops on neuron: native (no CPU fallback), reproducible from the generator's (seed, offset),
distinct between calls, with the right distribution, range and dtype, writing into views, and
raising PyTorch's errors for invalid parameters.

Values cannot match CPU bitwise (CPU draws from mt19937, neuron from a counter-based PRNG, as CUDA
draws from Philox), so the tests check reproducibility and distribution properties instead.
"""

from __future__ import annotations

import math
import re

import pytest
import torch
import torch.nn.functional as F

import torch_neuronx
from tests.utils import to_neuron

NAN, INF = float("nan"), float("inf")

N = 20_000  # samples for distribution checks: standard errors of about 1% of the scale

# Every way to draw on neuron that must run natively, as a function of (device, generator).
DRAWS = {
    "rand": lambda d, g: torch.rand(64, device=d, generator=g),
    "rand_bf16": lambda d, g: torch.rand(64, device=d, dtype=torch.bfloat16, generator=g),
    "rand_complex64": lambda d, g: torch.rand(64, device=d, dtype=torch.complex64, generator=g),
    "rand_complex32": lambda d, g: torch.rand(64, device=d, dtype=torch.complex32, generator=g),
    "uniform_complex64": lambda d, g: torch.empty(64, device=d, dtype=torch.complex64).uniform_(-2, 3, generator=g),
    "rand_like_complex32": lambda d, g: torch.rand_like(torch.zeros(64, device=d, dtype=torch.complex32), generator=g),
    "randn_complex32": lambda d, g: torch.randn(64, device=d, dtype=torch.complex32, generator=g),
    "randn": lambda d, g: torch.randn(4, 16, device=d, generator=g),
    "randint": lambda d, g: torch.randint(3, 10, (64,), device=d, generator=g),
    "randint_int32": lambda d, g: torch.randint(0, 1000, (64,), device=d, dtype=torch.int32, generator=g),
    "randint_like": lambda d, g: torch.randint_like(torch.zeros(64, device=d), 7, generator=g),
    "rand_like": lambda d, g: torch.rand_like(torch.zeros(64, device=d), generator=g),
    "randn_like": lambda d, g: torch.randn_like(torch.zeros(64, device=d), generator=g),
    "randperm": lambda d, g: torch.randperm(64, device=d, generator=g),
    "uniform_": lambda d, g: torch.empty(64, device=d).uniform_(-2, 3, generator=g),
    "normal_": lambda d, g: torch.empty(64, device=d).normal_(1, 2, generator=g),
    "normal_tensor_float": lambda d, g: torch.normal(torch.zeros(64, device=d), 2.0, generator=g),
    "normal_float_tensor": lambda d, g: torch.normal(1.0, torch.ones(64, device=d), generator=g),
    "normal_tensor_tensor": lambda d, g: torch.normal(
        torch.zeros(8, 1, device=d), torch.ones(8, device=d), generator=g
    ),
    "normal_sizes": lambda d, g: torch.normal(0.0, 1.0, (64,), device=d, generator=g),
    "bernoulli": lambda d, g: torch.bernoulli(torch.full((64,), 0.5, device=d), generator=g),
    "bernoulli_p": lambda d, g: torch.bernoulli(torch.zeros(64, device=d), 0.3, generator=g),
    "bernoulli_float_": lambda d, g: torch.zeros(64, device=d).bernoulli_(0.3, generator=g),
    "bernoulli_tensor_": lambda d, g: torch.zeros(64, device=d).bernoulli_(
        torch.full((64,), 0.3, device=d), generator=g
    ),
    "random_": lambda d, g: torch.empty(64, device=d).random_(generator=g),
    "random_to": lambda d, g: torch.empty(64, device=d, dtype=torch.int64).random_(100, generator=g),
    "random_from_to": lambda d, g: torch.empty(64, device=d, dtype=torch.int32).random_(-5, 5, generator=g),
    "exponential_": lambda d, g: torch.empty(64, device=d).exponential_(2.0, generator=g),
    "geometric_": lambda d, g: torch.empty(64, device=d).geometric_(0.3, generator=g),
    "log_normal_": lambda d, g: torch.empty(64, device=d).log_normal_(generator=g),
    "cauchy_": lambda d, g: torch.empty(64, device=d).cauchy_(generator=g),
    "multinomial": lambda d, g: torch.multinomial(torch.ones(4, 16, device=d), 8, generator=g),
    "multinomial_replacement": lambda d, g: torch.multinomial(torch.ones(16, device=d), 32, True, generator=g),
    "poisson": lambda d, g: torch.poisson(torch.full((64,), 3.0, device=d), generator=g),
    "standard_gamma": lambda d, g: torch._standard_gamma(torch.full((64,), 0.5, device=d), generator=g),
    "binomial": lambda d, g: torch.binomial(
        torch.full((64,), 10.0, device=d), torch.full((64,), 0.3, device=d), generator=g
    ),
    "sample_dirichlet": lambda d, g: torch._sample_dirichlet(torch.ones(16, 4, device=d), generator=g),
}


def _parts(x: torch.Tensor) -> torch.Tensor:
    """A complex tensor's (real, imag) pairs (``view_as_real``); a real tensor as it is."""
    return torch.view_as_real(x) if x.is_complex() else x


@pytest.mark.parametrize("name", DRAWS)
def test_draws_are_native_and_reproducible(name):
    draw = DRAWS[name]
    torch.manual_seed(123)
    drawn = draw("neuron", None).cpu()
    expected_cpu = draw("cpu", None)
    assert drawn.shape == expected_cpu.shape and drawn.dtype == expected_cpu.dtype
    first, second = _parts(drawn), _parts(draw("neuron", None).cpu())  # the CPU compares no complex32
    assert torch_neuronx.get_fallback_ops() == {}, torch_neuronx.get_fallback_ops()
    assert first.device.type == "cpu" and not torch.equal(first, second), "consecutive draws must differ"
    torch.manual_seed(123)
    torch.testing.assert_close(_parts(draw("neuron", None).cpu()), first, rtol=0, atol=0)
    torch.testing.assert_close(_parts(draw("neuron", None).cpu()), second, rtol=0, atol=0)


@pytest.mark.parametrize("name", ["rand", "randint", "normal_", "bernoulli_tensor_", "multinomial"])
def test_neuron_generator_reproduces_and_leaves_default_stream_alone(name):
    draw = DRAWS[name]
    torch.manual_seed(0)
    state = torch.neuron.get_rng_state()
    generator = torch.Generator(device="neuron").manual_seed(7)
    first = draw("neuron", generator).cpu()
    torch.testing.assert_close(torch.neuron.get_rng_state(), state, rtol=0, atol=0)
    again = draw("neuron", torch.Generator(device="neuron").manual_seed(7)).cpu()
    torch.testing.assert_close(again, first, rtol=0, atol=0)
    other = draw("neuron", torch.Generator(device="neuron").manual_seed(8)).cpu()
    assert not torch.equal(other, first)


def test_generator_state_round_trips():
    generator = torch.Generator(device="neuron").manual_seed(3)
    state = generator.get_state()
    first = torch.rand(16, device="neuron", generator=generator).cpu()
    generator.set_state(state)
    torch.testing.assert_close(torch.rand(16, device="neuron", generator=generator).cpu(), first, rtol=0, atol=0)


def test_each_draw_advances_the_offset():
    torch.manual_seed(0)
    before = torch.neuron.get_rng_state().view(torch.int64)
    torch.rand(10, device="neuron")
    after = torch.neuron.get_rng_state().view(torch.int64)
    assert after[0] == before[0] and after[1] > before[1]


def test_cpu_generator_for_neuron_draw_raises():
    with pytest.raises((RuntimeError, ValueError)):
        torch.rand(4, device="neuron", generator=torch.Generator()).cpu()


# --- distributions -----------------------------------------------------------------------------


def _moments(x):
    x = x.double()
    return x.mean().item(), x.var().item()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_uniform_distribution(dtype):
    x = torch.empty(N, device="neuron", dtype=dtype).uniform_(-2, 3).cpu()
    assert x.dtype == dtype and x.min() >= -2 and x.max() <= 3
    mean, var = _moments(x)
    assert mean == pytest.approx(0.5, abs=0.05) and var == pytest.approx(25 / 12, rel=0.05)
    r = torch.rand(N, device="neuron").cpu()
    assert r.min() >= 0 and r.max() < 1


UNIFORM_DRAWS = {
    "rand": (0.0, 1.0, lambda dtype, device: torch.rand(2**15, dtype=dtype, device=device)),
    "uniform_one_two": (1.0, 2.0, lambda dtype, device: torch.empty(2**15, dtype=dtype, device=device).uniform_(1, 2)),
    "uniform_wide": (-3.0, 5.0, lambda dtype, device: torch.empty(2**15, dtype=dtype, device=device).uniform_(-3, 5)),
}


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.bfloat16, torch.float16, torch.complex64, torch.complex32], ids=str
)
@pytest.mark.parametrize("name", UNIFORM_DRAWS)
def test_uniform_stays_below_its_upper_bound_as_on_cpu(name, dtype):
    """Samples computed in float32 can round up to ``to`` in a 16-bit dtype (complex32's float16
    parts: 2**-12 of the samples of rand); CPU and CUDA turn such values into ``from``, so samples
    lie in [from, to) with CPU's set of values and mean. A complex tensor draws each part so."""
    low, high, draw = UNIFORM_DRAWS[name]
    x, reference = draw(dtype, "neuron").cpu(), draw(dtype, "cpu")
    assert x.dtype == dtype
    x, reference = _parts(x), _parts(reference)
    assert x.min() >= low and x.max() < high
    assert x.unique().numel() == pytest.approx(reference.unique().numel(), rel=0.05)
    assert x.double().mean().item() == pytest.approx(reference.double().mean().item(), abs=(high - low) * 0.01)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex32], ids=str)
def test_complex_uniform_parts_are_independent_uniforms(dtype):
    """ATen draws a complex tensor's real and imaginary parts as separate uniforms in [from, to)."""
    z = torch.empty(N, dtype=dtype, device="neuron").uniform_(-1, 3).cpu()
    real, imag = z.real.double(), z.imag.double()
    for part in (real, imag):
        assert part.min() >= -1 and part.max() < 3
        assert _moments(part) == pytest.approx((1.0, 16 / 12), rel=0.05)
    assert torch.corrcoef(torch.stack([real, imag]))[0, 1].abs().item() < 0.04  # 1/sqrt(N) = 0.007


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_normal_distribution(dtype):
    x = torch.empty(N, device="neuron", dtype=dtype).normal_(1.0, 2.0).cpu()
    mean, var = _moments(x)
    assert x.dtype == dtype and mean == pytest.approx(1.0, abs=0.06) and var == pytest.approx(4.0, rel=0.05)
    z = torch.randn(N, device="neuron").cpu()
    assert _moments(z) == pytest.approx((0.0, 1.0), abs=0.05)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex32], ids=str)
def test_complex_normal_splits_the_variance(dtype):
    z = torch.randn(N, dtype=dtype, device="neuron").cpu()
    assert z.dtype == dtype
    real, imag = z.real.double(), z.imag.double()
    assert _moments(real) == pytest.approx((0.0, 0.5), abs=0.03)
    assert _moments(imag) == pytest.approx((0.0, 0.5), abs=0.03)
    assert torch.corrcoef(torch.stack([real, imag]))[0, 1].abs().item() < 0.04
    shifted = torch.empty(N, dtype=dtype, device="neuron").normal_(2.0, 4.0).cpu()
    assert _moments(shifted.real.double()) == pytest.approx((2.0, 8.0), rel=0.06)
    assert _moments(shifted.imag.double()) == pytest.approx((2.0, 8.0), rel=0.06)


def test_normal_tensor_overloads():
    mean = torch.arange(4.0, device="neuron").reshape(4, 1)
    std = torch.tensor([0.0, 0.0, 1.0], device="neuron")
    sample = torch.normal(mean, std).cpu()
    assert sample.shape == (4, 3)
    torch.testing.assert_close(sample[:, :2], torch.arange(4.0).reshape(4, 1).expand(4, 2))
    wide = torch.normal(torch.full((N,), 3.0, device="neuron"), 0.5).cpu()
    assert _moments(wide) == pytest.approx((3.0, 0.25), rel=0.05)
    scaled = torch.normal(-1.0, torch.full((N,), 2.0, device="neuron")).cpu()
    assert _moments(scaled) == pytest.approx((-1.0, 4.0), rel=0.06)


@pytest.mark.parametrize(
    ("dtype", "type_name"), [(torch.float32, "float"), (torch.float16, "c10::Half"), (torch.bfloat16, "c10::BFloat16")]
)
def test_normal_of_a_float_mean_beyond_the_dtype_of_std_raises_as_cudas_fill(dtype, type_name):
    std = torch.ones(3, dtype=dtype, device="neuron")
    with pytest.raises(RuntimeError, match=f"^value cannot be converted to type {type_name} without overflow$"):
        torch.normal(-1e308, std)
    torch.testing.assert_close(torch.normal(float("inf"), std).cpu(), torch.full((3,), float("inf"), dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_bernoulli_distribution(dtype):
    x = torch.zeros(N, device="neuron", dtype=dtype).bernoulli_(0.3).cpu()
    assert x.dtype == dtype and set(x.to(torch.int64).unique().tolist()) <= {0, 1}
    assert x.double().mean().item() == pytest.approx(0.3, abs=0.02)
    p = torch.tensor([0.0, 1.0, 0.0, 1.0], device="neuron")
    torch.testing.assert_close(torch.bernoulli(p).cpu(), p.cpu())
    varying = torch.linspace(0, 1, N, device="neuron")
    assert torch.bernoulli(varying).cpu().double().mean().item() == pytest.approx(0.5, abs=0.02)


def test_exponential_geometric_log_normal_cauchy_distributions():
    exponential = torch.empty(N, device="neuron").exponential_(2.0).cpu()
    assert exponential.min() >= 0 and exponential.mean().item() == pytest.approx(0.5, rel=0.05)
    geometric = torch.empty(N, device="neuron").geometric_(0.25).cpu()
    assert geometric.min() >= 1 and torch.equal(geometric, geometric.round())
    assert geometric.mean().item() == pytest.approx(4.0, rel=0.05)
    log_normal = torch.empty(N, device="neuron").log_normal_(0.5, 0.25).cpu()
    assert log_normal.min() > 0 and _moments(log_normal.log()) == pytest.approx((0.5, 0.0625), rel=0.06)
    cauchy = torch.empty(N, device="neuron").cauchy_(1.0, 2.0).cpu()
    quartiles = cauchy.quantile(torch.tensor([0.25, 0.5, 0.75]))
    torch.testing.assert_close(quartiles, torch.tensor([-1.0, 1.0, 3.0]), atol=0.15, rtol=0)


def test_poisson_gamma_binomial_dirichlet_distributions():
    """torch.poisson and the samplers under torch.distributions (Gamma, Beta, Dirichlet, Binomial)
    ran on the CPU fallback, and failed to compile."""
    counts = torch.poisson(torch.full((N,), 4.0, device="neuron")).cpu()
    assert torch.equal(counts, counts.round()) and _moments(counts) == pytest.approx((4.0, 4.0), rel=0.05)
    gamma = torch._standard_gamma(torch.full((N,), 0.5, device="neuron")).cpu()
    assert gamma.min() > 0 and _moments(gamma) == pytest.approx((0.5, 0.5), rel=0.08)
    successes = torch.binomial(torch.full((N,), 10.0, device="neuron"), torch.full((N,), 0.3, device="neuron")).cpu()
    assert torch.equal(successes, successes.round()) and _moments(successes) == pytest.approx((3.0, 2.1), rel=0.05)
    shares = torch.distributions.Dirichlet(torch.tensor([1.0, 2.0, 3.0], device="neuron")).sample((N,)).cpu()
    torch.testing.assert_close(shares.sum(-1), torch.ones(N))
    torch.testing.assert_close(shares.mean(0), torch.tensor([1 / 6, 2 / 6, 3 / 6]), atol=0.01, rtol=0)
    compiled = torch.compile(lambda rate: torch.poisson(rate) + rate, backend="neuron")
    assert compiled(torch.full((64,), 2.0, device="neuron")).cpu().min() >= 2
    assert torch_neuronx.get_fallback_ops() == {}


def test_sampler_edges_are_the_cpus():
    """The CPU's edges: binomial gives 0 for a count or probability <= 0 and the count for
    probability >= 1; gamma at least the smallest normal number; poisson refuses a negative rate.
    A NaN count gives NaN, where the CPU's loop never ends."""
    # The order matters: a count <= 0 gives 0 with a NaN probability, an infinite count NaN.
    nan, inf = float("nan"), float("inf")
    count = torch.tensor([5.0, 5.0, 0.0, -2.0, 3.0, 5.0, 0.0, inf, inf, inf, -inf, nan, nan])
    prob = torch.tensor([-0.5, 0.5, 0.5, 0.5, 1.0, nan, nan, 0.9, 0.0, 1.0, nan, 0.0, 1.0])
    deterministic = [0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]
    expected = torch.binomial(count, prob)  # never a NaN count with a probability in (0, 1): it hangs
    torch.testing.assert_close(
        torch.binomial(count.to("neuron"), prob.to("neuron")).cpu()[deterministic],
        expected[deterministic],
        equal_nan=True,
    )
    assert torch.binomial(torch.tensor([nan], device="neuron"), torch.tensor([0.5], device="neuron")).isnan().all()
    # The CPU returns inf or NaN at random for an infinite count and a probability up to 0.5.
    assert torch.binomial(torch.tensor([inf], device="neuron"), torch.tensor([0.5], device="neuron")).isinf().all()
    alpha = torch.tensor([-1.0, 0.0, float("nan"), 1e-30])
    torch.testing.assert_close(torch._standard_gamma(alpha.to("neuron")).cpu(), torch._standard_gamma(alpha))
    with pytest.raises(RuntimeError, match="invalid Poisson rate, expected rate to be non-negative"):
        torch.poisson(torch.tensor([-1.0], device="neuron")).cpu()
    with pytest.raises(NotImplementedError, match="\"poisson_cuda\" not implemented for 'Int'"):
        torch.poisson(torch.ones(2, dtype=torch.int32, device="neuron"))
    with pytest.raises(RuntimeError, match="Found dtype Half but expected Float"):
        torch.binomial(torch.ones(2, device="neuron"), torch.ones(2, dtype=torch.float16, device="neuron"))


def test_standard_gamma_grad_is_close_to_the_cpus():
    """Reparameterised gamma gradients: JAX's implicit derivative, within 0.1% of the CPU's
    approximations (median 2e-5)."""
    generator = torch.Generator().manual_seed(0)
    alpha = torch.rand(2000, generator=generator) * 20 + 0.001
    sample = torch._standard_gamma(alpha, generator=generator)
    expected = torch._standard_gamma_grad(alpha, sample)
    actual = torch._standard_gamma_grad(alpha.to("neuron"), sample.to("neuron")).cpu()
    torch.testing.assert_close(actual, expected, rtol=1e-3, atol=1e-6)
    concentration = torch.tensor([2.0, 3.0], device="neuron", requires_grad=True)
    torch.distributions.Gamma(concentration, 1.0).rsample((8,)).sum().backward()
    assert concentration.grad.isfinite().all() and torch_neuronx.get_fallback_ops() == {}


def _beta_reparameterised_gradient(x: float, alpha: float, total: float) -> float:
    """-(d/d alpha) I_x(alpha, beta) / pdf(x) / (1 - x) at fixed beta = total - alpha, by mpmath."""
    import mpmath

    mpmath.mp.dps = 30
    x, alpha, beta = mpmath.mpf(x), mpmath.mpf(alpha), mpmath.mpf(total - alpha)
    d_cdf = mpmath.diff(lambda a: mpmath.betainc(a, beta, 0, x, regularized=True), alpha)
    density = x ** (alpha - 1) * (1 - x) ** (beta - 1) / mpmath.beta(alpha, beta)
    return float(-d_cdf / density / (1 - x))


def test_dirichlet_grad_is_the_exact_gradient_and_close_to_the_cpus():
    """Beta and Dirichlet rsample's backward fell back, and a compiled graph holding it raised
    CompileError. Neuron computes the gradient exactly (mpmath's); the CPU's approximations lie
    within 1% of it (0.6% here, float32 series near x = 1)."""
    generator = torch.Generator().manual_seed(0)
    alpha = torch.exp(torch.empty(2000).uniform_(math.log(0.01), math.log(200), generator=generator))
    beta = torch.exp(torch.empty(2000).uniform_(math.log(0.01), math.log(200), generator=generator))
    x = torch._sample_dirichlet(torch.stack([alpha, beta], -1), generator=generator)[:, 0].clamp(1e-6, 1 - 1e-6)
    expected = torch._dirichlet_grad(x, alpha, alpha + beta)
    actual = torch._dirichlet_grad(*to_neuron((x, alpha, alpha + beta))).cpu()
    torch.testing.assert_close(actual, expected, rtol=1e-2, atol=1e-6)
    for i in (0, 1, int((actual - expected).abs().div(expected.abs()).argmax())):
        exact = _beta_reparameterised_gradient(x[i].item(), alpha[i].item(), (alpha + beta)[i].item())
        assert actual[i].item() == pytest.approx(exact, rel=1e-5)


def test_dirichlet_grad_edges_are_the_cpus():
    # The CPU's series near 0 and 1 return 0 where the gradient is undefined, its other branches
    # NaN. A NaN total once set every element's fraction length (0.2 came out 0.09).
    nan, inf = float("nan"), float("inf")
    x = torch.tensor([0.0, 1.0, 0.5, 0.5, 0.3, 0.3])
    alpha = torch.tensor([1.0, 1.0, nan, 1.0, 2.0, 2.0])
    total = torch.tensor([2.0, 2.0, 2.0, nan, 5.0, inf])
    expected = torch._dirichlet_grad(x, alpha, total)
    actual = torch._dirichlet_grad(*to_neuron((x, alpha, total))).cpu()
    torch.testing.assert_close(actual, expected, equal_nan=True, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize(
    ("count", "prob", "error", "message"),
    [
        ([10, 10], [0.5, 0.5], ValueError, "binomial only supports floating-point dtypes for count, got: Long"),
        ([10.0], [1], ValueError, "binomial only supports floating-point dtypes for prob, got: Long"),
        ([1.0, 1.0, 1.0], [0.5] * 4, RuntimeError, "The size of tensor a (3) must match the size of tensor b (4)"),
    ],
)
def test_binomial_argument_errors_are_atens(count, prob, error, message):
    for device in ("cpu", "neuron"):
        with pytest.raises(error, match=re.escape(message)):
            torch.binomial(torch.tensor(count, device=device), torch.tensor(prob, device=device))


def test_beta_rsample_gradients_compiled_match_eager_without_fallback():
    def loss(a, b):
        torch.manual_seed(1)
        return torch.distributions.Beta(a, b).rsample((64,)).sum()

    gradients = []
    for run in (loss, torch.compile(loss, backend="neuron")):
        a = torch.tensor([0.5, 2.0, 7.0], device="neuron", requires_grad=True)
        b = torch.tensor([1.5, 3.0, 9.0], device="neuron", requires_grad=True)
        run(a, b).backward()
        gradients.append((a.grad.cpu(), b.grad.cpu()))
    torch.testing.assert_close(gradients[1], gradients[0])
    assert torch_neuronx.get_fallback_ops() == {}
    half = torch.tensor([0.5], device="neuron", dtype=torch.float16, requires_grad=True)
    with pytest.raises(NotImplementedError, match="^\"_dirichlet_grad_cuda\" not implemented for 'Half'$"):
        torch.distributions.Beta(half, half).rsample().sum().backward()


@pytest.mark.parametrize(
    ("dtype", "high"),
    [(torch.float32, 2**24), (torch.bfloat16, 2**8), (torch.int32, 2**31 - 1), (torch.uint8, 255), (torch.bool, 1)],
)
def test_random_default_range(dtype, high):
    x = torch.empty(N, device="neuron", dtype=dtype).random_().cpu()
    values = x.to(torch.float64)
    assert values.min() >= 0 and values.max() <= high and values.max() > high * 0.9
    assert values.mean().item() == pytest.approx(high / 2, rel=0.05)


def test_random_int64_default_and_full_range():
    x = torch.empty(N, device="neuron", dtype=torch.int64).random_().cpu()
    assert x.min() >= 0 and x.max() > 2**62
    full = torch.empty(N, device="neuron", dtype=torch.int64).random_(-(2**63), None).cpu()
    assert full.min() < -(2**62) and full.max() > 2**62


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.float32, torch.bfloat16])
def test_randint_covers_its_range(dtype):
    x = torch.randint(-3, 5, (N,), device="neuron", dtype=dtype).cpu()
    assert x.dtype == dtype
    assert sorted(x.to(torch.int64).unique().tolist()) == list(range(-3, 5))
    counts = torch.bincount(x.to(torch.int64) + 3).double() / N
    torch.testing.assert_close(counts, torch.full((8,), 1 / 8, dtype=torch.float64), atol=0.01, rtol=0)


def test_randperm_is_a_permutation():
    for n in (1, 7, 1000):
        torch.testing.assert_close(torch.randperm(n, device="neuron").cpu().sort().values, torch.arange(n))
    as_float = torch.randperm(16, device="neuron", dtype=torch.float32).cpu()
    torch.testing.assert_close(as_float.sort().values, torch.arange(16.0))
    out = torch.empty(5, dtype=torch.int64, device="neuron")
    torch.randperm(5, out=out)
    torch.testing.assert_close(out.cpu().sort().values, torch.arange(5))


def test_multinomial_frequencies():
    weights = torch.tensor([[1.0, 2.0, 0.0, 5.0], [0.0, 0.0, 1.0, 0.0]], device="neuron")
    draws = torch.multinomial(weights, N, replacement=True).cpu()
    assert draws.shape == (2, N) and draws.dtype == torch.int64
    frequency = torch.bincount(draws[0], minlength=4).double() / N
    torch.testing.assert_close(
        frequency, torch.tensor([1 / 8, 2 / 8, 0, 5 / 8], dtype=torch.float64), atol=0.015, rtol=0
    )
    assert (draws[1] == 2).all()
    unique = torch.multinomial(torch.ones(3, 10, device="neuron"), 10).cpu()
    torch.testing.assert_close(unique.sort(dim=1).values, torch.arange(10).expand(3, 10))
    first = torch.multinomial(torch.tensor([1.0, 0.0, 0.0], device="neuron"), 1).cpu()
    torch.testing.assert_close(first, torch.tensor([0]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_dropout_scales_kept_values(dtype):
    x = torch.randn(N, dtype=dtype).abs() + 1
    out = F.dropout(x.to("neuron"), 0.25, training=True).cpu()
    assert torch_neuronx.get_fallback_ops() == {}
    kept = out != 0
    assert kept.double().mean().item() == pytest.approx(0.75, abs=0.02)
    torch.testing.assert_close(out[kept], (x / 0.75)[kept])
    torch.testing.assert_close(F.dropout(x.to("neuron"), 0.25, training=False).cpu(), x)
    torch.testing.assert_close(F.dropout(x.to("neuron"), 1.0).cpu(), torch.zeros_like(x))
    torch.testing.assert_close(F.dropout(x.to("neuron"), 0.0).cpu(), x)


EMPTY_SELF_SAMPLERS = {
    "randn": lambda t: torch.randn(t.shape, dtype=t.dtype, device=t.device),
    "normal_": lambda t: t.normal_(),
    "log_normal_": lambda t: t.log_normal_(),
    "exponential_": lambda t: t.exponential_(),
    "geometric_": lambda t: t.geometric_(0.5),
    "bernoulli_": lambda t: t.bernoulli_(0.5),
    "random_": lambda t: t.random_(),
    "normal_mean_tensor": lambda t: torch.normal(t, 1.0),
    "normal_std_tensor": lambda t: torch.normal(0.0, t.real if t.is_complex() else t),
    "normal_mean_std_tensors": lambda t: torch.normal(t, t.real if t.is_complex() else t),
    "bernoulli_probabilities": torch.bernoulli,
    "bernoulli_tensor_p_": lambda t: t.bernoulli_(torch.full(t.shape, 0.5, device=t.device)),
}


@pytest.mark.parametrize("dtype", [torch.int8, torch.bool, torch.complex64], ids=str)
@pytest.mark.parametrize("sample", EMPTY_SELF_SAMPLERS)
def test_samplers_return_an_empty_tensor_of_any_dtype_as_cpu_and_cuda(sample, dtype):
    # ATen's CHECK_EMPTY_AND_RETURN comes before the dtype dispatch (test_foreach's randn of an empty
    # int8 tensor raised "normal_kernel_cuda" not implemented for 'Char').
    expected = EMPTY_SELF_SAMPLERS[sample](torch.empty(0, 3, dtype=dtype))
    result = EMPTY_SELF_SAMPLERS[sample](torch.empty(0, 3, dtype=dtype, device="neuron"))
    assert result.device.type == "neuron" and (result.shape, result.dtype) == (expected.shape, expected.dtype)


EMPTY_BEFORE_KERNEL_CHECKS = {
    # cauchy_impl_ refuses integers, then returns an empty self before its kernel refuses float8.
    "cauchy_float8": lambda d: torch.empty(0, dtype=torch.float8_e4m3fn, device=d).cauchy_(),
    # uniform_impl_ returns an empty complex self before it checks the bounds of its real view.
    "uniform_complex_from_above_to": lambda d: torch.empty(0, dtype=torch.complex64, device=d).uniform_(2, 1),
}


@pytest.mark.parametrize("name", EMPTY_BEFORE_KERNEL_CHECKS)
def test_samplers_return_an_empty_self_before_their_kernels_checks(name):
    # helper-53: both raised, cauchy_ with CUDA's "cauchy_cuda" refusal of float8.
    expected = EMPTY_BEFORE_KERNEL_CHECKS[name]("cpu")
    result = EMPTY_BEFORE_KERNEL_CHECKS[name]("neuron")
    assert result.device.type == "neuron" and (result.shape, result.dtype) == (expected.shape, expected.dtype)


def test_bernoulli_of_an_empty_self_reads_no_probability():
    # bernoulli_impl_ returns an empty self first: a p of another shape raised JAX's broadcast
    # ValueError, and p = 1.5 faulted at the next synchronisation, in another op (helper-54).
    for probabilities in (torch.full((3,), 0.5), torch.full((1,), 1.5)):
        result = torch.zeros(0, device="neuron").bernoulli_(probabilities.to("neuron"))
        assert result.shape == (0,)
    assert torch.bernoulli(torch.full((0,), 1.5, device="neuron")).shape == (0,)
    assert (torch.ones(2, device="neuron") * 3).tolist() == [3.0, 3.0]


def test_bernoulli_with_probabilities_that_do_not_expand_raises_atens_error():
    with pytest.raises(
        RuntimeError, match=re.escape("The expanded size of the tensor (3) must match the existing size (2)")
    ):
        torch.zeros(3, device="neuron").bernoulli_(torch.full((2,), 0.5, device="neuron"))
    with pytest.raises(RuntimeError, match=re.escape("the number of sizes provided (1) must be greater or equal")):
        torch.zeros(3, device="neuron").bernoulli_(torch.full((2, 3), 0.5, device="neuron"))


def test_bernoulli_checks_p_before_the_dtype_as_aten():
    for call in (lambda t: t.bernoulli_(1.5), lambda t: torch.bernoulli(t, p=1.5)):
        with pytest.raises(RuntimeError, match=re.escape("bernoulli_ expects p to be in [0, 1], but got p=1.5")):
            call(torch.zeros(3, dtype=torch.uint16, device="neuron"))


@pytest.mark.parametrize(("mean_dtype", "std_dtype"), [(torch.int8, torch.float32), (torch.bool, torch.bfloat16)])
def test_normal_of_an_empty_integer_mean_and_a_float_std_refuses_the_cast_as_the_cpu(mean_dtype, std_dtype):
    # normal_out_impl returns the empty sample and then multiplies it by std in place (helper-54).
    mean, std = torch.zeros(0, dtype=mean_dtype), torch.ones(0, dtype=std_dtype)
    with pytest.raises(RuntimeError) as on_cpu:
        torch.normal(mean, std)
    with pytest.raises(RuntimeError) as on_neuron:
        torch.normal(mean.to("neuron"), std.to("neuron"))
    assert str(on_neuron.value) == str(on_cpu.value)


def test_normal_of_tensors_that_do_not_broadcast_raises_atens_error():
    # PyTorch's meta kernel's "Attempting to broadcast a dimension of length 2" (helper-54).
    with pytest.raises(RuntimeError, match=re.escape("The size of tensor a (3) must match the size of tensor b (2)")):
        torch.normal(torch.zeros(3, device="neuron"), torch.ones(2, device="neuron"))


@pytest.mark.parametrize(
    ("mean_shape", "out_shape", "std", "out_dtype"),
    [
        ((1,), (2, 3), 0.0, torch.float32),  # out's shape wins where mean broadcasts to it
        ((3, 1), (4,), 0.0, torch.float32),  # the broadcast of the two
        ((2,), (2, 2), 0.0, torch.float16),  # mean cast into out's dtype by add_
        ((2,), (3,), 0.0, torch.float32),  # infer_size's error
        ((0,), (3,), 0.0, torch.float32),
        ((2,), (3,), -1.0, torch.float32),  # std's check comes first
        ((2,), (2,), 0.0, torch.complex64),
    ],
)
def test_normal_of_a_tensor_mean_into_out_takes_the_broadcast_with_outs_shape(mean_shape, out_shape, std, out_dtype):
    # normal_out_impl broadcasts mean with out's own shape; the functional op samples mean's shape.
    def sample(device):
        mean = torch.arange(1.0, 1.0 + math.prod(mean_shape), device=device).reshape(mean_shape)
        out = torch.full(out_shape, 7.0, dtype=out_dtype, device=device)
        return torch.normal(mean, std, out=out), out

    try:
        expected, expected_out = sample("cpu")
    except RuntimeError as error:
        with pytest.raises(RuntimeError, match=f"^{re.escape(str(error))}$"):
            sample("neuron")
        return
    actual, actual_out = sample("neuron")
    assert actual is actual_out
    torch.testing.assert_close(actual.cpu(), expected, atol=0, rtol=0)


def test_samplers_check_their_scalars_before_returning_an_empty_tensor():
    with pytest.raises(RuntimeError, match=re.escape("normal expects std >= 0.0, but found std -1")):
        torch.empty(0, dtype=torch.int8, device="neuron").normal_(0, -1)
    with pytest.raises(RuntimeError, match=re.escape("bernoulli_ expects p to be in [0, 1], but got p=2")):
        torch.empty(0, dtype=torch.complex64, device="neuron").bernoulli_(2.0)  # helper-53


def test_dropout_of_non_finite_values_gives_nan_where_dropped_as_cpu():
    # input * mask * scale: a dropped inf or NaN is 0 * inf, NaN on the CPU and CUDA (was 0).
    x = torch.tensor([INF, NAN, -INF] * 50)
    out, mask = torch.native_dropout(x.to("neuron"), 0.5, True)
    out, mask = out.cpu(), mask.cpu()
    assert 0 < mask.sum() < len(x)
    torch.testing.assert_close(out, x * mask * 2.0, atol=0, rtol=0, equal_nan=True)
    grad = torch.ops.aten.native_dropout_backward(x.to("neuron"), mask.to("neuron"), 2.0).cpu()
    torch.testing.assert_close(grad, x * mask * 2.0, atol=0, rtol=0, equal_nan=True)


def test_dropout_gradient_uses_the_same_mask():
    x = (torch.rand(64, 8) + 1).to("neuron").requires_grad_()
    out = F.dropout(x, 0.5)
    out.sum().backward()
    assert torch_neuronx.get_fallback_ops() == {}
    torch.testing.assert_close(x.grad.cpu(), (out != 0).float().cpu() * 2)


def test_native_dropout_eval_returns_input_and_full_mask():
    x = torch.randn(8, device="neuron")
    out, mask = torch.ops.aten.native_dropout(x, 0.5, False)
    torch.testing.assert_close(out.cpu(), x.cpu())
    assert mask.dtype == torch.bool and mask.cpu().all()


def test_dropout_module_in_training_is_native():
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.1)).to("neuron")
    model(torch.randn(4, 8, device="neuron")).sum().backward()
    assert torch_neuronx.get_fallback_ops() == {}, torch_neuronx.get_fallback_ops()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_rrelu_training_scales_non_positive_values_by_its_noise(dtype):
    # CUDA computes rrelu in float16 and bfloat16 too; the CPU has no float16 kernel.
    x = torch.randn(N, dtype=dtype)
    x[0] = 0
    leaf = x.to("neuron").requires_grad_()
    out = F.rrelu(leaf, 0.1, 0.3, training=True)
    out.sum().backward()
    assert torch_neuronx.get_fallback_ops() == {}
    out, grad = out.detach().cpu(), leaf.grad.cpu()
    negative = x <= 0
    torch.testing.assert_close(out[~negative], x[~negative], rtol=0, atol=0)
    torch.testing.assert_close(grad[~negative], torch.ones_like(grad[~negative]), rtol=0, atol=0)
    slopes = grad[negative].float()  # the backward multiplies by the noise: the drawn slopes
    assert 0.1 <= slopes.min().item() and slopes.max().item() <= 0.3 * (1 + torch.finfo(dtype).eps)
    assert slopes.mean().item() == pytest.approx(0.2, abs=0.005)
    torch.testing.assert_close(out[negative], (x[negative].float() * slopes).to(dtype))


def test_rrelu_eval_is_a_leaky_relu_and_the_in_place_form_writes_its_input():
    x = torch.randn(64, 8)
    torch.testing.assert_close(F.rrelu(x.to("neuron"), 0.1, 0.3).cpu(), F.rrelu(x, 0.1, 0.3))
    # float16 (CUDA computes it, the CPU has no kernel): the CPU's float32 result, rounded once.
    half = x.half()
    torch.testing.assert_close(F.rrelu(half.to("neuron"), 0.1, 0.3).cpu(), F.rrelu(half.float(), 0.1, 0.3).half())
    inplace = x.to("neuron")
    returned = F.rrelu(inplace, 0.1, 0.3, training=True, inplace=True)
    assert returned is inplace
    written = inplace.cpu()
    torch.testing.assert_close(written[x > 0], x[x > 0])
    assert ((written[x < 0] / x[x < 0]) >= 0.1 - 1e-6).all() and ((written[x < 0] / x[x < 0]) <= 0.3 + 1e-6).all()
    noise = torch.full((64, 8), 7.0, device="neuron")
    torch.ops.aten.rrelu_with_noise(x.to("neuron"), noise, 0.1, 0.3, False)
    torch.testing.assert_close(noise.cpu(), torch.full((64, 8), 7.0))  # evaluation leaves the noise alone
    assert torch_neuronx.get_fallback_ops() == {}


def test_rrelu_raises_the_cpu_errors_and_cudas_dtype_refusals():
    x = torch.randn(6, device="neuron")
    with pytest.raises(RuntimeError, match=r"noise tensor shape must match self tensor shape. Got self.shape = \[6\]"):
        torch.ops.aten.rrelu_with_noise(x, torch.empty(4, device="neuron"), 0.1, 0.3, True)
    with pytest.raises(RuntimeError, match="Expected from <= to to be true"):
        torch.ops.aten.rrelu_with_noise(x, torch.empty(6, device="neuron"), 0.5, 0.1, True)
    integers = torch.ones(3, dtype=torch.int32, device="neuron")
    with pytest.raises(NotImplementedError, match="^\"rrelu_with_noise_out_cuda\" not implemented for 'Int'"):
        torch.ops.aten.rrelu_with_noise(integers, integers.clone(), 0.1, 0.3, True)
    with pytest.raises(NotImplementedError, match="^\"leaky_relu_cuda\" not implemented for 'Int'"):
        torch.ops.aten.rrelu_with_noise(integers, integers.clone(), 0.1, 0.3, False)


# --- views and in-place semantics ---------------------------------------------------------------


@pytest.mark.parametrize(
    "fill",
    [
        lambda v: v.uniform_(5, 6),
        lambda v: v.normal_(10, 0.1),
        lambda v: v.random_(5, 7),
        lambda v: v.exponential_().add_(5),
        lambda v: v.bernoulli_(1.0).add_(4),
    ],
    ids=["uniform_", "normal_", "random_", "exponential_", "bernoulli_"],
)
def test_inplace_draws_write_only_their_view(fill):
    base = torch.zeros(6, 8, device="neuron")
    view = base[1:5, 1::2]
    fill(view)
    host = base.cpu()
    untouched = torch.ones(6, 8, dtype=torch.bool)
    untouched[1:5, 1::2] = False
    assert (host[untouched] == 0).all()
    assert (host[~untouched] > 3).all()
    transposed = torch.zeros(4, 3, device="neuron").t()
    fill(transposed)
    assert (transposed.cpu() > 3).all()


# --- invalid parameters ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("draw", "error"),
    [
        (lambda x: x.uniform_(1, 0), RuntimeError),
        (lambda x: x.normal_(0, -1), RuntimeError),
        (lambda x: torch.normal(x, -torch.ones_like(x)), RuntimeError),
        (lambda x: x.bernoulli_(2.0), RuntimeError),
        (lambda x: x.bernoulli_(torch.full_like(x, -0.5)), RuntimeError),
        (lambda x: x.exponential_(0), RuntimeError),
        (lambda x: x.geometric_(1.0), RuntimeError),
        (lambda x: x.log_normal_(1, 0), RuntimeError),
        (lambda x: x.cauchy_(0, -1), RuntimeError),
        (lambda x: x.random_(5, 5), RuntimeError),
        (lambda x: x.to(torch.int8).random_(0, 1000), RuntimeError),
        (lambda x: x.to(torch.int64).uniform_(), NotImplementedError),
        (lambda x: x.to(torch.int64).exponential_(), RuntimeError),
        (lambda x: torch.multinomial(x - 2, 1), RuntimeError),
        (lambda x: torch.multinomial(x * 0, 1), RuntimeError),
        (lambda x: torch.multinomial(x, 5), RuntimeError),
    ],
    ids=[
        "uniform_from_gt_to",
        "normal_negative_std",
        "normal_negative_std_tensor",
        "bernoulli_p",
        "bernoulli_p_tensor",
        "exponential_lambda",
        "geometric_p",
        "log_normal_std",
        "cauchy_sigma",
        "random_empty_range",
        "random_out_of_dtype",
        "uniform_integer",
        "exponential_integer",
        "multinomial_negative",
        "multinomial_zero_sum",
        "multinomial_too_many",
    ],
)
def test_invalid_parameters_raise_as_on_cpu(draw, error):
    with pytest.raises(error):
        draw(torch.ones(4))
    with pytest.raises(error):
        draw(torch.ones(4, device="neuron")).cpu()


def test_random_bounds_warn_for_inexact_floats():
    with pytest.warns(UserWarning, match="Due to precision limitations c10::BFloat16 can support") as on_neuron:
        torch.empty(3, dtype=torch.bfloat16, device="neuron").random_(0, 1000).cpu()
    with pytest.warns(UserWarning) as on_cpu:
        torch.empty(3, dtype=torch.bfloat16).random_(0, 1000)
    # The CPU's warning ends with where it was triggered in ATen's sources.
    assert str(on_cpu[0].message).startswith(str(on_neuron[0].message))


def test_draws_of_empty_tensors():
    assert torch.rand(0, 3, device="neuron").cpu().shape == (0, 3)
    assert torch.empty(0, device="neuron").normal_().cpu().shape == (0,)
    assert torch.randperm(0, device="neuron").cpu().shape == (0,)


def _error(call):
    """The (type, message) ``call`` raises (it must raise)."""
    with pytest.raises(Exception) as info:
        result = call()
        if isinstance(result, torch.Tensor):
            result.cpu()
    return type(info.value), str(info.value)


UNIFORM_BOUND_ERRORS = {
    "from_below_half": (torch.float16, -70000, 0),
    "to_above_bfloat16": (torch.bfloat16, 0, 3.5e38),
    "range_past_half": (torch.float16, -60000, 60000),
    "range_past_float": (torch.float32, -3e38, 3e38),
    "complex32_range_past_half": (torch.complex32, -60000, 60000),
    "complex64_from_above_to": (torch.complex64, 2, 1),
}


@pytest.mark.parametrize("name", UNIFORM_BOUND_ERRORS)
def test_uniform_bounds_raise_atens_errors(name):
    """ATen's uniform_ checks its bounds against the dtype (a complex tensor's against its parts'),
    the same on CPU and CUDA: the same exception and message on neuron."""
    dtype, low, high = UNIFORM_BOUND_ERRORS[name]
    expected = _error(lambda: torch.empty(3, dtype=dtype).uniform_(low, high))
    assert _error(lambda: torch.empty(3, dtype=dtype, device="neuron").uniform_(low, high)) == expected


def _empty(dtype):
    return lambda device: torch.empty(3, dtype=dtype, device=device)


# Refusals that ATen's templates make on every device (DistributionTemplates.h): the CPU's words.
REFUSED_AS_ON_CPU = {
    "cauchy_int64": lambda d: _empty(torch.int64)(d).cauchy_(),
    "cauchy_bool": lambda d: _empty(torch.bool)(d).cauchy_(),
    "cauchy_complex32": lambda d: _empty(torch.complex32)(d).cauchy_(),
    "exponential_uint8": lambda d: _empty(torch.uint8)(d).exponential_(),
    "exponential_complex64": lambda d: _empty(torch.complex64)(d).exponential_(),
    "random_to_complex64": lambda d: _empty(torch.complex64)(d).random_(0, 5),
    "random_from_complex32": lambda d: _empty(torch.complex32)(d).random_(1, None),
    "random_to_float8": lambda d: _empty(torch.float8_e4m3fn)(d).random_(0, 2),
    "random_past_int8": lambda d: _empty(torch.int8)(d).random_(0, 1000),
    "random_past_half": lambda d: _empty(torch.float16)(d).random_(-70000, 0),
    "random_past_bool": lambda d: _empty(torch.bool)(d).random_(0, 3),
}


@pytest.mark.parametrize("name", REFUSED_AS_ON_CPU)
def test_random_dtype_refusals_of_atens_templates_match_the_cpu(name):
    draw = REFUSED_AS_ON_CPU[name]
    assert _error(lambda: draw("neuron")) == _error(lambda: draw("cpu"))


# Refusals of CUDA's kernels (cuda/DistributionTemplates.h, Dropout.cu): CUDA's exception and words,
# where the CPU names its own kernels ("log_normal_cpu") or computes (bernoulli of integers).
CUDA_REFUSALS = {
    "log_normal_int32": (lambda: _empty(torch.int32)("neuron").log_normal_(), '"log_normal_cuda"', "Int"),
    "log_normal_complex32": (
        lambda: _empty(torch.complex32)("neuron").log_normal_(),
        '"log_normal_cuda"',
        "ComplexHalf",
    ),
    "geometric_bool": (lambda: _empty(torch.bool)("neuron").geometric_(0.5), '"geometric_cuda"', "Bool"),
    "geometric_complex64": (
        lambda: _empty(torch.complex64)("neuron").geometric_(0.5),
        '"geometric_cuda"',
        "ComplexFloat",
    ),
    "cauchy_float8": (lambda: _empty(torch.float8_e4m3fn)("neuron").cauchy_(), '"cauchy_cuda"', "Float8_e4m3fn"),
    "normal_int64": (lambda: _empty(torch.int64)("neuron").normal_(), '"normal_kernel_cuda"', "Long"),
    "uniform_float8": (lambda: _empty(torch.float8_e5m2)("neuron").uniform_(), '"check_uniform_bounds"', "Float8_e5m2"),
    "random_complex64": (lambda: _empty(torch.complex64)("neuron").random_(), '"random_kernel_cuda"', "ComplexFloat"),
    "random_uint16": (lambda: _empty(torch.uint16)("neuron").random_(), '"random_kernel_cuda"', "UInt16"),
    "bernoulli_p_complex64": (
        lambda: _empty(torch.complex64)("neuron").bernoulli_(0.5),
        '"bernoulli_scalar_cuda_"',
        "ComplexFloat",
    ),
    "bernoulli_tensor_complex32": (
        lambda: _empty(torch.complex32)("neuron").bernoulli_(torch.full((3,), 0.5, device="neuron")),
        '"bernoulli_tensor_cuda_self_"',
        "ComplexHalf",
    ),
    "dropout_int64": (
        lambda: F.dropout(torch.ones(4, dtype=torch.int64, device="neuron"), 0.5),
        '"fused_dropout"',
        "Long",
    ),
    "dropout_complex64": (
        lambda: F.dropout(torch.ones(4, dtype=torch.complex64, device="neuron"), 0.5),
        '"fused_dropout"',
        "ComplexFloat",
    ),
}


@pytest.mark.parametrize("name", CUDA_REFUSALS)
def test_random_dtype_refusals_are_cudas(name):
    draw, kernel, dtype = CUDA_REFUSALS[name]
    assert _error(draw) == (NotImplementedError, f"{kernel} not implemented for '{dtype}'")


@pytest.mark.parametrize(
    ("dtype", "name"), [(torch.int32, "Int"), (torch.bool, "Bool"), (torch.complex64, "ComplexFloat")], ids=str
)
def test_bernoulli_of_non_floating_probabilities_raises_cudas_error(dtype, name):
    # The CPU raises NotImplementedError naming its kernel: "bernoulli_tensor_cpu_p_" not implemented.
    expected = (RuntimeError, f"expected probabilities tensor to have floating type, got {name}")
    assert _error(lambda: torch.bernoulli(torch.ones(3, dtype=dtype, device="neuron"))) == expected
    probabilities = torch.ones(3, dtype=dtype, device="neuron")
    assert _error(lambda: torch.zeros(3, device="neuron").bernoulli_(probabilities)) == expected


@pytest.mark.parametrize("p", [float("nan"), 1.5, -0.25])
def test_bernoulli_of_probabilities_outside_the_unit_interval_is_a_device_fault(p):
    # A NaN probability drew 0 before; the CPU raises, CUDA's kernel asserts on the device.
    probabilities = torch.tensor([0.5, p], device="neuron")
    message = "Expected p_in >= 0 && p_in <= 1 to be true, but got false."
    for draw in (
        lambda: torch.bernoulli(probabilities),
        lambda: torch.zeros(2, device="neuron").bernoulli_(probabilities),
    ):
        with pytest.raises(RuntimeError, match=re.escape(message)):
            draw()
            torch.neuron.synchronize()


def test_random_ops_still_take_what_cuda_takes():
    """The dtypes the refusals above leave: integer geometric_, bool/integer random_ and bernoulli_,
    dropout outside training or with p == 1 of any dtype."""
    assert torch.empty(64, dtype=torch.int16, device="neuron").geometric_(0.5).cpu().min() >= 1
    assert set(torch.empty(64, dtype=torch.bool, device="neuron").random_().cpu().tolist()) == {False, True}
    assert torch.zeros(64, dtype=torch.uint8, device="neuron").bernoulli_(1.0).cpu().eq(1).all()
    ones = torch.ones(4, dtype=torch.int64, device="neuron")
    torch.testing.assert_close(F.dropout(ones, 0.5, training=False).cpu(), torch.ones(4, dtype=torch.int64))
    torch.testing.assert_close(F.dropout(ones, 1.0).cpu(), torch.zeros(4, dtype=torch.int64))


NORMAL_TENSOR_CALLS = {
    "tensor_tensor": lambda mean, std: torch.normal(mean, std),
    "tensor_float": lambda mean, std: torch.normal(mean, 2.0),
    "float_tensor": lambda mean, std: torch.normal(1.0, std),
}


@pytest.mark.parametrize("call", NORMAL_TENSOR_CALLS)
@pytest.mark.parametrize(
    ("mean_dtype", "std_dtype"),
    [
        (torch.float16, torch.float32),
        (torch.bfloat16, torch.float16),
        (torch.float32, torch.float16),
        (torch.complex32, torch.float32),
        (torch.complex64, torch.bfloat16),
    ],
    ids=str,
)
def test_normal_of_tensors_has_atens_result_dtype(call, mean_dtype, std_dtype):
    """ATen's result takes ``mean``'s dtype (``std``'s for a float mean), where PyTorch's Python meta
    kernel promoted the two (float16 mean, float32 std: float32)."""
    draw = NORMAL_TENSOR_CALLS[call]
    expected = draw(torch.zeros(4, dtype=mean_dtype), torch.ones(4, dtype=std_dtype))
    actual = draw(torch.zeros(4, dtype=mean_dtype, device="neuron"), torch.ones(4, dtype=std_dtype, device="neuron"))
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert torch_neuronx.get_fallback_ops() == {}


NORMAL_TENSOR_ERRORS = {
    "complex_std": lambda d: torch.normal(torch.zeros(3, device=d), torch.ones(3, dtype=torch.complex64, device=d)),
    "complex_std_float_mean": lambda d: torch.normal(0.0, torch.ones(3, dtype=torch.complex64, device=d)),
}


@pytest.mark.parametrize("name", NORMAL_TENSOR_ERRORS)
def test_normal_of_a_complex_std_raises_atens_error(name):
    draw = NORMAL_TENSOR_ERRORS[name]
    assert _error(lambda: draw("neuron")) == _error(lambda: draw("cpu"))


def test_normal_of_an_integer_result_raises_cudas_error():
    integers = torch.zeros(3, dtype=torch.int64, device="neuron")
    expected = (NotImplementedError, "\"normal_kernel_cuda\" not implemented for 'Long'")
    assert _error(lambda: torch.normal(integers, torch.ones(3, device="neuron"))) == expected
    assert _error(lambda: torch.normal(1.0, integers)) == expected


def test_normal_of_a_complex32_mean_is_complex32_around_it():
    mean = torch.full((N,), 1 - 2j, dtype=torch.complex32, device="neuron")
    z = torch.normal(mean, torch.full((N,), 2.0, device="neuron")).cpu()
    assert z.dtype == torch.complex32
    assert _moments(z.real.double()) == pytest.approx((1.0, 2.0), rel=0.06)
    assert _moments(z.imag.double()) == pytest.approx((-2.0, 2.0), rel=0.06)


def test_compiled_normal_of_tensors_has_eagers_result_dtype():
    # Dynamo and AOTAutograd trace under the Python dispatcher, whose meta kernel is replaced too.
    mean, std = torch.zeros(8, dtype=torch.float16, device="neuron"), torch.ones(8, device="neuron")
    compiled = torch.compile(lambda m, s: torch.normal(m, s) * 2, backend="neuron")
    assert compiled(mean, std).dtype == torch.normal(mean, std).dtype == torch.float16


@pytest.mark.parametrize(
    "draw",
    [
        lambda d: torch.multinomial(torch.tensor([1, 2, 3], device=d), 2),
        lambda d: torch.multinomial(torch.tensor([True, False, True], device=d), 1),
        lambda d: torch.multinomial(torch.ones(3, device=d), 2, out=torch.empty(2, dtype=torch.int32, device=d)),
    ],
    ids=["integer-probabilities", "bool-probabilities", "int32-out"],
)
def test_multinomial_refuses_what_aten_refuses_in_its_words(draw):
    with pytest.raises(RuntimeError) as on_cpu:
        draw("cpu")
    with pytest.raises(RuntimeError) as on_neuron:
        draw("neuron")
    assert str(on_neuron.value) == str(on_cpu.value)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int8, torch.bool, torch.float16])
def test_bernoulli_draws_into_an_out_of_any_dtype(dtype):
    # ATen's bernoulli_out resizes out to p's shape and samples into it in out's dtype; the meta
    # kernel refused an integer or bool out (a float result it could not cast).
    p = torch.tensor([0.0, 1.0] * 8 + [0.5] * 4000, device="neuron")
    out = torch.empty(3, dtype=dtype, device="neuron")
    result = torch.bernoulli(p, out=out)
    assert result is out and out.shape == p.shape and out.dtype == dtype
    draws = out.cpu().float()
    torch.testing.assert_close(draws[:16], torch.tensor([0.0, 1.0] * 8))
    assert set(draws.unique().tolist()) == {0.0, 1.0}
    assert abs(draws[16:].mean().item() - 0.5) < 0.05  # 4,000 draws: 6 standard deviations


@pytest.mark.parametrize(
    "draw",
    [
        lambda g: torch.poisson(torch.full((64,), 4.0, device="neuron"), generator=g),
        lambda g: torch.binomial(
            torch.full((64,), 10.0, device="neuron"), torch.full((64,), 0.5, device="neuron"), generator=g
        ),
        lambda g: torch._standard_gamma(torch.ones(64, device="neuron"), generator=g),
        lambda g: torch._sample_dirichlet(torch.ones(16, 4, device="neuron"), generator=g),
    ],
    ids=["poisson", "binomial", "standard_gamma", "sample_dirichlet"],
)
def test_samplers_that_run_on_the_cpu_take_a_neuron_generator(draw):
    # These run on the CPU, whose kernel refused a neuron generator ("Expected a 'cpu' device type").
    generator = torch.Generator("neuron")
    draws = []
    for _ in range(2):
        generator.manual_seed(3)
        draws.append((draw(generator).cpu(), draw(generator).cpu()))
    torch.testing.assert_close(draws[0], draws[1])  # reproducible under the generator's seed
    assert not torch.equal(*draws[0])  # and each call draws anew


def test_samplers_that_run_on_the_cpu_refuse_a_cpu_generator_for_neuron_tensors():
    # As torch.rand(device="neuron", generator=cpu_generator) refuses it (ATen's check_generator).
    with pytest.raises(RuntimeError, match="^Expected a 'neuron' device type for generator but found 'cpu'; create"):
        torch.poisson(torch.ones(3, device="neuron"), generator=torch.Generator("cpu"))


@pytest.mark.parametrize(
    "draw",
    [
        lambda g: torch.poisson(torch.ones(3), generator=g),
        lambda g: torch.randn(3, generator=g),
        lambda g: torch.ones(3).bernoulli_(0.5, generator=g),
        lambda g: torch.randperm(4, generator=g),
    ],
    ids=["poisson", "randn", "bernoulli_", "randperm"],
)
def test_a_neuron_generator_for_cpu_tensors_raises_the_cpus_error(draw):
    # The generator's dispatch key brings these CPU calls to neuron's kernels: once the device had
    # run a sampler, poisson of CPU tensors drew with it, and randn named the CPU tensor's device.
    generator = torch.Generator("neuron")
    torch.poisson(torch.ones(3, device="neuron"), generator=generator)
    with pytest.raises(RuntimeError, match="^Expected a 'cpu' device type for generator but found 'neuron'$"):
        draw(generator)


@pytest.mark.parametrize(
    "sample",
    [
        torch.poisson,
        torch._standard_gamma,
        torch._sample_dirichlet,
        lambda x: torch.nn.functional.rrelu(x - 2, training=True),
    ],
    ids=["poisson", "standard_gamma", "sample_dirichlet", "rrelu"],
)
def test_samplers_of_a_permuted_input_are_contiguous_as_on_cpu(sample):
    # The CPU's samplers allocate at::empty(sizes): contiguous, so .view(-1) works on the result.
    base = torch.arange(120.0).reshape(4, 5, 6) % 3  # rates 0, 1 and 2
    permuted = base.permute(2, 0, 1)
    expected = sample(permuted)
    result = sample(permuted.to("neuron"))
    assert result.stride() == expected.stride()
    zero = permuted == 0  # a zero rate draws zero
    if sample is torch.poisson:
        torch.testing.assert_close(result.view(-1).cpu()[zero.reshape(-1)], torch.zeros(int(zero.sum())))
