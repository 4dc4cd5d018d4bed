"""What a run was computed from: the content of its input files and the version of the code.

Identity (the run folder) = config hash taken over the semantic config *and* the sha256 of every
input file the benchmark and system declare (core.api.DeclaresInputs: dataset, suite, errata file, server
binary), as their blocks or constructors' defaults name them. Editing a data file therefore lands the same
command in a new folder: old results are never returned for new inputs. A declared file that is absent is
not hashed (an optional file, e.g. an errata list not downloaded, leaves the identity as it was).

The benchmark checks that the bytes it parses are the bytes the folder is named for
(``check_parsed``): a file edited between the start of a run and the moment it is read fails the run
with one line, before any row is written, instead of filling the old content's folder with results
of the new content.

The code version is deliberately *not* part of the folder name: a harmless commit (a README edit)
would otherwise orphan every run. Instead it is recorded when a run starts (provenance.json) and
when it ends (metrics.json), and resuming a half-finished run under other code is refused unless
``resume.allow_code_change=true`` (which the metrics then record). "Code" is what can change a
result: the tracked files ``CODE_PATHSPECS`` names (Python, conf/, the package and server pins),
hashed as they are in the working tree (``code_sha256``); docs, README, tests and results are not
code, so editing or committing them never stops a run from resuming. scripts/make_tables.py marks
runs that came from a dirty tree or whose start and end code differ.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import subprocess
from pathlib import Path
from typing import Any

from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf

from core.api import DeclaresInputs, HarnessError
from core.paths import sha256_of
from eval.record import load_provenance

REPO = Path(__file__).resolve().parents[1]
# Config blocks whose classes declare input files.
INPUT_BLOCKS = ("benchmark", "system")


class CodeChangedError(HarnessError):
    """A half-finished run would resume under other code than it started with."""


class InputChangedError(HarnessError):
    """An input file's content, as the benchmark read it, is not the content the run folder is named for."""


def with_constructor_defaults(block: Any) -> Any:
    """A config block plus the string defaults of its ``_target_``'s constructor for the keys it leaves out: a
    run that drops a key (``~benchmark.path``) reads the constructor's default file, so that file is an input
    like a named one (hashed into the run folder's name and checked when the benchmark parses it)."""
    if not isinstance(block, dict) or not isinstance(block.get("_target_"), str):
        return block
    try:
        parameters = inspect.signature(get_class(block["_target_"])).parameters
    except (ImportError, ValueError, TypeError):  # not importable here: validate() and the build report it
        return block
    defaults = {name: p.default for name, p in parameters.items() if name not in block and isinstance(p.default, str)}
    return {**block, **defaults}


def _declared(block: dict[str, Any]) -> tuple[str, ...]:
    """The input parameters a block's class declares (core.api.DeclaresInputs); none for an unimportable class."""
    try:
        cls = get_class(str(block.get("_target_")))
    except Exception:  # validate() and the build say why it cannot be imported
        return ()
    return tuple(cls.input_parameters) if isinstance(cls, DeclaresInputs) else ()


def input_files(cfg: DictConfig) -> dict[str, Path]:
    """Config key -> file for every input file the benchmark and system classes declare (core.api.DeclaresInputs),
    named by their blocks or, for keys the blocks leave out, by their constructors' defaults; absent files are not
    inputs."""
    found: dict[str, Path] = {}
    for block in INPUT_BLOCKS:
        if block not in cfg or cfg[block] is None:
            continue
        resolved = with_constructor_defaults(OmegaConf.to_container(cfg[block], resolve=True))
        if not isinstance(resolved, dict):
            continue
        for parameter in _declared(resolved):
            value = resolved.get(parameter)
            if not isinstance(value, str) or not value or "\n" in value or len(value) > 1024:
                continue
            try:
                path = Path(value).expanduser()
                if path.is_file():
                    found[f"{block}.{parameter}"] = path
            except OSError:  # not a usable file name
                continue
    return found


def input_hashes(cfg: DictConfig) -> dict[str, str]:
    """Config key -> sha256 of the file it names (the input part of a run's identity)."""
    return {key: sha256_of(path) for key, path in sorted(input_files(cfg).items())}


def expected_inputs(cfg: DictConfig, hashes: dict[str, str]) -> dict[str, str]:
    """Resolved file path -> the sha256 the run's identity holds for it (what ``check_parsed`` compares)."""
    return {str(path.resolve()): hashes[key] for key, path in input_files(cfg).items() if key in hashes}


def read_hashed(path: str | Path) -> tuple[bytes, str]:
    """A file's bytes and their sha256, from one read: a benchmark parses exactly the bytes it hashed."""
    data = Path(path).read_bytes()
    return data, hashlib.sha256(data).hexdigest()


