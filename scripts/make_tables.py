"""Build paper-shaped tables from metrics.json files only (never from numbers typed in).

    python -m scripts.make_tables [--root results/published/runs] [--out results/tables] [--convention mem0]

Groups runs by benchmark, calls that benchmark class's static ``make_table`` (class path
recorded in metrics.json as ``benchmark_target``), writes <out>/<benchmark>.{md,csv,tex}
and prints the Markdown; a class's optional ``make_extra_tables`` (core.api.HasExtraTables) adds more (LoCoMo: the
judge-and-gold view, locomo_judge_gold.*; the README's headline views, *_headline.*; recall at equal token
budgets, locomo_budget.*) and an optional ``make_figures`` (core.api.DrawsFigures) draws PNGs into <out> (LoCoMo: recall against tokens). The
scaling benchmark's files under results/bench/ become <out>/scaling.*, each amortised figure
labelled measured or extrapolated.

With the defaults (published runs into results/tables/) it then rewrites every README section
between ``<!-- table:NAME -->`` and ``<!-- /table -->`` with results/tables/NAME.md, so the
README quotes published files only (``--readme FILE`` for another file, ``--readme ''`` for none).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from hydra.utils import get_class

from core.api import DrawsFigures, HarnessError, HasExtraTables
from eval.benchmarks.halumem import retrieval_table as halumem_retrieval
from eval.benchmarks.locomo import slice_label
from eval.benchmarks.halumem.mechanism_table import mechanism_table
from eval.benchmarks.locomo import retrieval_table as locomo_retrieval
from eval.benchmarks.locomo.retrieval import is_retrieval_only
from eval.decomposition import decomposition_table
from eval.publishing import provenance_flags
from eval.record import load_metrics
from eval.retrieval_table import recall_vs_tokens_figure
from eval.tables import NOT_CLEAN_MARK, PROVENANCE_FLAGS, is_paper_configuration, to_markdown, write_tables

REPO = Path(__file__).resolve().parents[1]
PUBLISHED = REPO / "results" / "published" / "runs"
TABLES = REPO / "results" / "tables"
SCALING_FILES = (REPO / "results" / "bench" / "scaling.json", REPO / "results" / "bench" / "ncs_100k_long_window" / "scaling.json")
README_SECTION = re.compile(r"(<!-- table:(?P<name>[\w.-]+) -->\n)(?P<body>.*?)(<!-- /table -->)", re.DOTALL)


def _field(metrics: dict[str, Any], name: str) -> Any:
    return metrics.get("metadata", {}).get(name) or metrics.get(name)


def load_runs(root: Path, retrieval_only: bool = False) -> dict[str, list[dict[str, Any]]]:
    """metrics.json files under ``root`` grouped by benchmark name (sorted by path: stable tables): the full runs, or
    with ``retrieval_only`` the retrieval-only runs (no answers, no judge: their own table, retrieval.md)."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for path in sorted(root.rglob("metrics.json")):
        try:
            metrics = load_metrics(path).upgraded().as_table_input()  # the typed run record, read as the current version
        except HarnessError as err:
            raise SystemExit(str(err)) from err
        if not _field(metrics, "benchmark_target") or not _field(metrics, "benchmark"):
            raise SystemExit(f"{path}: missing `benchmark` / `benchmark_target` (written by eval.runner)")
        metrics[PROVENANCE_FLAGS] = run_flags(metrics, path.parent)
        if is_retrieval_only(metrics) == retrieval_only:
            groups[_field(metrics, "benchmark")].append(metrics)
    return groups


def _whole_conversation_mosaic(metrics: dict[str, Any]) -> bool:
    """A full LoCoMo run of MOSAIC as the paper configures it (model extractor) over whole conversations: its retrieval
    is read from its predictions into the retrieval table (eval/benchmarks/locomo/retrieval_table.py from_full_run)."""
    folder = Path(metrics["_path"]).parent
    config = (yaml.safe_load((folder / "config.yaml").read_text(encoding="utf-8")) or {}).get("benchmark", {}) if (folder / "config.yaml").is_file() else {}
    meta = metrics.get("metadata", {})
    return (meta.get("system"), meta.get("ablation")) == ("mosaic", "none") and config.get("max_sessions") is None and is_paper_configuration(metrics)


def _shown(path: str) -> str:
    """A run's path as the tables print it: relative to the repository when inside it (same text on every clone)."""
    resolved = Path(path).resolve()
    return str(resolved.relative_to(REPO)) if resolved.is_relative_to(REPO) else path


