"""HaluMem's judge banks: the files hold enough cases, no dataset text, and each bank judge asks the benchmark's judge."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from eval.benchmarks.halumem.bank import DevUserRecipes
from eval.benchmarks.halumem.judge import ACCURACY_SCHEMA, GOLD_FIELDS_SCHEMA, INTEGRITY_SCHEMA, QA_SCHEMA, UPDATE_CONTENT_SCHEMA, YES_NO_SCHEMA
from tests.fakes import FakeLLM

REPO = Path(__file__).resolve().parents[5]
JUDGES = ("halumem_integrity", "halumem_accuracy", "halumem_gold_fields", "halumem_update", "halumem_update_questions", "halumem_qa")
FIRST_SCHEMA = {"halumem_update_questions": YES_NO_SCHEMA, "halumem_integrity": INTEGRITY_SCHEMA, "halumem_accuracy": ACCURACY_SCHEMA, "halumem_gold_fields": GOLD_FIELDS_SCHEMA,
                "halumem_update": UPDATE_CONTENT_SCHEMA, "halumem_qa": QA_SCHEMA}


def _bank_cfg(name: str):
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base=None):
        return compose(f"judge_bank/{name}").judge_bank


def _cases(name: str) -> list[dict]:
    bank = REPO / str(_bank_cfg(name).bank)  # halumem_update_questions shares halumem_update's bank
    return [json.loads(line) for line in bank.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("name", JUDGES)
def test_every_label_has_forty_cases_with_unique_ids_and_a_source(name):
    cases = _cases(name)
    judge = instantiate(_bank_cfg(name), llm=FakeLLM(lambda m, s: {}))
    counts = Counter(c["label"] for c in cases)
    assert set(counts) == set(judge.labels) and min(counts.values()) >= 40, counts
    assert len({c["id"] for c in cases}) == len(cases) and all(c["source"] for c in cases)


@pytest.mark.parametrize("name", JUDGES)
def test_development_user_cases_are_stored_as_recipes_not_text(name):
    """HaluMem's data is CC BY-NC-ND: a case built from user 0 holds references, its text is read at load time."""
    for case in _cases(name):
        if case["source"].startswith("halumem user 0"):
            assert "Martin" not in json.dumps(case["inputs"]), case["id"]


def test_a_recipe_never_resolves_against_another_user(tmp_path):
    other = tmp_path / "other.jsonl"
    other.write_text((REPO / "tests" / "fixtures" / "halumem" / "halumem_tiny.jsonl").read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(ValueError, match="development user only"):
        DevUserRecipes(str(other), "2f1f897e-d67f-dbc5-6a7b-b7634a9e294f").resolve({"point": [0, 1]})


@pytest.mark.parametrize("name", JUDGES)
def test_a_bank_judge_asks_the_benchmark_judge_and_maps_a_broken_reply_to_failed(name):
    """Hand-written cases need no data file: the verdict goes through the benchmark's own prompt and schema."""
    case = next(c for c in _cases(name) if c["source"].startswith("hand-written"))
    llm = FakeLLM(lambda messages, schema: {"reason": "x"})  # no answer field: a schema-valid-looking but unusable reply
    judge = instantiate(_bank_cfg(name), llm=llm)
    assert judge.verdict(case["inputs"]) == "failed"
    assert llm.requests[0]["schema"] is FIRST_SCHEMA[name]


def test_the_committed_banks_are_what_their_builder_writes():
    """data/judge_banks/halumem_*.jsonl are eval/benchmarks/halumem/judge_bank_cases.py's output (needs the dev user's file)."""
    from eval.benchmarks.halumem.judge_bank_cases import DEV_FILE, bank_cases

    if not (REPO / DEV_FILE).is_file():
        pytest.skip(f"{DEV_FILE} not downloaded (python -m scripts.download_data)")
    built = bank_cases(str(REPO / DEV_FILE))
    for name in ("halumem_integrity", "halumem_accuracy", "halumem_gold_fields", "halumem_update", "halumem_qa"):
        assert built[name] == _cases(name), name
