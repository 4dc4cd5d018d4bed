"""Labelled banks for judges: how often each judge gives each label right, before it scores any run.

A bank is ``data/judge_banks/<judge>.jsonl``, one case a line: ``{"id", "source", "label", "inputs"}``, where
``inputs`` are the keyword arguments of the judge's verdict (development data or hand-written cases only).
A bank judge is a Hydra object (conf/judge_bank/<judge>.yaml, built with ``llm=<judge client>``) satisfying
``BankJudge``; its ``verdict`` calls the very code the benchmark scores runs with, so the bank measures that
judge and not a copy of it. scripts/judge_banks.py runs every bank and writes results/tables/judges.md.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from threading import Lock
from typing import Any, Protocol, runtime_checkable

FAILED = "failed"  # a verdict that could not be read (the judge's LLM call gave no usable output)


@runtime_checkable
class BankJudge(Protocol):
    """What the bank command needs of a judge."""

    labels: tuple[str, ...]  # every label the judge can return, in table order

    def verdict(self, inputs: dict[str, Any]) -> str:
        """One of ``labels``, or ``FAILED``."""
        ...


@dataclass(frozen=True)
class BankCase:
    id: str
    source: str
    label: str
    inputs: dict[str, Any]


class BankError(ValueError):
    """A bank file that cannot be used; the message names the file, the line and the fix."""


def load_bank(path: Path, labels: Sequence[str], min_per_label: int) -> list[BankCase]:
    """The cases of ``path``, checked: every line a case with the four keys, ids unique, every label one of the
    judge's ``labels``, and at least ``min_per_label`` cases for each of them."""
    if not path.is_file():
        raise BankError(f"{path}: bank missing (write it as data/judge_banks/<judge>.jsonl, one case a line)")
    cases: list[BankCase] = []
    seen: set[str] = set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as err:
            raise BankError(f"{path}:{number}: not valid JSON ({err.msg})") from err
        if not isinstance(raw, dict) or set(raw) != {"id", "source", "label", "inputs"}:
            raise BankError(f"{path}:{number}: a case needs exactly the keys id, source, label, inputs (got {sorted(raw) if isinstance(raw, dict) else type(raw).__name__})")
        if not isinstance(raw["inputs"], dict):
            raise BankError(f"{path}:{number}: `inputs` must be an object (the judge's verdict arguments)")
        if raw["label"] not in labels:
            raise BankError(f"{path}:{number}: label {raw['label']!r} is not one of the judge's labels {list(labels)}")
        if not str(raw["id"]) or raw["id"] in seen:
            raise BankError(f"{path}:{number}: id {raw['id']!r} is empty or repeated")
        seen.add(raw["id"])
        cases.append(BankCase(str(raw["id"]), str(raw["source"]), str(raw["label"]), raw["inputs"]))
    short = {label: n for label in labels if (n := sum(c.label == label for c in cases)) < min_per_label}
    if short:
        raise BankError(f"{path}: needs at least {min_per_label} cases per label; short: {short}")
    return cases


def sample_per_label(cases: Sequence[BankCase], labels: Sequence[str], per_label: int | None, seed: int) -> list[BankCase]:
    """At most ``per_label`` cases of each label, drawn with a fixed seed (the same cases on every rerun, so the
    response cache serves what a stopped run already asked), kept in bank order; every case when None."""
    if per_label is None:
        return list(cases)
    keep: set[str] = set()
    for label in labels:
        group = [c.id for c in cases if c.label == label]
        keep.update(random.Random(f"{seed}:{label}").sample(group, min(per_label, len(group))))
    return [c for c in cases if c.id in keep]


def in_turn(cases: Sequence[BankCase], labels: Sequence[str]) -> list[BankCase]:
    """The cases with the labels taken in turn (first of each label, then second, ...): a run stopped part-way
    has judged about as many cases of every label."""
    groups = [[c for c in cases if c.label == label] for label in labels]
    return [group[i] for i in range(max(map(len, groups), default=0)) for group in groups if i < len(group)]


def summarise(labels: Sequence[str], verdicts: Sequence[dict[str, Any]], pass_accuracy: float) -> dict[str, Any]:
    """Per-label accuracy (a failed verdict counts as wrong), the confusion matrix (rows: bank label, columns: the
    judge's labels and ``failed``) and whether every label reaches ``pass_accuracy``, from the verdicts so far."""
    columns = [*labels, FAILED]
    confusion = {label: {column: sum(v["label"] == label and v["verdict"] == column for v in verdicts) for column in columns} for label in labels}
    per_label = {}
    for label in labels:
        n = sum(confusion[label].values())
        per_label[label] = {"n": n, "correct": confusion[label][label], "accuracy": confusion[label][label] / n if n else None}
    reached = all(cell["accuracy"] is not None and cell["accuracy"] >= pass_accuracy for cell in per_label.values())
    return {
        "labels": list(labels),
        "n": len(verdicts),
        "per_label": per_label,
        "confusion": confusion,
        "failed": sum(v["verdict"] == FAILED for v in verdicts),
        "pass_accuracy": pass_accuracy,
        "every_label_reaches_pass_accuracy": reached,
        "verdicts": list(verdicts),
    }


