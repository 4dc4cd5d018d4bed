"""Publish a run folder under results/published/ (eval/publishing.py), where the tables and the notebook read.

    python -m scripts.publish <run folder>               # publish a finished run
    python -m scripts.publish <run folder> --unfinished  # publish a stopped run and what its ingest cost

A finished run is refused when its metrics.json records a dirty tree or a code change during the run; a stopped
one when it started from a dirty tree or was resumed on other code. Prints the published folder.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from core.api import HarnessError
from eval.publishing import ROOT, publish, publish_unfinished


def relative_to_checkout(path: Path) -> Path:
    """The run folder relative to the checkout when it lies inside it (shorter output)."""
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description="publish a run folder under results/published/")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--unfinished", action="store_true", help="a run stopped before its end: publish what finished and its measured ingest cost")
    args = parser.parse_args(argv)
    try:
        target = publish_unfinished(args.run_dir) if args.unfinished else publish(args.run_dir)
    except HarnessError as err:  # e.g. the run folder is in use (its lock): one line, as run.py reports it
        raise SystemExit(f"error ({type(err).__name__}): {' '.join(str(err).split())}") from None
    print(relative_to_checkout(target))
    return target


if __name__ == "__main__":
    main()
