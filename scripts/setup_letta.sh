#!/usr/bin/env bash
# Build ./.venv-letta: the Letta 0.11.7 server (the last release that runs on SQLite) in its own
# virtual environment, because its pins clash with the harness's. The constraints file holds the
# versions of Letta 0.11.7's own lock file, so the resolver does no search (about 90 s here).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ -x .venv-letta/bin/python ] || "$PYTHON" -m venv .venv-letta
.venv-letta/bin/python -m pip install --quiet --upgrade pip
.venv-letta/bin/python -m pip install --quiet -c scripts/letta-constraints.txt "letta[sqlite,server]==0.11.7"
.venv-letta/bin/letta version >/dev/null 2>&1 || .venv-letta/bin/python -c "import letta; print(letta.__version__)"
echo "letta ready: .venv-letta/bin/letta"
