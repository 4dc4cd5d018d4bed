"""Fault injection: each fault reproduced, and the fixed behaviour asserted.

The runs use a tiny LoCoMo slice (dev conversation conv-26, its first session, 3 questions) with
``system=rag`` and ``llm=openai_compat`` pointed at a misbehaving OpenAI-compatible server written for
these tests (tests/fake_openai_server.py); the embedder is the real packaged MiniLM. No real LLM.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hydra.core.hydra_config import HydraConfig
from omegaconf import open_dict

from core.api import HarnessError
from core.llm import LLMError, OpenAICompatClient, ResponseCache
from core.llm.cache import CacheError
from core.llm.client import OUTPUT_FAULT
from core.paths import sha256_of
from eval import runner as runner_module
from eval.provenance import CodeChangedError, InputChangedError
from eval.rows import SCORED_ROW_FIELD, JsonlRows, row_sha256
from eval.run_lock import RunLockedError
from eval.runner import config_hash, run, run_dir_for
from tests.hydra_config import compose_config
from tests.fake_openai_server import MODEL_ID, FakeOpenAIServer
from tests.script_loader import load_script

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
LOCOMO = REPO / "data" / "locomo10.json"


@pytest.fixture(scope="module")
def tiny_locomo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """conv-26 (a dev conversation) cut to its first session: a real LoCoMo slice small enough for seconds."""
    if not LOCOMO.exists():
        pytest.skip(f"{LOCOMO} missing (python -m scripts.download_data)")
    conv = next(c for c in json.loads(LOCOMO.read_text()) if c["sample_id"] == "conv-26")
    keep = {k: v for k, v in conv["conversation"].items() if k in ("speaker_a", "speaker_b", "session_1", "session_1_date_time")}
    conv = {**conv, "conversation": keep}
    path = tmp_path_factory.mktemp("data") / "locomo_tiny.json"
    path.write_text(json.dumps([conv]))
    return path


@pytest.fixture(scope="module")
def embed_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("embed") / "embed_cache.sqlite"


@pytest.fixture
def server():
    with FakeOpenAIServer() as fake:
        yield fake


def overrides_for(url: str, data: Path, tmp: Path, embed_cache: Path, *extra: str) -> list[str]:
    return [
        "experiment=locomo", "system=rag", "llm=openai_compat", f"llm.base_url={url}", f"llm.model={MODEL_ID}",
        "llm.api_key_env=null", "llm.max_retries=2", "llm.retry_wait_s=0", "llm.timeout_s=5", "llm.patience_s=20",
        "logger=none", f"benchmark.path={data}", "benchmark.max_sessions=1", "benchmark.max_questions=3",
        "benchmark.bootstrap_samples=20", f"results_dir={tmp / 'results'}", f"cache_dir={tmp / 'cache'}",
        f"embedder.cache_path={embed_cache}", *extra,
    ]  # fmt: skip


def compose_cfg(overrides: list[str]):
    """The config as run.py sees it: the hydra node is resolved through HydraConfig, not the cfg."""
    cfg = compose_config(overrides)
    with open_dict(cfg):
        HydraConfig.instance().set_config(cfg)
        del cfg["hydra"]
    return cfg


def run_with(overrides: list[str]) -> dict:
    return run(compose_cfg(overrides), overrides=overrides)


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run_py(overrides: list[str], env: dict | None = None, **popen) -> subprocess.CompletedProcess | subprocess.Popen:
    cmd = [sys.executable, "run.py", *overrides]
    full_env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1", **(env or {})}
    if popen:
        return subprocess.Popen(cmd, cwd=REPO, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.run(cmd, cwd=REPO, env=full_env, capture_output=True, text=True, timeout=300)


# -- 1. stale results after the data changes ----------------------------------------------------------
def test_changed_input_file_never_returns_old_results(server, tiny_locomo, tmp_path, embed_cache):
    data = tmp_path / "locomo.json"
    data.write_bytes(tiny_locomo.read_bytes())
    overrides = overrides_for(server.url, data, tmp_path, embed_cache)
    first = run_with(overrides)
    first_dir = Path(first["metadata"]["config_hash"])
    sha = sha256_of(data)
    inputs = first["metadata"]["input_files"]
    assert inputs["benchmark.path"] == sha
    # every other input the config names is hashed too (LoCoMo's audit errata file, once downloaded)
    assert set(inputs) <= {"benchmark.path", "benchmark.audit_errata"}
    if "benchmark.audit_errata" in inputs:
        assert inputs["benchmark.audit_errata"] == sha256_of(REPO / "data" / "locomo-audit" / "errors.json")
    folder = run_dir_for(compose_cfg(overrides))
    assert all(r["input_hash"] == first["metadata"]["input_hash"] for r in rows(folder / "predictions.jsonl"))

    # the same file edited (one turn's text changed): a new folder, computed afresh, never "already finished"
    payload = json.loads(data.read_text())
    payload[0]["conversation"]["session_1"][0]["text"] += " (edited)"
    data.write_text(json.dumps(payload))
    calls_before = server.calls
    second = run_with(overrides)
    assert second["metadata"]["config_hash"] != str(first_dir)
    assert second["metadata"]["input_files"]["benchmark.path"] != sha
    assert server.calls > calls_before  # recomputed (the edited turn changes the answer prompts)
    new_folder = run_dir_for(compose_cfg(overrides))
    assert new_folder != folder and (folder / "metrics.json").exists()


def test_rows_from_other_inputs_are_not_mixed_in(tmp_path):
    path = tmp_path / "predictions.jsonl"
    old = JsonlRows(path, input_hash="old")
    old.append({"key": "q0", "prediction": "a"})
    new = JsonlRows(path, input_hash="new")
    assert "q0" not in new and new.skipped[0][0] == 1 and "other input files" in new.skipped[0][1]


# -- 2. invalid values accepted --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("benchmark.max_sessions=0", "benchmark.max_sessions"),
        ("benchmark.max_sessions=-1", "benchmark.max_sessions"),
        ("benchmark.max_questions=-1", "benchmark.max_questions"),
        ("benchmark.max_questions=abc", "benchmark.max_questions"),
        ("benchmark.top_k=0", "benchmark.top_k"),
        ("llm.timeout_s=0", "llm.timeout_s"),
        ("llm.patience_s=-5", "llm.patience_s"),
        ("llm.max_retries=0", "llm.max_retries"),
        ("answerer.max_answer_tokens=0", "answerer.max_answer_tokens"),
        ("seed=1.5", "seed"),
        ("resume.allow_code_change=maybe", "resume.allow_code_change"),
    ],
)
def test_invalid_values_fail_at_start_naming_the_key(override, key, server, tiny_locomo, tmp_path, embed_cache):
    # a range the constructor's parameter type carries fails in the same check as the rule tables (ConfigKeyError
    # from core.config_check, ConfigError from eval's rules): both are the harness's one-line errors
    with pytest.raises(HarnessError, match=rf"{key}=.*must be"):
        run_with(overrides_for(server.url, tiny_locomo, tmp_path, embed_cache, override))
    assert server.calls == 0 and not (tmp_path / "results").exists()


def test_invalid_value_exits_nonzero_with_one_line(server, tiny_locomo, tmp_path, embed_cache):
    done = run_py(overrides_for(server.url, tiny_locomo, tmp_path, embed_cache, "benchmark.max_questions=-1"))
    assert done.returncode == 2
    assert "benchmark.max_questions=-1: must be an integer >= 1 or null" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


# -- 3. the response cache keeps bad answers --------------------------------------------------------------
def test_bad_responses_are_counted_never_cached(server, tiny_locomo, tmp_path, embed_cache):
    overrides = overrides_for(server.url, tiny_locomo, tmp_path, embed_cache)
    server.mode = "empty"
    bad = run_with(overrides)
    assert bad["judge_failures"] == 3  # counted, after retries
    folder = run_dir_for(compose_cfg(overrides))
    assert all("empty content" in r["answer_failure"] for r in rows(folder / "predictions.jsonl"))
    server.mode = "good"
    good = run_with([*overrides, "overwrite=true"])
    assert good["judge_failures"] == 0 and good["main_metric"] == 1.0
    cache = sqlite3.connect(tmp_path / "cache" / "llm_cache.sqlite")
    texts = [json.loads(v)["text"] for (v,) in cache.execute("SELECT value FROM responses")]
    assert texts and all(t.strip() for t in texts)


@pytest.mark.parametrize("mode", ["empty", "truncated"])
def test_schema_request_with_unusable_output_is_never_served(mode, server, tmp_path):
    server.mode = mode
    client = OpenAICompatClient(server.url, model=MODEL_ID, cache_path=str(tmp_path / "c.sqlite"), max_retries=2, retry_wait_s=0)
    with pytest.raises(Exception, match="empty content|cut off"):
        client.chat_json([{"role": "user", "content": "x"}], {"type": "object"}, attempts=2)
    entries = [json.loads(v) for (v,) in ResponseCache(tmp_path / "c.sqlite")._conn.execute("SELECT value FROM responses")]
    # an empty reply is a server fault (asked again next time); a cut-off greedy reply is remembered as a fault
    assert all(OUTPUT_FAULT in e for e in entries) and len(entries) == (0 if mode == "empty" else 2)
    calls = server.calls
    with pytest.raises(Exception, match="empty content|cut off"):
        client.chat_json([{"role": "user", "content": "x"}], {"type": "object"}, attempts=2)
    assert server.calls > calls if mode == "empty" else server.calls == calls


def test_old_bad_cache_entry_is_asked_again(server, tmp_path):
    client = OpenAICompatClient(server.url, model=MODEL_ID, cache_path=str(tmp_path / "c.sqlite"), retry_wait_s=0)
    messages = [{"role": "user", "content": "x"}]
    client.chat(messages)  # cache the good answer, then spoil it as an old harness would have
    key = client.cache._conn.execute("SELECT key FROM responses").fetchone()[0]
    client.cache.put(key, {**client.cache.get(key), "text": ""})
    again = client.chat(messages)
    assert not again.cached and again.text


# -- 4. no lock on a run folder --------------------------------------------------------------------------
def test_second_process_on_the_same_folder_is_refused(tiny_locomo, tmp_path, embed_cache):
    with FakeOpenAIServer(mode="hang", hang_s=60) as slow:
        overrides = overrides_for(slow.url, tiny_locomo, tmp_path, embed_cache)
        first = run_py(overrides, popen=True)
        try:
            deadline = time.monotonic() + 120
            while slow.calls == 0 and time.monotonic() < deadline and first.poll() is None:
                time.sleep(0.5)  # the first process holds the lock and waits on the server
            assert slow.calls > 0, first.stderr.read() if first.poll() is not None else "no call"
            second = run_py(overrides)
            assert second.returncode == 2
            assert f"in use by pid {first.pid} on " in second.stderr and "Traceback" not in second.stderr
        finally:
            first.kill()
            first.wait()


WRITER = """
import sys
from core.llm.cache import ResponseCache
cache = ResponseCache(sys.argv[1], busy_timeout_s=60)
for i in range(int(sys.argv[3])):
    cache.put(f"{sys.argv[2]}-{i}", {"text": f"{sys.argv[2]} {i}"})
