"""PyTorch's own device-generic test files on neuron: ``torch-neuronx upstream-tests``.

PyTorch's test files (``test_ops.py``, ``test_torch.py``, ...) instantiate their device-generic test
classes for every available device type through ``torch.testing._internal.common_device_type``;
for a PrivateUse1 backend that is ``PrivateUse1TestBase``, selected here with
``PYTORCH_TESTING_DEVICE_ONLY_FOR=privateuse1`` so that only the neuron variants run. Each file runs
under pytest in a process of its own (:mod:`torch_neuronx.testing.upstream_plugin` records every
test as it finishes): a test that crashes the interpreter or runs past the per-test timeout is
recorded as ``crashed`` or ``timeout`` and the file carries on in a fresh process from the next
test. Nothing is fetched: the files come from a directory holding PyTorch's ``test/`` folder of the
installed release (``--tests-dir``; see ``third_party/pytorch_tests/README.md``).

Outcomes, as the vendor reports them: ``passed``, ``failed`` (``error``, ``timeout`` and ``crashed``
are failures too), ``skipped-pytorch`` (PyTorch's own eligibility checks: ``onlyCUDA``, dtype lists,
``skipIf``), ``skipped-ours`` (:data:`torch_neuronx.testing.tables.UPSTREAM_SKIPS`, the FP64 policy),
``xfailed``/``xpassed`` (PyTorch's own ``expectedFailure``).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from torch_neuronx.testing.upstream_plugin import OURS

__all__ = [
    "DEFAULT_FILES",
    "TestOutcome",
    "describe",
    "find_tests_dir",
    "publish",
    "run_upstream",
    "summary",
    "write_report",
]

#: The device-generic files run by default (issue 17's list), in the order they run.
DEFAULT_FILES: tuple[str, ...] = (
    "test_view_ops.py",
    "test_indexing.py",
    "test_type_promotion.py",
    "test_shape_ops.py",
    "test_sort_and_select.py",
    "test_tensor_creation_ops.py",
    "test_reductions.py",
    "test_binary_ufuncs.py",
    "test_unary_ufuncs.py",
    "test_foreach.py",
    "test_linalg.py",
    "test_autograd.py",
    "test_nn.py",
    "test_torch.py",
    "test_ops.py",
)

#: Outcomes that count as failures.
FAILURES = ("failed", "error", "timeout", "crashed")

#: Seconds a file's process may take to import and collect before its first test starts.
_COLLECT_TIMEOUT = 600.0

#: How often the parent looks at a running file's record.
_POLL_SECONDS = 0.5

_DEVICE_SUFFIX = re.compile(r"_(neuron|privateuse1)(?:_(.*))?$")


@dataclasses.dataclass
class TestOutcome:
    """One test of one of PyTorch's files on neuron."""

    file: str
    cls: str
    test: str
    device: str
    dtype: str
    outcome: str
    reason: str = ""
    duration: float = 0.0


def find_tests_dir(tests_dir: str | os.PathLike[str] | None) -> Path:
    """The directory of PyTorch's test files: ``tests_dir``, else ``TORCH_NEURONX_PYTORCH_TESTS``,
    else ``third_party/pytorch_tests/test`` of this checkout.

    Raises:
        FileNotFoundError: the directory does not exist (the message says how to provide it).
    """
    chosen = tests_dir or os.environ.get("TORCH_NEURONX_PYTORCH_TESTS")
    path = Path(chosen) if chosen else Path(__file__).resolve().parents[2] / "third_party" / "pytorch_tests" / "test"
    if not path.is_dir():
        raise FileNotFoundError(
            f"PyTorch's test files are not at {path}: put the test/ folder of PyTorch {torch.__version__} "
            "(git tag v" + torch.__version__.split("+")[0] + ") there, or pass --tests-dir "
            "(see third_party/pytorch_tests/README.md); the command fetches nothing"
        )
    return path


def describe(tests_dir: str | os.PathLike[str]) -> str:
    """Where the test files came from: the first line of ``SOURCE`` beside the ``test/`` folder
    (release, commit), else the folder's path."""
    source = Path(tests_dir).parent / "SOURCE"
    if source.is_file():
        return source.read_text(encoding="utf-8").strip().splitlines()[0]
    return f"`{tests_dir}`"


