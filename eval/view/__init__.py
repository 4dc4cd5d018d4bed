"""Run folders as one self-contained HTML page (``python -m scripts.view``).

``read`` turns a run folder into plain data through the readers the tables and ``scripts.compare_runs``
use (``eval.rows.read_rows``, the benchmarks' outcome readers in eval/benchmarks/<name>/compare.py,
``mosaic.store.MemoryStore``), so the page and the tables agree on what a run holds; ``page`` writes that data and the viewer's own script and style into
one HTML file that fetches nothing. Viewing never writes into a run folder.
"""
