"""The ``torch-neuronx`` command line (also ``python -m torch_neuronx.cli``).

``torch-neuronx conformance`` runs PyTorch's OpInfo database on neuron against the CPU and writes
``outcomes.parquet`` and ``summary.md`` (see :mod:`torch_neuronx.testing`).
``torch-neuronx upstream-tests`` runs PyTorch's own device-generic test files on neuron and writes
``outcomes.parquet`` and ``summary.md`` (see :mod:`torch_neuronx.testing.upstream`).
``torch-neuronx sweep-models`` runs every transformers architecture, reduced, on neuron against the CPU
and writes ``outcomes.parquet``, ``summary.md`` and ``models_pass_rates.png`` (see
:mod:`torch_neuronx.testing.model_sweep`).
``torch-neuronx profile summarize DIR`` reports where a profile's time went, from the Parquet
tables ``NeuronProfiler.export_trace`` wrote (see :mod:`torch_neuronx.profiling`); ``--plot FILE.png``
draws it.
"""

from __future__ import annotations

import argparse
import collections
import logging
import os
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch

__all__ = ["main"]

logger = logging.getLogger(__name__)


def _names(values: Sequence[str] | None) -> list[str] | None:
    """Space- or comma-separated names as one list."""
    return [name for value in values for name in value.split(",") if name] if values else None