def _split(nodeid: str) -> tuple[str, str, str, str, str]:
    """(file, class, test, device, dtype) of a pytest node id of an instantiated test."""
    parts = nodeid.split("::")
    file, cls, test = Path(parts[0]).name, parts[1] if len(parts) > 2 else "", parts[-1]
    match = _DEVICE_SUFFIX.search(test.split("[")[0])
    device = "neuron" if match else ""
    dtype = (match.group(2) or "") if match else ""
    return file, cls, test, device, dtype


def _classify(outcome: str, reason: str) -> str:
    if outcome == "skipped":
        return "skipped-ours" if reason.startswith(OURS) else "skipped-pytorch"
    return outcome


class _FileRun:
    """One file's pytest processes, restarted after a crash or a timeout."""

    def __init__(
        self,
        path: Path,
        keyword: str | None,
        timeout: float,
        work: Path,
        sample: int | None = None,
        name: str | None = None,
    ) -> None:
        self.path, self.keyword, self.timeout, self.sample = path, keyword, timeout, sample
        #: The file as the command names it: its path under the tests directory (``dynamo/test_x.py``).
        self.name = name or path.name
        stem = self.name.removesuffix(".py").replace("/", "__")
        self.record = work / f"{stem}.jsonl"
        self.done = work / f"{stem}.done"
        self.log = work / f"{stem}.log"
        self.outcomes: dict[str, tuple[str, str, float]] = {}
        #: (tests collected, tests selected by the sample) as the first process reported them.
        self.collected: tuple[int, int] | None = None
        #: Dtype variants PyTorch's test base did not instantiate, by missing dtype (NeuronTestBase).
        self.left_out: dict[str, int] = {}

    def _command(self) -> list[str]:
        # --noconftest: PyTorch's test/conftest.py serves its CI (sharding, step-current resumes,
        # JUnit XML, importing files as __main__), which this run does in its own way, and its hook
        # signatures follow the pytest of its release, so a newer pytest refuses to load it.
        # -p no:logging: pytest's log capture formats every record it sees, and LoggingTensor's records
        # (torch.testing._internal.logging_tensor) do not format once an earlier test has lowered a
        # logger's level: test_autograd's 60 LoggingTensor tests then failed on any device, the CPU too.
        command = [sys.executable, "-m", "pytest", str(self.path), "-q", "-p", "no:cacheprovider", "--noconftest"]
        command += ["-p", "no:logging", "-p", "torch_neuronx.testing.upstream_plugin"]
        command += ["--rootdir", str(self.path.parent)]
        return command + (["-k", self.keyword] if self.keyword else [])

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            PYTORCH_TESTING_DEVICE_ONLY_FOR="privateuse1",
            TORCH_NEURONX_UPSTREAM_RECORD=str(self.record),
            TORCH_NEURONX_UPSTREAM_DONE=str(self.done),
            TORCH_NEURONX_UPSTREAM_SAMPLE=str(self.sample or ""),
            PYTHONPATH=os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH")])),
        )
        return env

    def _read(self) -> tuple[str | None, float]:
        """Reads new lines of the record; returns the test running now (None between tests) and
        when it started."""
        running, started = None, 0.0
        if not self.record.exists():
            return None, 0.0
        with open(self.record, encoding="utf-8") as lines:
            for line in lines:
                if not line.endswith("\n"):
                    break
                entry = json.loads(line)
                if entry["event"] == "collected":
                    self.collected = self.collected or (entry["collected"], entry["selected"])
                    self.left_out = self.left_out or entry.get("left_out", {})
                elif entry["event"] == "start":
                    running, started = entry["nodeid"], entry["time"]
                else:
                    self.outcomes[entry["nodeid"]] = (entry["outcome"], entry["reason"], entry["duration"])
                    if entry["nodeid"] == running:
                        running = None
        return running, started

    def run(self, deadline: float) -> str:
        """Runs the file's tests until they are done or ``deadline`` (time.monotonic) passes;
        returns why it stopped: ``done``, ``budget`` or ``collection`` (the file did not import)."""
        while True:
            self.done.write_text("".join(f"{nodeid}\n" for nodeid in self.outcomes))
            self.record.unlink(missing_ok=True)
            with open(self.log, "a", encoding="utf-8") as log:
                process = subprocess.Popen(
                    self._command(),
                    env=self._environment(),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=self.path.parent,
                    start_new_session=True,
                )
            begun = time.monotonic()
            stop = None
            while process.poll() is None:
                time.sleep(_POLL_SECONDS)
                running, started = self._read()
                now = time.monotonic()
                if now > deadline:
                    stop = "budget"
                elif running is not None and time.time() - started > self.timeout:
                    self.outcomes[running] = (
                        "timeout",
                        f"ran past the per-test timeout of {self.timeout:.0f} s",
                        self.timeout,
                    )
                    stop = "timeout"
                elif running is None and not self.outcomes and now - begun > _COLLECT_TIMEOUT:
                    stop = "collection"
                if stop:
                    os.killpg(process.pid, 9)
                    process.wait()
                    break
            running, started = self._read()
            if stop == "budget":
                return "budget"
            if stop == "collection":
                return "collection"
            if stop == "timeout":
                continue
            if running is not None and running not in self.outcomes:
                self.outcomes[running] = (
                    "crashed",
                    f"the test process ended with exit status {process.returncode} during this test",
                    time.time() - started,
                )
                continue
            if process.returncode in (0, 1, 5) or self.outcomes:
                return "done"
            return "collection"

    def rows(self) -> list[TestOutcome]:
        rows = []
        for nodeid, (outcome, reason, duration) in self.outcomes.items():
            _, cls, test, device, dtype = _split(nodeid)
            rows.append(TestOutcome(self.name, cls, test, device, dtype, _classify(outcome, reason), reason, duration))
        return rows

    def collection_error(self) -> str:
        text = self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""
        errors = [line for line in text.splitlines() if line.startswith("E ") or "Error" in line]
        return " ".join((errors[-1] if errors else text[-300:]).split())[:400]


