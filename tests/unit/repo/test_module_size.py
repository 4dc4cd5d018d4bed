"""No module in mosaic/ or baselines/ runs over 500 lines: one that does holds more than one mechanism, and is split
along its seams (docs/design.md, Tests)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import REPO

MAX_LINES = 500
PACKAGES = ("mosaic", "baselines")


def oversized(root: Path) -> list[str]:
    """Each module over MAX_LINES, as 'path: N lines'."""
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > MAX_LINES:
                found.append(f"{path.relative_to(root)}: {lines} lines")
    return found


def test_no_module_in_mosaic_or_baselines_is_over_500_lines():
    assert oversized(REPO) == []


def test_the_check_sees_a_long_module_and_passes_one_at_the_limit(tmp_path):
    (tmp_path / "mosaic").mkdir()
    (tmp_path / "baselines").mkdir()
    (tmp_path / "mosaic" / "ok.py").write_text("x = 1\n" * MAX_LINES)
    (tmp_path / "baselines" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    assert oversized(tmp_path) == [f"baselines/long.py: {MAX_LINES + 1} lines"]
