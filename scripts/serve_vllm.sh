#!/usr/bin/env bash
# Start a vLLM OpenAI-compatible server with the flags the harness and baselines need:
# tool calling (Letta/MemGPT, Mem0 graph), JSON/structured output (guided decoding, on by default),
# and a context long enough for Mem0's ~8k-token extraction prompt.
#   scripts/serve_vllm.sh Qwen/Qwen2.5-7B-Instruct [PORT] [extra vllm args...]
# Then: python run.py experiment=locomo llm=vllm llm.base_url=http://127.0.0.1:PORT
set -euo pipefail
MODEL=${1:?usage: scripts/serve_vllm.sh MODEL [PORT] [extra vllm args]}
PORT=${2:-8000}
shift $(( $# >= 2 ? 2 : 1 ))
exec vllm serve "$MODEL" \
  --host 127.0.0.1 --port "$PORT" \
  --max-model-len "${MAX_MODEL_LEN:-32768}" \
  --enable-auto-tool-choice --tool-call-parser "${TOOL_PARSER:-hermes}" \
  --generation-config vllm \
  --seed 0 \
  "$@"
