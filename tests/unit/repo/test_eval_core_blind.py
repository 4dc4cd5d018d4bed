"""eval/'s shared modules (eval/*.py: runner, record, tables, publishing, config checks, ...) name no benchmark and
no system: what differs between them is asked of their classes through core.api's optional Protocols, so adding a
benchmark or a system touches no shared module. Benchmark packages (eval/benchmarks/**) name themselves freely.

The project's own name (``mosaic-bench``: its logger, W&B project, thread names) is not a system's name."""

from __future__ import annotations

import re

from tests.conftest import REPO

NAMES = re.compile(r"locomo|halumem|memgpt|mosaic|mem0|amem|a-mem|zep|\brag\b|conflict", re.IGNORECASE)
PROJECT_NAME = re.compile(r"mosaic[-_]bench", re.IGNORECASE)


def named(text: str) -> list[str]:
    """Each ``line: name`` of ``text`` that names a benchmark or a system."""
    return [f"{number}: {m.group()!r}" for number, line in enumerate(text.splitlines(), 1)
            for m in NAMES.finditer(PROJECT_NAME.sub("", line))]  # fmt: skip


def test_the_check_finds_a_name_and_passes_the_project_name():
    assert named("from eval.benchmarks.locomo import X\nlog = 'mosaic_bench'\n# a rag row\n") == ["1: 'locomo'", "3: 'rag'"]
    assert named("storage = 'fragment'\nlogging.getLogger('mosaic-bench')") == []


def test_shared_eval_modules_name_no_benchmark_or_system():
    modules = sorted((REPO / "eval").glob("*.py"))
    assert len(modules) > 10  # the shared modules are where this test looks
    found = {m.name: named(m.read_text(encoding="utf-8")) for m in modules}
    assert {name: lines for name, lines in found.items() if lines} == {}

