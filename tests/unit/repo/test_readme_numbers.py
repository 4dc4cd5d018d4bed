"""The README quotes published files only.

What counts as a number that needs a source: outside fenced code blocks and inline code, every standalone
decimal (``46.0``; not part of a name or version such as ``Qwen2.5`` or ``0.11.7``, not glued to a unit such as
``1.5B``), every percentage (``44%``) and every count of the form ``N of M`` (``27 of 50``). Each must occur in a
published results file: ``results/tables/*.md`` (built by ``python -m scripts.make_tables``) or
``results/bench/**/*.md``. The README's table sections must be exactly the files they name, so a retyped or
stale table fails here.
"""

from __future__ import annotations

import json
import re

import pytest

from eval.metrics import format_ci
from scripts.make_tables import README_SECTION, update_readme
from tests.conftest import REPO

README = REPO / "README.md"
NUMBER = re.compile(r"(?<![\w.])(\d+ of \d+|\d+(?:\.\d+)?%|\d+\.\d+)(?![\w%]|\.\d)")


def readme_prose(text: str) -> str:
    """The README without fenced code blocks and inline code spans (commands, paths and config values)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.DOTALL | re.MULTILINE)
    return re.sub(r"`[^`\n]*`", "", text)


def quoted_numbers(text: str) -> list[str]:
    return NUMBER.findall(readme_prose(text))


def result_sources() -> str:
    files = sorted((REPO / "results" / "tables").glob("*.md")) + sorted((REPO / "results" / "bench").rglob("*.md"))
    return "\n".join(f.read_text(encoding="utf-8") for f in files)


def test_the_number_pattern_means_what_the_docstring_says():
    found = quoted_numbers("detects 44% with 19.5% false alarms, 46.0 [32.0, 60.0], misses (28 of 50), "
                           "Qwen2.5-Coder 1.5B, Letta 0.11.7, 12 runs, `46.7` in code")
    assert found == ["44%", "19.5%", "46.0", "32.0", "60.0", "28 of 50"]


def test_every_readme_number_has_a_source_in_results():
    sources = result_sources()
    numbers = quoted_numbers(README.read_text(encoding="utf-8"))
    assert numbers, "the README quotes no result at all: its generated tables are missing"
    unsourced = sorted({n for n in numbers if not re.search(rf"(?<![\w.]){re.escape(n)}(?![\w%]|\.\d)", sources)})
    assert not unsourced, f"README numbers with no source under results/tables or results/bench: {unsourced}"


def test_readme_tables_are_the_published_tables_verbatim():
    text = README.read_text(encoding="utf-8")
    sections = {m["name"]: m["body"] for m in README_SECTION.finditer(text)}
    assert {"locomo_headline", "conflict_headline", "decomposition"} <= set(sections)
    for name, body in sections.items():
        published = (REPO / "results" / "tables" / f"{name}.md").read_text(encoding="utf-8")
        assert body.rstrip() == published.rstrip(), f"README section table:{name} differs from results/tables/{name}.md: run python -m scripts.make_tables"


def test_readme_quotes_the_published_hypertension_run_not_the_one_before_the_leak_cleanup():
    run = REPO / "results" / "published" / "runs" / "conflict" / "mosaic" / "none" / "3af3acd83e91" / "metrics.json"
    metrics = json.loads(run.read_text(encoding="utf-8"))
    text = README.read_text(encoding="utf-8")
    misses = sum(sum(by_reason.values()) for by_reason in metrics["misses"].values())
    for cell in (format_ci(metrics["detection_rate"]), format_ci(metrics["false_alarm_rate"]), f"{misses} of {metrics['n_conflicting']}"):
        assert cell in text
    before = REPO / "results" / "repeats" / "conflict-mosaic-hypertension-before-leak-cleanup"
    old = json.loads(next(before.rglob("metrics.json")).read_text(encoding="utf-8"))
    assert format_ci(old["detection_rate"]) not in text


def test_readme_is_a_front_door():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 150


PYTHON_COMMAND = re.compile(r"python3? (?!-[mc]\s)(?!run\.py\b)(\S+)")


def test_python_commands_have_one_form():
    """The README and docs/ name every Python command as ``python -m <package>.<name>`` (run.py, the Hydra
    entry point, as ``python run.py``); results_history.md keeps the commands of removed scripts as they were run."""
    assert PYTHON_COMMAND.findall("python -m scripts.make_tables; python run.py x; python scripts/make_tables.py") == ["scripts/make_tables.py"]
    docs = [README, *sorted((REPO / "docs").glob("*.md"))]
    other = {str(path.relative_to(REPO)): found for path in docs if path.name != "results_history.md"
             if (found := PYTHON_COMMAND.findall(path.read_text(encoding="utf-8")))}
    assert other == {}, f"commands not in the python -m form: {other}"


def test_make_tables_rewrites_readme_sections_from_the_tables_folder(tmp_path):
    tables = tmp_path / "tables"
    tables.mkdir()
    (tables / "t.md").write_text("| a |\n|---|\n| 1.5 |\n")
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- table:t -->\nstale 9.9\n<!-- /table -->\nend\n")
    assert update_readme(readme, tables) == ["t"]
    assert readme.read_text() == "intro\n<!-- table:t -->\n| a |\n|---|\n| 1.5 |\n<!-- /table -->\nend\n"
    readme.write_text("<!-- table:missing -->\n<!-- /table -->\n")
    with pytest.raises(SystemExit, match="table:missing"):
        update_readme(readme, tables)
