"""What a run was computed from: the content of its input files and the version of the code.

Identity (the run folder) = config hash taken over the semantic config *and* the sha256 of every
input file the benchmark and system blocks name (dataset, suite, fixture). Editing a data file
therefore lands the same command in a new folder: old results are never returned for new inputs.

The code version is deliberately *not* part of the folder name: a harmless commit (a README edit)
would otherwise orphan every run. Instead it is recorded when a run starts (provenance.json) and
when it ends (metrics.json), and resuming a half-finished run under other code is refused unless
``resume.allow_code_change=true`` (which the metrics then record). scripts/make_tables.py marks
runs that came from a dirty tree or whose start and end code differ.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from core.api import HarnessError
from core.paths import sha256_of

REPO = Path(__file__).resolve().parents[1]
# Config blocks whose string values may name input files.
INPUT_BLOCKS = ("benchmark", "system")


class CodeChangedError(HarnessError):
    """A half-finished run would resume under other code than it started with."""


def _strings(node: Any, prefix: str) -> list[tuple[str, str]]:
    if isinstance(node, dict):
        return [pair for key, value in node.items() for pair in _strings(value, f"{prefix}.{key}")]
    if isinstance(node, list):
        return [pair for i, value in enumerate(node) for pair in _strings(value, f"{prefix}[{i}]")]
    return [(prefix, node)] if isinstance(node, str) else []


def input_files(cfg: DictConfig) -> dict[str, Path]:
    """Config key -> file for every string in the benchmark/system blocks that names an existing file."""
    found: dict[str, Path] = {}
    for block in INPUT_BLOCKS:
        if block not in cfg or cfg[block] is None:
            continue
        resolved = OmegaConf.to_container(cfg[block], resolve=True)
        for key, value in _strings(resolved, block):
            if key.endswith("_target_") or not value or "\n" in value or len(value) > 1024:
                continue
            try:
                path = Path(value).expanduser()
                if path.is_file():
                    found[key] = path
            except OSError:  # prose (a prompt) is not a file name
                continue
    return found


def input_hashes(cfg: DictConfig) -> dict[str, str]:
    """Config key -> sha256 of the file it names (the input part of a run's identity)."""
    return {key: sha256_of(path) for key, path in sorted(input_files(cfg).items())}


def combined_input_hash(hashes: dict[str, str]) -> str:
    """One short hash over all input files: stamped on every row (eval.rows)."""
    return hashlib.sha256(json.dumps(hashes, sort_keys=True).encode()).hexdigest()[:16]


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout


# Outputs, not code: archives, benchmarks, tables and published runs. No run reads them (tables do), and the
# row scripts write them while rows run (conversation_rows exports its cache archive after every row), so a
# change there must not make the next row's code "dirty" and unpublishable.
OUTPUT_PATHS = ("results",)


def code_version() -> dict[str, Any]:
    """git sha, dirty flag and a hash of the uncommitted diff of tracked files outside OUTPUT_PATHS (so two
    dirty states differ)."""
    try:
        sha = _git("rev-parse", "HEAD").strip()
        diff = _git("diff", "HEAD", "--no-ext-diff", "--binary", "--", ".", *(f":(exclude){path}" for path in OUTPUT_PATHS))
    except (OSError, subprocess.CalledProcessError):
        return {"git_sha": "unknown", "dirty": None, "diff_sha256": None}
    return {"git_sha": sha, "dirty": bool(diff.strip()), "diff_sha256": hashlib.sha256(diff.encode()).hexdigest()[:16] if diff.strip() else None}


def code_label(version: dict[str, Any]) -> str:
    """``<sha>`` or ``<sha>-dirty``: the form metrics.json has always used."""
    return str(version.get("git_sha")) + ("-dirty" if version.get("dirty") else "")


def same_code(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return (a.get("git_sha"), a.get("diff_sha256")) == (b.get("git_sha"), b.get("diff_sha256"))


class Provenance:
    """``<run_dir>/provenance.json``: inputs and code at the first start, one entry per invocation."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / "provenance.json"

    def load(self) -> dict[str, Any] | None:
        if not self.path.exists():
            return None
        try:
            return json.loads(self.path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise HarnessError(f"{self.path} is damaged ({err.msg}, line {err.lineno}): rerun with overwrite=true") from err

    def check_resume(self, code: dict[str, Any], allow_code_change: bool) -> dict[str, Any] | None:
        """The recorded start, after refusing a resume under other code (unless allowed)."""
        recorded = self.load()
        if recorded is None or same_code(recorded["code_at_start"], code):
            return recorded
        if not allow_code_change:
            raise CodeChangedError(
                f"{self.path.parent} was started under code {code_label(recorded['code_at_start'])} and the code is now "
                f"{code_label(code)}: resuming would mix results of two code versions. Rerun with overwrite=true to start "
                "again, or resume.allow_code_change=true to resume anyway (recorded in metrics.json)"
            )
        return recorded

    def start(self, code: dict[str, Any], hashes: dict[str, str], allow_code_change: bool, write: Any) -> dict[str, Any]:
        """Record this invocation (first start: the start code and inputs too); ``write`` is the atomic writer."""
        recorded = self.check_resume(code, allow_code_change) or {"code_at_start": code, "inputs": hashes, "invocations": []}
        changed = not same_code(recorded["code_at_start"], code)
        recorded["invocations"].append({"code": code, "code_changed_on_resume": changed})
        write(self.path, recorded)
        return recorded
