"""Fetch LoCoMo's public locomo10.json into data/ and verify its sha256.

    python scripts/download_data.py                 # from GitHub
    python scripts/download_data.py --mirror DIR    # from a local folder holding locomo10.json
    LOCOMO_MIRROR=DIR python scripts/download_data.py

Idempotent: a file already present with the right hash is left alone.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

URL = "https://raw.githubusercontent.com/snap-research/locomo/main/data/locomo10.json"
SHA256 = "79fa87e90f04081343b8c8debecb80a9a6842b76a7aa537dc9fdf651ea698ff4"
FILENAME = "locomo10.json"
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "data" / FILENAME


class DownloadError(RuntimeError):
    pass


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fetch(url: str, dest: Path, timeout_s: float) -> None:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response, dest.open("wb") as out:
            shutil.copyfileobj(response, out)
    except (urllib.error.URLError, OSError, TimeoutError) as err:
        raise DownloadError(
            f"could not download {url} ({err}). Without network access, pass --mirror DIR "
            f"(or set LOCOMO_MIRROR=DIR) naming a folder that holds {FILENAME}."
        ) from err


def obtain(out: Path, mirror: Path | None, url: str = URL, timeout_s: float = 60.0) -> str:
    """Put a verified copy at ``out``; return what was done ('present', 'mirror' or 'download')."""
    if out.is_file() and sha256_of(out) == SHA256:
        return "present"
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        staged = Path(tmp) / FILENAME
        if mirror is not None:
            source = mirror / FILENAME
            if not source.is_file():
                raise DownloadError(f"mirror folder {mirror} has no {FILENAME}")
            shutil.copyfile(source, staged)
        else:
            _fetch(url, staged, timeout_s)
        digest = sha256_of(staged)
        if digest != SHA256:
            where = mirror / FILENAME if mirror is not None else url
            raise DownloadError(f"{where}: sha256 {digest} does not match the expected {SHA256}; not installed")
        os.replace(staged, out)
    return "mirror" if mirror is not None else "download"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirror", type=Path, default=os.environ.get("LOCOMO_MIRROR") or None, help=f"folder holding {FILENAME}")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to write the file")
    args = parser.parse_args(argv)
    try:
        how = obtain(args.out, Path(args.mirror) if args.mirror else None)
    except DownloadError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(f"{args.out}: {'already present' if how == 'present' else 'written from ' + how}, sha256 {SHA256[:12]}... ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