def run_upstream(
    files: Sequence[str] | None = None,
    *,
    keyword: str | None = None,
    tests_dir: str | os.PathLike[str] | None = None,
    budget_seconds: float | None = None,
    timeout: float = 120.0,
    sample: int | None = None,
    progress: bool = True,
    collected: dict[str, tuple[int, int]] | None = None,
    left_out: dict[str, dict[str, int]] | None = None,
    after_file: Callable[[list[TestOutcome], dict[str, str], list[str]], None] | None = None,
) -> tuple[list[TestOutcome], dict[str, str]]:
    """Runs PyTorch's test ``files`` (paths under ``tests_dir``, such as ``test_torch.py`` or
    ``dynamo/test_device.py``; default :data:`DEFAULT_FILES`) on neuron, each in processes of its
    own, and returns one :class:`TestOutcome` per test run and, per file (by that path), why it
    stopped (``done``, ``budget``, or the error that kept it from importing).

    ``keyword`` is pytest's ``-k`` expression. The budget is shared out: each file gets an equal
    share of the time left when it starts. ``timeout`` is seconds per test. ``sample`` keeps at most
    that many of each file's tests (after ``keyword``), evenly spread over the file, so that a budget
    reaches every part of a long file rather than its first tests only; ``collected``, when given, is
    filled with each file's (tests collected, tests selected), and ``left_out`` with each file's
    count of dtype variants not instantiated, by dtype (neuron does not hold them:
    :data:`torch_neuronx._compat.upstream_tests.MISSING_DTYPES`). ``after_file``, when given, is
    called after each file with the outcomes and stops so far and the files not run yet, so that a
    long run that is cut short leaves its report (the command line writes it each time).

    Raises:
        FileNotFoundError: ``tests_dir`` or one of ``files`` does not exist.
    """
    root = find_tests_dir(tests_dir).resolve()
    names = [Path(name).as_posix() for name in files or DEFAULT_FILES]
    paths = [root / name for name in names]
    missing = [str(path) for path in paths if not path.is_file()]
    if missing:
        raise FileNotFoundError(f"no such test file: {', '.join(missing)}")
    start = time.monotonic()
    rows: list[TestOutcome] = []
    stops: dict[str, str] = {}
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(paths), unit="file")
    with tempfile.TemporaryDirectory(prefix="upstream-tests-") as work:
        for index, (name, path) in enumerate(zip(names, paths, strict=True)):
            if budget_seconds is None:
                deadline = float("inf")
            else:
                left = budget_seconds - (time.monotonic() - start)
                deadline = time.monotonic() + max(left, 0.0) / (len(paths) - index)
            run = _FileRun(path, keyword, timeout, Path(work), sample, name)
            stop = run.run(deadline)
            if collected is not None and run.collected is not None:
                collected[name] = run.collected
            if left_out is not None and run.left_out:
                left_out[name] = run.left_out
            stops[name] = run.collection_error() if stop == "collection" else stop
            rows += run.rows()
            if after_file is not None:
                after_file(rows, stops, names[index + 1 :])
            if bar is not None:
                bar.set_postfix_str(f"{name}: {len(run.outcomes)} tests")
                bar.update()
    if bar is not None:
        bar.close()
    return rows, stops


