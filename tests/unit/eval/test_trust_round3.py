"""Faults a skeptical user found in the third trust round (docs/reliability.md "Trust, round 3"): each test
names its item and fails on the code before the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.runner import ConfigError, run_dir_for, validate
from tests.hydra_config import compose_config


# -- item 1: folder-name keys stay under results_dir -------------------------------------------------
@pytest.mark.parametrize("override", [
    "ablation_name=../../../../../x", "benchmark.name=../../x", "system.name=../../x", "system.name=/tmp/x",
    "ablation_name=''", "ablation_name='a\nb'", f"ablation_name={'a' * 300}", "system.name=a/b",
])  # fmt: skip
def test_folder_name_keys_that_would_leave_results_dir_are_config_errors(override, tmp_path):
    cfg = compose_config([override, f"results_dir={tmp_path}"])
    with pytest.raises(ConfigError, match="folder name"):
        validate(cfg)
    with pytest.raises(ConfigError, match="plain folder name"):
        run_dir_for(cfg, inputs={})
    assert not any(tmp_path.iterdir())


def _finished(run: Path) -> Path:
    run.mkdir(parents=True)
    (run / "metrics.json").write_text(json.dumps({"benchmark": "locomo", "metadata": {"git_sha": "abc", "git_sha_start": "abc"}}))
    return run


def test_publish_resolves_dot_dot_so_the_copy_lands_under_the_published_folder(tmp_path):
    from eval.publishing import publish

    runs = tmp_path / "results" / "runs" / "locomo" / "rag" / "none"
    _finished(runs / "h1")
    (runs / "h0" / "a" / "b").mkdir(parents=True)
    published = tmp_path / "pub" / "runs"
    target = publish(runs / "h0" / "a" / "b" / ".." / ".." / ".." / "h1", published)
    assert target == published / "locomo" / "rag" / "none" / "h1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pub", "results"]
    with pytest.raises(SystemExit, match="not a run folder"):
        publish(_finished(tmp_path / "x y"), published)


# -- item 2: LoCoMo files that would be scored wrongly are refused -----------------------------------
def _locomo_error(tmp_path: Path, data: list[dict]) -> str:
    from eval.benchmarks.locomo.data import LoCoMoFormatError, load_locomo

    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(data))
    with pytest.raises(LoCoMoFormatError) as caught:
        load_locomo(path)
    return str(caught.value)


def test_two_conversations_sharing_a_sample_id_are_refused(tmp_path):
    from tests.unit.eval.benchmarks.locomo.test_locomo import tiny_locomo

    data = tiny_locomo()
    data[1]["sample_id"] = data[0]["sample_id"]
    assert "also the sample_id of [0]" in _locomo_error(tmp_path, data)


@pytest.mark.parametrize(("field", "needle"), [("question", ".question: empty"), ("answer", ".answer: empty")])
def test_an_empty_question_or_gold_answer_is_refused(tmp_path, field, needle):
    from tests.unit.eval.benchmarks.locomo.test_locomo import tiny_locomo

    data = tiny_locomo()
    data[0]["qa"][0][field] = "  "
    assert needle in _locomo_error(tmp_path, data)


def test_a_conversation_whose_sessions_are_all_empty_is_refused(tmp_path):
    from tests.unit.eval.benchmarks.locomo.test_locomo import tiny_locomo

    data = tiny_locomo()
    conv = data[1]["conversation"]
    for key in [k for k in conv if k.startswith("session_") and not k.endswith("date_time")]:
        conv[key] = []
    assert "every session_<N> list is empty" in _locomo_error(tmp_path, data)


# -- item 3: errors at start-up are one line, before any run folder -----------------------------------
def test_a_dropped_path_key_hashes_the_constructors_default_file(tmp_path, monkeypatch):
    """``~benchmark.path``: the benchmark reads its constructor's default file, so that file is an input (hashed
    and checked), not "changed while the run was starting" on every try."""
    from eval.provenance import check_parsed, expected_inputs, input_hashes, read_hashed
    from tests.unit.eval.benchmarks.locomo.test_locomo import tiny_locomo

    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "locomo10.json").write_text(json.dumps(tiny_locomo()))
    cfg = compose_config(["~benchmark.path"])
    assert "path" not in cfg.benchmark
    expected = expected_inputs(cfg, input_hashes(cfg))
    _, sha = read_hashed("data/locomo10.json")
    assert expected == {str((tmp_path / "data" / "locomo10.json").resolve()): sha}
    check_parsed("data/locomo10.json", sha, expected)  # what the benchmark does when it parses the file: no error


def test_an_unknown_excluded_category_is_a_config_error():
    with pytest.raises(ConfigError, match=r"exclude_categories=\[7\]: LoCoMo's categories are \[1, 2, 3, 4, 5\]"):
        validate(compose_config(["benchmark.exclude_categories=[7]"]))


def test_a_run_folder_that_cannot_be_made_is_one_harness_error(tmp_path, monkeypatch):
    from core.api import HarnessError
    from eval.run_lock import RunLock

    def read_only(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "mkdir", read_only)
    with pytest.raises(HarnessError, match="cannot create the run folder .*Permission denied.*results_dir"):
        with RunLock(tmp_path / "ro" / "runs" / "x"):
            pass


# -- item 4: a full disk is named as such, with the file that failed ----------------------------------
def test_an_io_error_on_a_full_cache_disk_is_a_full_disk_not_a_damaged_cache(tmp_path, monkeypatch):
    """SQLite answers a disk that fills while it grows its shared-memory file with SQLITE_IOERR_SHMSIZE (seen on
    a 256 KiB tmpfs); the cache is intact, so the advice is to free space, never to delete it."""
    import shutil
    import sqlite3
    from collections import namedtuple

    from core.atomic import DiskFullError
    from core.llm.cache import ResponseCache

    def io_error(*args, **kwargs):
        err = sqlite3.OperationalError("disk I/O error")
        err.sqlite_errorname = "SQLITE_IOERR_SHMSIZE"
        raise err

    monkeypatch.setattr(sqlite3, "connect", io_error)
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(1 << 30, 1 << 30, 0))
    with pytest.raises(DiskFullError, match="no space left") as caught:
        ResponseCache(tmp_path / "llm_cache.sqlite")
    assert "delete" not in str(caught.value)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(1 << 30, 0, 1 << 30))  # space left: not a full disk
    with pytest.raises(Exception, match="damaged"):
        ResponseCache(tmp_path / "llm_cache.sqlite")


def test_a_row_file_on_a_full_disk_is_named_and_left_without_a_half_line(tmp_path, monkeypatch):
    import errno
    import os

    from core.atomic import DiskFullError
    from eval.rows import JsonlRows

    rows = JsonlRows(tmp_path / "predictions.jsonl")
    rows.append({"key": "a", "x": 1})
    before = rows.path.read_bytes()

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(DiskFullError, match="predictions.jsonl"):
        rows.append({"key": "b", "x": 2})
    assert rows.path.read_bytes() == before


# -- item 5: a rerun of failed rows asks remembered output faults again ------------------------------
from tests.unit.core.llm.test_client import _Handler, server  # noqa: E402,F401  (the canned OpenAI-style server)


def test_a_rerun_of_failed_rows_asks_a_remembered_fault_again(server, tmp_path):  # noqa: F811
    from core.api import LLMOutputError
    from core.llm import OpenAICompatClient
    from eval.runner import retry_output_faults

    def client():
        return OpenAICompatClient(base_url=server, model="m", cache_path=str(tmp_path / "c.sqlite"), max_retries=1)

    messages = [{"role": "user", "content": "x"}]
    _Handler.replies = [(200, "cut off {")]  # a broken server's reply: remembered as a fault
    with pytest.raises(LLMOutputError):
        client().chat(messages, response_schema={"type": "object"})
    clean = client()
    assert retry_output_faults({"failures": {"rows": 0}}, clean) is False  # nothing failed: replayed at no cost
    with pytest.raises(LLMOutputError, match="remembered"):
        clean.chat(messages, response_schema={"type": "object"})
    assert len(_Handler.seen) == 1
    rerun = client()
    assert retry_output_faults({"failures": {"rows": 3}}, rerun, rerun) is True
    _Handler.replies = [(200, '{"label": "ok"}')]  # the server was fixed
    assert rerun.chat(messages, response_schema={"type": "object"}).json() == {"label": "ok"}
    assert len(_Handler.seen) == 2


# -- item 6: calls that all came back empty are counted ----------------------------------------------
def test_calls_that_all_returned_empty_are_counted(server):  # noqa: F811
    from core.api import LLMOutputError
    from core.llm import OpenAICompatClient

    client = OpenAICompatClient(base_url=server, model="m", max_retries=3, retry_wait_s=0)
    _Handler.replies = [(200, "")] * 3
    with pytest.raises(LLMOutputError, match="empty content"):
        client.chat([{"role": "user", "content": "x"}], purpose="answer")
    assert len(_Handler.seen) == 3
    assert client.usage.calls == 3 and client.usage.by_purpose["answer"]["calls"] == 3


# -- item 6: a resumed run's system counters say what they cover -------------------------------------
_CALLS = {"left": None}


def interrupting_fake_llm(**kwargs):
    """tests.fakes.SchemaFakeLLM that stops the run (as Ctrl-C would) at the call _CALLS["left"] counts down to."""
    from tests.fakes import SchemaFakeLLM

    llm = SchemaFakeLLM(**kwargs)
    respond = llm.responder

    def maybe_stop(messages, schema):
        if _CALLS["left"] is not None:
            _CALLS["left"] -= 1
            if _CALLS["left"] < 0:
                _CALLS["left"] = None
                raise KeyboardInterrupt
        return respond(messages, schema)

    llm.responder = maybe_stop
    return llm


def test_a_resumed_runs_system_metrics_are_labelled_and_each_invocations_kept(tmp_path):
    from importlib import import_module

    from omegaconf import OmegaConf, open_dict

    from eval.runner import run
    from tests.unit.eval.test_experiments_smoke import _on_fakes, _slice

    overrides = ["experiment=locomo", "system=mosaic", *_slice("locomo", tmp_path)]
    cfg = _on_fakes(compose_config(overrides), tmp_path)
    with open_dict(cfg):
        cfg.llm = OmegaConf.create({"_target_": "tests.unit.eval.test_trust_round3.interrupting_fake_llm"})
    whole = run(cfg, overrides)
    assert whole["system_metrics_scope"] == "whole run (one invocation)"
    with open_dict(cfg):
        cfg.results_dir = str(tmp_path / "resumed")
    calls = import_module("tests.unit.eval.test_trust_round3")._CALLS  # the module Hydra's _target_ imports
    calls["left"] = 3
    with pytest.raises(KeyboardInterrupt):
        run(cfg, overrides)
    assert calls["left"] is None  # stopped at the fourth call
    resumed = run(cfg, overrides)
    assert resumed["metadata"]["invocations"] == 2
    assert resumed["system_metrics_scope"].startswith("last invocation that ingested or predicted, of 2")
    provenance = next((tmp_path / "resumed" / "runs").rglob("provenance.json"))
    invocations = json.loads(provenance.read_text())["invocations"]
    assert [entry["ended_by"] for entry in invocations] == ["KeyboardInterrupt", "finished"]
    assert all("write" in entry["system_metrics"] for entry in invocations)


# -- item 7: rejudge and publish: one row rule, one-line errors, the run lock ------------------------
def test_every_row_reader_skips_a_row_without_its_key(tmp_path):
    from eval.rows import JsonlRows, read_rows

    path = tmp_path / "predictions.jsonl"
    path.write_text('{"key": "a", "x": 1}\n{"x": 2}\n{"key": "b", "x": 3}\n')
    assert [r["key"] for r in read_rows(path)] == [r["key"] for r in JsonlRows(path).rows()] == ["a", "b"]
    assert len(read_rows(path, key_field=None)) == 3  # a log without keys keeps every line


@pytest.mark.parametrize("damage", ["missing", "metrics"])
def test_rejudge_reports_a_bad_folder_in_one_line_before_building_a_judge(tmp_path, capsys, monkeypatch, damage):
    import scripts.rejudge as rejudge_script

    run = tmp_path / "run"
    if damage == "metrics":
        run.mkdir()
        (run / "metrics.json").write_text('{"convention": "locomo", ')
        (run / "predictions.jsonl").write_text('{"key": "a"}\n')

    def no_judge(cfg):  # rejudge must stop before it builds the judge (which may start a server)
        raise AssertionError("a judge was built for a folder that cannot be re-judged")

    monkeypatch.setattr(rejudge_script, "_rejudge_locked", no_judge)
    assert rejudge_script.main([f"run_dir={run}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and ("no such folder" in err[0] if damage == "missing" else "is damaged" in err[0]), err
    assert run.exists() == (damage == "metrics")  # the lock did not create a missing folder


def test_rejudge_skips_a_prediction_without_a_key_as_the_runner_does(tmp_path):
    from eval.benchmarks.locomo.judge_agreement import rejudge
    from tests.fakes import FakeLLM
    from tests.hydra_config import conf_judge

    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.json").write_text("{}")
    (run / "predictions.jsonl").write_text('{"question": "q", "prediction": "p"}\n')  # no key: never judged by the run
    (run / "judgements.jsonl").write_text("")
    section = rejudge(run, conf_judge(FakeLLM(lambda m, s: {"label": "CORRECT"})), "fake", n_samples=10)
    assert section["n_compared"] == 0 and section["n_unlabelled"] == 0


def test_rejudge_and_publish_wait_for_nobody_and_refuse_a_folder_in_use(tmp_path):
    from eval.publishing import publish
    from eval.run_lock import RunLock, RunLockedError

    run = _finished(tmp_path / "results" / "runs" / "locomo" / "rag" / "none" / "h1")
    with RunLock(run):
        with pytest.raises(RunLockedError, match="in use by"):
            publish(run, tmp_path / "pub")
    assert publish(run, tmp_path / "pub").is_dir()  # free again: published


def test_rejudge_takes_the_run_lock(tmp_path, capsys):
    import scripts.rejudge as rejudge_script
    from eval.run_lock import RunLock

    run = _finished(tmp_path / "run")
    (run / "predictions.jsonl").write_text('{"key": "a"}\n')
    with RunLock(run):
        assert rejudge_script.main([f"run_dir={run}"]) == 2
    assert "RunLockedError" in capsys.readouterr().err


# -- item 8: publish: failed rows, one definition of "code changed", untracked code -------------------
@pytest.mark.parametrize("scores", [{"main_metric": None}, {"n_cases": 8}])
def test_publish_refuses_a_run_whose_every_row_failed(tmp_path, scores):
    from eval.publishing import publish

    run = _finished(tmp_path / "results" / "runs" / "locomo" / "rag" / "none" / "h1")
    metrics = json.loads((run / "metrics.json").read_text())
    (run / "metrics.json").write_text(json.dumps({**metrics, **scores, "failures": {"rows": 8, "ingest_turns": 0}}))
    with pytest.raises(SystemExit, match=r"every row failed \(8 rows"):
        publish(run, tmp_path / "pub")
    (run / "metrics.json").write_text(json.dumps({**metrics, "main_metric": 0.5, "n_cases": 9, "failures": {"rows": 8}}))
    assert publish(run, tmp_path / "pub").is_dir()  # some rows scored: published, its failure count with it


def test_a_docs_only_commit_during_a_run_is_no_code_change_for_publish_either():
    from eval.publishing import provenance_flags

    same_code = {"git_sha": "def", "git_sha_start": "abc", "code_changed_during_run": False}
    assert provenance_flags({"metadata": same_code}) == []  # the runner resumed it: same code hash
    assert provenance_flags({"metadata": {**same_code, "code_changed_during_run": True}}) == ["code changed during the run (abc -> def)"]
    assert provenance_flags({"metadata": {"git_sha": "def", "git_sha_start": "abc"}})  # older records: commits compared


def test_an_untracked_config_file_or_module_makes_the_tree_dirty(tmp_path, monkeypatch):
    import subprocess

    from eval import provenance

    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True, capture_output=True)

    (tmp_path / "conf" / "system").mkdir(parents=True)
    (tmp_path / "memory.py").write_text("x = 1\n")
    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "start")
    monkeypatch.setattr(provenance, "REPO", tmp_path)
    clean = provenance.code_version()
    assert clean["dirty"] is False
    (tmp_path / "notes.md").write_text("words\n")  # not code
    assert provenance.code_version() == clean
    (tmp_path / "conf" / "system" / "new.yaml").write_text("_target_: memory.New\n")
    with_config = provenance.code_version()
    assert with_config["dirty"] is True and not provenance.same_code(with_config, clean)
    (tmp_path / "helper.py").write_text("y = 2\n")
    with_module = provenance.code_version()
    assert with_module["dirty"] is True and with_module["diff_sha256"] != with_config["diff_sha256"]


# -- item 9: cache archives: all or nothing, servable entries, vectors checked ------------------------
def _reply_archive(path: Path, values: list) -> Path:
    import gzip
    import hashlib

    with gzip.open(path, "wt", encoding="utf-8") as out:
        for n, value in enumerate(values):
            out.write(json.dumps({"key": hashlib.sha256(str(n).encode()).hexdigest(), "value": value}) + "\n")
    return path


REPLY = {"text": "ok", "prompt_tokens": 3, "completion_tokens": 1, "latency_s": 0.1, "model": "qwen-test"}


@pytest.mark.parametrize("bad", ["not json", {"text": "x", "tokens": 3}, [1, 2]])
def test_an_archive_with_a_bad_or_unservable_line_imports_nothing(tmp_path, bad):
    import gzip

    from core.llm.cache_archive import CACHE_FILE, import_cache

    archive = _reply_archive(tmp_path / "a.jsonl.gz", [REPLY] * 100)
    with gzip.open(archive, "at", encoding="utf-8") as out:  # line 101
        out.write((bad if isinstance(bad, str) else json.dumps({"key": "f" * 64, "value": bad})) + "\n")
    with pytest.raises(SystemExit, match="line 101 is not a cache entry.*nothing was imported"):
        import_cache(archive, tmp_path / "cache")
    assert not (tmp_path / "cache" / CACHE_FILE).exists()


def test_import_names_the_model_and_checks_the_vectors_before_storing_replies(tmp_path, capsys):
    import gzip

    from core.llm.cache_archive import CACHE_FILE
    from scripts.cache_archive import main

    archive = _reply_archive(tmp_path / "a.jsonl.gz", [REPLY, {**REPLY, "text": "two"}])
    vectors = tmp_path / "a.embeddings.jsonl.gz"
    with gzip.open(vectors, "wt", encoding="utf-8") as out:
        out.write(json.dumps({"key": "v", "vec": "AAAAAAAAAAA"}) + "\n")  # cut: 8 bytes of base64 padding gone
    with pytest.raises(SystemExit, match="embeddings.jsonl.gz line 1 is not an embedding entry"):
        main(["import", str(archive), str(tmp_path / "cache")])
    assert not (tmp_path / "cache" / CACHE_FILE).exists()  # no reply stored without its vectors
    vectors.unlink()
    main(["import", str(archive), str(tmp_path / "cache")])
    assert "made with qwen-test (2 replies)" in capsys.readouterr().out


def test_an_embedding_cache_serves_no_changed_or_cut_vector(tmp_path):
    import sqlite3

    import numpy as np

    from core.embed import SentenceEmbedder

    path = tmp_path / "embed_cache.sqlite"
    embedder = SentenceEmbedder(cache_path=str(path))
    texts = ["the red bicycle", "a dog named Rex"]
    fresh = embedder.encode(texts)
    embedder.close()
    conn = sqlite3.connect(path)
    key_0, key_1 = (SentenceEmbedder(cache_path=None)._key(t) for t in texts)
    flipped = bytearray(fresh[0].tobytes())
    flipped[7] ^= 0x10
    conn.execute("UPDATE vectors SET vec = ? WHERE key = ?", (bytes(flipped), key_0))  # a flipped bit, checksum kept
    conn.execute("UPDATE vectors SET vec = ?, checksum = NULL WHERE key = ?", (np.ones(25, np.float32).tobytes(), key_1))  # 25 dims
    conn.commit()
    conn.close()
    again = SentenceEmbedder(cache_path=str(path))
    assert np.allclose(again.encode(texts), fresh, atol=1e-6)
    again.close()


# -- item 11: captions and labels say what each column measured ---------------------------------------
def test_table_2_caption_says_what_the_measured_columns_measured():
    from eval.benchmarks.halumem.table import make_table

    run = {"counts": {"users": 1, "questions": 55}, "metadata": {"judge_model_id": "tiny-1.5b", "llm_model_id": "tiny-1.5b"}}
    caption = make_table([run]).attrs["caption"]
    assert "1 user(s) per run, 55 questions per run, judged by tiny-1.5b" in caption
    assert "20 users" in caption and "GPT-4o as judge" in caption


def _conflict_run(**extra) -> dict:
    return {"suite": "household_finance", "n_conflicting": 2, "n_non_conflicting": 1, "detection_rate": {"mean": 0.0, "low": 0.0, "high": 0.0},
            "lenient": {"detection_rate": {"mean": 0.0, "low": 0.0, "high": 0.0}}, "misses": {}, "conflict_events_seen": 0,
            "metadata": {"system": "memgpt"}, **extra}  # fmt: skip


def test_conflict_tables_keep_the_papers_value_off_this_projects_suite_and_say_no_signal_alike():
    from eval.benchmarks.conflict.table import PAPER_SUITE, conflict_table, headline_table

    full = conflict_table([_conflict_run()])
    paper_rows = [row for row in full.index if row.startswith("paper:")]
    assert [full.loc[row, "suite"] for row in paper_rows] == [PAPER_SUITE] and "hypertension" not in PAPER_SUITE
    assert "not public" in full.attrs["caption"]
    silent = full.loc[full.index[0]]
    assert silent["overall"] == silent["lenient overall"] == "0 (no conflict signal raised)"
    headline = headline_table([_conflict_run()])
    assert headline.iloc[0]["detection"] == "0 (no conflict signal raised)"
    assert "paper (reported) detection" not in headline.columns


def test_a_conflict_run_whose_probes_recorded_no_failures_shows_0_not_n_a(tmp_path):
    from eval.tables import failures_cell

    (tmp_path / "cases.jsonl").write_text('{"id": "a", "failures": 0}\n{"id": "b", "failures": 0}\n')
    (tmp_path / "ingests.jsonl").write_text('{"context": "c"}\n')  # contexts did not record theirs
    assert failures_cell({"_path": str(tmp_path / "metrics.json")}) == "0 / n/a"


# -- item 12: runs without provenance.json are marked in every table, headline tables included -------
def test_a_published_run_without_provenance_is_marked_in_every_table_it_is_in(tmp_path):
    import shutil

    from scripts.make_tables import build
    from tests.conftest import REPO

    published = REPO / "results" / "published" / "runs" / "locomo"
    root = tmp_path / "runs" / "locomo"
    for run in ("rag/none/26cb1a02f252", "rag/oracle_facts"):  # the rag quickstart (no provenance.json), one that has it
        source = next(p for p in [published / run, *sorted((published / run).glob("*"))] if (p / "metrics.json").is_file())
        shutil.copytree(source, root / source.relative_to(published), ignore=shutil.ignore_patterns("system", "wandb"))
    assert sum((p / "provenance.json").is_file() for p in root.glob("*/*/*")) == 1
    tables = build(tmp_path / "runs", tmp_path / "tables")
    for name in ("locomo", "locomo_headline", "locomo_judge_gold"):
        rows = [line for line in tables[name].splitlines() if line.startswith("| rag")]
        assert sum("†" in line for line in rows) == 1, name
        assert "not from one clean commit" in tables[name], name
    noted = [line for line in tables["locomo"].splitlines() if "26cb1a02f252/metrics.json" in line]
    assert len(noted) == 1 and noted[0].endswith("no provenance.json (the run predates it)")
    assert "1 of these runs are not from one clean commit; results/tables/locomo.md lists them" in tables["locomo_headline"]


def test_the_readme_headline_tables_keep_the_provenance_note():
    from scripts.make_tables import README_SECTION
    from tests.conftest import REPO

    sections = {m["name"]: m["body"] for m in README_SECTION.finditer((REPO / "README.md").read_text(encoding="utf-8"))}
    for name in ("locomo_headline", "conflict_headline"):
        assert "†" in sections[name] and "not from one clean commit" in sections[name], name
