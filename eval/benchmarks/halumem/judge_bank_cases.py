"""The cases of HaluMem's judge banks (data/judge_banks/halumem_*.jsonl), written by ``python -m scripts.build_judge_banks``.

Cases come from two sources, and each says which: HaluMem-Medium user 0 (the development user; stored as recipes,
resolved from data/halumem-pilot/ at load time by eval/benchmarks/halumem/bank.py, because the data may not be
committed) and the hand-written facts below (invented people, stored as text). Labels follow from how a case is
built (docs/halumem.md, "Judge banks", says which construction gives which label and where that can be wrong).
Never the evaluation user. ``python -m scripts.judge_banks halumem_<judge>`` measures a judge on its bank.
"""

from __future__ import annotations

import random
import re
from typing import Any, Iterator

from eval.benchmarks.halumem.data import load_halumem_jsonl

DEV_FILE = "data/halumem-pilot/halumem_medium_user0.jsonl"  # HaluMem-Medium user 0, the development user
JUDGES = ("halumem_integrity", "halumem_accuracy", "halumem_gold_fields", "halumem_update", "halumem_qa")
PER_LABEL = 45  # each label gets at least this many cases where the sources allow (>= 40 required)
DIALOGUE_CHARS = 1500  # bank dialogues are the session's first lines, to keep a case cheap to ask
SEED = 0

