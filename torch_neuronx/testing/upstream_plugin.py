"""The pytest plugin that ``torch-neuronx upstream-tests`` loads into each test file's process.

It records one JSON line per test into the file named by ``TORCH_NEURONX_UPSTREAM_RECORD``: a
``start`` line before a test runs (so the parent can tell which test hung or crashed the process)
and an outcome line after it, flushed at once. Tests listed in ``TORCH_NEURONX_UPSTREAM_DONE`` (one
node id a line: finished before a crash or a timeout) are deselected, so a restarted process
carries on from the next test. ``TORCH_NEURONX_UPSTREAM_SAMPLE=N`` keeps at most N of the file's
collected tests, evenly spread over the file (the same ones in every restarted process), and a
``collected`` line says how many there were, and how many dtype variants PyTorch's test base left
out because neuron does not hold their dtype (:class:`torch_neuronx._compat.upstream_tests.NeuronTestBase`,
installed here with the compatibility names of :func:`~torch_neuronx._compat.upstream_tests.install_compat`
and the accelerator classes' policy of :func:`~torch_neuronx._compat.upstream_tests.install_accelerator_classes`
before any test file imports, with a lookup of the running test that reads no source
(:func:`~torch_neuronx._compat.testing_internals.install_frame_walking_test_lookup`, for speed)).
Deliberate skips (:data:`torch_neuronx.testing.tables.UPSTREAM_SKIPS`)
are applied here, each with its reason, and a failure that is the device's own refusal of what it
does not have by design (the dtype policy's ``TypeError`` for FP64, the
``NotImplementedError`` of sparse, quantized and strided nested tensors) is recorded as a deliberate skip too
(``skipped-ours``, with that reason), never as a pass. After each test the plugin synchronises the
cores, so that a device fault the test left pending fails that test rather than the next one.
"""

from __future__ import annotations

import json
import os
import re
import time
from typing import Any

import pytest
import torch

from torch_neuronx._compat import upstream_tests
from torch_neuronx._compat.testing_internals import install_frame_walking_test_lookup
from torch_neuronx.testing import tables

#: The prefix that marks a skip reason as ours, not PyTorch's eligibility checks'.
OURS = "skipped by torch-neuronx: "

_record = None
#: The device's refusals by design: (exception type, message pattern, reason). A test failing with
#: one of them asked for what neuron does not have (the dtype policy of DESIGN.md's decision 8; the
#: sparse and quantized tensors of eager/fallback.py's UNSUPPORTED_KEYS), and is recorded as a
#: deliberate skip with that reason.
_POLICY = (
    (
        TypeError,
        re.compile(r"tensors are not supported because Trainium has no FP64 arithmetic"),
        "FP64 policy (the test makes a float64 or complex128 tensor on neuron, which raises as designed)",
    ),
    (
        TypeError,
        re.compile(r"on neuron: dtype \w+ is not supported\. Supported dtypes:"),
        "unsupported-dtype policy (the test makes a tensor of a dtype neuron does not have, e.g. float64)",
    ),
    (
        NotImplementedError,
        re.compile(r": (sparse COO|sparse compressed \S+|quantized) tensors are not supported on neuron\. "),
        "sparse and quantized tensors (the test makes one on neuron, which raises as designed; CUDA has them)",
    ),
    (
        NotImplementedError,
        re.compile(r": nested \(torch\.strided layout\) tensors are not supported on neuron\. "),
        "nested tensors of the strided layout (the test makes one on neuron, which raises as designed; CUDA "
        "has them; torch.jagged's work)",
    ),
)


#: test_ops' ``test_dtypes`` message: the dtype sets that disagree with the OpInfo's claims.
_DTYPE_CLAIMS = re.compile(
    r"The following dtypes (did not work|worked) in (?:forward|backward) but are (?:not )?listed by "
    r"the OpInfo: \{([^}]*)\}"
)
_FP64_NAMES = {str(dtype) for dtype in upstream_tests.MISSING_DTYPES}
#: test_dtypes' list of each failing dtype's error ("torch.complex64 - <message>"), whitespace joined.
_DTYPE_ERRORS = re.compile(r"(torch\.\w+) - (.*?)(?= torch\.\w+ - | Caused by sample input|$)")


def _only_fp64_claims(message: str) -> bool:
    """Whether a ``test_dtypes`` failure ("The supported dtypes for add on device type neuron are
    incorrect!") is the FP64 policy alone: the OpInfo's dtypes for neuron are its CUDA and CPU
    ones (``upstream_tests.claim_cuda_dtypes``), float64 and complex128 included, and only those
    did not work, or failed only with the policy's error. A Python reference (``_refs.cumprod``)
    may work in more dtypes than it claims: test_dtypes fails one only for claimed dtypes that did
    not work, though its message lists both."""
    if "The supported dtypes for" not in message:
        return False
    reference = "The supported dtypes for _refs." in message
    counted = [(kind, names) for kind, names in _DTYPE_CLAIMS.findall(message) if not (reference and kind == "worked")]
    # A dtype whose samples mix in float64 tensors (sample_inputs_l1_loss's other dtypes) fails with
    # the policy's error too.
    refused = _FP64_NAMES | {dtype for dtype, error in _DTYPE_ERRORS.findall(message) if _POLICY[0][1].search(error)}
    return bool(counted) and all(
        kind == "did not work" and {name.strip() for name in names.split(",")} <= refused for kind, names in counted
    )


