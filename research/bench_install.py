"""Set-up speed: pip against uv installing the project's packages, side by side in one session.

    python -m research.bench_install [--rounds 1] [--extras test,baselines,zep]

Each round makes two fresh virtualenvs in a temporary folder and installs, with no download cache, the CPU torch
wheel and then the project with its extras, once with pip and once with uv (``scripts/setup.sh``'s two steps;
uv gets pip's settings the way setup.sh passes them on). The order alternates between rounds so machine noise
falls on both. Also records whether both resolved exactly the same distributions (name and version).
Writes results/bench/setup_install.json and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TORCH = "torch==2.13.0"


def pip_setting(key: str) -> str:
    """What pip would use for ``key``: its PIP_* variable, else its config; file:// folders that do not exist are
    dropped (pip skips them, uv stops on them)."""
    value = os.environ.get("PIP_" + key.upper().replace("-", "_"))
    if value is None:
        got = subprocess.run([sys.executable, "-m", "pip", "config", "get", f"global.{key}"], capture_output=True, text=True)
        value = got.stdout.strip() if got.returncode == 0 else ""
    kept = [item for item in value.split() if not item.startswith("file://") or Path(item[len("file://"):]).exists()]
    return " ".join(kept)


def uv_environment() -> dict[str, str]:
    env = dict(os.environ)
    for key, var in (("find-links", "UV_FIND_LINKS"), ("index-url", "UV_INDEX_URL"), ("extra-index-url", "UV_EXTRA_INDEX_URL"), ("constraint", "UV_CONSTRAINT")):
        if var not in env and (value := pip_setting(key)):
            env[var] = value
    env.setdefault("UV_INDEX_STRATEGY", "unsafe-best-match")
    return env


def normalised(name_version: str) -> str:
    name, _, version = name_version.partition("==")
    return re.sub(r"[-_.]+", "-", name).lower() + "==" + version


def install(installer: str, folder: Path, extras: str) -> dict:
    venv = folder / installer
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    started = time.perf_counter()
    if installer == "pip":
        commands = [[python, "-m", "pip", "install", "-q", "--no-cache-dir", TORCH],
                    [python, "-m", "pip", "install", "-q", "--no-cache-dir", f"{ROOT}[{extras}]"]]
        env = dict(os.environ)
    else:
        subprocess.run([python, "-m", "pip", "install", "-q", "--no-cache-dir", "uv"], check=True)
        uv = [python, "-m", "uv", "pip", "install", "-q", "--no-cache", "--python", python]
        commands = [[*uv, TORCH], [*uv, f"{ROOT}[{extras}]"]]
        env = uv_environment()
    for command in commands:
        subprocess.run(command, check=True, env=env, cwd=folder)
    seconds = time.perf_counter() - started
    frozen = subprocess.run([python, "-m", "pip", "freeze", "--all"], capture_output=True, text=True, check=True).stdout
    installed = sorted(normalised(line) for line in frozen.splitlines() if "==" in line and not line.startswith(("pip==", "setuptools==", "uv==")))
    return {"installer": installer, "seconds": round(seconds, 1), "distributions": installed}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--extras", default="test,baselines,zep")
    parser.add_argument("--out", default=str(ROOT / "results" / "bench"))
    args = parser.parse_args(argv)
    rows = []
    for round_no in range(1, args.rounds + 1):
        order = ("pip", "uv") if round_no % 2 else ("uv", "pip")
        with tempfile.TemporaryDirectory(prefix="bench_install_") as tmp:
            done = {name: install(name, Path(tmp), args.extras) for name in order}
        same = done["pip"]["distributions"] == done["uv"]["distributions"]
        for name in order:
            rows.append({"round": round_no, "installer": name, "seconds": done[name]["seconds"],
                         "distributions": len(done[name]["distributions"]), "same_as_other": same})
            print(f"round {round_no} {name}: {done[name]['seconds']} s, {len(done[name]['distributions'])} distributions, same versions as the other: {same}")
        if not same:
            print("differ:", sorted(set(done["pip"]["distributions"]) ^ set(done["uv"]["distributions"])))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    command = "python -m research.bench_install " + " ".join(argv if argv is not None else sys.argv[1:])
    record = {"rows": rows, "command": command.strip(), "cpus": os.cpu_count(), "python": platform.python_version(),
              "when": time.strftime("%Y-%m-%d %H:%M:%S"), "note": "no download cache for either; other jobs may have shared the machine"}
    (out / "setup_install.json").write_text(json.dumps(record, indent=1) + "\n")
    lines = ["# Set-up install: pip vs uv (fresh virtualenv, no download cache; `" + record["command"] + "`)", "",
             "| round | installer | seconds | distributions | same versions as the other |", "|---|---|---|---|---|"]
    lines += [f"| {r['round']} | {r['installer']} | {r['seconds']} | {r['distributions']} | {r['same_as_other']} |" for r in rows]
    (out / "setup_install.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
