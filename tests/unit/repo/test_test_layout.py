"""Unit tests mirror the packages: the test of ``mosaic/conflict.py`` is
``tests/unit/mosaic/test_conflict.py``, so a mechanism's test is found by its path. No test file lies
directly in tests/unit/ (the flat layout coming back), every folder under it but repo/ (repository-wide
checks) is a package folder of the checkout, and no two test files share a name: the test folders have
no ``__init__.py``, so pytest imports each file by its name alone and a second one of the same name fails."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from tests.conftest import REPO

REPO_WIDE = "repo"  # README numbers, layout, leak test, code defaults, test guards, notebook


def layout_problems(root: Path) -> list[str]:
    unit = root / "tests" / "unit"
    problems = [f"{p.relative_to(root)}: put it in the folder of the package it tests" for p in sorted(unit.glob("test_*.py"))]
    for folder in sorted(p for p in unit.rglob("*") if p.is_dir() and p.name != "__pycache__"):
        mirrored = folder.relative_to(unit)
        if mirrored.parts[0] != REPO_WIDE and not (root / mirrored / "__init__.py").is_file():
            problems.append(f"{folder.relative_to(root)}: no package {mirrored}/ to mirror")
    by_name = defaultdict(list)
    for path in sorted((root / "tests").rglob("test_*.py")):
        by_name[path.name].append(str(path.relative_to(root)))
    problems += [f"{' and '.join(paths)}: one file name twice" for paths in by_name.values() if len(paths) > 1]
    return problems


def test_unit_tests_mirror_the_packages():
    assert layout_problems(REPO) == []


def test_the_check_sees_a_flat_file_a_folder_without_package_and_a_shared_name(tmp_path):
    (tmp_path / "mosaic").mkdir()
    (tmp_path / "mosaic" / "__init__.py").write_text("")
    for path in ("tests/unit/mosaic/test_conflict.py", "tests/unit/repo/test_readme.py"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    assert layout_problems(tmp_path) == []
    for path in ("tests/unit/test_gate.py", "tests/unit/nowhere/test_x.py", "tests/integration/test_conflict.py"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    assert layout_problems(tmp_path) == [
        "tests/unit/test_gate.py: put it in the folder of the package it tests",
        "tests/unit/nowhere: no package nowhere/ to mirror",
        "tests/integration/test_conflict.py and tests/unit/mosaic/test_conflict.py: one file name twice",
    ]
