"""MemoryGraph: G_A links by similarity, G_P dependencies, active-only queries, serialisation."""

from __future__ import annotations

import numpy as np
import pytest

from mosaic.entity import Entity
from mosaic.graph import GraphFormatError, MemoryGraph
from tests.fakes import HashEmbedder


def BowEmbedder() -> HashEmbedder:  # noqa: N802 (the tests build it like a class)
    """Hashed bag of words: texts sharing words get similar unit vectors (fast, deterministic)."""
    return HashEmbedder(dim=384, model_id="bow", token_pattern=r"[a-z0-9]+")


def _e(eid: str, text: str, **kw) -> Entity:
    return Entity(eid, text, kw.pop("type", "persona"), subject=kw.pop("subject", "Ana"), **kw)


@pytest.fixture
def graph() -> MemoryGraph:
    g = MemoryGraph(BowEmbedder(), assoc_threshold=0.4, assoc_top_n=5)
    g.add_entity(_e("dogs", "Ana has two dogs named Max and Bella"))
    g.add_entity(_e("job", "Ana works as a nurse at the city hospital"))
    return g


def test_add_links_similar_entities_and_reports_changed(graph):
    changed = graph.add_entity(_e("dogs2", "Ana has two dogs"))
    assert changed == {"dogs2", "dogs"}
    assert graph.assoc.has_edge("dogs2", "dogs")
    assert not graph.assoc.has_edge("dogs2", "job")
    assert 0.4 <= graph.assoc["dogs2"]["dogs"]["weight"] <= 1.0
    with pytest.raises(ValueError, match="already"):
        graph.add_entity(_e("dogs2", "again"))


def test_nearest_is_cosine_ordered_active_only_and_honours_exclude(graph):
    graph.add_entity(_e("dogs2", "Ana has two dogs"))
    query = graph.embed("how many dogs does Ana have")
    ids = [e.entity_id for e, _ in graph.nearest(query, 3)]
    assert ids[0] in {"dogs", "dogs2"} and ids[-1] == "job"
    sims = [s for _, s in graph.nearest(query, 3)]
    assert sims == sorted(sims, reverse=True)
    assert "dogs" not in [e.entity_id for e, _ in graph.nearest(query, 3, exclude={"dogs"})]
    graph.set_status("dogs2", "superseded")
    assert "dogs2" not in [e.entity_id for e, _ in graph.nearest(query, 3)]
    assert [i for i in graph.matrix()[0]] == ["dogs", "job"]
    assert graph.matrix()[1].shape == (2, 384)


def test_prerequisites_neighbours_and_supersession(graph):
    graph.add_entity(_e("walk", "Ana walked Max and Bella in the park", type="event"))
    assert graph.add_prerequisite("dogs", "walk") == {"dogs", "walk"}
    assert graph.add_prerequisite("dogs", "walk") == set()
    assert {e.entity_id for e in graph.neighbours("walk")} >= {"dogs"}
    graph.add_entity(_e("dogs3", "Ana has three dogs named Max Bella and Luna"))
    graph.transfer_prerequisites("dogs", "dogs3")
    changed = graph.set_status("dogs", "superseded")
    assert "dogs" in changed and "walk" in changed
    assert graph.prereq.has_edge("dogs3", "walk") and "dogs" not in graph.prereq and "dogs" not in graph.assoc
    assert graph.entity("dogs").status == "superseded"
    assert [e.entity_id for e in graph.entities()] == ["job", "walk", "dogs3"]
    assert len(graph.entities(include_inactive=True)) == 4
    with pytest.raises(ValueError, match="superseded"):
        graph.add_prerequisite("dogs", "walk")


def test_remove_entity_drops_edges(graph):
    graph.add_entity(_e("dogs2", "Ana has two dogs"))
    assert graph.remove_entity("dogs2") == {"dogs2", "dogs"}
    assert "dogs2" not in graph and not graph.assoc.has_edge("dogs", "dogs2")
    with pytest.raises(KeyError):
        graph.entity("dogs2")


def test_round_trip_and_validation(graph):
    graph.add_entity(_e("walk", "Ana walked Max and Bella in the park", type="event"))
    graph.add_prerequisite("dogs", "walk")
    graph.set_status("job", "superseded")
    data = graph.to_dict()
    again = MemoryGraph.from_dict(data, BowEmbedder())
    assert [e.to_dict() for e in again.entities(include_inactive=True)] == [e.to_dict() for e in graph.entities(include_inactive=True)]
    assert set(again.prereq.edges()) == set(graph.prereq.edges())
    assert {frozenset(e) for e in again.assoc.edges()} == {frozenset(e) for e in graph.assoc.edges()}
    assert np.array_equal(again.vector("walk"), graph.vector("walk"))
    bad = dict(data, prereq_edges=[["dogs", "nobody"]])
    with pytest.raises(GraphFormatError, match="nobody"):
        MemoryGraph.from_dict(bad, BowEmbedder())
    with pytest.raises(GraphFormatError, match="vector"):
        MemoryGraph.from_dict(dict(data, vectors={}), BowEmbedder())
