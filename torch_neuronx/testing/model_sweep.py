"""The model sweep: every transformers architecture (:mod:`.models`) within a time budget, each in a
worker process that a crash or a hang cannot take down, resumable, with its report.

Each architecture's rows are appended to the journal (``outcomes.jsonl`` in the report directory, or
the file given as ``journal``; ``make sweep-models`` keeps it in git as ``docs/models/outcomes.jsonl``)
as soon as it ends, so a sweep stopped by its budget, Ctrl-C or a crash resumes (``resume=True``)
where it stopped, in a later session too. The journal holds one result per architecture: a sweep
keeps the rows of architectures it does not select, and replaces those of the ones it runs again.
:func:`write_model_report` writes ``outcomes.parquet``, ``summary.md`` and ``models_pass_rates.png``
from the rows.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import logging
import math
import platform
import re
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from torch_neuronx.testing.models import ATOL, STAGES, TASKS, Architecture, ModelOutcome, architectures, check_model
from torch_neuronx.testing.report import _cell, _table
from torch_neuronx.testing.worker import Worker

__all__ = ["run_model_sweep", "summary", "targets", "write_model_report"]

logger = logging.getLogger(__name__)

#: The journal of finished architectures in a report directory (one JSON row per line).
JOURNAL = "outcomes.jsonl"

#: Outcomes of a stage that ran.
_RAN = ("pass", "mismatch", "error")


def _events(task: tuple[Architecture, bool]) -> Iterator[ModelOutcome]:
    """The worker's function: the rows of one architecture (see :class:`~.worker.Worker`)."""
    architecture, compiled = task
    yield from check_model(architecture, compiled)


def _failed_rows(architecture: Architecture, done: list[ModelOutcome], failure: str) -> list[ModelOutcome]:
    """Rows for the stages a crashed or timed-out worker did not report: the first is the error."""
    reported = {row.stage for row in done}
    rows = []
    for stage in STAGES:
        if stage in reported:
            continue
        first = not rows
        rows.append(
            ModelOutcome(
                architecture.model_type,
                architecture.task,
                architecture.model_class,
                stage,
                "error" if first else "skipped",
                failure if first else f"the worker stopped in stage {rows[0].stage}",
                "WorkerFailure" if first else "",
            )
        )
    return rows


def _not_run(architecture: Architecture, detail: str) -> list[ModelOutcome]:
    return [
        ModelOutcome(architecture.model_type, architecture.task, architecture.model_class, stage, "skipped", detail)
        for stage in STAGES
    ]


_DEFAULTS = {field.name: field.default for field in dataclasses.fields(ModelOutcome)} | {"fallback_ops": []}


def _journal_line(row: ModelOutcome) -> str:
    """One row as a JSON line, fields at their default left out and seconds to 10 ms (the journal is
    kept in git: about 150 bytes a row)."""
    values = {key: value for key, value in dataclasses.asdict(row).items() if value != _DEFAULTS.get(key, ...)}
    if "seconds" in values:
        values["seconds"] = round(values["seconds"], 2)
    return json.dumps(values) + "\n"


