"""The injected-conflict suite (paper Table 3, plus false alarms), one module per mechanism.

``suite``: the suite file format (contexts, cases, dev/eval split), validated on load; ``benchmark``:
``ConflictBenchmark``, the run loop (context snapshots, probes, resume); ``metrics``: one probe's row from the
system's AddReport and the suite's rates; ``table``: Table 3 and its headline view from metrics.json files.
MOSAIC's contradiction judgement on a labelled bank is eval.benchmarks.conflict_judge_bank (a bank judge, not
this benchmark).
"""

# conf/benchmark/conflict.yaml and every published conflict run's config.yaml and metrics.json name
# ``eval.benchmarks.conflict.ConflictBenchmark``: the target is part of each run's config hash, hence its folder.
from eval.benchmarks.conflict.benchmark import ConflictBenchmark

__all__ = ["ConflictBenchmark"]
