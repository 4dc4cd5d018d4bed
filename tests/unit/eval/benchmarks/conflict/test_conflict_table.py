"""Table 3 (eval.benchmarks.conflict.table): the paper's labelled column and "0 by construction" for systems with no
conflict signal."""

from __future__ import annotations

from eval.benchmarks.conflict import ConflictBenchmark
from eval.benchmarks.conflict.metrics import aggregate, score_case
from eval.benchmarks.conflict.table import conflict_table
from eval.benchmarks.conflict.suite import parse_suite
from tests.unit.eval.benchmarks.conflict.test_conflict_suite import MINI, _event, _report


def test_table_has_paper_column_and_zero_by_construction():
    suite = parse_suite(MINI)
    rows = [score_case(suite, c, _report()) for c in suite.cases]
    silent = {**aggregate(rows, samples=50), "conflict_signal": False, "metadata": {"system": "rag"}, "suite": "mini"}
    loud_rows = [score_case(suite, suite.cases[0], _report(updated=[_event(["c:0"])]))] + rows[1:]
    loud = {**aggregate(loud_rows, samples=50), "conflict_signal": None, "metadata": {"system": "mosaic"}, "suite": "mini"}
    sliced = {**loud, "metadata": {"system": "mem0"}, "slice": {"cases_per_group": 3, "limit_cases": None}}
    table = ConflictBenchmark.make_table([silent, loud, sliced])
    assert table.loc["mosaic", "suite"] == "mini" and table.loc["mem0", "suite"] == "mini (slice: first 3 per group)"
    assert list(table.columns[:8]) == ["suite", "overall", "numeric", "semantic", "logical", "explicit", "implicit", "false alarms"]
    assert (table.loc["rag", ["overall", "numeric", "false alarms"]] == "0 by construction").all()
    assert table.loc["mosaic", "numeric"].startswith("100.0")
    paper = [i for i in table.index if i.startswith("paper: MOSAIC 66 overall")]
    assert len(paper) == 1 and table.loc[paper[0], "implicit"] == "72.7" and table.loc[paper[0], "false alarms"] == "not reported"
    assert conflict_table([]).shape[0] == 1  # only the paper row