def run_flags(metrics: dict[str, Any], folder: Path) -> list[str]:
    """Why a published run is not from one clean commit: its metrics' provenance flags, and a folder without
    provenance.json (the run predates it: no record of the code at its start or of its invocations)."""
    flags = provenance_flags(metrics)
    if not (folder / "provenance.json").is_file():
        flags.append("no provenance.json (the run predates it)")
    return flags


def provenance_notes(runs: list[dict[str, Any]]) -> str:
    """A footnote under a table listing every run that does not come from one clean commit (its rows marked †)."""
    lines = [f"- {_shown(run['_path'])}: {'; '.join(flags)}" for run in runs if (flags := _flags(run))]
    return f"\n\n**Provenance: not from one clean commit** (rows marked {NOT_CLEAN_MARK})\n" + "\n".join(lines) if lines else ""


def short_provenance_note(runs: list[dict[str, Any]], benchmark: str) -> str:
    """The one-line form under a headline table (the README quotes it): how many runs, and where they are listed."""
    count = sum(bool(_flags(run)) for run in runs)
    return (f"\n\n{NOT_CLEAN_MARK} Provenance: {count} of these runs are not from one clean commit; results/tables/{benchmark}.md "
            "lists them and why.") if count else ""


def _flags(run: dict[str, Any]) -> list[str]:
    return run[PROVENANCE_FLAGS] if PROVENANCE_FLAGS in run else provenance_flags(run)


def build(root: Path, out: Path, convention: str | None = None) -> dict[str, str]:
    """Write one table per benchmark (with a provenance footnote where needed); return benchmark -> Markdown."""
    written = {}
    for benchmark, runs in sorted(load_runs(root).items()):
        cls = get_class(_field(runs[0], "benchmark_target"))
        table = cls.make_table(runs, convention) if convention else cls.make_table(runs)
        write_tables(table, out / benchmark)
        notes = provenance_notes(runs)
        if notes:
            md_path = (out / benchmark).with_suffix(".md")
            if md_path.exists():
                md_path.write_text(md_path.read_text(encoding="utf-8").rstrip("\n") + notes + "\n", encoding="utf-8")
        written[benchmark] = to_markdown(table) + notes
        for name, extra_table in (cls.make_extra_tables(runs) if isinstance(cls, HasExtraTables) else {}).items():
            write_tables(extra_table, out / name)
            note = short_provenance_note(runs, benchmark) if NOT_CLEAN_MARK in " ".join(map(str, extra_table.index)) + " ".join(map(str, extra_table.columns)) else ""
            if note:
                md_path = (out / name).with_suffix(".md")
                md_path.write_text(md_path.read_text(encoding="utf-8").rstrip("\n") + note + "\n", encoding="utf-8")
            written[name] = to_markdown(extra_table) + note
        for path in cls.make_figures(runs, out) if isinstance(cls, DrawsFigures) else []:
            print(f"figure: {_shown(str(path))}")
    return written


def scaling_table(paths: tuple[Path, ...] = SCALING_FILES) -> pd.DataFrame:
    """The scaling benchmark's NCS rows: amortised cost per write and whether that figure was measured.

    The amortised figure adds a PageRank refresh's cost over its interval and a global Leiden re-run's cost over
    its period; when the timed window holds no refresh or no global re-run, that share is extrapolated from one
    timing outside the window, and the row says so."""
    rows = []
    for path in paths:
        if not path.is_file():
            continue
        bench = json.loads(path.read_text(encoding="utf-8"))
        for r in bench.get("ncs", []):
            missing = [what for what, n in (("PageRank refresh", r.get("refreshes_in_window")),
                                            ("global Leiden re-run", r.get("leiden_reruns_in_window"))) if not n]
            rows.append({
                "nodes": f"{r['n_nodes']:,}",
                "timed writes": f"{r['writes']:,}",
                "community policy": r.get("community_policy", "?"),
                "amortised ms per write": f"{r['amortised_ms_per_update']:.2f}",
                "amortised figure": ("extrapolated: no " + " or ".join(missing) + " in the timed window") if missing else "measured",
                "in-window ms per write (measured)": f"{r['in_window_ms_per_update']:.2f}",
                "refreshes / global re-runs in window": f"{r.get('refreshes_in_window', 0)} / {r.get('leiden_reruns_in_window', 0)}",
                "source": str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path),
            })  # fmt: skip
    table = pd.DataFrame(rows)
    table.attrs["caption"] = (
        "NCS and community maintenance per write on synthetic graphs (research/bench_scaling.py; no LLM). 'Amortised' "
        "spreads a refresh's and a global Leiden re-run's cost over their intervals; where the timed window held "
        "neither, that part is extrapolated from one timing outside the window. 'In-window' is the mean wall time of "
        "the timed writes themselves."
    )
    return table


