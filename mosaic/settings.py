"""The rules that tie MOSAIC settings together (conf/system/mosaic.yaml): a mode that needs another setting.

Each key's type and range is its constructor parameter's (``max_entities: Count``; core.config_check checks them
from the signature). What no single parameter can say lives here: ``MosaicMemory.CONFIG_RULES`` points to
``combination_problems``, so core.config_check applies it to the ``system`` block when the runner validates a
config, before any run folder exists, and a bad pair fails with one line naming both keys and the fix.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from mosaic.conflict import ConflictDetector
from mosaic.extract import EntityExtractor

# the class whose signature gives a block key's default when the config leaves the key out
_DEFAULTS_FROM = {"extract": EntityExtractor, "conflict": ConflictDetector}

def _setting(block: Mapping[str, Any], part: str, key: str) -> Any:
    node = block.get(part) or {}
    if key in node:
        return node[key]
    return inspect.signature(_DEFAULTS_FROM[part]).parameters[key].default

def combination_problems(block: Mapping[str, Any]) -> list[str]:
    """Settings that are each in range but cannot run together, as ``system.key=value ...: fix`` lines."""
    found = []
    held_facts, turns = _setting(block, "extract", "held_facts"), _setting(block, "extract", "turns_per_call")
    enabled, judge = _setting(block, "conflict", "enabled"), _setting(block, "conflict", "judge")
    if enabled and judge == "proposed" and held_facts < 1:
        found.append("system.conflict.judge=proposed confirms clashes the extraction call proposes, so it needs "
                     "system.extract.held_facts >= 1 (ablation=fused_conflict sets both)")  # fmt: skip
    if turns > 1 and held_facts > 0:
        found.append(f"system.extract.turns_per_call={turns} with system.extract.held_facts={held_facts}: cannot be combined "
                     "yet (the group prompt shows no held facts); set one of them back (1 / 0)")  # fmt: skip
    if _setting(block, "extract", "source") == "oracle" and held_facts > 0:
        found.append(f"system.extract.source=oracle with system.extract.held_facts={held_facts}: cannot be combined (the clash "
                     "proposal is part of the LLM call the oracle replaces); set system.extract.held_facts=0")  # fmt: skip
    if _setting(block, "extract", "output_format") == "rows" and (held_facts > 0 or turns > 1):
        found.append(f"system.extract.output_format=rows with system.extract.held_facts={held_facts} / turns_per_call={turns}: "
                     "cannot be combined yet (those prompts name fields); set held_facts=0 and turns_per_call=1")  # fmt: skip
    mode, explain, batch = (_setting(block, "conflict", key) for key in ("mode", "explain", "batch"))
    if batch and (mode != "nli" or explain):
        found.append(f"system.conflict.batch=true needs system.conflict.mode=nli and system.conflict.explain=false (got "
                     f"mode={mode}, explain={explain}): a batched call reads one label per check")  # fmt: skip
    floor, gate = _setting(block, "conflict", "min_similarity"), _setting(block, "conflict", "judge_min_similarity")
    if gate is not None and gate < floor:
        found.append(f"system.conflict.judge_min_similarity={gate} is below system.conflict.min_similarity={floor}: it "
                     "would never skip a call (null switches it off)")  # fmt: skip
    revision, duplicate = _setting(block, "conflict", "revision_similarity"), _setting(block, "conflict", "duplicate_similarity")
    if revision is not None and not floor <= revision < duplicate:
        found.append(f"system.conflict.revision_similarity={revision} must lie in [system.conflict.min_similarity={floor}, "
                     f"system.conflict.duplicate_similarity={duplicate}): below it no candidate reaches it, at or above it "
                     "the fact is a restatement (null switches it off)")  # fmt: skip
    if enabled and _setting(block, "conflict", "source") == "gold" and _setting(block, "extract", "source") != "oracle":
        found.append("system.conflict.source=gold answers from the gold ids of oracle facts, so it needs system.extract.source=oracle "
                     "(ablation=oracle_judge sets both)")  # fmt: skip
    if _setting(block, "conflict", "source") == "gold" and batch:
        found.append("system.conflict.source=gold with system.conflict.batch=true: the gold judge needs no batched call; "
                     "set system.conflict.batch=false")  # fmt: skip
    return found
