"""The W&B logger's output, read back from the offline run it writes (no network, no account).

wandb >= 0.2x writes an offline run as one ``run-<id>.wandb`` file: a LevelDB-style log (7-byte
header, 32 KiB blocks, records of checksum/length/type) of protobuf ``Record`` messages. The test
reads that log with wandb's own protobuf classes, so it checks what ``wandb sync`` would upload.
"""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from eval.loggers import NullLogger, RunLogger, WandbLogger

BLOCK = 32 * 1024
HEADER = 7  # ":W&B" + magic (2 bytes) + version
FULL, LAST = 1, 4


def read_offline_run(run_dir: Path, wait_s: float = 60.0) -> list[Any]:
    """The protobuf records of the single offline W&B run under ``run_dir/wandb``.

    wandb-core writes the file from its own process and may still be writing when ``run.finish()``
    returns in-process, so this reads until the run's ``exit`` record is there (or ``wait_s`` passes).
    """
    deadline = time.monotonic() + wait_s
    while True:
        records = _parse_offline_run(run_dir)
        if any(r.WhichOneof("record_type") == "exit" for r in records) or time.monotonic() > deadline:
            return records
        time.sleep(0.5)


def _parse_offline_run(run_dir: Path) -> list[Any]:
    from wandb.proto import wandb_internal_pb2

    files = list((run_dir / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(files) == 1, files
    raw = files[0].read_bytes()
    assert raw[:4] == b":W&B"
    records, pending, pos = [], b"", HEADER
    while pos + HEADER <= len(raw):
        left = BLOCK - pos % BLOCK
        _checksum, length, kind = struct.unpack("<IHB", raw[pos : pos + 7])
        if left < 7 or (length == 0 and kind == 0):  # block trailer / padding
            pos += left
            continue
        pending += raw[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            records.append(record)
            pending = b""
    return records


@pytest.fixture(scope="module")
def logged(tmp_path_factory) -> tuple[Path, list[Any]]:
    run_dir = tmp_path_factory.mktemp("results") / "runs" / "locomo" / "rag" / "no_ncs" / "abc123def456"
    run_dir.mkdir(parents=True)
    config = {"seed": 7, "system": {"name": "rag", "chunk_turns": 1}}
    metrics = {
        "overall": {"judge": {"mean": 0.625, "ci_low": 0.25, "ci_high": 1.0, "n": 8}, "judge_failures": 1},
        "finished": True,
        "convention": "locomo",  # not a scalar number: not in the summary
        "metadata": {"wall_s_this_invocation": 12.5},  # run metadata: not in the summary
    }
    table = pd.DataFrame({"overall J": ["62.5 [25.0, 100.0]"]}, index=pd.Index(["rag"], name="system"))
    logger = WandbLogger(project="mosaic-bench-test", mode="offline")
    assert isinstance(logger, RunLogger)
    logger.log_run(run_dir, config, metrics, table)
    return run_dir, read_offline_run(run_dir)


def _of(records: list[Any], kind: str) -> list[Any]:
    return [getattr(r, kind) for r in records if r.WhichOneof("record_type") == kind]


def test_run_is_named_after_its_results_folder_and_carries_the_config(logged):
    _, records = logged
    (run,) = _of(records, "run")
    assert run.project == "mosaic-bench-test"
    assert run.display_name == "locomo/rag/abc123def456"
    config = {item.key: json.loads(item.value_json) for item in run.config.update if item.key != "_wandb"}
    assert config == {"seed": 7, "system": {"name": "rag", "chunk_turns": 1}}


def test_summary_holds_every_scalar_metric_flattened_and_no_metadata(logged):
    _, records = logged
    summary = {item.key: json.loads(item.value_json) for s in _of(records, "summary") for item in s.update if item.key and not item.key.startswith("_")}
    assert summary == {
        "overall/judge/mean": 0.625,
        "overall/judge/ci_low": 0.25,
        "overall/judge/ci_high": 1.0,
        "overall/judge/n": 8.0,
        "overall/judge_failures": 1.0,
        "finished": 1.0,
    }


def test_table_is_logged_with_its_index_as_a_column(logged):
    run_dir, _ = logged
    (table_file,) = (run_dir / "wandb").glob("offline-run-*/files/media/table/table_*.table.json")
    assert json.loads(table_file.read_text()) == {"columns": ["system", "overall J"], "data": [["rag", "62.5 [25.0, 100.0]"]]}


def test_null_logger_writes_nothing(tmp_path):
    NullLogger().log_run(tmp_path, {"seed": 0}, {"overall": {"judge": {"mean": 1.0}}}, None)
    assert list(tmp_path.iterdir()) == []