"""


def test_sqlite_cache_safe_with_two_processes_writing(tmp_path):
    path = str(tmp_path / "shared.sqlite")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, path, tag, "200"], env=env, stderr=subprocess.PIPE, text=True)
               for tag in ("a", "b")]  # fmt: skip
    errors = [w.communicate(timeout=120)[1] for w in writers]
    assert [w.returncode for w in writers] == [0, 0], errors
    cache = ResponseCache(path)
    assert cache._conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0] == 400
    assert cache.get("a-199") == {"text": "a 199"} and cache.get("b-0") == {"text": "b 0"}


# -- 5. one damaged line deletes every row after it ------------------------------------------------------
def test_damaged_middle_line_costs_only_that_row(server, tiny_locomo, tmp_path, embed_cache, caplog):
    overrides = overrides_for(server.url, tiny_locomo, tmp_path, embed_cache)
    first = run_with(overrides)
    folder = run_dir_for(compose_cfg(overrides))
    lines = (folder / "predictions.jsonl").read_text().splitlines()
    assert len(lines) == 3
    lines[1] = lines[1][: len(lines[1]) // 2]  # damaged in the middle of the file
    (folder / "predictions.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "metrics.json").unlink()
    calls = server.calls
    caplog.set_level("WARNING")
    again = run_with(overrides)
    assert "predictions.jsonl line 2: not valid JSON" in caplog.text
    assert server.calls == calls  # the one redone question came from the cache; nothing else was redone
    kept = [json.loads(line) for line in (folder / "predictions.jsonl").read_text().splitlines()[::2]]
    assert [r["key"] for r in kept] == [json.loads(lines[0])["key"], json.loads(lines[2])["key"]]
    assert again["main_metric"] == first["main_metric"]


def test_torn_last_line_is_cut_and_reported(tmp_path, caplog):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"key": "a"}\nnot json\n{"key": "c"}\n{"key": "d", "x"')
    caplog.set_level("WARNING")
    table = JsonlRows(path)
    assert sorted(r["key"] for r in table) == ["a", "c"]
    assert [n for n, _ in table.skipped] == [2, 4] and "line 4: torn" in caplog.text
    table.append({"key": "e"})
    assert path.read_text().endswith('{"key": "c"}\n{"key": "e"}\n')


# -- 6. errors that do not say where or what to do ------------------------------------------------------
def test_corrupt_and_empty_cache_files_name_the_file_and_the_fix(tmp_path):
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    with pytest.raises(CacheError, match=rf"{empty}.*0-byte.*delete it"):
        ResponseCache(empty)
    corrupt = tmp_path / "corrupt.sqlite"
    cache = ResponseCache(corrupt)
    cache.put("k", {"text": "x"})
    cache.close()  # checkpoints the WAL into the file
    corrupt.write_bytes(corrupt.read_bytes()[:100] + b"\xff" * 4000)
    with pytest.raises(CacheError, match=rf"{corrupt} is damaged.*delete the file"):
        cache = ResponseCache(corrupt)
        cache.get("k")


@pytest.mark.parametrize("mode", ["garbage", "no_choices"])
def test_server_garbage_names_the_url(mode, server):
    server.mode = mode
    client = OpenAICompatClient(server.url, model=MODEL_ID, max_retries=2, retry_wait_s=0)
    with pytest.raises(LLMError, match=rf"{server.url}/v1/chat/completions.*check the server"):
        client.chat([{"role": "user", "content": "x"}])
    assert server.calls == 2  # retried, then reported


def test_one_line_errors_from_run_py(server, tiny_locomo, tmp_path, embed_cache):
    overrides = overrides_for(server.url, tiny_locomo, tmp_path, embed_cache)
    run_with(overrides)
    folder = run_dir_for(compose_cfg(overrides))
    (folder / "metrics.json").write_text('{"main_metric": 4')  # half-written
    done = run_py(overrides)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"{folder / 'metrics.json'} is damaged" in done.stderr and "overwrite=true" in done.stderr
    traced = run_py(overrides, env={"HYDRA_FULL_ERROR": "1"})
    assert traced.returncode != 0 and "Traceback" in traced.stderr


def test_missing_api_key_fails_before_any_work(server, tiny_locomo, tmp_path, embed_cache, monkeypatch):
    monkeypatch.delenv("NO_SUCH_KEY_FOR_TEST", raising=False)
    overrides = overrides_for(server.url, tiny_locomo, tmp_path, embed_cache, "llm.api_key_env=NO_SUCH_KEY_FOR_TEST")
    with pytest.raises(LLMError, match="NO_SUCH_KEY_FOR_TEST"):
        run_with(overrides)
    folder = run_dir_for(compose_cfg(overrides))
    assert server.calls == 0 and not (folder / "ingest.jsonl").exists() and not (folder / "provenance.json").exists()


def test_run_py_prints_wrapped_harness_error_in_one_line(server, tiny_locomo, tmp_path, embed_cache):
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "llm_cache.sqlite").write_bytes(b"")  # raised inside Hydra's instantiate
    done = run_py(overrides_for(server.url, tiny_locomo, tmp_path, embed_cache))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "llm_cache.sqlite is an empty (0-byte) file" in done.stderr


# -- 7. smaller: base_url, usage over invocations, patience ---------------------------------------------
def test_server_on_another_port_resumes_and_usage_accumulates(tiny_locomo, tmp_path, embed_cache):
    with FakeOpenAIServer(mode="fail_after", budget=2) as first_server:
        overrides = overrides_for(first_server.url, tiny_locomo, tmp_path, embed_cache)
        with pytest.raises(LLMError):
            run_with(overrides)  # dies after two answers
        first_calls = first_server.calls
        folder = run_dir_for(compose_cfg(overrides))
    with FakeOpenAIServer() as second_server:
        moved = overrides_for(second_server.url, tiny_locomo, tmp_path, embed_cache)
        assert run_dir_for(compose_cfg(moved)) == folder  # base_url is not part of the identity
        metrics = run_with(moved)
    meta = metrics["metadata"]
    assert meta["invocations"] == 2
    assert len(rows(folder / "predictions.jsonl")) == 3
    # every call either server answered (good or failed) is counted once
    assert meta["llm_usage"]["calls"] == 2 + second_server.calls
    assert meta["llm_usage_this_invocation"]["calls"] == second_server.calls
    assert first_calls >= 2


def test_hung_server_reported_after_patience(tmp_path):
    with FakeOpenAIServer(mode="hang", hang_s=30) as hung:
        client = OpenAICompatClient(hung.url, model=MODEL_ID, timeout_s=1, max_retries=50, patience_s=3, retry_wait_s=0.1)
        started = time.monotonic()
        with pytest.raises(LLMError, match="patience_s=3"):
            client.chat([{"role": "user", "content": "x"}])
        assert time.monotonic() - started < 8


# -- provenance -----------------------------------------------------------------------
def test_resume_under_other_code_refuses_unless_allowed(tiny_locomo, tmp_path, embed_cache, monkeypatch, caplog):
    with FakeOpenAIServer(mode="fail_after", budget=2) as fake:
        overrides = overrides_for(fake.url, tiny_locomo, tmp_path, embed_cache)
        with pytest.raises(LLMError):
            run_with(overrides)  # killed half way, as far as the folder can tell
        folder = run_dir_for(compose_cfg(overrides))
        started = json.loads((folder / "provenance.json").read_text())["code_at_start"]
        assert started["git_sha"] != "unknown"
        fake.mode = "good"
        later = {**started, "git_sha": "0" * 40, "code_sha256": "0" * 16}  # a commit made since, changing code
        monkeypatch.setattr("eval.runner.code_version", lambda: later)
        with pytest.raises(CodeChangedError, match=r"resume\.allow_code_change=true"):
            run_with(overrides)
        metrics = run_with([*overrides, "resume.allow_code_change=true"])
    meta = metrics["metadata"]
    assert meta["resume_allow_code_change"] is True and meta["code_changed_during_run"] is True
    assert meta["git_sha_start"] != meta["git_sha"]
    monkeypatch.setattr("eval.runner.code_version", lambda: {**later, "git_sha": "1" * 40, "code_sha256": "1" * 16})
    with caplog.at_level("WARNING"):
        assert run_with(overrides)["metadata"] == meta  # a finished run is read back, with a warning
    assert "was computed under code 0000" in caplog.text
    make_tables = load_script("make_tables")
    assert any("code changed during the run" in flag for flag in make_tables.provenance_flags(metrics))
    assert "Provenance: not from one clean commit" in make_tables.build(tmp_path / "results" / "runs", tmp_path / "tables")["locomo"]


def test_harmless_code_change_keeps_the_folder(server, tiny_locomo, embed_cache, tmp_path):
    overrides = overrides_for(server.url, tiny_locomo, tmp_path, embed_cache)
    assert config_hash(compose_cfg(overrides)) == config_hash(compose_cfg([*overrides, "resume.allow_code_change=true"]))
    assert issubclass(CodeChangedError, HarnessError)


# -- trust: data, resume and failure handling ------------------------------------------------------------------------------
def test_data_changed_after_the_start_fails_before_any_row(server, tiny_locomo, tmp_path, embed_cache, monkeypatch):
    """The file is hashed for the folder name, then edited before the benchmark reads it: the old content's
    folder must not receive rows computed from the new content."""
    data = tmp_path / "locomo.json"
    data.write_bytes(tiny_locomo.read_bytes())
    overrides = overrides_for(server.url, data, tmp_path, embed_cache)
    folder = run_dir_for(compose_cfg(overrides))
    real_input_hashes = runner_module.input_hashes

    def hash_then_edit(cfg):
        hashes = real_input_hashes(cfg)
        payload = json.loads(data.read_text())
        payload[0]["conversation"]["session_1"][0]["text"] += " (edited after the run started)"
        data.write_text(json.dumps(payload))
        return hashes

    monkeypatch.setattr(runner_module, "input_hashes", hash_then_edit)
    with pytest.raises(InputChangedError, match=rf"{data} changed .*rerun the same command"):
        run_with(overrides)
    assert server.calls == 0
    assert not list(folder.glob("*.jsonl")) and not (folder / "metrics.json").exists()
    monkeypatch.undo()
    again = run_with(overrides)  # the same command: the folder of the content as it is now
    assert again["metadata"]["input_files"]["benchmark.path"] == sha256_of(data) and run_dir_for(compose_cfg(overrides)) != folder


def test_redone_prediction_is_judged_again(server, tiny_locomo, tmp_path, embed_cache):
    overrides = overrides_for(server.url, tiny_locomo, tmp_path, embed_cache)
    run_with(overrides)
    folder = run_dir_for(compose_cfg(overrides))
    predictions = rows(folder / "predictions.jsonl")
    judged = {j["key"]: j for j in rows(folder / "judgements.jsonl")}
    assert all(judged[p["key"]][SCORED_ROW_FIELD] == row_sha256(p) for p in predictions)
    # question 2's prediction redone with another answer (as a resumed run redoes a lost or failed row)
    redone = {**predictions[1], "prediction": "Caroline never went anywhere."}
    with (folder / "predictions.jsonl").open("a") as handle:
        handle.write(json.dumps(redone) + "\n")
    (folder / "metrics.json").unlink()
    calls = server.calls
    run_with(overrides)
    assert server.calls == calls + 1  # that one question judged again (a new prompt: not in the cache)
    latest = {j["key"]: j for j in rows(folder / "judgements.jsonl")}
    assert latest[redone["key"]][SCORED_ROW_FIELD] == row_sha256(redone)
    assert latest[predictions[0]["key"]] == judged[predictions[0]["key"]]  # the others are kept


def test_rejudge_reads_a_recovered_row_file(server, tiny_locomo, tmp_path, embed_cache, caplog):
    overrides = overrides_for(server.url, tiny_locomo, tmp_path, embed_cache)
    run_with(overrides)
    folder = run_dir_for(compose_cfg(overrides))
    lines = (folder / "predictions.jsonl").read_text().splitlines()
    lines[1] = lines[1][: len(lines[1]) // 2]
    (folder / "predictions.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "metrics.json").unlink()
    run_with(overrides)  # the runner skips the damaged line and redoes the row; the line stays in the file
    caplog.set_level("WARNING")
    rejudge = load_script("rejudge")
    code = rejudge.main([f"run_dir={folder}", "llm=openai_compat", f"llm.base_url={server.url}", f"llm.model={MODEL_ID}",
                         "llm.api_key_env=null", "llm.retry_wait_s=0", f"cache_dir={tmp_path / 'cache'}", "bootstrap_samples=20"])  # fmt: skip
    assert code == 0
    assert f"{folder / 'predictions.jsonl'} line 2: not valid JSON" in caplog.text
    section = json.loads((folder / "metrics.json").read_text())["judge2"]
    assert section["overall"]["judge"]["n"] == 3


def test_failed_rows_exit_3_and_are_retried_by_the_same_command(server, tiny_locomo, tmp_path, embed_cache):
    overrides = overrides_for(server.url, tiny_locomo, tmp_path, embed_cache)
    server.mode = "empty"  # every answer and every verdict comes back empty, after the client's retries
    failed = run_py(overrides)
    assert failed.returncode == 3, failed.stderr[-2000:]
    assert failed.stderr.strip().splitlines()[-1].startswith("run finished with failures: 6 rows failed")
    folder = run_dir_for(compose_cfg(overrides))
    assert json.loads((folder / "metrics.json").read_text())["failures"] == {"rows": 6, "ingest_turns": 0}
    server.mode = "good"
    calls = server.calls
    fixed = run_py(overrides)  # the same command, metrics.json present: only the 6 failed rows are redone
    assert fixed.returncode == 0, fixed.stderr[-2000:]
    assert server.calls - calls == 6  # 3 answers and 3 verdicts; nothing else
    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["failures"] == {"rows": 0, "ingest_turns": 0} and metrics["main_metric"] == 1.0
    assert metrics["metadata"]["invocations"] == 2
    assert run_py(overrides).returncode == 0 and server.calls - calls == 6  # now finished: read back


def test_sigterm_records_usage_and_metrics_count_invocations_without_it(tiny_locomo, tmp_path, embed_cache):
    import signal

    with FakeOpenAIServer(mode="hang", hang_s=60) as slow:
        overrides = overrides_for(slow.url, tiny_locomo, tmp_path, embed_cache)
        folder = run_dir_for(compose_cfg(overrides))
        for how in (signal.SIGTERM, signal.SIGKILL):
            calls = slow.calls
            proc = run_py(overrides, popen=True)
            deadline = time.monotonic() + 120
            while slow.calls == calls and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.5)  # waiting on the hung server, inside the run
            assert slow.calls > calls, proc.stderr.read() if proc.poll() is not None else "no call"
            proc.send_signal(how)
            proc.wait(timeout=60)
            assert proc.returncode == (143 if how == signal.SIGTERM else -signal.SIGKILL)
    invocations = json.loads((folder / "provenance.json").read_text())["invocations"]
    assert invocations[0]["ended_by"] == "Terminated" and "llm_usage" in invocations[0]  # SIGTERM: recorded
    assert "llm_usage" not in invocations[1]  # kill -9: nothing can record it
    with FakeOpenAIServer() as good:
        metrics = run_with(overrides_for(good.url, tiny_locomo, tmp_path, embed_cache))
    assert metrics["metadata"]["invocations"] == 3 and metrics["metadata"]["invocations_without_usage"] == 1
