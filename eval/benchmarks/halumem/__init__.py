"""HaluMem (arXiv 2511.03506), one module per mechanism.

``data``: the published file format (schema, typed records, JSONL and hub loaders);
``judge``: HaluMem's four LLM judges; ``metrics``: pure functions on judged rows;
``benchmark``: the run loop and aggregation (the protocol is in its docstring);
``table``: Table 2 from metrics.json files; ``public``: what of a run folder is published (no dataset text).
"""

# metrics.json files written before the split record ``benchmark_target:
# eval.benchmarks.halumem.HaluMemBenchmark``; make_tables resolves that path through this name.
from eval.benchmarks.halumem.benchmark import HaluMemBenchmark

__all__ = ["HaluMemBenchmark"]
