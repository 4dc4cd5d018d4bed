"""eval/'s shared reporting modules name no benchmark and no system: what differs per benchmark is asked of the
benchmark class a run records (core.api's per-benchmark reporting Protocols) and which runs are rows is conf/report.yaml,
so a new benchmark or system needs no edit here. A name in one of these modules (code, docstring or comment) fails."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import REPO

# the shared modules of paired comparison, the decomposition and the retrieval tables
BLIND = ("eval/compare.py", "eval/decomposition.py", "eval/retrieval_table.py", "eval/retrieval_paired.py", "eval/retrieval_metrics.py",
         "eval/added_fields.py", "scripts/compare_runs.py")  # fmt: skip
# spellings that are not a config file's name
SPELLINGS = ("a-mem", "conflict")


def registered_names(root: Path) -> set[str]:
    """Every benchmark and system a run can name: the config files of conf/benchmark and conf/system."""
    return {p.stem.lower() for folder in ("benchmark", "system") for p in (root / "conf" / folder).glob("*.yaml")}


def named(text: str, names: set[str]) -> list[str]:
    """``line: name`` for each line that names one (case-insensitive; ``rag`` and ``zep`` as whole words only, other
    names also inside a word, so ``ConflictBenchmark`` or ``locomo_outcomes`` count)."""
    short = {n for n in names if len(n) <= 3}
    pattern = re.compile("|".join([*(re.escape(n) for n in sorted(names - short) + list(SPELLINGS)), *(rf"\b{re.escape(n)}\b" for n in sorted(short))]),
                         re.IGNORECASE)  # fmt: skip
    return [f"{i}: {m.group(0)}" for i, line in enumerate(text.splitlines(), 1) if (m := pattern.search(line))]


def test_the_shared_reporting_modules_name_no_benchmark_or_system():
    names = registered_names(REPO)
    assert {"locomo", "halumem", "mosaic", "rag", "mem0"} <= names  # the conf folders are read, not a list typed here
    found = {path: hits for path in BLIND if (hits := named((REPO / path).read_text(encoding="utf-8"), names))}
    assert found == {}, "ask the benchmark (core.api) or conf/report.yaml instead of naming it here"


def test_the_check_finds_a_name_in_code_a_docstring_or_a_class_path():
    names = {"locomo", "rag", "mosaic"}
    assert named('"""Pairs LoCoMo runs."""', names) == ["1: LoCoMo"]
    assert named("from eval.benchmarks.locomo.compare import locomo_outcomes", names) == ["1: locomo"]
    assert named('BASE = ("rag", "oracle_facts")', names) == ["1: rag"]
    assert named("x = 1\nkind = 'MOSAIC'", names) == ["2: MOSAIC"]
    assert named("storage, fragrant, paragraph", names) == []  # rag inside a word is not the system
    assert named("eval.benchmarks.conflict.ConflictBenchmark", names) == ["1: conflict"]
