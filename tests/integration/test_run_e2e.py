"""`python run.py` end to end on a small LoCoMo slice with the real local LLM and both reference
systems; a rerun is served from the cache with identical metrics; kill -9 during predict, rerun:
completes with no duplicate rows and the same metrics as an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SLICE = [
    "experiment=locomo",
    "llm=local_small",
    "logger=none",
    "benchmark.max_sessions=1",
    "benchmark.max_questions=4",
]


def _run(results: Path, cache: Path, extra: list[str], **popen) -> subprocess.CompletedProcess | subprocess.Popen:
    cmd = [sys.executable, "run.py", *SLICE, f"results_dir={results}", f"cache_dir={cache}", *extra]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if popen:
        return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=1500)


def _scores(metrics: dict) -> dict:
    """Everything but timings and metadata: what must be identical across reruns."""
    drop = ("metadata", "latency", "wall")
    return {k: v for k, v in metrics.items() if not any(d in k for d in drop)}


@pytest.mark.parametrize("system", ["rag", "full_context"])
def test_run_twice_identical_and_cached(system, tmp_path):
    cache = tmp_path / "cache"
    first = _run(tmp_path / "a", cache, [f"system={system}"])
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    metrics_path = Path(first.stdout.strip().splitlines()[-1])
    assert metrics_path.name == "metrics.json" and metrics_path.exists()
    metrics = json.loads(metrics_path.read_text())
    assert metrics["metadata"]["llm_model_id"]
    # same command into a fresh results folder: every LLM call from the cache, same scores
    started = time.monotonic()
    second = _run(tmp_path / "b", cache, [f"system={system}"])
    assert second.returncode == 0, second.stderr[-3000:]
    again = json.loads(Path(second.stdout.strip().splitlines()[-1]).read_text())
    assert _scores(again) == _scores(metrics)
    usage = again["metadata"]["llm_usage"]
    assert usage["calls"] > 0 and usage["cached_calls"] == usage["calls"]
    assert time.monotonic() - started < 120


def test_kill_during_predict_then_resume(tmp_path):
    cache = tmp_path / "cache"
    results = tmp_path / "killed"
    proc = _run(results, cache, ["system=rag"], popen=True)
    deadline = time.monotonic() + 900
    predictions: list[Path] = []
    while time.monotonic() < deadline and proc.poll() is None:
        predictions = list(results.glob("runs/**/predictions.jsonl"))
        if predictions and len(predictions[0].read_text().splitlines()) >= 2:
            break
        time.sleep(0.5)
    assert proc.poll() is None, "the run finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    resumed = _run(results, cache, ["system=rag"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    rows = [json.loads(line) for line in predictions[0].read_text().splitlines()]
    keys = [row["key"] for row in rows]
    assert len(keys) == len(set(keys)) == 4
    uninterrupted = _run(tmp_path / "clean", cache, ["system=rag"])
    assert uninterrupted.returncode == 0
    a = json.loads(Path(resumed.stdout.strip().splitlines()[-1]).read_text())
    b = json.loads(Path(uninterrupted.stdout.strip().splitlines()[-1]).read_text())
    assert _scores(a) == _scores(b)
