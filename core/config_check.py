"""Check a config block against the constructor it builds, before any work starts.

Hydra's ``instantiate`` reports an unknown key only when the object is called, and for a
``_partial_`` block that may be after a whole ingest; a value of the wrong type is not reported
at all until it breaks something. The constructor's own signature is the schema: every key must
be one of its parameters (unless it takes ``**kwargs``) and every value must fit the parameter's
annotation (checked with pydantic in lax mode, so 5 fits ``float`` and "abc" does not fit ``int``).
Blocks nested in a block (a ``_target_`` of their own) are checked against their own target.

Types say nothing about meaning (``max_entities=0`` is an int): a target may declare
``CONFIG_RANGES``, a table of dotted key -> ``Rule`` (or ``NumberList``, ``Choice``), and every value
of its block is checked against it here, so a range lives in one place and fails, naming the key and
the allowed range, before any work. ``CONFIG_RULES`` (block -> list of problems) holds the rules that
tie several keys together (a mode that needs another switch).
"""

from __future__ import annotations

import inspect
import math
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic.errors import PydanticSchemaGenerationError, PydanticUndefinedAnnotation

from core.api import HarnessError


class ConfigKeyError(HarnessError, ValueError):
    """A config key that the target does not take, or a value that does not fit its type or range."""


@dataclass(frozen=True)
class Rule:
    """A number in [low, high]; ``integer`` refuses 2.5 and "abc"; ``nullable`` allows null; ``also``: other values allowed."""

    low: float | None = None
    high: float | None = None
    integer: bool = True
    nullable: bool = False
    low_open: bool = False  # low itself not allowed (timeouts: > 0)
    high_open: bool = False  # high itself not allowed (PageRank damping: < 1)
    also: tuple[Any, ...] = ()  # values allowed besides the range ("rho", -1 = until stable)
    meaning: str = ""  # what the value is, shown after the range

    def describe(self) -> str:
        kind = "an integer" if self.integer else "a number"
        bounds = []
        if self.low is not None:
            bounds.append(f"{'>' if self.low_open else '>='} {self.low:g}")
        if self.high is not None:
            bounds.append(f"{'<' if self.high_open else '<='} {self.high:g}")
        extra = "".join(f" or {value!r}" for value in self.also) + (" or null" if self.nullable else "")
        return f"{kind}{' ' + ' and '.join(bounds) if bounds else ''}{extra}{f' ({self.meaning})' if self.meaning else ''}"

    def accepts(self, value: Any) -> bool:
        if value is None:
            return self.nullable
        if any(value == other and type(value) is type(other) for other in self.also):
            return True
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if self.integer and not isinstance(value, int):
            return False
        if isinstance(value, float) and not math.isfinite(value):
            return False
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)


@dataclass(frozen=True)
class NumberList:
    """A list of ``length`` numbers, each accepted by ``each``, not all zero when ``not_all_zero`` (weights)."""

    length: int
    each: Rule
    not_all_zero: bool = True
    meaning: str = ""

    def describe(self) -> str:
        zero = ", not all 0" if self.not_all_zero else ""
        return f"a list of {self.length} numbers, each {self.each.describe()}{zero}{f' ({self.meaning})' if self.meaning else ''}"

    def accepts(self, value: Any) -> bool:
        if isinstance(value, str | bytes) or not isinstance(value, Sequence) or len(value) != self.length:
            return False
        if not all(self.each.accepts(item) for item in value):
            return False
        return not self.not_all_zero or any(item != 0 for item in value)


@dataclass(frozen=True)
class Choice:
    """One of a fixed set of values (a mode name)."""

    values: tuple[Any, ...]

    def describe(self) -> str:
        return f"one of {list(self.values)}"

    def accepts(self, value: Any) -> bool:
        return value in self.values


def range_problems(block: Mapping[str, Any], ranges: Mapping[str, Rule | NumberList | Choice], where: str) -> list[str]:
    """Each value of ``block`` (dotted keys into nested blocks) outside its declared range, as ``where.key=value: must be ...``."""
    found = []
    for dotted, rule in ranges.items():
        node: Any = block
        for part in dotted.split("."):
            if not isinstance(node, Mapping) or part not in node:
                break
            node = node[part]
        else:
            if not rule.accepts(node):
                found.append(f"{where}.{dotted}={node!r}: must be {rule.describe()}")
    return found


def check_config(block: Mapping[str, Any], where: str) -> None:
    """Check ``block`` (a plain dict with ``_target_``) and every nested ``_target_`` block in it."""
    from hydra.utils import get_object  # hydra resolves _target_ strings exactly as instantiate will

    try:
        target = get_object(str(block["_target_"]))
    except Exception as err:  # noqa: BLE001 - any import failure is a config error naming the key
        raise ConfigKeyError(f"{where}._target_={block.get('_target_')!r} cannot be imported: {err}") from err
    check_kwargs(target, block, where)
    ranges = getattr(target, "CONFIG_RANGES", None)
    bad = range_problems(block, ranges, where) if ranges else []
    rules = getattr(target, "CONFIG_RULES", None)
    if not bad and callable(rules):  # combinations only once every value is in range
        bad = list(rules(block))
    if bad:
        raise ConfigKeyError("; ".join(bad))


def check_kwargs(target: Callable[..., Any], kwargs: Mapping[str, Any], where: str) -> None:
    """Raise ConfigKeyError naming ``where.key`` for a key ``target`` does not take or a value of the wrong type."""
    signature = inspect.signature(target)
    params = signature.parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    hints = _annotations(target, params)
    for key, value in kwargs.items():
        if key.startswith("_") and key.endswith("_"):  # _target_, _partial_, _convert_, _recursive_
            continue
        if key not in params or params[key].kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            if takes_any:
                continue
            known = sorted(k for k, p in params.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and k != "self")
            raise ConfigKeyError(f"{where}.{key}: unknown key for {_name(target)}; it takes {known}")
        if isinstance(value, Mapping) and "_target_" in value:
            check_config(value, f"{where}.{key}")
            continue
        hint = hints.get(key)
        if hint is None or hint is Any:
            continue
        try:
            TypeAdapter(hint).validate_python(value)
        except ValidationError as err:
            problem = err.errors()[0].get("msg", str(err))
            raise ConfigKeyError(f"{where}.{key}={value!r} does not fit {_name(target)}'s type {_show(hint)}: {problem}") from None
        except (PydanticSchemaGenerationError, PydanticUndefinedAnnotation, TypeError):
            continue  # a type pydantic cannot check (a Protocol, a class it cannot build): the key itself is known


def _annotations(target: Callable[..., Any], params: Mapping[str, inspect.Parameter]) -> dict[str, Any]:
    """Each parameter's annotation as a type; string annotations that do not resolve are left out."""
    func = target.__init__ if inspect.isclass(target) else target  # type: ignore[misc]
    namespace = getattr(inspect.unwrap(func), "__globals__", {})
    out: dict[str, Any] = {}
    for key, param in params.items():
        annotation = param.annotation
        if annotation is inspect.Parameter.empty:
            continue
        if isinstance(annotation, str):
            try:
                annotation = eval(annotation, dict(namespace), vars(typing))  # noqa: S307 - the module's own annotation text
            except Exception:  # noqa: BLE001 - names imported only for type checkers
                continue
        out[key] = annotation
    return out


def _name(target: Callable[..., Any]) -> str:
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', repr(target))}"


def _show(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")
