"""Temporary, for eval/view/read.py alone: it imports the conflict suite's format from this path and is being
changed on another branch this session. The format lives in eval.benchmarks.conflict.suite; delete this file when
eval/view/read.py imports ``load_suite`` and ``turn_id`` from there."""

from eval.benchmarks.conflict.suite import load_suite, turn_id

__all__ = ["load_suite", "turn_id"]
