"""Evaluation data stays out of development: no 6-word run of an eval suite's text in the code.

An evaluation suite (``"split": "eval"`` under data/conflicts/) may be read by the benchmark at
run time and by nothing else: its contexts, probes and description must not appear in mosaic/,
eval/, baselines/, scripts/, conf/ or tests/ (prompts, docstrings, fixtures, unit tables).
Text is compared as lowercase alphanumeric words, so a copy that changes case, punctuation,
quoting or line breaks is still caught. Failures name file:line only, never the text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from eval.benchmarks.conflict_suite import load_suite

REPO = Path(__file__).resolve().parents[2]
SUITES = REPO / "data" / "conflicts"
SCANNED = ("mosaic", "eval", "baselines", "scripts", "conf", "tests")
RUN = 6  # words
_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def runs(tokens: list[str], size: int = RUN) -> Iterator[tuple[str, ...]]:
    return (tuple(tokens[i : i + size]) for i in range(len(tokens) - size + 1))


def suite_texts(path: Path) -> list[str]:
    """Every piece of text a suite holds: description, context turns and probes."""
    data = json.loads(path.read_text(encoding="utf-8"))
    texts = [data["description"]]
    texts += [turn["text"] for turns in data["contexts"].values() for turn in turns]
    texts += [case["probe"]["text"] for case in data["cases"]]
    return texts


def eval_suite_paths() -> list[Path]:
    return [p for p in sorted(SUITES.glob("*.json")) if load_suite(p).split == "eval"]


def forbidden_runs(paths: Iterable[Path]) -> set[tuple[str, ...]]:
    return {run for path in paths for text in suite_texts(path) for run in runs(words(text))}


def leaks(roots: Iterable[Path], forbidden: set[tuple[str, ...]], relative_to: Path) -> list[str]:
    """``file:line`` of every place a forbidden run starts, over every readable text file under ``roots``."""
    found = []
    for root in roots:
        for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            try:
                text = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue  # binary
            tokens, lines = [], []
            for line_no, line in enumerate(text.splitlines(), 1):
                line_words = words(line)
                tokens += line_words
                lines += [line_no] * len(line_words)
            hits = sorted({lines[i] for i, run in enumerate(runs(tokens)) if run in forbidden})
            found += [f"{path.relative_to(relative_to)}:{line}" for line in hits]
    return found


def test_there_is_an_evaluation_suite_to_guard():
    assert eval_suite_paths(), "no suite under data/conflicts has split 'eval'; the leak test would guard nothing"


def test_no_eval_suite_text_in_code_config_or_tests():
    forbidden = forbidden_runs(eval_suite_paths())
    found = leaks([REPO / d for d in SCANNED], forbidden, REPO)
    assert not found, f"{len(found)} place(s) hold a {RUN}-word run of an evaluation suite's text: " + ", ".join(found)


def test_checker_catches_a_pasted_probe_in_any_case_and_punctuation(tmp_path):
    """A probe of the eval suite pasted into a fake tree (built here from the suite file) is flagged."""
    suite = load_suite(eval_suite_paths()[0])
    probe = max((c.probe_text for c in suite.cases), key=lambda t: len(words(t)))
    assert len(words(probe)) >= RUN
    pasted = "_".join(words(probe)).upper()  # as an identifier, case and punctuation changed
    module = tmp_path / "mosaic" / "rules.py"
    module.parent.mkdir()
    module.write_text(f'"""Rules."""\n\nEXAMPLES = [\n    "{probe}",\n]\n{pasted} = 1\n', encoding="utf-8")
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "clean.yaml").write_text("threshold: 0.5  # nothing from any suite\n", encoding="utf-8")
    forbidden = forbidden_runs(eval_suite_paths())
    assert leaks([tmp_path / "mosaic", tmp_path / "conf"], forbidden, tmp_path) == ["mosaic/rules.py:4", "mosaic/rules.py:6"]


def test_checker_leaves_dev_suite_text_alone(tmp_path):
    dev = load_suite(SUITES / "household_finance.json")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "fixture.py").write_text("\n".join(repr(c.probe_text) for c in dev.cases), encoding="utf-8")
    assert leaks([tmp_path / "tests"], forbidden_runs(eval_suite_paths()), tmp_path) == []
