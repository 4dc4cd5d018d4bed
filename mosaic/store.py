"""Persistent MOSAIC memory: one JSON file per namespace, written atomically and checked on load.

Each entity record carries id, value, confidence, timestamp (session time), source turn,
evidence, belief and history (see ``Entity``). A write goes to a temporary file in the same
folder, is fsynced, then renamed over the old file (and the folder fsynced), so a crash at
any point leaves either the old or the new state, never a mix. The payload carries a
SHA-256 checksum; a truncated or edited file fails with an error naming the file instead
of loading half a memory.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from core.atomic import write_json_atomic
from core.paths import file_safe_name

STORE_SCHEMA = 1
_REQUIRED_ENTITY_FIELDS = ("entity_id", "text", "type", "value", "confidence", "session_time", "source_turn_ids", "evidence", "belief", "history", "status")


class MemoryStoreError(RuntimeError):
    """A memory file cannot be read back as a complete, valid memory."""


def _checksum(payload: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()).hexdigest()


class MemoryStore:
    """Atomic JSON persistence of one namespace's memory state (a plain dict built by the memory)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def exists(self) -> bool:
        return self.path.exists()

    def save(self, state: dict[str, Any]) -> None:
        """Write ``state`` atomically: temp file in the same folder, fsync, rename, fsync the folder."""
        validate_state(state, str(self.path))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        document = {"schema": STORE_SCHEMA, "checksum": _checksum(state), "state": state}
        write_json_atomic(self.path, document, ensure_ascii=False, separators=(",", ":"))

    def load(self) -> dict[str, Any]:
        """Read and validate the state; any damage raises MemoryStoreError naming the file."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            raise MemoryStoreError(f"memory file {self.path} does not exist") from None
        try:
            document = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise MemoryStoreError(
                f"memory file {self.path} is truncated or corrupt ({len(raw)} bytes, JSON error: {err}); refusing to load it"
            ) from err
        if not isinstance(document, dict) or not {"schema", "checksum", "state"} <= set(document):
            raise MemoryStoreError(f"memory file {self.path} lacks the schema/checksum/state envelope")
        if document["schema"] != STORE_SCHEMA:
            raise MemoryStoreError(f"memory file {self.path} has schema {document['schema']!r}, expected {STORE_SCHEMA}")
        if _checksum(document["state"]) != document["checksum"]:
            raise MemoryStoreError(f"memory file {self.path} failed its checksum: the content was altered or partly written")
        validate_state(document["state"], str(self.path))
        return document["state"]


def validate_state(state: Any, where: str) -> None:
    """Check the fields every stored entity must have, so bad state never enters or leaves the store."""
    if not isinstance(state, dict) or not isinstance(state.get("graph"), dict):
        raise MemoryStoreError(f"{where}: memory state must be a dict with a 'graph' dict")
    entities = state["graph"].get("entities")
    if not isinstance(entities, list):
        raise MemoryStoreError(f"{where}: graph.entities must be a list")
    for i, entity in enumerate(entities):
        if not isinstance(entity, dict):
            raise MemoryStoreError(f"{where}: graph.entities[{i}] is not an object")
        missing = [f for f in _REQUIRED_ENTITY_FIELDS if f not in entity]
        if missing:
            raise MemoryStoreError(f"{where}: entity {entity.get('entity_id', i)!r} lacks fields {missing}")
        if not 0.0 <= float(entity["confidence"]) <= 1.0:
            raise MemoryStoreError(f"{where}: entity {entity['entity_id']!r} has confidence {entity['confidence']} outside [0, 1]")
        belief = entity["belief"]
        if belief and abs(sum(belief.values()) - 1.0) > 1e-3:
            raise MemoryStoreError(f"{where}: belief of entity {entity['entity_id']!r} sums to {sum(belief.values()):.4f}, not 1")
        if not isinstance(entity["source_turn_ids"], list) or not isinstance(entity["history"], list):
            raise MemoryStoreError(f"{where}: entity {entity['entity_id']!r} needs list source_turn_ids and history")
    if not isinstance(state.get("queue", []), list):
        raise MemoryStoreError(f"{where}: 'queue' must be a list")


