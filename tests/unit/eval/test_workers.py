"""run.workers: the quickstart gives the same metrics at 1 and 8 workers, and a run killed at 4 resumes whole.

Control flow only: a scripted FakeLLM (with a small per-call delay, so that threads finish out of
order) stands in for the model, and a hashed bag-of-words for the embedder. Runs go through
``run.py`` in a subprocess, so the kill is a real SIGKILL.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from eval.context import JsonlRows
from eval.workers import Stage, SystemGuard, run_stage
from tests.conftest import REPO
from tests.fakes import FakeLLM
from tests.hydra_config import compose_config, conf_judge
from tests.unit.eval.benchmarks.locomo.test_locomo import scripted_llm
from tests.unit.baselines.test_rag import BagOfWordsEmbedder

LOCOMO = REPO / "data" / "locomo10.json"


# -- _target_s the subprocess runs build (llm=local's keys are passed and ignored) --------------
def fake_llm(**_: Any) -> FakeLLM:
    """test_locomo's scripted answerer; a judge whose verdict is a hash of its prompt (a mix of
    CORRECT and WRONG, so the bootstrap sees both); each call delayed by a hash of its prompt."""
    llm = scripted_llm()
    base = llm.responder
    unit = float(os.environ.get("FAKE_LLM_DELAY_S", "0.002"))

    def slow(messages, schema):
        digest = int(hashlib.md5(messages[-1]["content"].encode()).hexdigest(), 16)
        time.sleep(unit * (1 + digest % 8))
        if schema is not None:
            return {"reasoning": "-", "label": "WRONG" if digest % 3 == 0 else "CORRECT"}
        return base(messages, schema)

    llm.responder = slow
    return llm


def bow_embedder(**_: Any) -> BagOfWordsEmbedder:
    return BagOfWordsEmbedder()


def _run(results: Path, workers: int, popen: bool = False, delay_s: float = 0.002):
    cmd = [
        sys.executable, "run.py", "experiment=locomo", "logger=none", f"run.workers={workers}",
        f"results_dir={results}", f"cache_dir={results}/cache",
        "llm._target_=tests.unit.eval.test_workers.fake_llm", "embedder._target_=tests.unit.eval.test_workers.bow_embedder",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO), "FAKE_LLM_DELAY_S": str(delay_s)}
    if popen:
        return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return Path(done.stdout.strip().splitlines()[-1])


def _comparable(metrics: dict) -> dict:
    """metrics.json minus timings and run-specific metadata (git sha, clock, overrides)."""
    meta = metrics["metadata"]
    kept = {k: meta[k] for k in ("config_hash", "llm_model_id", "llm_usage", "judge_usage", "system", "ablation")}
    return {**{k: v for k, v in metrics.items() if k not in ("latency", "metadata")}, "metadata": kept}


def _lines(path: Path) -> list[dict]:
    raw = path.read_text(encoding="utf-8")
    assert raw.endswith("\n"), f"{path}: torn last line"
    return [json.loads(line) for line in raw.splitlines()]


needs_locomo = pytest.mark.skipif(not LOCOMO.is_file(), reason="data/locomo10.json missing (python -m scripts.download_data)")


@needs_locomo
def test_quickstart_metrics_identical_at_1_and_8_workers(tmp_path):
    one = _run(tmp_path / "w1", 1)
    eight = _run(tmp_path / "w8", 8)
    assert one.parent.name == eight.parent.name  # the config hash ignores run.workers
    m1, m8 = json.loads(one.read_text()), json.loads(eight.read_text())
    assert m1["overall"]["n"] == 20 and m1["metadata"]["llm_usage"]["calls"] == 40  # 20 answers + 20 judgements
    assert 0 < m1["overall"]["judge"]["mean"] < 1  # a mix of verdicts, so the bootstrap order matters
    assert _comparable(m1) == _comparable(m8)
    keys8 = [r["key"] for r in _lines(eight.parent / "predictions.jsonl")]
    assert sorted(keys8) == sorted(r["key"] for r in _lines(one.parent / "predictions.jsonl"))


@needs_locomo
def test_kill_at_4_workers_resumes_without_duplicate_or_torn_rows(tmp_path):
    results = tmp_path / "killed"
    proc = _run(results, 4, popen=True, delay_s=0.05)
    deadline = time.monotonic() + 120
    predictions = None
    while time.monotonic() < deadline and proc.poll() is None:
        found = list(results.glob("runs/locomo/rag/none/*/predictions.jsonl"))
        if found and len(found[0].read_text().splitlines()) >= 6:
            predictions = found[0]
            break
        time.sleep(0.05)
    assert predictions is not None, f"no predictions before the kill; exit {proc.poll()}: {proc.stdout.read() if proc.poll() is not None else ''}"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    before = predictions.read_text().splitlines()
    assert 6 <= len(before) < 20, "the kill must land mid-predict"
    resumed = _run(results, 4)
    for name in ("predictions", "judgements", "ingest"):
        keys = [r["key"] for r in _lines(resumed.parent / f"{name}.jsonl")]
        assert len(keys) == len(set(keys)), f"{name}: duplicate rows"
    assert len(_lines(resumed.parent / "predictions.jsonl")) == 20
    clean = _run(tmp_path / "clean", 1)
    assert _comparable(json.loads(resumed.read_text()))["overall"] == _comparable(json.loads(clean.read_text()))["overall"]


# -- the helper itself ------------------------------------------------------------------------
class _Ctx:
    def __init__(self, workers: int) -> None:
        self.workers = workers  # RunContext.workers: run.workers, read once by the runner
        self.seen: list[tuple[str, int, int]] = []
        self.progress = lambda stage, done, total: self.seen.append((stage, done, total))


def test_run_stage_keeps_input_order_runs_concurrently_and_reports_progress():
    ctx = _Ctx(8)
    in_flight, peak, lock = [0], [0], threading.Lock()

    def work(i: int) -> int:
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        time.sleep(0.01 * (8 - i % 8))  # later items finish first
        with lock:
            in_flight[0] -= 1
        return i * i

    assert run_stage(ctx, "judge", work, list(range(16))) == [i * i for i in range(16)]
    assert peak[0] == 8
    assert sorted(d for _, d, _ in ctx.seen) == list(range(1, 17)) and {(s, t) for s, _, t in ctx.seen} == {("judge", 16)}


def test_first_error_is_raised_and_workers_is_validated():
    from eval.runner import ConfigError, validate

    def boom(i: int) -> int:
        if i == 3:
            raise RuntimeError("item 3")
        return i

    with pytest.raises(RuntimeError, match="item 3"):
        run_stage(_Ctx(4), "x", boom, list(range(10)))
    for bad in ("0", "-2", "null", "2.5"):  # one validation path: the runner's, before any run folder
        with pytest.raises(ConfigError, match=r"run\.workers="):
            validate(compose_config([f"run.workers={bad}"]))


def test_workers_reach_every_benchmark_only_through_the_run_context():
    """run.workers is checked once (eval.config_checks) and read once (the runner, into RunContext.workers):
    no benchmark or helper looks it up in the config with a default and a check of its own."""
    from eval.context import RunContext

    lookup = re.compile(r'"run\.workers"|\bctx\.cfg\b|\bcfg\.run\.workers\b|\bworkers_of\b')
    readers = {path.relative_to(REPO).as_posix() for path in (REPO / "eval").rglob("*.py") if lookup.search(path.read_text(encoding="utf-8"))}
    assert readers == {"eval/config_checks.py", "eval/runner.py"}
    assert "workers" in RunContext.__dataclass_fields__ and "cfg" not in RunContext.__dataclass_fields__
    assert Stage(_Ctx(3), "x", 1).workers == 3


def test_system_guard_serialises_systems_that_do_not_declare_thread_safety():
    class Unsafe:
        pass

    class Safe:
        parallel_namespaces = True
        parallel_search = True

    assert SystemGuard(Unsafe()).namespace_workers(8) == 1 and SystemGuard(Safe()).namespace_workers(8) == 8
    guard, active, peak = SystemGuard(Unsafe()), [0], [0]

    def search(_: int) -> None:
        with guard.searching():
            active[0] += 1
            peak[0] = max(peak[0], active[0])
            time.sleep(0.005)
            active[0] -= 1

    with Stage(_Ctx(8), "predict", 16) as stage:
        stage.map(search, list(range(16)))
    assert peak[0] == 1


def test_searches_of_parallel_namespaces_are_serialised_per_namespace_only():
    class PerNamespace:
        parallel_namespaces = True  # namespaces independent, but a search changes its namespace's state

    guard, active, peak = SystemGuard(PerNamespace()), {}, {}
    lock = threading.Lock()

    def search(i: int) -> None:
        namespace = f"ns{i % 4}"
        with guard.searching(namespace):
            with lock:
                active[namespace] = active.get(namespace, 0) + 1
                peak[namespace] = max(peak.get(namespace, 0), active[namespace])
                peak["all"] = max(peak.get("all", 0), sum(v for k, v in active.items()))
            time.sleep(0.01)
            with lock:
                active[namespace] -= 1

    with Stage(_Ctx(8), "predict", 32) as stage:
        stage.map(search, list(range(32)))
    assert all(peak[f"ns{i}"] == 1 for i in range(4)) and peak["all"] > 1


def test_row_file_appends_whole_lines_under_threads(tmp_path):
    rows = JsonlRows(tmp_path / "rows.jsonl")
    payload = "x" * 5000  # bigger than one write() chunk of some buffers
    run_stage(_Ctx(16), "w", lambda i: rows.append({"key": f"k{i % 100}", "blob": payload}), list(range(400)))
    lines = _lines(tmp_path / "rows.jsonl")
    assert sorted(r["key"] for r in lines) == sorted(f"k{i}" for i in range(100))
    assert len(JsonlRows(tmp_path / "rows.jsonl")) == 100


def test_conflict_cases_at_4_workers_each_restore_their_own_snapshot(tmp_path):
    from eval.benchmarks.conflict import ConflictBenchmark
    from eval.context import RunContext
    from tests.unit.eval.benchmarks.conflict.test_conflict_benchmark import ScriptedMemory, _Embedder
    from tests.unit.eval.benchmarks.conflict.test_conflict_suite import MINI

    class ThreadSafeScripted(ScriptedMemory):
        parallel_namespaces = True

        def add(self, namespace, turns, session_time=None):
            self.namespaces.add(namespace)
            time.sleep(0.01)  # several probes in flight at once
            return super().add(namespace, turns, session_time)

    path = tmp_path / "mini.json"
    path.write_text(json.dumps(MINI))
    results = {}
    for workers in (1, 4):
        system = ThreadSafeScripted(snapshots=True)
        system.namespaces = set()
        ctx = RunContext(run_dir=tmp_path / f"w{workers}", llm=None, judge=conf_judge(None), workers=workers, embedder=_Embedder(), answerer=None)
        metrics = ConflictBenchmark(suite=str(path), bootstrap_samples=50).run(system, ctx)
        results[workers] = {k: v for k, v in metrics.items() if k != "ingest"}
        assert system.ingests == 1  # the context is ingested once, at any N
        rows = _lines(tmp_path / f"w{workers}" / "cases.jsonl")
        assert sorted(r["id"] for r in rows) == ["l1", "n1", "ok1"]
        if workers > 1:  # probes went to per-worker namespaces restored from the one snapshot
            assert {ns for ns in system.namespaces if "~worker" in ns} and all(not held for held in system.held.values())
    assert results[1] == results[4]


def test_halumem_users_at_2_workers_give_the_same_metrics(tmp_path):
    from eval.benchmarks.halumem import HaluMemBenchmark
    from eval.context import RunContext
    from tests.unit.eval.benchmarks.halumem.test_halumem import TINY, EchoAnswerer, KeywordMemory, _fixed_judge

    class ThreadSafeKeyword(KeywordMemory):
        parallel_namespaces = True

    results = {}
    for workers in (1, 2):
        llm = FakeLLM(_fixed_judge)
        ctx = RunContext(run_dir=tmp_path / f"w{workers}", llm=llm, judge=conf_judge(llm), workers=workers, embedder=None, answerer=EchoAnswerer())
        results[workers] = HaluMemBenchmark(path=str(TINY), bootstrap_samples=100).run(ThreadSafeKeyword(), ctx)
        assert len(_lines(tmp_path / f"w{workers}" / "halumem_users.jsonl")) == 2
    assert results[1] == results[2]


# -- MOSAIC writes several conversations at once -----------------------------------------------
def slow_schema_fake_llm(**kwargs: Any) -> Any:
    """tests.fakes.SchemaFakeLLM with a per-call delay hashed from the prompt, so threads interleave."""
    from tests.fakes import SchemaFakeLLM

    llm = SchemaFakeLLM(**kwargs)
    respond = llm.responder

    def slow(messages, schema):
        digest = int(hashlib.md5(messages[-1]["content"].encode()).hexdigest(), 16)
        time.sleep(0.001 * (1 + digest % 5))
        return respond(messages, schema)

    llm.responder = slow
    return llm


def _three_conversations(path: Path) -> Path:
    """Three invented two-session conversations shaped like locomo10.json."""
    people = [("Ana", "Ben", "cello", "Porto"), ("Caro", "Dev", "violin", "Lyon"), ("Eli", "Fay", "flute", "Graz")]
    data = []
    for n, (a, b, instrument, city) in enumerate(people):
        conversation = {
            "speaker_a": a, "speaker_b": b,
            "session_1_date_time": "1:00 pm on 8 May, 2023", "session_2_date_time": "2:00 pm on 9 June, 2023",
            "session_1": [{"speaker": a, "dia_id": "D1:1", "text": f"I started learning the {instrument} last week."},
                          {"speaker": b, "dia_id": "D1:2", "text": "Nice! I adopted two grey cats."}],
            "session_2": [{"speaker": a, "dia_id": "D2:1", "text": f"My {instrument} teacher lives in {city}."},
                          {"speaker": b, "dia_id": "D2:2", "text": "We have three cats now, one more since May."}],
        }  # fmt: skip
        qa = [{"question": f"What instrument is {a} learning?", "answer": instrument, "evidence": ["D1:1"], "category": 4},
              {"question": f"How many cats does {b} have?", "answer": "3", "evidence": ["D2:2"], "category": 4}]  # fmt: skip
        data.append({"sample_id": f"conv-w{n}", "conversation": conversation, "qa": qa})
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_mosaic_metrics_identical_at_1_and_4_workers(tmp_path):
    """MOSAIC declares parallel_namespaces: three conversations are written at once at run.workers=4,
    and every metric (write counters, mechanism counts, costs) equals the one-worker run's."""
    from omegaconf import OmegaConf, open_dict

    from eval.runner import run
    from tests.hydra_config import compose_config
    from tests.unit.eval.test_experiments_smoke import _on_fakes

    data = _three_conversations(tmp_path / "three.json")
    metrics = {}
    for workers in (1, 4):
        overrides = ["experiment=locomo", "system=mosaic", f"benchmark.path={data}", "benchmark.conversations=null",
                     "benchmark.max_sessions=null", "benchmark.max_questions=null", f"run.workers={workers}"]  # fmt: skip
        cfg = _on_fakes(compose_config(overrides), tmp_path / f"w{workers}")
        with open_dict(cfg):
            cfg.llm = OmegaConf.create({"_target_": "tests.unit.eval.test_workers.slow_schema_fake_llm"})
        metrics[workers] = run(cfg, overrides)
    one, four = metrics[1], metrics[4]
    assert one["overall"]["n"] == 6 and one["metadata"]["config_hash"] == four["metadata"]["config_hash"]
    system_one, system_four = one["system_metrics"], four["system_metrics"]
    assert system_one["write"]["turns"] == 12 and system_one["extraction"]["turns"] == 12
    for part in ("write", "extraction", "gate", "conflict", "mechanisms"):
        assert system_one[part] == system_four[part], part
    timing = ("seconds_per_turn",)
    assert {k: v for k, v in system_one["cost_per_turn"].items() if k not in timing} == \
        {k: v for k, v in system_four["cost_per_turn"].items() if k not in timing}  # fmt: skip
    assert _comparable(one)["overall"] == _comparable(four)["overall"]
