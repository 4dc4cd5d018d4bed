"""User commands: set-up, data and model files, the vLLM server, tables, publishing, comparison,
re-judging, judge calibration and the response-cache archive.

Run each from the repository root as ``python -m scripts.<name>`` (the shell set-up files as
``bash scripts/<name>.sh``). A command holds its command line only: what commands share lives in the
packages (eval/, core/), and no command imports another (tests/unit/repo/test_commands_layout.py). Research
tools (benchmarks, probes, audits) are under research/, run as ``python -m research.<name>``.
"""
