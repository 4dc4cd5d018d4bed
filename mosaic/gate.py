"""Confidence gate and per-entity beliefs (MOSAIC mechanism 3).

An extracted entity is committed only when its confidence rho (from directness, consistency
and specificity) reaches ``rho_min`` and its belief over candidate values is settled enough
(Shannon entropy <= ``delta`` bits). Otherwise it waits in an inspectable clarification queue
with a targeted question, instead of silently entering memory.

Beliefs live on a *slot* (subject + attribute; core.quantities decides what counts as the same
slot and the same value): the candidates are the values held for that
slot plus the new value. The update is Bayes' rule b(t+1)(v) ∝ b(t)(v) · L(v), where the
likelihood L mixes a rule-based match (does v equal the new value?) with an LLM assessment
(purpose="belief"). The LLM is asked only when there really are competing values.

A slot is single-valued by construction, but many persona attributes are not (a person has several
hobbies, friends and feelings at once): on a whole LoCoMo conversation the belief superseded "likes
painting" with "loves pottery" and queued dozens of compatible facts on entropy. With
``exclusivity_check`` the same belief call first says whether the values exclude each other; when it
says they do not, they do not compete (consistency 1, no belief over them, nothing superseded).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import Field

from core.config_check import Count, Share, Weights3
from core.llm import LLMClient, LLMError, LLMOutputError
from core.tally import Tally
from mosaic.entity import Entity, evidence_strength
from core.quantities import same_slot, values_match

log = logging.getLogger(__name__)

def confidence(directness: float, consistency: float, specificity: float, weights: tuple[float, float, float]) -> float:
    """rho: the weighted mean of the three factors, each in [0, 1]."""
    factors = (directness, consistency, specificity)
    for name, value in zip(("directness", "consistency", "specificity"), factors):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"confidence factor {name}={value} is outside [0, 1]")
    total = sum(weights)
    if total <= 0 or any(w < 0 for w in weights):
        raise ValueError(f"confidence weights {weights} must be non-negative and not all zero")
    return sum(w * f for w, f in zip(weights, factors)) / total


def consistency_with(value: str, held_values: list[str]) -> float:
    """Agreement of ``value`` with the values already held for its slot: 1 all agree, 0 all disagree.

    With nothing held there is nothing to disagree with, so the factor is 1.
    """
    if not held_values:
        return 1.0
    agree = sum(values_match(value, held) for held in held_values)
    disagree = len(held_values) - agree
    return 0.5 + 0.5 * (agree - disagree) / (agree + disagree)


def entropy(belief: dict[str, float]) -> float:
    """Shannon entropy in bits of a (normalised) belief."""
    return -sum(p * math.log2(p) for p in belief.values() if p > 0)


def normalised(weights: dict[str, float]) -> dict[str, float]:
    total = sum(weights.values())
    if total <= 0:
        raise ValueError(f"cannot normalise a belief with total mass {total}")
    return {k: v / total for k, v in weights.items()}


def bayes_update(prior: dict[str, float], likelihood: dict[str, float]) -> dict[str, float]:
    """b(t+1)(v) ∝ b(t)(v) · L(v) over the union of candidates (a candidate missing from either side has 0)."""
    keys = list(dict.fromkeys([*prior, *likelihood]))
    return normalised({k: prior.get(k, 0.0) * likelihood.get(k, 0.0) for k in keys})


def smoothed_prior(held: dict[str, float], new_value: str, new_value_prior: float) -> dict[str, float]:
    """Prior over held values plus a newcomer: the held belief keeps 1 - eps, the new value gets eps."""
    if not held:
        return {new_value: 1.0}
    if new_value in held:
        return normalised(dict(held))
    held = normalised(held)
    return {**{k: (1.0 - new_value_prior) * p for k, p in held.items()}, new_value: new_value_prior}


@dataclass
class GateDecision:
    """Outcome of gating one entity; ``question`` is the targeted clarification when not committed."""

    commit: bool
    rho: float
    entropy: float
    belief: dict[str, float]
    reason: str
    question: str = ""
    competing: list[str] = field(default_factory=list)  # ids of held entities whose values compete


@dataclass
class ClarificationItem:
    entity: Entity
    rho: float
    entropy: float
    reason: str
    question: str

    def to_dict(self) -> dict[str, Any]:
        return {"entity": self.entity.to_dict(), "rho": self.rho, "entropy": self.entropy, "reason": self.reason, "question": self.question}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ClarificationItem":
        return cls(Entity.from_dict(data["entity"]), float(data["rho"]), float(data["entropy"]), str(data["reason"]), str(data["question"]))


_BELIEF_SYSTEM = (
    "You judge which value of a fact is true now. Given earlier values and a new statement, "
    "give each candidate a probability in [0,1] that it is the current true value. Reply with JSON."
)


_EXCLUSIVE_FIELD = (
    "First set exclusive: true when only one of the values can be true at a time (an amount, the city someone "
    "lives in, an employer), false when they can all be true together (several hobbies, friends, feelings or "
    "activities). "
)


@dataclass
class BeliefAssessment:
    """The LLM's answer to one belief call: a likelihood per candidate, and (when asked) whether the values exclude each other."""

    likelihood: dict[str, float]
    exclusive: bool | None = None