def score_bank(judge: BankJudge, cases: Sequence[BankCase], pass_accuracy: float,
               progress: Callable[[dict[str, Any]], None] | None = None, workers: int = 1) -> dict[str, Any]:
    """Every case's verdict and ``summarise`` of them. ``progress`` gets the summary so far after each verdict (a
    stopped run keeps what it judged). ``workers`` > 1 asks that many cases at once (a llama.cpp server with as
    many slots decodes them together)."""
    verdicts: list[dict[str, Any]] = []
    lock = Lock()

    def one(case: BankCase) -> None:
        said = judge.verdict(dict(case.inputs))
        if said != FAILED and said not in judge.labels:
            raise ValueError(f"{type(judge).__name__}.verdict returned {said!r}, not one of {judge.labels} or {FAILED!r}")
        with lock:
            verdicts.append({"id": case.id, "source": case.source, "label": case.label, "verdict": said})
            if progress:
                progress(summarise(judge.labels, verdicts, pass_accuracy))

    if workers <= 1:
        for case in cases:
            one(case)
    else:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(one, cases))
    order = {case.id: n for n, case in enumerate(cases)}
    return summarise(judge.labels, sorted(verdicts, key=lambda v: order[v["id"]]), pass_accuracy)


def _companion(companion: str | None) -> str:
    return companion or "none named (conf/judge_bank/<judge>.yaml companion)"


def sample_sentence(record: dict[str, Any]) -> str:
    """Which cases were judged: the whole bank, or a fixed-seed sample per label (with the bank's size per label)."""
    sample, sizes = record.get("sample"), record.get("bank_cases_per_label")
    if not sample:
        said = "Every case of the bank"
    else:
        whole = f" of the bank's {', '.join(f'{label} {n}' for label, n in sizes.items())}" if sizes else ""
        said = f"A sample of {sample['per_label']} cases per label (seed {sample['seed']}){whole}"
    if record.get("complete", True):
        return f"{said} judged.\n"
    return (f"{said} planned; **the run stopped after {record['result']['n']} of its {record['cases_planned']} cases** "
            "(labels taken in turn; the same command resumes it from the response cache).\n")


def judge_markdown(name: str, record: dict[str, Any]) -> str:
    """One judge's section of results/tables/judges.md: bank size and accuracy per label, confusion matrix, verdict."""
    result, labels = record["result"], record["result"]["labels"]
    threshold = result["pass_accuracy"] * 100
    lines = [f"## {name}", "", f"{record['description']}", "",
             f"Bank: `{record['bank']}`; judge model `{record['judge_model_id']}`; made by `{record['command']}` "
             f"(code {record.get('code', '?')}, {record['finished_at'][:16]} UTC).", "",
             sample_sentence(record), "| label | cases judged | judged right | accuracy |", "|---|---|---|---|"]  # fmt: skip
    for label in labels:
        cell = result["per_label"][label]
        accuracy = "n/a" if cell["accuracy"] is None else f"{cell['accuracy'] * 100:.1f}%"
        lines.append(f"| {label} | {cell['n']} | {cell['correct']} | {accuracy} |")
    columns = [*labels, FAILED]
    lines += ["", "Confusion matrix (rows: the bank's label; columns: the judge's verdict):", "",
              "| bank \\ judge | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]  # fmt: skip
    for label in labels:
        lines.append(f"| {label} | " + " | ".join(str(result["confusion"][label][c]) for c in columns) + " |")
    if not record.get("complete", True):
        lines += ["", f"Not decided: the run stopped before every planned case was judged (pass accuracy {threshold:.0f}%)."]
    elif result["every_label_reaches_pass_accuracy"]:
        lines += ["", f"Every label reaches {threshold:.0f}%: this judge may score published runs."]
    else:
        short = [f"{label} {result['per_label'][label]['accuracy'] * 100:.1f}%" for label in labels
                 if (result["per_label"][label]["accuracy"] or 0.0) < result["pass_accuracy"]]  # fmt: skip
        lines += ["", f"**Not every label reaches {threshold:.0f}%** ({', '.join(short)}): by the rule of this table this "
                      "judge does not score published runs unchecked; its metric needs an LLM-free companion or a stronger judge model."]  # fmt: skip
    return "\n".join(lines) + "\n"


def judges_markdown(records: dict[str, dict[str, Any]], unmeasured: Mapping[str, str | None] | None = None) -> str:
    """results/tables/judges.md: every judge whose bank was run (results/bench/judge_banks/*.json), by name, and
    the ``unmeasured`` judges (a bank judge in conf/ with no such file: name -> its LLM-free companion or None),
    listed as not measured. A judge that does not pass names its LLM-free companion metric."""
    head = ["# Judges checked against labelled banks", "",
            "Each judge's verdicts on its bank (data/judge_banks/<judge>.jsonl: development data and hand-written cases, "
            "never evaluation data), per label. A judge scores published runs only when every label reaches the "
            "pass accuracy. Regenerated by `python -m scripts.judge_banks [judge ...]` from results/bench/judge_banks/*.json "
            "(every verdict is there).", ""]  # fmt: skip
    summary = ["| judge | labels (cases judged) | per-label accuracy | every label >= pass | LLM-free companion to read instead |",
               "|---|---|---|---|---|"]
    for name, record in sorted(records.items()):
        result = record["result"]
        sizes = ", ".join(f"{label} ({result['per_label'][label]['n']})" for label in result["labels"])
        accuracy = ", ".join(f"{label} {(result['per_label'][label]['accuracy'] or 0.0) * 100:.1f}%" for label in result["labels"])
        verdict = "yes" if result["every_label_reaches_pass_accuracy"] else "**no**"
        if not record.get("complete", True):
            verdict = f"not decided: stopped after {result['n']} of {record['cases_planned']} cases"
        companion = "-" if result["every_label_reaches_pass_accuracy"] and record.get("complete", True) else _companion(record.get("companion"))
        summary.append(f"| {name} | {sizes} | {accuracy} | {verdict} | {companion} |")
    summary += [f"| {name} | - | not measured (no results/bench/judge_banks/{name}.json) | **no** | {_companion(companion)} |"
                for name, companion in sorted((unmeasured or {}).items())]  # fmt: skip
    return "\n".join(head + summary) + "\n\n" + "\n".join(judge_markdown(name, record) for name, record in sorted(records.items()))
