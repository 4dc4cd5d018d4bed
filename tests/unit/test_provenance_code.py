"""eval.provenance.code_version: what makes a run's code dirty (and so its rows unpublishable)."""

from __future__ import annotations

import subprocess

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
