"""W&B (offline): a sweep's run carries group and job_type, progress while it runs, and metrics tables.

The quickstart runs through ``run.py -m`` on the scripted FakeLLM of test_workers (control flow
only); the offline run file is then read back record by record with W&B's own protobuf types.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from eval.loggers import NullLogger, WandbLogger, client_usage, progress_hook
from tests.unit.eval.test_workers import LOCOMO, REPO

BLOCK = 32 * 1024  # W&B's run file: LevelDB-style log blocks after a 7-byte ":W&B" header


def wandb_records(path: Path) -> Iterator[Any]:
    """Every record of an offline ``run-<id>.wandb`` file, as ``wandb_internal_pb2.Record``."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path}: not a W&B run file"
    pos, pending = 7, b""
    while pos + 7 <= len(data):
        room = BLOCK - pos % BLOCK
        if room < 7:  # block trailer: padding
            pos += room
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        pos += 7
        chunk, pos = data[pos : pos + length], pos + length
        if kind == 0:  # zero-filled tail
            break
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):  # full record, or the last piece of one
            record = pb.Record()
            record.ParseFromString(pending)
            yield record


def history(records: list[Any]) -> list[dict[str, Any]]:
    rows = []
    for r in records:
        if r.WhichOneof("record_type") == "history":
            rows.append({item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in r.history.item})
    return rows


@pytest.mark.skipif(not LOCOMO.is_file(), reason="data/locomo10.json missing (python -m scripts.download_data)")
def test_offline_sweep_run_has_group_job_type_progress_and_tables(tmp_path):
    cmd = [
        sys.executable, "run.py", "-m", "experiment=locomo", "system=rag", "logger=wandb_offline",
        "logger.progress_every_s=0", "run.workers=4", f"results_dir={tmp_path}", f"cache_dir={tmp_path}/cache",
        "llm._target_=tests.unit.eval.test_workers.fake_llm", "embedder._target_=tests.unit.eval.test_workers.bow_embedder",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO), "WANDB_MODE": "offline", "FAKE_LLM_DELAY_S": "0.002"}
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    files = list(tmp_path.glob("runs/locomo/rag/none/*/wandb/offline-run-*/run-*.wandb"))
    assert len(files) == 1, files
    records = list(wandb_records(files[0]))
    run = next(r.run for r in records if r.WhichOneof("record_type") == "run")
    assert run.run_group == "locomo" and run.job_type == "rag"  # the sweep's name; the system

    rows = history(records)
    ingest = [row for row in rows if "progress/ingest/done" in row]
    assert [r["progress/ingest/done"] for r in ingest] == [1, 2, 3] and ingest[-1]["progress/ingest/total"] == 3  # each session
    assert rows.index(ingest[0]) < min(i for i, row in enumerate(rows) if "progress/predict/done" in row)  # before any answer
    predict = [row for row in rows if "progress/predict/done" in row]
    judge = [row for row in rows if "progress/judge/done" in row]
    assert [r["progress/predict/done"] for r in predict] == list(range(1, 21))  # every item (progress_every_s=0)
    assert [r["progress/judge/done"] for r in judge] == list(range(1, 21)) and judge[-1]["progress/judge/total"] == 20
    calls = [r["progress/llm/calls"] for r in predict + judge]
    assert calls == sorted(calls) and calls[0] >= 1 and calls[-1] == 40  # calls grew while the run went
    tables = [row for row in rows if "metrics/_type" in row]
    assert len(tables) == 1 and tables[0]["metrics/_type"] == tables[0]["table/_type"] == "table-file"
    held = json.loads((files[0].parent / "files" / tables[0]["metrics/path"]).read_text())
    assert held["columns"] == ["metric", "value"] and ["overall/n", 20] in held["data"]
    paper = json.loads((files[0].parent / "files" / tables[0]["table/path"]).read_text())
    assert "overall J" in paper["columns"] and paper["data"][0][0] == "rag"
    summary = {}
    for r in records:
        if r.WhichOneof("record_type") == "summary":
            summary.update({item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in r.summary.update})
    metrics = json.loads(next(tmp_path.glob("runs/locomo/rag/none/*/metrics.json")).read_text())
    assert summary["overall/judge/mean"] == pytest.approx(metrics["overall"]["judge"]["mean"])


def test_progress_hook_is_none_for_file_only_logging_and_throttles(tmp_path, monkeypatch):
    assert progress_hook(NullLogger(), tmp_path, {}, lambda: {}) is None
    logged: list[dict] = []

    class FakeRun:
        def log(self, payload):
            logged.append(payload)

    logger = WandbLogger(progress_every_s=3600)
    monkeypatch.setattr(logger, "_start", lambda run_dir, config: FakeRun())
    hook = logger.progress_hook(tmp_path, {}, client_usage())
    for i in range(1, 11):
        hook("predict", i, 10)
    assert [p["progress/predict/done"] for p in logged] == [1, 10]  # first, then the stage's last item