def _write(line: dict[str, Any]) -> None:
    if _record is not None:
        _record.write(json.dumps(line) + "\n")
        _record.flush()


def pytest_configure(config: pytest.Config) -> None:
    global _record
    path = os.environ.get("TORCH_NEURONX_UPSTREAM_RECORD")
    if path:
        _record = open(path, "a", encoding="utf-8")  # noqa: SIM115 - open for the whole session
    install_frame_walking_test_lookup()
    upstream_tests.install_compat()
    upstream_tests.install_renamed_classes()
    upstream_tests.install_device_base()
    upstream_tests.install_accelerator_classes()
    upstream_tests.claim_cuda_dtypes()


def pytest_unconfigure(config: pytest.Config) -> None:
    if _record is not None:
        _record.close()


def _sample(items: list[pytest.Item], size: int) -> list[pytest.Item]:
    """At most ``size`` of ``items``, evenly spaced from the first, in their order."""
    if len(items) <= size:
        return items
    return [items[index * len(items) // size] for index in range(size)]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    collected = len(items)
    sample = os.environ.get("TORCH_NEURONX_UPSTREAM_SAMPLE")
    if sample:
        chosen = _sample(items, int(sample))
        kept_ids = {id(item) for item in chosen}
        config.hook.pytest_deselected(items=[item for item in items if id(item) not in kept_ids])
        items[:] = chosen
    _write(
        {
            "event": "collected",
            "collected": collected,
            "selected": len(items),
            "left_out": dict(upstream_tests.NeuronTestBase.left_out),
        }
    )
    done_path = os.environ.get("TORCH_NEURONX_UPSTREAM_DONE")
    done = set()
    if done_path and os.path.exists(done_path):
        with open(done_path, encoding="utf-8") as lines:
            done = {line.strip() for line in lines if line.strip()}
    kept, dropped = [], []
    for item in items:
        (dropped if item.nodeid in done else kept).append(item)
        reason = tables.upstream_skip_reason(item.name)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=OURS + reason))
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    _write({"nodeid": nodeid, "event": "start", "time": time.time()})


def _synchronize_cores(*, raising: bool) -> None:
    """Waits for every core's work, so that a device fault a test left pending (decision 9) is
    raised by that test (``raising``) or dropped, never by the next test's first host read."""
    if not torch.neuron.is_initialized():
        return
    first = None
    for core in range(torch.neuron.device_count()):
        try:
            torch.neuron.synchronize(core)
        except Exception as fault:
            first = first or fault
    if first is not None and raising:
        raise first


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    try:
        result = yield
    except BaseException:
        _synchronize_cores(raising=False)
        raise
    _synchronize_cores(raising=True)
    return result


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is None or not report.failed:
        return
    message = " ".join(str(call.excinfo.value).split())
    if _only_fp64_claims(message):
        report.outcome = "skipped"
        reason = "FP64 policy (the OpInfo claims float64/complex128 for the device, which neuron does not hold)"
        report.longrepr = (str(item.path), item.location[1], f"{OURS}{reason}: {message[:200]}")
        return
    for kind, pattern, reason in _POLICY:
        if any(
            isinstance(error, kind) and pattern.search(" ".join(str(error).split()))
            for error in _chain(call.excinfo.value)
        ):
            report.outcome = "skipped"
            report.longrepr = (str(item.path), item.location[1], f"{OURS}{reason}: {message[:200]}")
            return


def _chain(error: BaseException) -> list[BaseException]:
    """``error`` and the exceptions it was raised from or during (test_ops re-raises a sample's
    error as ``Exception("...Caused by reference input...")`` from the original)."""
    chain: list[BaseException] = []
    while error is not None and error not in chain:
        chain.append(error)
        error = error.__cause__ or error.__context__
    return chain


def _reason(report: pytest.TestReport) -> str:
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    if hasattr(report, "wasxfail"):
        return str(report.wasxfail)
    if report.failed:
        crash = getattr(report.longrepr, "reprcrash", None)
        return crash.message if crash is not None else str(report.longrepr)[-2000:]
    return ""


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # One line per test: the call phase's outcome, or setup's where setup skipped or failed, or
    # teardown's where only teardown failed.
    if (
        report.when == "call"
        or (report.when == "setup" and not report.passed)
        or (report.when == "teardown" and report.failed)
    ):
        if hasattr(report, "wasxfail"):
            outcome = "xfailed" if report.skipped else "xpassed"
        elif report.skipped:
            outcome = "skipped"
        else:
            outcome = "error" if report.when != "call" and report.failed else report.outcome
        _write(
            {
                "nodeid": report.nodeid,
                "event": "outcome",
                "outcome": outcome,
                "reason": _reason(report)[:2000],
                "duration": report.duration,
            }
        )
