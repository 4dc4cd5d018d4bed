"""Fetch LoCoMo's public locomo10.json, the locomo-audit files and the two HaluMem pilot users into data/, verifying sha256.

    python -m scripts.download_data                 # from GitHub
    python -m scripts.download_data --mirror DIR    # from a local folder: DIR/locomo10.json, DIR/locomo-audit/*,
                                                    # DIR/halumem-pilot/*
    LOCOMO_MIRROR=DIR python -m scripts.download_data

The audit (github.com/dial481/locomo-audit, CC BY-NC 4.0 like LoCoMo) is pinned to one commit:
errors.json (gold-answer errata) and the two wrong-answer banks the judge calibration uses, into
data/locomo-audit/ under their mirror names.

HaluMem pilot: two HaluMem-Medium users in the benchmark's own schema, published as per-user
slices by github.com/77samuel/HaluMem (pinned commit, data/pilot_slices/), stored unchanged under local
names in data/halumem-pilot/: halumem_medium_user0.jsonl (development) and halumem_medium_user3.jsonl
(evaluation only: run it, never read it). CC BY-NC-ND 4.0 (MemTensor / IAAR Shanghai): never committed
(.gitignore), never modified. Idempotent: files already present with the right hash are left alone.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from core.paths import sha256_of

URL = "https://raw.githubusercontent.com/snap-research/locomo/main/data/locomo10.json"
SHA256 = "79fa87e90f04081343b8c8debecb80a9a6842b76a7aa537dc9fdf651ea698ff4"
FILENAME = "locomo10.json"
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "data" / FILENAME

AUDIT_COMMIT = "9493fb4b4af4256ed17a18e8fd0b3cfdeec29539"
AUDIT_URL = f"https://raw.githubusercontent.com/dial481/locomo-audit/{AUDIT_COMMIT}/{{path}}"
AUDIT_DIRNAME = "locomo-audit"
# mirror/local name -> (path in the audit repository at AUDIT_COMMIT, sha256)
AUDIT_FILES: dict[str, tuple[str, str]] = {
    "errors.json": ("errors.json", "f298ef46263fada20688a1d672be37d4f488c6da3b19343eea55ae5c1b5fe55e"),
    "ap_v1_specific_wrong_scored.json": (
        "ap-baseline/v1/ap_eval_results_scored.json",
        "a83882eda3ff02fd04dace6edddd0ceed533a245fedb3069ffde02a9503c4e3a",
    ),
    "ap_v2_vague_wrong_scored.json": (
        "ap-baseline/v2/ap_eval_results_scored.json",
        "3c32acbdcf667967a4e1f9f541b06566ae5e7361dc92f79f9043af7d068adc6b",
    ),
    "LICENSE": ("LICENSE", "41003d4a74749c0220e33dd415042164b5a1093ed401f36277234f772d22d3d0"),
}


HALUMEM_COMMIT = "5181df7236fbeaabba9fc3f4731a7e5c01f1b501"
HALUMEM_URL = f"https://raw.githubusercontent.com/77samuel/HaluMem/{HALUMEM_COMMIT}/{{path}}"
HALUMEM_DIRNAME = "halumem-pilot"
# local/mirror name -> (path in 77samuel/HaluMem at HALUMEM_COMMIT, sha256)
HALUMEM_FILES: dict[str, tuple[str, str]] = {
    "halumem_medium_user0.jsonl": (
        "data/pilot_slices/pilot_slice_user0.jsonl",
        "29ef6e1a1393d2fdd54580aec629d1bbd98d00f1f4bcb0aa3d3f61afd900f2ce",
    ),
    "halumem_medium_user3.jsonl": (
        "data/pilot_slices/pilot_slice_user3.jsonl",
        "e11913ca1033e96e6fb1a94fc9891e8584555e3690f6b1820a17e3964ec5b354",
    ),
}


class DownloadError(RuntimeError):
    pass


def _fetch(url: str, dest: Path, timeout_s: float) -> None:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response, dest.open("wb") as out:
            shutil.copyfileobj(response, out)
    except (urllib.error.URLError, OSError, TimeoutError) as err:
        raise DownloadError(
            f"could not download {url} ({err}). Without network access, pass --mirror DIR "
            f"(or set LOCOMO_MIRROR=DIR) naming a folder that holds {FILENAME}."
        ) from err


def obtain(
    out: Path, mirror: Path | None, url: str = URL, timeout_s: float = 60.0, filename: str = FILENAME, sha256: str = SHA256
) -> str:
    """Put a verified copy at ``out``; return what was done ('present', 'mirror' or 'download').

    ``mirror`` is the folder holding ``filename``; without it the file comes from ``url``.
    """
    if out.is_file() and sha256_of(out) == sha256:
        return "present"
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        staged = Path(tmp) / filename
        if mirror is not None:
            source = mirror / filename
            if not source.is_file():
                raise DownloadError(f"mirror folder {mirror} has no {filename}")
            shutil.copyfile(source, staged)
        else:
            _fetch(url, staged, timeout_s)
        digest = sha256_of(staged)
        if digest != sha256:
            where = mirror / filename if mirror is not None else url
            raise DownloadError(f"{where}: sha256 {digest} does not match the expected {sha256}; not installed")
        os.replace(staged, out)
    return "mirror" if mirror is not None else "download"


def obtain_audit(out_dir: Path, mirror: Path | None, timeout_s: float = 60.0) -> dict[str, str]:
    """The pinned locomo-audit files into ``out_dir`` (mirror: ``<mirror>/locomo-audit/``); name -> what was done."""
    source_dir = None if mirror is None else mirror / AUDIT_DIRNAME
    return {
        name: obtain(out_dir / name, source_dir, AUDIT_URL.format(path=path), timeout_s, filename=name, sha256=digest)
        for name, (path, digest) in AUDIT_FILES.items()
    }


def obtain_halumem(out_dir: Path, mirror: Path | None, timeout_s: float = 60.0) -> dict[str, str]:
    """The two pinned HaluMem pilot users into ``out_dir`` (mirror: ``<mirror>/halumem-pilot/``); name -> what was done."""
    source_dir = None if mirror is None else mirror / HALUMEM_DIRNAME
    return {
        name: obtain(out_dir / name, source_dir, HALUMEM_URL.format(path=path), timeout_s, filename=name, sha256=digest)
        for name, (path, digest) in HALUMEM_FILES.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirror", type=Path, default=os.environ.get("LOCOMO_MIRROR") or None, help=f"folder holding {FILENAME}, {AUDIT_DIRNAME}/ and {HALUMEM_DIRNAME}/")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to write locomo10.json (the audit goes beside it)")
    args = parser.parse_args(argv)
    mirror = Path(args.mirror) if args.mirror else None
    try:
        how = obtain(args.out, mirror)
        audit = obtain_audit(args.out.parent / AUDIT_DIRNAME, mirror)
        halumem = obtain_halumem(args.out.parent / HALUMEM_DIRNAME, mirror)
    except DownloadError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(f"{args.out}: {'already present' if how == 'present' else 'written from ' + how}, sha256 {SHA256[:12]}... ok")
    for name, done in audit.items():
        print(f"{args.out.parent / AUDIT_DIRNAME / name}: {'already present' if done == 'present' else 'written from ' + done}, sha256 ok")
    for name, done in halumem.items():
        print(f"{args.out.parent / HALUMEM_DIRNAME / name}: {'already present' if done == 'present' else 'written from ' + done}, sha256 ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
