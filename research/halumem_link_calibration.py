"""How HaluMem's update points relate to what came before them: the basis of the update-link threshold.

    python -m research.halumem_link_calibration                      # development user 0
    python -m research.halumem_link_calibration --threshold 0.8 --show 12
    python -m research.halumem_link_calibration --candidates      # can the conflict check's k-nearest step find them?
    python -m research.halumem_link_calibration --revision        # would "nearest held fact at cosine >= t" find them?

For every update point (``is_update`` with ``original_memories``) of a HaluMem file, each original memory is
compared with every earlier non-interference gold point of its user (MiniLM cosine, the harness's embedder):
how many are verbatim earlier points, how many have one at >= threshold, the distribution of the best
cosine, and (``--show``) sample pairs along that distribution for reading. conf/benchmark/halumem.yaml's
``link_held_similarity`` was chosen from this output on the development user. Development data only: the
evaluation user's file is refused.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from core.embed import SentenceEmbedder
from eval.benchmarks.halumem.data import load_halumem_jsonl

DEV_FILE = Path("data/halumem-pilot/halumem_medium_user0.jsonl")
EVAL_NAME = "halumem_medium_user3.jsonl"
# Content fingerprints (``user_fingerprint``) of HaluMem's evaluation user: a renamed, re-serialised or re-described
# copy of its file is refused as the file itself is (as eval/benchmarks/conflict/suite.py refuses evaluation suites).
# A test recomputes it from the fetched file.
EVAL_USER_FINGERPRINTS = {"halumem_medium_user3": "b8ff283a3e15aebb9a20579d2b36b1ced9c750844125be891e94c434db0682d4"}


def user_fingerprint(user: dict) -> str:
    """sha256 of a HaluMem user's dialogue (each session's turn contents, in order, canonical JSON): the same for
    any copy of the user whatever its file name, formatting, persona or memory points."""
    dialogue = [[turn.get("content") for turn in session.get("dialogue") or []] for session in user.get("sessions") or []]
    return hashlib.sha256(json.dumps(dialogue, ensure_ascii=False, separators=(",", ":")).encode("utf-8")).hexdigest()


def evaluation_user_refusal(path: Path, dev_file: Path = DEV_FILE) -> str | None:
    """The one-line refusal when ``path`` is, or holds a copy of, HaluMem's evaluation user (by name or by content
    fingerprint); None for development data. An unreadable file is left to the loader's own error."""
    if path.name == EVAL_NAME:
        return f"error: {path} is HaluMem's evaluation user; use the development user ({dev_file})"
    try:
        users = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    known = {fingerprint: name for name, fingerprint in EVAL_USER_FINGERPRINTS.items()}
    found = [known[fp] for user in users if isinstance(user, dict) and (fp := user_fingerprint(user)) in known]
    if found:
        return f"error: {path} holds HaluMem's evaluation user ({found[0]}, by content fingerprint) whatever its name; use the development user ({dev_file})"
    return None


def best_earlier_matches(path: Path, embedder: SentenceEmbedder) -> list[tuple[float, bool, str, str, str]]:
    """(best cosine, verbatim, original memory, nearest earlier gold point, update point id) for every original
    memory of every update point."""
    out = []
    for user in load_halumem_jsonl(path):
        earlier: list[str] = []
        for session in user.sessions:
            for point in session.memory_points:
                if not point.is_searched_update:
                    continue
                for original in point.original_memories:
                    where = f"{user.uuid}:{session.start_time}:{point.index}"
                    if not earlier:
                        out.append((0.0, False, original, "", where))
                        continue
                    sims = embedder.encode(earlier) @ embedder.encode([original])[0]
                    j = int(sims.argmax())
                    out.append((float(sims[j]), original in earlier, original, earlier[j], where))
            earlier += [p.content for p in session.memory_points if not p.is_interference]
    return out


def candidate_ranks(path: Path, embedder: SentenceEmbedder, threshold: float) -> list[tuple[int, float]]:
    """For every update point whose original memory is held (an earlier gold point at cosine >= ``threshold``):
    (rank, cosine) of that earlier point among all earlier points, seen from the update point's own text. This
    is what the save-time conflict check's k-nearest step faces in an oracle run (it queries with the new fact),
    so ranks above ``system.conflict.k`` are misses no judge can repair. An approximation: the run's memory also
    drops superseded facts and holds the gate's queue, and the check adds graph neighbours."""
    out = []
    for user in load_halumem_jsonl(path):
        earlier: list[str] = []
        for session in user.sessions:
            held = embedder.encode(earlier) if earlier else None  # earlier points change only between sessions
            for point in session.memory_points:
                if not point.is_searched_update or held is None:
                    continue
                originals = [embedder.encode([o])[0] for o in point.original_memories]
                targets = {int((held @ o).argmax()) for o in originals}
                targets = {j for j in targets if any(float(held[j] @ o) >= threshold for o in originals)}
                if not targets:
                    continue
                sims = held @ embedder.encode([point.content])[0]
                order = list(np.argsort(-sims, kind="stable"))
                best = min(targets, key=order.index)
                out.append((order.index(best) + 1, float(sims[best])))
            earlier += [p.content for p in session.memory_points if not p.is_interference]
    return out