# Invented people and facts: (name, attribute, original value, new value, a wrong new value, a fact of another field)
FACTS: tuple[tuple[str, str, str, str, str, str], ...] = (
    ("Nadia Kowalski", "home city", "Lisbon", "Porto", "Madrid", "Nadia Kowalski plays the cello on weekends."),
    ("Tomas Reyes", "job title", "junior analyst", "senior analyst", "data engineer", "Tomas Reyes is allergic to peanuts."),
    ("Priya Natarajan", "employer", "Helix Labs", "Orbit Health", "Nimbus Bank", "Priya Natarajan owns a grey cat named Pixel."),
    ("Jonas Berg", "monthly rent", "900 euros", "1,150 euros", "1,400 euros", "Jonas Berg runs a half marathon every spring."),
    ("Amara Okafor", "car", "a blue Honda Civic", "a white Toyota Prius", "a red Ford Focus", "Amara Okafor speaks fluent Portuguese."),
    ("Lucas Martin", "gym day", "Monday", "Thursday", "Saturday", "Lucas Martin collects vinyl jazz records."),
    ("Mei Tanaka", "favourite cuisine", "Italian food", "Korean food", "Mexican food", "Mei Tanaka works night shifts at a hospital."),
    ("Oskar Lind", "partner's name", "Freja", "Astrid", "Maja", "Oskar Lind grew up on a farm in Dalarna."),
    ("Sofia Rossi", "commute", "by bus", "by bicycle", "by train", "Sofia Rossi is learning to play chess online."),
    ("Daniel Cohen", "blood pressure medication", "amlodipine 5 mg", "losartan 50 mg", "metoprolol 25 mg", "Daniel Cohen volunteers at a food bank."),
    ("Elena Petrova", "manager", "Mr. Ivanov", "Ms. Sato", "Mr. Keller", "Elena Petrova has two younger brothers."),
    ("Kwame Mensah", "weekly running distance", "10 km", "25 km", "40 km", "Kwame Mensah brews his own ginger beer."),
    ("Ines Duarte", "phone plan", "a 5 GB plan", "an unlimited data plan", "a 20 GB plan", "Ines Duarte paints watercolour landscapes."),
    ("Felix Wagner", "favourite band", "Radiohead", "Arcade Fire", "Coldplay", "Felix Wagner is saving for a trip to Japan."),
    ("Hana Novak", "dentist", "Dr. Horak", "Dr. Vesely", "Dr. Svoboda", "Hana Novak teaches yoga on Sunday mornings."),
    ("Rafael Costa", "work schedule", "9 am to 5 pm", "7 am to 3 pm", "11 am to 7 pm", "Rafael Costa keeps bees in his garden."),
    ("Aisha Rahman", "diet", "vegetarian", "vegan", "pescatarian", "Aisha Rahman is writing a mystery novel."),
    ("Marek Zielinski", "team", "the sales team", "the product team", "the legal team", "Marek Zielinski fixes old motorcycles."),
    ("Chloe Dubois", "savings goal", "5,000 euros", "8,000 euros", "12,000 euros", "Chloe Dubois sings in a community choir."),
    ("Yusuf Demir", "coffee habit", "three cups a day", "one cup a day", "five cups a day", "Yusuf Demir coaches a youth football team."),
    ("Lena Hoffmann", "bedtime", "11 pm", "10 pm", "midnight", "Lena Hoffmann is afraid of flying."),
    ("Carlos Mendoza", "landlord", "Mrs. Ortega", "Mr. Salas", "Mrs. Rivas", "Carlos Mendoza bakes sourdough bread every Friday."),
    ("Freya Olsen", "favourite author", "Agatha Christie", "Ursula K. Le Guin", "Stephen King", "Freya Olsen has a pet tortoise named Otto."),
    ("Ravi Kapoor", "bank", "First Harbor Bank", "Greenleaf Credit Union", "Summit Trust", "Ravi Kapoor plays badminton with his cousins."),
    ("Zoe Clarke", "guitar teacher", "Mr. Evans", "Ms. Patel", "Mr. Brooks", "Zoe Clarke is studying for a pharmacy degree."),
    ("Mateo Silva", "apartment floor", "the second floor", "the sixth floor", "the ninth floor", "Mateo Silva grows chili peppers on his balcony."),
    ("Ingrid Larsen", "swimming pool", "the Nordhavn pool", "the Vesterbro pool", "the Amager pool", "Ingrid Larsen knits scarves for her nieces."),
    ("Samuel Adeyemi", "salary", "42,000 dollars a year", "51,000 dollars a year", "60,000 dollars a year", "Samuel Adeyemi is a fan of Arsenal."),
    ("Julia Nowak", "laptop", "a ThinkPad X1", "a MacBook Air", "a Dell XPS", "Julia Nowak hikes in the Tatra mountains every August."),
    ("Hugo Laurent", "wake-up time", "7:30 am", "6:00 am", "8:45 am", "Hugo Laurent restores antique clocks."),
    ("Nora Fischer", "therapist", "Dr. Brandt", "Dr. Albers", "Dr. Koch", "Nora Fischer is learning Italian for a summer course."),
    ("Ethan Walsh", "running shoes", "Asics Gel-Nimbus", "Brooks Ghost", "Nike Pegasus", "Ethan Walsh volunteers as a museum guide."),
    ("Leila Haddad", "hair colour", "black", "auburn", "blonde", "Leila Haddad plays the oud at family gatherings."),
    ("Viktor Horvath", "internet provider", "Telekom", "Vodafone", "Digi", "Viktor Horvath mentors first-year students."),
    ("Clara Jensen", "weekly budget for groceries", "80 dollars", "120 dollars", "60 dollars", "Clara Jensen fosters rescue dogs."),
    ("Arjun Mehta", "yoga class", "Tuesday evenings", "Saturday mornings", "Wednesday afternoons", "Arjun Mehta designs board games."),
    ("Greta Schulz", "preferred tea", "green tea", "rooibos", "earl grey", "Greta Schulz works as a court interpreter."),
    ("Omar Farouk", "shift", "the night shift", "the morning shift", "the weekend shift", "Omar Farouk is training for a triathlon."),
    ("Paula Romero", "doctor", "Dr. Gil", "Dr. Navarro", "Dr. Campos", "Paula Romero collects postcards from lighthouses."),
    ("Kenji Watanabe", "home country", "Japan", "Canada", "Australia", "Kenji Watanabe photographs street markets."),
    ("Alice Moreau", "rent due date", "the 1st of the month", "the 15th of the month", "the 28th of the month", "Alice Moreau grows tomatoes."),
    ("Bruno Ferreira", "weight", "92 kg", "85 kg", "78 kg", "Bruno Ferreira plays five-a-side football."),
    ("Dana Levi", "favourite film", "Amelie", "Spirited Away", "Casablanca", "Dana Levi repairs bicycles for neighbours."),
    ("Emil Strand", "daughter's school", "Kastanje School", "Birk School", "Ek School", "Emil Strand keeps a sourdough starter named Bob."),
    ("Fatima Zahra", "language course level", "A2", "B1", "C1", "Fatima Zahra runs a small online candle shop."),
    ("Gustav Ek", "cholesterol level", "6.1 mmol/L", "5.2 mmol/L", "4.3 mmol/L", "Gustav Ek sails on the lake every summer."),
    ("Hiro Sato", "piano practice", "30 minutes a day", "an hour a day", "two hours a day", "Hiro Sato is a volunteer firefighter."),
    ("Isla Murray", "allergy medicine", "cetirizine", "loratadine", "fexofenadine", "Isla Murray bakes cakes for birthdays."),
)