def write_parquet(rows: Sequence[TestOutcome], path: str | os.PathLike[str]) -> None:
    """Writes one row per test (the fields of :class:`TestOutcome`, ``cls`` as ``class``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema(
        [(name, pa.string()) for name in ("file", "class", "test", "device", "dtype", "outcome", "reason")]
        + [("duration", pa.float64())]
    )
    records = [{**dataclasses.asdict(row), "class": row.cls} for row in rows]
    for record in records:
        del record["cls"]
    pq.write_table(pa.Table.from_pylist(records, schema=schema), path)


_COLUMNS = ("passed", "failed", "skipped-pytorch", "skipped-ours", "xfailed", "xpassed")


def _tally(rows: Sequence[TestOutcome]) -> collections.Counter[str]:
    """Tests per outcome, errors, timeouts and crashes counted as failed."""
    return collections.Counter("failed" if row.outcome in FAILURES else row.outcome for row in rows)


def _cells(counts: collections.Counter) -> list[object]:
    """A table row's cells from tests per outcome (whole tests, or an estimate rounded to them)."""
    tests = sum(counts.values())
    ran = counts["passed"] + counts["failed"]
    rate = f"{100 * counts['passed'] / ran:.1f}%" if ran else "-"
    ours = f"{100 * counts['skipped-ours'] / tests:.1f}%" if tests else "-"
    return [round(tests), *(round(counts[name]) for name in _COLUMNS), rate, ours]


def _counts(rows: Sequence[TestOutcome]) -> list[object]:
    return _cells(_tally(rows))


def _collection_estimate(by_file: dict[str, list[TestOutcome]], collected: dict[str, tuple[int, int]]) -> list[object]:
    """The whole collection's outcomes estimated from a ``--sample`` run: each file's sampled counts
    scaled by its collected / selected tests (a stratified sample's estimator: an equal-size sample
    per file otherwise weighs a file of 72 tests as much as one of 27,195). Rounded to whole tests."""
    estimate: collections.Counter[str] = collections.Counter()
    for name, rows in by_file.items():
        total, selected = collected.get(name, (len(rows), len(rows)))
        weight = total / selected if selected else 0.0
        for outcome, n in _tally(rows).items():
            estimate[outcome] += n * weight
    return _cells(estimate)


def _cell(text: str, width: int = 200) -> str:
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= width else text[: width - 3] + "..."


def _kind(reason: str) -> str:
    """A failure's reason with numbers, names in quotes and addresses folded, to group alike ones."""
    first = reason.strip().splitlines()[0] if reason.strip() else "(no message)"
    first = re.sub(r"0x[0-9a-f]+", "0x…", first)
    return re.sub(r"\d+(\.\d+)?(e-?\d+)?", "N", first)[:160]