def _dtype(name: str) -> torch.dtype:
    dtype = getattr(torch, name.removeprefix("torch."), None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"{name!r} is not a torch dtype (e.g. float32, bfloat16, int64)")
    return dtype


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="torch-neuronx", description="Tools of the neuron PyTorch backend.")
    commands = parser.add_subparsers(dest="command", required=True)
    conformance = commands.add_parser(
        "conformance",
        help="run PyTorch's OpInfo database on neuron and compare with the CPU",
        description="Runs every OpInfo sample on neuron and on the CPU, compares them, and writes "
        "outcomes.parquet (one row per sample) and summary.md into --out.",
    )
    conformance.add_argument(
        "--ops", nargs="+", metavar="GLOB", help="OpInfo names or globs, space- or comma-separated (default: all)"
    )
    conformance.add_argument(
        "--dtypes", nargs="+", metavar="DTYPE", help="dtypes to check, e.g. float32 bfloat16 int64 (default: all)"
    )
    conformance.add_argument(
        "--budget-minutes",
        type=float,
        metavar="N",
        help="stop cleanly after N minutes; each op gets an equal share of the time left, which always "
        "covers its first sample in every dtype (default: no limit)",
    )
    conformance.add_argument(
        "--max-samples-per-op", type=int, metavar="N", help="at most N samples of each op in each dtype"
    )
    conformance.add_argument(
        "--timeout", type=float, default=120.0, metavar="S", help="seconds one sample may run (default 120)"
    )
    conformance.add_argument("--no-backward", action="store_true", help="skip the float32 gradient checks")
    conformance.add_argument(
        "--no-inplace", action="store_true", help="skip the float32 checks of the ops' in-place variants"
    )
    conformance.add_argument(
        "--no-cuda-dtypes",
        action="store_true",
        help="skip the CUDA-dtype phases (dtypes CUDA computes an op in and the CPU does not; dtypes both refuse)",
    )
    conformance.add_argument(
        "--no-argument-errors",
        action="store_true",
        help="skip the argument-errors phase (each op's first float32 sample with one argument made wrong)",
    )
    conformance.add_argument(
        "--in-process",
        action="store_true",
        help="run the samples in this process (no protection against crashes and hangs)",
    )
    conformance.add_argument("--no-progress", action="store_true", help="no progress bar")
    conformance.add_argument(
        "--out", default="reports/conformance", metavar="DIR", help="report directory (default reports/conformance)"
    )
    upstream = commands.add_parser(
        "upstream-tests",
        help="run PyTorch's own device-generic test files on neuron",
        description="Runs PyTorch's test files (test_ops.py, test_torch.py, ...) for the neuron device "
        "through PyTorch's own test base, each file in processes of its own, and writes outcomes.parquet "
        "(one row per test) and summary.md into --out. Fetches nothing: the files come from --tests-dir.",
    )
    upstream.add_argument(
        "--files",
        nargs="+",
        metavar="FILE",
        help="test files under --tests-dir (test_torch.py, dynamo/test_device.py), space- or comma-separated "
        "(default: issue 17's 15)",
    )
    upstream.add_argument("-k", dest="keyword", metavar="EXPR", help="pytest's -k expression, to select tests")
    upstream.add_argument(
        "--tests-dir",
        metavar="DIR",
        help="PyTorch's test/ folder of the installed release (default: $TORCH_NEURONX_PYTORCH_TESTS, "
        "else third_party/pytorch_tests/test)",
    )
    upstream.add_argument(
        "--budget-minutes",
        type=float,
        metavar="N",
        help="stop cleanly after N minutes; each file gets an equal share of the time left (default: no limit)",
    )
    upstream.add_argument(
        "--timeout", type=float, default=120.0, metavar="S", help="seconds one test may run (default 120)"
    )
    upstream.add_argument(
        "--sample",
        type=int,
        metavar="N",
        help="run at most N tests of each file, evenly spread over it, so a budget reaches every part of "
        "a long file (default: all)",
    )
    upstream.add_argument("--no-progress", action="store_true", help="no progress bar")
    upstream.add_argument(
        "--publish", metavar="DOC", help="also write the summary as DOC's upstream section (docs/coverage.md)"
    )
    upstream.add_argument(
        "--out", default="reports/upstream", metavar="DIR", help="report directory (default reports/upstream)"
    )
    models = commands.add_parser(
        "sweep-models",
        help="run every transformers architecture, reduced, on neuron and compare with the CPU",
        description="Builds each model type of transformers' auto mappings in a reduced configuration with "
        "random weights, runs it on the CPU and on neuron (eager forward and backward, compiled forward), and "
        "writes outcomes.parquet, summary.md and models_pass_rates.png into --out.",
    )
    models.add_argument(
        "--models", nargs="+", metavar="GLOB", help="model types or globs, space- or comma-separated (default: all)"
    )
    models.add_argument(
        "--budget-minutes", type=float, metavar="N", help="start no architecture after N minutes (default: no limit)"
    )
    models.add_argument(
        "--timeout", type=float, default=300.0, metavar="S", help="seconds one architecture may run (default 300)"
    )
    models.add_argument("--no-compile", action="store_true", help="skip the torch.compile stage")
    models.add_argument(
        "--resume", action="store_true", help="keep the architectures already in the journal, run the others"
    )
    models.add_argument(
        "--journal",
        metavar="FILE",
        help="the journal of finished architectures, kept across runs (default --out's outcomes.jsonl)",
    )
    models.add_argument(
        "--in-process", action="store_true", help="run in this process (no protection against crashes and hangs)"
    )
    models.add_argument("--no-progress", action="store_true", help="no progress bar")
    models.add_argument(
        "--out", default="reports/models", metavar="DIR", help="report directory (default reports/models)"
    )
    profile = commands.add_parser("profile", help="read profiles written by torch_neuronx.profiling.NeuronProfiler")
    profile_commands = profile.add_subparsers(dest="profile_command", required=True)
    summarize = profile_commands.add_parser(
        "summarize",
        help="the top ops and executables by device time, compile time, transfers and fallbacks",
        description="Reads every profile's Parquet tables in DIR and prints where the time went.",
    )
    summarize.add_argument("directory", metavar="DIR", help="a NeuronConfig's profile_output_dir")
    summarize.add_argument("--top", type=int, default=10, metavar="N", help="rows per ranking (default 10)")
    summarize.add_argument("--plot", metavar="FILE.png", help="also draw where the time goes into FILE.png")
    return parser


def _check_arguments(args: argparse.Namespace) -> None:
    """Rejects values that would run nothing or everything by accident.

    Raises:
        ValueError: a non-positive count or time, an empty name list, or an output path that is
            not a writable directory.
    """
    for option, value in (
        ("--max-samples-per-op", getattr(args, "max_samples_per_op", None)),
        ("--budget-minutes", args.budget_minutes),
        ("--timeout", args.timeout),
        ("--sample", getattr(args, "sample", None)),
    ):
        if value is not None and value <= 0:
            raise ValueError(f"{option} must be positive, got {value}")
    names = (("--ops", getattr(args, "ops", None)), ("--dtypes", getattr(args, "dtypes", None)))
    for option, value in (*names, ("--files", getattr(args, "files", None))):
        if value is not None and not _names(value):
            raise ValueError(f"{option} needs at least one name")
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"--out {args.out!r} cannot be created as a directory: {err.strerror}") from err
    if not os.access(out, os.W_OK):
        raise ValueError(f"--out {args.out!r} is not writable")