def _is(name: str, attr: str, value: str) -> str:
    return f"{name}'s {attr} is {value}."


def _changed(name: str, attr: str, old: str, new: str) -> str:
    return f"{name}'s {attr} changed from {old} to {new}."


def _now(name: str, attr: str, old: str, new: str) -> str:
    """The change in other words: everything the changed-from-to statement says."""
    return f"{name}'s {attr} is now {new}; it used to be {old}."


def _others(i: int, rng: random.Random, n: int = 3) -> list[str]:
    """Unrelated memories (other invented people) to sit beside the ones a case is about."""
    picks = rng.sample([j for j in range(len(FACTS)) if j != i], n)
    return [FACTS[j][5] for j in picks]


def _shuffled(items: list[Any], rng: random.Random) -> list[Any]:
    items = list(items)
    rng.shuffle(items)
    return items


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if len(w) > 3} - {"martin", "mark", "marks"}


# ----------------------------------------------------------------------------- cases per judge
def _dev_points(user: Any) -> list[tuple[int, Any]]:
    return [(s, p) for s, sess in enumerate(user.sessions) if not sess.is_generated_qa_session for p in sess.memory_points]


def _unrelated(user: Any, s: int, text: str, rng: random.Random, n: int) -> list[list[int]]:
    """References to ``n`` plain gold points at least five sessions from ``s`` sharing no content word with ``text``."""
    pool = [[t, p.index] for t, p in _dev_points(user)
            if abs(t - s) >= 5 and not p.is_interference and not p.is_searched_update and not (_words(p.content) & _words(text))]  # fmt: skip
    return rng.sample(pool, min(n, len(pool)))


def integrity_cases(user: Any, rng: random.Random) -> Iterator[dict[str, Any]]:
    plain = [(s, p) for s, p in _dev_points(user) if not p.is_interference and not p.is_searched_update and len(p.content.split()) >= 10]
    rng.shuffle(plain)
    for k, (s, p) in enumerate(plain[: 3 * PER_LABEL]):
        label = ("2", "1", "0")[k % 3]
        peers = [[s, q.index] for q in user.sessions[s].memory_points if q.index != p.index and not q.is_interference][:4]
        if label == "0":  # the point is absent: memories from far-away sessions only
            stored: list[Any] = [{"point": ref} for ref in _unrelated(user, s, p.content, rng, 5)]
            how = "stored: five unrelated points of far sessions"
        else:
            me: Any = {"point": [s, p.index]} if label == "2" else {"first_words": [{"point": [s, p.index]}, 0.5]}
            stored = [{"point": ref} for ref in _unrelated(user, s, p.content, rng, 2)] + [me]
            how = "stored: the point itself" if label == "2" else "stored: the first half of the point's words"
        yield {"id": f"integrity-u0-s{s}-p{p.index}", "source": f"halumem user 0 session {s} point {p.index}; {how}", "label": label,
               "inputs": {"stored": _shuffled(stored, rng), "expected_point": {"point": [s, p.index]}}}
    for i, (name, attr, old, new, _wrong, other) in enumerate(FACTS):
        target = _changed(name, attr, old, new)
        cases = {"2": [_now(name, attr, old, new), other], "1": [f"{name}'s {attr} changed recently.", other], "0": [other, *_others(i, rng, 2)]}
        for label, stored in cases.items():
            yield {"id": f"integrity-hw{i}-{label}", "source": "hand-written", "label": label,
                   "inputs": {"stored": _shuffled(stored, rng), "expected_point": target}}