def summary(
    rows: Sequence[TestOutcome],
    stops: dict[str, str],
    *,
    command: str,
    seconds: float,
    source: str,
    collected: dict[str, tuple[int, int]] | None = None,
    left_out: dict[str, dict[str, int]] | None = None,
    not_run: Sequence[str] = (),
) -> str:
    """The markdown summary: the vendor's breakdown overall and per file (with each file's tests
    collected and, under ``--sample``, selected, from ``collected``), the dtype variants not
    instantiated (``left_out``, as :func:`run_upstream` fills it), our skips by reason, the failures
    grouped by kind, and the files that did not import, ran out of budget or were not run yet
    (``not_run``: a report written while the run goes on)."""
    import jax

    collected = collected or {}
    left_out = left_out or {}
    header = ["file", "collected (selected)", "tests", *_COLUMNS, "pass rate (of passed + failed)", "skipped by us"]
    lines = [
        "## PyTorch's own test files on neuron",
        "",
        "PyTorch's device-generic test files, instantiated for the PrivateUse1 device (`neuron`) by PyTorch's "
        "own test base (`common_device_type`, `PYTORCH_TESTING_DEVICE_ONLY_FOR=privateuse1`), each file under "
        "pytest in processes of its own. OpInfos claim for neuron their CUDA dtypes joined with their CPU ones "
        "(`upstream_tests.claim_cuda_dtypes`: neuron computes what either computes), where PyTorch hands a "
        "PrivateUse1 device the CPU's. Regenerate with:",
        "",
        "```console",
        f"$ {command}",
        "```",
        "",
        f"Run {time.strftime('%Y-%m-%d', time.gmtime())}: torch {torch.__version__}, jax {jax.__version__}, "
        f"Python {platform.python_version()}; test files: "
        f"{source}; {seconds / 60:.1f} minutes. Outcomes: passed; failed (errors, per-test timeouts and "
        "crashes included); skipped-pytorch (PyTorch's own eligibility checks: `onlyCUDA`, dtype lists, "
        "`skipIf`); skipped-ours (`torch_neuronx/testing/tables.py`, `UPSTREAM_SKIPS` and the FP64 policy, "
        "each with its reason); xfailed/xpassed (PyTorch's own `expectedFailure`). Every test is a row of "
        "`outcomes.parquet` next to the generated `summary.md`. Under `--sample` every file gives the "
        'same number of tests, so the row "all" weighs small files as much as large ones; the row below '
        "it scales each file's counts by its collected / selected tests, the estimate for running every "
        "collected test.",
        "",
    ]
    by_file: dict[str, list[TestOutcome]] = collections.defaultdict(list)
    for row in rows:
        by_file[row.file].append(row)

    def chosen(name: str) -> str:
        if name not in collected:
            return "-"
        total, selected = collected[name]
        return str(total) if selected == total else f"{total} ({selected})"

    table = [[name, chosen(name), *_counts(by_file.get(name, []))] for name in stops]
    totals = [sum(collected[name][index] for name in collected) for index in (0, 1)]
    table.append(["all", f"{totals[0]} ({totals[1]})" if totals[0] != totals[1] else str(totals[0]), *_counts(rows)])
    if totals[0] != totals[1]:
        estimate = _collection_estimate(by_file, collected)
        table.append(["all, estimated for the whole collection", str(totals[0]), *estimate])
    lines += ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    lines += ["| " + " | ".join(str(value) for value in line) + " |" for line in table]
    unfinished = {name: why for name, why in stops.items() if why != "done"}
    unfinished |= dict.fromkeys(not_run, "not run yet: the run was still going when this report was written")
    if unfinished:
        lines += ["", "Files not run to the end:", ""]
        lines += [
            f"- `{name}`: " + ("the time budget ran out" if why == "budget" else _cell(why, 400))
            for name, why in unfinished.items()
        ]
    lines += _left_out_lines(left_out, collected)
    ours = collections.Counter(
        row.reason.removeprefix(OURS).split(":")[0] for row in rows if row.outcome == "skipped-ours"
    )
    lines += ["", "### Skipped by us, by reason", "", "| reason | tests |", "|---|---:|"]
    lines += [f"| {_cell(reason)} | {n} |" for reason, n in ours.most_common()]
    failures = [row for row in rows if row.outcome in FAILURES]
    kinds: dict[str, list[TestOutcome]] = collections.defaultdict(list)
    for row in failures:
        kinds[_kind(row.reason)].append(row)
    lines += ["", f"### Failures by kind ({len(failures)} tests, {len(kinds)} kinds)", ""]
    lines += ["| kind | tests | files | first test |", "|---|---:|---|---|"]
    for kind, found in sorted(kinds.items(), key=lambda item: -len(item[1])):
        files = ", ".join(sorted({row.file.removesuffix(".py") for row in found}))
        lines.append(f"| {_cell(kind)} | {len(found)} | {files} | `{found[0].cls}.{found[0].test}` |")
    return "\n".join(lines) + "\n"