def check_parsed(path: str | Path, parsed_sha256: str, expected: dict[str, str] | None, run_dir: Path | str = "") -> None:
    """Fail (one line, naming the file and the fix) unless the bytes a benchmark parsed from ``path`` are the
    ones the run folder is named for. ``expected`` None: no run identity to check against (ad-hoc use)."""
    if expected is None:
        return
    wanted = expected.get(str(Path(path).resolve()))
    if wanted == parsed_sha256:
        return
    held = "was not an input file when the run started" if wanted is None else f"had sha256 {wanted[:12]} when the run started"
    raise InputChangedError(
        f"{path} changed while the run was starting: it {held} (the run folder {run_dir} is named for that content) "
        f"and read {parsed_sha256[:12]} when the benchmark parsed it; nothing was computed from it. Leave the file "
        "alone while a run starts and rerun the same command: the run folder of its current content is used"
    )


def combined_input_hash(hashes: dict[str, str]) -> str:
    """One short hash over all input files: stamped on every row (eval.rows)."""
    return hashlib.sha256(json.dumps(hashes, sort_keys=True).encode()).hexdigest()[:16]


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout


# Outputs, not code: archives, benchmarks, tables and published runs. No run reads them (tables do), and the
# row scripts write them while rows run (conversation_rows exports its cache archive after every row), so a
# change there must not make the next row's code "dirty" and unpublishable.
OUTPUT_PATHS = ("results",)
# What can change a result (git pathspecs, tracked files): every Python module (prompts live in Python or in
# conf/), every config and prompt file under conf/, the package pins and the scripts that start servers.
# Not code: *.md and docs/ (words), tests/ (never imported by a run), OUTPUT_PATHS; data files are inputs,
# hashed into the run folder's name (input_hashes).
CODE_PATHSPECS = ("*.py", "conf/", "pyproject.toml", "*.lock", "scripts/*.sh", "scripts/*.txt")
NOT_CODE = ("tests/", *OUTPUT_PATHS)


def _code_pathspecs() -> list[str]:
    return ["--", *CODE_PATHSPECS, *(f":(exclude){path}" for path in NOT_CODE)]


def untracked_code() -> list[str]:
    """Code files (``CODE_PATHSPECS``) git does not track and does not ignore: a new module or config file that
    can shape a run (a Hydra option is found by its file) although no commit holds it."""
    return sorted(filter(None, _git("ls-files", "--others", "--exclude-standard", "-z", *_code_pathspecs()).split("\0")))


def code_sha256() -> str:
    """sha256 over the path and working-tree content of every tracked code file (``CODE_PATHSPECS``) and every
    untracked, unignored one: equal for two checkouts whose code, config and prompts are equal, whatever commit
    or docs edit lies between."""
    digest = hashlib.sha256()
    tracked = filter(None, _git("ls-files", "-z", *_code_pathspecs()).split("\0"))
    for name in sorted({*tracked, *untracked_code()}):
        file = REPO / name
        digest.update(name.encode() + b"\0")
        digest.update(hashlib.sha256(file.read_bytes()).digest() if file.is_file() else b"(deleted)")
    return digest.hexdigest()[:16]


def code_version() -> dict[str, Any]:
    """git sha, the code hash (``code_sha256``), and the dirty flag and a hash of the uncommitted diff of the
    code files (so two dirty states differ; an uncommitted docs edit is not dirty). An untracked code file
    (``untracked_code``) makes the tree dirty too: its name and content join the diff."""
    try:
        sha = _git("rev-parse", "HEAD").strip()
        diff = _git("diff", "HEAD", "--no-ext-diff", "--binary", *_code_pathspecs())
        for name in untracked_code():
            file = REPO / name
            diff += f"\nuntracked {name} {hashlib.sha256(file.read_bytes()).hexdigest() if file.is_file() else '(unreadable)'}"
        code = code_sha256()
    except (OSError, subprocess.CalledProcessError):
        return {"git_sha": "unknown", "dirty": None, "diff_sha256": None, "code_sha256": None}
    return {"git_sha": sha, "dirty": bool(diff.strip()), "diff_sha256": hashlib.sha256(diff.encode()).hexdigest()[:16] if diff.strip() else None,
            "code_sha256": code}  # fmt: skip


def code_label(version: dict[str, Any]) -> str:
    """``<sha>`` or ``<sha>-dirty``: the form metrics.json has always used."""
    return str(version.get("git_sha")) + ("-dirty" if version.get("dirty") else "")


def same_code(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Same code, config and prompts (``code_sha256``); records from before it existed compare commit and diff."""
    if a.get("code_sha256") and b.get("code_sha256"):
        return a["code_sha256"] == b["code_sha256"]
    return (a.get("git_sha"), a.get("diff_sha256")) == (b.get("git_sha"), b.get("diff_sha256"))


class Provenance:
    """``<run_dir>/provenance.json``: inputs and code at the first start, one entry per invocation."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / "provenance.json"

    def load(self) -> dict[str, Any] | None:
        if not self.path.exists():
            return None
        return load_provenance(self.path).dump()  # checked against the record's types (eval.record)

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
