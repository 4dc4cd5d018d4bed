"""The house rules for commands: no module edits ``sys.path`` (commands run as ``python -m``
from the repository root, so the checkout's packages import plainly), and no user command under scripts/
(nor a research tool) imports a command under scripts/: shared code lives in the packages."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

CHECKED = ["scripts", "research", "eval", "core", "mosaic", "baselines", "tests", "run.py"]
PATH_EDITS = {"insert", "append", "extend", "remove", "clear", "__setitem__"}


def _python_files(*names: str) -> list[Path]:
    files: list[Path] = []
    for name in names:
        path = REPO / name
        files.extend([path] if path.is_file() else sorted(path.rglob("*.py")))
    return files


def _is_sys_path(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name) and node.value.id == "sys"


def sys_path_edits(source: str) -> list[int]:
    """Line numbers where ``source`` changes ``sys.path`` (a method call on it, or an assignment to it or an item)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in PATH_EDITS and _is_sys_path(node.func.value):
            lines.append(node.lineno)
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(_is_sys_path(t) or (isinstance(t, ast.Subscript) and _is_sys_path(t.value)) for t in targets):
                lines.append(node.lineno)
    return sorted(lines)


def script_imports(source: str) -> list[str]:
    """The modules under the ``scripts`` package that ``source`` imports."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name == "scripts" or alias.name.startswith("scripts.")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and (node.module == "scripts" or node.module.startswith("scripts.")):
            found += [f"{node.module}.{alias.name}" if node.module == "scripts" else node.module for alias in node.names]
    return found


def test_the_checks_see_what_they_look_for():
    assert sys_path_edits("import sys\nsys.path.insert(0, 'x')\nsys.path += ['y']\nsys.path[0] = 'z'\n") == [2, 3, 4]
    assert sys_path_edits("import sys\nprint(sys.path)\n") == []
    assert script_imports("from scripts.cache_archive import x\nimport scripts.make_tables\nfrom scripts import publish\n") == [
        "scripts.cache_archive", "scripts.make_tables", "scripts.publish"]
    assert script_imports("from research.error_analysis import load_memory\nfrom .x import y\n") == []


def test_no_module_edits_sys_path():
    edits = {str(path.relative_to(REPO)): found for path in _python_files(*CHECKED) if (found := sys_path_edits(path.read_text()))}
    assert edits == {}, f"sys.path edited (run commands as `python -m <package>.<name>` from the repository root): {edits}"


@pytest.mark.parametrize("package", ["scripts", "research"])
def test_no_command_imports_a_script(package):
    imports = {str(path.relative_to(REPO)): found for path in _python_files(package) if (found := script_imports(path.read_text()))}
    assert imports == {}, f"a command imports a script; move the shared code into eval/ or core/: {imports}"