def _left_out_lines(left_out: dict[str, dict[str, int]], collected: dict[str, tuple[int, int]]) -> list[str]:
    """The summary's table of dtype variants that PyTorch's test base did not instantiate."""
    from torch_neuronx._compat.upstream_tests import MISSING_DTYPES

    if not left_out:
        return []
    names = [str(dtype).removeprefix("torch.") for dtype in MISSING_DTYPES]
    reasons = "; ".join(f"{name}: {why}" for name, why in zip(names, MISSING_DTYPES.values(), strict=True))
    lines = [
        "",
        "### Dtype variants not instantiated",
        "",
        "Neuron's test base (`torch_neuronx/_compat/upstream_tests.py`, `NeuronTestBase`: PyTorch's "
        "`PrivateUse1TestBase` declaring the dtypes neuron does not hold) instantiates no variant of these "
        "dtypes, as PyTorch's test base instantiates none for a dtype that a device's dtype lists leave out "
        f"(MPS's lists leave out float64). Why: {reasons}. They are not outcomes, so they are neither in the "
        "table above nor in its skip shares; counted over each file's whole collection, before `--sample`.",
        "",
        "| file | " + " | ".join(names) + " | not instantiated | share of the file's variants |",
        "|---|" + "---:|" * (len(names) + 2),
    ]
    for name, counts in left_out.items():
        total = sum(counts.values())
        variants = total + collected.get(name, (0, 0))[0]
        cells = [str(counts.get(dtype, 0)) for dtype in names]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {total} | {100 * total / variants:.1f}% |")
    return lines


def write_report(
    rows: Sequence[TestOutcome],
    stops: dict[str, str],
    out: str | os.PathLike[str],
    *,
    command: str,
    seconds: float,
    source: str,
    collected: dict[str, tuple[int, int]] | None = None,
    left_out: dict[str, dict[str, int]] | None = None,
    not_run: Sequence[str] = (),
) -> tuple[Path, Path]:
    """Writes ``outcomes.parquet`` and ``summary.md`` (see :func:`summary`) into ``out``; returns
    their paths."""
    directory = Path(out)
    directory.mkdir(parents=True, exist_ok=True)
    table, text = directory / "outcomes.parquet", directory / "summary.md"
    write_parquet(rows, table)
    text.write_text(
        summary(
            rows,
            stops,
            command=command,
            seconds=seconds,
            source=source,
            collected=collected,
            left_out=left_out,
            not_run=not_run,
        ),
        encoding="utf-8",
    )
    return table, text


#: The markers around the upstream section of docs/coverage.md.
BEGIN, END = "<!-- upstream-tests: begin -->", "<!-- upstream-tests: end -->"


def _split_section(text: str) -> tuple[str, str]:
    """(``text`` without its upstream section, the section with its markers; "" when it has none)."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        return text, ""
    return text[:start].rstrip("\n") + "\n" + text[end + len(END) :].lstrip("\n"), text[start : end + len(END)]


#: A hand-written part of docs/coverage.md outside the upstream section (the Dynamo tests'), which a
#: new conformance summary keeps: :func:`publish` moves it after the summary.
HAND_WRITTEN = re.compile(r"<!-- hand-written: begin -->.*?<!-- hand-written: end -->", re.DOTALL)


def publish(doc: str | os.PathLike[str], *, section: str | None = None, rest: str | None = None) -> None:
    """Writes ``doc`` (docs/coverage.md) with ``section`` (a :func:`summary`) as its upstream section
    and ``rest`` (the conformance summary) as everything else but the hand-written parts
    (:data:`HAND_WRITTEN`) of the old rest; either one left as ``doc`` has it when None."""
    path = Path(doc)
    old_rest, old_section = _split_section(path.read_text(encoding="utf-8") if path.exists() else "")
    if rest is not None:
        rest = "\n\n".join([rest.rstrip("\n"), *HAND_WRITTEN.findall(old_rest)])
    body = (old_rest if rest is None else rest).rstrip("\n")
    block = old_section if section is None else f"{BEGIN}\n{section.rstrip()}\n{END}"
    path.write_text(body + ("\n\n" + block if block else "") + "\n", encoding="utf-8")
