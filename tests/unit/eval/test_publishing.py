"""The conversation rows: the Hydra sweep runs exactly the folders the single commands do, and a
finished (or stopped) row is published once, checked, with its lock files left behind."""

from __future__ import annotations

import json

import pytest
from hydra import compose, initialize_config_dir

from core.llm.cache import ResponseCache
from eval.runner import config_hash
from tests.conftest import REPO

CONF = str(REPO / "conf")


def _jobs(sweep: str) -> list[list[str]]:
    """The override lists of a sweep's jobs, as Hydra's basic sweeper expands ``hydra.sweeper.params``."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        params = compose("config", [f"experiment={sweep}"], return_hydra_config=True).hydra.sweeper.params
    parsed = OverridesParser.create().parse_overrides([f"{key}={value}" for key, value in params.items()])
    return [list(job) for job in BasicSweeper.split_arguments(parsed, None)[0]]


def _hash(overrides: list[str]) -> str:
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        return config_hash(compose("config", overrides), inputs={})


@pytest.mark.parametrize(("sweep", "single"), [
    ("sweep_conv26_rows", [["experiment=locomo_conv26", "system=mosaic"], ["experiment=locomo_conv26", "ablation=with_source_turns"],
                           ["experiment=locomo_conv26", "ablation=turn_matching"]]),
    ("sweep_conv49_rows", [["experiment=locomo_conv49", "system=mosaic"], ["experiment=locomo_conv49", "ablation=with_source_turns"],
                           ["experiment=locomo_conv49", "ablation=turn_matching"]]),
    ("sweep_write_cost", [["experiment=locomo", "system=mosaic"], ["experiment=locomo", "ablation=fused_conflict"]]),
    ("sweep_write_cost_conflict", [["experiment=conflict", f"conflict.suite=data/conflicts/{suite}.json", *ablation]
                                   for suite in ("household_finance", "workplace_policy") for ablation in ([], ["ablation=fused_conflict"])]),
])
def test_a_row_sweep_runs_the_folders_of_the_single_commands(sweep, single):
    """The sweeps replace the hand-written row scripts (conversation_rows, compare_write_cost): each job must be
    the same run (config hash, so the same resumable folder) as the one-row command those scripts ran."""
    swept = sorted(_hash([f"experiment={sweep}", *job]) for job in _jobs(sweep))
    assert swept == sorted(_hash(overrides) for overrides in single)


def test_ablation_none_is_the_unablated_system():
    assert _hash(["experiment=locomo", "system=mosaic", "ablation=none"]) == _hash(["experiment=locomo", "system=mosaic"])
    assert _hash(["experiment=locomo", "ablation=none"]) != _hash(["experiment=locomo", "system=mosaic"])  # leaves the system as it was


def _finished_run(root, name="h1", sha="abc", start="abc"):
    run = root / "results" / "runs" / "locomo" / "rag" / "none" / name
    run.mkdir(parents=True)
    (run / "metrics.json").write_text(json.dumps({"benchmark": "locomo", "metadata": {"git_sha": sha, "git_sha_start": start}}))
    (run / "predictions.jsonl").write_text('{"key": "q0"}\n')
    (run / ".lock").write_text("")
    return run


def test_publish_copies_a_clean_finished_run_once_and_refuses_the_rest(tmp_path, monkeypatch):
    from eval import publishing as run_rows

    monkeypatch.setattr(run_rows, "PUBLISHED_RUNS", tmp_path / "published")
    run = _finished_run(tmp_path)
    target = run_rows.publish(run)
    assert target == tmp_path / "published" / "locomo" / "rag" / "none" / "h1"
    assert sorted(p.name for p in target.iterdir()) == ["metrics.json", "predictions.jsonl"]  # no lock file
    assert run_rows.publish(run) == target  # the same run again: left as it is
    (run / "metrics.json").write_text(json.dumps({"benchmark": "locomo", "metadata": {"git_sha": "abc", "git_sha_start": "abc"}, "x": 1}))
    with pytest.raises(SystemExit, match="exists with other metrics"):
        run_rows.publish(run)
    with pytest.raises(SystemExit, match="dirty tree"):
        run_rows.publish(_finished_run(tmp_path, "h2", sha="abc-dirty", start="abc-dirty"))
    with pytest.raises(SystemExit, match="code changed during the run"):
        run_rows.publish(_finished_run(tmp_path, "h3", sha="def", start="abc"))
    (unfinished := _finished_run(tmp_path, "h4")).joinpath("metrics.json").unlink()
    with pytest.raises(SystemExit, match="no metrics.json"):
        run_rows.publish(unfinished)
    assert sorted(p.name for p in target.parent.iterdir()) == ["h1"]


def test_a_failed_export_keeps_the_previous_archive_whole(tmp_path, monkeypatch):
    import gzip
    import os

    from scripts.cache_archive import export_cache

    cache = ResponseCache(tmp_path / "cache" / "llm_cache.sqlite")
    cache.put("k1", {"text": "a"})
    archive = tmp_path / "a.jsonl.gz"
    assert export_cache(tmp_path / "cache", archive) == 1
    cache.put("k2", {"text": "b"})
    monkeypatch.setattr(os, "replace", lambda *a: (_ for _ in ()).throw(OSError("killed")))
    with pytest.raises(OSError):
        export_cache(tmp_path / "cache", archive)
    monkeypatch.undo()
    with gzip.open(archive, "rt") as lines:
        assert [json.loads(line)["key"] for line in lines] == ["k1"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl.gz", "cache"]


def test_an_unfinished_run_is_published_with_its_ingest_cost_and_replaced_by_a_later_copy(tmp_path, monkeypatch):
    from core.api import LLMUsage
    from core.turn_costs import TurnCosts
    from eval import publishing as run_rows

    monkeypatch.setattr(run_rows, "UNFINISHED_RUNS", tmp_path / "unfinished")
    run = tmp_path / "results" / "runs" / "locomo" / "zep" / "none" / "h9"
    clean = {"git_sha": "abc", "dirty": False, "diff_sha256": None}
    (run / "system").mkdir(parents=True)
    (run / "provenance.json").write_text(json.dumps({"code_at_start": clean, "invocations": [{"code": clean}]}))
    TurnCosts(run / "system").record("locomo:conv-26", "D1:1", 120.0, LLMUsage(calls=4, prompt_tokens=5000, completion_tokens=300))
    target = run_rows.publish_unfinished(run)
    cost = json.loads((target / "ingest_cost.json").read_text())
    assert target == tmp_path / "unfinished" / "locomo" / "zep" / "none" / "h9"
    assert cost["code"] == "abc" and not cost["finished"] and cost["by_turn"]["turns"] == 1 and cost["by_turn"]["calls_per_turn"] == 4
    TurnCosts(run / "system").record("locomo:conv-26", "D1:2", 100.0, LLMUsage(calls=4))
    assert json.loads((run_rows.publish_unfinished(run) / "ingest_cost.json").read_text())["by_turn"]["turns"] == 2  # replaced
    (run / "provenance.json").write_text(json.dumps({"code_at_start": clean, "invocations": [{"code": {**clean, "git_sha": "def"}}]}))
    with pytest.raises(SystemExit, match="resumed on other code"):
        run_rows.publish_unfinished(run)
    (run / "provenance.json").write_text(json.dumps({"code_at_start": {**clean, "dirty": True}, "invocations": []}))
    with pytest.raises(SystemExit, match="dirty tree"):
        run_rows.publish_unfinished(run)
    (run / "metrics.json").write_text("{}")
    with pytest.raises(SystemExit, match="is finished"):
        run_rows.publish_unfinished(run)


# ----------------------------------------------------------------------------- HaluMem: published without dataset text
def _fixture_texts() -> set[str]:
    """Every text of the tiny HaluMem fixture: persona, dialogue turns, memory points and the memories they
    update, questions, answers and evidence."""
    from tests.unit.eval.benchmarks.halumem.test_halumem import TINY

    texts: set[str] = set()
    for line in TINY.read_text().splitlines():
        user = json.loads(line)
        texts.add(user["persona_info"])
        for session in user["sessions"]:
            texts.update(turn["content"] for turn in session["dialogue"])
            for point in session["memory_points"]:
                texts.add(point["memory_content"])
                texts.update(point["original_memories"])
            for question in session["questions"]:
                texts.update((question["question"], question["answer"]))
                texts.update(e["memory_content"] for e in question["evidence"])
    return texts


def _windows(texts: set[str], width: int = 20) -> set[str]:
    return {t[i : i + width] for t in texts for i in range(len(t) - width + 1)}


def _leaking_judge(messages, schema):
    """HaluMem's verdicts, except the QA verdict of the cat question: a label out of range whose reason quotes
    the prompt, so the failure message holds dataset text (judge.py keeps 200 characters of it)."""
    from tests.unit.eval.benchmarks.halumem.test_halumem import _fixed_judge

    user = messages[-1]["content"]
    if "label" in schema["properties"] and "Lena's cat" in user:
        return {"reason": user[user.index("What is the name"):], "label": "Maybe"}
    return _fixed_judge(messages, schema)


def _halumem_run(root, system_name="conflicting", **settings):
    """A finished HaluMem run folder as run.py leaves one (rows, metrics.json with clean provenance, config.yaml,
    the system's saved state with the stored texts under system/, a W&B table of the answers under wandb/)."""
    import dataclasses

    import yaml

    from eval.benchmarks.halumem.benchmark import HaluMemBenchmark
    from tests.fakes import FakeLLM
    from tests.unit.eval.benchmarks.halumem.test_halumem import TINY, ClarifyingMemory, ConflictingMemory, EchoAnswerer, _ctx

    run = root / "results" / "runs" / "halumem" / system_name / "none" / "h1"
    system = {"conflicting": ConflictingMemory, "clarifying": ClarifyingMemory}[system_name]()
    bench = HaluMemBenchmark(path=str(TINY), bootstrap_samples=50, **settings)
    metrics = bench.run(system, _ctx(run, FakeLLM(_leaking_judge), EchoAnswerer()))
    metrics["metadata"] = {"git_sha": "abc", "git_sha_start": "abc", "benchmark": "halumem", "system": system_name,
                           "llm_model_id": "fake", "benchmark_target": "eval.benchmarks.halumem.benchmark.HaluMemBenchmark"}
    (run / "metrics.json").write_text(json.dumps(metrics, indent=2, default=str))
    config = {f.name: getattr(bench, f.name) for f in dataclasses.fields(bench) if f.init and not f.name.startswith("_")}
    (run / "config.yaml").write_text(yaml.safe_dump({"benchmark": {"_target_": "eval.benchmarks.halumem.benchmark.HaluMemBenchmark", **config}}))
    (run / "overrides.json").write_text(json.dumps(["experiment=halumem"]))
    (run / "provenance.json").write_text(json.dumps({"code_at_start": {"git_sha": "abc", "dirty": False}}))
    (run / "table.md").write_text(HaluMemBenchmark.make_table([metrics]).to_string())
    (run / "system" / system_name).mkdir(parents=True)
    (run / "system" / system_name / "state.json").write_text(json.dumps({ns: [i.text for i in items] for ns, items in system.items.items()}))
    (run / "wandb").mkdir()
    (run / "wandb" / "qa_table.json").write_text((run / "halumem_qa.jsonl").read_text())
    (run / ".lock").write_text("")
    return run, metrics


@pytest.mark.parametrize(("system_name", "settings"), [("conflicting", {"oracle_facts": True}),
                                                       ("clarifying", {"clarify": "oracle", "clarify_budget": 2, "clarify_match_threshold": 0.4})])
def test_a_halumem_run_is_published_without_dataset_text_and_scores_the_same(tmp_path, system_name, settings):
    """CC BY-NC-ND data, never committed: a published HaluMem folder holds no 20 characters of the fixture's text,
    no system/ or wandb/, says so in PUBLISHED.md, and its rows give the run's metrics back, CIs included."""
    from eval import publishing
    from eval.benchmarks.halumem.benchmark import HaluMemBenchmark
    from eval.benchmarks.halumem.public import reaggregate
    from eval.rows import read_rows

    run, metrics = _halumem_run(tmp_path, system_name, **settings)
    assert _windows(_fixture_texts()) & _windows({(run / "halumem_qa.jsonl").read_text()})  # the run folder holds them
    assert any(r["failure"] and "What is the name" in r["failure"] for r in read_rows(run / "halumem_qa.jsonl"))
    target = publishing.publish(run, tmp_path / "published")
    assert target == tmp_path / "published" / "halumem" / system_name / "none" / "h1"
    files = sorted(str(p.relative_to(target)) for p in target.rglob("*"))
    assert "system" not in files and "wandb" not in files and ".lock" not in files
    assert {"config.yaml", "overrides.json", "provenance.json", "metrics.json", "table.md", "PUBLISHED.md",
            "halumem_qa.jsonl", "halumem_updates.jsonl", "halumem_integrity.jsonl", "halumem_accuracy.jsonl"} <= set(files)
    assert (target / "metrics.json").read_bytes() == (run / "metrics.json").read_bytes()
    # (a) no 20 characters of the fixture's dialogues, memory points, questions or answers in any published file
    fixture = _windows(_fixture_texts())
    for path in target.rglob("*"):
        assert not fixture & _windows({path.read_text()}), path.name
    note = (target / "PUBLISHED.md").read_text()
    assert "CC BY-NC-ND 4.0" in note and str(run) in note and "`system/`" in note and "`wandb/`" in note
    assert "re-aggregation check" in note.lower() and ": identical." in note
    qa = read_rows(target / "halumem_qa.jsonl")
    assert {r["failure"] for r in qa} == {None, "bad label"} and not {"question", "gold", "response", "reason"} & {k for r in qa for k in r}
    updates = read_rows(target / "halumem_updates.jsonl")
    assert all(r["n_returned"] >= 1 and r["n_original_memories"] >= 1 and "returned" not in r for r in updates)
    # (b) the published rows give the run's metrics back: every section, CIs included, and the same Table 2
    again = reaggregate(target)
    for section in ("main_metric", "updating", "qa", "extraction", "by_question_type", "by_memory_type", "update_links", "counts",
                    "failures", "clarify"):
        assert json.dumps(again.get(section), sort_keys=True) == json.dumps(metrics.get(section), sort_keys=True), section
    assert again["update_links"] or system_name != "conflicting"
    assert again.get("clarify") or system_name != "clarifying"
    assert again["failures"]["rows"] == 1
    meta = {"metadata": metrics["metadata"]}
    assert HaluMemBenchmark.make_table([{**again, **meta}]).equals(HaluMemBenchmark.make_table([metrics]))
    assert publishing.publish(run, tmp_path / "published") == target  # published already: left as it is


def test_a_halumem_folder_is_refused_when_it_cannot_be_published_without_text(tmp_path):
    """A new row table (no list of public fields), a kept field that holds text, dataset text in metrics.json, and
    rows that no longer give the metrics back are refused, leaving nothing published; a new field is dropped."""
    from eval import publishing
    from eval.rows import read_rows

    run, metrics = _halumem_run(tmp_path)
    published = tmp_path / "published"
    (run / "halumem_foo.jsonl").write_text('{"key": "k", "text": "x"}\n')
    with pytest.raises(SystemExit, match="no list of publishable fields"):
        publishing.publish(run, published)
    (run / "halumem_foo.jsonl").unlink()
    rows = (run / "halumem_qa.jsonl").read_text().splitlines()
    first = json.loads(rows[0])
    long_label = {**first, "difficulty": "x" * 80}
    (run / "halumem_qa.jsonl").write_text("\n".join([json.dumps(long_label), *rows[1:]]) + "\n")
    with pytest.raises(SystemExit, match="text rather than a label"):
        publishing.publish(run, published)
    (run / "halumem_qa.jsonl").write_text("\n".join([json.dumps({**first, "explanation": "a brand new text field"}), *rows[1:]]) + "\n")
    leaky = {**metrics, "examples": [first["question"]]}
    (run / "metrics.json").write_text(json.dumps(leaky, indent=2, default=str))
    with pytest.raises(SystemExit, match="holds HaluMem text"):
        publishing.publish(run, published)
    (run / "metrics.json").write_text(json.dumps({**metrics, "qa": {**metrics["qa"], "n": 99}}, indent=2, default=str))
    with pytest.raises(SystemExit, match="do not give the run's metrics back"):
        publishing.publish(run, published)
    assert not published.exists() or not any(published.rglob("*.jsonl"))
    (run / "metrics.json").write_text(json.dumps(metrics, indent=2, default=str))
    target = publishing.publish(run, published)
    assert "explanation" not in read_rows(target / "halumem_qa.jsonl")[0]  # a field not on the list is left out
    assert [p.name for p in target.parent.iterdir()] == ["h1"]  # no staging folder left behind


def test_a_run_whose_benchmark_publishes_its_own_copy_is_recognised_by_its_metrics_its_config_or_its_path(tmp_path):
    """Publishing asks the run's benchmark class (core.api.PublishesOwnCopy), found from any record of it."""
    from eval.benchmarks.halumem import HaluMemBenchmark
    from eval.publishing import own_copy

    elsewhere = tmp_path / "runs" / "x" / "rag" / "none" / "h"
    elsewhere.mkdir(parents=True)
    assert own_copy(elsewhere, {"benchmark": "locomo"}) is None  # LoCoMo declares no copy of its own: copied whole
    assert own_copy(elsewhere, {"benchmark": "halumem"}) is HaluMemBenchmark
    assert own_copy(elsewhere, {"metadata": {"benchmark_target": "eval.benchmarks.halumem.HaluMemBenchmark"}}) is HaluMemBenchmark
    assert own_copy(tmp_path / "runs" / "halumem" / "rag" / "none" / "h", {}) is HaluMemBenchmark
    # the name alone fails to match and the class still answers
    (elsewhere / "config.yaml").write_text("benchmark:\n  _target_: eval.benchmarks.halumem.benchmark.HaluMemBenchmark\n  name: mine\n")
    assert own_copy(elsewhere, {"benchmark": "mine"}) is HaluMemBenchmark


def test_a_locomo_run_is_still_published_whole(tmp_path):
    """Only HaluMem runs lose their text: a LoCoMo run folder, system/ and wandb/ included, is copied as it is."""
    import filecmp

    from eval import publishing

    run = _finished_run(tmp_path)
    (run / "system" / "mosaic").mkdir(parents=True)
    (run / "system" / "mosaic" / "conv-26.json").write_text('{"entities": ["Caroline went to the LGBTQ support group."]}')
    (run / "wandb").mkdir()
    (run / "wandb" / "run.json").write_text("{}")
    target = publishing.publish(run, tmp_path / "published")
    compared = filecmp.dircmp(run, target, ignore=[".lock"])
    assert not compared.left_only and not compared.right_only and not compared.diff_files
    assert not (target / "PUBLISHED.md").exists()
    assert (target / "system" / "mosaic" / "conv-26.json").read_text() == (run / "system" / "mosaic" / "conv-26.json").read_text()


def test_the_reaggregation_check_tells_a_row_order_from_a_lost_field():
    """A multi-user run with run.workers > 1 wrote its rows in the order users finished but bootstrapped them in the
    data file's order: only CI bounds can move then. A mean or count that moves means the kept rows lost something."""
    from eval.benchmarks.halumem.public import compare_metrics

    metrics = {"qa": {"correct": {"mean": 0.5, "ci_low": 0.2, "ci_high": 0.8, "n": 4}, "n": 4}, "variant": "Medium", "metadata": {"x": 1}}
    assert compare_metrics(metrics, {"qa": metrics["qa"], "variant": "worded otherwise now"}) == "identical"
    assert compare_metrics(metrics, {"qa": {"correct": {"mean": 0.5, "ci_low": 0.25, "ci_high": 0.75, "n": 4}, "n": 4}}) == "CI bounds differ"
    with pytest.raises(SystemExit, match="differing: qa"):
        compare_metrics(metrics, {"qa": {"correct": {"mean": 0.75, "ci_low": 0.2, "ci_high": 0.8, "n": 4}, "n": 4}})


def test_a_retrieval_only_run_is_published_without_its_saved_memory(tmp_path):
    """A retrieval-only run's rows are its record; system/ (megabytes per MOSAIC row, rebuilt by rerunning with no
    LLM call) stays behind, everything else is copied."""
    from eval import publishing

    run = _finished_run(tmp_path)
    metrics = json.loads((run / "metrics.json").read_text())
    (run / "metrics.json").write_text(json.dumps({**metrics, "stages": ["ingest", "retrieve"]}))
    (run / "system" / "mosaic").mkdir(parents=True)
    (run / "system" / "mosaic" / "conv-26.json").write_text("{}")
    (run / "retrievals.jsonl").write_text('{"key": "conv-26:q0"}\n')
    target = publishing.publish(run, tmp_path / "published")
    assert not (target / "system").exists() and (target / "retrievals.jsonl").is_file() and (target / "metrics.json").is_file()
