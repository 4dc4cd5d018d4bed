"""Research utilities: benchmarks beside the LLM, probes and audits of finished runs, calibration aids.

Not user commands (those live in ``scripts/``): each one answers a question asked while building or
checking the harness, and its output backs a number or a choice recorded in docs/ or results/bench/.
Run them from the repository root as ``python -m research.<name>``.
"""
