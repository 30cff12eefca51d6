"""A sample of the lowering tests and of the OpInfo sample run again with adaptive eager on, in a
process of their own (``make test-adaptive`` runs all of them in this mode): the pointwise tests of
the dtype rules a fused run must keep (integer and float powers, exact division, 16-bit rounding of
number operands) and the OpInfo gradients."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_lowering_and_opinfo_sample_pass_in_adaptive_mode():
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/lowering/test_pointwise.py",
        "tests/conformance/test_opinfo_sample.py",
        "-k",
        "test_pointwise and (pow or division or rounded) or backward",
    ]
    env = dict(os.environ, TORCH_NEURONX_ADAPTIVE_EAGER="1")
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout.splitlines()[-1]
