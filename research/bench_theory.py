"""Checks of the paper's two formal claims on seeded synthetic data (no LLM), side by side in one run.

1. Coverage-greedy clarification targeting is (1 - 1/e)-optimal (mosaic/clarify.py). Belief
   states are drawn at random: each entity gets 2-4 candidate values with Dirichlet(0.7) beliefs
   and rho ~ U(0.3, 0.9); the gate's rule (H <= delta and rho >= rho_min, delta 0.8, rho_min 0.6)
   decides which are settled, and the rest form the frontier (the queue). Two coverage families:
   ``slots``: C(v) from mosaic.clarify.settled_by (entities of one subject+attribute slot, with
   attributes built from overlapping words so slots overlap), exactly what MOSAIC uses;
   ``random_sets``: C(v) = v plus a random subset of the frontier (general weighted coverage, where
   greedy can really fall short of the optimum). On each instance greedy, the exact optimum
   (exhaustive over all subsets of size b), the mean of 20 random picks and the top-entropy pick
   are compared; the worst greedy/optimum ratio is reported against 1 - 1/e = 0.632.
2. NCS converges within L rounds (mosaic/scoring.py). Layered DAGs (prerequisite graph G_P only)
   of depth L; each update adds a source node with edges into the top layer; the depth of the
   push cascade (NodeScorer.stats["last_push_rounds"], 1 = the seed's own push) is compared with
   L + 1, at the default push_epsilon and at 1e-12 (where the residual dies only at the sinks).
   Cost per update (ms, pushes) against |V| at fixed depth; and, for contrast, the cascade depth
   on the association graph G_A, which has cycles and no L.

Usage: ``python -m research.bench_theory [--quick] [--out results/bench]`` (writes theory.json and two PNGs).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import platform
import random
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import networkx as nx
import numpy as np


from mosaic.clarify import coverage, entity_weight, greedy_targets, settled_by
from mosaic.entity import Entity
from mosaic.gate import ClarificationItem, entropy
from mosaic.scoring import NodeScorer

BOUND = 1 - 1 / math.e
WORDS = ["dog", "cat", "car", "job", "home", "city"]


# ---- 1. coverage --------------------------------------------------------------------------------
def frontier(rng: random.Random, n_entities: int, delta: float = 0.8, rho_min: float = 0.6) -> tuple[list[ClarificationItem], int]:
    """Random belief states; returns the queued ones (as the gate would hold them) and how many were settled."""
    queue, settled = [], 0
    np_rng = np.random.default_rng(rng.randrange(2**32))
    for i in range(n_entities):
        k = rng.randint(2, 4)
        probs = np_rng.dirichlet([0.7] * k)
        belief = {f"v{j}": float(p) for j, p in enumerate(probs)}
        h = entropy(belief)
        rho = rng.uniform(0.3, 0.9)
        if h <= delta and rho >= rho_min:
            settled += 1
            continue
        start = rng.randrange(len(WORDS))
        attribute = " ".join(WORDS[start: start + rng.randint(1, 2)])
        entity = Entity(f"e{i}", f"x {attribute}", "persona", subject=rng.choice(["ana", "bo"]), attribute=attribute,
                        value=max(belief, key=belief.get), belief=belief, status="queued")
        reason = "entropy" if h > delta else "rho"
        queue.append(ClarificationItem(entity, rho, h, reason, f"which {attribute}?"))
    return queue, settled


def random_cover(rng: random.Random, queue: list[ClarificationItem], p: float = 0.25) -> dict[str, list[str]]:
    ids = [q.entity.entity_id for q in queue]
    return {i: [i] + [j for j in ids if j != i and rng.random() < p] for i in ids}


def coverage_instance(rng: random.Random, family: str, n_entities: int, budget: int) -> dict | None:
    queue, settled = frontier(rng, n_entities)
    if len(queue) <= budget:
        return None
    if family == "slots":
        cover = settled_by
    else:
        table = random_cover(rng, queue)

        def cover(item, _queue):  # noqa: ANN001, ANN202
            return table[item.entity.entity_id]
    ids = [q.entity.entity_id for q in queue]

    def f(chosen) -> float:  # noqa: ANN001
        return coverage(list(chosen), queue, entity_weight, cover)

    picks = greedy_targets(queue, budget, entity_weight, cover)
    greedy = f([p.entity_id for p in picks])
    optimum = max(f(subset) for subset in itertools.combinations(ids, budget))
    random_mean = float(np.mean([f(rng.sample(ids, budget)) for _ in range(20)]))
    by_entropy = sorted(queue, key=lambda q: -q.entropy)[:budget]
    top_entropy = f([q.entity.entity_id for q in by_entropy])
    return {"family": family, "frontier": len(queue), "settled": settled, "budget": budget, "greedy": greedy, "optimum": optimum,
            "random": random_mean, "top_entropy": top_entropy, "greedy_picks": len(picks),
            "greedy_ratio": greedy / optimum if optimum else 1.0, "random_ratio": random_mean / optimum if optimum else 1.0,
            "top_entropy_ratio": top_entropy / optimum if optimum else 1.0}


def bench_coverage(seed: int, instances: int) -> dict:
    rng = random.Random(seed)
    rows = []
    while len(rows) < instances:
        family = "slots" if len(rows) % 2 == 0 else "random_sets"
        row = coverage_instance(rng, family, n_entities=rng.randint(12, 18), budget=rng.randint(2, 5))
        if row is not None:
            rows.append(row)
    summary = {}
    for family in ("slots", "random_sets", "all"):
        sel = [r for r in rows if family in ("all", r["family"])]
        summary[family] = {
            "instances": len(sel),
            "worst_greedy_ratio": min(r["greedy_ratio"] for r in sel),
            "mean_greedy_ratio": float(np.mean([r["greedy_ratio"] for r in sel])),
            "greedy_optimal_share": float(np.mean([r["greedy_ratio"] >= 1 - 1e-12 for r in sel])),
            "mean_random_ratio": float(np.mean([r["random_ratio"] for r in sel])),
            "worst_random_ratio": min(r["random_ratio"] for r in sel),
            "mean_top_entropy_ratio": float(np.mean([r["top_entropy_ratio"] for r in sel])),
            "worst_top_entropy_ratio": min(r["top_entropy_ratio"] for r in sel),
        }
    return {"bound": BOUND, "bound_holds": summary["all"]["worst_greedy_ratio"] >= BOUND, "summary": summary, "instances": rows}


# ---- 2. NCS rounds vs L ---------------------------------------------------------------------------
class DagGraph:
    """A layered DAG in G_P (edges layer i -> i+1) and an empty G_A: what NodeScorer reads."""

    def __init__(self, depth: int, width: int, seed: int, fan_in: int = 2) -> None:
        self.rng = random.Random(seed)
        self.assoc = nx.Graph()
        self.prereq = nx.DiGraph()
        self.layers = [[f"n{layer}_{i}" for i in range(width)] for layer in range(depth + 1)]
        for layer in self.layers:
            self.prereq.add_nodes_from(layer)
        for upper, lower in zip(self.layers, self.layers[1:]):
            for node in lower:
                for parent in self.rng.sample(upper, min(fan_in, len(upper))):
                    self.prereq.add_edge(parent, node)
        self.new = 0

    def entity(self, entity_id: str) -> SimpleNamespace:
        return SimpleNamespace(importance=0.5)

    def add_source(self, links: int = 2) -> set[str]:
        node = f"s{self.new}"
        self.new += 1
        targets = self.rng.sample(self.layers[0], min(links, len(self.layers[0])))
        for target in targets:
            self.prereq.add_edge(node, target)
        return {node, *targets}


def ncs_rounds(depths: list[int], width: int, updates: int, seed: int) -> list[dict]:
    rows = []
    for depth in depths:
        for epsilon in (0.01, 1e-12):
            graph = DagGraph(depth, width, seed)
            scorer = NodeScorer(ncs=True, refresh_every=0, push_epsilon=epsilon)
            scorer.on_write(graph, None, set())
            rounds, longest = [], []
            for _ in range(updates):
                changed = graph.add_source()
                scorer.on_write(graph, None, changed)
                rounds.append(scorer.stats["last_push_rounds"])
                new = next(n for n in changed if n.startswith("s"))
                longest.append(max(nx.single_source_shortest_path_length(graph.prereq, new).values()))  # layered: shortest = longest
            L = nx.dag_longest_path_length(graph.prereq)
            rows.append({"depth": depth, "L": L, "push_epsilon": epsilon, "max_push_rounds": max(rounds), "mean_push_rounds": float(np.mean(rounds)),
                         "max_path_from_update": max(longest), "within_L_plus_1": max(rounds) <= L + 1})
    return rows


def ncs_cost(sizes: list[int], depth: int, updates: int, seed: int) -> list[dict]:
    rows = []
    for n in sizes:
        graph = DagGraph(depth, max(1, n // (depth + 1)), seed)
        scorer = NodeScorer(ncs=True, refresh_every=0)
        started = time.perf_counter()
        scorer.on_write(graph, None, set())
        init_s = time.perf_counter() - started
        times, pushes = [], []
        for _ in range(updates):
            changed = graph.add_source()
            before = scorer.stats["pushes_total"]
            started = time.perf_counter()
            scorer.on_write(graph, None, changed)
            times.append(time.perf_counter() - started)
            pushes.append(scorer.stats["pushes_total"] - before)
        rows.append({"n_nodes": graph.prereq.number_of_nodes(), "depth": depth, "L": nx.dag_longest_path_length(graph.prereq),
                     "ms_per_update": 1000 * float(np.mean(times)), "ms_per_update_median": 1000 * float(np.median(times)),
                     "pushes_per_update": float(np.mean(pushes)), "full_recompute_ms": 1000 * init_s})
    return rows


def assoc_rounds(n: int, updates: int, seed: int) -> dict:
    """Contrast: a growing undirected G_A has cycles, so there is no L; the cascade stops on epsilon."""
    rng = random.Random(seed)
    graph = SimpleNamespace(assoc=nx.Graph(), prereq=nx.DiGraph(), entity=lambda _id: SimpleNamespace(importance=0.5))
    for i in range(n):
        graph.assoc.add_node(f"a{i}")
        for _ in range(min(3, i)):
            graph.assoc.add_edge(f"a{i}", f"a{rng.randrange(i)}", weight=1.0)
    out = {}
    for epsilon in (0.01, 1e-4):
        scorer = NodeScorer(ncs=True, refresh_every=0, push_epsilon=epsilon)
        scorer.on_write(graph, None, set())
        rounds = []
        for j in range(updates):
            node = f"b{epsilon}_{j}"
            targets = {f"a{rng.randrange(n)}" for _ in range(3)}
            for t in targets:
                graph.assoc.add_edge(node, t, weight=1.0)
            scorer.on_write(graph, None, {node, *targets})
            rounds.append(scorer.stats["last_push_rounds"])
        out[str(epsilon)] = {"mean_push_rounds": float(np.mean(rounds)), "max_push_rounds": max(rounds)}
    return {"n_nodes": n, "by_push_epsilon": out}


# ---- plots ------------------------------------------------------------------------------------------
def plot(results: dict, out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    rows = results["coverage"]["instances"]
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, (key, label) in enumerate((("greedy_ratio", "greedy"), ("top_entropy_ratio", "top entropy"), ("random_ratio", "random (mean of 20)"))):
        for j, family in enumerate(("slots", "random_sets")):
            values = [r[key] for r in rows if r["family"] == family]
            xs = np.full(len(values), i * 3 + j) + np.random.default_rng(0).uniform(-0.25, 0.25, len(values))
            ax.scatter(xs, values, s=8, alpha=0.5, label=f"{label}, {family}")
    ax.axhline(BOUND, color="red", linestyle="--", label="1 - 1/e")
    ax.set(ylabel="coverage / optimum", xticks=[0.5, 3.5, 6.5], xticklabels=["greedy", "top entropy", "random"], ylim=(0, 1.05),
           title="clarification targeting vs exhaustive optimum")
    ax.legend(fontsize=6, loc="lower left")
    fig.tight_layout()
    fig.savefig(out / "theory_coverage.png", dpi=120)
    written.append(str(out / "theory_coverage.png"))
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for epsilon in (0.01, 1e-12):
        sel = [r for r in results["ncs_rounds"] if r["push_epsilon"] == epsilon]
        axes[0].plot([r["L"] for r in sel], [r["max_push_rounds"] for r in sel], "o-", label=f"max rounds, eps={epsilon:g}")
    ls = [r["L"] for r in results["ncs_rounds"]]
    axes[0].plot(ls, [x + 1 for x in ls], "k--", label="L + 1")
    axes[0].set(xlabel="L (longest path in G_P)", ylabel="push rounds after an update", title="NCS convergence vs L")
    axes[0].legend()
    cost = results["ncs_cost"]
    axes[1].semilogx([r["n_nodes"] for r in cost], [r["ms_per_update_median"] for r in cost], "o-", label="ms per update (median)")
    axes[1].semilogx([r["n_nodes"] for r in cost], [r["pushes_per_update"] / 100 for r in cost], "s--", label="pushes per update / 100")
    axes[1].set(xlabel="|V|", title=f"cost per update at depth {cost[0]['depth']}")
    axes[1].legend()
    fig.tight_layout()
    fig.savefig(out / "theory_ncs.png", dpi=120)
    written.append(str(out / "theory_ncs.png"))
    plt.close(fig)
    return written


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="seconds; for the unit test")
    parser.add_argument("--out", default="results/bench")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    quick = args.quick
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    results: dict = {
        "schema_version": 1,
        "mode": "quick" if quick else "full",
        "command": " ".join([os.path.basename(sys.executable), *sys.argv]) if argv is None else f"main({argv})",
        "seed": args.seed,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "data": __doc__.split("\n\n")[1] + "\n\n" + __doc__.split("\n\n")[2],
    }
    results["coverage"] = bench_coverage(args.seed, instances=10 if quick else 150)
    print(json.dumps(results["coverage"]["summary"]), flush=True)
    depths = [2, 4] if quick else [2, 4, 8, 16, 32, 64]
    results["ncs_rounds"] = ncs_rounds(depths, width=20 if quick else 50, updates=5 if quick else 20, seed=args.seed)
    print(json.dumps(results["ncs_rounds"]), flush=True)
    sizes = [300, 1000] if quick else [1000, 10_000, 100_000]
    results["ncs_cost"] = ncs_cost(sizes, depth=8, updates=10 if quick else 50, seed=args.seed)
    print(json.dumps(results["ncs_cost"]), flush=True)
    results["assoc_rounds_contrast"] = assoc_rounds(300 if quick else 5000, updates=5 if quick else 30, seed=args.seed)
    print(json.dumps(results["assoc_rounds_contrast"]), flush=True)
    results["elapsed_s"] = time.perf_counter() - started
    results["plots"] = plot(results, out)
    path = out / "theory.json"
    path.write_text(json.dumps(results, indent=2))
    print(path)
    return results


if __name__ == "__main__":
    main()
