"""The README's screenshots of the viewer: a run page and a comparison page, in headless Chromium.

    python -m research.view_screenshots [--out docs/img]

Both pages are of published development runs (LoCoMo conv-26, 152 questions): MOSAIC alone with one wrong
answer opened, and rag against MOSAIC filtered to the questions rag gets right and MOSAIC wrong. Run from
the repository root; needs Debian's chromium (``apt-get install chromium``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from eval.benchmarks.locomo.compare import locomo_outcomes
from eval.view.browser import screenshot

ROOT = Path(__file__).resolve().parent.parent
RUNS = Path("results") / "published" / "runs" / "locomo"  # relative: the pages name runs as a reader would type them
MOSAIC = RUNS / "mosaic" / "none" / "9627b2170da9"  # experiment=locomo_conv26 system=mosaic
RAG = RUNS / "rag" / "none" / "b3b9f7514c93"  # experiment=locomo_conv26 system=rag


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m research.view_screenshots", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    args = parser.parse_args(argv)
    rag, mosaic = locomo_outcomes(ROOT / RAG), locomo_outcomes(ROOT / MOSAIC)
    first = next(k for k in rag if rag[k]["correct"] and k in mosaic and not mosaic[k]["correct"])  # right in rag, wrong in MOSAIC
    # (page folders, view state in the URL fragment, file name)
    shots = (([MOSAIC], "state=wrong&open=conv-26%3Aq3", "view_run.png"),
             ([RAG, MOSAIC], f"cpair=0-1&copen={first.replace(':', '%3A')}", "view_compare.png"))  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for folders, fragment, name in shots:
            page = Path(tmp) / (Path(name).stem + ".html")
            subprocess.run([sys.executable, "-m", "scripts.view", *map(str, folders), "--out", str(page)], cwd=ROOT, check=True)
            print(screenshot(page, args.out / name, fragment, width=1400, height=1500))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
