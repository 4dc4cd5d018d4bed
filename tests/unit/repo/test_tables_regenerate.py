"""The committed tables are what the published runs give today: generate-and-compare.

``python -m scripts.make_tables`` builds results/tables/ from results/published/ and the scaling benchmark's
files; this test builds them again into a temporary folder and requires every committed file to be the
generated one, byte for byte, and no file to be missing or extra. With test_readme_numbers (the README's table
sections are results/tables/ verbatim) a number retyped in a table, in the README or in a docs line that cites
a published run fails here instead of passing every test.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from scripts.make_tables import main as make_tables
from tests.conftest import REPO
from tests.unit.repo.test_readme_numbers import result_sources

TABLES = REPO / "results" / "tables"
AUDIT = REPO / "data" / "locomo-audit" / "errors.json"
# a cell as eval.metrics.format_ci writes it: "46.0 [32.0, 60.0]"
CI_CELL = re.compile(r"-?\d+(?:\.\d+)? \[-?\d+(?:\.\d+)?, -?\d+(?:\.\d+)?\]")
RUN_HASH = re.compile(r"(?<![0-9a-f])[0-9a-f]{12}(?![0-9a-f])")


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not AUDIT.is_file():  # the LoCoMo tables' audited-gold columns are computed from it
        pytest.skip(f"{AUDIT.relative_to(REPO)} not fetched (python -m scripts.download_data)")
    out = tmp_path_factory.mktemp("tables")
    assert make_tables(["--out", str(out), "--readme", ""]) == 0
    return out


# written by other commands from their own results (python -m scripts.judge_banks: results/bench/judge_banks/;
# python -m scripts.compare_backends: run folders found by config hash)
MADE_ELSEWHERE = {"judges.md", "backends.md"}


def test_committed_tables_are_the_ones_the_published_runs_give(generated):
    committed = {p.name for p in TABLES.iterdir() if p.is_file() and p.name not in MADE_ELSEWHERE}
    made = {p.name for p in generated.iterdir() if p.is_file()}
    assert committed == made, f"results/tables/ and a fresh make_tables differ in files: {sorted(committed ^ made)}"
    stale = [name for name in sorted(made) if (TABLES / name).read_bytes() != (generated / name).read_bytes()]
    assert not stale, f"results/tables/ files that are not what the published runs give (run python -m scripts.make_tables): {stale}"


def published_hashes() -> set[str]:
    return {p.name for p in (REPO / "results" / "published").rglob("*") if p.is_dir() and RUN_HASH.fullmatch(p.name)}


def cited_cells(text: str, hashes: set[str]) -> list[tuple[int, str]]:
    """(line, CI cell) for every CI cell on a line that names a published run folder by its config hash."""
    return [(number, cell) for number, line in enumerate(text.splitlines(), 1)
            if set(RUN_HASH.findall(line)) & hashes for cell in CI_CELL.findall(line)]  # fmt: skip


def test_docs_lines_citing_a_published_run_quote_its_cells_as_published():
    """docs/halumem.md's table of rows names each run (``rag/none/5189dea3dec3``): its cells must be the published
    ones, so 96.8 retyped as 99.8 there fails."""
    hashes, sources = published_hashes(), result_sources()
    assert hashes
    unsourced = [f"{doc.relative_to(REPO)}:{number}: {cell}" for doc in sorted((REPO / "docs").glob("*.md"))
                 for number, cell in cited_cells(doc.read_text(encoding="utf-8"), hashes) if cell not in sources]  # fmt: skip
    assert not unsourced, f"cells on lines citing a published run that no results file holds: {unsourced}"


def test_the_cited_cell_check_catches_a_retyped_cell():
    hashes = {"5189dea3dec3"}
    line = "| rag over turns (`rag/none/5189dea3dec3`) | 99.8 [91.9, 100.0] / 0.0 | x |\n| other 1.0 [0.0, 2.0] |"
    assert cited_cells(line, hashes) == [(1, "99.8 [91.9, 100.0]")]