def _read_journal(path: Path) -> list[ModelOutcome]:
    if not path.exists():
        return []
    return [ModelOutcome(**json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


def _write_journal(path: Path, rows: Sequence[ModelOutcome]) -> None:
    """Rewrites the journal with ``rows`` through a temporary file, so a crash leaves the old one whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text("".join(_journal_line(row) for row in rows))
    temporary.replace(path)


def run_model_sweep(
    patterns: Sequence[str] | None = None,
    out_dir: str | Path = "reports/models",
    *,
    budget_seconds: float | None = None,
    timeout: float = 300.0,
    compiled: bool = True,
    resume: bool = False,
    isolate: bool = True,
    progress: bool = True,
    journal: str | Path | None = None,
) -> list[ModelOutcome]:
    """Runs every architecture (those matching the glob ``patterns``) and returns one
    :class:`~.models.ModelOutcome` per architecture and stage: those of the journal (architectures
    not selected included), the new ones, and ``skipped`` rows for the selected ones not run.

    Args:
        out_dir: the report directory (created if missing), home of the journal by default.
        budget_seconds: no architecture starts after this many seconds; the rest are ``skipped``.
        timeout: seconds one architecture may run before its worker is killed (with ``isolate``).
        compiled: also run the ``compiled_forward`` stage.
        resume: keep the selected architectures already in the journal and run only the others;
            without it every selected architecture runs again and its rows are replaced. The rows
            of architectures not selected are kept either way.
        isolate: run in a worker process that a crash or a hang cannot take down.
        progress: show a progress bar on stderr.
        journal: the journal file (default ``out_dir/outcomes.jsonl``).

    Raises:
        ValueError: a pattern matches no model type.
    """
    from tqdm import tqdm

    selected = architectures(patterns)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    journal = Path(journal) if journal is not None else out / JOURNAL
    names = {architecture.model_type for architecture in selected}
    rows = [
        row
        for row in _read_journal(journal)
        if (resume or row.model_type not in names) and not row.detail.startswith("not run:")
    ]
    finished = {row.model_type for row in rows}
    _write_journal(journal, rows)
    worker = Worker(f"{__name__}._events", timeout) if isolate else None
    deadline = time.monotonic() + budget_seconds if budget_seconds else math.inf
    counts: collections.Counter[str] = collections.Counter()
    try:
        with tqdm(selected, unit="model", disable=not progress, dynamic_ncols=True) as bar:
            for architecture in bar:
                if architecture.model_type in finished:
                    continue
                if time.monotonic() >= deadline:
                    rows += _not_run(architecture, "not run: the time budget was spent")
                    continue
                bar.set_description(architecture.model_type[:20].ljust(20))
                done: list[ModelOutcome] = []
                try:
                    if worker is None:
                        done.extend(_events((architecture, compiled)))
                    else:
                        failure = worker.run((architecture, compiled), done.append)
                        if failure is not None:
                            done += _failed_rows(architecture, done, failure)
                except KeyboardInterrupt:
                    logger.warning("interrupted at %s: the rest are reported as not run", architecture.model_type)
                    if worker is not None:
                        worker.close()
                    deadline = -math.inf
                    rows += _not_run(architecture, "not run: the sweep was interrupted")
                    continue
                with journal.open("a") as log:
                    log.writelines(_journal_line(row) for row in done)
                rows += done
                counts.update(row.outcome for row in done if row.stage != "cpu")
                bar.set_postfix({k: counts[k] for k in _RAN}, refresh=False)
    finally:
        if worker is not None:
            worker.close()
    return rows


def _by_model(rows: Sequence[ModelOutcome]) -> dict[str, dict[str, ModelOutcome]]:
    found: dict[str, dict[str, ModelOutcome]] = collections.defaultdict(dict)
    for row in rows:
        found[row.model_type][row.stage] = row
    return found


def _runs_on_cpu(stages: dict[str, ModelOutcome]) -> bool:
    return stages.get("cpu") is not None and stages["cpu"].outcome == "pass"


def targets(rows: Sequence[ModelOutcome]) -> dict[str, Any]:
    """The issue's targets over the architectures that run on the CPU: how many there are, the
    share passing eager forward and backward (values matching the CPU), the share passing compiled,
    and the architectures with a wrong value (``mismatch`` in any stage)."""
    models = {name: stages for name, stages in _by_model(rows).items() if _runs_on_cpu(stages)}
    eager = [n for n, s in models.items() if all(s[k].outcome == "pass" for k in ("eager_forward", "eager_backward"))]
    compiled = [n for n, s in models.items() if s.get("compiled_forward") and s["compiled_forward"].outcome == "pass"]
    wrong = sorted(n for n, s in models.items() if any(row.outcome == "mismatch" for row in s.values()))
    total = len(models)
    return {
        "architectures_on_cpu": total,
        "eager_pass": len(eager),
        "eager_pass_rate": len(eager) / total if total else math.nan,
        "compiled_pass": len(compiled),
        "compiled_pass_rate": len(compiled) / total if total else math.nan,
        "wrong_values": wrong,
    }


def _kind(row: ModelOutcome) -> str:
    """A failure's kind: the exception and its message without numbers, shapes and names in quotes."""
    message = re.sub(r"\[[\w.]+:\d+\]$", "", row.detail)
    message = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", message)
    message = re.sub(r"\d+", "N", message)
    return f"{row.exception or row.outcome}: {message[:120]}".strip()


def _against_cpu_compiled(on_cpu: dict[str, dict[str, ModelOutcome]]) -> list[str]:
    """The paragraph naming the compiled stages judged against the CPU's own ``torch.compile``."""
    names = sorted(
        name
        for name, stages in on_cpu.items()
        if "compiled_forward" in stages and "CPU's torch.compile" in stages["compiled_forward"].detail
    )
    if not names:
        return []
    return [
        f'{len(names)} compiled stages pass against the CPU\'s own `torch.compile(backend="aot_eager")` rather '
        f"than its eager run: the model computes another function when compiled ({', '.join(names)}).",
        "",
    ]


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def summary(rows: Sequence[ModelOutcome], *, command: str, seconds: float) -> str:
    """The markdown summary: targets, pass rates per stage and per task, failure kinds, every failure
    with its reason, the ops that fell back, and the architectures that do not run on the CPU."""
    import torch
    import transformers

    models = _by_model(rows)
    on_cpu = {name: stages for name, stages in models.items() if _runs_on_cpu(stages)}
    not_run = {n for n, s in models.items() if all(r.detail.startswith("not run:") for r in s.values())}
    goal = targets(rows)
    lines = [
        "# transformers architectures on neuron",
        "",
        "Every model type in transformers' auto mappings, each with its first task among "
        + ", ".join(f"`{task}`" for task, _ in TASKS)
        + ", in a reduced configuration (2 layers, width 32, 4 heads, vocabulary 256; "
        "`torch_neuronx/testing/models.py`) with seeded random weights: built on the CPU, copied to neuron, "
        'forward and backward in eager mode and forward under `torch.compile(backend="neuron")`, '
        f"values against the CPU (float32, atol = rtol = {ATOL:g}, or no less accurate than the CPU against "
        "a float64 run). Regenerate with:",
        "",
        "```console",
        f"$ {command}",
        "```",
        "",
        f"{time.strftime('%Y-%m-%d', time.gmtime())}: torch {torch.__version__}, transformers "
        f"{transformers.__version__}, Python {platform.python_version()}; the sweep took {seconds / 60:.1f} "
        f"minutes. {len(models)} architectures, {len(not_run)} not run (time budget); every outcome is in "
        "`outcomes.parquet`.",
        "",
        "How to run it: `torch-neuronx sweep-models` (all architectures), `--models llama 'qwen*'` (globs), "
        "`--budget-minutes N` (no architecture starts after N minutes; the rest are listed as not run), "
        "`--resume` (keep the architectures already in the journal and run the rest), `--journal FILE` (the "
        "journal, one result per architecture: a run keeps the rows of those it does not select and replaces "
        "those it runs again; default `outcomes.jsonl` in `--out`), "
        "`--no-compile`, `--timeout S` (seconds per architecture before its worker process is killed); "
        "`make sweep-models` resumes from the journal kept in git, `docs/models/outcomes.jsonl`, and "
        "regenerates this page. From Python: "
        "`torch_neuronx.testing.model_sweep.run_model_sweep`.",
        "",
        "![Pass rates per stage and per task](models_pass_rates.png)",
        "",
        "## Targets (architectures that run on the CPU)",
        "",
        *_table(
            ["", "run on the CPU", "eager forward+backward pass", "compiled forward pass", "wrong values"],
            [
                ["target", "", ">= 98%", ">= 95%", "0"],
                [
                    "this sweep",
                    goal["architectures_on_cpu"],
                    f"{goal['eager_pass']} ({_percent(goal['eager_pass'], goal['architectures_on_cpu'])})",
                    f"{goal['compiled_pass']} ({_percent(goal['compiled_pass'], goal['architectures_on_cpu'])})",
                    f"{len(goal['wrong_values'])}"
                    + (f" ({', '.join(goal['wrong_values'])})" if goal["wrong_values"] else ""),
                ],
            ],
        ),
        "",
        *_against_cpu_compiled(on_cpu),
        "## By stage",
        "",
        "Over the architectures that run on the CPU; `skipped` is a stage an earlier failure left unrun.",
        "",
    ]
    stage_lines = []
    for stage in STAGES[1:]:
        found = collections.Counter(s[stage].outcome for s in on_cpu.values() if stage in s)
        stage_lines.append([stage, *(found[k] for k in (*_RAN, "skipped")), _percent(found["pass"], len(on_cpu))])
    lines += _table(["stage", *_RAN, "skipped", "pass rate"], stage_lines)
    lines += ["", "## By task", ""]
    task_lines = []
    for task, _ in TASKS:
        group = {n: s for n, s in models.items() if next(iter(s.values())).task == task and n not in not_run}
        if not group:
            continue
        runs = {n: s for n, s in group.items() if _runs_on_cpu(s)}
        eager = sum(all(s[k].outcome == "pass" for k in ("eager_forward", "eager_backward")) for s in runs.values())
        compiled = sum(s["compiled_forward"].outcome == "pass" for s in runs.values())
        task_lines.append([task, len(group), len(runs), _percent(eager, len(runs)), _percent(compiled, len(runs))])
    lines += _table(["task", "architectures", "run on the CPU", "eager pass", "compiled pass"], task_lines)
    failures = [r for s in on_cpu.values() for r in s.values() if r.stage != "cpu" and r.outcome in _RAN[1:]]
    kinds = collections.defaultdict(list)
    for row in failures:
        kinds[(row.stage, _kind(row))].append(row.model_type)
    lines += ["", f"## Failure kinds ({len(kinds)})", "", "Failures grouped by stage and message (numbers as N)."]
    lines += [""] + _table(
        ["stage", "kind", "architectures", "examples"],
        [
            [stage, _cell(kind), len(names), ", ".join(sorted(names)[:6])]
            for (stage, kind), names in sorted(kinds.items(), key=lambda item: (-len(item[1]), item[0]))
        ],
    )
    lines += ["", f"## Every failure ({len(failures)})", ""]
    lines += _table(
        ["architecture", "task", "stage", "outcome", "reason"],
        [
            [r.model_type, r.task, r.stage, r.outcome, _cell(f"{r.exception}: {r.detail}" if r.exception else r.detail)]
            for r in sorted(failures, key=lambda r: (r.model_type, STAGES.index(r.stage)))
        ],
    )
    fallback: dict[str, set[str]] = collections.defaultdict(set)
    for name, stages in on_cpu.items():
        for op in stages.get("eager_forward", stages["cpu"]).fallback_ops:
            fallback[op].add(name)
    lines += ["", f"## Ops that fell back to the CPU in eager mode ({len(fallback)})", ""]
    lines += _table(
        ["ATen op", "architectures", "examples"],
        [[op, len(names), ", ".join(sorted(names)[:8])] for op, names in sorted(fallback.items())],
    )
    off_cpu = sorted((n, s["cpu"]) for n, s in models.items() if "cpu" in s and s["cpu"].outcome == "error")
    lines += ["", f"## Architectures that do not run on the CPU ({len(off_cpu)})", ""]
    lines += ["Left out of the targets: the reduced config, the model or its CPU run fails.", ""]
    lines += _table(
        ["architecture", "task", "reason"],
        [[name, row.task, _cell(f"{row.exception}: {row.detail}")] for name, row in off_cpu],
    )
    return "\n".join(lines) + "\n"


def _write_parquet(rows: Sequence[ModelOutcome], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema(
        [
            ("model_type", pa.string()),
            ("task", pa.string()),
            ("model_class", pa.string()),
            ("stage", pa.string()),
            ("outcome", pa.string()),
            ("detail", pa.string()),
            ("exception", pa.string()),
            ("max_abs_error", pa.float64()),
            ("seconds", pa.float64()),
            ("fallback_ops", pa.list_(pa.string())),
        ]
    )
    pq.write_table(pa.Table.from_pylist([dataclasses.asdict(row) for row in rows], schema=schema), path)


def _plot(rows: Sequence[ModelOutcome], path: Path) -> None:
    """Pass rates per stage (left) and per task and stage (right), over the architectures that run
    on the CPU."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    on_cpu = {n: s for n, s in _by_model(rows).items() if _runs_on_cpu(s)}
    stages = STAGES[1:]
    tasks = [task for task, _ in TASKS if any(next(iter(s.values())).task == task for s in on_cpu.values())]
    figure, (left, right) = plt.subplots(1, 2, figsize=(13, 4.5), gridspec_kw={"width_ratios": [1, 2.4]})
    rates = [100 * sum(s[k].outcome == "pass" for s in on_cpu.values()) / max(len(on_cpu), 1) for k in stages]
    left.bar(stages, rates, color="tab:green")
    left.set_ylim(0, 100)
    left.set_ylabel("pass rate (%)")
    left.set_title(f"by stage ({len(on_cpu)} architectures that run on the CPU)")
    left.tick_params(axis="x", rotation=30)
    width = 0.8 / len(stages)
    for index, stage in enumerate(stages):
        values = []
        for task in tasks:
            group = [s for s in on_cpu.values() if next(iter(s.values())).task == task]
            values.append(100 * sum(s[stage].outcome == "pass" for s in group) / max(len(group), 1))
        right.bar([t + index * width for t in range(len(tasks))], values, width, label=stage)
    right.set_xticks([t + 0.4 - width / 2 for t in range(len(tasks))], tasks, rotation=30, ha="right")
    right.set_ylim(0, 100)
    right.set_title("by task")
    right.legend(fontsize="small", loc="lower left")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write_model_report(
    rows: Sequence[ModelOutcome], out_dir: str | Path, *, command: str, seconds: float
) -> tuple[Path, Path, Path]:
    """Writes ``outcomes.parquet``, ``summary.md`` and ``models_pass_rates.png`` (which the summary
    shows) into ``out_dir`` (created if missing) and returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    table, text, plot = out / "outcomes.parquet", out / "summary.md", out / "models_pass_rates.png"
    _write_parquet(rows, table)
    text.write_text(summary(rows, command=command, seconds=seconds))
    _plot(rows, plot)
    return table, text, plot
