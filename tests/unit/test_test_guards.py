"""Tests that could not fail or never ran (issue 40, item 15): the MemGPT fixture fails, never skips,
when the Letta server's venv is missing, so a suite without it cannot pass by skipping."""

from __future__ import annotations

import pytest

from tests.integration.test_memgpt import require_letta


def test_memgpt_tests_fail_rather_than_skip_without_letta(tmp_path, monkeypatch):
    monkeypatch.delenv("CI", raising=False)  # outside CI too: a skip is how they silently never ran
    with pytest.raises(pytest.fail.Exception, match="setup_letta.sh"):
        require_letta(tmp_path / ".venv-letta" / "bin" / "letta")
    present = tmp_path / "letta"
    present.write_text("")
    require_letta(present)  # present: no complaint
