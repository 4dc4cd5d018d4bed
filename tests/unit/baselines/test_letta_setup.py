"""The Letta environment is built on first use of system=memgpt, not by the set-up."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from baselines.memgpt import ensure_letta
from tests.conftest import REPO


def fake_setup(root: Path, body: str) -> Path:
    """A stand-in for scripts/setup_letta.sh under ``root``/scripts, counting its runs in ``root``/runs."""
    script = root / "scripts" / "setup_letta.sh"
    script.parent.mkdir(parents=True)
    script.write_text(f"#!/usr/bin/env bash\nset -e\necho run >> runs\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_missing_managed_env_is_built_once(tmp_path):
    script = fake_setup(tmp_path, "mkdir -p .venv-letta/bin && touch .venv-letta/bin/letta")
    managed = tmp_path / ".venv-letta" / "bin" / "letta"
    ensure_letta(str(managed), setup_script=script, managed=managed)
    assert managed.exists()
    ensure_letta(str(managed), setup_script=script, managed=managed)  # present: nothing is run again
    assert (tmp_path / "runs").read_text().count("run") == 1


def test_failed_build_names_its_log(tmp_path):
    script = fake_setup(tmp_path, "exit 7")
    managed = tmp_path / ".venv-letta" / "bin" / "letta"
    with pytest.raises(RuntimeError, match=r"exit 7.*\.venv-letta-setup\.log"):
        ensure_letta(str(managed), setup_script=script, managed=managed)


def test_user_install_elsewhere_is_never_built(tmp_path):
    script = fake_setup(tmp_path, "exit 0")
    with pytest.raises(FileNotFoundError, match="system.letta_bin"):
        ensure_letta(str(tmp_path / "elsewhere" / "letta"), setup_script=script, managed=tmp_path / ".venv-letta" / "bin" / "letta")
    assert not (tmp_path / "runs").exists()


def test_setup_builds_letta_only_when_asked():
    setup = (REPO / "scripts" / "setup.sh").read_text()
    build_lines = [line for line in setup.splitlines() if "setup_letta.sh" in line and not line.lstrip().startswith("#")]
    assert build_lines and all(line.startswith("  ") for line in build_lines), "setup.sh must build Letta only under --with-letta"
    assert '"${1:-}" = "--with-letta"' in setup