def nearest_earlier(path: Path, embedder: SentenceEmbedder, threshold: float) -> list[tuple[str, float, bool]]:
    """For every non-interference point with earlier points: (kind, cosine of its nearest earlier point, whether
    that nearest point is one it replaces). kind is ``update`` (an update point whose replaced memory is held: an
    earlier gold point at cosine >= ``threshold`` with one of its original memories), ``update_no_target`` or
    ``other`` (a point that updates nothing). This is what a rule "the new fact revises its nearest held fact when
    their cosine is at least t" (no LLM) would decide on an oracle run, up to the run's superseded facts."""
    out = []
    for user in load_halumem_jsonl(path):
        earlier: list[str] = []
        for session in user.sessions:
            held = embedder.encode(earlier) if earlier else None  # earlier points change only between sessions
            for point in session.memory_points:
                if point.is_interference or held is None:
                    continue
                sims = held @ embedder.encode([point.content])[0]
                nearest = int(sims.argmax())
                if point.is_searched_update:
                    originals = embedder.encode(point.original_memories)
                    targets = set(np.flatnonzero((held @ originals.T).max(axis=1) >= threshold).tolist())
                    kind = "update" if targets else "update_no_target"
                    out.append((kind, float(sims[nearest]), nearest in targets))
                else:
                    out.append(("other", float(sims[nearest]), False))
            earlier += [p.content for p in session.memory_points if not p.is_interference]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--file", type=Path, default=DEV_FILE)
    parser.add_argument("--threshold", type=float, default=0.8)
    parser.add_argument("--show", type=int, default=0, help="print this many pairs spread over the cosine range")
    parser.add_argument("--cache", type=Path, default=None, help="embedding cache (SQLite)")
    parser.add_argument("--candidates", action="store_true",
                        help="also: rank of the replaced memory among earlier points, seen from the update point (conflict.k)")
    parser.add_argument("--duplicate-similarity", type=float, default=0.95, help="conf/system/mosaic.yaml conflict.duplicate_similarity")
    parser.add_argument("--revision", action="store_true",
                        help="also: update points and non-update points whose nearest earlier point is at cosine >= t")
    args = parser.parse_args(argv)
    refusal = evaluation_user_refusal(args.file)
    if refusal:
        print(refusal, file=sys.stderr)
        return 2
    embedder = SentenceEmbedder(cache_path=str(args.cache) if args.cache else None)
    rows = best_earlier_matches(args.file, embedder)
    best = np.array([r[0] for r in rows])
    print(f"{args.file}: {len(rows)} original memories of update points")
    print(f"  verbatim an earlier gold point: {sum(r[1] for r in rows)}")
    print(f"  an earlier gold point at cosine >= {args.threshold}: {int((best >= args.threshold).sum())}")
    points = {r[4] for r in rows}
    linkable = {r[4] for r in rows if r[0] >= args.threshold}
    print(f"update points: {len(points)}; with an original memory that is an earlier gold point at >= {args.threshold}: {len(linkable)}")
    print("  best cosine percentiles 10/25/50/75/90: " + " / ".join(f"{v:.2f}" for v in np.percentile(best, [10, 25, 50, 75, 90])))
    ordered = sorted(rows)
    for row in ordered[:: max(1, len(ordered) // args.show)] if args.show else []:
        print(f"  {row[0]:.3f} | {row[2][:90]} || {row[3][:90]}")
    if args.candidates:
        ranks = candidate_ranks(args.file, embedder, args.threshold)
        cut = ", ".join(f"<= {k}: {sum(r <= k for r, _ in ranks)}" for k in (1, 3, 5, 10, 20))
        print(f"update points with the replaced memory held: {len(ranks)}; its rank from the update point's text {cut}")
        print(f"  of them at cosine >= {args.duplicate_similarity} (conflict.duplicate_similarity: taken for a restatement, "
              f"no judge call): {sum(c >= args.duplicate_similarity for _, c in ranks)}; below conflict.min_similarity 0.2: "
              f"{sum(c < 0.2 for _, c in ranks)}")
        print("  its cosine to the update point, percentiles 10/25/50/75/90: "
              + " / ".join(f"{v:.2f}" for v in np.percentile([c for _, c in ranks], [10, 25, 50, 75, 90])))
    if args.revision:
        rows = nearest_earlier(args.file, embedder, args.threshold)
        kinds = {k: sum(r[0] == k for r in rows) for k in ("update", "update_no_target", "other")}
        print(f"points with earlier points: {len(rows)}; update with the replaced memory held {kinds['update']}, "
              f"update with nothing held {kinds['update_no_target']}, no update {kinds['other']}")
        print("  t     | update: nearest is the replaced one / another | update, nothing held | no update (false alarms)")
        for t in (0.5, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9):
            band = [r for r in rows if t <= r[1] < args.duplicate_similarity]
            print(f"  {t:.2f}  | {sum(r[0] == 'update' and r[2] for r in band):3d} / {sum(r[0] == 'update' and not r[2] for r in band):3d}"
                  f"{'':28s}| {sum(r[0] == 'update_no_target' for r in band):3d}{'':18s}| {sum(r[0] == 'other' for r in band):3d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
