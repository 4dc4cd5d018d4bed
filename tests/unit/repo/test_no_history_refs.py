"""Code and configuration say why, not when: no "issue N" reference and no commit SHA in them. History
(which issue asked for a change, at which commit a number was measured) lives in git and
docs/results_history.md, where it does not go stale when the code moves on.

A commit SHA is a word of 7 to 40 hex digits with at least one digit and one letter, unless it is
* a run hash (exactly 12 hex digits, eval.runner's config hash: run folders are named by it),
* part of a path or name (a ``/``, ``-``, ``_`` or ``.`` next to it), or
* an upstream data pin (a ``*_COMMIT = "<sha>"`` constant: the data's version, not this repository's history).
Files listed in history_refs_allowlist.txt are skipped until their owners sweep them; the list only shrinks."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.conftest import REPO

CODE_SUFFIXES = (".py", ".yaml", ".yml", ".sh", ".toml", ".js", ".css", ".cfg", ".ini")
NOT_CODE = ("results/", "data/", "docs/", "tests/fixtures/")
ALLOWLIST = Path(__file__).with_name("history_refs_allowlist.txt")
ISSUE = re.compile(r"\bissues?\s*#?\d+", re.IGNORECASE)
HEX_WORD = re.compile(r"(?<![\w/.\-])[0-9a-f]{7,40}(?![\w/\-])")
UPSTREAM_PIN = re.compile(r"\b[A-Z][A-Z0-9_]*_COMMIT\s*=\s*[\"'][0-9a-f]{40}[\"']")
RUN_HASH_LENGTH = 12


def commit_shas(line: str) -> list[str]:
    """The words of ``line`` that read as commit SHAs (see the module docstring for what does not)."""
    if UPSTREAM_PIN.search(line):
        return []
    words = (m.group() for m in HEX_WORD.finditer(line))
    return [w for w in words if len(w) != RUN_HASH_LENGTH and re.search(r"\d", w) and re.search(r"[a-f]", w)]


def history_refs(path: Path, text: str) -> list[str]:
    """One ``path:line: what`` entry per issue reference or commit SHA in ``text``."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        found += [f"{path}:{number}: {m.group()!r}" for m in ISSUE.finditer(line)]
        found += [f"{path}:{number}: commit {sha}" for sha in commit_shas(line)]
    return found


def code_files(root: Path) -> list[str]:
    tracked = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True).stdout.split()
    return [f for f in tracked if (f.endswith(CODE_SUFFIXES) or f == ".ci/run") and not f.startswith(NOT_CODE)]


def allowlisted() -> set[str]:
    lines = (line.split("#", 1)[0].strip() for line in ALLOWLIST.read_text().splitlines())
    return {line for line in lines if line}


def test_no_issue_numbers_or_commit_shas_in_code_or_conf():
    skipped = allowlisted()
    found = []
    for name in code_files(REPO):
        if name not in skipped and (REPO / name).is_file():
            found += history_refs(Path(name), (REPO / name).read_text(errors="replace"))
    assert found == [], "say why in present tense; history goes to git and docs/results_history.md:\n" + "\n".join(found)


def test_the_allowlist_names_only_files_that_still_need_it():
    """An allow-listed file that is clean (or gone) comes off the list, so the list only shrinks."""
    stale = sorted(name for name in allowlisted() if not (REPO / name).is_file() or not history_refs(Path(name), (REPO / name).read_text(errors="replace")))
    assert stale == [], f"take these off {ALLOWLIST.name}: {stale}"


def test_the_check_sees_issue_numbers_and_shas_but_not_run_hashes_paths_or_pins():
    issue, sha = "issue", "9495" + "b5c"  # built here so that this file passes its own check
    text = "\n".join([
        f"# write cost ({issue} 19): one call",  # an issue number
        f'"""{issue.title()} 40, item 3: a reader crashed."""',
        f"# measured at {sha} on the quickstart",  # a short SHA
        f"# see #12 and {issue}s 7",
        'RUN = RUNS / "rag" / "none" / "26cb1a02f252"',  # a run hash: a folder name
        "path = 'results/bench/write_cost_replay_19a4040e905e.json'",  # part of a name
        'AUDIT_COMMIT = "9493fb4b4af4256ed17a18e8fd0b3cfdeec29539"',  # an upstream data pin
        "uuid = 'a1b2c3d4-0000-4000-8000-000000000001'",
        "# tissue 3 and deadbeef and 1234567",  # no word 'issue'; hex without a digit; digits without a letter
    ])
    assert history_refs(Path("x.py"), text) == [
        f"x.py:1: '{issue} 19'",
        f"x.py:2: '{issue.title()} 40'",
        f"x.py:3: commit {sha}",
        f"x.py:4: '{issue}s 7'",
    ]
