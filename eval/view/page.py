"""One self-contained HTML file: the viewer's style and script inlined, each run's data as embedded JSON.

Nothing is fetched when the page opens (no network, no other file), so it can be mailed or kept beside a
paper. Run data sits in ``<script type="application/json">`` blocks, with ``<``, ``>`` and ``&`` written as
JSON escapes so no text from a dataset or a model can end the block or become markup; the script reads
it with ``JSON.parse`` and puts every text in the page as text. In the index each run's block is parsed
only when its page is opened.
"""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any

_ESCAPES = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026", 0x2028: "\\u2028", 0x2029: "\\u2029"}


def embedded_json(value: Any) -> str:
    """JSON that is safe inside a <script> element: nothing in it can close the element or open a comment."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str).translate(_ESCAPES)


def _static(name: str) -> str:
    return files("eval.view").joinpath("static", name).read_text(encoding="utf-8")


def html_page(title: str, page: dict[str, Any], runs: list[dict[str, Any]]) -> str:
    """The whole page: ``page`` says what it shows (index, run or comparison), ``runs`` each run's data."""
    blocks = "\n".join(f'<script type="application/json" id="run-{i}">{embedded_json(r)}</script>' for i, r in enumerate(runs))
    title_text = title.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return (
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        # no request leaves the page: scripts and styles only from this file, no images, fonts or connections
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'unsafe-inline'; "
        "style-src 'unsafe-inline'; img-src data:\">\n"
        f"<title>{title_text}</title>\n<style>\n{_static('view.css')}</style>\n</head>\n<body>\n"
        "<div id=\"app\"><p>This page needs JavaScript to show the run.</p></div>\n"
        f'<script type="application/json" id="view-data">{embedded_json({**page, "title": title})}</script>\n'
        f"{blocks}\n<script>\n{_static('view.js')}</script>\n</body>\n</html>\n"
    )
