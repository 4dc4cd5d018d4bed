"""HaluMem (arXiv 2511.03506), one module per mechanism.

``data``: the published file format (schema, typed records, JSONL and hub loaders);
``judge``: HaluMem's four LLM judges; ``metrics``: pure functions on judged rows;
``benchmark``: the run loop and aggregation (the protocol is in its docstring);
``table``: Table 2 from metrics.json files.
"""