def accuracy_cases(user: Any, rng: random.Random) -> Iterator[dict[str, Any]]:
    for s, sess in enumerate(user.sessions):
        if sess.is_generated_qa_session:
            continue
        gold = [p for p in sess.memory_points if not p.is_interference]
        if len(gold) < 3:
            continue
        refs = [{"point": [s, p.index]} for p in gold]
        for k, p in enumerate(gold[:6]):
            label = ("2", "1", "0")[(s + k) % 3]
            far = _unrelated(user, s, " ".join(q.content for q in gold), rng, 1)
            if not far:
                continue
            candidate: Any = ({"point": [s, p.index]} if label == "2" else {"also": [{"point": [s, p.index]}, {"point": far[0]}]} if label == "1"
                              else {"point": far[0]})  # fmt: skip
            how = {"2": "a gold point of the session", "1": "a gold point joined with a point of a far session",
                   "0": "a point of a far session sharing no content word"}[label]
            yield {"id": f"accuracy-u0-s{s}-p{p.index}", "source": f"halumem user 0 session {s}; candidate: {how}", "label": label,
                   "inputs": {"dialogue": {"dialogue": [s, DIALOGUE_CHARS]}, "gold_points": refs, "candidate": candidate}}
    yield from accuracy_hand_written(rng)


def accuracy_hand_written(rng: random.Random) -> Iterator[dict[str, Any]]:
    for i, (name, attr, old, new, wrong, other) in enumerate(FACTS):
        dialogue = (f"[Mar 03, 2025, 10:00:00] user: Quick update: my {attr} is no longer {old}, it is {new} now.\n"
                    f"[Mar 03, 2025, 10:00:20] assistant: Thanks, I have noted that your {attr} is now {new}.")
        gold = [_changed(name, attr, old, new)]
        for label, candidate in {"2": _is(name, attr, new), "1": f"{_is(name, attr, new)} Also, {other}",
                                 "0": _is(name, attr, wrong) if i % 2 else other}.items():
            yield {"id": f"accuracy-hw{i}-{label}", "source": "hand-written", "label": label,
                   "inputs": {"dialogue": dialogue, "gold_points": gold, "candidate": candidate}}


def gold_fields_cases(user: Any, rng: random.Random) -> Iterator[dict[str, Any]]:
    for i, (name, attr, old, new, wrong, other) in enumerate(FACTS):
        gold = [_is(name, attr, old), *_others(i, rng, 2)]
        yield {"id": f"fields-hw{i}-same-field", "source": "hand-written; candidate: the gold field with another value", "label": "true",
               "inputs": {"gold_points": _shuffled(gold, rng), "candidate": _is(name, attr, wrong)}}
        yield {"id": f"fields-hw{i}-new-field", "source": "hand-written; candidate: a field no gold point covers", "label": "false",
               "inputs": {"gold_points": _shuffled(gold, rng), "candidate": other}}
    for s, sess in enumerate(user.sessions[:12]):
        gold = [p for p in sess.memory_points if not p.is_interference]
        if len(gold) < 3:
            continue
        refs = [{"point": [s, p.index]} for p in gold]
        yield {"id": f"fields-u0-s{s}-gold", "source": f"halumem user 0 session {s}; candidate: one of the gold points", "label": "true",
               "inputs": {"gold_points": refs, "candidate": {"point": [s, gold[s % len(gold)].index]}}}


