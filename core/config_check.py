"""Check a config block against the constructor it builds, before any work starts.

Hydra's ``instantiate`` reports an unknown key only when the object is called, and for a
``_partial_`` block that may be after a whole ingest; a value of the wrong type is not reported
at all until it breaks something. The constructor's own signature is the schema: every key must
be one of its parameters (unless it takes ``**kwargs``) and every value must fit the parameter's
annotation (checked with pydantic in lax mode, so 5 fits ``float`` and "abc" does not fit ``int``).
Blocks nested in a block (a ``_target_`` of their own) are checked against their own target.

Types say nothing about meaning (``max_entities=0`` is an int), so a parameter's type carries its range too
(``max_entities: Count``, pydantic's ``Annotated[int, Field(ge=1)]``; the aliases below name the common ones): the
signature is the one place a range lives, and a value outside fails here, naming the key and the range, before
any work. ``CONFIG_RULES`` (block -> list of problems) holds the rules that tie several keys together (a mode
that needs another switch).
"""

from __future__ import annotations

import inspect
import math
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AfterValidator, Field, TypeAdapter, ValidationError
from pydantic.errors import PydanticSchemaGenerationError, PydanticUndefinedAnnotation

from core.api import HarnessError


class ConfigKeyError(HarnessError, ValueError):
    """A config key that the target does not take, or a value that does not fit its type or range."""


# eval/config_checks.py's ranges of run-level options (keys no constructor of this harness takes)
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


# Ranges from meaning, as parameter types: a constructor says ``max_entities: Count`` and check_kwargs (pydantic)
# refuses 0 with one line naming the key and the range; the signature is the only place the range lives.
Count = Annotated[int, Field(ge=1)]  # how many of something to use: at least one
Size = Annotated[int, Field(ge=0)]  # a size or count where 0 means none / off
Share = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]  # a probability or a share of a whole
Cosine = Annotated[float, Field(ge=-1, le=1, allow_inf_nan=False)]  # a cosine similarity
Weight = Annotated[float, Field(ge=0, allow_inf_nan=False)]  # a non-negative weight of a mixture
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]  # a tolerance or scale that must not be 0


def _not_all_zero(weights: tuple[float, ...]) -> tuple[float, ...]:
    if not any(weights):
        raise ValueError("not all 0")
    return weights


Weights3 = Annotated[tuple[Weight, Weight, Weight], AfterValidator(_not_all_zero)]  # three mixture weights, not all 0


def check_config(block: Mapping[str, Any], where: str) -> None:
    """Check ``block`` (a plain dict with ``_target_``) and every nested ``_target_`` block in it."""
    from hydra.utils import get_object  # hydra resolves _target_ strings exactly as instantiate will

    try:
        target = get_object(str(block["_target_"]))
    except Exception as err:  # noqa: BLE001 - any import failure is a config error naming the key
        raise ConfigKeyError(f"{where}._target_={block.get('_target_')!r} cannot be imported: {err}") from err
    check_kwargs(target, block, where)
    rules = getattr(target, "CONFIG_RULES", None)
    bad = list(rules(block)) if callable(rules) else []  # combinations, once every value fits its type and range
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
            errors = err.errors()
            problem = "; ".join(dict.fromkeys(str(e.get("msg", "")) for e in errors)) or str(err)
            inner = _inner_key(value, errors)
            if inner is not None:  # a field of a nested mapping (system.retry.attempts): name it, not the whole block
                raise ConfigKeyError(f"{where}.{key}.{inner}={value.get(inner)!r}: {problem} ({_name(target)}'s {key}: {_show(hint)})") from None
            raise ConfigKeyError(f"{where}.{key}={value!r}: must be {_show(hint)} ({_name(target)}; {problem})") from None
        except (PydanticSchemaGenerationError, PydanticUndefinedAnnotation, TypeError):
            continue  # a type pydantic cannot check (a Protocol, a class it cannot build): the key itself is known


def _inner_key(value: Any, errors: list[Any]) -> str | None:
    """The key of ``value`` (a mapping) that pydantic's first error points at, if any."""
    if not isinstance(value, Mapping):
        return None
    for error in errors:
        for part in error.get("loc", ()):
            if isinstance(part, str) and part in value:
                return part
    return None


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


_BOUNDS = (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"))


def _show(hint: Any) -> str:
    """A type as a reader writes it: ``int >= 1``, ``'rho' or float >= 0 and <= 1``, ``list of 3 x float >= 0``."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        bounds = []
        for meta in args[1:]:
            for item in [meta, *getattr(meta, "metadata", [])]:
                bounds += [f"{sign} {getattr(item, name):g}" for name, sign in _BOUNDS if isinstance(getattr(item, name, None), int | float)]
        return _show(args[0]) + (" " + " and ".join(dict.fromkeys(bounds)) if bounds else "")
    if origin in (typing.Union, types.UnionType):
        return " or ".join("null" if arg is type(None) else _show(arg) for arg in args)
    if origin is typing.Literal:
        return " or ".join(repr(arg) for arg in args)
    if origin is tuple and args and Ellipsis not in args:
        return f"a list of {len(args)} x {_show(args[0])}" if len(set(args)) == 1 else f"a list of ({', '.join(map(_show, args))})"
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")
