"""Every error a user can cause: one line on stderr naming the key/file and the fix, exit 2, no run folder.

Each case runs ``python run.py`` as a subprocess on data written here (no dataset, no LLM: the LLM points
at a closed port and every case must fail before it would be asked), then checks the exit status, that
stderr is one line with the key or file in it, and that no run folder (results/runs/...) was made.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.unit.eval.benchmarks.locomo.test_locomo import tiny_locomo

HALUMEM_FIXTURES = REPO / "tests" / "fixtures" / "halumem"

# a closed port: any LLM call would fail with a multi-line "unreachable" story, never with the expected line
BASE = ["llm=openai_compat", "llm.base_url=http://127.0.0.1:9", "llm.model=m", "llm.api_key_env=null", "llm.max_retries=1",
        "logger=none", "benchmark.bootstrap_samples=10"]  # fmt: skip

# writes atomic files through os.fsync: a full disk answers the first one (provenance.json) with ENOSPC
DISK_FULL_RUNNER = """
import errno, os, runpy, sys
def full(fd):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
os.fsync = full
sys.argv = ["run.py", *sys.argv[1:]]
runpy.run_path("run.py", run_name="__main__")
"""


@pytest.fixture
def workspace(tmp_path: Path) -> dict[str, Path]:
    locomo = tmp_path / "locomo.json"
    locomo.write_text(json.dumps(tiny_locomo()))
    return {"tmp": tmp_path, "locomo": locomo, "results": tmp_path / "results"}


def run_py(workspace: dict[str, Path], overrides: list[str], runner: str | None = None) -> subprocess.CompletedProcess:
    tmp = workspace["tmp"]
    where = [f"results_dir={workspace['results']}", f"cache_dir={tmp / 'cache'}", f"embedder.cache_path={tmp / 'embed_cache.sqlite'}"]
    head = [sys.executable, "-c", runner] if runner else [sys.executable, "run.py"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "HYDRA_FULL_ERROR": "0"}
    return subprocess.run([*head, *BASE, *where, *overrides], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


def assert_one_line_exit_2(done: subprocess.CompletedProcess, results: Path, *needles: str) -> str:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr[-3000:]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert not (results / "runs").exists(), sorted(str(p) for p in (results / "runs").rglob("*"))
    return lines[0]


def locomo(workspace: dict[str, Path]) -> list[str]:
    return ["benchmark=locomo", f"benchmark.path={workspace['locomo']}"]


@pytest.mark.parametrize(
    ("overrides", "needles"),
    [
        (["+system.foo=1"], ["system.foo: unknown key", "it takes"]),
        (["system=mosaic", "system.conflict.k=-1"], ["system.conflict.k=-1", "must be int >= 1"]),
        (["benchmark.convention=foo"], ["benchmark.convention='foo'", "choose one of"]),
        (["benchmark.conversations=[99]"], ["benchmark.conversations: 99", "pick indices 0..1"]),
        (["system=mosaic", "system.extract.max_entities=0"], ["system.extract.max_entities=0", "must be int >= 1"]),
        (["system=mosaic", "system.conflict.threshold=-3"], ["system.conflict.threshold=-3", "must be float >= 0 and <= 1"]),
        (["system=mosaic", "system.conflict.judge=proposed"], ["system.conflict.judge=proposed", "held_facts >= 1"]),
        (["system=mosaic", "system.retrieval.mode=ivf"], ["system.retrieval.mode='ivf'", "must be 'dual' or 'exact' or 'hnsw'"]),
        (["system=mosaic", "system.conflict.mode=contradict"], ["system.conflict.mode='contradict'", "Input should be 'nli', 'pick'"]),
        # the judge is built from conf/judge only: no default prompt to fall back on, checked before any run folder
        (["judge.prompt=null"], ["judge.prompt: no judge prompt chosen", "judge/prompt=default"]),
        (["judge.prompt.user='Q: {question}'"], ["judge.prompt.user: the template must contain {gold}"]),
        (["judge.max_tokens=0"], ["judge.max_tokens=0", "must be an integer >= 1"]),
    ],
)
def test_config_errors_are_one_line_exit_2_before_any_run_folder(workspace, overrides, needles):
    assert_one_line_exit_2(run_py(workspace, [*locomo(workspace), *overrides]), workspace["results"], *needles)


def test_a_missing_benchmark_file_is_one_line(workspace):
    missing = workspace["tmp"] / "nowhere.json"
    done = run_py(workspace, ["benchmark=locomo", f"benchmark.path={missing}"])
    assert_one_line_exit_2(done, workspace["results"], str(missing), "not found", "python -m scripts.download_data")


def test_a_locomo_format_error_names_file_and_field(workspace):
    data = tiny_locomo()
    del data[1]["conversation"]["speaker_b"]
    workspace["locomo"].write_text(json.dumps(data))
    done = run_py(workspace, locomo(workspace))
    assert_one_line_exit_2(done, workspace["results"], str(workspace["locomo"]), "conv-b", "speaker_b: missing")


def test_a_halumem_format_error_names_file_and_line(workspace):
    broken = HALUMEM_FIXTURES / "malformed_not_json.jsonl"
    done = run_py(workspace, ["benchmark=halumem", f"benchmark.path={broken}"])
    assert_one_line_exit_2(done, workspace["results"], f"{broken}:2", "not valid JSON")


def test_a_conflict_suite_error_names_file_and_field(workspace):
    suite = workspace["tmp"] / "suite.json"
    suite.write_text(json.dumps({"name": "mine", "split": "dev", "contexts": {}, "cases": []}))
    done = run_py(workspace, ["benchmark=conflict", f"benchmark.suite={suite}"])
    assert_one_line_exit_2(done, workspace["results"], str(suite))


def test_a_non_database_embed_cache_is_one_line(workspace):
    (workspace["tmp"] / "embed_cache.sqlite").write_text("this is not a database, it is text " * 40)
    done = run_py(workspace, locomo(workspace))
    assert_one_line_exit_2(done, workspace["results"], "embed_cache.sqlite", "delete the file")


def test_a_full_disk_names_the_file_and_leaves_no_run_folder(workspace):
    done = run_py(workspace, locomo(workspace), runner=DISK_FULL_RUNNER)
    line = assert_one_line_exit_2(done, workspace["results"], "provenance.json", "no space left", "free space")
    assert line.startswith("error (DiskFullError)")


def test_a_failed_start_removes_only_a_folder_it_made_that_holds_nothing_but_its_lock(tmp_path):
    from eval.run_lock import LOCK_NAME, SIDECAR_NAME
    from eval.runner import _remove_unstarted

    fresh = tmp_path / "runs" / "locomo" / "rag" / "abc"
    fresh.mkdir(parents=True)
    (fresh / LOCK_NAME).write_text("")
    (fresh / SIDECAR_NAME).write_text("{}")
    _remove_unstarted(fresh, [fresh, fresh.parent, fresh.parent.parent, tmp_path / "runs"])
    assert not (tmp_path / "runs").exists()  # the folder and the empty parents this call made

    started = tmp_path / "other" / "abc"
    started.mkdir(parents=True)
    (started / LOCK_NAME).write_text("")
    (started / "provenance.json").write_text("{}")  # a record: the resume needs it
    _remove_unstarted(started, [started, started.parent])
    assert (started / "provenance.json").exists()


def test_an_unusable_llm_cache_found_after_the_lock_still_leaves_no_run_folder(workspace):
    """The LLM client is built after the run folder is locked (starting a local server is not cheap); a failure
    there, before anything is recorded, removes the folder this call made."""
    (workspace["tmp"] / "cache").mkdir()
    (workspace["tmp"] / "cache" / "llm_cache.sqlite").write_bytes(b"")
    done = run_py(workspace, locomo(workspace))
    assert_one_line_exit_2(done, workspace["results"], "llm_cache.sqlite is an empty (0-byte) file", "delete it")


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("llm.timeout_s=0", r"llm\.timeout_s=0: must be float > 0 \(core\.llm\.client\.OpenAICompatClient"),
        ("llm.max_retries=0", r"llm\.max_retries=0: must be int >= 1"),
        ("llm.context_tokens=0", r"llm\.context_tokens=0: must be int >= 1 or null"),
        ("answerer.temperature=3", r"answerer\.temperature=3: must be float >= 0 and <= 2 \(eval\.answerer\.Answerer"),
        ("answerer.max_answer_tokens=0", r"answerer\.max_answer_tokens=0: must be int >= 1"),
    ],
)
def test_llm_and_answerer_ranges_are_their_constructor_parameters_types(override, message):
    """The range lives in the signature (core.config_check checks it in validate(), before any run folder)."""
    from core.config_check import ConfigKeyError
    from eval.runner import validate
    from tests.hydra_config import compose_config

    with pytest.raises(ConfigKeyError, match=message):
        validate(compose_config(["benchmark=conflict", "llm=openai_compat", "llm.base_url=http://127.0.0.1:9", "llm.model=m", override]))