def update_readme(readme: Path, tables: Path) -> list[str]:
    """Replace each ``<!-- table:NAME -->`` section of ``readme`` with ``tables/NAME.md``; return the names.
    A section naming a table that does not exist stops the command (a README must not quote a missing file)."""
    text = readme.read_text(encoding="utf-8")
    names: list[str] = []

    def fill(match: re.Match[str]) -> str:
        source = tables / f"{match['name']}.md"
        if not source.is_file():
            raise SystemExit(f"{readme}: section table:{match['name']} names {source}, which does not exist; run make_tables or fix the marker")
        names.append(match["name"])
        return f"{match[1]}{source.read_text(encoding='utf-8').rstrip()}\n{match[4]}"

    updated = README_SECTION.sub(fill, text)
    if updated != text:
        readme.write_text(updated, encoding="utf-8")
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=PUBLISHED, help="where the metrics.json files are (default: the published runs)")
    parser.add_argument("--out", type=Path, default=TABLES)
    parser.add_argument("--convention", default=None, help="relabel categories (locomo or mem0); default: the runs' own")
    parser.add_argument("--readme", default=None,
                        help="README whose table sections to rewrite (default: README.md when --root and --out are the defaults)")
    args = parser.parse_args(argv)
    tables = build(args.root, args.out, args.convention)
    retrieval_runs = load_runs(args.root, retrieval_only=True)
    if not tables and not retrieval_runs:
        print(f"no metrics.json under {args.root}", file=sys.stderr)
        return 1
    decomposition = decomposition_table(load_runs(args.root))  # which loses: the extractor or the organisation
    write_tables(decomposition, args.out / "decomposition")
    tables["decomposition"] = to_markdown(decomposition)
    mechanism = mechanism_table(load_runs(args.root).get("halumem", []))  # the save-time check against its ceiling
    if not mechanism.empty:
        write_tables(mechanism, args.out / "mechanism")
        tables["mechanism"] = to_markdown(mechanism)
    halumem_retrieval_runs = retrieval_runs.get("halumem", [])
    if halumem_retrieval_runs:
        table = halumem_retrieval.retrieval_table(halumem_retrieval_runs)
        write_tables(table, args.out / "retrieval_halumem")
        tables["retrieval_halumem"] = to_markdown(table)
    full_runs = [locomo_retrieval.from_full_run(m) for m in load_runs(args.root).get("locomo", []) if _whole_conversation_mosaic(m)]
    retrieval = retrieval_runs.get("locomo", []) + (full_runs if retrieval_runs.get("locomo") else [])
    if retrieval:
        table = locomo_retrieval.retrieval_table(retrieval)
        write_tables(table, args.out / "retrieval")
        tables["retrieval"] = to_markdown(table)
        locomo_retrieval.recall_curves(retrieval, args.out / "retrieval_recall_at_k.png")
        panels = {**locomo_retrieval.recall_vs_tokens_panels(retrieval), **halumem_retrieval.recall_vs_tokens_panels(halumem_retrieval_runs)}
        recall_vs_tokens_figure(panels, args.out / "retrieval_recall_vs_tokens.png")
        headline = locomo_retrieval.retrieval_headline(retrieval)
        if headline:
            (args.out / "retrieval_headline.md").write_text(headline + "\n", encoding="utf-8")
            tables["retrieval_headline"] = headline
    scaling = scaling_table()
    if not scaling.empty:
        write_tables(scaling, args.out / "scaling")
        tables["scaling"] = to_markdown(scaling)
    for benchmark, markdown in tables.items():
        print(f"## {benchmark}  ({args.out / benchmark}.md/.csv/.tex)\n\n{markdown}\n")
    defaults = args.root.resolve() == PUBLISHED.resolve() and args.out.resolve() == TABLES.resolve()
    readme = args.readme if args.readme is not None else (REPO / "README.md" if defaults else None)
    if readme:
        names = update_readme(Path(readme), args.out)
        print(f"{readme}: sections rewritten from {args.out}: {', '.join(names) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
