"""Look at runs in the browser: one self-contained HTML file, written and its path printed last.

    python -m scripts.view                       # index of every run under results/runs/ and results/published/runs/
    python -m scripts.view RUN_FOLDER            # that run's page: header, metrics with CIs, every question, its memory
    python -m scripts.view RUN_A RUN_B [...]     # comparison: the same items side by side, paired differences vs RUN_A
    ... [--out FILE] [--serve [--port N]]        # --serve: serve the file on 127.0.0.1 only until Ctrl-C

The page fetches nothing (works offline; no file beside it). Runs are read, never written. The paired
differences on a comparison page are ``scripts.compare_runs``'s, computed by the same function.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from core.api import HarnessError
from eval.view.page import html_page
from eval.view.read import REPO, ViewError, find_runs, read_json, read_run, summary

ROOTS = (REPO / "results" / "runs", REPO / "results" / "published" / "runs")
# where items are paired on a comparison page: the table whose verdicts scripts.compare_runs counts first
COMPARED_TABLE = {"locomo": "questions", "conflict": "cases", "halumem": "questions"}


def default_out(folders: list[Path]) -> Path:
    """results/views/<what>.html: under results/ (gitignored runs' neighbour), never inside a run folder."""
    if not folders:
        name = "index"
    elif len(folders) == 1:
        name = "_".join(folders[0].resolve().parts[-4:])
    else:
        name = "compare_" + "_".join(f.name for f in folders)
    return REPO / "results" / "views" / f"{name}.html"


def markdown_blocks(text: str) -> list[dict[str, Any]]:
    """Printed Markdown as blocks: each table (head, rows) and each paragraph between them, in order."""
    blocks: list[dict[str, Any]] = []
    for chunk in text.strip().split("\n\n"):
        lines = chunk.strip().splitlines()
        if lines and all(line.startswith("|") for line in lines):
            cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines]
            blocks.append({"head": cells[0], "rows": cells[2:]})
        elif chunk.strip():
            blocks.append({"text": " ".join(chunk.split())})
    return blocks


def comparison(folders: list[Path], runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The paired differences of every other run against the first: what ``scripts.compare_runs`` prints, from
    that command itself (run as a process, so the page shows exactly its numbers and commands stay separate)."""
    kinds = {r["benchmark"] for r in runs}
    if len(kinds) > 1:
        raise ViewError(f"these runs measured different benchmarks ({', '.join(sorted(kinds))}): compare runs of one benchmark")
    unfinished = [r["path"] for r in runs if not r["finished"]]
    if unfinished:
        raise ViewError(f"{unfinished[0]} has not finished (no metrics.json): compare finished runs, or open it alone to see what is missing")
    with tempfile.TemporaryDirectory(prefix="view-compare-") as tmp:
        out = Path(tmp) / "compare.json"
        command = [sys.executable, "-m", "scripts.compare_runs", *map(str, folders), "--out", str(out)]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        done = subprocess.run(command, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
            raise ViewError(f"scripts.compare_runs failed on these runs: {last}")
        result = json.loads(out.read_text(encoding="utf-8"))
    per_category = None
    if result["benchmark"] == "locomo":
        labels = read_json(folders[0] / "metrics.json").get("category_labels") or {}
        pc_rows = []
        for row in result["comparisons"]:
            for category, stat in row["quality"]["per_category"].items():
                if stat.get("mean") is None:
                    continue
                ci = f" [{stat['ci_low'] * 100:+.1f}, {stat['ci_high'] * 100:+.1f}]" if stat.get("ci_low") is not None else ""
                pc_rows.append([row["run"], labels.get(category, category), f"{stat['base'] * 100:.1f}", f"{stat['other'] * 100:.1f}",
                                f"{stat['mean'] * 100:+.1f}{ci}", str(stat.get("n"))])  # fmt: skip
        per_category = {"head": ["run", "category", "A", "other", "other - A", "n"], "rows": pc_rows}
    return {"benchmark": result["benchmark"], "printed": markdown_blocks(done.stdout), "per_category": per_category,
            "command": "python -m scripts.compare_runs " + " ".join(map(str, folders)),
            "table_id": COMPARED_TABLE.get(result["benchmark"], "questions")}  # fmt: skip


def build(folders: list[Path]) -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
    """(title, page, runs) for the index (no folders), one run, or a comparison."""
    if not folders:
        found = find_runs(list(ROOTS))
        if not found:
            raise ViewError(f"no run folders under {ROOTS[0]} or {ROOTS[1]}: run one (python run.py experiment=locomo) or pass a folder")
        runs = [read_run(f) for f in found]
        index = [{k: r[k] for k in ("path", "benchmark", "system", "ablation", "hash", "published", "finished", "n", "headline",
                                    "headline_name", "code_sha", "git_dirty", "date")} for r in runs]  # fmt: skip
        roots = [str(root.relative_to(REPO)) for root in ROOTS]
        return "mosaic-bench runs", {"mode": "index", "index": index, "roots": roots}, runs
    for folder in folders:
        summary(folder)  # a folder that is not a run fails here, before any reading
    runs = [read_run(f) for f in folders]
    if len(runs) == 1:
        r = runs[0]
        return f"{r['benchmark']}/{r['system']}/{r['ablation']}/{r['hash']}", {"mode": "run"}, runs
    compare = {**comparison(folders, runs), "runs": list(range(len(runs)))}
    return f"comparison of {len(runs)} {runs[0]['benchmark']} runs", {"mode": "compare", "compare": compare}, runs


def serve(path: Path, port: int) -> None:
    """Serve the one file on 127.0.0.1 (never another interface) until Ctrl-C."""
    import functools
    import http.server

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(path.parent))
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as server:
        print(f"serving on http://127.0.0.1:{server.server_address[1]}/{path.name} (Ctrl-C stops)", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.view", description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="*", type=Path, help="run folders: none (index), one (run page), several (comparison, first is A)")
    parser.add_argument("--out", type=Path, help="the HTML file to write (default results/views/<what>.html)")
    parser.add_argument("--serve", action="store_true", help="also serve the page on 127.0.0.1 until Ctrl-C")
    parser.add_argument("--port", type=int, default=8000, help="port for --serve (0: any free one)")
    args = parser.parse_args(argv)
    try:
        title, page, runs = build(args.folders)
    except HarnessError as err:
        print(f"error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    for r in runs:
        for line in r["damaged"]:
            print(f"warning: {line}", file=sys.stderr)
    out = args.out or default_out(args.folders)
    for r in runs:
        if out.resolve().is_relative_to((REPO / r["path"]).resolve()):
            print(f"error: --out {out} lies inside the run folder {r['path']}; viewing never writes into a run: choose another file", file=sys.stderr)
            return 2
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(html_page(title, page, runs), encoding="utf-8")
    if args.serve:
        serve(out, args.port)
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
