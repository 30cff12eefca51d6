"""The kernel library against PyTorch on the CPU over larger shapes than the default test run:
``python -m nki.sweep [--out reports/nki] [--quick]`` (``make nki-sweep``). Each case is simulated on
the host CPU (``nki.simulate``), compared with PyTorch within its tolerance, and written to
``<out>/summary.md`` with its largest error (relative to the largest reference value, at least 1)
and wall time; the exit status is 1 when any case fails.

The references are also what tests/nki/test_kernels.py compares with.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time
from collections.abc import Callable

import torch

__all__ = ["attention_reference", "main", "rope_reference", "swiglu_reference"]


def rope_reference(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """The rotate-half rotary embedding: ``[x1 cos - x2 sin, x2 cos + x1 sin]``."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def swiglu_reference(x, w_gate, w_up, w_down) -> torch.Tensor:
    return (torch.nn.functional.silu(x @ w_gate) * (x @ w_up)) @ w_down


def attention_reference(q, k, v, scale, causal, grad_seed=0):
    """PyTorch's attention over the flash kernels' layout (``[B * H, S, D]``, grouped-query): the
    output, the log-sum-exp per query, and (grad_out, grad_q, grad_k, grad_v) for a random grad_out."""
    group = q.shape[0] // k.shape[0]
    qr, kr, vr = (t.detach().float().clone().requires_grad_() for t in (q, k, v))
    keys, values = kr.repeat_interleave(group, 0), vr.repeat_interleave(group, 0)
    out = torch.nn.functional.scaled_dot_product_attention(
        qr[None], keys[None], values[None], is_causal=causal, scale=scale
    )[0]
    scores = (qr @ keys.transpose(1, 2)) * scale
    if causal:
        scores = scores.masked_fill(torch.ones(q.shape[1], k.shape[1], dtype=torch.bool).triu(1), float("-inf"))
    lse = torch.logsumexp(scores, -1)
    grad_out = torch.randn(out.shape, generator=torch.Generator().manual_seed(grad_seed))
    out.backward(grad_out)
    return (
        out.detach().to(q.dtype),
        lse.detach(),
        (grad_out.to(q.dtype), qr.grad.to(q.dtype), kr.grad.to(k.dtype), vr.grad.to(v.dtype)),
    )


def _error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """The largest absolute difference, relative to the largest reference magnitude (at least 1)."""
    expected = expected.float()
    return ((actual.float() - expected).abs().max() / expected.abs().max().clamp(min=1)).item()


def _cases(quick: bool) -> list[tuple[str, Callable[[], float], float]]:
    import nki
    from nki.kernels import flash_attention as fa
    from nki.kernels.rmsnorm import rms_norm_kernel
    from nki.kernels.rope import rope_kernel
    from nki.kernels.swiglu import swiglu_mlp_kernel

    def rms(n, h, dtype):
        def run():
            x, w = torch.randn(n, h, dtype=dtype), torch.randn(h, dtype=dtype)
            expected = torch.nn.functional.rms_norm(x.float(), (h,), w.float(), 1e-6)
            return _error(nki.simulate(rms_norm_kernel)(x, w, 1e-6), expected)

        return run

    def rope(n, d):
        def run():
            x, angles = torch.randn(n, d), torch.randn(n, d // 2)
            return (
                (
                    nki.simulate(rope_kernel)(x, angles.cos(), angles.sin())
                    - rope_reference(x, angles.cos(), angles.sin())
                )
                .abs()
                .max()
                .item()
            )

        return run

    def swiglu(t, h, i):
        def run():
            x = torch.randn(t, h)
            w = [torch.randn(h, i) * 0.05, torch.randn(h, i) * 0.05, torch.randn(i, h) * 0.05]
            return _error(nki.simulate(swiglu_mlp_kernel)(x, *w), swiglu_reference(x, *w))

        return run

    def flash(hq, hkv, s, d, causal, dtype):
        def run():
            q, k, v = (torch.randn(h, s, d).to(dtype) for h in (hq, hkv, hkv))
            scale = d**-0.5
            out, lse = nki.simulate(fa.flash_fwd_kernel[hq])(q, k, v, scale, causal)
            expected, expected_lse, (grad_out, *grads) = attention_reference(q, k, v, scale, causal)
            errors = [_error(out, expected), _error(lse, expected_lse)]
            got = nki.simulate(fa.flash_bwd_kernel[hkv])(q, k, v, expected, grad_out, lse, scale, causal)
            errors += [_error(a, b) for a, b in zip(got, grads, strict=True)]
            return max(errors)

        return run

    cases = [
        ("rms_norm 300x512 float32", rms(300, 512, torch.float32), 1e-5),
        ("rms_norm 256x1024 bfloat16", rms(256, 1024, torch.bfloat16), 1e-2),
        ("rope 500x128", rope(500, 128), 1e-5),
        ("swiglu 300x256 -> 640", swiglu(300, 256, 640), 1e-4),
        ("flash attention Hq=4 Hkv=2 S=256 D=64 causal float32", flash(4, 2, 256, 64, True, torch.float32), 1e-4),
        ("flash attention Hq=2 Hkv=2 S=256 D=128 float32", flash(2, 2, 256, 128, False, torch.float32), 1e-4),
    ]
    if not quick:
        cases += [
            ("flash attention Hq=4 Hkv=1 S=512 D=64 causal float32", flash(4, 1, 512, 64, True, torch.float32), 1e-4),
            ("flash attention Hq=2 Hkv=1 S=256 D=64 causal bfloat16", flash(2, 1, 256, 64, True, torch.bfloat16), 2e-2),
        ]
    return cases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="reports/nki", help="folder for summary.md")
    parser.add_argument("--quick", action="store_true", help="skip the two largest cases")
    options = parser.parse_args(argv)
    torch.manual_seed(0)
    rows, failed = [], 0
    for name, run, tolerance in _cases(options.quick):
        start = time.perf_counter()
        error = run()
        seconds = time.perf_counter() - start
        ok = error <= tolerance
        failed += not ok
        rows.append(f"| {name} | {error:.3g} | {tolerance:g} | {'pass' if ok else 'FAIL'} | {seconds:.1f} |")
        print(rows[-1], flush=True)
    folder = pathlib.Path(options.out)
    folder.mkdir(parents=True, exist_ok=True)
    header = "| case | max relative error | tolerance | result | seconds |\n|---|---:|---:|---|---:|\n"
    (folder / "summary.md").write_text(
        "# NKI kernel library against PyTorch (CPU)\n\n" + header + "\n".join(rows) + "\n"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
