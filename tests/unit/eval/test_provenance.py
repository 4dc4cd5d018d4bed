"""eval.provenance: what makes a run's code dirty (and so its rows unpublishable), and which files are its inputs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from eval import provenance


def _git(repo, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True, capture_output=True)


def test_a_changed_output_file_leaves_the_code_clean_and_a_changed_code_file_does_not(tmp_path, monkeypatch):
    """conversation_rows exports its cache archive under results/ after every row; before OUTPUT_PATHS, the
    next row then started "dirty" and could not be published."""
    (tmp_path / "results" / "caches").mkdir(parents=True)
    (tmp_path / "results" / "caches" / "archive.jsonl.gz").write_bytes(b"old")
    (tmp_path / "memory.py").write_text("x = 1\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "start")
    monkeypatch.setattr(provenance, "REPO", tmp_path)
    clean = provenance.code_version()
    assert clean["dirty"] is False and len(clean["git_sha"]) == 40
    (tmp_path / "results" / "caches" / "archive.jsonl.gz").write_bytes(b"new responses")
    assert provenance.code_version() == clean
    (tmp_path / "memory.py").write_text("x = 2\n")
    dirty = provenance.code_version()
    assert dirty["dirty"] is True and dirty["diff_sha256"] and not provenance.same_code(dirty, clean)


def _repo_with_code_docs_and_prompts(tmp_path, monkeypatch):
    (tmp_path / "docs").mkdir()
    (tmp_path / "conf" / "judge" / "prompt").mkdir(parents=True)
    (tmp_path / "tests").mkdir()
    (tmp_path / "memory.py").write_text("x = 1\n")
    (tmp_path / "README.md").write_text("# readme\n")
    (tmp_path / "docs" / "guide.md").write_text("words\n")
    (tmp_path / "conf" / "config.yaml").write_text("seed: 0\n")
    (tmp_path / "conf" / "judge" / "prompt" / "default.yaml").write_text("user: '{question} {gold} {prediction}'\n")
    (tmp_path / "tests" / "test_memory.py").write_text("def test_x(): pass\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "start")
    monkeypatch.setattr(provenance, "REPO", tmp_path)


def test_docs_readme_and_test_edits_keep_the_code_identity_committed_or_not(tmp_path, monkeypatch):
    """A README-only commit made a half-finished run refuse to resume (CodeChangedError)."""
    _repo_with_code_docs_and_prompts(tmp_path, monkeypatch)
    started = provenance.code_version()
    (tmp_path / "README.md").write_text("# readme, edited\n")
    (tmp_path / "docs" / "guide.md").write_text("more words\n")
    (tmp_path / "tests" / "test_memory.py").write_text("def test_y(): pass\n")
    assert provenance.code_version()["dirty"] is False  # uncommitted docs and tests are not dirty code
    _git(tmp_path, "commit", "-q", "-am", "docs only")
    now = provenance.code_version()
    assert now["git_sha"] != started["git_sha"] and provenance.same_code(started, now)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    record = provenance.Provenance(run_dir)
    record.start(started, {}, False, lambda path, payload: path.write_text(json.dumps(payload)))
    assert record.check_resume(now, allow_code_change=False) is not None  # resumes, no CodeChangedError


@pytest.mark.parametrize("path", ["memory.py", "conf/config.yaml", "conf/judge/prompt/default.yaml"])
def test_code_config_and_prompt_edits_change_the_code_identity(path, tmp_path, monkeypatch):
    _repo_with_code_docs_and_prompts(tmp_path, monkeypatch)
    started = provenance.code_version()
    (tmp_path / path).write_text((tmp_path / path).read_text() + "# changed\n")
    edited = provenance.code_version()
    assert edited["dirty"] is True and not provenance.same_code(started, edited)
    _git(tmp_path, "commit", "-q", "-am", "code change")
    committed = provenance.code_version()
    assert committed["dirty"] is False and not provenance.same_code(started, committed)
    assert provenance.same_code(edited, committed)  # the same content, committed or not
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    record = provenance.Provenance(run_dir)
    record.start(started, {}, False, lambda p, payload: p.write_text(json.dumps(payload)))
    with pytest.raises(provenance.CodeChangedError):
        record.check_resume(committed, allow_code_change=False)


class ReadsTwoFiles:
    """A benchmark that declares its input files (core.api.DeclaresInputs); ``notes`` names a file but is no input."""

    input_parameters = ("data", "extra")

    def __init__(self, data: str = "", extra: str = "default_extra.json", notes: str = "") -> None: ...


def test_run_inputs_are_the_files_the_classes_declare_not_any_string_naming_a_file(tmp_path, monkeypatch):
    from omegaconf import OmegaConf

    from eval.provenance import input_files, input_hashes

    monkeypatch.chdir(tmp_path)
    for name in ("data.json", "notes.txt", "default_extra.json"):
        (tmp_path / name).write_text(name)
    block = {"_target_": f"{__name__}.ReadsTwoFiles", "data": "data.json", "notes": "notes.txt"}
    cfg = OmegaConf.create({"benchmark": block, "system": {"_target_": "baselines.rag.RagMemory", "name": "notes.txt"}})
    # the constructor's default names the extra file the run reads; notes and the system's strings are no input
    assert input_files(cfg) == {"benchmark.data": Path("data.json"), "benchmark.extra": Path("default_extra.json")}
    (tmp_path / "default_extra.json").unlink()  # a declared file that is absent is not hashed
    assert list(input_hashes(cfg)) == ["benchmark.data"]