def _conformance(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from torch_neuronx.testing import run_conformance, write_report

    _check_arguments(args)
    dtypes = [_dtype(name) for name in _names(args.dtypes)] if args.dtypes else None
    start = time.monotonic()
    rows = run_conformance(
        _names(args.ops),
        dtypes,
        max_samples_per_op=args.max_samples_per_op,
        budget_seconds=args.budget_minutes * 60 if args.budget_minutes else None,
        backward=not args.no_backward,
        in_place=not args.no_inplace,
        cuda_only=not args.no_cuda_dtypes,
        wrong_arguments=not args.no_argument_errors,
        timeout=args.timeout,
        isolate=not args.in_process,
        progress=not args.no_progress,
    )
    command = shlex.join(["torch-neuronx", *argv])
    table, summary = write_report(rows, args.out, command=command, seconds=time.monotonic() - start)
    counts = collections.Counter(row.outcome for row in rows if row.sample_index >= 0)
    logger.info("%s", ", ".join(f"{counts[k]} {k}" for k in ("pass", "mismatch", "error", "fallback", "skipped")))
    logger.info("wrote %s and %s", table, summary)
    return 0


def _upstream(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from torch_neuronx.testing import upstream

    _check_arguments(args)
    tests_dir = upstream.find_tests_dir(args.tests_dir)
    start = time.monotonic()
    collected: dict[str, tuple[int, int]] = {}
    left_out: dict[str, dict[str, int]] = {}
    command = shlex.join(["torch-neuronx", *argv])

    def report(rows, stops, not_run=()):
        return upstream.write_report(
            rows,
            stops,
            args.out,
            command=command,
            seconds=time.monotonic() - start,
            source=upstream.describe(tests_dir),
            collected=collected,
            left_out=left_out,
            not_run=not_run,
        )

    rows, stops = upstream.run_upstream(
        _names(args.files),
        keyword=args.keyword,
        tests_dir=tests_dir,
        budget_seconds=args.budget_minutes * 60 if args.budget_minutes else None,
        timeout=args.timeout,
        sample=args.sample,
        progress=not args.no_progress,
        collected=collected,
        left_out=left_out,
        after_file=report,  # a run cut short leaves the report of the files it finished
    )
    table, summary = report(rows, stops)
    if args.publish:
        upstream.publish(args.publish, section=summary.read_text(encoding="utf-8"))
    counts = collections.Counter(row.outcome for row in rows)
    logger.info("%s", ", ".join(f"{n} {outcome}" for outcome, n in counts.most_common()))
    logger.info("wrote %s and %s", table, summary)
    return 0


def _sweep_models(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from torch_neuronx.testing.model_sweep import run_model_sweep, targets, write_model_report

    for option, value in (("--budget-minutes", args.budget_minutes), ("--timeout", args.timeout)):
        if value is not None and value <= 0:
            raise ValueError(f"{option} must be positive, got {value}")
    if args.models is not None and not _names(args.models):
        raise ValueError("--models needs at least one name")
    start = time.monotonic()
    rows = run_model_sweep(
        _names(args.models),
        args.out,
        budget_seconds=args.budget_minutes * 60 if args.budget_minutes else None,
        timeout=args.timeout,
        compiled=not args.no_compile,
        resume=args.resume,
        isolate=not args.in_process,
        progress=not args.no_progress,
        journal=args.journal,
    )
    command = shlex.join(["torch-neuronx", *argv])
    paths = write_model_report(rows, args.out, command=command, seconds=time.monotonic() - start)
    goal = targets(rows)
    logger.info(
        "%d architectures run on the CPU: %d pass eager, %d pass compiled, %d with wrong values",
        goal["architectures_on_cpu"],
        goal["eager_pass"],
        goal["compiled_pass"],
        len(goal["wrong_values"]),
    )
    logger.info("wrote %s", ", ".join(str(path) for path in paths))
    return 0


def _profile(args: argparse.Namespace) -> int:
    from torch_neuronx.profiling import summary

    if args.top < 1:
        raise ValueError(f"--top must be positive, got {args.top}")
    sys.stdout.write(summary.summarize(args.directory, top=args.top))
    if args.plot:
        logger.info("wrote %s", summary.plot(args.directory, args.plot, top=args.top))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line ``argv`` (default: ``sys.argv[1:]``) and returns its exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        if args.command == "profile":
            return _profile(args)
        if args.command == "upstream-tests":
            return _upstream(args, argv)
        if args.command == "sweep-models":
            return _sweep_models(args, argv)
        return _conformance(args, argv)
    except (ValueError, FileNotFoundError) as err:
        logger.error("torch-neuronx %s: %s", args.command, err)
        return 2


if __name__ == "__main__":
    sys.exit(main())
