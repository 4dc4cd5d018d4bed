"""Command-line tools (vLLM launcher, data download, tables, benchmarks, calibration).

A package so that tests and other code import them plainly (``from scripts import make_tables``)
and they import the harness without touching ``sys.path``. Run them from the repository root as
``python -m scripts.<name>`` (or as ``python scripts/<name>.py`` once the project is installed
with ``pip install -e .``).
"""