def update_cases(user: Any, rng: random.Random) -> Iterator[dict[str, Any]]:
    ups = [(s, p) for s, p in _dev_points(user) if p.is_searched_update]
    for k, (s, p) in enumerate(ups):
        target, originals = {"point": [s, p.index]}, {"originals": [s, p.index]}
        noise = [{"point": ref} for ref in _unrelated(user, s, p.content, rng, 3)]
        label = ("Correct", "Other", "Omission")[k % 3]
        returned: list[Any] = {"Correct": [target] if k % 2 else [target, {"outdated": {"originals": [s, p.index]}}],
                               "Other": [target, originals], "Omission": [originals]}[label]  # fmt: skip
        how = {"Correct": "the new version, the original absent or marked (outdated)", "Other": "the new version and the unmarked original",
               "Omission": "only the original"}[label]
        yield {"id": f"update-u0-s{s}-p{p.index}", "source": f"halumem user 0 session {s} update point {p.index}; returned: {how}", "label": label,
               "inputs": {"returned": _shuffled([*returned, *noise], rng), "target": target, "original": originals}}
    for i, (name, attr, old, new, wrong, other) in enumerate(FACTS):
        target, original = _changed(name, attr, old, new), _is(name, attr, old)
        noise = [other, *_others(i, rng, 2)]
        for label, returned in {
            "Correct": [_now(name, attr, old, new) if i % 2 else target, *([f"(outdated) {original}"] if i % 3 == 0 else [])],
            "Other": [_now(name, attr, old, new) if i % 2 else target, original],
            "Omission": [original] if i % 2 else [],
            "Hallucination": [_is(name, attr, wrong)],
        }.items():
            yield {"id": f"update-hw{i}-{label.lower()}", "source": "hand-written", "label": label,
                   "inputs": {"returned": _shuffled([*returned, *noise], rng), "target": target, "original": [original]}}


_DONT_KNOW = ("I don't know.", "I have no memory of that.", "There is no information about that in my memory.")


def qa_cases(user: Any, rng: random.Random) -> Iterator[dict[str, Any]]:
    questions = [(s, q, x) for s, sess in enumerate(user.sessions) for q, x in enumerate(sess.questions)]
    answers = [(s, q) for s, q, x in questions if x.evidence]
    for k, (s, q, x) in enumerate(questions):
        ref = {"question": [s, q, "question"]}, {"question": [s, q, "answer"]}, {"question": [s, q, "evidence"]}
        unknown = not x.evidence
        other = answers[(answers.index((s, q)) + len(answers) // 2) % len(answers)] if not unknown else answers[k % len(answers)]
        wrong = {"question": [*other, "answer"]}
        if unknown:  # the reference says it is unknown: saying so is Correct, a definite answer a Hallucination
            cases = {"Correct": _DONT_KNOW[k % 3], "Hallucination": wrong}
        else:
            cases = {"Correct": ref[1], "Omission": _DONT_KNOW[k % 3], "Hallucination": wrong}
        for label, response in cases.items():
            how = {"Correct": "the reference answer" if not unknown else "says it does not know",
                   "Omission": "says it does not know", "Hallucination": "the answer of another question"}[label]
            yield {"id": f"qa-u0-s{s}-q{q}-{label.lower()}", "source": f"halumem user 0 session {s} question {q}; response: {how}",
                   "label": label, "inputs": {"question": ref[0], "reference": ref[1], "key_points": ref[2], "response": response}}
    for i, (name, attr, old, new, wrong, _other) in enumerate(FACTS):
        points = [_changed(name, attr, old, new)]
        question = f"What is {name}'s {attr} now?"
        for label, response in {"Correct": f"It is {new}.", "Hallucination": f"It is {wrong}.", "Omission": _DONT_KNOW[i % 3]}.items():
            yield {"id": f"qa-hw{i}-{label.lower()}", "source": "hand-written", "label": label,
                   "inputs": {"question": question, "reference": new, "key_points": points, "response": response}}


BUILDERS = {"halumem_integrity": integrity_cases, "halumem_accuracy": accuracy_cases, "halumem_gold_fields": gold_fields_cases,
            "halumem_update": update_cases, "halumem_qa": qa_cases}


def bank_cases(dev_file: str = DEV_FILE) -> dict[str, list[dict[str, Any]]]:
    """Every HaluMem bank's cases (judge name -> cases), the same on every call (seeded per judge)."""
    user = load_halumem_jsonl(dev_file)[0]
    out = {}
    for judge, build in BUILDERS.items():
        cases = list(build(user, random.Random(f"{SEED}:{judge}")))
        if len({c["id"] for c in cases}) != len(cases):
            raise ValueError(f"{judge}: two bank cases share an id; give the builder's ids another part")
        out[judge] = cases
    return out
