"""Evaluation data stays out of development: no 6-word run of an eval suite's text in the code.

An evaluation suite (``"split": "eval"`` under data/conflicts/) may be read by the benchmark at
run time and by nothing else: its contexts, probes and description must not appear in mosaic/,
eval/, baselines/, scripts/, research/, conf/, core/, tests/, docs/ or the README (prompts, docstrings,
fixtures, unit tables, prose). LoCoMo's evaluation conversation (conv-49 of data/locomo10.json: its turns,
image captions, questions and answers) is guarded the same way, read here from the data file.
The same holds for HaluMem's evaluation user (data/halumem-pilot/halumem_medium_user3.jsonl):
its persona, dialogues, memory points, questions and answers are read here, inside the test, and never
printed; the test is skipped only where the file was not fetched (python -m scripts.download_data).
Text is compared as lowercase alphanumeric words, so a copy that changes case, punctuation,
quoting or line breaks is still caught. Failures name file:line only, never the text.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from eval.benchmarks.conflict.suite import load_suite
from tests.conftest import REPO

SUITES = REPO / "data" / "conflicts"
SCANNED = ("mosaic", "eval", "baselines", "scripts", "research", "conf", "core", "tests", "docs", "README.md")
HALUMEM_EVAL = "halumem_medium_user3.jsonl"
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
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        for path in files:
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


# ----------------------------------------------------------------------------- HaluMem's evaluation user
def halumem_eval_path() -> Path | None:
    """The evaluation user's file: data/halumem-pilot/ (python -m scripts.download_data), else the mirror's copy."""
    mirror = Path(os.environ.get("LOCOMO_MIRROR") or "/work/shared/data")
    found = [p for p in (REPO / "data" / "halumem-pilot" / HALUMEM_EVAL, mirror / "halumem-pilot" / HALUMEM_EVAL) if p.is_file()]
    return found[0] if found else None


def halumem_texts(path: Path) -> list[str]:
    """Every piece of text a HaluMem file holds for its users: persona, dialogue, memory points (and the ones
    they replace), questions, answers and evidence."""
    texts: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        user = json.loads(line)
        texts.append(user["persona_info"])
        for session in user["sessions"]:
            texts += [turn["content"] for turn in session["dialogue"]]
            for point in session["memory_points"]:
                texts += [point["memory_content"], *point.get("original_memories", [])]
            for question in session.get("questions") or []:
                texts += [question["question"], question["answer"], *(e["memory_content"] for e in question["evidence"])]
    return texts


def _halumem_forbidden() -> set[tuple[str, ...]]:
    path = halumem_eval_path()
    if path is None:
        pytest.skip(f"{HALUMEM_EVAL} not fetched (python -m scripts.download_data --mirror DIR)")
    return {run for text in halumem_texts(path) for run in runs(words(text))}


def test_no_halumem_evaluation_user_text_in_code_config_or_tests():
    forbidden = _halumem_forbidden()
    assert len(forbidden) > 1000  # the file was read: thousands of distinct 6-word runs
    found = leaks([REPO / d for d in SCANNED], forbidden, REPO)
    assert not found, f"{len(found)} place(s) hold a {RUN}-word run of HaluMem's evaluation user: " + ", ".join(found)


def test_checker_catches_a_pasted_halumem_evaluation_memory_point(tmp_path):
    """The longest memory point of the evaluation user, pasted (lower case) into a fake tree built here, is flagged.
    The text is never printed: only its length and the places found are compared."""
    forbidden = _halumem_forbidden()
    path = halumem_eval_path()
    assert path is not None
    points = [p["memory_content"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
              for s in json.loads(line)["sessions"] for p in s["memory_points"]]  # fmt: skip
    longest = max(points, key=lambda t: len(words(t)))
    n_words = len(words(longest))
    assert n_words >= RUN
    module = tmp_path / "eval" / "prompts.py"
    module.parent.mkdir()
    module.write_text('"""Prompts."""\n\nEXAMPLE = (\n    ' + repr(longest.lower()) + "\n)\n", encoding="utf-8")
    assert leaks([tmp_path / "eval"], forbidden, tmp_path) == ["eval/prompts.py:4"]


# ----------------------------------------------------------------------------- LoCoMo's evaluation conversation
LOCOMO_EVAL = "conv-49"


def locomo_eval_texts() -> list[str]:
    """Every text of LoCoMo's evaluation conversation, read from the local data file (never written down here):
    turns, image captions, questions, answers and trap answers. Skipped where the file was not fetched."""
    mirror = Path(os.environ.get("LOCOMO_MIRROR") or "/work/shared/data")
    found = [p for p in (REPO / "data" / "locomo10.json", mirror / "locomo10.json") if p.is_file()]
    if not found:
        pytest.skip("data/locomo10.json not fetched (python -m scripts.download_data)")
    sample = next(s for s in json.loads(found[0].read_text(encoding="utf-8")) if s["sample_id"] == LOCOMO_EVAL)
    texts = [str(turn.get(field) or "") for key, turns in sample["conversation"].items()
             if key.startswith("session_") and isinstance(turns, list) for turn in turns for field in ("text", "blip_caption")]  # fmt: skip
    texts += [str(qa.get(field) or "") for qa in sample["qa"] for field in ("question", "answer", "adversarial_answer")]
    return texts


def test_no_locomo_evaluation_conversation_text_in_code_config_tests_or_docs():
    forbidden = {run for text in locomo_eval_texts() for run in runs(words(text))}
    assert len(forbidden) > 1000  # the conversation was read: thousands of distinct 6-word runs
    found = leaks([REPO / d for d in SCANNED], forbidden, REPO)
    assert not found, f"{len(found)} place(s) hold a {RUN}-word run of LoCoMo's {LOCOMO_EVAL}: " + ", ".join(found)


def test_checker_catches_a_pasted_locomo_evaluation_question_in_the_docs(tmp_path):
    """The longest question of the evaluation conversation, pasted into a fake docs page built here, is flagged."""
    texts = locomo_eval_texts()
    forbidden = {run for text in texts for run in runs(words(text))}
    longest = max(texts, key=lambda t: len(words(t)))
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.md").write_text("# Notes\n\nAn example we liked:\n> " + longest.upper() + "\n", encoding="utf-8")
    (tmp_path / "README.md").write_text("Nothing from the data.\n", encoding="utf-8")
    assert leaks([tmp_path / "docs", tmp_path / "README.md"], forbidden, tmp_path) == ["docs/notes.md:4"]


def test_the_scan_covers_the_docs_and_the_readme():
    assert {"docs", "README.md"} <= set(SCANNED) and all((REPO / d).exists() for d in SCANNED)


# ----------------------------------------------------------------------------- content fingerprints of the research guards
def test_the_research_guard_fingerprints_are_those_of_the_fetched_evaluation_user(tmp_path):
    """research.halumem_link_calibration and research.halumem_revision_probe refuse the evaluation user by content:
    the fingerprint they hold is recomputed here from the fetched file, and a renamed, re-serialised copy of it is
    refused by both, as the original is."""
    from research.halumem_link_calibration import EVAL_USER_FINGERPRINTS, evaluation_user_refusal, user_fingerprint
    from research.halumem_link_calibration import main as calibrate
    from research.halumem_revision_probe import main as probe

    path = halumem_eval_path()
    if path is None:
        pytest.skip(f"{HALUMEM_EVAL} not fetched (python -m scripts.download_data --mirror DIR)")
    users = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert {user_fingerprint(user) for user in users} == set(EVAL_USER_FINGERPRINTS.values())
    renamed = tmp_path / "dev_user_copy.jsonl"
    renamed.write_text("".join(json.dumps({**user, "persona_info": ""}, indent=None, separators=(", ", ": ")) + "\n" for user in users), encoding="utf-8")
    assert renamed.read_bytes() != path.read_bytes()
    assert "by content fingerprint" in (evaluation_user_refusal(renamed) or "")
    assert calibrate(["--file", str(renamed)]) == 2
    assert probe(["--file", str(renamed)]) == 2
    assert evaluation_user_refusal(REPO / "tests" / "fixtures" / "halumem" / "halumem_tiny.jsonl") is None
