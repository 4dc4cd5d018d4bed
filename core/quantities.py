"""Values, units and slots: the one home of the rules MOSAIC uses to compare what entities say.

Three mechanisms need the same answers: the confidence gate (do two values agree? do two
entities fill the same slot?), the conflict check (do two quantities of one kind differ?) and
extraction (how many days is "a few days ago"?). They all read them from here. It sits in core/, not in
mosaic/, because the conflict benchmark's miss analysis ("plausible numbers") parses every system's
probes with it too: one parser for all systems, and eval/ never imports the system under study.

- Numbers: digits, or number words from one table (``NUMBER_WORDS``); quantifiers that say a
  number without a numeral ("both", "a couple") in ``DEFINITE_QUANTIFIERS``, vague ones ("a few",
  "several") in ``VAGUE_QUANTIFIERS`` (only time phrases accept those).
- Units come from pint's registry, not from a hand list: the word after a number is a unit when
  pint knows it as a unit name (singular or plural) or as its exact symbol, and it is not an
  English function word (scikit-learn's stop-word list: pint reads "a" as a year and "in" as an
  inch). Known gap: a prefixed symbol that spells a word still reads as a unit ("1 cat" is a
  centi-technical-atmosphere; "2 cats" is not, a symbol takes no plural s). Currencies are not physical units, so two are defined here (dollar, euro), each its own
  dimension. A quantity's family is its dimensionality ("time", "mass"), or the unit's name for
  dimensionless units ("percent"); values are converted to the family's base unit.
- Slots: two entities fill the same slot when extraction named the same subject and attribute,
  compared loosely (one name inside the other), because a small model words slot names freely.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Protocol

import pint
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

NUMBER_WORDS: dict[str, int] = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "hundred": 100,
}  # fmt: skip
DEFINITE_QUANTIFIERS: dict[str, int] = {"none": 0, "single": 1, "both": 2, "couple": 2}
VAGUE_QUANTIFIERS: dict[str, int] = {"a": 1, "an": 1, "couple of": 2, "few": 3, "a few": 3, "several": 3}


def count_word(word: str, vague: bool = False) -> int | None:
    """The number a word (or digits) stands for; ``vague`` also accepts "a few", "several"."""
    word = " ".join(word.lower().split())
    if word.isdigit():
        return int(word)
    if word in NUMBER_WORDS:
        return NUMBER_WORDS[word]
    if word in DEFINITE_QUANTIFIERS:
        return DEFINITE_QUANTIFIERS[word]
    return VAGUE_QUANTIFIERS.get(word) if vague else None


def count_pattern(vague: bool = False) -> str:
    """A regex alternation of every word ``count_word`` accepts (digits included), longest first."""
    words = [*NUMBER_WORDS, *DEFINITE_QUANTIFIERS, *(VAGUE_QUANTIFIERS if vague else ())]
    return r"\d+|" + "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))


# ----------------------------------------------------------------------------- text values
def normalise(text: str) -> str:
    """Lower-case, alphanumerics only, single spaces: the form values and slot names are compared in."""
    return " ".join(re.sub(r"[^0-9a-z]+", " ", str(text).lower()).split())


def number_in(text: str) -> float | None:
    """The first number in ``text``, digits or a number word; None when there is none."""
    match = re.search(r"\d+(?:\.\d+)?", str(text).replace(",", ""))
    if match:
        return float(match.group())
    for word in normalise(text).split():
        value = count_word(word)
        if value is not None:
            return float(value)
    return None


def values_match(a: str, b: str) -> bool:
    """Rule-based value match: numbers compare as numbers, text by normalised equality or containment."""
    na, nb = normalise(a), normalise(b)
    if not na or not nb:
        return False
    num_a, num_b = number_in(a), number_in(b)
    if num_a is not None and num_b is not None:
        return num_a == num_b
    return na == nb or (len(min(na, nb, key=len)) >= 4 and (na in nb or nb in na))


class Slotted(Protocol):
    subject: str
    attribute: str


def same_slot(a: Slotted, b: Slotted) -> bool:
    """Whether two entities speak about the same subject and attribute (so their values compete)."""
    if not a.attribute or not b.attribute:
        return False
    sa, sb = normalise(a.subject), normalise(b.subject)
    aa, ab = normalise(a.attribute), normalise(b.attribute)
    subject_ok = bool(sa) and (sa == sb or sa in sb.split() or sb in sa.split())
    attribute_ok = aa == ab or (min(len(aa), len(ab)) >= 3 and (aa in ab or ab in aa))
    return subject_ok and attribute_ok


# ----------------------------------------------------------------------------- units
@cache
def unit_registry() -> pint.UnitRegistry:
    """pint's default registry plus the two currencies the harness's texts use."""
    registry = pint.UnitRegistry()
    registry.define("dollar = [currency_dollar]")
    registry.define("euro = [currency_euro]")
    return registry


@lru_cache(maxsize=4096)
def unit_of(token: str) -> tuple[str, float] | None:
    """(family, factor to the family's base unit) when ``token`` names a unit, else None.

    A compound token ("km/h") is a unit when each part is one.
    """
    if not token or token.lower() in ENGLISH_STOP_WORDS:
        return None
    registry = unit_registry()
    parts = token.split("/")
    for part in parts:
        if not _names_a_unit(registry, part):
            return None
    try:
        quantity = registry.Quantity(1.0, token)
        base = quantity.to_base_units()
    except (pint.errors.PintError, ValueError, AttributeError):
        return None
    dims = quantity.dimensionality
    family = str(dims).replace("[", "").replace("]", "") if dims else str(quantity.units)
    return family, float(base.magnitude)


def _names_a_unit(registry: pint.UnitRegistry, token: str) -> bool:
    """pint knows ``token`` as one unit, written as its exact symbol ("kg", "km") or as a name or
    alias, possibly prefixed and plural ("months", "litres", "kilometres"); a symbol with a plural
    s ("cats": centi-at-s) or a prefix joined to a word is not a unit."""
    if token == "%":
        return True
    if not token.isalpha() or token.lower() in ENGLISH_STOP_WORDS:
        return False
    candidates = registry.parse_unit_name(token)
    if len(candidates) != 1:
        return False
    prefix, name, suffix = candidates[0]
    try:
        if not suffix and registry.get_symbol(token) == token:
            return True
        root = (token[: -len(suffix)] if suffix else token).lower()
        if not root.startswith(prefix):
            return False
        rest = root[len(prefix) :]
        return rest != registry.get_symbol(name).lower() and registry.get_name(rest) == name
    except pint.errors.PintError:
        return False


@dataclass(frozen=True)
class Quantity:
    """A number (or a pair written a/b, such as a 3/1 score) with its unit family, in the family's base unit."""

    family: str
    values: tuple[float, ...]
    span: tuple[int, int]


_NUMBER_RE = re.compile(
    r"(?P<dollar>\$\s*)?(?<![\w.])(?P<a>\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(?:\s*/\s*(?P<b>\d+(?:\.\d+)?))?"
    r"(?:[\s-]*(?!(?:st|nd|rd|th)\b)(?P<unit>%|[A-Za-z]+(?:/[A-Za-z]+)?))?"  # 1st, 10th: ordinals, not units
)
_WORD_BEFORE_RE = re.compile(rf"\b({'|'.join(NUMBER_WORDS)})(?=[\s-]+(%|[A-Za-z]+(?:/[A-Za-z]+)?))", re.IGNORECASE)


def _words_to_digits(text: str) -> str:
    """Number words that stand before a unit or count something, as digits ("three months" -> "3 months",
    "two dogs" -> "2 dogs", as "2 dogs" already reads). "zero" and "one" count only before a unit:
    elsewhere they are mostly pronouns ("the one I liked", "one of them")."""

    def digits(match: re.Match[str]) -> str:
        value = NUMBER_WORDS[match.group(1).lower()]
        return str(value) if unit_of(match.group(2)) or value >= 2 else match.group(0)

    return _WORD_BEFORE_RE.sub(digits, text)


def _matches(text: str) -> list[tuple[re.Match[str], tuple[str, float] | None]]:
    """Number matches in ``text`` and the unit each carries (None: a bare number)."""
    return [(m, unit_of(m.group("unit")) if m.group("unit") else None) for m in _NUMBER_RE.finditer(text)]


def _span(match: re.Match[str], unit: tuple[str, float] | None) -> tuple[int, int]:
    return match.span() if unit is not None else (match.start(), match.end("b") if match.group("b") else match.end("a"))


def quantities(text: str) -> list[Quantity]:
    """Numbers with units found in ``text`` ("2.5 kg", "three months", "$1,650", "15%").

    A number without a unit is a "count" (a bare pair "3/4" is a "pair"; 1900-2099 a "year-date").
    Spans index the text with number words written as digits.
    """
    found: list[Quantity] = []
    for match, unit in _matches(_words_to_digits(text)):
        if unit is None and match.group("dollar"):
            unit = unit_of("dollar")
        family, factor = unit if unit is not None else ("count", 1.0)
        if unit is None and match.group("b"):
            family = "pair"
        values = [float(match.group("a").replace(",", ""))]
        if match.group("b"):
            values.append(float(match.group("b")))
        if family == "count" and not match.group("b") and re.fullmatch(r"(19|20)\d\d", match.group("a")):
            family = "year-date"
        found.append(Quantity(family, tuple(v * factor for v in values), _span(match, unit)))
    return found


def mask_numbers(text: str) -> str:
    """The text with every quantity replaced by one placeholder (to compare what is said, not how much)."""
    normal = _words_to_digits(text)
    out, last = [], 0
    for match, unit in _matches(normal):
        start, end = _span(match, unit)
        out.append(normal[last:start] + "#")
        last = end
    return "".join(out) + normal[last:]


def numeric_clash(new_text: str, old_text: str, rel_tol: float = 0.02) -> str | None:
    """Why ``new_text``'s numbers disagree with ``old_text``'s in a shared unit family, or None.

    A value agrees when it equals any held value of its family (so "up to 10 km" agrees with
    "start at 5 km, at most 10 km"); families the two texts do not share are not compared.
    """
    new_q, old_q = quantities(new_text), quantities(old_text)
    shown_new, shown_old = _words_to_digits(new_text), _words_to_digits(old_text)
    for q in new_q:
        held = [o for o in old_q if o.family == q.family and len(o.values) == len(q.values)]
        if not held:
            continue
        # the slack makes the bound inclusive whatever the base unit (4.9% vs 5% at 2% is a match)
        tol = rel_tol * (1 + 1e-9)
        if not any(all(math.isclose(a, b, rel_tol=tol, abs_tol=1e-9) for a, b in zip(q.values, o.values)) for o in held):
            said = shown_new[q.span[0] : q.span[1]].strip()
            shown = ", ".join(shown_old[o.span[0] : o.span[1]].strip() for o in held)
            return f"{said} ({q.family}) does not match the held value(s) {shown}"
    return None