class ConfidenceGate:
    """Scores, believes and gates entities; holds nothing itself (the queue lives with the memory).

    ``weights`` are (directness, consistency, specificity); ``rule_weight`` mixes the rule-based
    likelihood with the LLM's (1 - rule_weight); ``new_value_prior`` is the prior mass a value
    not seen before starts with. ``likelihood_floor`` keeps a single statement from zeroing a value.
    """

    def __init__(
        self,
        llm: LLMClient | None = None,
        enabled: bool = True,
        rho_min: Annotated[float, Field(gt=0, le=1)] = 0.6,  # the confidence a commit needs
        delta: Annotated[float, Field(ge=0)] = 0.8,  # belief entropy in bits
        weights: Weights3 = (0.4, 0.3, 0.3),
        rule_weight: Share = 0.5,
        new_value_prior: Share = 0.5,
        likelihood_floor: Annotated[float, Field(ge=0, le=0.5)] = 0.05,  # a likelihood is kept within [floor, 1 - floor]
        llm_assessment: bool = True,
        max_tokens: Count = 80,
        exclusivity_check: bool = False,
    ) -> None:
        self.llm = llm
        self.enabled = enabled
        self.rho_min = float(rho_min)
        self.delta = float(delta)
        self.weights = tuple(float(w) for w in weights)
        self.rule_weight = float(rule_weight)
        self.new_value_prior = float(new_value_prior)
        self.likelihood_floor = float(likelihood_floor)
        self.llm_assessment = llm_assessment and llm is not None
        self.max_tokens = max_tokens
        self.exclusivity_check = bool(exclusivity_check)
        self.stats = Tally(("assessed", "committed", "queued", "llm_calls", "llm_failures", "not_exclusive"))  # shared by namespaces

    # -- likelihoods -----------------------------------------------------------------
    def reliability(self, entity: Entity) -> float:
        """Evidence strength of one statement under this gate's weights (consistency left out)."""
        w_d, _, w_s = self.weights
        return evidence_strength(entity, w_d, w_s)

    def rule_likelihood(self, candidates: list[str], new_value: str, reliability: float) -> dict[str, float]:
        """L(v) = r when v matches the new value, 1 - r otherwise (r clipped away from 0 and 1)."""
        hi = min(max(reliability, self.likelihood_floor), 1.0 - self.likelihood_floor)
        return {v: hi if values_match(v, new_value) else 1.0 - hi for v in candidates}

    def llm_likelihood(self, entity: Entity, candidates: list[str]) -> BeliefAssessment | None:
        """The LLM's probability per candidate (and, with ``exclusivity_check``, whether the values exclude
        each other); None (counted) when it fails or answers off-schema."""
        assert self.llm is not None
        properties: dict[str, Any] = {}
        if self.exclusivity_check:
            properties["exclusive"] = {"type": "boolean"}  # first, so the model decides it before the numbers
        properties["probabilities"] = {"type": "array", "items": {"type": "number"}, "minItems": len(candidates), "maxItems": len(candidates)}
        schema = {"type": "object", "properties": properties, "required": list(properties)}
        listing = "\n".join(f"{i + 1}. {v}" for i, v in enumerate(candidates))
        user = (
            f"Fact: {entity.subject} / {entity.attribute}\nCandidates:\n{listing}\n"
            f"New statement (said {entity.session_time or 'recently'}): {entity.evidence or entity.text}\n"
            + (_EXCLUSIVE_FIELD + "Then the probabilities, in candidate order." if self.exclusivity_check else "Probabilities, in candidate order:")
        )
        self.stats.add("llm_calls")
        try:
            out = self.llm.chat_json(
                [{"role": "system", "content": _BELIEF_SYSTEM}, {"role": "user", "content": user}],
                schema, max_tokens=self.max_tokens, purpose="belief",
            )
            probs = [float(p) for p in out["probabilities"]]
            exclusive = bool(out["exclusive"]) if self.exclusivity_check else None
        except (LLMOutputError, LLMError, KeyError, TypeError, ValueError) as err:
            self.stats.add("llm_failures")
            log.warning("belief assessment failed for %s: %s", entity.entity_id, err)
            return None
        if len(probs) != len(candidates):
            self.stats.add("llm_failures")
            return None
        likelihood = {v: min(max(p, self.likelihood_floor), 1.0 - self.likelihood_floor) for v, p in zip(candidates, probs)}
        return BeliefAssessment(likelihood, exclusive)

    # -- the gate --------------------------------------------------------------------
    def assess(self, entity: Entity, held: list[Entity]) -> GateDecision:
        """Set ``entity``'s consistency, confidence and belief against ``held`` same-slot entities; decide."""
        self.stats.add("assessed")
        # Events accumulate ("went to X", later "went to Y"); only states (persona, relationship) hold one value.
        competing = [] if entity.type == "event" else [h for h in held if h.type != "event" and same_slot(entity, h)]
        value = entity.value or entity.text
        entity.consistency = consistency_with(value, [h.value for h in competing if h.value])
        entity.confidence = confidence(entity.directness, entity.consistency, entity.specificity, self.weights)  # type: ignore[arg-type]
        held_belief: dict[str, float] = {}
        for h in competing:
            for v, p in (h.belief or {h.value: 1.0}).items():
                key = next((k for k in held_belief if values_match(k, v)), v)
                held_belief[key] = held_belief.get(key, 0.0) + p
        new_key = next((k for k in held_belief if values_match(k, value)), value)
        prior = smoothed_prior(held_belief, new_key, self.new_value_prior)
        if len(prior) > 1:
            candidates = list(prior)
            likelihood = self.rule_likelihood(candidates, value, self.reliability(entity))
            from_llm = self.llm_likelihood(entity, candidates) if self.enabled and self.llm_assessment else None
            if from_llm is not None and from_llm.exclusive is False:
                # compatible values: nothing competes, so the newcomer is consistent and believed outright
                self.stats.add("not_exclusive")
                competing = []
                entity.consistency = 1.0
                entity.confidence = confidence(entity.directness, entity.consistency, entity.specificity, self.weights)  # type: ignore[arg-type]
                belief = {value: 1.0}
            else:
                if from_llm is not None:
                    likelihood = {v: self.rule_weight * likelihood[v] + (1 - self.rule_weight) * from_llm.likelihood[v] for v in candidates}
                belief = bayes_update(prior, likelihood)
        else:
            belief = prior
        entity.belief = {k: round(p, 6) for k, p in belief.items()}
        h = entropy(belief)
        ids = [c.entity_id for c in competing]
        if not self.enabled:
            return GateDecision(True, entity.confidence, h, entity.belief, "gate disabled", competing=ids)
        if entity.confidence < self.rho_min:
            decision = GateDecision(False, entity.confidence, h, entity.belief, f"rho {entity.confidence:.2f} < rho_min {self.rho_min}", question=self.question(entity, competing), competing=ids)
        elif h > self.delta:
            decision = GateDecision(False, entity.confidence, h, entity.belief, f"belief entropy {h:.2f} bits > delta {self.delta}", question=self.question(entity, competing), competing=ids)
        else:
            decision = GateDecision(True, entity.confidence, h, entity.belief, "committed", competing=ids)
        self.stats.add("committed" if decision.commit else "queued")
        return decision

    @staticmethod
    def question(entity: Entity, competing: list[Entity]) -> str:
        """A targeted clarification: name the competing value when there is one."""
        if competing and entity.attribute:
            old = competing[-1]
            return f"Earlier {old.subject or 'you'} said {entity.attribute} was '{old.value}'; is it now '{entity.value}'?"
        return f"Just to confirm: {entity.text}?"
